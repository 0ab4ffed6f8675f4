-- Leases (ratelimit.acquire, release, in_flight; the test server preloads the library): at
-- most the limit in flight, what ends a lease inside one transaction (a release, the rollback
-- of its savepoint, its maximum hold time), what does not (a denied call, the savepoint's
-- release), and the errors. A transaction's end (commit and rollback) and a session's end are
-- tested with real connections: test/concurrency/lease_concurrency_test.cpp.
--
-- Leases live in shared memory, not in this transaction: every key carries a prefix unique to
-- this run.
BEGIN;
CREATE EXTENSION IF NOT EXISTS pgtap;
CREATE EXTENSION ratelimit;
SET LOCAL timezone = 'UTC';

SELECT plan(27);

CREATE SCHEMA lease_test;
CREATE TABLE lease_test.run AS
SELECT 'pgtap-' || pg_backend_pid() || '-' || (extract(epoch FROM clock_timestamp()) * 1e6)::bigint
           AS prefix;
CREATE FUNCTION lease_test.key(p_name text) RETURNS text LANGUAGE sql
AS $$SELECT prefix || ':' || p_name FROM lease_test.run$$;
SELECT set_config('ratelimit.test_clock', '2100-01-01 00:00:00+00', true);

-- 1. At most the limit in flight.
CREATE TABLE lease_test.first AS SELECT * FROM ratelimit.acquire(lease_test.key('jobs'), 2);
CREATE TABLE lease_test.second AS SELECT * FROM ratelimit.acquire(lease_test.key('jobs'), 2);
CREATE TABLE lease_test.third AS SELECT * FROM ratelimit.acquire(lease_test.key('jobs'), 2);
SELECT is((SELECT ARRAY[allowed::text, "limit"::text, in_flight::text] FROM lease_test.first),
          ARRAY['true', '2', '1'], 'the first lease is allowed: 1 of 2 in flight');
SELECT ok((SELECT lease_id > 0 FROM lease_test.first), 'with a positive identifier');
SELECT is((SELECT in_flight FROM lease_test.second), 2, 'the second: 2 of 2');
SELECT is((SELECT ARRAY[allowed::text, in_flight::text, coalesce(retry_after_ms::text, 'none'),
                        coalesce(lease_id::text, 'none')] FROM lease_test.third),
          ARRAY['false', '2', 'none', 'none'],
          'the third is denied, with no identifier and no expected release (no hold time)');
SELECT is(ratelimit.in_flight(lease_test.key('jobs')), 2, 'in_flight: the denied call holds nothing');
SELECT is(ratelimit.in_flight(lease_test.key('other')), 0, 'another key holds nothing');

-- 2. A release gives its units back, once.
SELECT ok(ratelimit.release((SELECT lease_id FROM lease_test.first)), 'release ends a lease');
SELECT is(ratelimit.in_flight(lease_test.key('jobs')), 1, 'and gives its unit back');
SELECT throws_ok(format('SELECT ratelimit.release(%s)', (SELECT lease_id FROM lease_test.first)),
                 '22023', NULL, 'releasing it again is an error');
SELECT is((SELECT allowed FROM ratelimit.acquire(lease_test.key('jobs'), 2)), true,
          'its slot can be taken again');

-- 3. Savepoints: a rolled-back savepoint ends the leases taken under it; a released one
-- passes them to the transaction.
SAVEPOINT before_batch;
SELECT ratelimit.acquire(lease_test.key('sp'), 5, 2);
SELECT is(ratelimit.in_flight(lease_test.key('sp')), 2, 'two units taken under a savepoint');
ROLLBACK TO SAVEPOINT before_batch;
SELECT is(ratelimit.in_flight(lease_test.key('sp')), 0, 'rolling it back ends the lease');
SAVEPOINT kept;
SELECT ratelimit.acquire(lease_test.key('sp'), 5, 3);
RELEASE SAVEPOINT kept;
SAVEPOINT later;
ROLLBACK TO SAVEPOINT later;
SELECT is(ratelimit.in_flight(lease_test.key('sp')), 3,
          'a released savepoint''s lease stays, also when a later savepoint rolls back');

-- 4. The maximum hold time, on the test clock; and a session lease is released by hand.
CREATE TABLE lease_test.held AS
SELECT * FROM ratelimit.acquire(lease_test.key('hold'), 1, p_max_hold => '30 seconds',
                                p_scope => 'session');
