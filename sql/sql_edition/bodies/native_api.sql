-- The SQL edition's bodies of the C functions of sql/install/native_api.sql. The clock is read
-- once; arguments that pass one test of usual values go straight to the decision, any others
-- through every check of the C edition in its order (ratelimit.native_limit); the decisions
-- are sql/sql_edition/native_decisions.sql's. The native API's keys are the namespace '' of
-- the state tables.

-- @begin ratelimit_consume
LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_now constant bigint := (extract(epoch FROM ratelimit.clock_now()) * 1000000)::bigint;
    v_algorithm constant smallint := pg_catalog.array_position(
        ARRAY['fixed_window', 'rolling_window', 'sliding_window', 'sliding_window_counter', 'token_bucket', 'gcra'],
        p_algorithm);
    -- p_period in microseconds, when it has no months and no time zone comes with it (held
    -- within bigint: the checks below refuse what was cut).
    v_p constant bigint := CASE WHEN p_time_zone IS NULL AND pg_catalog.isfinite(p_period)
                                     AND pg_catalog.date_trunc('month', p_period) = interval '0'
                                THEN least(greatest(extract(epoch FROM p_period) * 1000000, -1), 31536000000001) END;
    v_instant bigint;
    v_amount bigint;
    v_carry bigint;
    l record;  -- ratelimit.limit_values, which is made after this function
    r record;  -- ratelimit.state_decision
