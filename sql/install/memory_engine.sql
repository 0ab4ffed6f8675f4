-- The memory engine's stats (its calls are the native API's, with p_engine => 'memory').

-- The memory engine's counters, summed over its partitions: keys tracked, how many it can
-- track, the shared memory it uses, keys evicted while still counting, keys freed because
-- they had expired, and consume calls allowed and denied since the server started.
CREATE FUNCTION ratelimit.memory_stats(
    OUT entries bigint,
    OUT capacity bigint,
    OUT shared_bytes bigint,
    OUT evictions bigint,
    OUT expired bigint,
    OUT allowed bigint,
    OUT denied bigint)
RETURNS record
LANGUAGE c VOLATILE PARALLEL SAFE
AS 'MODULE_PATHNAME', 'ratelimit_memory_stats';

CREATE VIEW ratelimit.memory_stats AS
    SELECT * FROM ratelimit.memory_stats();
