-- The SQL edition's body of the C function of sql/drop_ins/endpoint_limits.sql (the extension
-- ratelimit_sql_endpoint_limits), deciding as src/pg/drop_ins/endpoint_limits.cpp does: windows
-- aligned to multiples of their length since the epoch, every call counted, allowed or not. A
-- call is counted in rate_limits, or with ratelimit.dropin_engine = unlogged in the unlogged
-- engine's namespace drop-in/rate_limits, under "<user id>:<endpoint>".

-- increment_rate_limit(...) RETURNS jsonb {allowed, current, limit, retryAfter}.
-- @begin ratelimit_endpoint_limits_increment_rate_limit
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    policy_limit integer;
    policy_period interval;
    policy_time_zone text;
    enforced_limit bigint := p_limit;
    window_micros bigint := p_window_seconds * 1000000::bigint;
    caller uuid;
    now_at timestamptz;
    now_micros bigint;
    window_start_micros bigint;
    counted bigint;
    ends_at timestamptz;
    end_micros bigint;
    allowed boolean;
BEGIN
    -- Arguments of usual values pass one test; any others meet every check in the C edition's
    -- order (ratelimit.drop_in_window_arguments).
    IF (p_user_id IS NOT NULL AND octet_length(p_endpoint) BETWEEN 1 AND 256 AND p_limit > 0
        AND p_window_seconds BETWEEN 1 AND 31536000 AND p_increment > 0) IS NOT TRUE THEN
        IF p_user_id IS NULL THEN
            RAISE EXCEPTION 'p_user_id must not be NULL' USING ERRCODE = 'null_value_not_allowed';
        END IF;
        PERFORM ratelimit.drop_in_window_arguments('p_endpoint', p_endpoint, 'p_limit', p_limit,
                                                   'p_window_seconds', p_window_seconds, 31536000,
                                                   'p_increment', p_increment IS NULL);
        IF p_increment <= 0 THEN
            RAISE EXCEPTION 'p_increment must be greater than zero, got %', p_increment
                USING ERRCODE = 'invalid_parameter_value';
        END IF;
    END IF;
    -- The policy endpoint.<name>, if any; ratelimit.drop_in_limit applies it, or the setting
    -- that asks for one: without either the caller's values hold.
    SELECT p."limit", p.period, p.time_zone INTO policy_limit, policy_period, policy_time_zone
    FROM ratelimit.policies p WHERE p.name = 'endpoint.' || p_endpoint;
    IF policy_limit IS NOT NULL OR pg_catalog.current_setting('ratelimit.dropin_require_policy', true) <> '' THEN
        SELECT l.enforced_limit, l.window_micros INTO enforced_limit, window_micros
        FROM ratelimit.drop_in_limit(ARRAY['p_endpoint', 'p_limit', 'p_window_seconds'], 'endpoint.' || p_endpoint,
                                     policy_limit, policy_period, policy_time_zone, 1000000, p_limit,
                                     p_window_seconds) AS l;
    END IF;
    -- A caller with a JWT sub may only spend its own quota, a JWT role without one no quota at
    -- all; trusted callers (service_role, server code: no sub) may name any user.
    caller := ratelimit.drop_in_caller();
    IF caller IS NOT NULL OR ratelimit.drop_in_jwt_role() THEN
        PERFORM ratelimit.drop_in_require_may_act_on('p_user_id', p_user_id, caller, ratelimit.drop_in_jwt_role());
    END IF;

    now_at := ratelimit.clock_now();
    IF ratelimit.drop_in_engine() IS NOT NULL THEN
        now_micros := (EXTRACT(epoch FROM now_at) * 1000000)::bigint;
        -- The aligned window holding now (floor division).
        window_start_micros := now_micros - (now_micros % window_micros + window_micros) % window_micros;
        -- The same windows on the engine: the window still open (expires_at > now), else a
        -- new aligned one.
        SELECT w.counted, w.window_end INTO counted, end_micros
        FROM ratelimit.drop_in_count_in_window('increment_rate_limit', ratelimit.drop_in_engine(), 'drop-in/rate_limits',
                                               p_user_id::text || ':' || p_endpoint, now_micros,
                                               window_start_micros + window_micros, false,
                                               p_increment) AS w;
    ELSE
        -- The window counted in is the one still open for (user_id, endpoint), if any, whatever
        -- p_window_seconds says (a caller would otherwise reset its count by passing another
        -- length); only when none is open does the caller's aligned window start. The open
        -- window's row is incremented where it is, under its row lock; when there is none, one
        -- statement makes the row or, if a concurrent call made it first, increments it.
        -- A read-only transaction's refusal names the INSERT, as the C edition's does.
        IF pg_catalog.current_setting('transaction_read_only') = 'off' THEN
            UPDATE @extschema@.rate_limits AS r SET counter = LEAST(r.counter::bigint + p_increment, 2147483647)::integer
            WHERE r.user_id = p_user_id AND r.endpoint = p_endpoint
              AND r.window_start = (SELECT o.window_start FROM @extschema@.rate_limits AS o
                                    WHERE o.user_id = p_user_id AND o.endpoint = p_endpoint
                                      AND o.window_start <= now_at AND o.expires_at > now_at
                                    ORDER BY o.expires_at DESC LIMIT 1)
            RETURNING r.counter, r.expires_at INTO counted, ends_at;
        END IF;
        IF counted IS NULL THEN
            now_micros := (EXTRACT(epoch FROM now_at) * 1000000)::bigint;
            window_start_micros := now_micros - (now_micros % window_micros + window_micros) % window_micros;
            WITH open_window AS (
                SELECT o.window_start, o.expires_at FROM @extschema@.rate_limits AS o
                WHERE o.user_id = p_user_id AND o.endpoint = p_endpoint
                  AND o.window_start <= now_at AND o.expires_at > now_at
                ORDER BY o.expires_at DESC LIMIT 1)
            INSERT INTO @extschema@.rate_limits AS r
                (user_id, endpoint, counter, window_start, expires_at, created_at)
            SELECT p_user_id, p_endpoint, p_increment,
                   COALESCE(w.window_start, timestamptz 'epoch' + window_start_micros * interval '1 microsecond'),
                   COALESCE(w.expires_at, timestamptz 'epoch'
                                          + (window_start_micros + window_micros) * interval '1 microsecond'),
                   now_at
            FROM (VALUES (1)) AS one LEFT JOIN open_window AS w ON true
            ON CONFLICT (user_id, endpoint, window_start) DO UPDATE SET
                counter = LEAST(r.counter::bigint + p_increment, 2147483647)::integer
            RETURNING r.counter, r.expires_at INTO counted, ends_at;
        END IF;
    END IF;

    -- A saturated counter has lost count: it denies whatever the limit.
    allowed := counted < 2147483647 AND counted <= enforced_limit;
    RETURN jsonb_build_object(
        'allowed', allowed,
        'current', counted,
        'limit', enforced_limit,
        'retryAfter', CASE WHEN allowed THEN 0
                           ELSE (coalesce(end_micros, (EXTRACT(epoch FROM ends_at) * 1000000)::bigint)
                                 - coalesce(now_micros, (EXTRACT(epoch FROM now_at) * 1000000)::bigint)
                                 + 999999) / 1000000 END);
END
$$;
-- @end ratelimit_endpoint_limits_increment_rate_limit
