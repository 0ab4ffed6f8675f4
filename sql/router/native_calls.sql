-- The native calls, routed: each key is decided on the shard that owns it, by the same
-- function there. The functions named shard_* are PL/Proxy's: they send one statement to the
-- partition of the hash they are given; the others check the arguments on the router first
-- (a remote error costs PL/Proxy its connection, which the next call must open again), compute
-- the hash, and apply ratelimit_router.on_shard_error when the shard cannot answer.
--
-- The per-call functions pin no search_path (a SET clause costs every call a GUC save and
-- restore): they are not SECURITY DEFINER and name every object with its schema.
--
-- A shard counts as unavailable on: connection failures (class 08, and PL/Proxy's own XX000
-- when it cannot connect, send or read), its shutdown or start-up (57P01, 57P02, 57P03), a
-- cancelled statement (57014: the shard's statement_timeout, or the router's own, which is what
-- ends a call to a frozen shard), a lock it could not get in lock_timeout (55P03), and no free
-- connection there (53300). Any other error is the call's own and is raised as the shard raised
-- it. The first call after a shard restarted finds its cached connection closed (57P01) and is
-- sent again once: that statement never ran there.
CREATE FUNCTION ratelimit_router.is_shard_failure(p_sqlstate text, p_message text)
RETURNS boolean
LANGUAGE sql IMMUTABLE
AS $$
    SELECT p_sqlstate LIKE '08%'
        OR p_sqlstate IN ('57P01', '57P02', '57P03', '57014', '55P03', '53300')
        OR (p_sqlstate = 'XX000' AND p_message LIKE 'PL/Proxy function %'
            AND p_message NOT LIKE '%REMOTE ERROR%')
$$;