BEGIN
    IF pg_catalog.octet_length(p_key) BETWEEN 1 AND 256
       AND v_p BETWEEN 1000 AND 31536000000000 AND extract(day FROM p_period) BETWEEN -106751991 AND 106751991
       AND p_limit > 0 AND p_cost >= 0 AND v_algorithm IS NOT NULL AND p_engine IN ('table', 'unlogged')
       AND (p_burst IS NULL OR (v_algorithm >= 5 AND p_burst > 0
                                AND p_burst::numeric * v_p <= p_limit::numeric * 31536000000000))
       AND v_now BETWEEN 0 AND 253402300800000000
       AND p_max_wait IS NULL
       AND pg_catalog.current_setting('transaction_read_only') = 'off' THEN
        IF p_cost > 0 AND p_cost <= coalesce(p_burst, p_limit) THEN
            -- The usual allowed consume, decided and written by one statement on the latest
            -- version, then a key without a row: ratelimit.key_apply's first steps (its
            -- comment says why they are exact), made here without the call, for the call
            -- applications make most.
            IF v_algorithm = 1 THEN
                -- The window holding now. A row whose window starts later (the clock went back)
                -- is left to ratelimit.key_apply, as is every case these statements do not
                -- decide; for the others greatest(now, instant) is now.
                v_instant := v_now - v_now % v_p;
                IF p_engine = 'table' THEN
                    UPDATE ratelimit.key_state
                    SET instant = v_instant,
                        amount = (CASE WHEN instant = v_instant THEN amount ELSE 0 END) + p_cost,
                        expires_at = greatest(v_instant + v_p, blocked_until)
                    WHERE policy = '' AND key = p_key AND algorithm = 1 AND carry = 0 AND log IS NULL
                      AND blocked_until <= v_now AND instant <= v_now
                      AND (CASE WHEN instant = v_instant THEN amount ELSE 0 END) + p_cost <= p_limit
                    RETURNING amount INTO v_amount;
                ELSE
                    UPDATE ratelimit.key_state_unlogged
                    SET instant = v_instant,
                        amount = (CASE WHEN instant = v_instant THEN amount ELSE 0 END) + p_cost,
                        expires_at = greatest(v_instant + v_p, blocked_until)
                    WHERE policy = '' AND key = p_key AND algorithm = 1 AND carry = 0 AND log IS NULL
                      AND blocked_until <= v_now AND instant <= v_now
                      AND (CASE WHEN instant = v_instant THEN amount ELSE 0 END) + p_cost <= p_limit
                    RETURNING amount INTO v_amount;
                END IF;
                IF FOUND THEN
                    RETURN ROW(true, p_limit, p_limit - v_amount, 0,
                               (greatest(0, v_instant + v_p - v_now) + 999) / 1000)::ratelimit.decision;
                END IF;
            ELSIF v_algorithm = 2 THEN
                IF p_engine = 'table' THEN
                    UPDATE ratelimit.key_state
                    SET instant = CASE WHEN amount > 0 AND v_now < instant + v_p THEN instant ELSE v_now END,
                        amount = (CASE WHEN amount > 0 AND v_now < instant + v_p THEN amount ELSE 0 END) + p_cost,
                        expires_at = greatest((CASE WHEN amount > 0 AND v_now < instant + v_p
                                                    THEN instant ELSE v_now END) + v_p, blocked_until)
                    WHERE policy = '' AND key = p_key AND algorithm = 2 AND carry = 0 AND log IS NULL
                      AND blocked_until <= v_now AND instant <= v_now
                      AND (CASE WHEN amount > 0 AND v_now < instant + v_p THEN amount ELSE 0 END) + p_cost <= p_limit
                    RETURNING instant, amount INTO v_instant, v_amount;
                ELSE
                    UPDATE ratelimit.key_state_unlogged
                    SET instant = CASE WHEN amount > 0 AND v_now < instant + v_p THEN instant ELSE v_now END,
                        amount = (CASE WHEN amount > 0 AND v_now < instant + v_p THEN amount ELSE 0 END) + p_cost,
                        expires_at = greatest((CASE WHEN amount > 0 AND v_now < instant + v_p
                                                    THEN instant ELSE v_now END) + v_p, blocked_until)
                    WHERE policy = '' AND key = p_key AND algorithm = 2 AND carry = 0 AND log IS NULL
                      AND blocked_until <= v_now AND instant <= v_now
                      AND (CASE WHEN amount > 0 AND v_now < instant + v_p THEN amount ELSE 0 END) + p_cost <= p_limit
                    RETURNING instant, amount INTO v_instant, v_amount;
                END IF;
                IF FOUND THEN
                    RETURN ROW(true, p_limit, p_limit - v_amount, 0,
                               (greatest(0, v_instant + v_p - v_now) + 999) / 1000)::ratelimit.decision;
                END IF;
            ELSIF v_algorithm = 4 THEN
                v_instant := v_now - v_now % v_p;
                IF p_engine = 'table' THEN
                    UPDATE ratelimit.key_state
                    SET instant = v_instant,
                        amount = (CASE WHEN instant = v_instant THEN amount ELSE 0 END) + p_cost,
                        carry = CASE WHEN instant = v_instant THEN carry WHEN instant = v_instant - v_p THEN amount ELSE 0 END,
                        expires_at = greatest(v_instant + 2 * v_p, blocked_until)
                    WHERE policy = '' AND key = p_key AND algorithm = 4 AND log IS NULL
                      AND blocked_until <= v_now AND instant <= v_now
                      AND (CASE WHEN instant = v_instant THEN carry WHEN instant = v_instant - v_p THEN amount ELSE 0 END)::numeric
                          * (v_p - (v_now - v_instant))
                          + ((CASE WHEN instant = v_instant THEN amount ELSE 0 END) + p_cost)::numeric * v_p
                          <= p_limit::numeric * v_p
                    RETURNING amount, carry INTO v_amount, v_carry;
                ELSE
                    UPDATE ratelimit.key_state_unlogged
                    SET instant = v_instant,
                        amount = (CASE WHEN instant = v_instant THEN amount ELSE 0 END) + p_cost,
                        carry = CASE WHEN instant = v_instant THEN carry WHEN instant = v_instant - v_p THEN amount ELSE 0 END,
                        expires_at = greatest(v_instant + 2 * v_p, blocked_until)
                    WHERE policy = '' AND key = p_key AND algorithm = 4 AND log IS NULL
                      AND blocked_until <= v_now AND instant <= v_now
                      AND (CASE WHEN instant = v_instant THEN carry WHEN instant = v_instant - v_p THEN amount ELSE 0 END)::numeric
                          * (v_p - (v_now - v_instant))
                          + ((CASE WHEN instant = v_instant THEN amount ELSE 0 END) + p_cost)::numeric * v_p
                          <= p_limit::numeric * v_p
                    RETURNING amount, carry INTO v_amount, v_carry;
                END IF;
                IF FOUND THEN
                    RETURN ROW(true, p_limit,
                               greatest(0, pg_catalog.div(p_limit::numeric * v_p - v_carry::numeric * (v_p - (v_now - v_instant))
                                                          - v_amount::numeric * v_p, v_p)),
                               0, (v_instant + 2 * v_p - v_now + 999) / 1000)::ratelimit.decision;
                END IF;
            ELSIF v_algorithm >= 5 THEN
                IF p_engine = 'table' THEN
                    UPDATE ratelimit.key_state
                    SET instant = v_now,
                        amount = least(amount + pg_catalog.div(carry + (v_now - instant)::numeric * p_limit, v_p), coalesce(p_burst, p_limit)::bigint)
                                 - p_cost,
                        carry = CASE WHEN amount + pg_catalog.div(carry + (v_now - instant)::numeric * p_limit, v_p) >= coalesce(p_burst, p_limit)::bigint
                                     THEN 0 ELSE pg_catalog.mod(carry + (v_now - instant)::numeric * p_limit, v_p) END,
                        expires_at = greatest(v_now + pg_catalog.div(
                            CASE WHEN amount + pg_catalog.div(carry + (v_now - instant)::numeric * p_limit, v_p) >= coalesce(p_burst, p_limit)::bigint
                                 THEN p_cost::numeric * v_p
                                 ELSE (coalesce(p_burst, p_limit)::bigint + p_cost - amount)::numeric * v_p - carry - (v_now - instant)::numeric * p_limit END
                            + p_limit - 1, p_limit), blocked_until)
                    WHERE policy = '' AND key = p_key AND algorithm = v_algorithm AND log = ARRAY[p_limit, v_p]
                      AND blocked_until <= v_now AND instant <= v_now
                      AND amount + pg_catalog.div(carry + (v_now - instant)::numeric * p_limit, v_p) >= p_cost
                    RETURNING amount, carry INTO v_amount, v_carry;
                ELSE
                    UPDATE ratelimit.key_state_unlogged
                    SET instant = v_now,
                        amount = least(amount + pg_catalog.div(carry + (v_now - instant)::numeric * p_limit, v_p), coalesce(p_burst, p_limit)::bigint)
                                 - p_cost,
                        carry = CASE WHEN amount + pg_catalog.div(carry + (v_now - instant)::numeric * p_limit, v_p) >= coalesce(p_burst, p_limit)::bigint
                                     THEN 0 ELSE pg_catalog.mod(carry + (v_now - instant)::numeric * p_limit, v_p) END,
                        expires_at = greatest(v_now + pg_catalog.div(
                            CASE WHEN amount + pg_catalog.div(carry + (v_now - instant)::numeric * p_limit, v_p) >= coalesce(p_burst, p_limit)::bigint
                                 THEN p_cost::numeric * v_p
                                 ELSE (coalesce(p_burst, p_limit)::bigint + p_cost - amount)::numeric * v_p - carry - (v_now - instant)::numeric * p_limit END
                            + p_limit - 1, p_limit), blocked_until)
                    WHERE policy = '' AND key = p_key AND algorithm = v_algorithm AND log = ARRAY[p_limit, v_p]
                      AND blocked_until <= v_now AND instant <= v_now
                      AND amount + pg_catalog.div(carry + (v_now - instant)::numeric * p_limit, v_p) >= p_cost
                    RETURNING amount, carry INTO v_amount, v_carry;
                END IF;
                IF FOUND THEN
                    RETURN ROW(true, coalesce(p_burst, p_limit)::bigint, v_amount, 0,
                               (pg_catalog.div((coalesce(p_burst, p_limit)::bigint - v_amount)::numeric * v_p - v_carry + p_limit - 1,
                                               p_limit)::bigint + 999) / 1000)::ratelimit.decision;
                END IF;
            END IF;
            IF p_engine = 'table' THEN
                INSERT INTO ratelimit.key_state (key, algorithm, instant, amount, carry, log, blocked_until, expires_at, policy)
                VALUES (p_key, v_algorithm,
                        CASE WHEN v_algorithm IN (1, 4) THEN v_now - v_now % v_p ELSE v_now END,
                        CASE WHEN v_algorithm >= 5 THEN coalesce(p_burst, p_limit)::bigint - p_cost WHEN v_algorithm = 3 THEN 0 ELSE p_cost END, 0,
                        CASE WHEN v_algorithm >= 5 THEN ARRAY[p_limit, v_p] WHEN v_algorithm = 3 THEN ARRAY[v_now, p_cost] END,
                        0, CASE v_algorithm WHEN 1 THEN v_now - v_now % v_p + v_p
                                            WHEN 4 THEN v_now - v_now % v_p + 2 * v_p
                                            WHEN 2 THEN v_now + v_p WHEN 3 THEN v_now + v_p
                                            ELSE v_now + pg_catalog.div(p_cost::numeric * v_p + p_limit - 1, p_limit)::bigint END,
                        '')
                ON CONFLICT (policy, key) DO NOTHING;
            ELSE
                INSERT INTO ratelimit.key_state_unlogged (key, algorithm, instant, amount, carry, log, blocked_until, expires_at, policy)
                VALUES (p_key, v_algorithm,
                        CASE WHEN v_algorithm IN (1, 4) THEN v_now - v_now % v_p ELSE v_now END,
                        CASE WHEN v_algorithm >= 5 THEN coalesce(p_burst, p_limit)::bigint - p_cost WHEN v_algorithm = 3 THEN 0 ELSE p_cost END, 0,
                        CASE WHEN v_algorithm >= 5 THEN ARRAY[p_limit, v_p] WHEN v_algorithm = 3 THEN ARRAY[v_now, p_cost] END,
                        0, CASE v_algorithm WHEN 1 THEN v_now - v_now % v_p + v_p
                                            WHEN 4 THEN v_now - v_now % v_p + 2 * v_p
                                            WHEN 2 THEN v_now + v_p WHEN 3 THEN v_now + v_p
                                            ELSE v_now + pg_catalog.div(p_cost::numeric * v_p + p_limit - 1, p_limit)::bigint END,
                        '')
                ON CONFLICT (policy, key) DO NOTHING;
            END IF;
            IF FOUND THEN
                RETURN ROW(true, coalesce(p_burst, p_limit)::bigint, coalesce(p_burst, p_limit)::bigint - p_cost, 0,
                           (CASE v_algorithm WHEN 1 THEN v_now - v_now % v_p + v_p - v_now
                                             WHEN 4 THEN v_now - v_now % v_p + 2 * v_p - v_now
                                             WHEN 2 THEN v_p WHEN 3 THEN v_p
                                             ELSE pg_catalog.div(p_cost::numeric * v_p + p_limit - 1, p_limit)::bigint END
                            + 999) / 1000)::ratelimit.decision;
            END IF;
        END IF;
        r := ratelimit.key_apply(p_engine, '', p_key, v_algorithm, p_limit, v_p, coalesce(p_burst, p_limit),
                                 0, 0, 0, p_cost, 6::smallint, v_now);
    ELSE
        l := ratelimit.native_limit('ratelimit.consume()', p_key, p_limit, p_period, p_cost, p_algorithm, p_engine,
                                    p_burst, p_time_zone, p_max_wait, v_now);
        r := ratelimit.key_apply(p_engine, '', p_key, l.algorithm, l."limit", l.period, l.burst, l.window_start,
                                 l.window_end, l.max_delay, p_cost, 0::smallint, v_now);
    END IF;
    RETURN ROW(r.allowed, r."limit", r.remaining,
               CASE WHEN r.never THEN NULL WHEN r.retry_after <= 0 THEN 0 ELSE (r.retry_after + 999) / 1000 END,
               CASE WHEN r.reset_after <= 0 THEN 0 ELSE (r.reset_after + 999) / 1000 END)::ratelimit.decision;
