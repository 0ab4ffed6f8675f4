-- Every upgrade path, from the first released version: install it, write counters, run
-- ALTER EXTENSION ratelimit UPDATE, check that the counters and calls still work, and that the
-- upgraded extension has exactly the objects, privileges and settings of a fresh install.
SET timezone = 'UTC';
SET ratelimit.test_clock = '2026-03-01 10:00:00+00';

CREATE EXTENSION ratelimit VERSION '0.1.0';
SELECT check_rate_limit_for_user('a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11', 'complete-game', 3, 1)
FROM generate_series(1, 2);

ALTER EXTENSION ratelimit UPDATE;
SELECT extversion FROM pg_extension WHERE extname = 'ratelimit';

-- Counters written before the upgrade still count: the third call is allowed, the fourth not.
SELECT user_id, rpc_name, call_count FROM rpc_rate_limits;
SELECT check_rate_limit_for_user('a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11', 'complete-game', 3, 1)
FROM generate_series(1, 2);
-- What the new version added works on the upgraded install.
SELECT increment_rate_limit('a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11', 'tasks', 50, 3600, 10);
SELECT * FROM check_rate_limit(p_key => 'global', p_limit => 1000, p_window_seconds => 60);
SELECT * FROM ratelimit.consume('upgraded-from-0.1.0', 2, '1 minute');

-- The shape of the installed extension: its objects, and every function's signature, security,
-- settings and privileges.
CREATE FUNCTION pg_temp.extension_shape()
RETURNS TABLE(item text)
LANGUAGE sql AS $$
    SELECT pg_describe_object(classid, objid, objsubid)
    FROM pg_depend
    WHERE refclassid = 'pg_extension'::regclass AND deptype = 'e'
      AND refobjid = (SELECT oid FROM pg_extension WHERE extname = 'ratelimit')
    UNION ALL
    SELECT format('%s definer=%s config=%s acl=%s', p.oid::regprocedure, p.prosecdef,
                  p.proconfig, p.proacl)
    FROM pg_proc p
    JOIN pg_depend d ON d.classid = 'pg_proc'::regclass AND d.objid = p.oid AND d.deptype = 'e'
    WHERE d.refobjid = (SELECT oid FROM pg_extension WHERE extname = 'ratelimit')
    UNION ALL
    SELECT format('%s acl=%s rls=%s options=%s persistence=%s', c.oid::regclass, c.relacl,
                  c.relrowsecurity, c.reloptions, c.relpersistence)
    FROM pg_class c
    JOIN pg_depend d ON d.classid = 'pg_class'::regclass AND d.objid = c.oid AND d.deptype = 'e'
    WHERE d.refobjid = (SELECT oid FROM pg_extension WHERE extname = 'ratelimit')
$$;
CREATE TEMP TABLE upgraded AS SELECT item FROM pg_temp.extension_shape();

DROP EXTENSION ratelimit;
CREATE EXTENSION ratelimit;
CREATE TEMP TABLE fresh AS SELECT item FROM pg_temp.extension_shape();

SELECT count(*) > 20 AS shape_is_not_empty FROM fresh;
SELECT 'only after upgrade' AS side, item FROM (TABLE upgraded EXCEPT TABLE fresh) AS u
UNION ALL
SELECT 'only in fresh install', item FROM (TABLE fresh EXCEPT TABLE upgraded) AS f;

-- From 0.2.0: seed 004's buckets survive, and the native API arrives.
DROP EXTENSION ratelimit;
CREATE EXTENSION ratelimit VERSION '0.2.0';
SELECT * FROM check_rate_limit(p_key => 'login', p_limit => 2, p_window_seconds => 60);
ALTER EXTENSION ratelimit UPDATE;
SELECT extversion FROM pg_extension WHERE extname = 'ratelimit';
SELECT * FROM check_rate_limit(p_key => 'login', p_limit => 2, p_window_seconds => 60);
SELECT * FROM check_rate_limit(p_key => 'login', p_limit => 2, p_window_seconds => 60);
SELECT * FROM ratelimit.consume('upgraded-from-0.2.0', 2, '1 minute', p_engine => 'unlogged');
SELECT job_name FROM ratelimit.cleanup_jobs() ORDER BY 1;
TRUNCATE upgraded;
INSERT INTO upgraded SELECT item FROM pg_temp.extension_shape();
SELECT 'only after upgrade' AS side, item FROM (TABLE upgraded EXCEPT TABLE fresh) AS u
UNION ALL
SELECT 'only in fresh install', item FROM (TABLE fresh EXCEPT TABLE upgraded) AS f;

