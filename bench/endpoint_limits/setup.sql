-- Benchmark database for the endpoint limits: the extension, plus a plpgsql reference of the
-- original increment_rate_limit (one INSERT ... ON CONFLICT DO UPDATE on the aligned window's
-- row), on a table of the same kind as the extension's, so that the two differ only in how a
-- call is recorded.
\set ON_ERROR_STOP on

CREATE EXTENSION ratelimit_endpoint_limits CASCADE;

-- Same columns, constraints, fillfactor, indexes and logging as the extension's rate_limits.
CREATE TABLE bench_rate_limits (
    id           uuid        PRIMARY KEY DEFAULT gen_random_uuid(),
    user_id      uuid        NOT NULL,
    endpoint     text        NOT NULL,
    counter      integer     NOT NULL DEFAULT 1,
    window_start timestamptz NOT NULL,
    expires_at   timestamptz NOT NULL,
    created_at   timestamptz NOT NULL DEFAULT now(),
    UNIQUE (user_id, endpoint, window_start)
) WITH (fillfactor = 70);
CREATE INDEX ON bench_rate_limits (expires_at);
ALTER TABLE bench_rate_limits ENABLE ROW LEVEL SECURITY;

-- The original semantics: the window is aligned to a multiple of its length since the epoch;
-- every call adds p_increment, allowed or not; allowed iff the counter is within the limit;
-- retryAfter is the seconds left in the window, rounded up, when denied. SECURITY DEFINER with
-- a pinned search_path like the extension's function, so the per-call overhead of the
-- declaration is the same on both sides; time is clock_timestamp(), as the extension reads the
-- clock at each call. (The extension also saturates the counter at the integer maximum; no run
-- comes near it.)
CREATE FUNCTION bench_plpgsql_increment_rate_limit(
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
    v_allowed      boolean;
BEGIN
    INSERT INTO bench_rate_limits AS r (user_id, endpoint, counter, window_start, expires_at, created_at)
    VALUES (p_user_id, p_endpoint, p_increment, v_window_start, v_window_end, v_now)
    ON CONFLICT (user_id, endpoint, window_start) DO UPDATE SET counter = r.counter + p_increment
    RETURNING r.counter INTO v_counter;

    v_allowed := v_counter <= p_limit;
    RETURN jsonb_build_object(
        'allowed', v_allowed,
        'current', v_counter,
        'limit', p_limit,
        'retryAfter', CASE WHEN v_allowed THEN 0
                           ELSE ceil(extract(epoch FROM v_window_end - v_now))::integer END);
END
$$;
