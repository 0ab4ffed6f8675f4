-- The native API (schema ratelimit): the decisions of every algorithm on both engines, step by
-- step on a frozen clock. Every expected value was worked out by hand from the documented
-- semantics (limit N per period P, burst B, cost c, all in microseconds, waits rounded up to
-- whole milliseconds), so a change in any algorithm's arithmetic shows up here as a wrong number.
BEGIN;
CREATE EXTENSION IF NOT EXISTS pgtap;
\ir install_edition.psql
SET LOCAL timezone = 'UTC';

SELECT plan(1580);

------------------------------------------------------------------------------------------------
-- Helpers (created inside this transaction, rolled back with it).
------------------------------------------------------------------------------------------------
CREATE SCHEMA native_test;

-- T0 = 2026-01-01 00:00:00 UTC is a multiple of every period used below, so fixed and counter
-- windows start at T0 + k*P and the hand computations can count from T0.
CREATE FUNCTION native_test.t0() RETURNS timestamptz LANGUAGE sql IMMUTABLE
AS $$SELECT timestamptz '2026-01-01 00:00:00+00'$$;

-- Freezes the clock at T0 + p_us microseconds until the end of the transaction. set_config with
-- is_local = true is SET LOCAL, usable inside the loops below. The interval is parsed from text
-- so that no floating point touches the microseconds.
CREATE FUNCTION native_test.at_us(p_us bigint) RETURNS void LANGUAGE sql
AS $$SELECT set_config('ratelimit.test_clock',
                       (native_test.t0() + (p_us || ' microseconds')::interval)::text, true)$$;

CREATE FUNCTION native_test.at_ms(p_ms bigint) RETURNS void LANGUAGE sql
AS $$SELECT native_test.at_us(p_ms * 1000)$$;

-- Milliseconds from T0 to a timestamp (what block returns).
CREATE FUNCTION native_test.ms_since_t0(p_at timestamptz) RETURNS bigint LANGUAGE sql
AS $$SELECT (extract(epoch FROM p_at - native_test.t0()) * 1000)::bigint$$;

-- The key's whole row in an engine's table (NULL when there is none): compared before and after
-- the calls that must not write.
CREATE FUNCTION native_test.state_row(p_engine text, p_key text) RETURNS jsonb LANGUAGE plpgsql AS $$
DECLARE
    found jsonb;
BEGIN
    EXECUTE format('SELECT to_jsonb(s) FROM ratelimit.%I AS s WHERE s.key = $1',
                   CASE p_engine WHEN 'table' THEN 'key_state' WHEN 'unlogged' THEN 'key_state_unlogged' END)
        INTO found USING p_key;
    RETURN found;
END
$$;

CREATE FUNCTION native_test.decide(p_action text, p_key text, p_limit integer, p_period interval,
                                   p_cost integer, p_algorithm text, p_engine text, p_burst integer)
RETURNS ratelimit.decision LANGUAGE plpgsql AS $$
BEGIN
    CASE p_action
        WHEN 'consume' THEN
            RETURN ratelimit.consume(p_key, p_limit, p_period, p_cost, p_algorithm, p_engine, p_burst);
        WHEN 'peek' THEN
            RETURN ratelimit.peek(p_key, p_limit, p_period, p_cost, p_algorithm, p_engine, p_burst);
        WHEN 'refund' THEN
            RETURN ratelimit.refund(p_key, p_limit, p_period, p_cost, p_algorithm, p_engine, p_burst);
    END CASE;
END
$$;

-- A scenario is one limit and a list of steps per algorithm. Each step moves the clock, makes one
-- call and states the exact result: a decision '(allowed,limit,remaining,retry_after_ms,
-- reset_after_ms)', the end of a block in ms after T0, reset's boolean, or whether the key has a
-- row. amount is the cost (consume, peek, refund) or the block's duration in ms.
CREATE TABLE native_test.scenarios (
    scenario text PRIMARY KEY,
    lim integer NOT NULL,
    period interval NOT NULL,
    burst integer
);

CREATE TABLE native_test.steps (
    scenario text NOT NULL REFERENCES native_test.scenarios,
    algorithm text NOT NULL,
    key_name text NOT NULL,
    step integer NOT NULL,
    at_ms bigint NOT NULL,
    action text NOT NULL CHECK (action IN ('consume', 'peek', 'refund', 'block', 'reset', 'row')),
    amount integer,
    expected text NOT NULL,
    note text NOT NULL,
    PRIMARY KEY (scenario, key_name, step)
);

-- Steps whose expected results differ per algorithm but whose clock and calls are the same: one
-- row per step with a column per algorithm (NULL: the step does not apply to that algorithm).
CREATE TABLE native_test.wide_steps (
    scenario text, step integer, at_ms bigint, action text, amount integer, note text,
    fixed text, rolling text, sliding text, counter text, bucket text, gcra text
);

-- Runs a scenario on both engines. Besides each step's result, every call that must not write
-- (a peek, a denied consume, a consume of cost 0) is checked to leave the key's row identical.
-- An error in a call is reported as that step's result, so the steps after it still run.
CREATE FUNCTION native_test.run(p_scenario text) RETURNS SETOF text LANGUAGE plpgsql AS $$
DECLARE
    sc native_test.scenarios;
    s native_test.steps;
    engine text;
    k text;
    before jsonb;
    got text;
    what text;
    label text;
BEGIN
    SELECT * INTO STRICT sc FROM native_test.scenarios WHERE scenario = p_scenario;
    FOREACH engine IN ARRAY ARRAY['table', 'unlogged'] LOOP
        FOR s IN SELECT * FROM native_test.steps WHERE scenario = p_scenario ORDER BY key_name, step LOOP
            k := p_scenario || ':' || s.key_name;
            PERFORM native_test.at_ms(s.at_ms);
            before := native_test.state_row(engine, k);
            what := CASE s.action
                        WHEN 'block' THEN format('block %s ms', s.amount)
                        WHEN 'reset' THEN 'reset'
                        WHEN 'row' THEN 'row of the key'
                        ELSE format('%s cost %s', s.action, s.amount) END;
            BEGIN
                CASE s.action
                    WHEN 'consume', 'peek', 'refund' THEN
                        got := native_test.decide(s.action, k, sc.lim, sc.period, s.amount, s.algorithm,
                                                  engine, sc.burst)::text;
                    WHEN 'block' THEN
                        got := native_test.ms_since_t0(
                            ratelimit.block(k, (s.amount || ' milliseconds')::interval, engine))::text;
                    WHEN 'reset' THEN
                        got := ratelimit.reset(k, engine)::text;
                    WHEN 'row' THEN
                        got := CASE WHEN before IS NULL THEN 'absent' ELSE 'present' END;
                END CASE;
            EXCEPTION WHEN OTHERS THEN
                got := format('ERROR %s: %s', SQLSTATE, SQLERRM);
            END;
            label := format('%s (%s per %s%s): %s, %s engine, step %s at T0+%s ms, %s',
                            p_scenario, sc.lim, sc.period,
                            CASE WHEN sc.burst IS NULL THEN '' ELSE ', burst ' || sc.burst END,
                            s.algorithm, engine, s.step, s.at_ms, what);
            RETURN NEXT is(got, s.expected, label || ': ' || s.note);
            IF s.action = 'peek' OR (s.action = 'consume' AND (s.expected LIKE '(f,%' OR s.amount = 0)) THEN
                RETURN NEXT is(native_test.state_row(engine, k), before, label || ': wrote nothing (row unchanged)');
            END IF;
        END LOOP;
    END LOOP;
