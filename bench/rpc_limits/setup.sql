-- Benchmark database for the per-RPC limits: the extension, plus a plpgsql reference written
-- the way the game backend's original check_rate_limit is (LOOP + UPDATE with a CASE window
-- reset + INSERT with a unique_violation retry), on a table of the same kind as the
-- extension's, so that the two differ only in how a call is recorded.
\set ON_ERROR_STOP on

CREATE EXTENSION ratelimit_rpc_limits CASCADE;

-- Same columns, constraints, fillfactor and logging as the extension's rpc_rate_limits.
CREATE TABLE bench_rpc_rate_limits (
    id                uuid        PRIMARY KEY DEFAULT gen_random_uuid(),
    user_id           uuid        NOT NULL,
    rpc_name          text        NOT NULL,
    call_count        integer     NOT NULL DEFAULT 1,
    window_start      timestamptz NOT NULL DEFAULT now(),
    ip_address        text,
    window_expires_at timestamptz NOT NULL DEFAULT now(),
    UNIQUE (user_id, rpc_name)
) WITH (fillfactor = 70);
ALTER TABLE bench_rpc_rate_limits ENABLE ROW LEVEL SECURITY;

-- The original algorithm for an explicit user. window_expires_at is not the original's and is
-- left at its default. Declared SECURITY DEFINER with a pinned search_path like the extension's
-- functions, so the per-call overhead of the declaration is the same on both sides; time is
-- clock_timestamp(), as the extension reads the clock at each call.
CREATE FUNCTION bench_plpgsql_check_rate_limit(
    p_user_id uuid,
    p_rpc_name text,
    p_max_calls integer,
    p_window_minutes integer)
RETURNS boolean
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = public, pg_temp
AS $$
DECLARE
    v_now        timestamptz := clock_timestamp();
    v_cutoff     timestamptz := v_now - make_interval(mins => p_window_minutes);
    v_call_count integer;
BEGIN
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
                NULL;  -- a concurrent caller inserted the row first: update it instead
        END;
    END LOOP;

    RETURN v_call_count <= p_max_calls;
END
$$;
