-- The native policy engine: each policy's counters in a namespace of their own on every engine
-- (no policy name, subject or native key reaches another's counter); an edited limit or period
-- decides the very next call on every algorithm, in both directions; per-policy counters and
-- top offenders belong to the database that made them; and the per-backend cache of the policy
-- tables is exact: an edit committed in one session decides the next call in another, an
-- uncommitted or rolled-back edit decides nothing elsewhere, and ALTER EXTENSION UPDATE and
-- DROP/CREATE EXTENSION in a live session are seen at once.
--
-- Sessions other than this file's own are dblink connections to a second database made for
-- this run (committed there, so the sessions see each other) and dropped at the end.
BEGIN;
CREATE EXTENSION IF NOT EXISTS pgtap;
CREATE EXTENSION IF NOT EXISTS dblink;
\ir install_edition.psql
-- Section 4 checks the social app's activity limits.
SELECT ratelimit.load_preset('social-activity');
SET LOCAL timezone = 'UTC';

SELECT plan(89);

SELECT skip('the SQL edition has no memory engine', 26) WHERE NOT :memory_engine;

CREATE SCHEMA engine_test;
CREATE TABLE engine_test.run AS
SELECT 'pe' || pg_backend_pid() || '_' || (extract(epoch FROM clock_timestamp()) * 1e6)::bigint AS prefix;

CREATE FUNCTION engine_test.subject(p_name text) RETURNS text LANGUAGE sql
AS $$SELECT prefix || ':' || p_name FROM engine_test.run$$;

-- Far in the future, so that the memory engine's worker (real clock) never frees these keys.
CREATE FUNCTION engine_test.at(p_offset interval) RETURNS void LANGUAGE sql
AS $$SELECT set_config('ratelimit.test_clock',
                       (timestamptz '2100-01-01 00:00:00+00' + p_offset)::text, true)$$;
SELECT engine_test.at('0');

------------------------------------------------------------------------------------------------
-- 1. Namespaces, on every engine
------------------------------------------------------------------------------------------------

CREATE FUNCTION engine_test.namespaces(p_engine text) RETURNS SETOF text LANGUAGE plpgsql AS $$
DECLARE
    login text := 'ns.' || p_engine;
    login_ip text := 'ns.' || p_engine || ':ip';
    subject text := engine_test.subject('1.2.3.4');
    d ratelimit.policy_decision;
BEGIN
    INSERT INTO ratelimit.policies (name, algorithm, "limit", period, engine) VALUES
        (login, 'fixed_window', 2, '1 hour', p_engine), (login_ip, 'fixed_window', 2, '1 hour', p_engine);
    -- login with 'ip:<s>' and login:ip with '<s>' once spelled the same state key.
    PERFORM ratelimit.check(login, 'ip:' || subject);
    PERFORM ratelimit.check(login, 'ip:' || subject);
    d := ratelimit.check(login_ip, subject);
    RETURN NEXT is(ARRAY[d.allowed::int, d.remaining], ARRAY[1, 1],
                   p_engine || ': a policy whose name and subject spell another''s key has its own counter');
    d := ratelimit.check_all(ARRAY[login, login_ip], ARRAY['ip:' || subject || 'x', subject || 'x']);
    RETURN NEXT is(ARRAY[d.allowed::int, d.remaining], ARRAY[1, 1],
                   p_engine || ': check_all over two such policies decides both (no error)');
    -- The native API's keys are another namespace: no spelling reaches a policy's counter.
    RETURN NEXT is((ratelimit.consume(login || ':ip:' || subject, 1, '1 hour', p_engine => p_engine)).allowed,
                   true, p_engine || ': consume on the spelled key is a fresh native key');
    PERFORM ratelimit.reset(login || ':ip:' || subject, p_engine);
    RETURN NEXT is((ratelimit.check(login, 'ip:' || subject)).allowed, false,
                   p_engine || ': reset on the spelled key leaves the policy''s spent counter spent');
    PERFORM ratelimit.block(login_ip || ':' || subject, '1 day', p_engine);
    RETURN NEXT is((ratelimit.check(login_ip, subject)).allowed, true,
                   p_engine || ': block on the spelled key does not block the policy''s subject');
    PERFORM ratelimit.refund(login || ':ip:' || subject, 2, '1 hour', 1, p_engine => p_engine);
    RETURN NEXT is((ratelimit.check(login, 'ip:' || subject)).allowed, false,
                   p_engine || ': refund on the spelled key gives the policy nothing back');
    -- Through the policy, an administrator reaches them.
    RETURN NEXT is(ARRAY[ratelimit.reset_policy_key(login, 'ip:' || subject)::int,
                         (ratelimit.check(login, 'ip:' || subject)).remaining],
                   ARRAY[1, 1], p_engine || ': reset_policy_key forgets the policy''s counter for the subject');
    PERFORM ratelimit.block_policy_key(login_ip, subject, '1 day');
    d := ratelimit.check(login_ip, subject);
    RETURN NEXT ok(NOT d.allowed AND d.retry_after_ms >= 86400000,
                   p_engine || ': block_policy_key denies the subject under that policy for the duration');
END
$$;

SELECT * FROM engine_test.namespaces('table');
SELECT * FROM engine_test.namespaces('unlogged');
SELECT * FROM engine_test.namespaces('memory') WHERE :memory_engine;

SELECT is((SELECT count(*) FROM ratelimit.key_state
            WHERE policy = 'ns.table' AND key = 'ip:' || engine_test.subject('1.2.3.4')),
          1::bigint, 'the table engine keeps the policy''s row under (policy, subject)');
SELECT is((SELECT count(*) FROM ratelimit.key_state
            WHERE policy = '' AND key = 'ns.table:ip:' || engine_test.subject('1.2.3.4')),
          1::bigint, 'and the native calls on the spelled key wrote a row of their own');

------------------------------------------------------------------------------------------------
-- 2. An edited limit or period decides the next call, in both directions, on every algorithm
------------------------------------------------------------------------------------------------

CREATE FUNCTION engine_test.relax_then_tighten(p_algorithm text, p_engine text) RETURNS SETOF text
LANGUAGE plpgsql AS $$
DECLARE
    policy_name text := 'rt.' || p_algorithm || '.' || p_engine;
    subject text := engine_test.subject(policy_name);
    label text := p_algorithm || ' on ' || p_engine;
    d ratelimit.policy_decision;
    allowed integer;
BEGIN
    PERFORM engine_test.at('10 days');
    INSERT INTO ratelimit.policies (name, algorithm, "limit", period, engine)
        VALUES (policy_name, p_algorithm, 1, '1 day', p_engine);
    PERFORM ratelimit.check(policy_name, subject);
    d := ratelimit.check(policy_name, subject);
    RETURN NEXT ok(NOT d.allowed AND d.retry_after_ms > 3600000, label || ': 1 per day, spent');
    UPDATE ratelimit.policies SET "limit" = 5, period = '1 minute' WHERE name = policy_name;
    PERFORM engine_test.at('10 days 5 minutes');
    d := ratelimit.check(policy_name, subject);
    RETURN NEXT ok(d.allowed AND d."limit" = 5,
                   label || ': relaxed to 5 per minute, the call five minutes later is allowed');
    UPDATE ratelimit.policies SET "limit" = 1, period = '1 day' WHERE name = policy_name;
    allowed := 0;
    FOR i IN 1..3 LOOP
        IF (ratelimit.check(policy_name, subject)).allowed THEN
            allowed := allowed + 1;
        END IF;
    END LOOP;
    RETURN NEXT ok(allowed <= 1, label || ': tightened back to 1 per day, at most 1 of 3 calls is allowed');
END
$$;

SELECT engine_test.relax_then_tighten(a, e)
FROM unnest(ARRAY['fixed_window', 'rolling_window', 'sliding_window', 'sliding_window_counter',
                  'token_bucket', 'gcra']) a,
     unnest(ARRAY['table', 'memory']) e
WHERE :memory_engine OR e <> 'memory';

-- The case as reported: gcra 1 per day, one check, relaxed to 100 per minute. At most the unit
-- spent under the old terms and the call's own unit are taken (the old code: denied for a day).
SELECT engine_test.at('20 days');
INSERT INTO ratelimit.policies (name, algorithm, "limit", period) VALUES ('rt.reported', 'gcra', 1, '1 day');
SELECT ratelimit.check('rt.reported', engine_test.subject('reported'));
UPDATE ratelimit.policies SET "limit" = 100, period = '1 minute' WHERE name = 'rt.reported';
SELECT engine_test.at('20 days 5 minutes');
SELECT ok((SELECT allowed AND remaining >= 98 FROM ratelimit.check('rt.reported', engine_test.subject('reported'))),
          'gcra relaxed from 1 per day to 100 per minute: five minutes later the call is allowed, at least 98 remain');

------------------------------------------------------------------------------------------------
-- 3. A second database, and sessions on it
------------------------------------------------------------------------------------------------

-- What sections 4 and 5 test is the C edition's: counters in shared memory, and a cache of the
-- policy tables in each backend (the SQL edition reads the tables on every call), emptied by
-- DROP/CREATE and ALTER EXTENSION ratelimit.
\if :c_edition

CREATE FUNCTION engine_test.connection(p_database text) RETURNS text LANGUAGE sql AS $$
    SELECT format('dbname=%s host=%s port=%s', p_database,
                  split_part(current_setting('unix_socket_directories'), ',', 1),
                  current_setting('port'))
$$;
CREATE FUNCTION engine_test.other() RETURNS text LANGUAGE sql
AS $$SELECT prefix || '_other' FROM engine_test.run$$;

SELECT dblink_exec(engine_test.connection(current_database()),
                   format('CREATE DATABASE %I', engine_test.other()));
SELECT dblink_connect('s1', engine_test.connection(engine_test.other()));
SELECT dblink_connect('s2', engine_test.connection(engine_test.other()));
SELECT dblink_exec('s1', 'CREATE EXTENSION ratelimit');
SELECT dblink_exec('s1', format('SET ratelimit.test_clock = %L', '2100-02-01 00:00:00+00'));
SELECT dblink_exec('s2', format('SET ratelimit.test_clock = %L', '2100-02-01 00:00:00+00'));

CREATE FUNCTION engine_test.remote_check(p_session text, p_policy text, p_subject text)
RETURNS integer[] LANGUAGE sql AS $$
    SELECT ARRAY[allowed::int, "limit", remaining]
    FROM dblink(p_session, format('SELECT allowed, "limit", remaining FROM ratelimit.check(%L, %L)',
                                  p_policy, p_subject))
         AS t(allowed boolean, "limit" integer, remaining integer)
$$;

------------------------------------------------------------------------------------------------
-- 4. Counters and offenders belong to their database
------------------------------------------------------------------------------------------------

SELECT ratelimit.check('activity.create_post', 'secret-user@corp.com') FROM generate_series(1, 15);
SELECT is((SELECT denied FROM ratelimit.policy_stats() WHERE policy = 'activity.create_post') >= 5,
          true, 'this database counts its denials');
SELECT is((SELECT count(*) FROM dblink('s1', 'SELECT subject FROM ratelimit.top_offenders(1000)') AS t(subject text)
            WHERE subject = 'secret-user@corp.com'),
          0::bigint, 'another database does not see this database''s offenders');
SELECT is((SELECT count(*) FROM dblink('s1', 'SELECT policy FROM ratelimit.policy_stats()') AS t(policy text)
            WHERE policy = 'activity.create_post'),
          0::bigint, 'nor its per-policy counters');
SELECT is((SELECT count(*) FROM dblink('s1', 'SELECT ratelimit.reset_policy_stats()') AS t(r text)), 1::bigint,
          'the other database resets its counters');
SELECT is((SELECT denied FROM ratelimit.policy_stats() WHERE policy = 'activity.create_post') >= 5,
          true, 'which leaves this database''s counters as they were');
SELECT is((SELECT count(*) FROM ratelimit.top_offenders(1000) WHERE subject = 'secret-user@corp.com'),
          1::bigint, 'and its offenders');

------------------------------------------------------------------------------------------------
-- 5. The cache of the policy tables, across sessions
------------------------------------------------------------------------------------------------

SELECT dblink_exec('s1', $$INSERT INTO ratelimit.policies (name, "limit", period) VALUES ('c.p', 1, '1 hour')$$);
SELECT is(engine_test.remote_check('s1', 'c.p', 'x'), ARRAY[1, 1, 0], 'session 1: the first call of 1 per hour');
SELECT is(engine_test.remote_check('s1', 'c.p', 'x'), ARRAY[0, 1, 0], 'session 1: the second is denied');
SELECT is(engine_test.remote_check('s2', 'c.p', 'x'), ARRAY[0, 1, 0], 'session 2 reads the same row');

SELECT dblink_exec('s2', 'BEGIN');
SELECT dblink_exec('s2', $$UPDATE ratelimit.policies SET "limit" = 3 WHERE name = 'c.p'$$);
SELECT is(engine_test.remote_check('s1', 'c.p', 'x'), ARRAY[0, 1, 0],
          'an edit not yet committed in session 2 decides nothing in session 1');
SELECT is(engine_test.remote_check('s2', 'c.p', 'y'), ARRAY[1, 3, 2],
          'but decides session 2''s own next call');
SELECT dblink_exec('s2', 'COMMIT');
SELECT is(engine_test.remote_check('s1', 'c.p', 'x'), ARRAY[1, 3, 1],
          'once committed, it decides session 1''s next call');

SELECT dblink_exec('s2', 'BEGIN');
SELECT dblink_exec('s2', $$UPDATE ratelimit.policies SET "limit" = 100 WHERE name = 'c.p'$$);
SELECT is(engine_test.remote_check('s2', 'c.p', 'z'), ARRAY[1, 100, 99], 'session 2 decides with its own edit');
SELECT dblink_exec('s2', 'ROLLBACK');
SELECT is(engine_test.remote_check('s2', 'c.p', 'z'), ARRAY[1, 3, 2],
          'after its rollback, session 2 decides with the committed row again');
SELECT is(engine_test.remote_check('s1', 'c.p', 'x'), ARRAY[1, 3, 0],
          'and the rolled-back edit never reached session 1');

SELECT dblink_exec('s2', $$DELETE FROM ratelimit.policies WHERE name = 'c.p'$$);
SELECT throws_ok($$SELECT * FROM dblink('s1', 'SELECT allowed FROM ratelimit.check(''c.p'', ''x'')') AS t(a boolean)$$,
                 '22023', 'p_policy: unknown policy "c.p"', 'a deleted policy is unknown at session 1''s next call');
SELECT dblink_exec('s2', $$INSERT INTO ratelimit.tiers (name, multiplier) VALUES ('gold', 4)$$);
SELECT dblink_exec('s2', $$INSERT INTO ratelimit.policies (name, "limit", period) VALUES ('c.q', 2, '1 hour')$$);
SELECT is((SELECT ARRAY["limit", remaining] FROM dblink('s1', 'SELECT "limit", remaining FROM ratelimit.check(''c.q'', ''x'', 1, ''gold'')')
            AS t("limit" integer, remaining integer)),
          ARRAY[8, 7], 'a tier added in session 2 applies at session 1''s next call');
SELECT dblink_exec('s2', $$INSERT INTO ratelimit.key_overrides (policy, key, "limit") VALUES ('c.q', 'vip', 50)$$);
SELECT is(engine_test.remote_check('s1', 'c.q', 'vip'), ARRAY[1, 50, 49], 'so does a key override');
SELECT dblink_exec('s2', $$INSERT INTO ratelimit.access_list (action, key) VALUES ('deny', 'bad')$$);
SELECT is(engine_test.remote_check('s1', 'c.q', 'bad'), ARRAY[0, 2, 0], 'and a deny entry');
SELECT dblink_exec('s2', 'TRUNCATE ratelimit.access_list');
SELECT is(engine_test.remote_check('s1', 'c.q', 'bad'), ARRAY[1, 2, 1], 'and emptying the list with TRUNCATE');

-- DROP and CREATE EXTENSION in a live session: the next call reads the new tables.
SELECT dblink_exec('s1', 'DROP EXTENSION ratelimit');
SELECT dblink_exec('s1', 'CREATE EXTENSION ratelimit');
SELECT dblink_exec('s1', $$INSERT INTO ratelimit.policies (name, "limit", period) VALUES ('c.q', 7, '1 hour')$$);
SELECT is(engine_test.remote_check('s1', 'c.q', 'after-recreate'), ARRAY[1, 7, 6],
          'after DROP and CREATE EXTENSION in the same session, the new row decides');
SELECT is(engine_test.remote_check('s2', 'c.q', 'after-recreate-2'), ARRAY[1, 7, 6],
          'and in another live session too');

-- ALTER EXTENSION UPDATE in a live session: from the 0.5.0 policy functions to the native ones.
SELECT dblink_exec('s1', 'DROP EXTENSION ratelimit');
SELECT dblink_exec('s1', $$CREATE EXTENSION ratelimit VERSION '0.5.0'$$);
SELECT is(engine_test.remote_check('s1', 'rpc.auth', 'u'), ARRAY[1, 5, 4], '0.5.0 decides a policy');
SELECT is(engine_test.remote_check('s2', 'rpc.auth', 'u2'), ARRAY[1, 5, 4], 'in both sessions');
SELECT dblink_exec('s1', 'ALTER EXTENSION ratelimit UPDATE');
SELECT dblink_exec('s1', $$UPDATE ratelimit.policies SET "limit" = 9 WHERE name = 'rpc.auth'$$);
SELECT is(engine_test.remote_check('s1', 'rpc.auth', 'u'), ARRAY[1, 9, 8],
          'after ALTER EXTENSION UPDATE the native path decides, with the edited row (counters start afresh)');
SELECT is(engine_test.remote_check('s2', 'rpc.auth', 'u2'), ARRAY[1, 9, 8], 'in the other live session too');

SELECT dblink_disconnect('s1');
SELECT dblink_disconnect('s2');
SELECT dblink_exec(engine_test.connection(current_database()),
                   format('DROP DATABASE %I', engine_test.other()));
\else
SELECT skip('the SQL edition keeps no per-policy counters or offenders', 6);
SELECT skip('the SQL edition keeps no cache of the policy tables: it reads them on every call', 20);
\endif

SELECT * FROM finish();
ROLLBACK;
