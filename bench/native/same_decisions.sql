-- Before anything is measured: the references decide exactly like the extension. Each engine
-- gets a few thousand random calls, on a dozen keys, with the algorithm, limit, period, burst,
-- cost and clock drawn at random (the clock frozen and moved with ratelimit.test_clock,
-- sometimes not at all, sometimes by exactly a period, sometimes backwards; limits small
-- enough to deny, and near the integer bounds to exercise the wide products; the other
-- algorithms' state on the same key; blocks; arguments the contract refuses). After every
-- call, both sides must have returned the same decision and hold the same row, or raised the
-- same error. Any difference stops the benchmark: it would compare different things. The keys
-- are deleted afterwards.
\set ON_ERROR_STOP on

DO $$
DECLARE
    v_algorithms constant text[] := ARRAY['fixed_window', 'rolling_window', 'sliding_window',
                                          'sliding_window_counter', 'token_bucket', 'gcra'];
    v_periods    constant interval[] := ARRAY[interval '3 milliseconds', interval '1 second',
                                              interval '1.7 seconds', interval '365 days'];
    v_none       constant text := '(0,0,0,0,,0,0)';
    v_stats      jsonb := '{}';
    v_engine     text;
    v_clock      bigint;
    v_step       bigint;
    v_call       integer;
    v_algorithm  text;
    v_index      integer;
    v_key        text;
    v_limit      integer;
    v_period     interval;
    v_period_us  bigint;
    v_burst      integer;
    v_cost       integer;
    v_most       integer;
    v_dice       double precision;
    v_ext        ratelimit.decision;
    v_ref        bench.decision;
    v_ext_row    text;
    v_invalid    boolean;
    v_ext_error  text;
    v_ref_error  text;
    v_errors     integer := 0;
    v_ref_row    text;
BEGIN
    PERFORM setseed(0.2026);
    FOREACH v_engine IN ARRAY ARRAY['table', 'unlogged'] LOOP
        v_clock := 1767225600000000;  -- 2026-01-01 00:00:00 UTC, in microseconds
        FOR v_call IN 1 .. 4000 LOOP
            -- Twelve keys, each with a home algorithm it is called with most of the time, as
            -- in real use; otherwise another algorithm, whose state the next call on the home
            -- algorithm must read as fresh.
            v_index := floor(random() * 12)::int;
            v_key := 'same:' || v_index;
            v_algorithm := v_algorithms[1 + v_index % 6];
            IF random() < 0.15 THEN
                v_algorithm := v_algorithms[1 + floor(random() * 6)::int];
            END IF;
            IF random() < 0.9 THEN
                v_limit := 1 + floor(random() * 6)::int;
                v_period := v_periods[1 + floor(random() * 3)::int];
                v_burst := CASE WHEN v_algorithm IN ('token_bucket', 'gcra') AND random() < 0.5
                                THEN 1 + floor(random() * 9)::int END;
            ELSE
                v_limit := 2147483647 - floor(random() * 3)::int;
                v_period := v_periods[4];
                v_burst := CASE WHEN v_algorithm IN ('token_bucket', 'gcra') AND random() < 0.5
                                THEN v_limit - floor(random() * 3)::int END;
            END IF;
            v_period_us := (extract(epoch FROM v_period) * 1000000)::bigint;
            v_most := coalesce(v_burst, v_limit);
            v_cost := CASE WHEN random() < 0.1 THEN 0
                           WHEN random() < 0.8 THEN least(v_most, 1 + floor(random() * 2)::int)
                           ELSE floor(random() * (v_most::bigint + 1))::int END;

            -- The clock: still, a few milliseconds (many calls per period, so limits bite),
            -- up to a few periods, backwards, exactly one period (an entry leaving the window
            -- right then), or far ahead; mostly by whole milliseconds, so instants meet window
            -- edges exactly and rounding the waits up to milliseconds shows an off-by-one.
            v_dice := random();
            v_step := CASE
                WHEN v_dice < 0.20 THEN 0
                WHEN v_dice < 0.70 THEN floor(random() * 40000)
                WHEN v_dice < 0.85 THEN floor(random() * 400000)
                WHEN v_dice < 0.93 THEN -floor(random() * 200000)
                WHEN v_dice < 0.98 THEN least(v_period_us, 3000000) + floor(random() * 3) - 1
                ELSE floor(random() * 86400000000) END;
            IF random() < 0.8 THEN
                v_step := v_step - v_step % 1000;
            END IF;
            v_clock := v_clock + v_step;
            PERFORM set_config('ratelimit.test_clock',
                               (timestamptz 'epoch' + v_clock * interval '1 microsecond')::text,
                               true);

            IF random() < 0.01 THEN
                -- A block on both sides: the extension's ratelimit.block, copied to the reference.
                PERFORM ratelimit.block(v_key, random() * interval '3 seconds', v_engine);
                IF v_engine = 'table' THEN
                    INSERT INTO bench.key_state SELECT * FROM ratelimit.key_state WHERE key = v_key
                    ON CONFLICT (key) DO UPDATE SET blocked_until = EXCLUDED.blocked_until,
                                                    expires_at = EXCLUDED.expires_at;
                ELSE
                    INSERT INTO bench.key_state_unlogged
                    SELECT * FROM ratelimit.key_state_unlogged WHERE key = v_key
                    ON CONFLICT (key) DO UPDATE SET blocked_until = EXCLUDED.blocked_until,
                                                    expires_at = EXCLUDED.expires_at;
                END IF;
            END IF;

            -- Now and then a call the contract refuses: both sides must raise the same error.
            v_invalid := random() < 0.03;
            IF v_invalid THEN
                CASE floor(random() * 8)::int
                    WHEN 0 THEN v_cost := -1;
                    WHEN 1 THEN v_cost := CASE WHEN v_most < 2147483647 THEN v_most + 1 ELSE -1 END;
                    WHEN 2 THEN v_period := (ARRAY[interval '0', interval '999 microseconds',
                                                   interval '365 days 1 microsecond',
                                                   interval '1 month'])[1 + floor(random() * 4)::int];
                    WHEN 3 THEN v_key := (ARRAY['', repeat('k', 257), NULL])[1 + floor(random() * 3)::int];
                    WHEN 4 THEN v_limit := (ARRAY[0, -5, NULL])[1 + floor(random() * 3)::int];
                    WHEN 5 THEN v_cost := NULL;
                    WHEN 6 THEN v_period := NULL;
                    ELSE
                        IF v_algorithm IN ('token_bucket', 'gcra') THEN
                            -- A burst of 0, or one that takes more than 365 days to refill.
                            v_limit := 1;
                            v_period := interval '1 day';
                            v_burst := (ARRAY[0, 366])[1 + floor(random() * 2)::int];
                            v_cost := 0;
                        ELSE
                            v_cost := CASE WHEN v_limit < 2147483647 THEN v_limit + 1 ELSE -1 END;
                        END IF;
                END CASE;
                v_ext_error := 'none';
                v_ref_error := 'none';
                BEGIN
                    PERFORM ratelimit.consume(v_key, v_limit, v_period, v_cost, v_algorithm,
                                              v_engine, v_burst);
                EXCEPTION WHEN OTHERS THEN
                    v_ext_error := SQLSTATE;
                END;
                BEGIN
                    IF v_algorithm IN ('token_bucket', 'gcra') THEN
                        EXECUTE format('SELECT bench.%I($1, $2, $3, $4, $5, $6)', v_algorithm)
                        USING v_key, v_limit, v_period, v_cost, v_engine, v_burst;
                    ELSE
                        EXECUTE format('SELECT bench.%I($1, $2, $3, $4, $5)', v_algorithm)
                        USING v_key, v_limit, v_period, v_cost, v_engine;
                    END IF;
                EXCEPTION WHEN OTHERS THEN
                    v_ref_error := SQLSTATE;
                END;
                IF v_ext_error = 'none' OR v_ext_error <> v_ref_error THEN
                    RAISE EXCEPTION E'same_decisions: invalid call % (%): consume(%, %, %, %, %, '
                        'burst %)\nextension raised %, reference raised %',
                        v_call, v_engine, v_key, v_limit, v_period, v_cost, v_algorithm, v_burst,
                        v_ext_error, v_ref_error;
                END IF;
                v_errors := v_errors + 1;
                CONTINUE;
            END IF;

            v_ext := ratelimit.consume(v_key, v_limit, v_period, v_cost, v_algorithm, v_engine,
                                       v_burst);
            IF v_algorithm IN ('token_bucket', 'gcra') THEN
                EXECUTE format('SELECT * FROM bench.%I($1, $2, $3, $4, $5, $6)', v_algorithm)
                INTO v_ref USING v_key, v_limit, v_period, v_cost, v_engine, v_burst;
            ELSE
                EXECUTE format('SELECT * FROM bench.%I($1, $2, $3, $4, $5)', v_algorithm)
                INTO v_ref USING v_key, v_limit, v_period, v_cost, v_engine;
            END IF;

            -- The reference creates a key's row before deciding; the extension only when it
            -- writes: a missing row and an empty one mean the same.
            IF v_engine = 'table' THEN
                SELECT coalesce((SELECT row(algorithm, instant, amount, carry, log, blocked_until,
                                            expires_at)::text
                                 FROM ratelimit.key_state WHERE key = v_key), v_none),
                       coalesce((SELECT row(algorithm, instant, amount, carry, log, blocked_until,
                                            expires_at)::text
                                 FROM bench.key_state WHERE key = v_key), v_none)
                INTO v_ext_row, v_ref_row;
            ELSE
                SELECT coalesce((SELECT row(algorithm, instant, amount, carry, log, blocked_until,
                                            expires_at)::text
                                 FROM ratelimit.key_state_unlogged WHERE key = v_key), v_none),
                       coalesce((SELECT row(algorithm, instant, amount, carry, log, blocked_until,
                                            expires_at)::text
                                 FROM bench.key_state_unlogged WHERE key = v_key), v_none)
                INTO v_ext_row, v_ref_row;
            END IF;

            IF v_ext::text IS DISTINCT FROM v_ref::text OR v_ext_row IS DISTINCT FROM v_ref_row THEN
                RAISE EXCEPTION E'same_decisions: the reference differs from the extension\n'
                    'call % (%), clock % µs: consume(%, %, %, %, %, burst %)\n'
                    'extension: % row %\nreference: % row %',
                    v_call, v_engine, v_clock, v_key, v_limit, v_period, v_cost, v_algorithm,
                    v_burst, v_ext, v_ext_row, v_ref, v_ref_row;
            END IF;
            v_stats := jsonb_set(v_stats, ARRAY[v_algorithm],
                                 to_jsonb(ARRAY[coalesce((v_stats #>> ARRAY[v_algorithm, '0'])::int, 0) + 1,
                                                coalesce((v_stats #>> ARRAY[v_algorithm, '1'])::int, 0)
                                                + (NOT v_ext.allowed)::int]));
        END LOOP;
    END LOOP;
    RAISE NOTICE 'same_decisions: same decisions and rows; [calls, denied] per algorithm: %; '
        'same errors for % invalid calls', v_stats, v_errors;

    DELETE FROM ratelimit.key_state WHERE key LIKE 'same:%';
    DELETE FROM ratelimit.key_state_unlogged WHERE key LIKE 'same:%';
    DELETE FROM bench.key_state WHERE key LIKE 'same:%';
    DELETE FROM bench.key_state_unlogged WHERE key LIKE 'same:%';
END
$$;
