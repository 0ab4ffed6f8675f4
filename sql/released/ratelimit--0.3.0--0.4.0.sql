-- ratelimit 0.3.0 -> 0.4.0: the memory engine (p_engine => 'memory') and its stats.
\echo Use "ALTER EXTENSION ratelimit UPDATE TO '0.4.0'" to load this file. \quit

-- consume, peek, refund, reset and block take p_engine => 'memory' from this version on: the
-- same calls, decided in shared memory (needs shared_preload_libraries = 'ratelimit'). Their
-- SQL declarations do not change.

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

-- Stats reveal no key (the store keeps hashes only) but are still for operators: the owner
-- and, on Supabase, service_role.
REVOKE EXECUTE ON FUNCTION ratelimit.memory_stats() FROM PUBLIC;
REVOKE ALL ON TABLE ratelimit.memory_stats FROM PUBLIC;

DO $$
BEGIN
    IF EXISTS (SELECT 1 FROM pg_catalog.pg_roles WHERE rolname = 'service_role') THEN
        GRANT EXECUTE ON FUNCTION ratelimit.memory_stats() TO service_role;
        GRANT SELECT ON TABLE ratelimit.memory_stats TO service_role;
    END IF;
END
$$;
