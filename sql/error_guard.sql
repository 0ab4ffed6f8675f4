-- The error bridge: errors thrown by the C++ core and errors PostgreSQL raises inside the
-- extension's SPI calls both reach the client as ordinary ERRORs with their own SQLSTATE,
-- the backend survives, and the next call works.

-- Where Supabase's auth.users exists, rpc_rate_limits.user_id references it (as in the game
-- backend).
CREATE SCHEMA auth;
CREATE TABLE auth.users (id uuid PRIMARY KEY);
INSERT INTO auth.users VALUES ('a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11');
SET timezone = 'UTC';
CREATE EXTENSION ratelimit_rpc_limits CASCADE;
SELECT conname, pg_get_constraintdef(oid) FROM pg_constraint
WHERE conrelid = 'rpc_rate_limits'::regclass AND contype = 'f';

\set VERBOSITY terse
SET ratelimit.test_clock = '2026-03-01 10:00:00+00';

-- The core throws (bad argument): 22023, then the same session goes on.
SELECT check_rate_limit_for_user('a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11', 'x', 0, 1);
SELECT error_of($$SELECT check_rate_limit_for_user('a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11', 'x', 0, 1)$$);
SELECT check_rate_limit_for_user('a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11', 'x', 1, 1);

-- PostgreSQL raises inside the SPI call (foreign key violation, 23503): the original error
-- comes through unchanged, and the next call works.
SELECT check_rate_limit_for_user('e4000000-0000-4000-8000-000000000005', 'x', 1, 1);
SELECT error_of($$SELECT check_rate_limit_for_user('e4000000-0000-4000-8000-000000000005', 'x', 1, 1)$$);
SELECT check_rate_limit_for_user('a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11', 'x', 1, 1);

-- Inside a transaction the failed call aborts it, as any ERROR does; a savepoint recovers.
BEGIN;
SAVEPOINT before_call;
SELECT check_rate_limit_for_user('e4000000-0000-4000-8000-000000000005', 'x', 1, 1);
ROLLBACK TO SAVEPOINT before_call;
SELECT check_rate_limit_for_user('a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11', 'y', 1, 1);
COMMIT;

-- A check constraint fails inside SPI on the third call (23514): the first two counted, the
-- third wrote nothing.
ALTER TABLE rpc_rate_limits ADD CONSTRAINT at_most_two CHECK (call_count <= 2);
SELECT check_rate_limit_for_user('a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11', 'z', 5, 1);
SELECT check_rate_limit_for_user('a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11', 'z', 5, 1);
SELECT check_rate_limit_for_user('a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11', 'z', 5, 1);
SELECT error_of($$SELECT check_rate_limit_for_user('a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11', 'z', 5, 1)$$);
SELECT rpc_name, call_count FROM rpc_rate_limits ORDER BY rpc_name;
ALTER TABLE rpc_rate_limits DROP CONSTRAINT at_most_two;
SELECT check_rate_limit_for_user('a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11', 'z', 5, 1);

-- Deleting the user deletes its counters (ON DELETE CASCADE).
DELETE FROM auth.users WHERE id = 'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11';
SELECT count(*) AS rows_left FROM rpc_rate_limits;

-- Many errors in a row leak nothing and leave the backend working.
DO $$
BEGIN
    FOR i IN 1..1000 LOOP
        BEGIN
            PERFORM check_rate_limit_for_user('e4000000-0000-4000-8000-000000000005', 'x', 1, 1);
        EXCEPTION WHEN foreign_key_violation THEN
            NULL;
        END;
        BEGIN
            PERFORM check_rate_limit_for_user('e4000000-0000-4000-8000-000000000005', '', 1, 1);
        EXCEPTION WHEN invalid_parameter_value THEN
            NULL;
        END;
    END LOOP;
END
$$;
SELECT 'backend alive' AS status;

RESET ratelimit.test_clock;
DROP EXTENSION ratelimit_rpc_limits, ratelimit;
DROP SCHEMA auth CASCADE;