END
$$;

------------------------------------------------------------------------------------------------
-- The SQL surface: names, argument names and defaults are what PostgREST and named calls see.
------------------------------------------------------------------------------------------------
SELECT is(format('%s) RETURNS %s', pg_get_function_arguments(f::regproc), pg_get_function_result(f::regproc)),
          expected, f || ': arguments, defaults and result type')
FROM (VALUES
    ('ratelimit.consume', 'p_key text, p_limit integer, p_period interval, p_cost integer DEFAULT 1, p_algorithm text DEFAULT ''fixed_window''::text, p_engine text DEFAULT ''table''::text, p_burst integer DEFAULT NULL::integer, p_time_zone text DEFAULT NULL::text, p_max_wait interval DEFAULT NULL::interval) RETURNS ratelimit.decision'),
    ('ratelimit.peek', 'p_key text, p_limit integer, p_period interval, p_cost integer DEFAULT 1, p_algorithm text DEFAULT ''fixed_window''::text, p_engine text DEFAULT ''table''::text, p_burst integer DEFAULT NULL::integer, p_time_zone text DEFAULT NULL::text) RETURNS ratelimit.decision'),
    ('ratelimit.refund', 'p_key text, p_limit integer, p_period interval, p_cost integer DEFAULT 1, p_algorithm text DEFAULT ''fixed_window''::text, p_engine text DEFAULT ''table''::text, p_burst integer DEFAULT NULL::integer, p_time_zone text DEFAULT NULL::text) RETURNS ratelimit.decision'),
    ('ratelimit.reset', 'p_key text, p_engine text DEFAULT ''table''::text) RETURNS boolean'),
    ('ratelimit.block', 'p_key text, p_duration interval, p_engine text DEFAULT ''table''::text) RETURNS timestamp with time zone'),
    ('ratelimit.cleanup_key_state', 'p_engine text DEFAULT NULL::text) RETURNS bigint')
) AS v(f, expected)
ORDER BY f;

SELECT is((SELECT string_agg(a.attname || ' ' || format_type(a.atttypid, a.atttypmod), ', ' ORDER BY a.attnum)
           FROM pg_attribute a
           WHERE a.attrelid = (SELECT typrelid FROM pg_type WHERE oid = 'ratelimit.decision'::regtype)
             AND a.attnum > 0 AND NOT a.attisdropped),
          'allowed boolean, limit integer, remaining integer, retry_after_ms bigint, reset_after_ms bigint',
          'ratelimit.decision: field names and types');

-- The test clock, as the helpers set it, is what the API reads.
SELECT is(ratelimit.clock_now(), timestamptz '2026-01-01 00:00:01.234567+00',
          'ratelimit.test_clock set locally is the clock the API reads, to the microsecond')
FROM native_test.at_us(1234567);

------------------------------------------------------------------------------------------------
-- cleanup_key_state deletes exactly the rows that decide like no row, per engine or both.
-- Runs first, while the tables hold only its own keys.
------------------------------------------------------------------------------------------------
SET LOCAL ratelimit.test_clock = '2026-01-01 00:00:01+00';
DO $$
BEGIN
    PERFORM ratelimit.consume('native:clean:short', 3, '10 seconds', p_engine => e),
            ratelimit.consume('native:clean:long', 3, '1 hour', p_engine => e)
    FROM unnest(ARRAY['table', 'unlogged']) AS e;
END
$$;
SELECT is(ratelimit.block('native:clean:blocked', '5 seconds'), timestamptz '2026-01-01 00:00:06+00',
          'cleanup setup: a key blocked for 5 s at T0+1 s, on the default (table) engine');
SET LOCAL ratelimit.test_clock = '2026-01-01 00:00:05.999+00';
SELECT is(ratelimit.cleanup_key_state('table'), 0::bigint,
          'cleanup at T0+5.999 s: nothing is idle yet (the block ends at T0+6 s, the windows at T0+10 s)');
SET LOCAL ratelimit.test_clock = '2026-01-01 00:00:06+00';
SELECT is(ratelimit.cleanup_key_state('table'), 1::bigint, 'cleanup at T0+6 s: the ended block''s row goes');
SET LOCAL ratelimit.test_clock = '2026-01-01 00:00:09.999+00';
SELECT is(ratelimit.cleanup_key_state('table'), 0::bigint, 'cleanup at T0+9.999 s: the 10 s window still counts');
SET LOCAL ratelimit.test_clock = '2026-01-01 00:00:10+00';
SELECT is(ratelimit.cleanup_key_state('table'), 1::bigint,
          'cleanup(''table'') at T0+10 s: the ended 10 s window''s row goes');
SELECT is((SELECT array_agg(key ORDER BY key) FROM ratelimit.key_state), ARRAY['native:clean:long'],
          'cleanup(''table''): the 1 hour window''s row stays');
SELECT is((SELECT count(*) FROM ratelimit.key_state_unlogged), 2::bigint,
          'cleanup(''table'') left the unlogged engine alone');
SELECT is(ratelimit.cleanup_key_state(), 1::bigint, 'cleanup() covers both engines: the unlogged ended window goes');
SELECT is((SELECT array_agg(key ORDER BY key) FROM ratelimit.key_state_unlogged), ARRAY['native:clean:long'],
          'cleanup(): the unlogged 1 hour window''s row stays');
SELECT is(ratelimit.consume('native:clean:short', 3, '10 seconds'), '(t,3,2,0,10000)'::ratelimit.decision,
          'after cleanup the deleted key decides as a new key (its window had ended anyway)');

------------------------------------------------------------------------------------------------
-- The default call and named arguments.
------------------------------------------------------------------------------------------------
SET LOCAL ratelimit.test_clock = '2026-01-01 00:00:01+00';
SELECT is(ratelimit.consume('native:default', 3, '10 seconds'), '(t,3,2,0,9000)'::ratelimit.decision,
          'consume(key, limit, period) is a fixed window: window [0 s, 10 s), 2 left, full at 10 s');
SELECT is((SELECT count(*) FROM ratelimit.key_state WHERE key = 'native:default'), 1::bigint,
          'the default call keeps its state on the table engine');
SELECT is((SELECT count(*) FROM ratelimit.key_state_unlogged WHERE key = 'native:default'), 0::bigint,
          'the default call writes nothing to the unlogged engine');
SELECT is(ratelimit.consume('native:default', 3, '10 seconds', 1, 'fixed_window', 'table'),
          '(t,3,1,0,9000)'::ratelimit.decision,
          'the same call spelled out (cost 1, fixed_window, table) continues the same count');
