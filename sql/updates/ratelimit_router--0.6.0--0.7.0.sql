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

-- A refund's cost above what one call could take is refused on the router, as refund refuses
-- it on a shard (ratelimit 0.7.0 answers a consume or peek of such a cost with a denial).
CREATE FUNCTION ratelimit_router.refund_arguments(p_key text, p_limit integer, p_period interval,
    p_cost integer, p_algorithm text, p_engine text, p_burst integer, p_time_zone text)
RETURNS void
LANGUAGE c STABLE
AS '$libdir/ratelimit', 'ratelimit_router_refund_arguments';

-- consume, peek and refund share one body: p_call says which.
CREATE OR REPLACE FUNCTION ratelimit_router.routed_native_call(p_call text, p_key text, p_limit integer,
    p_period interval, p_cost integer, p_algorithm text, p_engine text, p_burst integer,
    p_time_zone text)
RETURNS ratelimit.decision
LANGUAGE plpgsql
AS $$
DECLARE
    v_hash integer;
    v_policy text;
BEGIN
    IF p_call = 'refund' THEN
        PERFORM ratelimit_router.refund_arguments(p_key, p_limit, p_period, p_cost, p_algorithm,
                                                  p_engine, p_burst, p_time_zone);
    ELSE
        PERFORM ratelimit_router.limit_arguments(p_key, p_limit, p_period, p_cost, p_algorithm,
                                                 p_engine, p_burst, p_time_zone);
    END IF;
    v_hash := ratelimit_router.routing_hash(p_key);
    FOR v_attempt IN 1 .. 2 LOOP
        BEGIN
            IF p_call = 'consume' THEN
                RETURN ratelimit_router.shard_consume(v_hash, p_key, p_limit, p_period, p_cost,
                                                      p_algorithm, p_engine, p_burst, p_time_zone);
            ELSIF p_call = 'peek' THEN
                RETURN ratelimit_router.shard_peek(v_hash, p_key, p_limit, p_period, p_cost,
                                                   p_algorithm, p_engine, p_burst, p_time_zone);
            ELSE
                RETURN ratelimit_router.shard_refund(v_hash, p_key, p_limit, p_period, p_cost,
                                                     p_algorithm, p_engine, p_burst, p_time_zone);
            END IF;
        EXCEPTION
            WHEN query_canceled OR OTHERS THEN
                v_policy := ratelimit_router.after_shard_error(v_attempt, SQLSTATE, SQLERRM);
                IF v_policy = 'raise' THEN
                    RAISE;
                ELSIF v_policy = 'retry' THEN
                    CONTINUE;
                END IF;
                RETURN ratelimit_router.unavailable_decision(v_policy = 'allow', p_limit);
        END;
    END LOOP;
END;
$$;
