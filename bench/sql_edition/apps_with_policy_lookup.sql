-- What a drop-in costs at the least in PL/pgSQL: each app's own limiter (its bench/<app>/setup.sql
-- function, on the same table) with only the one lookup a drop-in cannot leave out, its policy
-- (rpc.<name>, endpoint.<name>) in ratelimit.policies, whose limit wins when there is one. Run in
-- that app's database of bench/sql_edition.sh, after its setup.
\set ON_ERROR_STOP on

SELECT pg_catalog.to_regproc('public.bench_plpgsql_check_rate_limit') IS NOT NULL AS rpc_app \gset
\if :rpc_app
CREATE FUNCTION bench_with_policy_lookup_check_rate_limit(
    p_user_id uuid,
    p_rpc_name text,
    p_max_calls integer,
    p_window_minutes integer)
RETURNS boolean
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = public, pg_temp
AS $$
DECLARE
    v_now          timestamptz := clock_timestamp();
    v_cutoff       timestamptz := v_now - make_interval(mins => p_window_minutes);
    v_call_count   integer;
    v_policy_limit integer;
BEGIN
    SELECT p."limit" INTO v_policy_limit FROM ratelimit.policies p WHERE p.name = 'rpc.' || p_rpc_name;
    LOOP
        UPDATE bench_rpc_rate_limits
        SET call_count   = CASE WHEN window_start < v_cutoff THEN 1 ELSE call_count + 1 END,
            window_start = CASE WHEN window_start < v_cutoff THEN v_now ELSE window_start END
        WHERE user_id = p_user_id AND rpc_name = p_rpc_name
        RETURNING call_count INTO v_call_count;
        IF FOUND THEN
            EXIT;
        END IF;

        BEGIN
            INSERT INTO bench_rpc_rate_limits (user_id, rpc_name, call_count, window_start)
            VALUES (p_user_id, p_rpc_name, 1, v_now)
            RETURNING call_count INTO v_call_count;
            EXIT;
        EXCEPTION
            WHEN unique_violation THEN
                NULL;
        END;
    END LOOP;

    RETURN v_call_count <= coalesce(v_policy_limit, p_max_calls);
END
$$;
\endif

SELECT pg_catalog.to_regproc('public.bench_plpgsql_increment_rate_limit') IS NOT NULL AS endpoint_app \gset
\if :endpoint_app
CREATE FUNCTION bench_with_policy_lookup_increment_rate_limit(
    p_user_id uuid,
    p_endpoint text,
    p_limit integer,
    p_window_seconds integer,
    p_increment integer DEFAULT 1)
RETURNS jsonb
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = public, pg_temp
AS $$
DECLARE
    v_now          timestamptz := clock_timestamp();
    v_window_start timestamptz :=
        date_bin(make_interval(secs => p_window_seconds), v_now, timestamptz '1970-01-01 00:00:00+00');
    v_window_end   timestamptz := v_window_start + make_interval(secs => p_window_seconds);
    v_counter      integer;
    v_policy_limit integer;
    v_allowed      boolean;
BEGIN
    SELECT p."limit" INTO v_policy_limit FROM ratelimit.policies p WHERE p.name = 'endpoint.' || p_endpoint;
    INSERT INTO bench_rate_limits AS r (user_id, endpoint, counter, window_start, expires_at, created_at)
    VALUES (p_user_id, p_endpoint, p_increment, v_window_start, v_window_end, v_now)
    ON CONFLICT (user_id, endpoint, window_start) DO UPDATE SET counter = r.counter + p_increment
    RETURNING r.counter INTO v_counter;

    v_allowed := v_counter <= coalesce(v_policy_limit, p_limit);
    RETURN jsonb_build_object(
        'allowed', v_allowed,
        'current', v_counter,
        'limit', coalesce(v_policy_limit, p_limit),
        'retryAfter', CASE WHEN v_allowed THEN 0
                           ELSE ceil(extract(epoch FROM v_window_end - v_now))::integer END);
END
$$;
\endif