SELECT is(ratelimit.peek('native:default', 3, '10 seconds', 1, 'rolling_window'),
          '(t,3,3,0,0)'::ratelimit.decision,
          'the default state is not another algorithm''s: a rolling_window peek sees a new key');
SELECT is(ratelimit.reset('native:default'), true, 'reset(key) defaults to the table engine');

-- gcra 5 per minute (one per 12 s), burst 2, on the unlogged engine; cost 2 takes the burst.
SELECT is(ratelimit.consume(p_key => 'native:named', p_limit => 5, p_period => '1 minute', p_cost => 2,
                            p_algorithm => 'gcra', p_engine => 'unlogged', p_burst => 2),
          '(t,2,0,0,24000)'::ratelimit.decision,
          'named arguments: gcra 5 per minute, burst 2, unlogged, cost 2: allowed, the burst is spent, full again in 24 s');
SELECT is(ratelimit.peek(p_burst => 2, p_engine => 'unlogged', p_algorithm => 'gcra', p_period => '1 minute',
                         p_limit => 5, p_key => 'native:named'),
          '(f,2,0,12000,24000)'::ratelimit.decision,
          'named arguments in another order, p_cost defaulted to 1: denied, one unit back in 12 s');
SELECT is((SELECT count(*) FROM ratelimit.key_state WHERE key = 'native:named'), 0::bigint,
          'named p_engine => ''unlogged'': nothing on the table engine');
SELECT is((SELECT count(*) FROM ratelimit.key_state_unlogged WHERE key = 'native:named'), 1::bigint,
          'named p_engine => ''unlogged'': the state is on the unlogged engine');

-- What PostgREST does for POST /rpc/consume: named arguments taken from the JSON body (only the
-- keys present; the others take their defaults) and the decision returned as a JSON object.
SELECT is((SELECT to_jsonb(d)
           FROM json_to_record('{"p_key": "native:rest", "p_limit": 3, "p_period": "10 seconds", "p_algorithm": "sliding_window"}')
                    AS body(p_key text, p_limit integer, p_period interval, p_algorithm text),
                LATERAL ratelimit.consume(p_key := body.p_key, p_limit := body.p_limit,
                                          p_period := body.p_period, p_algorithm := body.p_algorithm) AS d),
          '{"allowed": true, "limit": 3, "remaining": 2, "retry_after_ms": 0, "reset_after_ms": 10000}'::jsonb,
          'PostgREST-style call: arguments by name from a JSON body, the decision as a JSON object');
SELECT is(ratelimit.block(p_duration => '30 seconds', p_key => 'native:rest'), timestamptz '2026-01-01 00:00:31+00',
          'named arguments: block(p_duration, p_key) on the default engine returns the block''s end');
SELECT is(ratelimit.peek(p_key => 'native:rest', p_limit => 3, p_period => '10 seconds', p_algorithm => 'sliding_window'),
          '(f,3,0,30000,30000)'::ratelimit.decision,
          'named arguments: the block is on the key of the PostgREST-style call');
SELECT is(ratelimit.reset(p_engine => 'table', p_key => 'native:rest'), true, 'named arguments: reset(p_engine, p_key)');

------------------------------------------------------------------------------------------------
-- Scenarios, all with N = 3 per P = 10 s unless stated.
------------------------------------------------------------------------------------------------
INSERT INTO native_test.scenarios VALUES
    ('sequence', 3, '10 seconds', NULL),
    ('cost', 3, '10 seconds', NULL),
    ('refund', 3, '10 seconds', NULL),
    ('block', 3, '10 seconds', NULL),
    ('reset', 3, '10 seconds', NULL),
    ('backwards', 3, '10 seconds', NULL),
    ('switch', 3, '10 seconds', NULL),
    ('sliding_refund', 3, '10 seconds', NULL),
    ('burst', 1, '1 second', 5),
    ('small_burst', 10, '10 seconds', 1);

