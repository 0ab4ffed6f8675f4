-- Delay instead of deny as a policy option (policies.max_delay), on every engine: a call that
-- would wait at most max_delay is allowed for later (reason 'delayed', retry_after_ms the wait),
-- its slot taken now, so that the calls after it wait behind it and admitted calls never go
-- faster than the limit; a longer wait is a denial that charges nothing; with several policies
-- the call goes when the last has come round, and a denial elsewhere charges none of them; the
-- window algorithms, and bad max_delay values, are refused when the row is written, naming
-- max_delay, and nothing is written.
BEGIN;
CREATE EXTENSION IF NOT EXISTS pgtap;
\ir install_edition.psql
SET LOCAL timezone = 'UTC';

SELECT plan(41);

SELECT skip('the SQL edition has no memory engine', 10) WHERE NOT :memory_engine;

CREATE SCHEMA delay_test;
-- The memory engine keeps its keys outside the transaction: this run's subjects are its own.
CREATE TABLE delay_test.run AS
SELECT 'dly' || pg_backend_pid() || '_' || (extract(epoch FROM clock_timestamp()) * 1e6)::bigint AS prefix;

CREATE FUNCTION delay_test.subject(p_name text) RETURNS text LANGUAGE sql
AS $$SELECT prefix || ':' || p_name FROM delay_test.run$$;

-- Far in the future, so that the memory engine's worker (real clock) never frees these keys.
CREATE FUNCTION delay_test.at(p_offset interval) RETURNS void LANGUAGE sql
AS $$SELECT set_config('ratelimit.test_clock',
                       (timestamptz '2100-01-01 00:00:00+00' + p_offset)::text, true)$$;

------------------------------------------------------------------------------------------------
-- 1. One policy, on every engine and both bucket algorithms
------------------------------------------------------------------------------------------------

CREATE FUNCTION delay_test.one_policy(p_engine text, p_algorithm text) RETURNS SETOF text
LANGUAGE plpgsql AS $$
DECLARE
    policy_name text := 'dly.' || p_engine || '.' || p_algorithm;
    subject text := delay_test.subject(policy_name);
    label text := p_algorithm || ' on ' || p_engine || ': ';
    waits bigint[];
    reasons text[];
    d ratelimit.policy_decision;
BEGIN
    PERFORM delay_test.at('0');
    -- 10 a second, 2 at once, a call may wait up to 350 ms.
    INSERT INTO ratelimit.policies (name, algorithm, "limit", period, burst, engine, max_delay)
    VALUES (policy_name, p_algorithm, 10, '1 second', 2, p_engine, '350 milliseconds');
    SELECT array_agg(d2.retry_after_ms ORDER BY n), array_agg(d2.reason ORDER BY n)
      INTO waits, reasons
      FROM generate_series(1, 6) AS n
     CROSS JOIN LATERAL ratelimit.check(policy_name, subject, p_cost => 1 + 0 * n) AS d2;
    RETURN NEXT is(waits, ARRAY[0, 0, 100, 200, 300, 400]::bigint[],
                   label || 'two at once, then each 100 ms behind the last, then the first that would wait past 350 ms');
    RETURN NEXT is(reasons, ARRAY['within_limits', 'within_limits', 'delayed', 'delayed', 'delayed', 'limited'],
                   label || 'the delayed calls say so; the one that would wait 400 ms is limited');
    -- The denied call charged nothing: 100 ms on, the next slot is still 300 ms away (as it
    -- was at 0 for a call at 400 ms).
    PERFORM delay_test.at('100 milliseconds');
    d := ratelimit.check(policy_name, subject);
    RETURN NEXT is(ARRAY[d.allowed::int, d.retry_after_ms::int], ARRAY[1, 300],
                   label || '100 ms later the next call is delayed to the slot after the last admitted');
    -- Once the schedule has caught up, calls go at once again.
    PERFORM delay_test.at('2 seconds');
    d := ratelimit.check(policy_name, subject);
    RETURN NEXT is(ARRAY[d.allowed::text, d.reason, d.retry_after_ms::text],
                   ARRAY['true', 'within_limits', '0'], label || 'after a quiet spell, at once');
    -- A peek (cost 0) reports and takes nothing.
    RETURN NEXT is((ratelimit.check(policy_name, subject, 0)).remaining, 1,
                   label || 'a cost-0 check takes nothing');
END
$$;

SELECT * FROM delay_test.one_policy('table', 'gcra');
SELECT * FROM delay_test.one_policy('unlogged', 'token_bucket');
SELECT * FROM delay_test.one_policy('memory', 'gcra') WHERE :memory_engine;
SELECT * FROM delay_test.one_policy('memory', 'token_bucket') WHERE :memory_engine;

------------------------------------------------------------------------------------------------
-- 2. Several policies: the longest delay, and all or nothing
------------------------------------------------------------------------------------------------