-- What a routed call does with the error of its `p_attempt`-th try (every routed call's exception
-- handler asks it, so that the rule is written once): 'raise' it (the call's own error, or a
-- shard failure under on_shard_error = 'error'), 'retry' (the restart's 57P01 on the first try),
-- or answer for the unavailable shard, 'allow' or 'deny'.
CREATE FUNCTION ratelimit_router.after_shard_error(p_attempt integer, p_sqlstate text, p_message text)
RETURNS text
LANGUAGE sql STABLE
AS $$
    SELECT CASE
        WHEN NOT ratelimit_router.is_shard_failure(p_sqlstate, p_message) THEN 'raise'
        WHEN p_attempt = 1 AND p_sqlstate = '57P01' THEN 'retry'
        WHEN ratelimit_router.on_shard_error() = 'error' THEN 'raise'
        ELSE ratelimit_router.on_shard_error()
    END
$$;

CREATE FUNCTION ratelimit_router.shard_consume(p_hash integer, p_key text, p_limit integer,
    p_period interval, p_cost integer, p_algorithm text, p_engine text, p_burst integer,
    p_time_zone text)
RETURNS ratelimit.decision
LANGUAGE plproxy
AS $$
    CLUSTER 'ratelimit_router';
    RUN ON p_hash;
    SELECT * FROM ratelimit.consume(p_key, p_limit, p_period, p_cost, p_algorithm, p_engine, p_burst,
                                 p_time_zone);
$$;

CREATE FUNCTION ratelimit_router.shard_peek(p_hash integer, p_key text, p_limit integer,
    p_period interval, p_cost integer, p_algorithm text, p_engine text, p_burst integer,
    p_time_zone text)
RETURNS ratelimit.decision
LANGUAGE plproxy
AS $$
    CLUSTER 'ratelimit_router';
    RUN ON p_hash;
    SELECT * FROM ratelimit.peek(p_key, p_limit, p_period, p_cost, p_algorithm, p_engine, p_burst,
                                 p_time_zone);
$$;

CREATE FUNCTION ratelimit_router.shard_refund(p_hash integer, p_key text, p_limit integer,
    p_period interval, p_cost integer, p_algorithm text, p_engine text, p_burst integer,
    p_time_zone text)
RETURNS ratelimit.decision
LANGUAGE plproxy
AS $$
    CLUSTER 'ratelimit_router';
    RUN ON p_hash;
    SELECT * FROM ratelimit.refund(p_key, p_limit, p_period, p_cost, p_algorithm, p_engine, p_burst,
                                 p_time_zone);
$$;

CREATE FUNCTION ratelimit_router.shard_reset(p_hash integer, p_key text, p_engine text)
RETURNS boolean
LANGUAGE plproxy
AS $$
    CLUSTER 'ratelimit_router';
    RUN ON p_hash;
    SELECT ratelimit.reset(p_key, p_engine);
$$;

CREATE FUNCTION ratelimit_router.shard_block(p_hash integer, p_key text, p_duration interval,
    p_engine text)
RETURNS timestamptz
LANGUAGE plproxy
AS $$
    CLUSTER 'ratelimit_router';
    RUN ON p_hash;
    SELECT ratelimit.block(p_key, p_duration, p_engine);
$$;

-- Batches: the keys travel with their positions in the caller's array and their hashes;
-- PL/Proxy splits the three arrays by partition and runs each shard's part in parallel, and
-- each answer comes back with its position (unnest expands the decisions into their columns).
CREATE FUNCTION ratelimit_router.shard_consume_many(p_hashes integer[], p_positions integer[],
    p_keys text[], p_limit integer, p_period interval, p_cost integer, p_algorithm text,
    p_engine text, p_burst integer, p_time_zone text)
RETURNS TABLE(key_position integer, allowed boolean, "limit" integer, remaining integer,
              retry_after_ms bigint, reset_after_ms bigint)
LANGUAGE plproxy
AS $$
    CLUSTER 'ratelimit_router';
    SPLIT p_hashes, p_positions, p_keys;
    RUN ON p_hashes;
    SELECT u.* FROM unnest(p_positions, ratelimit.consume_many(p_keys, p_limit, p_period, p_cost, p_algorithm,
                                                    p_engine, p_burst, p_time_zone)) AS u(key_position);
$$;

CREATE FUNCTION ratelimit_router.shard_peek_many(p_hashes integer[], p_positions integer[],
    p_keys text[], p_limit integer, p_period interval, p_cost integer, p_algorithm text,
    p_engine text, p_burst integer, p_time_zone text)
RETURNS TABLE(key_position integer, allowed boolean, "limit" integer, remaining integer,
              retry_after_ms bigint, reset_after_ms bigint)
LANGUAGE plproxy
AS $$
    CLUSTER 'ratelimit_router';
    SPLIT p_hashes, p_positions, p_keys;
    RUN ON p_hashes;
    SELECT u.* FROM unnest(p_positions, ratelimit.peek_many(p_keys, p_limit, p_period, p_cost, p_algorithm,
                                                 p_engine, p_burst, p_time_zone)) AS u(key_position);
$$;

-- The arguments are checked on the router by the extension's own code, as the shard reads them
-- (the key or keys, the limit, the period and time zone, the cost, the algorithm, the engine, the
-- burst), and nothing is decided: the router needs no state and no preloaded library.
CREATE FUNCTION ratelimit_router.limit_arguments(p_key text, p_limit integer, p_period interval,
    p_cost integer, p_algorithm text, p_engine text, p_burst integer, p_time_zone text)
RETURNS void
LANGUAGE c STABLE
AS '$libdir/ratelimit', 'ratelimit_router_limit_arguments';

-- @begin refund_arguments
-- refund's: the same, and a cost above what one call could take refused, as refund refuses it.
CREATE FUNCTION ratelimit_router.refund_arguments(p_key text, p_limit integer, p_period interval,
    p_cost integer, p_algorithm text, p_engine text, p_burst integer, p_time_zone text)
RETURNS void
LANGUAGE c STABLE
AS '$libdir/ratelimit', 'ratelimit_router_refund_arguments';
-- @end refund_arguments

CREATE FUNCTION ratelimit_router.many_arguments(p_keys text[], p_limit integer, p_period interval,
    p_cost integer, p_algorithm text, p_engine text, p_burst integer, p_time_zone text)
RETURNS void
LANGUAGE c STABLE
AS '$libdir/ratelimit', 'ratelimit_router_many_arguments';

CREATE FUNCTION ratelimit_router.reset_arguments(p_key text, p_engine text)
RETURNS void
LANGUAGE c STABLE
AS '$libdir/ratelimit', 'ratelimit_router_reset_arguments';

-- The answer for a key whose shard could not answer, under on_shard_error allow or deny.
CREATE FUNCTION ratelimit_router.unavailable_decision(p_allowed boolean, p_limit integer)
RETURNS ratelimit.decision
LANGUAGE sql IMMUTABLE
AS $$
    SELECT ROW(p_allowed, p_limit, NULL::integer, CASE WHEN p_allowed THEN 0::bigint END,
               NULL::bigint)::ratelimit.decision
$$;

-- @begin routed_native_call
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
-- @end routed_native_call

CREATE FUNCTION ratelimit_router.consume(p_key text, p_limit integer, p_period interval,
    p_cost integer DEFAULT 1, p_algorithm text DEFAULT 'fixed_window', p_engine text DEFAULT 'table',
    p_burst integer DEFAULT NULL, p_time_zone text DEFAULT NULL)
RETURNS ratelimit.decision
LANGUAGE sql
AS $$
    SELECT ratelimit_router.routed_native_call('consume', p_key, p_limit, p_period, p_cost,
                                               p_algorithm, p_engine, p_burst, p_time_zone)
$$;

CREATE FUNCTION ratelimit_router.peek(p_key text, p_limit integer, p_period interval,
    p_cost integer DEFAULT 1, p_algorithm text DEFAULT 'fixed_window', p_engine text DEFAULT 'table',
    p_burst integer DEFAULT NULL, p_time_zone text DEFAULT NULL)
RETURNS ratelimit.decision
LANGUAGE sql
AS $$
    SELECT ratelimit_router.routed_native_call('peek', p_key, p_limit, p_period, p_cost,
                                               p_algorithm, p_engine, p_burst, p_time_zone)
$$;

CREATE FUNCTION ratelimit_router.refund(p_key text, p_limit integer, p_period interval,
    p_cost integer DEFAULT 1, p_algorithm text DEFAULT 'fixed_window', p_engine text DEFAULT 'table',
    p_burst integer DEFAULT NULL, p_time_zone text DEFAULT NULL)
RETURNS ratelimit.decision
LANGUAGE sql
AS $$
    SELECT ratelimit_router.routed_native_call('refund', p_key, p_limit, p_period, p_cost,
                                               p_algorithm, p_engine, p_burst, p_time_zone)
$$;

-- consume for callers that need only the answer, as the local allow: a shard that cannot answer
-- gives on_shard_error's answer (allow: true, deny: false).
CREATE FUNCTION ratelimit_router.allow(p_key text, p_limit integer, p_period interval,
    p_cost integer DEFAULT 1, p_algorithm text DEFAULT 'fixed_window', p_engine text DEFAULT 'table',
    p_burst integer DEFAULT NULL, p_time_zone text DEFAULT NULL)
RETURNS boolean
LANGUAGE sql
AS $$
    SELECT (ratelimit_router.routed_native_call('consume', p_key, p_limit, p_period, p_cost,
                                                p_algorithm, p_engine, p_burst, p_time_zone)).allowed
$$;

-- block's arguments, checked on the router by the extension's own code, nothing blocked.
CREATE FUNCTION ratelimit_router.block_arguments(p_key text, p_duration interval, p_engine text)
RETURNS void
LANGUAGE c STABLE
AS '$libdir/ratelimit', 'ratelimit_router_block_arguments';

-- reset and block are an administrator's acts: a shard that cannot answer is an error whatever
-- on_shard_error says (only the restart retry applies).
CREATE FUNCTION ratelimit_router.reset(p_key text, p_engine text DEFAULT 'table')
RETURNS boolean
LANGUAGE plpgsql
AS $$
BEGIN
    PERFORM ratelimit_router.reset_arguments(p_key, p_engine);
    BEGIN
        RETURN ratelimit_router.shard_reset(ratelimit_router.routing_hash(p_key), p_key, p_engine);
    EXCEPTION WHEN admin_shutdown THEN
        RETURN ratelimit_router.shard_reset(ratelimit_router.routing_hash(p_key), p_key, p_engine);
    END;
END;
$$;

CREATE FUNCTION ratelimit_router.block(p_key text, p_duration interval, p_engine text DEFAULT 'table')
RETURNS timestamptz
LANGUAGE plpgsql
AS $$
BEGIN
    PERFORM ratelimit_router.block_arguments(p_key, p_duration, p_engine);
    BEGIN
        RETURN ratelimit_router.shard_block(ratelimit_router.routing_hash(p_key), p_key, p_duration, p_engine);
    EXCEPTION WHEN admin_shutdown THEN
        RETURN ratelimit_router.shard_block(ratelimit_router.routing_hash(p_key), p_key, p_duration, p_engine);
    END;
END;
$$;

-- consume_many and peek_many share one body. With on_shard_error = 'error', every shard's part
-- runs at once, in parallel, and any shard's failure fails the call (it is not sent again: the
-- shards that answered have charged their keys). With 'allow' or 'deny', each shard's part is
-- its own call, one after another: the keys of a shard that cannot answer get the failure
-- policy's answer, the others their shard's, and no key is ever sent twice except after a
-- restart's 57P01, which means that shard ran nothing.
CREATE FUNCTION ratelimit_router.routed_batch_call(p_call text, p_keys text[], p_limit integer,
    p_period interval, p_cost integer, p_algorithm text, p_engine text, p_burst integer,
    p_time_zone text)