END
$$;
-- @end ratelimit_consume

-- A peek writes nothing, so it needs no write access (nor a primary).
-- @begin ratelimit_peek
LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_now constant bigint := (extract(epoch FROM ratelimit.clock_now()) * 1000000)::bigint;
    v_algorithm constant smallint := CASE p_algorithm WHEN 'fixed_window' THEN 1 WHEN 'rolling_window' THEN 2
        WHEN 'sliding_window' THEN 3 WHEN 'sliding_window_counter' THEN 4 WHEN 'token_bucket' THEN 5 WHEN 'gcra' THEN 6 END;
    -- p_period in microseconds, when it has no months and no time zone comes with it.
    v_period constant numeric := CASE WHEN p_time_zone IS NULL AND pg_catalog.isfinite(p_period)
                                           AND pg_catalog.date_trunc('month', p_period) = interval '0'
                                      THEN extract(epoch FROM p_period) * 1000000 END;
    l record;  -- ratelimit.limit_values, which is made after this function
    r record;  -- ratelimit.state_decision
BEGIN
    IF pg_catalog.octet_length(p_key) BETWEEN 1 AND 256
       AND v_period BETWEEN 1000 AND 31536000000000 AND extract(day FROM p_period) BETWEEN -106751991 AND 106751991
       AND p_limit > 0 AND p_cost >= 0 AND v_algorithm IS NOT NULL AND p_engine IN ('table', 'unlogged')
       AND (p_burst IS NULL OR (v_algorithm >= 5 AND p_burst > 0
                                AND p_burst::numeric * v_period <= p_limit::numeric * 31536000000000))
       AND v_now BETWEEN 0 AND 253402300800000000 THEN
        r := ratelimit.key_apply(p_engine, '', p_key, v_algorithm, p_limit, v_period::bigint, coalesce(p_burst, p_limit),
                                 0, 0, 0, p_cost, 1::smallint, v_now);
    ELSE
        l := ratelimit.native_limit('ratelimit.peek()', p_key, p_limit, p_period, p_cost, p_algorithm, p_engine,
                                    p_burst, p_time_zone, NULL, v_now);
        r := ratelimit.key_apply(p_engine, '', p_key, l.algorithm, l."limit", l.period, l.burst, l.window_start,
                                 l.window_end, l.max_delay, p_cost, 1::smallint, v_now);
    END IF;
    RETURN ROW(r.allowed, r."limit", r.remaining,
               CASE WHEN r.never THEN NULL WHEN r.retry_after <= 0 THEN 0 ELSE (r.retry_after + 999) / 1000 END,
               CASE WHEN r.reset_after <= 0 THEN 0 ELSE (r.reset_after + 999) / 1000 END)::ratelimit.decision;
