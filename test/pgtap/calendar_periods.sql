-- Calendar periods: fixed_window windows from one local midnight to the next day, ISO week or
-- month in a time zone (p_time_zone), or the calendar month in UTC ('1 month' without a zone),
-- on every engine, on a frozen clock. Every expected wait is the real next boundary, worked out
-- by hand: a Berlin day starts at 23:00 UTC in winter and 22:00 UTC in summer, the day of the
-- spring change lasts 23 hours and the day of the autumn change 25.
--
-- The memory engine lives in shared memory, outside the transaction, and its worker frees keys
-- by the real clock: its keys carry a prefix unique to this run, and its calls run 28 years
-- later than the others (2054 has the same weekdays, changes of time and leap day as 2026 and
-- 2028 shifted by 28 years), in the future, so the worker never frees them during the test.
BEGIN;
CREATE EXTENSION IF NOT EXISTS pgtap;
\ir install_edition.psql
SET LOCAL timezone = 'UTC';

SELECT plan(119);
-- The memory engine's 33, skipped on the SQL edition, which has none.
SELECT skip('the SQL edition has no memory engine', 33) WHERE NOT :memory_engine;

CREATE SCHEMA cal_test;

CREATE TABLE cal_test.run AS
SELECT 'cal-' || pg_backend_pid() || '-' || (extract(epoch FROM clock_timestamp()) * 1e6)::bigint
           AS prefix;

CREATE TABLE cal_test.engines (engine text PRIMARY KEY);
INSERT INTO cal_test.engines VALUES ('table'), ('unlogged');
INSERT INTO cal_test.engines SELECT 'memory' WHERE :memory_engine;

CREATE FUNCTION cal_test.key(p_engine text, p_name text) RETURNS text LANGUAGE sql
AS $$SELECT prefix || ':' || p_engine || ':' || p_name FROM cal_test.run$$;

-- The instant an engine's calls run at for the instant `p_at` of the text (see the top).
CREATE FUNCTION cal_test.shifted(p_engine text, p_at timestamptz) RETURNS timestamptz
LANGUAGE sql AS $$SELECT p_at + CASE p_engine WHEN 'memory' THEN interval '28 years'
                                              ELSE interval '0' END$$;

-- Freezes the clock at `p_at` (shifted for the engine) until the end of the transaction.
CREATE FUNCTION cal_test.at(p_engine text, p_at timestamptz) RETURNS void LANGUAGE sql
AS $$SELECT set_config('ratelimit.test_clock', cal_test.shifted(p_engine, p_at)::text, true)$$;

-- A decision as allowed/remaining/retry_after_ms/reset_after_ms.
CREATE FUNCTION cal_test.shown(p ratelimit.decision) RETURNS text LANGUAGE sql
AS $$SELECT concat_ws('/', p.allowed, p.remaining, p.retry_after_ms, p.reset_after_ms)$$;

-- consume of p_key on p_engine at p_at.
CREATE FUNCTION cal_test.consume(p_engine text, p_at timestamptz, p_key text, p_limit integer,
                                 p_period interval, p_time_zone text, p_cost integer DEFAULT 1)
RETURNS text LANGUAGE plpgsql AS $$
BEGIN
    PERFORM cal_test.at(p_engine, p_at);
    RETURN cal_test.shown(ratelimit.consume(cal_test.key(p_engine, p_key), p_limit, p_period,
                                            p_cost, p_engine => p_engine,
                                            p_time_zone => p_time_zone));
END
$$;

-- Milliseconds from p_from to p_to.
CREATE FUNCTION cal_test.ms(p_from timestamptz, p_to timestamptz) RETURNS bigint LANGUAGE sql
AS $$SELECT (extract(epoch FROM p_to - p_from) * 1000)::bigint$$;

------------------------------------------------------------------------------------------------
-- A Berlin day resets at Berlin midnight (23:00 UTC in winter), not at UTC midnight.
------------------------------------------------------------------------------------------------
SELECT is(cal_test.consume(engine, '2026-03-10 22:59:59.999+00', 'berlin', 1, '1 day',
                           'Europe/Berlin'),
          't/0/0/1', engine || ': the last millisecond of a Berlin day resets 1 ms later')
