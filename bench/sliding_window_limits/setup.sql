-- Benchmark database for the sliding-window limits: the extension, plus a plpgsql reference of
-- the original check_rate_limit (sum the key's per-second buckets in the window, then upsert the current
-- bucket if allowed) made exact like the extension's, on a table of the same kind as the
-- extension's, so that the two differ only in how a call is decided and recorded.
--
-- The original function is not the reference: it reads the sum without a lock, so two
-- concurrent calls can both see room for one more and both be recorded (the original accepts
-- this overage). The reference takes a per-key transaction advisory lock first, as the
-- extension does, so it gives the same answers under concurrency. It also leaves out the
-- original in-call DELETE of old buckets: the extension cleans up from a scheduled job instead
-- (the original's own alternative), so neither side cleans up during a call.
\set ON_ERROR_STOP on

CREATE EXTENSION ratelimit_sliding_window_limits CASCADE;

-- Same columns, constraints, fillfactor, indexes and logging as the extension's
-- rate_limit_buckets.
CREATE TABLE bench_rate_limit_buckets (
    key            text        NOT NULL,
    bucket_time    timestamptz NOT NULL,
    count          integer     NOT NULL DEFAULT 1,
    window_seconds integer     NOT NULL,
    PRIMARY KEY (key, bucket_time)
) WITH (fillfactor = 70);
CREATE INDEX ON bench_rate_limit_buckets (bucket_time);
ALTER TABLE bench_rate_limit_buckets ENABLE ROW LEVEL SECURITY;

-- A call at instant t is recorded in the bucket of its whole second; a bucket starting at s
-- counts while s > t - window; a call of p_cost is allowed iff the counted sum plus p_cost is
-- within the limit, and only allowed calls are recorded. When denied, retry_after is the wait,
-- in whole seconds rounded up (at least 1), until enough of the oldest buckets have left the
-- window for the call to fit. SECURITY DEFINER with a pinned search_path like the extension's
-- function; the clock is read once per call before the lock, as the extension does.
CREATE FUNCTION bench_plpgsql_check_rate_limit(
    p_key text,
    p_limit integer,
    p_window_seconds integer,
    p_cost integer DEFAULT 1)
RETURNS TABLE(allowed boolean, current_count integer, retry_after integer)
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = public, pg_temp
AS $$
DECLARE
    v_now       timestamptz := clock_timestamp();
    v_window    interval := make_interval(secs => p_window_seconds);
    v_current   integer;
    v_remaining integer;
    v_bucket    record;
BEGIN
    -- Callers of one key take turns, and each one's statements see every call committed before
    -- it (READ COMMITTED): no two calls can both take the last unit of room.
    PERFORM pg_advisory_xact_lock(hashtext(p_key));

    SELECT coalesce(sum(b.count), 0) INTO v_current
    FROM bench_rate_limit_buckets b
    WHERE b.key = p_key AND b.bucket_time > v_now - v_window;

    IF v_current + p_cost <= p_limit THEN
        INSERT INTO bench_rate_limit_buckets AS b (key, bucket_time, count, window_seconds)
        VALUES (p_key, date_trunc('second', v_now), p_cost, p_window_seconds)
        ON CONFLICT (key, bucket_time) DO UPDATE SET
            count = b.count + EXCLUDED.count,
            window_seconds = greatest(b.window_seconds, EXCLUDED.window_seconds);
        RETURN QUERY SELECT true, v_current + p_cost, 0;
        RETURN;
    END IF;

    -- Denied: walk the buckets out of the window, oldest first, until the call would fit.
    v_remaining := v_current;
    FOR v_bucket IN
        SELECT b.bucket_time, b.count
        FROM bench_rate_limit_buckets b
        WHERE b.key = p_key AND b.bucket_time > v_now - v_window
        ORDER BY b.bucket_time
    LOOP
        v_remaining := v_remaining - v_bucket.count;
        IF v_remaining + p_cost <= p_limit THEN
            RETURN QUERY SELECT false, v_current,
                greatest(1, ceil(extract(epoch FROM v_bucket.bucket_time + v_window - v_now))::integer);
            RETURN;
        END IF;
    END LOOP;
    RETURN QUERY SELECT false, v_current, p_window_seconds;  -- p_cost > p_limit never fits
END
$$;
