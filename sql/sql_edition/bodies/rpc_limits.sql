-- The SQL edition's bodies of the C functions of sql/drop_ins/rpc_limits.sql (the extension
-- ratelimit_sql_rpc_limits), deciding as src/pg/drop_ins/rpc_limits.cpp does. Each checks its
-- arguments in the C edition's order, with its errors; the limit and the caller come from the
-- rules of sql/sql_edition/drop_in_rules.sql. A call is counted in rpc_rate_limits, or with
-- ratelimit.dropin_engine = unlogged in the unlogged engine's namespace drop-in/rpc_rate_limits,
-- under "<user id>:<rpc name>".

-- check_rate_limit(p_rpc_name, p_max_calls, p_window_minutes): the caller from the JWT; an
-- anonymous caller is allowed without being counted (the original function's fail-open).
-- @begin ratelimit_rpc_limits_check_rate_limit
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    policy_limit integer;
    policy_period interval;
    policy_time_zone text;
    enforced_limit bigint := p_max_calls;
    window_micros bigint := p_window_minutes * 60000000::bigint;
    caller uuid;
    now_at timestamptz;
    now_micros bigint;
    counted bigint;
BEGIN
    -- Arguments of usual values pass one test; any others meet every check in the C edition's
    -- order (ratelimit.drop_in_window_arguments).
    IF (octet_length(p_rpc_name) BETWEEN 1 AND 256 AND p_max_calls > 0
        AND p_window_minutes BETWEEN 1 AND 525600) IS NOT TRUE THEN
        PERFORM ratelimit.drop_in_window_arguments('p_rpc_name', p_rpc_name, 'p_max_calls', p_max_calls,
                                                   'p_window_minutes', p_window_minutes, 525600, NULL, false);
    END IF;
    -- The policy rpc.<name>, if any; ratelimit.drop_in_limit applies it, or the setting that
    -- asks for one: without either the caller's values hold.
    SELECT p."limit", p.period, p.time_zone INTO policy_limit, policy_period, policy_time_zone
    FROM ratelimit.policies p WHERE p.name = 'rpc.' || p_rpc_name;
    IF policy_limit IS NOT NULL OR pg_catalog.current_setting('ratelimit.dropin_require_policy', true) <> '' THEN
        SELECT l.enforced_limit, l.window_micros INTO enforced_limit, window_micros
        FROM ratelimit.drop_in_limit(ARRAY['p_rpc_name', 'p_max_calls', 'p_window_minutes'], 'rpc.' || p_rpc_name,
                                     policy_limit, policy_period, policy_time_zone, 60000000, p_max_calls,
                                     p_window_minutes) AS l;
    END IF;
    caller := ratelimit.drop_in_caller();
    IF caller IS NULL THEN
        RETURN true;
    END IF;

    now_at := ratelimit.clock_now();
    IF ratelimit.drop_in_engine() IS NOT NULL THEN
        now_micros := (EXTRACT(epoch FROM now_at) * 1000000)::bigint;
        -- The same window on the engine: it restarts once window_expires_at < now.
        SELECT w.counted INTO counted
        FROM ratelimit.drop_in_count_in_window('check_rate_limit', ratelimit.drop_in_engine(), 'drop-in/rpc_rate_limits',
                                               caller::text || ':' || p_rpc_name, now_micros,
                                               now_micros + window_micros, true, 1) AS w;
    ELSE
        -- RollingWindow's transition under the row's lock: a window restarts only once the
        -- window_expires_at it was opened with has passed, whatever length a later call (or an
        -- edited policy) gives; call_count saturates. The row is updated where it is; a first
        -- call makes it, INSERT ... ON CONFLICT updating it if a concurrent first call did.
        -- A read-only transaction's refusal names the INSERT, as the C edition's does.
        IF pg_catalog.current_setting('transaction_read_only') = 'off' THEN
            UPDATE @extschema@.rpc_rate_limits AS r SET
                call_count = CASE WHEN r.window_expires_at < now_at THEN 1
                                  ELSE r.call_count + (r.call_count < 2147483647)::integer END,
                window_start = CASE WHEN r.window_expires_at < now_at THEN now_at ELSE r.window_start END,
                window_expires_at = CASE WHEN r.window_expires_at < now_at
                                         THEN now_at + window_micros * interval '1 microsecond'
                                         ELSE r.window_expires_at END
            WHERE r.user_id = caller AND r.rpc_name = p_rpc_name
            RETURNING r.call_count INTO counted;
        END IF;
        IF counted IS NULL THEN
            INSERT INTO @extschema@.rpc_rate_limits AS r
                (user_id, rpc_name, call_count, window_start, window_expires_at)
            VALUES (caller, p_rpc_name, 1, now_at, now_at + window_micros * interval '1 microsecond')
            ON CONFLICT (user_id, rpc_name) DO UPDATE SET
                call_count = CASE WHEN r.window_expires_at < now_at THEN 1
                                  ELSE r.call_count + (r.call_count < 2147483647)::integer END,
                window_start = CASE WHEN r.window_expires_at < now_at THEN now_at ELSE r.window_start END,
                window_expires_at = CASE WHEN r.window_expires_at < now_at
                                         THEN now_at + window_micros * interval '1 microsecond'
                                         ELSE r.window_expires_at END
            RETURNING r.call_count INTO counted;
        END IF;
    END IF;
    -- A saturated count has lost count: it denies whatever the limit.
    RETURN counted < 2147483647 AND counted <= enforced_limit;
END
$$;
-- @end ratelimit_rpc_limits_check_rate_limit

-- check_rate_limit_for_user(p_user_id, p_rpc_name, p_max_calls, p_window_minutes): the same
-- decision for a user the caller names, which a JWT role may do for its own id only.
-- @begin ratelimit_rpc_limits_check_rate_limit_for_user
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    policy_limit integer;
    policy_period interval;
    policy_time_zone text;
    enforced_limit bigint := p_max_calls;
    window_micros bigint := p_window_minutes * 60000000::bigint;
    now_at timestamptz;
    now_micros bigint;
    counted bigint;
BEGIN
    -- Arguments of usual values pass one test; any others meet every check in the C edition's
    -- order (ratelimit.drop_in_window_arguments).
    IF (p_user_id IS NOT NULL AND octet_length(p_rpc_name) BETWEEN 1 AND 256 AND p_max_calls > 0
        AND p_window_minutes BETWEEN 1 AND 525600) IS NOT TRUE THEN
        IF p_user_id IS NULL THEN
            RAISE EXCEPTION 'p_user_id must not be NULL' USING ERRCODE = 'null_value_not_allowed';
        END IF;
        PERFORM ratelimit.drop_in_window_arguments('p_rpc_name', p_rpc_name, 'p_max_calls', p_max_calls,
                                                   'p_window_minutes', p_window_minutes, 525600, NULL, false);
    END IF;
    -- The policy rpc.<name>, if any; ratelimit.drop_in_limit applies it, or the setting that
    -- asks for one: without either the caller's values hold.
    SELECT p."limit", p.period, p.time_zone INTO policy_limit, policy_period, policy_time_zone
    FROM ratelimit.policies p WHERE p.name = 'rpc.' || p_rpc_name;
    IF policy_limit IS NOT NULL OR pg_catalog.current_setting('ratelimit.dropin_require_policy', true) <> '' THEN
        SELECT l.enforced_limit, l.window_micros INTO enforced_limit, window_micros
        FROM ratelimit.drop_in_limit(ARRAY['p_rpc_name', 'p_max_calls', 'p_window_minutes'], 'rpc.' || p_rpc_name,
                                     policy_limit, policy_period, policy_time_zone, 60000000, p_max_calls,
                                     p_window_minutes) AS l;
    END IF;
    IF ratelimit.drop_in_jwt_role() THEN
        PERFORM ratelimit.drop_in_require_may_act_on('p_user_id', p_user_id, ratelimit.drop_in_caller(), true);
    END IF;

    now_at := ratelimit.clock_now();
    IF ratelimit.drop_in_engine() IS NOT NULL THEN
        now_micros := (EXTRACT(epoch FROM now_at) * 1000000)::bigint;
        SELECT w.counted INTO counted
        FROM ratelimit.drop_in_count_in_window('check_rate_limit', ratelimit.drop_in_engine(), 'drop-in/rpc_rate_limits',
                                               p_user_id::text || ':' || p_rpc_name, now_micros,
                                               now_micros + window_micros, true, 1) AS w;
    ELSE
        -- RollingWindow's transition under the row's lock: a window restarts only once the
        -- window_expires_at it was opened with has passed, whatever length a later call (or an
        -- edited policy) gives; call_count saturates. The row is updated where it is; a first
        -- call makes it, INSERT ... ON CONFLICT updating it if a concurrent first call did.
        -- A read-only transaction's refusal names the INSERT, as the C edition's does.
        IF pg_catalog.current_setting('transaction_read_only') = 'off' THEN
            UPDATE @extschema@.rpc_rate_limits AS r SET
                call_count = CASE WHEN r.window_expires_at < now_at THEN 1
                                  ELSE r.call_count + (r.call_count < 2147483647)::integer END,
                window_start = CASE WHEN r.window_expires_at < now_at THEN now_at ELSE r.window_start END,
                window_expires_at = CASE WHEN r.window_expires_at < now_at
                                         THEN now_at + window_micros * interval '1 microsecond'
                                         ELSE r.window_expires_at END
            WHERE r.user_id = p_user_id AND r.rpc_name = p_rpc_name
            RETURNING r.call_count INTO counted;
        END IF;
        IF counted IS NULL THEN
            INSERT INTO @extschema@.rpc_rate_limits AS r
                (user_id, rpc_name, call_count, window_start, window_expires_at)
            VALUES (p_user_id, p_rpc_name, 1, now_at, now_at + window_micros * interval '1 microsecond')
            ON CONFLICT (user_id, rpc_name) DO UPDATE SET
                call_count = CASE WHEN r.window_expires_at < now_at THEN 1
                                  ELSE r.call_count + (r.call_count < 2147483647)::integer END,
                window_start = CASE WHEN r.window_expires_at < now_at THEN now_at ELSE r.window_start END,
                window_expires_at = CASE WHEN r.window_expires_at < now_at
                                         THEN now_at + window_micros * interval '1 microsecond'
                                         ELSE r.window_expires_at END
            RETURNING r.call_count INTO counted;
        END IF;
    END IF;
    RETURN counted < 2147483647 AND counted <= enforced_limit;
END
$$;
-- @end ratelimit_rpc_limits_check_rate_limit_for_user
