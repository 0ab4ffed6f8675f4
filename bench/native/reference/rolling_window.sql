-- plpgsql reference of rolling_window: a window of p_period opens at the first call after the
-- previous one closed, and allows p_limit units. The same decisions, state row and waits as
-- ratelimit.consume(..., p_algorithm => 'rolling_window', p_engine => p_engine).
-- How the references are written:
-- bench/native/reference/fixed_window.sql.
CREATE FUNCTION bench.rolling_window(
    p_key text,
    p_limit integer,
    p_period interval,
    p_cost integer DEFAULT 1,
    p_engine text DEFAULT 'table')
RETURNS bench.decision
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_now       constant bigint := (extract(epoch FROM ratelimit.clock_now()) * 1000000)::bigint;
    v_period    bigint;
    s           bench.key_state;
    v_blocked   boolean;
    v_at        bigint;
    v_allowed   boolean;
    v_remaining bigint;
    v_retry     bigint := 0;
    v_reset     bigint;
    t           bigint;
    v_active    boolean;  -- the window opened at s.instant is still open
    v_used      bigint;
BEGIN
    IF p_key IS NULL OR p_limit IS NULL OR p_period IS NULL OR p_cost IS NULL OR p_engine IS NULL THEN
        RAISE EXCEPTION '% must not be NULL',
            CASE WHEN p_key IS NULL THEN 'p_key' WHEN p_limit IS NULL THEN 'p_limit'
                 WHEN p_period IS NULL THEN 'p_period' WHEN p_cost IS NULL THEN 'p_cost'
                 ELSE 'p_engine' END
            USING ERRCODE = 'null_value_not_allowed';
    END IF;
    IF octet_length(p_key) NOT BETWEEN 1 AND 256 THEN
        RAISE EXCEPTION 'p_key must be 1 to 256 bytes long' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF p_limit < 1 THEN
        RAISE EXCEPTION 'p_limit must be greater than zero' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF p_period < interval '1 millisecond' OR p_period > interval '365 days'
       OR date_trunc('month', p_period) <> interval '0' THEN
        RAISE EXCEPTION 'p_period must be 1 millisecond to 365 days, without months'
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF p_cost NOT BETWEEN 0 AND p_limit THEN
        RAISE EXCEPTION 'p_cost must be 0 to p_limit' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    v_period := (extract(epoch FROM p_period) * 1000000)::bigint;

    IF p_engine = 'table' THEN
        LOOP
            SELECT * INTO s FROM bench.key_state WHERE key = p_key FOR NO KEY UPDATE;
            EXIT WHEN FOUND;
            INSERT INTO bench.key_state VALUES (p_key, 0, 0, 0, 0, NULL, 0, 0)
            ON CONFLICT (key) DO NOTHING;
        END LOOP;
    ELSIF p_engine = 'unlogged' THEN
        LOOP
            SELECT * INTO s FROM bench.key_state_unlogged WHERE key = p_key FOR NO KEY UPDATE;
            EXIT WHEN FOUND;
            INSERT INTO bench.key_state_unlogged VALUES (p_key, 0, 0, 0, 0, NULL, 0, 0)
            ON CONFLICT (key) DO NOTHING;
        END LOOP;
    ELSE
        RAISE EXCEPTION 'p_engine must be one of table, unlogged' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    v_blocked := v_now < s.blocked_until;
    v_at := CASE WHEN v_blocked THEN s.blocked_until ELSE v_now END;

    -- Another algorithm's state reads as fresh; a block stays.
    IF s.algorithm <> 2 THEN
        s.instant := 0;
        s.amount := 0;
    END IF;
    t := greatest(v_at, s.instant);  -- a clock behind the state stands still
    v_active := s.amount > 0 AND t < s.instant + v_period;
    v_used := CASE WHEN v_active THEN s.amount ELSE 0 END;

    v_allowed := p_cost = 0 OR v_used + p_cost <= p_limit;
    IF v_allowed AND p_cost > 0 AND NOT v_blocked THEN
        IF NOT v_active THEN
            s.instant := t;  -- this call opens a new window
            v_active := true;
        END IF;
        v_used := v_used + p_cost;
        IF p_engine = 'table' THEN
            UPDATE bench.key_state
            SET algorithm = 2, instant = s.instant, amount = v_used, carry = 0, log = NULL,
                expires_at = greatest(s.instant + v_period, s.blocked_until)
            WHERE key = p_key;
        ELSE
            UPDATE bench.key_state_unlogged
            SET algorithm = 2, instant = s.instant, amount = v_used, carry = 0, log = NULL,
                expires_at = greatest(s.instant + v_period, s.blocked_until)
            WHERE key = p_key;
        END IF;
    END IF;

    v_remaining := p_limit - v_used;
    IF NOT v_allowed THEN
        v_retry := greatest(0, s.instant + v_period - v_at);
    END IF;
    v_reset := CASE WHEN v_active THEN greatest(0, s.instant + v_period - v_at) ELSE 0 END;

    RETURN ROW(v_allowed AND NOT v_blocked, p_limit,
               CASE WHEN v_blocked THEN 0 ELSE greatest(0, v_remaining) END,
               bench.ms(v_at - v_now + v_retry), bench.ms(v_at - v_now + v_reset))::bench.decision;
END
$$;