-- sequence: calls spread over two windows (or two bucket refills). Each algorithm: three allowed
-- calls, a denial, a call 1 ms before its retry_after_ms (denied) and one exactly at it
-- (allowed), the second round, then cost-0 peeks 1 ms before and exactly at the last
-- reset_after_ms (not yet full, then full).
-- A peek decides allowed and retry_after_ms exactly as the consume after it would, but takes
-- nothing, so its remaining and reset_after_ms describe the key as it is (the documented
-- formulas with nothing consumed).
INSERT INTO native_test.steps (scenario, algorithm, key_name, step, at_ms, action, amount, expected, note)
SELECT 'sequence', v.algorithm, v.algorithm, v.step, v.at_ms, v.action, v.amount, v.expected, v.note
FROM (VALUES
    -- fixed_window: windows [0 s, 10 s), [10 s, 20 s), ...
    ('fixed_window', 1, 1000, 'consume', 1, '(t,3,2,0,9000)', 'first call of window [0 s, 10 s): 2 left, full at 10 s'),
    ('fixed_window', 2, 2000, 'peek', 1, '(t,3,2,0,8000)', 'peek: allowed, and still 2 left since it takes nothing'),
    ('fixed_window', 3, 2000, 'consume', 1, '(t,3,1,0,8000)', 'second call'),
    ('fixed_window', 4, 3000, 'consume', 1, '(t,3,0,0,7000)', 'third call takes the last unit'),
    ('fixed_window', 5, 4000, 'consume', 1, '(f,3,0,6000,6000)', 'fourth call denied until the window ends at 10 s'),
    ('fixed_window', 6, 4000, 'peek', 1, '(f,3,0,6000,6000)', 'a peek is denied exactly as the consume was'),
    ('fixed_window', 7, 9999, 'consume', 1, '(f,3,0,1,1)', '1 ms before retry_after: still denied'),
    ('fixed_window', 8, 10000, 'consume', 1, '(t,3,2,0,10000)', 'exactly at retry_after: allowed, window [10 s, 20 s)'),
    ('fixed_window', 9, 12000, 'consume', 1, '(t,3,1,0,8000)', 'second call of the second window'),
    ('fixed_window', 10, 13000, 'consume', 1, '(t,3,0,0,7000)', 'third call of the second window'),
    ('fixed_window', 11, 15000, 'consume', 1, '(f,3,0,5000,5000)', 'fourth call of the second window denied until 20 s'),
    ('fixed_window', 12, 19999, 'peek', 0, '(t,3,0,0,1)', '1 ms before reset_after: nothing left yet'),
    ('fixed_window', 13, 20000, 'peek', 0, '(t,3,3,0,0)', 'exactly at reset_after: full'),
    ('fixed_window', 14, 20000, 'consume', 1, '(t,3,2,0,10000)', 'first call of window [20 s, 30 s)'),
    -- rolling_window: a window opens at the first call after the previous one closed.
    ('rolling_window', 1, 1000, 'consume', 1, '(t,3,2,0,10000)', 'first call opens window [1 s, 11 s)'),
    ('rolling_window', 2, 2000, 'peek', 1, '(t,3,2,0,9000)', 'peek: allowed, and still 2 left since it takes nothing'),
    ('rolling_window', 3, 2000, 'consume', 1, '(t,3,1,0,9000)', 'second call'),
    ('rolling_window', 4, 3000, 'consume', 1, '(t,3,0,0,8000)', 'third call takes the last unit'),
    ('rolling_window', 5, 4000, 'consume', 1, '(f,3,0,7000,7000)', 'fourth call denied until the window closes at 11 s'),
    ('rolling_window', 6, 4000, 'peek', 1, '(f,3,0,7000,7000)', 'a peek is denied exactly as the consume was'),
    ('rolling_window', 7, 10999, 'consume', 1, '(f,3,0,1,1)', '1 ms before retry_after: still denied'),
    ('rolling_window', 8, 11000, 'consume', 1, '(t,3,2,0,10000)', 'exactly at retry_after: allowed, opens window [11 s, 21 s)'),
    ('rolling_window', 9, 12000, 'consume', 1, '(t,3,1,0,9000)', 'second call of the second window'),
    ('rolling_window', 10, 13000, 'consume', 1, '(t,3,0,0,8000)', 'third call of the second window'),
    ('rolling_window', 11, 15000, 'consume', 1, '(f,3,0,6000,6000)', 'fourth call of the second window denied until 21 s'),
    ('rolling_window', 12, 20999, 'peek', 0, '(t,3,0,0,1)', '1 ms before reset_after: nothing left yet'),
    ('rolling_window', 13, 21000, 'peek', 0, '(t,3,3,0,0)', 'exactly at reset_after: full'),
    ('rolling_window', 14, 21000, 'consume', 1, '(t,3,2,0,10000)', 'opens window [21 s, 31 s)'),
    -- sliding_window: each unit counts for exactly 10 s after its call.
    ('sliding_window', 1, 1000, 'consume', 1, '(t,3,2,0,10000)', 'first call: counts until 11 s'),
    ('sliding_window', 2, 2000, 'peek', 1, '(t,3,2,0,9000)', 'peek: allowed, and still 2 left, empty at 11 s, since it takes nothing'),
    ('sliding_window', 3, 2000, 'consume', 1, '(t,3,1,0,10000)', 'second call: counts until 12 s'),
    ('sliding_window', 4, 3000, 'consume', 1, '(t,3,0,0,10000)', 'third call: counts until 13 s'),
    ('sliding_window', 5, 4000, 'consume', 1, '(f,3,0,7000,9000)', 'denied until the 1 s unit leaves at 11 s; empty at 13 s'),
    ('sliding_window', 6, 4000, 'peek', 1, '(f,3,0,7000,9000)', 'a peek is denied exactly as the consume was'),
    ('sliding_window', 7, 10999, 'consume', 1, '(f,3,0,1,2001)', '1 ms before retry_after: still denied'),
    ('sliding_window', 8, 11000, 'consume', 1, '(t,3,0,0,10000)', 'exactly at retry_after: the 1 s unit left, its place is taken'),
    ('sliding_window', 9, 12000, 'consume', 1, '(t,3,0,0,10000)', 'the 2 s unit left, its place is taken'),
    ('sliding_window', 10, 12500, 'consume', 1, '(f,3,0,500,9500)', 'denied until the 3 s unit leaves at 13 s'),
    ('sliding_window', 11, 12999, 'consume', 1, '(f,3,0,1,9001)', '1 ms before retry_after: still denied'),
    ('sliding_window', 12, 13000, 'consume', 1, '(t,3,0,0,10000)', 'exactly at retry_after: allowed'),
    ('sliding_window', 13, 14000, 'consume', 1, '(f,3,0,7000,9000)', 'units at 11, 12, 13 s: denied until 21 s, empty at 23 s'),
    ('sliding_window', 14, 22999, 'peek', 0, '(t,3,2,0,1)', '1 ms before reset_after: the 13 s unit still counts'),
    ('sliding_window', 15, 23000, 'peek', 0, '(t,3,3,0,0)', 'exactly at reset_after: full'),
    ('sliding_window', 16, 23000, 'consume', 1, '(t,3,2,0,10000)', 'a first call again'),
    -- sliding_window_counter: the previous window's count weighs by the part of it still inside
    -- the last 10 s. 3 units in [0 s, 10 s) weigh 3*(1 - e/10 s) at 10 s + e.
    ('sliding_window_counter', 1, 1000, 'consume', 1, '(t,3,2,0,19000)', 'first call of window [0 s, 10 s); it weighs on [10 s, 20 s) too'),
    ('sliding_window_counter', 2, 2000, 'peek', 1, '(t,3,2,0,18000)', 'peek: allowed, and still 2 left since it takes nothing'),
    ('sliding_window_counter', 3, 2000, 'consume', 1, '(t,3,1,0,18000)', 'second call'),
    ('sliding_window_counter', 4, 3000, 'consume', 1, '(t,3,0,0,17000)', 'third call takes the last unit'),
    ('sliding_window_counter', 5, 4000, 'consume', 1, '(f,3,0,9334,16000)', 'denied until the 3 old units weigh 2: 10 s + 3.333334 s'),
    ('sliding_window_counter', 6, 4000, 'peek', 1, '(f,3,0,9334,16000)', 'a peek is denied exactly as the consume was'),
    ('sliding_window_counter', 7, 13333, 'consume', 1, '(f,3,0,1,6667)', '1 ms before retry_after: 3 old units weigh 2.0001'),
    ('sliding_window_counter', 8, 13334, 'consume', 1, '(t,3,0,0,16666)', 'exactly at retry_after: they weigh 1.9998, allowed'),
    ('sliding_window_counter', 9, 16000, 'consume', 1, '(f,3,0,667,14000)', '3*0.4 + 1 = 2.2 in use: denied until 3*(1-e) + 1 <= 2 at 16.666667 s'),
    ('sliding_window_counter', 10, 16666, 'consume', 1, '(f,3,0,1,13334)', '1 ms before retry_after: still denied'),
    ('sliding_window_counter', 11, 16667, 'consume', 1, '(t,3,0,0,13333)', 'exactly at retry_after: allowed'),
    ('sliding_window_counter', 12, 29999, 'peek', 0, '(t,3,2,0,1)', '1 ms before reset_after: the 2 units of [10 s, 20 s) still weigh 0.0002'),
    ('sliding_window_counter', 13, 30000, 'peek', 0, '(t,3,3,0,0)', 'exactly at reset_after: full'),
    ('sliding_window_counter', 14, 30000, 'consume', 1, '(t,3,2,0,20000)', 'first call of window [30 s, 40 s)'),
    -- token_bucket: 3 tokens, one back every 10/3 s (3.333334 s rounded up to whole microseconds).
    ('token_bucket', 1, 1000, 'consume', 1, '(t,3,2,0,3334)', 'a full bucket: 2 left, full again in 3.333334 s'),
    ('token_bucket', 2, 2000, 'peek', 1, '(t,3,2,0,2334)', 'peek: allowed, and still 2.3 tokens, full at 4.333334 s, since it takes nothing'),
    ('token_bucket', 3, 2000, 'consume', 1, '(t,3,1,0,5667)', 'second call: 2.3 tokens before it'),
    ('token_bucket', 4, 3000, 'consume', 1, '(t,3,0,0,8000)', 'third call: 1.6 tokens before it, 0.6 after'),
    ('token_bucket', 5, 4000, 'consume', 1, '(f,3,0,334,7000)', '0.9 token: denied until a whole token at 4.333334 s'),
    ('token_bucket', 6, 4000, 'peek', 1, '(f,3,0,334,7000)', 'a peek is denied exactly as the consume was'),
    ('token_bucket', 7, 4333, 'consume', 1, '(f,3,0,1,6667)', '1 ms before retry_after: 0.9997 token'),
    ('token_bucket', 8, 4334, 'consume', 1, '(t,3,0,0,10000)', 'exactly at retry_after: 1.0002 tokens, allowed'),
    ('token_bucket', 9, 5000, 'consume', 1, '(f,3,0,2667,9334)', '0.2 token: denied until 7.666667 s'),
    ('token_bucket', 10, 7666, 'consume', 1, '(f,3,0,1,6668)', '1 ms before retry_after: still denied'),
    ('token_bucket', 11, 7667, 'consume', 1, '(t,3,0,0,10000)', 'exactly at retry_after: allowed; full at 17.666667 s'),
    ('token_bucket', 12, 17666, 'peek', 0, '(t,3,2,0,1)', '1 ms before reset_after: 2.9998 tokens'),
    ('token_bucket', 13, 17667, 'peek', 0, '(t,3,3,0,0)', 'exactly at reset_after: full'),
    ('token_bucket', 14, 17667, 'consume', 1, '(t,3,2,0,3334)', 'from a full bucket again'),
    -- gcra: with a clock that only moves forward, exactly the token bucket's decisions.
    ('gcra', 1, 1000, 'consume', 1, '(t,3,2,0,3334)', 'a new key: 2 left, full again in 3.333334 s'),
    ('gcra', 2, 2000, 'peek', 1, '(t,3,2,0,2334)', 'peek: allowed, and still 2 left, full at 4.333334 s, since it takes nothing'),
    ('gcra', 3, 2000, 'consume', 1, '(t,3,1,0,5667)', 'second call'),
    ('gcra', 4, 3000, 'consume', 1, '(t,3,0,0,8000)', 'third call'),
    ('gcra', 5, 4000, 'consume', 1, '(f,3,0,334,7000)', 'denied until 4.333334 s, as the token bucket'),
    ('gcra', 6, 4000, 'peek', 1, '(f,3,0,334,7000)', 'a peek is denied exactly as the consume was'),
    ('gcra', 7, 4333, 'consume', 1, '(f,3,0,1,6667)', '1 ms before retry_after: still denied'),
    ('gcra', 8, 4334, 'consume', 1, '(t,3,0,0,10000)', 'exactly at retry_after: allowed'),
    ('gcra', 9, 5000, 'consume', 1, '(f,3,0,2667,9334)', 'denied until 7.666667 s'),
    ('gcra', 10, 7666, 'consume', 1, '(f,3,0,1,6668)', '1 ms before retry_after: still denied'),
    ('gcra', 11, 7667, 'consume', 1, '(t,3,0,0,10000)', 'exactly at retry_after: allowed; full at 17.666667 s'),
    ('gcra', 12, 17666, 'peek', 0, '(t,3,2,0,1)', '1 ms before reset_after: not yet full'),
    ('gcra', 13, 17667, 'peek', 0, '(t,3,3,0,0)', 'exactly at reset_after: full'),
    ('gcra', 14, 17667, 'consume', 1, '(t,3,2,0,3334)', 'as from a new key again')
) AS v(algorithm, step, at_ms, action, amount, expected, note);

