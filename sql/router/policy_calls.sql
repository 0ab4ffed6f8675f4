-- The policy calls, routed by subject: check and check_many decide each subject on the shard
-- that owns it; check_all and check_http decide several policies' keys as one, all or nothing,
-- which one shard can do only for keys on one partition (one subject under several policies,
-- or keys sharing a hash tag); keys on several partitions are refused with 0A000, before
-- anything is charged. The policy tables are the router's own, copied to every shard
-- (policy_replication.sql), so the arguments are checked here against the same rows.

CREATE FUNCTION ratelimit_router.shard_check(p_hash integer, p_policy text, p_key text,
    p_cost integer, p_tier text, p_ip inet, p_user uuid)
RETURNS ratelimit.policy_decision
LANGUAGE plproxy
AS $$
    CLUSTER 'ratelimit_router';
    RUN ON p_hash;
    SELECT * FROM ratelimit.check(p_policy, p_key, p_cost, p_tier, p_ip, p_user);
$$;

CREATE FUNCTION ratelimit_router.shard_check_all(p_hash integer, p_policies text[], p_keys text[],
    p_cost integer, p_tier text, p_ip inet, p_user uuid)
RETURNS ratelimit.policy_decision
LANGUAGE plproxy
AS $$
    CLUSTER 'ratelimit_router';
    RUN ON p_hash;
    SELECT * FROM ratelimit.check_all(p_policies, p_keys, p_cost, p_tier, p_ip, p_user);
$$;

CREATE FUNCTION ratelimit_router.shard_check_http(p_hash integer, p_policies text[], p_keys text[],
    p_cost integer, p_tier text, p_ip inet, p_user uuid, p_reset_format text, p_body_shape text)
RETURNS jsonb
LANGUAGE plproxy
AS $$
    CLUSTER 'ratelimit_router';
    RUN ON p_hash;
    SELECT ratelimit.check_http(p_policies, p_keys, p_cost, p_tier, p_ip, p_user, p_reset_format,
                                p_body_shape);
$$;

CREATE FUNCTION ratelimit_router.shard_check_many(p_hashes integer[], p_positions integer[],
    p_subjects text[], p_policy text, p_cost integer, p_tier text, p_ip inet, p_user uuid)
RETURNS TABLE(key_position integer, allowed boolean, policy text, "limit" integer, remaining integer,
              retry_after_ms bigint, reset_after_ms bigint, period_ms bigint, cost integer,
              reason text, shadow_denied text[], decided_at timestamptz, penalty_level integer)
LANGUAGE plproxy
AS $$
    CLUSTER 'ratelimit_router';
    SPLIT p_hashes, p_positions, p_subjects;
    RUN ON p_hashes;
    SELECT u.*
    FROM unnest(p_positions, ratelimit.check_many(p_policy, p_subjects, p_cost, p_tier, p_ip, p_user))
         AS u(key_position);
$$;

-- The arguments of each policy call, checked on the router by the extension's own code, as the
-- shard would read them (NULLs, array sizes, unknown policies and tiers, keys, the cost, the
-- limits tiers and overrides give, the HTTP formats), with the shard's own messages; nothing is
-- decided. Each takes the routed call's arguments.
CREATE FUNCTION ratelimit_router.check_arguments(p_policy text, p_key text, p_cost integer,
    p_tier text, p_ip inet, p_user uuid)
RETURNS void
LANGUAGE c STABLE
AS '$libdir/ratelimit', 'ratelimit_router_check_arguments';

CREATE FUNCTION ratelimit_router.check_all_arguments(p_policies text[], p_keys text[],
    p_cost integer, p_tier text, p_ip inet, p_user uuid)
RETURNS void
LANGUAGE c STABLE
AS '$libdir/ratelimit', 'ratelimit_router_check_all_arguments';

CREATE FUNCTION ratelimit_router.check_many_arguments(p_policy text, p_subjects text[],
    p_cost integer, p_tier text, p_ip inet, p_user uuid)
RETURNS void
LANGUAGE c STABLE
AS '$libdir/ratelimit', 'ratelimit_router_check_many_arguments';

CREATE FUNCTION ratelimit_router.check_http_arguments(p_policies text[], p_keys text[],
    p_cost integer, p_tier text, p_ip inet, p_user uuid, p_reset_format text, p_body_shape text)
RETURNS void
LANGUAGE c STABLE
AS '$libdir/ratelimit', 'ratelimit_router_check_http_arguments';

-- The answer for a call whose shard could not answer, under on_shard_error allow or deny.
CREATE FUNCTION ratelimit_router.unavailable_policy_decision(p_allowed boolean, p_policy text,
                                                             p_cost integer)
RETURNS ratelimit.policy_decision
LANGUAGE sql STABLE
AS $$
    SELECT ROW(p_allowed, p_policy, NULL::integer, NULL::integer,
               CASE WHEN p_allowed THEN 0::bigint END, NULL::bigint, NULL::bigint, p_cost,
               'shard_unavailable', '{}'::text[], ratelimit.clock_now(),
               NULL::integer)::ratelimit.policy_decision
