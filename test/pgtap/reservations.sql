-- Reservations (ratelimit.reserve, settle, cancel; the test server preloads the library): a
-- reserve decides as consume does; a settle refunds or charges the difference to the actual
-- cost, the charge past the limit denying the calls that follow and carried as each algorithm
-- carries it; expiry, settling twice, another role, the rollback of a reserve and of a settle
-- (savepoints), and bad input. A commit and settles racing from many connections are tested
-- with real connections: test/concurrency/reservation_concurrency_test.cpp.
--
-- The registry and the memory engine live in shared memory, not in this transaction: every key
-- carries a prefix unique to this run.
BEGIN;
CREATE EXTENSION IF NOT EXISTS pgtap;
CREATE EXTENSION ratelimit;
SET LOCAL timezone = 'UTC';

SELECT plan(40);

CREATE SCHEMA reservation_test;
CREATE TABLE reservation_test.run AS
SELECT 'pgtap-' || pg_backend_pid() || '-' || (extract(epoch FROM clock_timestamp()) * 1e6)::bigint
           AS prefix;
CREATE FUNCTION reservation_test.key(p_name text) RETURNS text LANGUAGE sql
AS $$SELECT prefix || ':' || p_name FROM reservation_test.run$$;
CREATE FUNCTION reservation_test.at(p_instant text) RETURNS text LANGUAGE sql
AS $$SELECT set_config('ratelimit.test_clock', p_instant, true)$$;
SELECT reservation_test.at('2100-01-01 00:00:00+00');

-- What a one-unit peek says of a key under 10 per minute.
CREATE FUNCTION reservation_test.left(p_key text, p_algorithm text, p_engine text)
RETURNS integer LANGUAGE sql
AS $$SELECT remaining FROM ratelimit.peek(p_key, 10, '1 minute', 1, p_algorithm, p_engine)$$;

-- One key through reserve -> settle less / equal / cancel / more, then the calls that follow,
-- on one engine and algorithm (10 per minute); the observations, in order.
CREATE FUNCTION reservation_test.scenario(p_algorithm text, p_engine text)
RETURNS text[] LANGUAGE plpgsql AS $$
DECLARE
    k text := reservation_test.key(p_algorithm || '/' || p_engine);
    r ratelimit.reservation;
    d ratelimit.decision;
    seen text[] := '{}';
BEGIN
    PERFORM reservation_test.at('2100-01-01 00:00:00+00');
    r := ratelimit.reserve(k, 10, '1 minute', 4, p_algorithm, p_engine);
    seen := seen || ('reserve 4: ' || r.allowed || ' ' || r.remaining);
    d := ratelimit.settle(r.reservation_id, 1);
    seen := seen || ('settle 1: ' || d.allowed || ' ' || d.remaining);
    r := ratelimit.reserve(k, 10, '1 minute', 4, p_algorithm, p_engine);
    d := ratelimit.settle(r.reservation_id, 4);
    seen := seen || ('settle 4 of 4: ' || d.remaining);
    r := ratelimit.reserve(k, 10, '1 minute', 3, p_algorithm, p_engine);
    seen := seen || ('reserve 3: ' || r.remaining);
    d := ratelimit.cancel(r.reservation_id);
    seen := seen || ('cancel: ' || d.remaining);
    r := ratelimit.reserve(k, 10, '1 minute', 5, p_algorithm, p_engine);
    seen := seen || ('reserve 5: ' || r.allowed || ' ' || r.remaining);
    d := ratelimit.settle(r.reservation_id, 12);
    seen := seen || ('settle 12 of 5: ' || d.allowed || ' ' || d.remaining);
    d := ratelimit.consume(k, 10, '1 minute', 1, p_algorithm, p_engine);
    seen := seen || ('consume: ' || d.allowed);
    r := ratelimit.reserve(k, 10, '1 minute', 1, p_algorithm, p_engine);
    seen := seen || ('reserve: ' || r.allowed || ' ' || coalesce(r.reservation_id::text, 'no id'));
    PERFORM reservation_test.at('2100-01-01 00:01:00+00');
    seen := seen || ('a minute on: ' || reservation_test.left(k, p_algorithm, p_engine));
    PERFORM reservation_test.at('2100-01-01 00:02:00+00');
    seen := seen || ('two: ' || reservation_test.left(k, p_algorithm, p_engine));
    PERFORM reservation_test.at('2100-01-01 00:00:00+00');
    RETURN seen;