FROM cal_test.engines;
SELECT is(cal_test.consume(engine, '2026-03-10 22:59:59.999+00', 'berlin', 1, '1 day',
                           'Europe/Berlin'),
          'f/0/1/1', engine || ': full until Berlin midnight')
FROM cal_test.engines;
SELECT is(cal_test.consume(engine, '2026-03-10 23:00:00+00', 'berlin', 1, '1 day',
                           'Europe/Berlin'),
          't/0/0/86400000', engine || ': Berlin midnight starts a new day of 24 hours')
FROM cal_test.engines;
SELECT is(cal_test.consume(engine, '2026-03-11 00:00:00+00', 'berlin', 1, '1 day',
                           'Europe/Berlin'),
          'f/0/82800000/82800000',
          engine || ': UTC midnight is no reset; the next is 23 hours later, at Berlin midnight')
FROM cal_test.engines;

------------------------------------------------------------------------------------------------
-- The days of the changes of time: 2026-03-29 lasts 23 hours, 2026-10-25 lasts 25.
------------------------------------------------------------------------------------------------
SELECT is(cal_test.consume(engine, '2026-03-28 23:00:00+00', 'spring', 2, '1 day',
                           'Europe/Berlin'),
          't/1/0/82800000', engine || ': 2026-03-29 in Berlin lasts 23 hours')
FROM cal_test.engines;
SELECT is(cal_test.consume(engine, '2026-03-29 21:59:59.999+00', 'spring', 2, '1 day',
                           'Europe/Berlin', 2),
          'f/1/1/1', engine || ': its last millisecond is 21:59:59.999 UTC')
FROM cal_test.engines;
SELECT is(cal_test.consume(engine, '2026-03-29 22:00:00+00', 'spring', 2, '1 day',
                           'Europe/Berlin', 2),
          't/0/0/86400000', engine || ': 2026-03-30 starts at 22:00 UTC')
FROM cal_test.engines;
SELECT is(cal_test.consume(engine, '2026-10-24 22:00:00+00', 'autumn', 1, '1 day',
                           'Europe/Berlin'),
          't/0/0/90000000', engine || ': 2026-10-25 in Berlin lasts 25 hours')
FROM cal_test.engines;
SELECT is(cal_test.consume(engine, '2026-10-25 22:59:59.999+00', 'autumn', 1, '1 day',
                           'Europe/Berlin'),
          'f/0/1/1', engine || ': its last millisecond is 22:59:59.999 UTC')
FROM cal_test.engines;
SELECT is(cal_test.consume(engine, '2026-10-25 23:00:00+00', 'autumn', 1, '1 day',
                           'Europe/Berlin'),
          't/0/0/86400000', engine || ': 2026-10-26 starts at 23:00 UTC')
FROM cal_test.engines;

------------------------------------------------------------------------------------------------
-- An ISO week starts on Monday at local midnight; '7 days' is the same week.
------------------------------------------------------------------------------------------------
-- 2026-03-04 is a Wednesday; the next Monday is 2026-03-09.
SELECT is(cal_test.consume(engine, '2026-03-04 12:00:00+00', 'week', 2, '1 week', 'UTC'),
          't/1/0/' || cal_test.ms('2026-03-04 12:00:00+00', '2026-03-09 00:00:00+00'),
          engine || ': a UTC week ends on Monday at 00:00 UTC')
FROM cal_test.engines;
SELECT is(cal_test.consume(engine, '2026-03-08 23:59:59.999+00', 'week', 2, '7 days', 'UTC'),
          't/0/0/1', engine || ': ''7 days'' with a time zone is the same ISO week')
FROM cal_test.engines;
SELECT is(cal_test.consume(engine, '2026-03-09 00:00:00+00', 'week', 2, '1 week', 'UTC'),
          't/1/0/604800000', engine || ': Monday starts a new week')