END
$$;
-- @end ratelimit_peek

-- A refund of more than one call could ever have taken is a mistake, not a denial.
-- @begin ratelimit_refund
LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_now constant bigint := (extract(epoch FROM ratelimit.clock_now()) * 1000000)::bigint;
    v_algorithm constant smallint := CASE p_algorithm WHEN 'fixed_window' THEN 1 WHEN 'rolling_window' THEN 2
        WHEN 'sliding_window' THEN 3 WHEN 'sliding_window_counter' THEN 4 WHEN 'token_bucket' THEN 5 WHEN 'gcra' THEN 6 END;
    -- p_period in microseconds, when it has no months and no time zone comes with it.
    v_period constant numeric := CASE WHEN p_time_zone IS NULL AND pg_catalog.isfinite(p_period)
                                           AND pg_catalog.date_trunc('month', p_period) = interval '0'
                                      THEN extract(epoch FROM p_period) * 1000000 END;
    l record;  -- ratelimit.limit_values, which is made after this function
    r record;  -- ratelimit.state_decision
BEGIN
    IF pg_catalog.octet_length(p_key) BETWEEN 1 AND 256
       AND v_period BETWEEN 1000 AND 31536000000000 AND extract(day FROM p_period) BETWEEN -106751991 AND 106751991
       AND p_limit > 0 AND p_cost >= 0 AND v_algorithm IS NOT NULL AND p_engine IN ('table', 'unlogged')
       AND (p_burst IS NULL OR (v_algorithm >= 5 AND p_burst > 0
                                AND p_burst::numeric * v_period <= p_limit::numeric * 31536000000000))
       AND v_now BETWEEN 0 AND 253402300800000000
       AND p_cost <= coalesce(p_burst, p_limit)
       AND pg_catalog.current_setting('transaction_read_only') = 'off' THEN
        r := ratelimit.key_apply(p_engine, '', p_key, v_algorithm, p_limit, v_period::bigint, coalesce(p_burst, p_limit),
                                 0, 0, 0, p_cost, 2::smallint, v_now);
    ELSE
        l := ratelimit.native_limit('ratelimit.refund()', p_key, p_limit, p_period, p_cost, p_algorithm, p_engine,
                                    p_burst, p_time_zone, NULL, v_now);
        r := ratelimit.key_apply(p_engine, '', p_key, l.algorithm, l."limit", l.period, l.burst, l.window_start,
                                 l.window_end, l.max_delay, p_cost, 2::smallint, v_now);
    END IF;
    RETURN ROW(r.allowed, r."limit", r.remaining,
               CASE WHEN r.never THEN NULL WHEN r.retry_after <= 0 THEN 0 ELSE (r.retry_after + 999) / 1000 END,
               CASE WHEN r.reset_after <= 0 THEN 0 ELSE (r.reset_after + 999) / 1000 END)::ratelimit.decision;