END
$$;

-- 1-12. Every engine, four algorithms. Within the limit a settle refunds (settle 1 of 4 gives 3
-- back) or changes nothing; cancel gives the estimate back. Settling 12 of 5 charges 7 past the
-- 5 left: 17 of 10 counted, so the calls that follow are denied; a minute on, the 7 over are
-- still owed by fixed_window (the next window starts at 7), token_bucket (7 tokens of debt, 10
-- refilled) and gcra (the same), while sliding_window counts the charge for one period (its
-- units at one instant are capped at the limit) and is free again.
SELECT is(reservation_test.scenario(a, e),
          ARRAY['reserve 4: true 6', 'settle 1: true 9', 'settle 4 of 4: 5', 'reserve 3: 2',
                'cancel: 5', 'reserve 5: true 0', 'settle 12 of 5: false 0', 'consume: false',
                'reserve: false no id', 'a minute on: ' || later, 'two: 10'],
          format('reserve, settle less, equal, cancel, more: %s on the %s engine', a, e))
  FROM (VALUES ('fixed_window', 3), ('token_bucket', 3), ('gcra', 3), ('sliding_window', 10))
           AS algorithms(a, later),
       unnest(ARRAY['table', 'unlogged', 'memory']) AS e;

-- 13-14. The other two algorithms: the overage carried as designed.
SELECT is(reservation_test.scenario('rolling_window', 'table'),
          ARRAY['reserve 4: true 6', 'settle 1: true 9', 'settle 4 of 4: 5', 'reserve 3: 2',
                'cancel: 5', 'reserve 5: true 0', 'settle 12 of 5: false 0', 'consume: false',
                'reserve: false no id', 'a minute on: 3', 'two: 10'],
          'rolling_window: the window after the charged one starts with the 7 over');
SELECT is(reservation_test.scenario('sliding_window_counter', 'table'),
          ARRAY['reserve 4: true 6', 'settle 1: true 9', 'settle 4 of 4: 5', 'reserve 3: 2',
                'cancel: 5', 'reserve 5: true 0', 'settle 12 of 5: false 0', 'consume: false',
                'reserve: false no id', 'a minute on: 0', 'two: 10'],
          'sliding_window_counter: the 17 units weigh fully at the start of the next window');

-- 15-16. A large overage is carried over several windows, N a window.
CREATE TABLE reservation_test.big AS
SELECT * FROM ratelimit.reserve(reservation_test.key('big'), 10, '1 minute', 10);
SELECT is((SELECT remaining FROM ratelimit.settle((SELECT reservation_id FROM reservation_test.big), 35)),
          0, 'settling 35 of 10 is charged in full');
SELECT is(ARRAY[(SELECT reservation_test.left(reservation_test.key('big'), 'fixed_window', 'table')
                   FROM reservation_test.at('2100-01-01 00:01:00+00')),
                (SELECT reservation_test.left(reservation_test.key('big'), 'fixed_window', 'table')
                   FROM reservation_test.at('2100-01-01 00:02:00+00')),
                (SELECT reservation_test.left(reservation_test.key('big'), 'fixed_window', 'table')
                   FROM reservation_test.at('2100-01-01 00:03:00+00')),
                (SELECT reservation_test.left(reservation_test.key('big'), 'fixed_window', 'table')
                   FROM reservation_test.at('2100-01-01 00:04:00+00'))],
          ARRAY[0, 0, 5, 10], '35 in a window of 10: 25, 15 and 5 carried into the next three');
SELECT reservation_test.at('2100-01-01 00:00:00+00');

-- 17-18. Settled once: a second settle or cancel is an error, and changes nothing.
CREATE TABLE reservation_test.once AS
SELECT * FROM ratelimit.reserve(reservation_test.key('once'), 10, '1 minute', 2);
SELECT ratelimit.settle((SELECT reservation_id FROM reservation_test.once), 2);
SELECT throws_ok(format('SELECT ratelimit.settle(%s, 0)', (SELECT reservation_id FROM reservation_test.once)),
                 '22023',
                 format('p_reservation is not an open reservation (%s): settled or cancelled already, '
                        'past its hold time, rolled back, or never made',
                        (SELECT reservation_id FROM reservation_test.once)),
                 'settling twice is an error');