-- The other scenarios call every algorithm at the same instants.
INSERT INTO native_test.wide_steps VALUES
    -- cost: a cost larger than what is left is denied whole and debits nothing; cost 0 is allowed
    -- and writes nothing, not even a row for a new key.
    ('cost', 1, 500, 'peek', 0, 'cost 0 on a new key: allowed, full',
     '(t,3,3,0,0)', '(t,3,3,0,0)', '(t,3,3,0,0)', '(t,3,3,0,0)', '(t,3,3,0,0)', '(t,3,3,0,0)'),
    ('cost', 2, 500, 'consume', 0, 'cost 0 on a new key: allowed, creates no row',
     '(t,3,3,0,0)', '(t,3,3,0,0)', '(t,3,3,0,0)', '(t,3,3,0,0)', '(t,3,3,0,0)', '(t,3,3,0,0)'),
    ('cost', 3, 1000, 'consume', 2, 'cost 2 of 3: 1 left',
     '(t,3,1,0,9000)', '(t,3,1,0,10000)', '(t,3,1,0,10000)', '(t,3,1,0,19000)', '(t,3,1,0,6667)', '(t,3,1,0,6667)'),
    ('cost', 4, 1000, 'consume', 2, 'cost 2 with 1 left: denied whole, nothing debited',
     '(f,3,1,9000,9000)', '(f,3,1,10000,10000)', '(f,3,1,10000,10000)', '(f,3,1,14000,19000)', '(f,3,1,3334,6667)', '(f,3,1,3334,6667)'),
    ('cost', 5, 1000, 'consume', 1, 'the unit the denied call left is still there',
     '(t,3,0,0,9000)', '(t,3,0,0,10000)', '(t,3,0,0,10000)', '(t,3,0,0,19000)', '(t,3,0,0,10000)', '(t,3,0,0,10000)'),
    ('cost', 6, 1000, 'consume', 0, 'cost 0 with nothing left: allowed, changes nothing',
     '(t,3,0,0,9000)', '(t,3,0,0,10000)', '(t,3,0,0,10000)', '(t,3,0,0,19000)', '(t,3,0,0,10000)', '(t,3,0,0,10000)'),
    ('cost', 7, 1000, 'consume', 3, 'cost = limit with nothing left: denied until all 3 are back',
     '(f,3,0,9000,9000)', '(f,3,0,10000,10000)', '(f,3,0,10000,10000)', '(f,3,0,19000,19000)', '(f,3,0,10000,10000)', '(f,3,0,10000,10000)'),

    -- refund: 3 consumed at 1 s, refunds at 4 s. A refund returns what a one-unit peek says after
    -- it; the cost-0 peeks show the allowance: 0, then 2 after refunding 2, then 3 (not 4) after
    -- refunding 3 with only 1 in use.
    ('refund', 1, 1000, 'consume', 3, 'the whole allowance at once',
     '(t,3,0,0,9000)', '(t,3,0,0,10000)', '(t,3,0,0,10000)', '(t,3,0,0,19000)', '(t,3,0,0,10000)', '(t,3,0,0,10000)'),
    ('refund', 2, 4000, 'peek', 0, 'nothing left before the refund',
     '(t,3,0,0,6000)', '(t,3,0,0,7000)', '(t,3,0,0,7000)', '(t,3,0,0,16000)', '(t,3,0,0,7000)', '(t,3,0,0,7000)'),
    ('refund', 3, 4000, 'refund', 2, 'refund 2: returns what a one-unit peek says afterwards, 2 left',
     '(t,3,2,0,6000)', '(t,3,2,0,7000)', '(t,3,2,0,7000)', '(t,3,2,0,16000)', '(t,3,2,0,334)', '(t,3,2,0,334)'),
    ('refund', 4, 4000, 'peek', 0, 'a cost-0 peek agrees: remaining went from 0 to 2',
     '(t,3,2,0,6000)', '(t,3,2,0,7000)', '(t,3,2,0,7000)', '(t,3,2,0,16000)', '(t,3,2,0,334)', '(t,3,2,0,334)'),
    ('refund', 5, 4000, 'refund', 3, 'refund 3 with 1 unit in use gives back only that unit: full, nothing to wait for',
     '(t,3,3,0,0)', '(t,3,3,0,0)', '(t,3,3,0,0)', '(t,3,3,0,0)', '(t,3,3,0,0)', '(t,3,3,0,0)'),
    ('refund', 6, 4000, 'peek', 0, 'full, and not more than full',
     '(t,3,3,0,0)', '(t,3,3,0,0)', '(t,3,3,0,0)', '(t,3,3,0,0)', '(t,3,3,0,0)', '(t,3,3,0,0)'),
    ('refund', 7, 4000, 'consume', 3, 'the full allowance is there',
     '(t,3,0,0,6000)', '(t,3,0,0,10000)', '(t,3,0,0,10000)', '(t,3,0,0,16000)', '(t,3,0,0,10000)', '(t,3,0,0,10000)'),
    ('refund', 8, 4000, 'consume', 1, 'and not one unit more',
     '(f,3,0,6000,6000)', '(f,3,0,10000,10000)', '(f,3,0,10000,10000)', '(f,3,0,9334,16000)', '(f,3,0,3334,10000)', '(f,3,0,3334,10000)'),

    -- block: denies until its end (retry_after_ms = the time left in it), allows at its end,
    -- never shortens, and keeps the counts (reset_after_ms = when both block and counts are gone).
    ('block', 1, 1000, 'block', 5000, 'block a new key for 5 s: returns its end, T0+6 s',
     '6000', '6000', '6000', '6000', '6000', '6000'),
    ('block', 2, 1000, 'block', 1000, 'a shorter block does not shorten it',
     '6000', '6000', '6000', '6000', '6000', '6000'),
    ('block', 3, 1000, 'consume', 1, 'blocked: denied for the 5 s left',
     '(f,3,0,5000,5000)', '(f,3,0,5000,5000)', '(f,3,0,5000,5000)', '(f,3,0,5000,5000)', '(f,3,0,5000,5000)', '(f,3,0,5000,5000)'),
    ('block', 4, 1000, 'peek', 0, 'blocked: even cost 0 is denied',
     '(f,3,0,5000,5000)', '(f,3,0,5000,5000)', '(f,3,0,5000,5000)', '(f,3,0,5000,5000)', '(f,3,0,5000,5000)', '(f,3,0,5000,5000)'),
    ('block', 5, 5999, 'consume', 1, '1 ms before the block ends: denied',
     '(f,3,0,1,1)', '(f,3,0,1,1)', '(f,3,0,1,1)', '(f,3,0,1,1)', '(f,3,0,1,1)', '(f,3,0,1,1)'),
    ('block', 6, 6000, 'consume', 1, 'exactly at the block''s end: a first call',
     '(t,3,2,0,4000)', '(t,3,2,0,10000)', '(t,3,2,0,10000)', '(t,3,2,0,14000)', '(t,3,2,0,3334)', '(t,3,2,0,3334)'),
    ('block', 7, 6000, 'block', 2000, 'block again for 2 s',
     '8000', '8000', '8000', '8000', '8000', '8000'),
    ('block', 8, 7000, 'consume', 1, 'blocked: retry at the block''s end, reset when block and counts are both gone',
     '(f,3,0,1000,3000)', '(f,3,0,1000,9000)', '(f,3,0,1000,9000)', '(f,3,0,1000,13000)', '(f,3,0,1000,2334)', '(f,3,0,1000,2334)'),
    ('block', 9, 8000, 'consume', 1, 'at the block''s end: counted after the call at 6 s',
     '(t,3,1,0,2000)', '(t,3,1,0,8000)', '(t,3,1,0,10000)', '(t,3,1,0,12000)', '(t,3,1,0,4667)', '(t,3,1,0,4667)'),

    -- reset: forgets the counts and the block; true when there was state, false otherwise.
    ('reset', 1, 1000, 'consume', 3, 'the whole allowance',
     '(t,3,0,0,9000)', '(t,3,0,0,10000)', '(t,3,0,0,10000)', '(t,3,0,0,19000)', '(t,3,0,0,10000)', '(t,3,0,0,10000)'),
    ('reset', 2, 1000, 'consume', 1, 'nothing left',
     '(f,3,0,9000,9000)', '(f,3,0,10000,10000)', '(f,3,0,10000,10000)', '(f,3,0,12334,19000)', '(f,3,0,3334,10000)', '(f,3,0,3334,10000)'),
    ('reset', 3, 1000, 'reset', NULL, 'a key with state: true',
     'true', 'true', 'true', 'true', 'true', 'true'),
    ('reset', 4, 1000, 'row', NULL, 'its row is gone',
     'absent', 'absent', 'absent', 'absent', 'absent', 'absent'),
    ('reset', 5, 1000, 'reset', NULL, 'nothing left to reset: false',
     'false', 'false', 'false', 'false', 'false', 'false'),
    ('reset', 6, 1000, 'consume', 1, 'the full allowance again: a first call',
     '(t,3,2,0,9000)', '(t,3,2,0,10000)', '(t,3,2,0,10000)', '(t,3,2,0,19000)', '(t,3,2,0,3334)', '(t,3,2,0,3334)'),
    ('reset', 7, 1000, 'block', 5000, 'block the key',
     '6000', '6000', '6000', '6000', '6000', '6000'),
    ('reset', 8, 1000, 'reset', NULL, 'a blocked key has state: true',
     'true', 'true', 'true', 'true', 'true', 'true'),
    ('reset', 9, 1000, 'consume', 1, 'neither the block nor the earlier call is left: a first call',
     '(t,3,2,0,9000)', '(t,3,2,0,10000)', '(t,3,2,0,10000)', '(t,3,2,0,19000)', '(t,3,2,0,3334)', '(t,3,2,0,3334)'),

    -- backwards: the clock steps back after the first call. Decisions are made as of the latest
    -- instant the state has seen, and waits are measured from the real clock: never more than 3
    -- units allowed.
    ('backwards', 1, 10500, 'consume', 1, 'first call at 10.5 s',
     '(t,3,2,0,9500)', '(t,3,2,0,10000)', '(t,3,2,0,10000)', '(t,3,2,0,19500)', '(t,3,2,0,3334)', '(t,3,2,0,3334)'),
    ('backwards', 2, 9000, 'consume', 1, 'clock 1.5 s back: counted with the first call, waits measured from 9 s',
     '(t,3,1,0,11000)', '(t,3,1,0,11500)', '(t,3,1,0,11500)', '(t,3,1,0,21000)', '(t,3,1,0,8167)', '(t,3,1,0,8167)'),
    ('backwards', 3, 9000, 'consume', 1, 'third unit',
     '(t,3,0,0,11000)', '(t,3,0,0,11500)', '(t,3,0,0,11500)', '(t,3,0,0,21000)', '(t,3,0,0,11500)', '(t,3,0,0,11500)'),
    ('backwards', 4, 9000, 'consume', 1, 'no fourth unit',
     '(f,3,0,11000,11000)', '(f,3,0,11500,11500)', '(f,3,0,11500,11500)', '(f,3,0,14334,21000)', '(f,3,0,4834,11500)', '(f,3,0,4834,11500)'),
    ('backwards', 5, 0, 'consume', 1, 'clock 10.5 s back, before the first call: still denied, remaining never negative',
     '(f,3,0,20000,20000)', '(f,3,0,20500,20500)', '(f,3,0,20500,20500)', '(f,3,0,23334,30000)', '(f,3,0,13834,20500)', '(f,3,0,13834,20500)'),

    -- burst (token_bucket, gcra): 1 per second with a burst of 5; limit in the decision is B.
    ('burst', 1, 1000, 'consume', 1, 'a new key starts with the burst of 5',
     NULL, NULL, NULL, NULL, '(t,5,4,0,1000)', '(t,5,4,0,1000)'),
    ('burst', 2, 1000, 'consume', 1, 'second of the burst',
     NULL, NULL, NULL, NULL, '(t,5,3,0,2000)', '(t,5,3,0,2000)'),
    ('burst', 3, 1000, 'consume', 1, 'third of the burst',
     NULL, NULL, NULL, NULL, '(t,5,2,0,3000)', '(t,5,2,0,3000)'),
    ('burst', 4, 1000, 'consume', 1, 'fourth of the burst',
     NULL, NULL, NULL, NULL, '(t,5,1,0,4000)', '(t,5,1,0,4000)'),
    ('burst', 5, 1000, 'consume', 1, 'fifth of the burst, well above the limit of 1 per second',
     NULL, NULL, NULL, NULL, '(t,5,0,0,5000)', '(t,5,0,0,5000)'),
    ('burst', 6, 1000, 'consume', 1, 'burst spent: one unit back per second',
     NULL, NULL, NULL, NULL, '(f,5,0,1000,5000)', '(f,5,0,1000,5000)'),
    ('burst', 7, 3500, 'consume', 3, '2.5 units back: cost 3 denied until 4 s',
     NULL, NULL, NULL, NULL, '(f,5,2,500,2500)', '(f,5,2,500,2500)'),
    ('burst', 8, 3999, 'consume', 3, '1 ms before retry_after: still denied',
     NULL, NULL, NULL, NULL, '(f,5,2,1,2001)', '(f,5,2,1,2001)'),
    ('burst', 9, 4000, 'consume', 3, 'exactly at retry_after: allowed',
     NULL, NULL, NULL, NULL, '(t,5,0,0,5000)', '(t,5,0,0,5000)'),
    ('burst', 10, 9000, 'peek', 0, 'the whole burst is back after 5 s',
     NULL, NULL, NULL, NULL, '(t,5,5,0,0)', '(t,5,5,0,0)'),
    ('burst', 11, 9000, 'consume', 5, 'a cost above the limit but within the burst is allowed',
     NULL, NULL, NULL, NULL, '(t,5,0,0,5000)', '(t,5,0,0,5000)'),
    -- small_burst: 10 per 10 s with a burst of 1 spreads the calls one per second.
    ('small_burst', 1, 1000, 'consume', 1, 'burst 1: one call at a time',
     NULL, NULL, NULL, NULL, '(t,1,0,0,1000)', '(t,1,0,0,1000)'),
    ('small_burst', 2, 1000, 'consume', 1, 'a second call at once is denied for 1 s',
     NULL, NULL, NULL, NULL, '(f,1,0,1000,1000)', '(f,1,0,1000,1000)'),
    ('small_burst', 3, 1999, 'consume', 1, '1 ms before retry_after: still denied',
     NULL, NULL, NULL, NULL, '(f,1,0,1,1)', '(f,1,0,1,1)'),
    ('small_burst', 4, 2000, 'consume', 1, 'exactly at retry_after: allowed',
     NULL, NULL, NULL, NULL, '(t,1,0,0,1000)', '(t,1,0,0,1000)');

