-- Cluster-wide views: each runs on every shard at once (RUN ON ALL) and returns every shard's
-- rows, each with its shard (the address, port and database it answered from); policy_stats,
-- top_offenders and cleanup_key_state add them up. A shard that cannot answer fails the call:
-- a view of part of the cluster would read as the whole. Columns are named, not s.*, so that a
-- shard whose function has gained columns still answers the router's shape.

-- @begin memory_stats
CREATE OR REPLACE FUNCTION ratelimit_router.memory_stats()
RETURNS TABLE(shard text, entries bigint, capacity bigint, shared_bytes bigint, evictions bigint,
              expired bigint, allowed bigint, denied bigint, refusals bigint, full_partitions bigint,
              log_blocks bigint, log_blocks_used bigint)
LANGUAGE plproxy
AS $$
    CLUSTER 'ratelimit_router';
    RUN ON ALL;
    SELECT pg_catalog.host(pg_catalog.inet_server_addr()) || ':' || pg_catalog.inet_server_port()
               || '/' || pg_catalog.current_database() AS shard,
           s.entries, s.capacity, s.shared_bytes, s.evictions, s.expired, s.allowed, s.denied,
           s.refusals, s.full_partitions, s.log_blocks, s.log_blocks_used
    FROM ratelimit.memory_stats() AS s;
$$;
-- @end memory_stats

-- @begin shard_policy_stats
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
-- @end shard_policy_stats

-- @begin policy_stats
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
-- @end policy_stats

CREATE FUNCTION ratelimit_router.shard_top_offenders(p_limit integer)
RETURNS TABLE(shard text, policy text, subject text, denials bigint, overcount bigint,
              first_denied_at timestamptz, last_denied_at timestamptz)
LANGUAGE plproxy
AS $$
    CLUSTER 'ratelimit_router';
    RUN ON ALL;
    SELECT pg_catalog.host(pg_catalog.inet_server_addr()) || ':' || pg_catalog.inet_server_port()
               || '/' || pg_catalog.current_database() AS shard, s.*
    FROM ratelimit.top_offenders(p_limit) AS s;
$$;

-- The subjects denied most often over all shards. A subject lives on one shard, so each row is
-- one shard's count; each shard gives its own top p_limit.
CREATE FUNCTION ratelimit_router.top_offenders(p_limit integer DEFAULT 10)
RETURNS TABLE(policy text, subject text, denials bigint, overcount bigint,
              first_denied_at timestamptz, last_denied_at timestamptz)
LANGUAGE plpgsql
AS $$
BEGIN
    IF p_limit IS NULL THEN
        RAISE EXCEPTION 'p_limit must not be NULL' USING ERRCODE = '22004';
    END IF;
    IF p_limit < 1 THEN
        RAISE EXCEPTION 'p_limit must be at least 1, got %', p_limit USING ERRCODE = '22023';
    END IF;
    RETURN QUERY
        SELECT o.policy, o.subject, o.denials, o.overcount, o.first_denied_at, o.last_denied_at
        FROM ratelimit_router.shard_top_offenders(p_limit) AS o
        ORDER BY o.denials DESC, o.policy, o.subject
        LIMIT p_limit;
END;
$$;

-- Every shard's denial log, newest first.
CREATE FUNCTION ratelimit_router.denial_log()
RETURNS TABLE(shard text, slot integer, logged_at timestamptz, event_type text, severity text,
              source text, status text, error_message text, event_data jsonb)
LANGUAGE plproxy
AS $$
    CLUSTER 'ratelimit_router';
    RUN ON ALL;
    SELECT pg_catalog.host(pg_catalog.inet_server_addr()) || ':' || pg_catalog.inet_server_port()
               || '/' || pg_catalog.current_database() AS shard, l.*
    FROM ratelimit.denial_log AS l
    ORDER BY l.logged_at DESC;
$$;

CREATE FUNCTION ratelimit_router.shard_cleanup_key_state(p_engine text)
RETURNS TABLE(shard text, deleted bigint)
LANGUAGE plproxy
AS $$
    CLUSTER 'ratelimit_router';
    RUN ON ALL;
    SELECT pg_catalog.host(pg_catalog.inet_server_addr()) || ':' || pg_catalog.inet_server_port()
               || '/' || pg_catalog.current_database() AS shard,
           ratelimit.cleanup_key_state(p_engine) AS deleted;
$$;

-- cleanup_key_state on every shard at once; returns how many rows all deleted.
CREATE FUNCTION ratelimit_router.cleanup_key_state(p_engine text DEFAULT NULL)
RETURNS bigint
LANGUAGE sql
AS $$
    SELECT coalesce(sum(c.deleted), 0)::bigint FROM ratelimit_router.shard_cleanup_key_state(p_engine) AS c
$$;