SELECT is(reservation_test.left(reservation_test.key('once'), 'fixed_window', 'table'), 8,
          'and the second settle changed nothing');

-- 19-21. Expiry: past its hold time a reservation stays charged its estimate and cannot be
-- settled.
CREATE TABLE reservation_test.held AS
SELECT * FROM ratelimit.reserve(reservation_test.key('held'), 10, '1 minute', 4,
                                p_hold => '30 seconds');
SELECT is((SELECT expires_at FROM reservation_test.held), '2100-01-01 00:00:30+00'::timestamptz,
          'expires_at is the reserve''s instant plus p_hold');
SELECT reservation_test.at('2100-01-01 00:00:30+00');
SELECT throws_ok(format('SELECT ratelimit.cancel(%s)', (SELECT reservation_id FROM reservation_test.held)),
                 '22023', NULL, 'at its hold time the reservation is expired: cancel is an error');
SELECT is(reservation_test.left(reservation_test.key('held'), 'fixed_window', 'table'), 6,
          'and the estimate stays charged');
SELECT reservation_test.at('2100-01-01 00:00:00+00');

-- 22-24. Only the role that reserved settles, with the same error as an unknown identifier.
CREATE ROLE reservation_test_other;
GRANT USAGE ON SCHEMA ratelimit TO reservation_test_other;
GRANT EXECUTE ON FUNCTION ratelimit.settle(bigint, integer), ratelimit.cancel(bigint)
    TO reservation_test_other;
CREATE TABLE reservation_test.mine AS
SELECT * FROM ratelimit.reserve(reservation_test.key('mine'), 10, '1 minute', 3);
GRANT SELECT ON reservation_test.mine TO reservation_test_other;
GRANT USAGE ON SCHEMA reservation_test TO reservation_test_other;
SET LOCAL ROLE reservation_test_other;
SELECT throws_ok(format('SELECT ratelimit.settle(%s, 1)', (SELECT reservation_id FROM reservation_test.mine)),
                 '22023',
                 format('p_reservation is not an open reservation (%s): settled or cancelled already, '
                        'past its hold time, rolled back, or never made',
                        (SELECT reservation_id FROM reservation_test.mine)),
                 'another role cannot settle it, and is told no more than of an unknown one');
RESET ROLE;
SELECT is(reservation_test.left(reservation_test.key('mine'), 'fixed_window', 'table'), 7,
          'the refused settle changed nothing');
SELECT is((SELECT remaining FROM ratelimit.settle((SELECT reservation_id FROM reservation_test.mine), 1)),
          9, 'the reserving role settles it');

-- 25-27. A reserve rolled back (its savepoint) is dropped with it: its consume too, on a table
-- engine.
SAVEPOINT before_reserve;
SELECT reservation_id AS dropped
  FROM ratelimit.reserve(reservation_test.key('rolled'), 10, '1 minute', 4) \gset
SELECT is(reservation_test.left(reservation_test.key('rolled'), 'fixed_window', 'table'), 6,
          'reserved 4 under a savepoint');
ROLLBACK TO SAVEPOINT before_reserve;
SELECT is(reservation_test.left(reservation_test.key('rolled'), 'fixed_window', 'table'), 10,
          'rolling it back gives the 4 back');
SELECT throws_ok(format('SELECT ratelimit.settle(%s, 1)', :dropped), '22023', NULL,
                 'and the reservation is gone');

-- 28-31. A settle rolled back leaves the reservation open, its adjustment undone (table
-- engines); settled again, it counts once.
CREATE TABLE reservation_test.reopen AS
SELECT * FROM ratelimit.reserve(reservation_test.key('reopen'), 10, '1 minute', 4);
SAVEPOINT before_settle;
SELECT ratelimit.settle((SELECT reservation_id FROM reservation_test.reopen), 9);
SELECT is(reservation_test.left(reservation_test.key('reopen'), 'fixed_window', 'table'), 1,
          'settled at 9 under a savepoint');