FROM cal_test.engines;
SELECT is(cal_test.consume(engine, '2026-03-04 12:00:00+00', 'berlin-week', 1, '1 week',
                           'Europe/Berlin'),
          't/0/0/' || cal_test.ms('2026-03-04 12:00:00+00', '2026-03-08 23:00:00+00'),
          engine || ': a Berlin week ends on Monday at Berlin midnight (Sunday 23:00 UTC)')
FROM cal_test.engines;

------------------------------------------------------------------------------------------------
-- Months: February 2028 has 29 days; '1 month' without a zone is the UTC month.
------------------------------------------------------------------------------------------------
SELECT is(cal_test.consume(engine, '2028-02-01 00:00:00+00', 'february', 1, '1 month', NULL),
          't/0/0/2505600000', engine || ': February 2028 lasts 29 days')
FROM cal_test.engines;
SELECT is(cal_test.consume(engine, '2028-02-29 23:59:59.999+00', 'february', 1, '1 month', NULL),
          'f/0/1/1', engine || ': still February on the 29th')
FROM cal_test.engines;
SELECT is(cal_test.consume(engine, '2028-03-01 00:00:00+00', 'february', 1, '1 month', NULL),
          't/0/0/2678400000', engine || ': March starts a month of 31 days')
FROM cal_test.engines;
SELECT is(cal_test.consume(engine, '2026-03-31 23:30:00+00', 'utc-month', 1, '1 month', NULL),
          't/0/0/1800000', engine || ': without a zone, the month ends at UTC midnight')
FROM cal_test.engines;
SELECT is(cal_test.consume(engine, '2026-03-31 23:30:00+00', 'berlin-month', 1, '1 month',
                           'Europe/Berlin'),
          't/0/0/' || cal_test.ms('2026-03-31 23:30:00+00', '2026-04-30 22:00:00+00'),
          engine || ': in Berlin it is April already, which ends at Berlin midnight')
FROM cal_test.engines;

------------------------------------------------------------------------------------------------
-- The other calls take p_time_zone too, and decide in the same window.
------------------------------------------------------------------------------------------------
SELECT cal_test.at(engine, '2026-03-28 23:30:00+00') FROM cal_test.engines;
SELECT is(ratelimit.allow(cal_test.key(engine, 'others'), 2, '1 day', 1, p_engine => engine,
                          p_time_zone => 'Europe/Berlin'),
          true, engine || ': allow takes a unit')
FROM cal_test.engines;
SELECT is(cal_test.shown(ratelimit.peek(cal_test.key(engine, 'others'), 2, '1 day', 1,
                                        p_engine => engine, p_time_zone => 'Europe/Berlin')),
          't/1/0/81000000', engine || ': peek sees it, and the day of the change ending at '
                               '22:00 UTC, 22.5 hours later')
FROM cal_test.engines;
SELECT is(cal_test.shown(ratelimit.refund(cal_test.key(engine, 'others'), 2, '1 day', 2,
                                          p_engine => engine, p_time_zone => 'Europe/Berlin')),
          't/2/0/0', engine || ': refund gives the unit back in the same window')
FROM cal_test.engines;
SELECT is((SELECT array_agg(cal_test.shown(d)) FROM unnest(ratelimit.consume_many(
               ARRAY[cal_test.key(engine, 'others'), cal_test.key(engine, 'others')], 1, '1 day',
               1, p_engine => engine, p_time_zone => 'Europe/Berlin')) d),
          ARRAY['t/0/0/81000000', 'f/0/81000000/81000000'],
          engine || ': consume_many decides each key in the calendar window')
FROM cal_test.engines;
SELECT is((SELECT array_agg(cal_test.shown(d)) FROM unnest(ratelimit.peek_many(
               ARRAY[cal_test.key(engine, 'others')], 1, '1 day', 1,
               p_engine => engine, p_time_zone => 'Europe/Berlin')) d),
          ARRAY['f/0/81000000/81000000'], engine || ': peek_many too')
FROM cal_test.engines;