END
$$;
-- @end ratelimit_refund

-- @begin ratelimit_allow
LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_now constant bigint := (extract(epoch FROM ratelimit.clock_now()) * 1000000)::bigint;
    v_algorithm constant smallint := CASE p_algorithm WHEN 'fixed_window' THEN 1 WHEN 'rolling_window' THEN 2
        WHEN 'sliding_window' THEN 3 WHEN 'sliding_window_counter' THEN 4 WHEN 'token_bucket' THEN 5 WHEN 'gcra' THEN 6 END;
    -- p_period in microseconds, when it has no months and no time zone comes with it.
    v_period constant numeric := CASE WHEN p_time_zone IS NULL AND pg_catalog.isfinite(p_period)
                                           AND pg_catalog.date_trunc('month', p_period) = interval '0'
                                      THEN extract(epoch FROM p_period) * 1000000 END;
    l record;  -- ratelimit.limit_values, which is made after this function
    r record;  -- ratelimit.state_decision
BEGIN
    IF pg_catalog.octet_length(p_key) BETWEEN 1 AND 256
       AND v_period BETWEEN 1000 AND 31536000000000 AND extract(day FROM p_period) BETWEEN -106751991 AND 106751991
       AND p_limit > 0 AND p_cost >= 0 AND v_algorithm IS NOT NULL AND p_engine IN ('table', 'unlogged')
       AND (p_burst IS NULL OR (v_algorithm >= 5 AND p_burst > 0
                                AND p_burst::numeric * v_period <= p_limit::numeric * 31536000000000))
       AND v_now BETWEEN 0 AND 253402300800000000
       AND pg_catalog.current_setting('transaction_read_only') = 'off' THEN
        r := ratelimit.key_apply(p_engine, '', p_key, v_algorithm, p_limit, v_period::bigint, coalesce(p_burst, p_limit),
                                 0, 0, 0, p_cost, 0::smallint, v_now);
    ELSE
        l := ratelimit.native_limit('ratelimit.allow()', p_key, p_limit, p_period, p_cost, p_algorithm, p_engine,
                                    p_burst, p_time_zone, NULL, v_now);
        r := ratelimit.key_apply(p_engine, '', p_key, l.algorithm, l."limit", l.period, l.burst, l.window_start,
                                 l.window_end, l.max_delay, p_cost, 0::smallint, v_now);
    END IF;
    RETURN r.allowed;
END
$$;
-- @end ratelimit_allow

-- Every key is checked before the limit, and all of them before the first is decided.
-- @begin ratelimit_consume_many
LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    RETURN ratelimit.native_many('ratelimit.consume_many()', 0::smallint, p_keys, p_limit, p_period, p_cost,
                                 p_algorithm, p_engine, p_burst, p_time_zone);
END
$$;
-- @end ratelimit_consume_many

-- @begin ratelimit_peek_many
LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    RETURN ratelimit.native_many('ratelimit.peek_many()', 1::smallint, p_keys, p_limit, p_period, p_cost,
                                 p_algorithm, p_engine, p_burst, p_time_zone);
END
$$;
-- @end ratelimit_peek_many

-- @begin ratelimit_reset
LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF p_key IS NULL OR pg_catalog.octet_length(p_key) NOT BETWEEN 1 AND 256 THEN
        PERFORM ratelimit.refuse_key('p_key', p_key);
    END IF;
    IF p_engine IS NULL THEN
        RAISE EXCEPTION 'p_engine must not be NULL' USING ERRCODE = 'null_value_not_allowed';
    END IF;
    IF p_engine NOT IN ('table', 'unlogged', 'memory') THEN
        RAISE EXCEPTION 'p_engine must be one of table, unlogged, memory (got "%")',
            ratelimit.quoted_name(p_engine) USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF p_engine = 'memory' THEN
        PERFORM ratelimit.refuse_memory_engine('p_engine');
    END IF;
    IF pg_catalog.current_setting('transaction_read_only') = 'on' THEN
        RAISE EXCEPTION 'cannot execute ratelimit.reset() in a read-only transaction'
            USING ERRCODE = 'read_only_sql_transaction';
    END IF;
    RETURN ratelimit.key_reset(p_engine, '', p_key);