-- Two engines: the SQL edition's second is unlogged.
SELECT CASE WHEN :memory_engine THEN 'memory' ELSE 'unlogged' END AS second_engine \gset
INSERT INTO ratelimit.policies (name, algorithm, "limit", period, burst, engine, max_delay) VALUES
    ('dly.fast', 'gcra', 10, '1 second', 1, 'table', '1 second'),
    ('dly.slow', 'token_bucket', 2, '1 second', 1, :'second_engine', '1 second'),
    ('dly.cap', 'fixed_window', 3, '1 hour', NULL, :'second_engine', NULL);
SELECT delay_test.at('1 day');
SELECT is((SELECT array_agg(d.retry_after_ms ORDER BY n)
             FROM generate_series(1, 3) AS n
            CROSS JOIN LATERAL ratelimit.check_all(ARRAY['dly.fast', 'dly.slow'],
                        ARRAY[delay_test.subject('m'), delay_test.subject('m')],
                        p_cost => 1 + 0 * n) AS d),
          ARRAY[0, 500, 1000]::bigint[],
          'check_all: the call goes when the slowest policy has come round');
SELECT is((SELECT reason FROM ratelimit.check_all(ARRAY['dly.fast', 'dly.slow'],
                        ARRAY[delay_test.subject('m'), delay_test.subject('m')])),
          'limited', 'a fourth call would wait 1.5 s on dly.slow: denied');
SELECT is((ratelimit.check('dly.fast', delay_test.subject('m'))).retry_after_ms, 300::bigint,
          'and it charged dly.fast nothing: its schedule holds the three admitted calls only');

-- A denial by another policy charges the delaying one nothing.
SELECT ratelimit.check('dly.cap', delay_test.subject('c'), 3);
SELECT is((ratelimit.check_all(ARRAY['dly.slow', 'dly.cap'],
                               ARRAY[delay_test.subject('c'), delay_test.subject('c')])).policy,
          'dly.cap', 'a spent fixed window denies the call');
SELECT is(ARRAY[(d).allowed::text, (d).reason, (d).retry_after_ms::text],
          ARRAY['true', 'within_limits', '0'],
          'and the delaying policy was not charged: its next call goes at once')
FROM (SELECT ratelimit.check('dly.slow', delay_test.subject('c')) AS d) q;

-- HTTP: a delayed call is a 200; the decision carries the wait.
SELECT delay_test.at('2 days');
SELECT ratelimit.check('dly.slow', delay_test.subject('h'));
SELECT is(ARRAY[(r ->> 'status'), (r -> 'decision' ->> 'reason'), (r -> 'decision' ->> 'retry_after_ms')],
          ARRAY['200', 'delayed', '500'], 'check_http: a delayed call is a 200 whose decision says the wait')
FROM (SELECT ratelimit.check_http(ARRAY['dly.slow'], ARRAY[delay_test.subject('h')]) AS r) q;

------------------------------------------------------------------------------------------------
-- 3. Rows refused, naming max_delay, nothing written
------------------------------------------------------------------------------------------------

CREATE FUNCTION delay_test.refused(p_algorithm text, p_max_delay text, p_label text)
RETURNS SETOF text LANGUAGE plpgsql AS $$
DECLARE
    before jsonb := (SELECT jsonb_agg(p ORDER BY name) FROM ratelimit.policies p);
    statement text := format($q$INSERT INTO ratelimit.policies (name, algorithm, "limit", period, max_delay)
                                VALUES ('dly.bad', %L, 5, '1 minute', %s)$q$, p_algorithm, p_max_delay);
BEGIN
    RETURN NEXT throws_like(statement, '%max_delay%', p_label || ': the error names max_delay');
    BEGIN
        EXECUTE statement;
        RETURN NEXT fail(p_label || ': accepted');
    EXCEPTION WHEN OTHERS THEN
        RETURN NEXT is(SQLSTATE, '22023', p_label || ': SQLSTATE 22023');
    END;
    RETURN NEXT is((SELECT jsonb_agg(p ORDER BY name) FROM ratelimit.policies p), before,
                   p_label || ': nothing written');
END
$$;

SELECT * FROM delay_test.refused('fixed_window', $$'1 second'$$, 'a fixed window with max_delay');
SELECT * FROM delay_test.refused('sliding_window', $$'1 second'$$, 'a sliding window with max_delay');
SELECT * FROM delay_test.refused('gcra', $$'-1 second'$$, 'a negative max_delay');
SELECT * FROM delay_test.refused('gcra', $$'1 month'$$, 'a max_delay in months');
SELECT * FROM delay_test.refused('gcra', $$'366 days'$$, 'a max_delay over 365 days');

SELECT * FROM finish();
ROLLBACK;