------------------------------------------------------------------------------------------------
-- Other periods keep their windows aligned to the Unix epoch.
------------------------------------------------------------------------------------------------
SELECT is(cal_test.consume(engine, '2026-03-10 12:00:00+00', 'epoch', 1, '30 days', NULL),
          't/0/0/' || cal_test.ms(
              cal_test.shifted(engine, '2026-03-10 12:00:00+00'),
              to_timestamp((floor(extract(epoch FROM cal_test.shifted(engine,
                                                                      '2026-03-10 12:00:00+00'))
                                  / 2592000) + 1) * 2592000)),
          engine || ': ''30 days'' without a zone is still aligned to the epoch')
FROM cal_test.engines;

------------------------------------------------------------------------------------------------
-- A policy with a time zone decides as consume does: check, check_many, check_all and
-- check_http, whose RateLimit reset (t) is the real next boundary.
------------------------------------------------------------------------------------------------
INSERT INTO ratelimit.policies (name, "limit", period, engine, time_zone)
SELECT 'cal-daily-' || engine, 2, '1 day', engine, 'Europe/Berlin' FROM cal_test.engines;
INSERT INTO ratelimit.policies (name, "limit", period, engine)
SELECT 'cal-monthly-' || engine, 5, '1 month', engine FROM cal_test.engines;

-- check of p_policy for p_subject at p_at, shown as a decision is.
CREATE FUNCTION cal_test.check(p_engine text, p_at timestamptz, p_policy text, p_subject text,
                               p_cost integer DEFAULT 1)
RETURNS text LANGUAGE plpgsql AS $$
DECLARE
    d ratelimit.policy_decision;
BEGIN
    PERFORM cal_test.at(p_engine, p_at);
    d := ratelimit.check(p_policy || '-' || p_engine, cal_test.key(p_engine, p_subject), p_cost);
    RETURN concat_ws('/', d.allowed, d.remaining, d.retry_after_ms, d.reset_after_ms);
END
$$;

SELECT is(cal_test.check(engine, '2026-03-28 23:30:00+00', 'cal-daily', 'policy'),
          cal_test.consume(engine, '2026-03-28 23:30:00+00', 'policy-twin', 2, '1 day',
                           'Europe/Berlin'),
          engine || ': a policy with a time zone decides as consume with p_time_zone')
FROM cal_test.engines;
SELECT is(cal_test.check(engine, '2026-03-28 23:30:00+00', 'cal-daily', 'policy'),
          't/0/0/81000000', engine || ': the policy''s day of the change ends at 22:00 UTC')
FROM cal_test.engines;
SELECT is(cal_test.check(engine, '2026-03-29 21:59:59.999+00', 'cal-daily', 'policy'),
          'f/0/1/1', engine || ': the policy denies until its last millisecond')
FROM cal_test.engines;
SELECT is(cal_test.check(engine, '2026-03-29 22:00:00+00', 'cal-daily', 'policy'),
          't/1/0/86400000', engine || ': and allows at Berlin midnight')
FROM cal_test.engines;
SELECT cal_test.at(engine, '2026-03-28 23:30:00+00') FROM cal_test.engines;
SELECT is((SELECT array_agg(concat_ws('/', d.allowed, d.remaining, d.retry_after_ms))
           FROM unnest(ratelimit.check_many('cal-daily-' || engine,
                                            ARRAY[cal_test.key(engine, 'many'),
                                                  cal_test.key(engine, 'many'),
                                                  cal_test.key(engine, 'many')])) d),
          ARRAY['t/1/0', 't/0/0', 'f/0/81000000'],
          engine || ': check_many waits for the real boundary')
FROM cal_test.engines;
SELECT is((ratelimit.check_http(ARRAY['cal-daily-' || engine],
                                ARRAY[cal_test.key(engine, 'http')]))
              -> 'headers' ->> 'RateLimit' ~ '^"cal-daily-[a-z]+";r=1;t=81000;',
          true, engine || ': check_http''s RateLimit reset is the real boundary, 22.5 hours away')