SELECT set_config('ratelimit.test_clock', '2100-01-01 00:00:10+00', true);
SELECT is((SELECT ARRAY[allowed::text, retry_after_ms::text]
             FROM ratelimit.acquire(lease_test.key('hold'), 1)),
          ARRAY['false', '20000'], 'denied, with the wait until the lease''s hold time ends');
SELECT set_config('ratelimit.test_clock', '2100-01-01 00:00:30+00', true);
SELECT is(ratelimit.in_flight(lease_test.key('hold')), 0, 'at its hold time the lease ends');
SELECT throws_ok(format('SELECT ratelimit.release(%s)', (SELECT lease_id FROM lease_test.held)),
                 '22023', NULL, 'and releasing it is an error: it is not held');
CREATE TABLE lease_test.session_lease AS
SELECT * FROM ratelimit.acquire(lease_test.key('session'), 1, p_scope => 'session');
SELECT ok(ratelimit.release((SELECT lease_id FROM lease_test.session_lease)),
          'a session lease is released by hand');

-- 5. Bad input: an error naming the argument, nothing held.
SELECT throws_ok($$SELECT ratelimit.acquire('k', 0)$$, '22023', 'p_limit must be at least 1 (got 0)',
                 'a limit below 1');
SELECT throws_ok($$SELECT ratelimit.acquire('k', 2, 3)$$, '22023',
                 'p_cost must be between 1 and p_limit (2), got 3', 'a cost above the limit');
SELECT throws_ok($$SELECT ratelimit.acquire('k', 2, p_scope => 'forever')$$, '22023',
                 'p_scope must be transaction or session (got "forever")', 'an unknown scope');
SELECT throws_ok($$SELECT ratelimit.release(12345)$$, '22023', NULL,
                 'an identifier that was never a lease');
SELECT is(ratelimit.in_flight('k'), 0, 'the refused calls hold nothing');

-- 6. A lease is released only by the role that took it (or one with its privileges): its
-- identifier alone is not enough. Another database is refused the same way
-- (test/concurrency/lease_concurrency_test.cpp).
CREATE ROLE lease_holder NOLOGIN;
CREATE ROLE lease_other NOLOGIN;
CREATE ROLE lease_admin NOLOGIN IN ROLE lease_holder;
GRANT USAGE ON SCHEMA ratelimit, lease_test TO lease_holder, lease_other, lease_admin;
GRANT EXECUTE ON FUNCTION ratelimit.acquire(text, integer, integer, text, interval),
    ratelimit.release(bigint), ratelimit.in_flight(text) TO lease_holder, lease_other, lease_admin;
GRANT EXECUTE ON FUNCTION lease_test.key(text) TO lease_holder, lease_other, lease_admin;
GRANT SELECT ON lease_test.run TO lease_holder, lease_other, lease_admin;
SET LOCAL ROLE lease_holder;
CREATE TEMP TABLE held_by_holder AS SELECT lease_id FROM ratelimit.acquire(lease_test.key('owned'), 3);
RESET ROLE;
GRANT SELECT ON held_by_holder TO lease_other, lease_admin;
SET LOCAL ROLE lease_other;
SELECT throws_ok(format('SELECT ratelimit.release(%s)', (SELECT lease_id FROM held_by_holder)), '42501',
                 'p_lease names a lease taken by another role or in another database: only its own role (or one with that role''s privileges), in its own database, may release it',
                 'another role cannot release the lease (42501)');
SELECT is(ratelimit.in_flight(lease_test.key('owned')), 1, 'and the lease is still held');
RESET ROLE;
SET LOCAL ROLE lease_admin;
SELECT ok(ratelimit.release((SELECT lease_id FROM held_by_holder)),
          'a role with the holder''s privileges (a member of it) may release it');
RESET ROLE;
SELECT is(ratelimit.in_flight(lease_test.key('owned')), 0, 'and then it is released');
SET LOCAL ROLE lease_holder;
CREATE TEMP TABLE held_again AS SELECT lease_id FROM ratelimit.acquire(lease_test.key('owned'), 3);
SELECT ok(ratelimit.release((SELECT lease_id FROM held_again)), 'the holder releases its own lease');
RESET ROLE;

SELECT * FROM finish();
ROLLBACK;