$$;

CREATE FUNCTION ratelimit_router.check(p_policy text, p_key text, p_cost integer DEFAULT 1,
    p_tier text DEFAULT NULL, p_ip inet DEFAULT NULL, p_user uuid DEFAULT NULL)
RETURNS ratelimit.policy_decision
LANGUAGE plpgsql
AS $$
DECLARE
    v_hash integer;
    v_policy text;
BEGIN
    PERFORM ratelimit_router.check_arguments(p_policy, p_key, p_cost, p_tier, p_ip, p_user);
    v_hash := ratelimit_router.routing_hash(p_key);
    FOR v_attempt IN 1 .. 2 LOOP
        BEGIN
            RETURN ratelimit_router.shard_check(v_hash, p_policy, p_key, p_cost, p_tier, p_ip, p_user);
        EXCEPTION
            WHEN query_canceled OR OTHERS THEN
                v_policy := ratelimit_router.after_shard_error(v_attempt, SQLSTATE, SQLERRM);
                IF v_policy = 'raise' THEN
                    RAISE;
                ELSIF v_policy = 'retry' THEN
                    CONTINUE;
                END IF;
                RETURN ratelimit_router.unavailable_policy_decision(v_policy = 'allow', p_policy, p_cost);
        END;
    END LOOP;
END;
$$;

-- The hash of the one partition all of p_keys are on, or 0A000 naming two keys that are not.
CREATE FUNCTION ratelimit_router.single_partition_hash(p_keys text[], p_function text)
RETURNS integer
LANGUAGE plpgsql STABLE
AS $$
DECLARE
    v_mask integer := (ratelimit_router.configured_cluster()).partitions - 1;
    v_hash integer;
    v_first integer;
BEGIN
    IF pg_catalog.cardinality(p_keys) = 0 THEN
        RETURN 0;  -- the shard refuses an empty call with the extension's own message
    END IF;
    v_first := ratelimit_router.routing_hash(p_keys[1]);
    FOR i IN 2 .. pg_catalog.cardinality(p_keys) LOOP
        v_hash := ratelimit_router.routing_hash(p_keys[i]);
        IF (v_hash & v_mask) <> (v_first & v_mask) THEN
            RAISE EXCEPTION '%: p_keys[1] and p_keys[%] are on different partitions (% and %): an all-or-nothing decision runs on one shard',
                p_function, i, v_first & v_mask, v_hash & v_mask
                USING ERRCODE = '0A000',
                      HINT = 'Give keys decided together the same hash tag, e.g. ''cart:{user-7}'' and ''checkout:{user-7}'': a key is routed by the text between { and }. Nothing was charged.';
        END IF;
    END LOOP;
    RETURN v_first;
END;
$$;

CREATE FUNCTION ratelimit_router.check_all(p_policies text[], p_keys text[], p_cost integer DEFAULT 1,
    p_tier text DEFAULT NULL, p_ip inet DEFAULT NULL, p_user uuid DEFAULT NULL)
RETURNS ratelimit.policy_decision
LANGUAGE plpgsql
AS $$
DECLARE
    v_hash integer;
    v_policy text;
BEGIN
    PERFORM ratelimit_router.check_all_arguments(p_policies, p_keys, p_cost, p_tier, p_ip, p_user);
    v_hash := ratelimit_router.single_partition_hash(p_keys, 'check_all');
    FOR v_attempt IN 1 .. 2 LOOP
        BEGIN
            RETURN ratelimit_router.shard_check_all(v_hash, p_policies, p_keys, p_cost, p_tier, p_ip, p_user);
        EXCEPTION
            WHEN query_canceled OR OTHERS THEN
                v_policy := ratelimit_router.after_shard_error(v_attempt, SQLSTATE, SQLERRM);
                IF v_policy = 'raise' THEN
                    RAISE;
                ELSIF v_policy = 'retry' THEN
                    CONTINUE;
                END IF;
                RETURN ratelimit_router.unavailable_policy_decision(v_policy = 'allow', NULL, p_cost);
        END;
    END LOOP;
END;
$$;

CREATE FUNCTION ratelimit_router.check_http(p_policies text[], p_keys text[], p_cost integer DEFAULT 1,
    p_tier text DEFAULT NULL, p_ip inet DEFAULT NULL, p_user uuid DEFAULT NULL,
    p_reset_format text DEFAULT 'iso8601', p_body_shape text DEFAULT 'error_message')
RETURNS jsonb
LANGUAGE plpgsql
AS $$
DECLARE
    v_hash integer;
    v_policy text;
