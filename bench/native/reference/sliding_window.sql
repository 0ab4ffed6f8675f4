-- plpgsql reference of sliding_window, the exact log: at most p_limit units in any span of
-- p_period. The log keeps (instant, units) pairs, flattened and oldest first, in the row's log
-- column; instant keeps the latest instant the key has seen. The same decisions, state row
-- and waits as ratelimit.consume(..., p_algorithm => 'sliding_window', p_engine => p_engine).
-- How the references are written:
-- bench/native/reference/fixed_window.sql.
--
-- The log is walked with plpgsql loops over an array variable (plpgsql keeps it expanded, so
-- reading an element is direct): cheaper for a log of tens of entries than handing it to SQL
-- (unnest and an aggregate in a query per call).
CREATE FUNCTION bench.sliding_window(
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
    v_log       bigint[];
    n           integer;  -- values in the log: 2 per entry
    t           bigint;
    v_first     integer;  -- index of the first entry still counted (its instant)
    v_used      bigint := 0;
    v_left      bigint;
    i           integer;
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
    IF s.algorithm = 3 THEN
        v_log := coalesce(s.log, '{}');
    ELSE
        v_log := '{}';
        s.instant := 0;
    END IF;
    n := coalesce(array_length(v_log, 1), 0);
    t := greatest(v_at, s.instant);  -- a clock behind the state stands still
    IF n > 0 THEN
        t := greatest(t, v_log[n - 1]);
    END IF;

    -- Entries at or before t - P no longer count.
    v_first := 1;
    WHILE v_first < n AND v_log[v_first] <= t - v_period LOOP
        v_first := v_first + 2;
    END LOOP;
    i := v_first + 1;
    WHILE i <= n LOOP
        v_used := v_used + v_log[i];
        i := i + 2;
    END LOOP;

    v_allowed := p_cost = 0 OR v_used + p_cost <= p_limit;
    IF v_allowed AND p_cost > 0 AND NOT v_blocked THEN
        IF v_first > 1 THEN
            v_log := v_log[v_first:n];
            n := n - v_first + 1;
        END IF;
        IF n > 0 AND v_log[n - 1] = t THEN
            v_log[n] := v_log[n] + p_cost;
        ELSE
            v_log := v_log || ARRAY[t, p_cost::bigint];
            n := n + 2;
        END IF;
        v_used := v_used + p_cost;
        IF p_engine = 'table' THEN
            UPDATE bench.key_state
            SET algorithm = 3, instant = t, amount = 0, carry = 0, log = v_log,
                expires_at = greatest(t + v_period, s.blocked_until)
            WHERE key = p_key;
        ELSE
            UPDATE bench.key_state_unlogged
            SET algorithm = 3, instant = t, amount = 0, carry = 0, log = v_log,
                expires_at = greatest(t + v_period, s.blocked_until)
            WHERE key = p_key;
        END IF;
    ELSIF NOT v_allowed THEN
        -- The call fits once enough of the oldest entries have left the window.
        v_left := v_used;
        i := v_first;
        WHILE i < n LOOP
            v_left := v_left - v_log[i + 1];
            IF v_left + p_cost <= p_limit THEN
                v_retry := greatest(0, v_log[i] + v_period - v_at);
                EXIT;
            END IF;
            i := i + 2;
        END LOOP;
    END IF;

    v_remaining := p_limit - v_used;
    v_reset := CASE WHEN v_used > 0 THEN greatest(0, v_log[n - 1] + v_period - v_at) ELSE 0 END;

    RETURN ROW(v_allowed AND NOT v_blocked, p_limit,
               CASE WHEN v_blocked THEN 0 ELSE greatest(0, v_remaining) END,
               bench.ms(v_at - v_now + v_retry), bench.ms(v_at - v_now + v_reset))::bench.decision;
END
$$;