INSERT INTO native_test.steps (scenario, algorithm, key_name, step, at_ms, action, amount, expected, note)
SELECT w.scenario, a.algorithm, a.algorithm, w.step, w.at_ms, w.action, w.amount, a.expected, w.note
FROM native_test.wide_steps AS w
CROSS JOIN LATERAL (VALUES ('fixed_window', w.fixed), ('rolling_window', w.rolling),
                           ('sliding_window', w.sliding), ('sliding_window_counter', w.counter),
                           ('token_bucket', w.bucket), ('gcra', w.gcra)) AS a(algorithm, expected)
WHERE a.expected IS NOT NULL;

-- switch: one key used with several algorithms. Another algorithm's state reads as a new key;
-- a block holds whatever algorithm is asked.
INSERT INTO native_test.steps (scenario, algorithm, key_name, step, at_ms, action, amount, expected, note) VALUES
    ('switch', 'fixed_window', 'shared', 1, 1000, 'consume', 3, '(t,3,0,0,9000)', 'the whole fixed window'),
    ('switch', 'fixed_window', 'shared', 2, 1000, 'consume', 1, '(f,3,0,9000,9000)', 'nothing left'),
    ('switch', 'rolling_window', 'shared', 3, 1000, 'consume', 1, '(t,3,2,0,10000)', 'another algorithm on the key starts from a new state'),
    ('switch', 'fixed_window', 'shared', 4, 1000, 'consume', 1, '(t,3,2,0,9000)', 'and back: the fixed window''s counts were replaced'),
    ('switch', 'fixed_window', 'shared', 5, 1000, 'block', 5000, '6000', 'block the key for 5 s'),
    ('switch', 'token_bucket', 'shared', 6, 1000, 'consume', 1, '(f,3,0,5000,5000)', 'the block holds for another algorithm too'),
    ('switch', 'token_bucket', 'shared', 7, 6000, 'consume', 1, '(t,3,2,0,3334)', 'after the block: a full bucket'),
    ('switch', 'fixed_window', 'shared', 8, 6000, 'consume', 1, '(t,3,2,0,4000)', 'and a new fixed window');