BEGIN
    PERFORM ratelimit_router.check_http_arguments(p_policies, p_keys, p_cost, p_tier, p_ip, p_user,
                                                  p_reset_format, p_body_shape);
    v_hash := ratelimit_router.single_partition_hash(p_keys, 'check_http');
    FOR v_attempt IN 1 .. 2 LOOP
        BEGIN
            RETURN ratelimit_router.shard_check_http(v_hash, p_policies, p_keys, p_cost, p_tier, p_ip,
                                                     p_user, p_reset_format, p_body_shape);
        EXCEPTION
            WHEN query_canceled OR OTHERS THEN
                v_policy := ratelimit_router.after_shard_error(v_attempt, SQLSTATE, SQLERRM);
                IF v_policy = 'raise' THEN
                    RAISE;
                ELSIF v_policy = 'retry' THEN
                    CONTINUE;
                END IF;
                -- Denied: 503 with a short Retry-After, not 429: no limit said no.
                RETURN pg_catalog.jsonb_build_object(
                    'allowed', v_policy = 'allow',
                    'status', CASE WHEN v_policy = 'allow' THEN 200 ELSE 503 END,
                    'headers', CASE WHEN v_policy = 'allow' THEN '{}'::jsonb
                                    ELSE '{"Retry-After": "1"}'::jsonb END,
                    'body', CASE WHEN v_policy = 'allow' THEN NULL
                                 ELSE '{"error": "shard_unavailable", "message": "The rate limiter could not decide this request; try again shortly."}'::jsonb END,
                    'decision', pg_catalog.to_jsonb(ratelimit_router.unavailable_policy_decision(
                        v_policy = 'allow', NULL, p_cost)));
        END;
    END LOOP;
END;
$$;

-- check_many: as consume_many, split by subject, parallel under on_shard_error = 'error', one
-- shard after another under 'allow' and 'deny'.
CREATE FUNCTION ratelimit_router.check_many(p_policy text, p_subjects text[], p_cost integer DEFAULT 1,
    p_tier text DEFAULT NULL, p_ip inet DEFAULT NULL, p_user uuid DEFAULT NULL)
RETURNS ratelimit.policy_decision[]
LANGUAGE plpgsql
AS $$
DECLARE
    v_hashes integer[];
    v_positions integer[];
    v_policy text := ratelimit_router.on_shard_error();
    v_result ratelimit.policy_decision[];
    v_cluster ratelimit_router.cluster;
    v_shard_hashes integer[];
    v_shard_positions integer[];
    v_shard_subjects text[];
    v_row record;
BEGIN
    PERFORM ratelimit_router.check_many_arguments(p_policy, p_subjects, p_cost, p_tier, p_ip, p_user);
    v_hashes := ratelimit_router.routing_hashes(p_subjects);
    v_positions := ARRAY(SELECT pg_catalog.generate_series(1, pg_catalog.cardinality(p_subjects)));

    IF v_policy = 'error' THEN
        SELECT pg_catalog.array_agg(ROW(r.allowed, r.policy, r."limit", r.remaining, r.retry_after_ms,
                   r.reset_after_ms, r.period_ms, r.cost, r.reason, r.shadow_denied,
                   r.decided_at, r.penalty_level)::ratelimit.policy_decision ORDER BY r.key_position)
        INTO v_result
        FROM ratelimit_router.shard_check_many(v_hashes, v_positions, p_subjects, p_policy, p_cost,
                                               p_tier, p_ip, p_user) AS r;
        RETURN v_result;
    END IF;

    v_cluster := ratelimit_router.configured_cluster();
    v_result := pg_catalog.array_fill(NULL::ratelimit.policy_decision, ARRAY[pg_catalog.cardinality(p_subjects)]);
    FOR v_shard IN 1 .. pg_catalog.cardinality(v_cluster.shards) LOOP
        SELECT pg_catalog.array_agg(k.hash ORDER BY k.n), pg_catalog.array_agg(k.n ORDER BY k.n),
               pg_catalog.array_agg(k.key ORDER BY k.n)
        INTO v_shard_hashes, v_shard_positions, v_shard_subjects
        -- unnest of several arrays is syntax of FROM, not a function of pg_catalog.
        FROM unnest(v_hashes, v_positions, p_subjects) AS k(hash, n, key)
        WHERE (k.hash & (v_cluster.partitions - 1)) % pg_catalog.cardinality(v_cluster.shards) + 1 = v_shard;
        CONTINUE WHEN v_shard_subjects IS NULL;
        FOR v_attempt IN 1 .. 2 LOOP
            BEGIN
                FOR v_row IN
                    SELECT * FROM ratelimit_router.shard_check_many(v_shard_hashes, v_shard_positions,
                        v_shard_subjects, p_policy, p_cost, p_tier, p_ip, p_user)
                LOOP
                    v_result[v_row.key_position] := ROW(v_row.allowed, v_row.policy, v_row."limit",
                        v_row.remaining, v_row.retry_after_ms, v_row.reset_after_ms, v_row.period_ms,
                        v_row.cost, v_row.reason, v_row.shadow_denied, v_row.decided_at,
                        v_row.penalty_level)::ratelimit.policy_decision;
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
                    FOR i IN 1 .. pg_catalog.cardinality(v_shard_positions) LOOP
                        v_result[v_shard_positions[i]] := ratelimit_router.unavailable_policy_decision(
                            v_policy = 'allow', p_policy, p_cost);
                    END LOOP;
                    EXIT;
            END;
        END LOOP;
    END LOOP;
    RETURN v_result;
END;
$$;