FROM cal_test.engines;
SELECT is((SELECT concat_ws('/', d.allowed, d.policy, d.remaining, d.reset_after_ms)
           FROM ratelimit.check_all(ARRAY['cal-daily-' || engine, 'cal-monthly-' || engine],
                                    ARRAY[cal_test.key(engine, 'all'),
                                          cal_test.key(engine, 'all')]) d),
          't/cal-daily-' || engine || '/1/81000000',
          engine || ': check_all decides both calendars; the Berlin day binds')
FROM cal_test.engines;
SELECT is((SELECT d.reset_after_ms
           FROM ratelimit.check('cal-monthly-' || engine, cal_test.key(engine, 'all'), 0) d),
          cal_test.ms('2026-03-28 23:30:00+00', '2026-04-01 00:00:00+00'),
          engine || ': a policy of ''1 month'' without a zone ends with the UTC month')
FROM cal_test.engines;

SELECT throws_ok($$INSERT INTO ratelimit.policies (name, "limit", period, time_zone)
                   VALUES ('cal-bad', 2, '1 day', 'Europe/Nowhere')$$,
                 '22023', 'policy "cal-bad": p_time_zone must name a time zone PostgreSQL knows, '
                          'such as Europe/Berlin or UTC (got "Europe/Nowhere")',
                 'a policy with an unknown time zone is refused');
SELECT throws_ok($$INSERT INTO ratelimit.policies (name, algorithm, "limit", period, time_zone)
                   VALUES ('cal-bad', 'sliding_window', 2, '1 day', 'UTC')$$,
                 '22023', 'policy "cal-bad": p_algorithm must be fixed_window for a calendar '
                          'period: calendar windows need fixed_window (got sliding_window)',
                 'a calendar policy with another algorithm is refused');
SELECT throws_ok($$UPDATE ratelimit.policies SET period = '12 hours'
                   WHERE name = 'cal-daily-table'$$,
                 '22023', NULL, 'a policy''s time zone with another period is refused');
SELECT is((SELECT count(*)::integer FROM ratelimit.policies
           WHERE name = 'cal-bad' OR (name = 'cal-daily-table' AND period <> '1 day')),
          0, 'the refused rows changed nothing');
UPDATE ratelimit.policies SET time_zone = 'Asia/Tokyo' WHERE name = 'cal-daily-table';
SELECT is(cal_test.check('table', '2026-03-28 23:30:00+00', 'cal-daily', 'tokyo'),
          't/1/0/' || cal_test.ms('2026-03-28 23:30:00+00', '2026-03-29 15:00:00+00'),
          'an edited time zone decides the next call: a Tokyo day ends at 15:00 UTC');

------------------------------------------------------------------------------------------------
-- reset_jitter: check_http's headers report the real reset plus a random 0 to the jitter; the
-- decision keeps the real wait.
------------------------------------------------------------------------------------------------
INSERT INTO ratelimit.policies (name, "limit", period, time_zone, reset_jitter)
VALUES ('cal-jitter', 1000, '1 day', 'UTC', '30 seconds');
SELECT cal_test.at('table', '2026-03-10 12:00:00+00');
CREATE TABLE cal_test.jittered AS
SELECT substring(r -> 'headers' ->> 'RateLimit' FROM ';t=([0-9]+);')::integer AS t,
       (r -> 'decision' ->> 'reset_after_ms')::bigint AS reset_after_ms
FROM generate_series(1, 20) AS g,
     LATERAL (SELECT ratelimit.check_http(ARRAY['cal-jitter'],
                                          ARRAY[cal_test.key('table', 'jitter-' || g)]) AS r) AS c;
SELECT is((SELECT count(*)::integer FROM cal_test.jittered WHERE t BETWEEN 43200 AND 43230), 20,
          'each reported reset is the real one (12 hours) plus 0 to 30 seconds');
SELECT ok((SELECT count(DISTINCT t) FROM cal_test.jittered) > 1,
          'the reported resets are spread, not one instant');
SELECT is((SELECT array_agg(DISTINCT reset_after_ms) FROM cal_test.jittered), ARRAY[43200000::bigint],
          'the decision keeps the real wait');
