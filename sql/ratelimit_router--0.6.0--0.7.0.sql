\echo Use "ALTER EXTENSION ratelimit_router UPDATE" to load this file. \quit

-- policy_stats gains counted, as ratelimit's does in 0.7.0 (the functions are made again: their
-- result type changes).
DROP FUNCTION ratelimit_router.policy_stats();
DROP FUNCTION ratelimit_router.shard_policy_stats();

CREATE FUNCTION ratelimit_router.shard_policy_stats()
RETURNS TABLE(shard text, policy text, allowed bigint, denied bigint, shadow_denied bigint,
              since timestamptz, near_limit bigint, denials_not_logged bigint, counted boolean)
LANGUAGE plproxy
AS $$
    CLUSTER 'ratelimit_router';
    RUN ON ALL;
    SELECT pg_catalog.host(pg_catalog.inet_server_addr()) || ':' || pg_catalog.inet_server_port()
               || '/' || pg_catalog.current_database() AS shard, s.*
    FROM ratelimit.policy_stats() AS s;
$$;

-- Each policy's counters over all shards; since is the earliest shard's. Rows with counted =
-- false (calls that found no counter on a shard, and policies without one) add up apart.
CREATE FUNCTION ratelimit_router.policy_stats()
RETURNS TABLE(policy text, allowed bigint, denied bigint, shadow_denied bigint, since timestamptz,
              near_limit bigint, denials_not_logged bigint, counted boolean)
LANGUAGE sql
AS $$
    SELECT s.policy, sum(s.allowed)::bigint, sum(s.denied)::bigint, sum(s.shadow_denied)::bigint,
           min(s.since), sum(s.near_limit)::bigint, sum(s.denials_not_logged)::bigint, s.counted
    FROM ratelimit_router.shard_policy_stats() AS s
    GROUP BY s.policy, s.counted
    ORDER BY s.policy, s.counted DESC
$$;
