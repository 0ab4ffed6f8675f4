-- Delay instead of deny (ratelimit.consume's p_max_wait; the test server preloads the library):
-- on every engine, for token_bucket and gcra, a call that would wait at most p_max_wait is
-- allowed with retry_after_ms the delay before it may go, the next one's delay stacked behind
-- it; a call whose wait exceeds p_max_wait is denied and charged nothing; the admitted calls'
-- go instants keep the rate in every span, and exactly as many are admitted as the schedule
-- has room for. The window algorithms refuse p_max_wait (22023) and write nothing; bad values
-- are refused; NULL and '0' mean no delay. Many connections at once:
-- test/concurrency/delay_concurrency_test.cpp.
--
-- The memory engine lives in shared memory, not in this transaction: every key carries a
-- prefix unique to this run.
BEGIN;
CREATE EXTENSION IF NOT EXISTS pgtap;
\ir install_edition.psql
SET LOCAL timezone = 'UTC';

SELECT plan(38);
-- The memory engine's 12, skipped on the SQL edition, which has none.
SELECT skip('the SQL edition has no memory engine', 12) WHERE NOT :memory_engine;

CREATE SCHEMA delay_test;
CREATE TABLE delay_test.run AS
SELECT 'pgtap-' || pg_backend_pid() || '-' || (extract(epoch FROM clock_timestamp()) * 1e6)::bigint
           AS prefix;
CREATE FUNCTION delay_test.key(p_name text) RETURNS text LANGUAGE sql
AS $$SELECT prefix || ':' || p_name FROM delay_test.run$$;
-- Sets the test clock to p_ms milliseconds after 2100-01-01 00:00 UTC.
CREATE FUNCTION delay_test.at(p_ms bigint) RETURNS text LANGUAGE sql
AS $$SELECT set_config('ratelimit.test_clock',
                       ('2100-01-01 00:00:00+00'::timestamptz + p_ms * interval '1 millisecond')::text,
                       true)$$;
SELECT delay_test.at(0);

-- One key, 2 per second (one every 500 ms), burst 2, p_max_wait 2 seconds; the observations,
-- in order: allowed, remaining, retry_after_ms, reset_after_ms.
CREATE FUNCTION delay_test.scenario(p_algorithm text, p_engine text)
RETURNS text[] LANGUAGE plpgsql AS $$
DECLARE
    k text := delay_test.key('scenario/' || p_algorithm || '/' || p_engine);
    d ratelimit.decision;
    seen text[] := '{}';
BEGIN
    PERFORM delay_test.at(0);
    -- Seven calls at one instant: two at once, four delayed 500 ms apart, the last denied.
    FOR i IN 1..7 LOOP
        d := ratelimit.consume(k, 2, '1 second', 1, p_algorithm, p_engine,
                               p_max_wait => '2 seconds');
        seen := seen || format('%s %s %s %s', d.allowed, d.remaining, d.retry_after_ms, d.reset_after_ms);
    END LOOP;
    -- The denied call was charged nothing: a plain peek still says 2.5 seconds.
    d := ratelimit.peek(k, 2, '1 second', 1, p_algorithm, p_engine);
    seen := seen || format('peek %s %s', d.allowed, d.retry_after_ms);
    -- 1.2 seconds on, the queue has moved up: the next call waits 1.3 seconds, behind the others.
    PERFORM delay_test.at(1200);
    d := ratelimit.consume(k, 2, '1 second', 1, p_algorithm, p_engine, p_max_wait => '2 seconds');
    seen := seen || format('%s %s %s %s', d.allowed, d.remaining, d.retry_after_ms, d.reset_after_ms);
    -- A cost of 2 waits for both units.
    d := ratelimit.consume(k, 2, '1 second', 2, p_algorithm, p_engine, p_max_wait => '3 seconds');
    seen := seen || format('%s %s %s %s', d.allowed, d.remaining, d.retry_after_ms, d.reset_after_ms);
    PERFORM delay_test.at(0);
    RETURN seen;
END
$$;

-- 1-6. Every engine, both bucket algorithms.
SELECT is(delay_test.scenario(a, e),
          ARRAY['t 1 0 500', 't 0 0 1000', 't 0 500 1500', 't 0 1000 2000', 't 0 1500 2500',
                't 0 2000 3000', 'f 0 2500 3000', 'peek f 2500', 't 0 1300 2300', 't 0 2300 3300'],
          format('%s on the %s engine: delays of 500 ms stacked, the one past p_max_wait denied', a, e))
  FROM unnest(ARRAY['token_bucket', 'gcra']) AS a,
       unnest(ARRAY['table', 'unlogged', 'memory']) AS e
 WHERE :memory_engine OR e <> 'memory'
 ORDER BY a, e;

-- 7-12. A flood: 5 per second (one every 200 ms), burst 3, p_max_wait 1 second, calls of 1 or
-- 2 units every 37 ms for 4 seconds. Each admitted call goes at its instant + retry_after_ms;
-- over every span between two go instants, the units going in it are at most
-- B + floor(N·d/P). (The go instants fall on whole milliseconds here, so the check is exact.)
CREATE TABLE delay_test.flood (algorithm text, engine text, n integer, at_ms bigint, cost integer,
                               allowed boolean, retry_after_ms bigint);
CREATE FUNCTION delay_test.flood(p_algorithm text, p_engine text) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
    k text := delay_test.key('flood/' || p_algorithm || '/' || p_engine);
    d ratelimit.decision;
    c integer;
BEGIN
    FOR i IN 0..108 LOOP
        PERFORM delay_test.at(i * 37);
        c := 1 + (i % 3 = 0)::integer;
        d := ratelimit.consume(k, 5, '1 second', c, p_algorithm, p_engine, 3, p_max_wait => '1 second');
        INSERT INTO delay_test.flood VALUES (p_algorithm, p_engine, i, i * 37, c, d.allowed, d.retry_after_ms);
    END LOOP;
    PERFORM delay_test.at(0);
END
$$;
SELECT delay_test.flood(a, e)
  FROM unnest(ARRAY['token_bucket', 'gcra']) AS a,
       unnest(ARRAY['table', 'unlogged', 'memory']) AS e
 WHERE :memory_engine OR e <> 'memory';
CREATE VIEW delay_test.goes AS
SELECT algorithm, engine, at_ms + retry_after_ms AS go_ms, cost
  FROM delay_test.flood WHERE allowed;
SELECT is((SELECT count(*)
             FROM (SELECT DISTINCT go_ms FROM delay_test.goes g
                    WHERE g.algorithm = a AND g.engine = e) AS s,
                  (SELECT DISTINCT go_ms FROM delay_test.goes g
                    WHERE g.algorithm = a AND g.engine = e) AS t
            WHERE t.go_ms >= s.go_ms
              AND (SELECT sum(cost) FROM delay_test.goes g
                    WHERE g.algorithm = a AND g.engine = e AND g.go_ms BETWEEN s.go_ms AND t.go_ms)
                  > 3 + floor(5 * (t.go_ms - s.go_ms) / 1000.0)),
          0::bigint,
          format('%s on the %s engine: no span of go instants holds more than 3 + 5 per second', a, e))
  FROM unnest(ARRAY['token_bucket', 'gcra']) AS a,
       unnest(ARRAY['table', 'unlogged', 'memory']) AS e
 WHERE :memory_engine OR e <> 'memory'
 ORDER BY a, e;

-- 13-15. The flood is decided alike everywhere, delays and denials both happen, and nothing goes
-- later than p_max_wait.
SELECT is((SELECT count(DISTINCT (algorithm, engine)) FROM delay_test.flood),
          CASE WHEN :memory_engine THEN 6 ELSE 4 END::bigint, 'a flood per algorithm and engine');
SELECT is((SELECT count(*) FROM (SELECT n, allowed, retry_after_ms FROM delay_test.flood
                                  GROUP BY n, allowed, retry_after_ms) AS d),
          109::bigint, 'every engine and both algorithms decide the flood alike');
SELECT ok((SELECT count(*) FILTER (WHERE allowed AND retry_after_ms > 0) > 10
              AND count(*) FILTER (WHERE NOT allowed) > 10
              AND max(retry_after_ms) FILTER (WHERE allowed) <= 1000
             FROM delay_test.flood),
          'the flood has delayed calls and denied ones, none delayed past p_max_wait');

-- 16-17. Exactly what the schedule has room for: 20 calls at one instant, 4 per second, burst
-- 2, p_max_wait 1 second: 2 at once and 4 delayed (250, 500, 750, 1000 ms), 14 denied.
CREATE FUNCTION delay_test.burst(p_algorithm text, p_engine text) RETURNS text
LANGUAGE plpgsql AS $$
DECLARE
    k text := delay_test.key('burst/' || p_algorithm || '/' || p_engine);
    d ratelimit.decision;
    waits bigint[] := '{}';
    denied integer := 0;
BEGIN
    PERFORM delay_test.at(0);
    FOR i IN 1..20 LOOP
        d := ratelimit.consume(k, 4, '1 second', 1, p_algorithm, p_engine, 2, p_max_wait => '1 second');
        IF d.allowed THEN
            waits := waits || d.retry_after_ms;
        ELSE
            denied := denied + 1;
        END IF;
    END LOOP;
    RETURN format('%s denied %s', waits, denied);
END
$$;
SELECT is(delay_test.burst(a, 'table') || ' / ' || delay_test.burst(a, 'memory'),
          '{0,0,250,500,750,1000} denied 14 / {0,0,250,500,750,1000} denied 14',
          format('%s: 20 calls at once, 2 per burst and 4 a second within a second: 6 admitted', a))
  FROM unnest(ARRAY['token_bucket', 'gcra']) AS a WHERE :memory_engine ORDER BY a;

-- 18-21. NULL and '0' mean no delay; a call admitted at once answers as it did before.
SELECT is(ARRAY[(ratelimit.consume(delay_test.key('null/' || e), 1, '1 second', 1, 'gcra', e,
                                   p_max_wait => NULL)).allowed,
                (ratelimit.consume(delay_test.key('null/' || e), 1, '1 second', 1, 'gcra', e,
                                   p_max_wait => NULL)).allowed,
                (ratelimit.consume(delay_test.key('null/' || e), 1, '1 second', 1, 'gcra', e,
                                   p_max_wait => '0')).allowed,
                (ratelimit.consume(delay_test.key('null/' || e), 1, '1 second', 1, 'gcra', e)).allowed],
          ARRAY[true, false, false, false],
          format('NULL, ''0'' and no p_max_wait: no delay (%s engine)', e))
  FROM unnest(ARRAY['table', 'unlogged', 'memory']) AS e WHERE :memory_engine OR e <> 'memory' ORDER BY e;
SELECT is((SELECT row(allowed, remaining, retry_after_ms, reset_after_ms)::text
             FROM ratelimit.consume(delay_test.key('fresh'), 5, '1 second', 2, 'token_bucket',
                                    p_max_wait => '1 second')),
          '(t,3,0,400)', 'a call admitted at once: retry_after_ms 0, as without p_max_wait');

-- 22-32. The window algorithms refuse p_max_wait, on the table and memory engines, and write
-- nothing.
SELECT throws_ok(format('SELECT ratelimit.consume(%L, 5, ''1 second'', 1, %L, %L, p_max_wait => ''1 second'')',
                        delay_test.key('window/' || a || '/' || e), a, e),
                 '22023', format('p_max_wait applies only to token_bucket and gcra (got %s)', a),
                 format('%s on the %s engine refuses p_max_wait', a, e))
  FROM unnest(ARRAY['fixed_window', 'rolling_window', 'sliding_window', 'sliding_window_counter']) AS a,
       unnest(ARRAY['table', 'memory']) AS e
 WHERE :memory_engine OR e <> 'memory'
 ORDER BY a, e;
SELECT is((SELECT count(*) FROM ratelimit.key_state WHERE key LIKE delay_test.key('window/%')),
          0::bigint, 'and nothing was written to the table engine');
SELECT is((SELECT array_agg(DISTINCT (ratelimit.peek(delay_test.key('window/' || a || '/memory'), 5,
                                                     '1 second', 1, a, 'memory')).remaining)
             FROM unnest(ARRAY['fixed_window', 'rolling_window', 'sliding_window',
                               'sliding_window_counter']) AS a),
          ARRAY[5], 'nor to the memory engine: every key is still full')
 WHERE :memory_engine;
SELECT lives_ok($$SELECT ratelimit.consume('delay-window-zero', 5, '1 second', 1, 'fixed_window',
                                           p_max_wait => '0')$$,
                'a window algorithm takes p_max_wait ''0'' (no delay)');

-- 33-38. Bad values of p_max_wait, refused before anything is written.
SELECT throws_ok(format('SELECT ratelimit.consume(%L, 5, ''1 second'', 1, ''gcra'', p_max_wait => %L)',
                        delay_test.key('bad'), v.wait),
                 '22023', v.message, v.why)
  FROM (VALUES (1, '-1 second', 'p_max_wait must not be negative (NULL or ''0'' for no delay)', 'a negative p_max_wait'),
               (2, '1 day -86401 seconds', 'p_max_wait must not be negative (NULL or ''0'' for no delay)',
                'a p_max_wait negative once its days are counted'),
               (3, '1 month', 'p_max_wait must not use months or years, whose length varies (use days)',
                'a p_max_wait of a month'),
               (4, '-1 month', 'p_max_wait must not use months or years, whose length varies (use days)',
                'a p_max_wait of minus a month'),
               (5, '365 days 1 microsecond', 'p_max_wait must be at most 365 days', 'a p_max_wait above 365 days'))
       AS v(n, wait, message, why)
 ORDER BY v.n;
SELECT is((SELECT count(*) FROM ratelimit.key_state WHERE key = delay_test.key('bad')), 0::bigint,
          'a refused p_max_wait writes nothing');

SELECT * FROM finish();
ROLLBACK;