-- sliding_refund: a refund takes units off the newest calls first, so the oldest keep counting
-- and the key is empty when they expire (11 s), not when the refunded call would have (15 s).
INSERT INTO native_test.steps (scenario, algorithm, key_name, step, at_ms, action, amount, expected, note) VALUES
    ('sliding_refund', 'sliding_window', 'sliding_window', 1, 1000, 'consume', 1, '(t,3,2,0,10000)', 'a unit at 1 s'),
    ('sliding_refund', 'sliding_window', 'sliding_window', 2, 5000, 'consume', 1, '(t,3,1,0,10000)', 'a unit at 5 s'),
    ('sliding_refund', 'sliding_window', 'sliding_window', 3, 5000, 'refund', 1, '(t,3,2,0,6000)', 'refund 1: the 5 s unit is removed, the 1 s unit counts until 11 s'),
    ('sliding_refund', 'sliding_window', 'sliding_window', 4, 5000, 'peek', 0, '(t,3,2,0,6000)', 'a cost-0 peek agrees'),
    ('sliding_refund', 'sliding_window', 'sliding_window', 5, 11000, 'peek', 0, '(t,3,3,0,0)', 'full at 11 s');

SELECT * FROM native_test.run('sequence');
SELECT * FROM native_test.run('cost');
SELECT * FROM native_test.run('refund');
SELECT * FROM native_test.run('sliding_refund');
SELECT * FROM native_test.run('block');
SELECT * FROM native_test.run('reset');
SELECT * FROM native_test.run('backwards');
SELECT * FROM native_test.run('switch');
SELECT * FROM native_test.run('burst');
SELECT * FROM native_test.run('small_burst');

