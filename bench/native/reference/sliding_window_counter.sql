-- plpgsql reference of sliding_window_counter: the previous aligned window's units, weighted by
-- the part of it still inside the sliding span of p_period, plus the current window's, never
-- exceed p_limit. The same decisions, state row and waits as ratelimit.consume(...,
-- p_algorithm => 'sliding_window_counter', p_engine => p_engine). How the references are written:
-- bench/native/reference/fixed_window.sql.
--
-- Counts are weighted in units of 1/P so everything stays an integer; a count times P can
-- exceed 64 bits (2^31 units times 365 days in microseconds), hence numeric for those products.
CREATE FUNCTION bench.sliding_window_counter(
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
    w           bigint;   -- start of the current window
    v_current   bigint := 0;
    v_previous  bigint := 0;
    v_weighted  numeric;  -- previous * (P - elapsed) + current * P
    v_capacity  numeric;  -- limit * P
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
    IF s.algorithm <> 4 THEN
        s.instant := 0;
        s.amount := 0;
        s.carry := 0;
    END IF;
    t := greatest(v_at, s.instant);  -- a clock behind the state stands still
    w := t - t % v_period;
    IF s.instant = w THEN
        v_current := s.amount;
        v_previous := s.carry;
    ELSIF s.instant = w - v_period THEN
        v_previous := s.amount;
    END IF;

    v_weighted := v_previous::numeric * (v_period - (t - w)) + v_current::numeric * v_period;
    v_capacity := p_limit::numeric * v_period;
    v_allowed := p_cost = 0 OR v_weighted + p_cost::numeric * v_period <= v_capacity;
    IF v_allowed AND p_cost > 0 AND NOT v_blocked THEN
        v_current := v_current + p_cost;
        v_weighted := v_weighted + p_cost::numeric * v_period;
        IF p_engine = 'table' THEN
            UPDATE bench.key_state
            SET algorithm = 4, instant = w, amount = v_current, carry = v_previous, log = NULL,
                expires_at = greatest(w + 2 * v_period, s.blocked_until)
            WHERE key = p_key;
        ELSE
            UPDATE bench.key_state_unlogged
            SET algorithm = 4, instant = w, amount = v_current, carry = v_previous, log = NULL,
                expires_at = greatest(w + 2 * v_period, s.blocked_until)
            WHERE key = p_key;
        END IF;
    ELSIF NOT v_allowed THEN
        IF v_current + p_cost <= p_limit THEN
            -- Fits in this window once enough of the previous one has slid out.
            v_retry := w + v_period
                       - div((p_limit - v_current - p_cost)::numeric * v_period, v_previous)::bigint;
        ELSE
            -- Fits in the next window, where this window's units become the weighted ones.
            v_retry := w + 2 * v_period
                       - div((p_limit - p_cost)::numeric * v_period, v_current)::bigint;
        END IF;
        v_retry := greatest(0, v_retry - v_at);
    END IF;

    v_remaining := CASE WHEN v_capacity <= v_weighted THEN 0
                        ELSE div(v_capacity - v_weighted, v_period) END;
    v_reset := greatest(0, CASE WHEN v_current > 0 THEN w + 2 * v_period
                                WHEN v_previous > 0 THEN w + v_period
                                ELSE v_at END - v_at);

    RETURN ROW(v_allowed AND NOT v_blocked, p_limit,
               CASE WHEN v_blocked THEN 0 ELSE greatest(0, v_remaining) END,
               bench.ms(v_at - v_now + v_retry), bench.ms(v_at - v_now + v_reset))::bench.decision;
END
$$;
