-- plpgsql reference of token_bucket: a bucket of p_burst tokens (p_limit when NULL), refilled
-- continuously at p_limit per p_period; a call takes p_cost tokens. The same decisions, state
-- row and waits as ratelimit.consume(..., p_algorithm => 'token_bucket', p_engine => p_engine,
-- p_burst => p_burst). How the references are written:
-- bench/native/reference/fixed_window.sql.
--
-- The row keeps whole tokens (amount) and the fraction of the next one in 1/P (carry), so the
-- refill is exact. Elapsed microseconds times the rate, and tokens times P, can exceed 64 bits:
-- numeric for those products.
CREATE FUNCTION bench.token_bucket(
    p_key text,
    p_limit integer,
    p_period interval,
    p_cost integer DEFAULT 1,
    p_engine text DEFAULT 'table',
    p_burst integer DEFAULT NULL)
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
    v_burst     bigint;
    t           bigint;
    v_total     numeric;  -- carried fraction plus what dripped in since s.instant, in 1/P
    v_tokens    bigint;
    v_fraction  bigint;   -- of the next token, in 1/P
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
    IF p_burst < 1 THEN
        RAISE EXCEPTION 'p_burst must be greater than zero' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    v_burst := coalesce(p_burst, p_limit);
    IF p_cost NOT BETWEEN 0 AND v_burst THEN
        RAISE EXCEPTION 'p_cost must be 0 to p_burst' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    v_period := (extract(epoch FROM p_period) * 1000000)::bigint;
    -- An empty bucket refills in B * P / N: at most 365 days, as the extension requires.
    IF v_burst::numeric * v_period > p_limit::numeric * 31536000000000 THEN
        RAISE EXCEPTION 'p_burst is too large: refilling it (p_burst * p_period / p_limit) must take at most 365 days'
            USING ERRCODE = 'invalid_parameter_value';
    END IF;

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

    IF s.algorithm = 5 THEN
        t := greatest(v_at, s.instant);  -- a clock behind the state stands still
        v_total := s.carry + (t - s.instant)::numeric * p_limit;
        IF s.amount + div(v_total, v_period) >= v_burst THEN
            v_tokens := v_burst;
            v_fraction := 0;
        ELSE
            v_tokens := s.amount + div(v_total, v_period);
            v_fraction := mod(v_total, v_period);
        END IF;
    ELSE
        -- Another algorithm's state reads as fresh (a full bucket); a block stays.
        t := v_at;
        v_tokens := v_burst;
        v_fraction := 0;
    END IF;

    v_allowed := p_cost = 0 OR v_tokens >= p_cost;
    IF v_allowed AND p_cost > 0 AND NOT v_blocked THEN
        v_tokens := v_tokens - p_cost;
    END IF;
    -- The time the missing tokens take to drip in, rounded up.
    v_reset := CASE WHEN v_tokens >= v_burst THEN 0
                    ELSE t - v_at + div(((v_burst - v_tokens)::numeric * v_period - v_fraction)
                                        + p_limit - 1, p_limit)::bigint END;
    IF v_allowed AND p_cost > 0 AND NOT v_blocked THEN
        IF p_engine = 'table' THEN
            UPDATE bench.key_state
            SET algorithm = 5, instant = t, amount = v_tokens, carry = v_fraction, log = NULL,
                expires_at = greatest(v_at + v_reset, t, s.blocked_until)
            WHERE key = p_key;
        ELSE
            UPDATE bench.key_state_unlogged
            SET algorithm = 5, instant = t, amount = v_tokens, carry = v_fraction, log = NULL,
                expires_at = greatest(v_at + v_reset, t, s.blocked_until)
            WHERE key = p_key;
        END IF;
    ELSIF NOT v_allowed THEN
        v_retry := t - v_at + div(((p_cost - v_tokens)::numeric * v_period - v_fraction)
                                  + p_limit - 1, p_limit)::bigint;
    END IF;
    v_remaining := v_tokens;

    RETURN ROW(v_allowed AND NOT v_blocked, v_burst,
               CASE WHEN v_blocked THEN 0 ELSE greatest(0, v_remaining) END,
               bench.ms(v_at - v_now + v_retry), bench.ms(v_at - v_now + v_reset))::bench.decision;
END
$$;