END
$$;
-- @end ratelimit_reset

-- @begin ratelimit_block
LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_now constant bigint := (extract(epoch FROM ratelimit.clock_now()) * 1000000)::bigint;
    v_duration bigint;
    v_until bigint;
BEGIN
    IF p_key IS NULL OR pg_catalog.octet_length(p_key) NOT BETWEEN 1 AND 256 THEN
        PERFORM ratelimit.refuse_key('p_key', p_key);
    END IF;
    v_duration := ratelimit.interval_micros('p_duration', p_duration);
    IF p_engine IS NULL THEN
        RAISE EXCEPTION 'p_engine must not be NULL' USING ERRCODE = 'null_value_not_allowed';
    END IF;
    IF p_engine NOT IN ('table', 'unlogged', 'memory') THEN
        RAISE EXCEPTION 'p_engine must be one of table, unlogged, memory (got "%")',
            ratelimit.quoted_name(p_engine) USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF v_now NOT BETWEEN 0 AND 253402300800000000 THEN
        RAISE EXCEPTION 'clock must read between 1970 and the year 10000' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF p_engine = 'memory' THEN
        PERFORM ratelimit.refuse_memory_engine('p_engine');
    END IF;
    IF pg_catalog.current_setting('transaction_read_only') = 'on' THEN
        RAISE EXCEPTION 'cannot execute ratelimit.block() in a read-only transaction'
            USING ERRCODE = 'read_only_sql_transaction';
    END IF;
    v_until := ratelimit.key_block(p_engine, '', p_key, v_now + v_duration, v_now);
    RETURN timestamptz '1970-01-01 00:00:00+00' + (v_until / 1000000) * interval '1 second'
           + (v_until % 1000000) * interval '1 microsecond';
END
$$;
-- @end ratelimit_block

-- Element i of each array is limit i; an error names the element (p_limits[2]). Keys decided
-- as one by ratelimit.decide_tiers.
-- @begin ratelimit_consume_all
LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_now constant bigint := (extract(epoch FROM ratelimit.clock_now()) * 1000000)::bigint;
    v_count integer;
    v_keys text[] := p_keys;
    v_limits integer[] := p_limits;
    v_periods interval[] := p_periods;
    v_algorithms text[] := p_algorithms;
    v_engines text[] := p_engines;
    v_bursts integer[] := p_bursts;
    v_enforced boolean[] := p_enforced;
    v_algorithm smallint;
    v_period bigint;
    v_burst bigint;
    v_memory integer;
    v_decisions ratelimit.decision[];
    v_name text;
    i integer;
    j integer;