RETURNS ratelimit.decision[]
LANGUAGE plpgsql
AS $$
DECLARE
    v_hashes integer[];
    v_positions integer[];
    v_policy text := ratelimit_router.on_shard_error();
    v_result ratelimit.decision[];
    v_cluster ratelimit_router.cluster;
    v_shard_hashes integer[];
    v_shard_positions integer[];
    v_shard_keys text[];
    v_row record;
BEGIN
    PERFORM ratelimit_router.many_arguments(p_keys, p_limit, p_period, p_cost, p_algorithm, p_engine,
                                            p_burst, p_time_zone);
    v_hashes := ratelimit_router.routing_hashes(p_keys);
    v_positions := ARRAY(SELECT pg_catalog.generate_series(1, pg_catalog.cardinality(p_keys)));

    IF v_policy = 'error' THEN
        IF p_call = 'consume' THEN
            SELECT array_agg(ROW(r.allowed, r."limit", r.remaining, r.retry_after_ms,
                                 r.reset_after_ms)::ratelimit.decision ORDER BY r.key_position)
            INTO v_result
            FROM ratelimit_router.shard_consume_many(v_hashes, v_positions, p_keys, p_limit, p_period,
                                                     p_cost, p_algorithm, p_engine, p_burst, p_time_zone) AS r;
        ELSE
            SELECT array_agg(ROW(r.allowed, r."limit", r.remaining, r.retry_after_ms,
                                 r.reset_after_ms)::ratelimit.decision ORDER BY r.key_position)
            INTO v_result
            FROM ratelimit_router.shard_peek_many(v_hashes, v_positions, p_keys, p_limit, p_period,
                                                  p_cost, p_algorithm, p_engine, p_burst, p_time_zone) AS r;
        END IF;
        RETURN v_result;
    END IF;

    v_cluster := ratelimit_router.configured_cluster();
    v_result := array_fill(NULL::ratelimit.decision, ARRAY[cardinality(p_keys)]);
    FOR v_shard IN 1 .. cardinality(v_cluster.shards) LOOP
        SELECT array_agg(k.hash ORDER BY k.n), array_agg(k.n ORDER BY k.n), array_agg(k.key ORDER BY k.n)
        INTO v_shard_hashes, v_shard_positions, v_shard_keys
        FROM unnest(v_hashes, v_positions, p_keys) AS k(hash, n, key)
        WHERE (k.hash & (v_cluster.partitions - 1)) % cardinality(v_cluster.shards) + 1 = v_shard;
        CONTINUE WHEN v_shard_keys IS NULL;
        FOR v_attempt IN 1 .. 2 LOOP
            BEGIN
                FOR v_row IN
                    SELECT * FROM ratelimit_router.shard_consume_many(v_shard_hashes, v_shard_positions,
                        v_shard_keys, p_limit, p_period, p_cost, p_algorithm, p_engine, p_burst, p_time_zone)
                    WHERE p_call = 'consume'
                    UNION ALL
                    SELECT * FROM ratelimit_router.shard_peek_many(v_shard_hashes, v_shard_positions,
                        v_shard_keys, p_limit, p_period, p_cost, p_algorithm, p_engine, p_burst, p_time_zone)
                    WHERE p_call = 'peek'
                LOOP
                    v_result[v_row.key_position] := ROW(v_row.allowed, v_row."limit", v_row.remaining,
                        v_row.retry_after_ms, v_row.reset_after_ms)::ratelimit.decision;
                END LOOP;
                EXIT;
            EXCEPTION
                WHEN query_canceled OR OTHERS THEN
                    v_policy := ratelimit_router.after_shard_error(v_attempt, SQLSTATE, SQLERRM);
                    IF v_policy = 'raise' THEN
                        RAISE;
                    ELSIF v_policy = 'retry' THEN
                        CONTINUE;
                    END IF;
                    FOR i IN 1 .. cardinality(v_shard_positions) LOOP
                        v_result[v_shard_positions[i]] :=
                            ratelimit_router.unavailable_decision(v_policy = 'allow', p_limit);
                    END LOOP;
                    EXIT;
            END;
        END LOOP;
    END LOOP;
    RETURN v_result;
END;
$$;

CREATE FUNCTION ratelimit_router.consume_many(p_keys text[], p_limit integer, p_period interval,
    p_cost integer DEFAULT 1, p_algorithm text DEFAULT 'fixed_window', p_engine text DEFAULT 'table',
    p_burst integer DEFAULT NULL, p_time_zone text DEFAULT NULL)
RETURNS ratelimit.decision[]
LANGUAGE sql
AS $$
    SELECT ratelimit_router.routed_batch_call('consume', p_keys, p_limit, p_period, p_cost,
                                              p_algorithm, p_engine, p_burst, p_time_zone)
$$;

CREATE FUNCTION ratelimit_router.peek_many(p_keys text[], p_limit integer, p_period interval,
    p_cost integer DEFAULT 1, p_algorithm text DEFAULT 'fixed_window', p_engine text DEFAULT 'table',
    p_burst integer DEFAULT NULL, p_time_zone text DEFAULT NULL)
RETURNS ratelimit.decision[]
LANGUAGE sql
AS $$
    SELECT ratelimit_router.routed_batch_call('peek', p_keys, p_limit, p_period, p_cost,
                                              p_algorithm, p_engine, p_burst, p_time_zone)
$$;