ROLLBACK TO SAVEPOINT before_settle;
SELECT is(reservation_test.left(reservation_test.key('reopen'), 'fixed_window', 'table'), 6,
          'rolling it back undoes the charge');
SELECT is((SELECT remaining FROM ratelimit.settle((SELECT reservation_id FROM reservation_test.reopen), 2)),
          8, 'the reservation is open again: settled at 2');
SELECT throws_ok(format('SELECT ratelimit.cancel(%s)', (SELECT reservation_id FROM reservation_test.reopen)),
                 '22023', NULL, 'and then closed');

-- 32-33. On the memory engine, whose counters no rollback reaches, a settle is final at once.
CREATE TABLE reservation_test.memory AS
SELECT * FROM ratelimit.reserve(reservation_test.key('memory'), 10, '1 minute', 4,
                                p_engine => 'memory');
SAVEPOINT before_memory_settle;
SELECT ratelimit.settle((SELECT reservation_id FROM reservation_test.memory), 1);
ROLLBACK TO SAVEPOINT before_memory_settle;
SELECT is(reservation_test.left(reservation_test.key('memory'), 'fixed_window', 'memory'), 9,
          'a memory-engine settle rolled back stays made (3 refunded)');
SELECT throws_ok(format('SELECT ratelimit.settle(%s, 1)', (SELECT reservation_id FROM reservation_test.memory)),
                 '22023', NULL, 'and the reservation stays closed: it cannot adjust the key twice');

-- 34-35. A reserve decides exactly as consume does: the same columns, allowed or denied, on
-- twin keys with the same history.
SELECT ratelimit.consume(reservation_test.key(t), 5, '10 seconds', 2, 'gcra', 'unlogged', 3)
  FROM unnest(ARRAY['twin-a', 'twin-b']) AS t;
SELECT is((SELECT ROW(allowed, "limit", remaining, retry_after_ms, reset_after_ms)::text
             FROM ratelimit.reserve(reservation_test.key('twin-a'), 5, '10 seconds', 1, 'gcra', 'unlogged', 3)),
          (SELECT ROW(allowed, "limit", remaining, retry_after_ms, reset_after_ms)::text
             FROM ratelimit.consume(reservation_test.key('twin-b'), 5, '10 seconds', 1, 'gcra', 'unlogged', 3)),
          'an allowed reserve answers as consume does');
SELECT is((SELECT ROW(allowed, "limit", remaining, retry_after_ms, reset_after_ms, reservation_id, expires_at)::text
             FROM ratelimit.reserve(reservation_test.key('twin-a'), 5, '10 seconds', 2, 'gcra', 'unlogged', 3)),
          (SELECT ROW(allowed, "limit", remaining, retry_after_ms, reset_after_ms, NULL::bigint, NULL::timestamptz)::text
             FROM ratelimit.consume(reservation_test.key('twin-b'), 5, '10 seconds', 2, 'gcra', 'unlogged', 3)),
          'a denied one too, with no reservation');

-- 36-40. Bad input: an error naming the argument, nothing changed.
SELECT is((SELECT (r.reservation_id, r.allowed, r.retry_after_ms)::text
           FROM ratelimit.reserve('k', 10, '1 minute', 11) AS r),
          '(,f,)', 'an estimate past the limit is denied for good: no reservation, no retry time');
SELECT throws_ok($$SELECT ratelimit.reserve('k', 10, '1 minute', 1, p_hold => '0.5 ms')$$, '22023',
                 'p_hold must be at least 1 millisecond', 'a hold under a millisecond');
SELECT throws_ok($$SELECT ratelimit.reserve('k', 10, '1 minute', 1, p_hold => '25 hours')$$, '22023',
                 'p_hold must be at most 1 day', 'a hold over a day');
SELECT throws_ok($$SELECT ratelimit.settle(1, -1)$$, '22023', 'p_actual must not be negative (got -1)',
                 'a negative actual cost');
SELECT is(ratelimit.peek('k', 10, '1 minute'), ROW(true, 10, 10, 0::bigint, 0::bigint)::ratelimit.decision,
          'the refused calls changed nothing');

SELECT * FROM finish();
ROLLBACK;
