-- ratelimit.test_clock: only a superuser may move the clock; decisions otherwise follow the
-- server's wall clock (clock_timestamp(), not the transaction start).
SET timezone = 'UTC';
CREATE EXTENSION ratelimit;
\set VERBOSITY terse

SET ratelimit.test_clock = '2026-03-01 10:00:00+00';
SELECT ratelimit.clock_now();
SET ratelimit.test_clock = '2026-03-01 12:00:00+02';
SELECT ratelimit.clock_now();

-- Refused values leave the setting as it was.
SET ratelimit.test_clock = 'not a time';
SET ratelimit.test_clock = 'infinity';
SET ratelimit.test_clock = '1969-12-31 23:59:59+00';
SELECT ratelimit.clock_now();

-- Without the test clock: the wall clock, moving within one transaction.
RESET ratelimit.test_clock;
BEGIN;
SELECT abs(extract(epoch FROM ratelimit.clock_now() - clock_timestamp())) < 1 AS is_wall_clock;
CREATE TEMP TABLE samples AS SELECT ratelimit.clock_now() AS t;
SELECT pg_sleep(0.01);
SELECT ratelimit.clock_now() > (SELECT t FROM samples) AS moves_inside_a_transaction,
       now() = transaction_timestamp() AS now_is_frozen;
COMMIT;

-- Ordinary roles cannot set it.
CREATE ROLE ratelimit_clock_user;
GRANT USAGE ON SCHEMA ratelimit TO ratelimit_clock_user;
SET ROLE ratelimit_clock_user;
SET ratelimit.test_clock = '2030-01-01 00:00:00+00';
SELECT abs(extract(epoch FROM ratelimit.clock_now() - clock_timestamp())) < 1 AS still_wall_clock;
RESET ROLE;
REVOKE USAGE ON SCHEMA ratelimit FROM ratelimit_clock_user;
DROP ROLE ratelimit_clock_user;

-- Other names under the ratelimit. prefix are reserved.
SET ratelimit.no_such_setting = 'x';

DROP EXTENSION ratelimit;