-- A peek on a key that has no row creates none.
SELECT is(native_test.state_row(e, 'native:peek-only'), NULL,
          format('%s, %s engine: a peek on a new key creates no row', a, e))
FROM unnest(ARRAY['table', 'unlogged']) AS e,
     unnest(ARRAY['fixed_window', 'rolling_window', 'sliding_window', 'sliding_window_counter', 'token_bucket', 'gcra']) AS a,
     LATERAL ratelimit.peek('native:peek-only', 3, '10 seconds', 1, a, e) AS d
ORDER BY e, a;

------------------------------------------------------------------------------------------------
-- The waits are true for other limits, costs and call rates too: consume at a steady rate from
-- an instant aligned to nothing until a call is denied; then a call is still denied 1 ms before
-- retry_after_ms and allowed exactly at it, and the key is not yet full 1 ms before
-- reset_after_ms and full exactly at it. Along the way, every peek agreed with the consume after
-- it: the same allowed, limit and retry_after_ms, and, when allowed, p_cost more remaining
-- (when denied, the same decision, as a denied consume takes nothing either).
------------------------------------------------------------------------------------------------
CREATE FUNCTION native_test.check_waits(p_algorithm text, p_engine text, p_limit integer, p_period interval,
                                        p_cost integer, p_gap_us bigint, p_burst integer)
RETURNS SETOF text LANGUAGE plpgsql AS $$
DECLARE
    k text := format('waits:%s:%s:%s:%s:%s:%s', p_algorithm, p_limit, p_period, p_cost, p_gap_us, p_burst);
    label text := format('%s, %s engine, %s per %s%s, cost %s every %s us', p_algorithm, p_engine, p_limit,
                         p_period, CASE WHEN p_burst IS NULL THEN '' ELSE ', burst ' || p_burst END,
                         p_cost, p_gap_us);
    now_us bigint := 3141592;
    calls integer := 0;
    mismatches integer := 0;
    p ratelimit.decision;
    d ratelimit.decision;
BEGIN
    LOOP
        PERFORM native_test.at_us(now_us);
        p := ratelimit.peek(k, p_limit, p_period, p_cost, p_algorithm, p_engine, p_burst);
        d := ratelimit.consume(k, p_limit, p_period, p_cost, p_algorithm, p_engine, p_burst);
        calls := calls + 1;
        IF p.allowed IS DISTINCT FROM d.allowed OR p."limit" IS DISTINCT FROM d."limit"
           OR p.retry_after_ms IS DISTINCT FROM d.retry_after_ms
           OR (d.allowed AND p.remaining IS DISTINCT FROM d.remaining + p_cost)
           OR (NOT d.allowed AND p IS DISTINCT FROM d) THEN
            mismatches := mismatches + 1;
            RAISE NOTICE '%: peek % then consume % at T0 + % us', label, p, d, now_us;
        END IF;
        EXIT WHEN NOT d.allowed OR calls > 2 * coalesce(p_burst, p_limit) + 10;
        now_us := now_us + p_gap_us;
    END LOOP;
    RETURN NEXT ok(NOT d.allowed, format('%s: denied after %s calls', label, calls - 1));
    RETURN NEXT is(mismatches, 0, label || ': every peek agreed with the consume after it');
    PERFORM native_test.at_us(now_us + (d.retry_after_ms - 1) * 1000);
    RETURN NEXT is((ratelimit.peek(k, p_limit, p_period, p_cost, p_algorithm, p_engine, p_burst)).allowed, false,
                   format('%s: still denied 1 ms before retry_after_ms = %s', label, d.retry_after_ms));
    PERFORM native_test.at_us(now_us + d.retry_after_ms * 1000);
    RETURN NEXT is((ratelimit.peek(k, p_limit, p_period, p_cost, p_algorithm, p_engine, p_burst)).allowed, true,
                   format('%s: allowed exactly at retry_after_ms = %s', label, d.retry_after_ms));
    PERFORM native_test.at_us(now_us + (d.reset_after_ms - 1) * 1000);
    RETURN NEXT cmp_ok((ratelimit.peek(k, p_limit, p_period, 0, p_algorithm, p_engine, p_burst)).remaining, '<', d."limit",
                       format('%s: not yet full 1 ms before reset_after_ms = %s', label, d.reset_after_ms));
    PERFORM native_test.at_us(now_us + d.reset_after_ms * 1000);
    RETURN NEXT is((ratelimit.peek(k, p_limit, p_period, 0, p_algorithm, p_engine, p_burst)).remaining, d."limit",
                   format('%s: full exactly at reset_after_ms = %s', label, d.reset_after_ms));
END
$$;

SELECT native_test.check_waits(a, e, c.lim, c.period, c.cost, c.gap_us,
                               CASE WHEN a IN ('token_bucket', 'gcra') THEN c.burst END)
FROM (VALUES
    (1, 3, interval '10 seconds', 1, 1234567::bigint, NULL::integer),
    (2, 7, interval '3 seconds', 2, 100000, NULL),
    (3, 5, interval '1 second', 5, 300000, NULL),
    (4, 2, interval '1 minute', 1, 7000000, 4),
    (5, 1000, interval '1 hour', 999, 1000000, NULL),
    (6, 10, interval '1 millisecond', 3, 0, NULL),
    (7, 4, interval '365 days', 1, 86400000000, NULL)
) AS c(id, lim, period, cost, gap_us, burst),
unnest(ARRAY['table', 'unlogged']) WITH ORDINALITY AS en(e, en_order),
unnest(ARRAY['fixed_window', 'rolling_window', 'sliding_window', 'sliding_window_counter', 'token_bucket', 'gcra'])
    WITH ORDINALITY AS al(a, al_order)
ORDER BY c.id, en_order, al_order;

SELECT * FROM finish();
ROLLBACK;