-- From 0.3.0: the native API's rows survive, and the memory engine's stats arrive.
DROP EXTENSION ratelimit;
CREATE EXTENSION ratelimit VERSION '0.3.0';
SELECT * FROM ratelimit.consume('upgraded-from-0.3.0', 2, '1 minute');
ALTER EXTENSION ratelimit UPDATE;
SELECT extversion FROM pg_extension WHERE extname = 'ratelimit';
SELECT * FROM ratelimit.consume('upgraded-from-0.3.0', 2, '1 minute');
SELECT * FROM ratelimit.consume('upgraded-from-0.3.0', 2, '1 minute');
TRUNCATE upgraded;
INSERT INTO upgraded SELECT item FROM pg_temp.extension_shape();
SELECT 'only after upgrade' AS side, item FROM (TABLE upgraded EXCEPT TABLE fresh) AS u
UNION ALL
SELECT 'only in fresh install', item FROM (TABLE fresh EXCEPT TABLE upgraded) AS f;

-- From 0.4.0: the rows survive, and the policies arrive with the apps' limits.
DROP EXTENSION ratelimit;
CREATE EXTENSION ratelimit VERSION '0.4.0';
SELECT * FROM ratelimit.consume('upgraded-from-0.4.0', 2, '1 minute', p_engine => 'unlogged');
ALTER EXTENSION ratelimit UPDATE;
SELECT extversion FROM pg_extension WHERE extname = 'ratelimit';
SELECT * FROM ratelimit.consume('upgraded-from-0.4.0', 2, '1 minute', p_engine => 'unlogged');
SELECT * FROM ratelimit.consume('upgraded-from-0.4.0', 2, '1 minute', p_engine => 'unlogged');
SELECT count(*) AS policies, count(*) FILTER (WHERE name LIKE 'rpc.%') AS rpc_policies
FROM ratelimit.policies;
SELECT allowed, policy, "limit", remaining, reason FROM ratelimit.check('rpc.auth', 'upgraded-user');
SELECT ratelimit.http_headers(ratelimit.check('rpc.auth', 'upgraded-user'));
TRUNCATE upgraded;
INSERT INTO upgraded SELECT item FROM pg_temp.extension_shape();
SELECT 'only after upgrade' AS side, item FROM (TABLE upgraded EXCEPT TABLE fresh) AS u
UNION ALL
SELECT 'only in fresh install', item FROM (TABLE fresh EXCEPT TABLE upgraded) AS f;

-- From 0.5.0: native keys keep their counts; policies are decided natively, each in its own
-- namespace (a native key spelled 'policy:subject' no longer reaches a policy's counter), and
-- start with fresh counters.
DROP EXTENSION ratelimit;
CREATE EXTENSION ratelimit VERSION '0.5.0';
SELECT * FROM ratelimit.consume('upgraded-from-0.5.0', 2, '1 minute');
SELECT allowed, policy, remaining FROM ratelimit.check('rpc.auth', 'upgraded-user');
ALTER EXTENSION ratelimit UPDATE;
SELECT extversion FROM pg_extension WHERE extname = 'ratelimit';
SELECT * FROM ratelimit.consume('upgraded-from-0.5.0', 2, '1 minute');
SELECT * FROM ratelimit.consume('upgraded-from-0.5.0', 2, '1 minute');
SELECT allowed, policy, remaining FROM ratelimit.check('rpc.auth', 'upgraded-user');
SELECT policy, key, amount FROM ratelimit.key_state ORDER BY policy, key;
TRUNCATE upgraded;
INSERT INTO upgraded SELECT item FROM pg_temp.extension_shape();
SELECT 'only after upgrade' AS side, item FROM (TABLE upgraded EXCEPT TABLE fresh) AS u
UNION ALL
SELECT 'only in fresh install', item FROM (TABLE fresh EXCEPT TABLE upgraded) AS f;

RESET ratelimit.test_clock;
DROP EXTENSION ratelimit;