SELECT throws_ok($$INSERT INTO ratelimit.policies (name, "limit", period, reset_jitter)
                   VALUES ('cal-bad', 5, '1 minute', '-1 second')$$,
                 '22023', 'policy "cal-bad": reset_jitter must be between 0 and 1 hour (got "-00:00:01")',
                 'a negative reset_jitter is refused, naming the column');
SELECT throws_ok($$INSERT INTO ratelimit.policies (name, "limit", period, reset_jitter)
                   VALUES ('cal-bad', 5, '1 minute', '61 minutes')$$,
                 '22023', 'policy "cal-bad": reset_jitter must be between 0 and 1 hour (got "01:01:00")',
                 'a reset_jitter above an hour is refused');
SELECT throws_ok($$INSERT INTO ratelimit.policies (name, "limit", period, reset_jitter)
                   VALUES ('cal-bad', 5, '1 minute', '1 mon -30 days')$$,
                 '22023', NULL, 'a reset_jitter in months is refused');

------------------------------------------------------------------------------------------------
-- Bad inputs: 22023 naming the argument, and nothing changes.
------------------------------------------------------------------------------------------------
SELECT cal_test.at('table', '2026-03-10 12:00:00+00');
SELECT ratelimit.consume(cal_test.key('table', 'bad'), 3, '1 day', p_time_zone => 'UTC');

SELECT throws_ok($$SELECT ratelimit.consume(cal_test.key('table', 'bad'), 3, '1 day',
                                            p_time_zone => 'Mars/Olympus_Mons')$$,
                 '22023', 'p_time_zone must name a time zone PostgreSQL knows, such as '
                          'Europe/Berlin or UTC (got "Mars/Olympus_Mons")',
                 'an unknown time zone is refused, naming p_time_zone');
SELECT throws_ok($$SELECT ratelimit.consume(cal_test.key('table', 'bad'), 3, '1 day',
                                            p_time_zone => '')$$,
                 '22023', NULL, 'an empty time zone is refused');
SELECT throws_ok($$SELECT ratelimit.consume(cal_test.key('table', 'bad'), 3, '1 hour',
                                            p_time_zone => 'UTC')$$,
                 '22023', 'p_period must be ''1 day'', ''1 week'' or ''1 month'' with p_time_zone '
                          '(a calendar window from local midnight)',
                 'another period with a time zone is refused, naming p_period');
SELECT throws_ok($$SELECT ratelimit.consume(cal_test.key('table', 'bad'), 3, '24 hours',
                                            p_time_zone => 'UTC')$$,
                 '22023', NULL, '''24 hours'' is not a calendar day');
SELECT throws_ok($$SELECT ratelimit.consume(cal_test.key('table', 'bad'), 3, '1 day',
                                            p_algorithm => 'token_bucket', p_time_zone => 'UTC')$$,
                 '22023', 'p_algorithm must be fixed_window for a calendar period: calendar '
                          'windows need fixed_window (got token_bucket)',
                 'a calendar period with another algorithm is refused, naming p_algorithm');
SELECT throws_ok($$SELECT ratelimit.consume(cal_test.key('table', 'bad'), 3, '1 month',
                                            p_algorithm => 'sliding_window')$$,
                 '22023', NULL, 'the UTC month needs fixed_window too');
SELECT throws_ok($$SELECT ratelimit.consume(cal_test.key('table', 'bad'), 3, '2 months')$$,
                 '22023', 'p_period may use months only as ''1 month'' (the calendar month, in '
                          'UTC unless p_time_zone is given)',
                 'other periods with months are refused, naming p_period');
SELECT throws_ok($$SELECT ratelimit.consume_many(ARRAY[cal_test.key('table', 'bad')], 3, '1 day',
                                                 p_time_zone => 'Nowhere')$$,
                 '22023', NULL, 'consume_many refuses an unknown time zone');
SELECT is(cal_test.shown(ratelimit.peek(cal_test.key('table', 'bad'), 3, '1 day',
                                        p_time_zone => 'UTC')),
          't/2/0/43200000', 'none of the refused calls charged anything');