BEGIN
    IF p_keys IS NULL THEN
        RAISE EXCEPTION 'p_keys must not be NULL' USING ERRCODE = 'null_value_not_allowed';
    END IF;
    IF pg_catalog.array_ndims(p_keys) > 1 THEN
        RAISE EXCEPTION 'p_keys must be a one-dimensional array' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF p_limits IS NULL THEN
        RAISE EXCEPTION 'p_limits must not be NULL' USING ERRCODE = 'null_value_not_allowed';
    END IF;
    IF pg_catalog.array_ndims(p_limits) > 1 THEN
        RAISE EXCEPTION 'p_limits must be a one-dimensional array' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF p_periods IS NULL THEN
        RAISE EXCEPTION 'p_periods must not be NULL' USING ERRCODE = 'null_value_not_allowed';
    END IF;
    IF pg_catalog.array_ndims(p_periods) > 1 THEN
        RAISE EXCEPTION 'p_periods must be a one-dimensional array' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF pg_catalog.array_ndims(p_algorithms) > 1 THEN
        RAISE EXCEPTION 'p_algorithms must be a one-dimensional array' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF pg_catalog.array_ndims(p_engines) > 1 THEN
        RAISE EXCEPTION 'p_engines must be a one-dimensional array' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF pg_catalog.array_ndims(p_bursts) > 1 THEN
        RAISE EXCEPTION 'p_bursts must be a one-dimensional array' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF pg_catalog.array_ndims(p_enforced) > 1 THEN
        RAISE EXCEPTION 'p_enforced must be a one-dimensional array' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF p_cost IS NULL THEN
        RAISE EXCEPTION 'p_cost must not be NULL' USING ERRCODE = 'null_value_not_allowed';
    END IF;
    -- A cost some limit could never allow is that limit's denial, made by the decision.
    IF p_cost < 0 THEN
        RAISE EXCEPTION 'p_cost must not be negative (got %)', p_cost USING ERRCODE = 'invalid_parameter_value';
    END IF;
    v_count := coalesce(pg_catalog.array_length(p_keys, 1), 0);
    -- More limits would only hold more rows at once; real checks use two to four.
    IF v_count < 1 OR v_count > 16 THEN
        RAISE EXCEPTION 'p_keys must have 1 to 16 elements (got %)', v_count USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF coalesce(pg_catalog.array_length(p_limits, 1), 0) <> v_count THEN
        RAISE EXCEPTION 'p_limits must have as many elements as p_keys (%, got %)', v_count,
            coalesce(pg_catalog.array_length(p_limits, 1), 0) USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF coalesce(pg_catalog.array_length(p_periods, 1), 0) <> v_count THEN
        RAISE EXCEPTION 'p_periods must have as many elements as p_keys (%, got %)', v_count,
            coalesce(pg_catalog.array_length(p_periods, 1), 0) USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF p_algorithms IS NOT NULL AND coalesce(pg_catalog.array_length(p_algorithms, 1), 0) <> v_count THEN
        RAISE EXCEPTION 'p_algorithms must have as many elements as p_keys (%, got %)', v_count,
            coalesce(pg_catalog.array_length(p_algorithms, 1), 0) USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF p_engines IS NOT NULL AND coalesce(pg_catalog.array_length(p_engines, 1), 0) <> v_count THEN
        RAISE EXCEPTION 'p_engines must have as many elements as p_keys (%, got %)', v_count,
            coalesce(pg_catalog.array_length(p_engines, 1), 0) USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF p_bursts IS NOT NULL AND coalesce(pg_catalog.array_length(p_bursts, 1), 0) <> v_count THEN
        RAISE EXCEPTION 'p_bursts must have as many elements as p_keys (%, got %)', v_count,
            coalesce(pg_catalog.array_length(p_bursts, 1), 0) USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF p_enforced IS NOT NULL AND coalesce(pg_catalog.array_length(p_enforced, 1), 0) <> v_count THEN
        RAISE EXCEPTION 'p_enforced must have as many elements as p_keys (%, got %)', v_count,
            coalesce(pg_catalog.array_length(p_enforced, 1), 0) USING ERRCODE = 'invalid_parameter_value';
    END IF;
    -- The elements by position, whatever the arrays' lower bounds.
    IF pg_catalog.array_lower(v_keys, 1) <> 1 THEN v_keys := ARRAY(SELECT pg_catalog.unnest(p_keys)); END IF;
    IF pg_catalog.array_lower(v_limits, 1) <> 1 THEN v_limits := ARRAY(SELECT pg_catalog.unnest(p_limits)); END IF;
    IF pg_catalog.array_lower(v_periods, 1) <> 1 THEN v_periods := ARRAY(SELECT pg_catalog.unnest(p_periods)); END IF;
    IF pg_catalog.array_lower(v_algorithms, 1) <> 1 THEN v_algorithms := ARRAY(SELECT pg_catalog.unnest(p_algorithms)); END IF;
    IF pg_catalog.array_lower(v_engines, 1) <> 1 THEN v_engines := ARRAY(SELECT pg_catalog.unnest(p_engines)); END IF;
    IF pg_catalog.array_lower(v_bursts, 1) <> 1 THEN v_bursts := ARRAY(SELECT pg_catalog.unnest(p_bursts)); END IF;
    IF pg_catalog.array_lower(v_enforced, 1) <> 1 THEN v_enforced := ARRAY(SELECT pg_catalog.unnest(p_enforced)); END IF;
    IF p_algorithms IS NULL THEN
        v_algorithms := pg_catalog.array_fill('fixed_window'::text, ARRAY[v_count]);
    END IF;
    IF p_engines IS NULL THEN
        v_engines := pg_catalog.array_fill('table'::text, ARRAY[v_count]);
    END IF;
    FOR i IN 1 .. v_count LOOP
        v_name := '[' || i || ']';
        IF v_keys[i] IS NULL THEN
            RAISE EXCEPTION 'p_keys% must not be NULL', v_name USING ERRCODE = 'null_value_not_allowed';
        END IF;
        IF v_limits[i] IS NULL THEN
            RAISE EXCEPTION 'p_limits% must not be NULL', v_name USING ERRCODE = 'null_value_not_allowed';
        END IF;
        IF v_periods[i] IS NULL THEN
            RAISE EXCEPTION 'p_periods% must not be NULL', v_name USING ERRCODE = 'null_value_not_allowed';
        END IF;
        IF pg_catalog.octet_length(v_keys[i]) NOT BETWEEN 1 AND 256 THEN
            PERFORM ratelimit.refuse_key('p_keys' || v_name, v_keys[i]);
        END IF;
        v_period := ratelimit.interval_micros('p_periods' || v_name, v_periods[i]);
        IF v_algorithms[i] IS NULL THEN
            RAISE EXCEPTION 'p_algorithms% must not be NULL', v_name USING ERRCODE = 'null_value_not_allowed';
        END IF;
        v_algorithm := CASE v_algorithms[i] WHEN 'fixed_window' THEN 1 WHEN 'rolling_window' THEN 2
                                            WHEN 'sliding_window' THEN 3 WHEN 'sliding_window_counter' THEN 4
                                            WHEN 'token_bucket' THEN 5 WHEN 'gcra' THEN 6 END;
        IF v_algorithm IS NULL THEN
            RAISE EXCEPTION 'p_algorithms% must be one of fixed_window, rolling_window, sliding_window, sliding_window_counter, token_bucket, gcra (got "%")',
                v_name, ratelimit.quoted_name(v_algorithms[i]) USING ERRCODE = 'invalid_parameter_value';
        END IF;
        IF v_engines[i] IS NULL THEN
            RAISE EXCEPTION 'p_engines% must not be NULL', v_name USING ERRCODE = 'null_value_not_allowed';
        END IF;
        IF v_engines[i] NOT IN ('table', 'unlogged', 'memory') THEN
            RAISE EXCEPTION 'p_engines% must be one of table, unlogged, memory (got "%")',
                v_name, ratelimit.quoted_name(v_engines[i]) USING ERRCODE = 'invalid_parameter_value';
        END IF;
        IF v_bursts[i] IS NOT NULL AND v_algorithm < 5 THEN
            RAISE EXCEPTION 'p_bursts% applies only to token_bucket and gcra', v_name USING ERRCODE = 'invalid_parameter_value';
        END IF;
        v_burst := coalesce(v_bursts[i], v_limits[i]);
        IF v_limits[i] <= 0 THEN
            RAISE EXCEPTION 'p_limits% must be greater than zero, got %', v_name, v_limits[i]
                USING ERRCODE = 'invalid_parameter_value';
        END IF;
        IF v_period < 1000 THEN
            RAISE EXCEPTION 'p_periods% must be at least 1 millisecond', v_name USING ERRCODE = 'invalid_parameter_value';
        END IF;
        IF v_burst <= 0 THEN
            RAISE EXCEPTION 'p_bursts% must be greater than zero, got %', v_name, v_burst
                USING ERRCODE = 'invalid_parameter_value';
        END IF;
        IF v_burst::numeric * v_period > v_limits[i]::numeric * 31536000000000 THEN
            RAISE EXCEPTION 'p_bursts% is too large: refilling it (p_burst * p_period / p_limit) must take at most 365 days',
                v_name USING ERRCODE = 'invalid_parameter_value';
        END IF;
        IF v_enforced IS NOT NULL AND v_enforced[i] IS NULL THEN
            RAISE EXCEPTION 'p_enforced% must not be NULL', v_name USING ERRCODE = 'null_value_not_allowed';
        END IF;
        FOR j IN 1 .. i - 1 LOOP
            IF v_engines[j] = v_engines[i] AND v_keys[j] COLLATE "C" = v_keys[i] THEN
                RAISE EXCEPTION 'p_keys% repeats p_keys[%] on the same engine: each key may appear once', v_name, j
                    USING ERRCODE = 'invalid_parameter_value';
            END IF;
        END LOOP;
    END LOOP;
    IF v_now NOT BETWEEN 0 AND 253402300800000000 THEN
        RAISE EXCEPTION 'clock must read between 1970 and the year 10000' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    v_memory := pg_catalog.array_position(v_engines, 'memory');
    IF v_memory IS NOT NULL THEN
        PERFORM ratelimit.refuse_memory_engine('p_engines[' || v_memory || ']');
    END IF;
    IF pg_catalog.current_setting('transaction_read_only') = 'on' THEN
        RAISE EXCEPTION 'cannot execute ratelimit.consume_all() in a read-only transaction'
            USING ERRCODE = 'read_only_sql_transaction';
    END IF;
    SELECT pg_catalog.array_agg(ROW(t.allowed, t."limit", t.remaining,
               CASE WHEN t.never THEN NULL WHEN t.retry_after <= 0 THEN 0 ELSE (t.retry_after + 999) / 1000 END,
               CASE WHEN t.reset_after <= 0 THEN 0 ELSE (t.reset_after + 999) / 1000 END)::ratelimit.decision
               ORDER BY t.position)
    INTO v_decisions
    FROM ratelimit.decide_tiers(v_engines, pg_catalog.array_fill(''::text, ARRAY[v_count]), v_keys, v_limits,
                                v_periods, v_algorithms, v_bursts, NULL, NULL, v_enforced, p_cost, v_now) d,
         pg_catalog.unnest(d.decisions) WITH ORDINALITY AS t(allowed, "limit", remaining, retry_after, reset_after,
                                                            blocked, never, position);
    RETURN v_decisions;
END
$$;
-- @end ratelimit_consume_all

-- Its time zone is tried as the session's TimeZone (in a function of its own, which restores
-- it), which a parallel worker may not do: not PARALLEL SAFE as the C function is.
-- @begin ratelimit_validate_limit
LANGUAGE plpgsql STABLE PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    PERFORM ratelimit.checked_limit(p_limit, p_period, p_algorithm, p_engine, p_burst, p_time_zone, NULL, false);
    IF p_engine = 'memory' THEN
        PERFORM ratelimit.refuse_memory_engine('p_engine');
    END IF;
END
$$;
-- @end ratelimit_validate_limit
