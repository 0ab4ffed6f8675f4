-- The memory engine's stats (its calls are the native API's, with p_engine => 'memory').

-- The memory engine's counters, summed over its partitions: keys tracked, how many it can
-- track, the shared memory it uses, keys evicted before they expired, keys freed because they
-- had expired, consume calls allowed and denied since the server started, calls refused for
-- lack of room, partitions whose last look for room found every slot holding a live key, the
-- sliding_window log blocks and how many are in use; with ratelimit.memory_wal, whether its
-- worker runs (NULL without the setting) and the replayed keys the store had no room for.
-- @begin memory_stats
CREATE FUNCTION ratelimit.memory_stats(
    OUT entries bigint,
    OUT capacity bigint,
    OUT shared_bytes bigint,
    OUT evictions bigint,
    OUT expired bigint,
    OUT allowed bigint,
    OUT denied bigint,
    OUT refusals bigint,
    OUT full_partitions bigint,
    OUT log_blocks bigint,
    OUT log_blocks_used bigint,
    OUT wal_worker_running boolean,
    OUT replay_unplaced bigint)
RETURNS record
LANGUAGE c VOLATILE PARALLEL SAFE
AS 'MODULE_PATHNAME', 'ratelimit_memory_store_stats';

CREATE VIEW ratelimit.memory_stats AS
    SELECT * FROM ratelimit.memory_stats();
-- @end memory_stats

-- The store per database: its keys, the most it may hold (ratelimit.memory_database_share),
-- and the calls refused and keys evicted in it. A caller without pg_read_all_stats sees its own
-- database's row only.
CREATE FUNCTION ratelimit.memory_stats_by_database(
    OUT database name,
    OUT database_oid oid,
    OUT entries bigint,
    OUT share_limit bigint,
    OUT refusals bigint,
    OUT evictions bigint)
RETURNS SETOF record
LANGUAGE c VOLATILE PARALLEL SAFE ROWS 4
AS 'MODULE_PATHNAME', 'ratelimit_memory_stats_by_database';
