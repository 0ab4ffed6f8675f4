-- Every upgrade path, from the first released version: install it, write counters, run
-- ALTER EXTENSION ratelimit UPDATE, check that the counters and calls still work, and that the
-- upgraded extension has exactly the objects, privileges and settings of a fresh install. Since
-- 0.7.0 the drop-ins are extensions of their own: an update leaves the older version's in place
-- (still working, no longer ratelimit's), and CREATE EXTENSION of their app's extension takes
-- them over with their rows (the last part).
SET timezone = 'UTC';
SET ratelimit.test_clock = '2026-03-01 10:00:00+00';

CREATE EXTENSION ratelimit VERSION '0.1.0';
SELECT check_rate_limit_for_user('a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11', 'upgrade-check', 3, 1)
FROM generate_series(1, 2);

ALTER EXTENSION ratelimit UPDATE;
SELECT extversion FROM pg_extension WHERE extname = 'ratelimit';

-- Counters written before the upgrade still count: the third call is allowed, the fourth not.
-- (A name without a policy: the update through 0.5.0 writes the game backend's rpc.* policies,
-- which would decide instead of the arguments.)
SELECT user_id, rpc_name, call_count FROM rpc_rate_limits;
SELECT check_rate_limit_for_user('a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11', 'upgrade-check', 3, 1)
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

-- The drop-ins an update left in place (their comment says so), dropped before the next version
-- is installed into the same schema.
CREATE FUNCTION pg_temp.forget_drop_ins()
RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
    statement text;
BEGIN
    FOR statement IN
        SELECT format('DROP FUNCTION %s', p.oid::regprocedure) FROM pg_proc p
        WHERE obj_description(p.oid, 'pg_proc') LIKE 'ratelimit 0.6.0 drop-in%'
        UNION ALL
        SELECT format('DROP TABLE %s', c.oid::regclass) FROM pg_class c
        WHERE c.relkind = 'r' AND obj_description(c.oid, 'pg_class') LIKE 'ratelimit 0.6.0 drop-in%'
    LOOP
        EXECUTE statement;
    END LOOP;
END
$$;

-- What the shape leaves out: every function's definition (its body included), and every
-- relation's and composite type's columns, constraints, triggers, indexes and view queries.
CREATE FUNCTION pg_temp.extension_definitions()
RETURNS TABLE(item text)
LANGUAGE sql AS $$
    WITH ext AS (SELECT oid FROM pg_extension WHERE extname = 'ratelimit'),
    members AS (SELECT classid, objid FROM pg_depend, ext
                WHERE refclassid = 'pg_extension'::regclass AND deptype = 'e' AND refobjid = ext.oid),
    rels AS (SELECT objid AS oid FROM members WHERE classid = 'pg_class'::regclass
             UNION SELECT t.typrelid FROM pg_type t JOIN members m ON m.classid = 'pg_type'::regclass
                   AND m.objid = t.oid WHERE t.typrelid <> 0)
    SELECT pg_get_functiondef(m.objid) FROM members m JOIN pg_proc p ON p.oid = m.objid
    WHERE m.classid = 'pg_proc'::regclass
    UNION ALL
    SELECT format('%s column %s %s %s collate %s not null %s default %s', a.attrelid::regclass, a.attnum,
                  a.attname, format_type(a.atttypid, a.atttypmod), a.attcollation, a.attnotnull,
                  pg_get_expr(d.adbin, d.adrelid))
    FROM pg_attribute a JOIN rels r ON r.oid = a.attrelid
    LEFT JOIN pg_attrdef d ON d.adrelid = a.attrelid AND d.adnum = a.attnum
    WHERE a.attnum > 0 AND NOT a.attisdropped
    UNION ALL
    SELECT format('%s constraint %s %s', c.conrelid::regclass, c.conname, pg_get_constraintdef(c.oid))
    FROM pg_constraint c JOIN rels r ON r.oid = c.conrelid
    UNION ALL
    SELECT pg_get_triggerdef(t.oid) FROM pg_trigger t JOIN rels r ON r.oid = t.tgrelid WHERE NOT t.tgisinternal
    UNION ALL
    SELECT pg_get_indexdef(i.indexrelid) FROM pg_index i JOIN rels r ON r.oid = i.indrelid
    UNION ALL
    SELECT format('%s view %s', c.oid::regclass, pg_get_viewdef(c.oid))
    FROM pg_class c JOIN rels r ON r.oid = c.oid WHERE c.relkind = 'v'
$$;

SELECT pg_temp.forget_drop_ins();
DROP EXTENSION ratelimit;
CREATE EXTENSION ratelimit;
CREATE TEMP TABLE fresh AS SELECT item FROM pg_temp.extension_shape();
CREATE TEMP TABLE fresh_definitions AS SELECT item FROM pg_temp.extension_definitions();
-- A fresh install has no policies or tiers: the apps' limits are presets, loaded on purpose.
SELECT (SELECT count(*) FROM ratelimit.policies) AS policies, (SELECT count(*) FROM ratelimit.tiers) AS tiers;
SELECT preset, policies, tiers FROM ratelimit.presets();

SELECT count(*) > 20 AS shape_is_not_empty FROM fresh;
SELECT 'only after upgrade' AS side, item FROM (TABLE upgraded EXCEPT TABLE fresh) AS u
UNION ALL
SELECT 'only in fresh install', item FROM (TABLE fresh EXCEPT TABLE upgraded) AS f;

-- From 0.2.0: the sliding-window buckets survive, and the native API arrives.
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
SELECT pg_temp.forget_drop_ins();
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
SELECT pg_temp.forget_drop_ins();
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
-- start with fresh counters. The policies and tiers the user has stay as they are, an edited
-- one included: the update writes none of them.
SELECT pg_temp.forget_drop_ins();
DROP EXTENSION ratelimit;
CREATE EXTENSION ratelimit VERSION '0.5.0';
SELECT * FROM ratelimit.consume('upgraded-from-0.5.0', 2, '1 minute');
SELECT allowed, policy, remaining FROM ratelimit.check('rpc.auth', 'upgraded-user');
UPDATE ratelimit.policies SET "limit" = 7 WHERE name = 'rpc.send-friend-request';
SELECT (SELECT count(*) FROM ratelimit.policies) AS policies, (SELECT count(*) FROM ratelimit.tiers) AS tiers;
ALTER EXTENSION ratelimit UPDATE;
SELECT (SELECT count(*) FROM ratelimit.policies) AS policies, (SELECT count(*) FROM ratelimit.tiers) AS tiers;
SELECT "limit" FROM ratelimit.policies WHERE name = 'rpc.send-friend-request';
-- Loading the presets the rows came from: nothing to write, and the edited row is refused.
SELECT ratelimit.load_preset('social-activity');
SELECT ratelimit.load_preset('game-backend');
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

-- From 0.6.0: the drop-ins keep working where they are after the update, and each app's moves into
-- its extension with its rows, the counts in flight going on. Two apps' drop-ins do not share a
-- schema: the one whose check_rate_limit is already there stops the other, naming the conflict.
SELECT pg_temp.forget_drop_ins();
DROP EXTENSION ratelimit;
CREATE EXTENSION ratelimit VERSION '0.6.0';
SELECT check_rate_limit_for_user('a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11', 'upgrade-check', 3, 1);
SELECT increment_rate_limit('a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11', 'tasks', 50, 3600, 10);
SELECT * FROM check_rate_limit(p_key => 'login', p_limit => 3, p_window_seconds => 60);
SELECT * FROM ratelimit.consume('upgraded-from-0.6.0', 2, '1 minute');
ALTER EXTENSION ratelimit UPDATE;
SELECT extversion FROM pg_extension WHERE extname = 'ratelimit';
SELECT check_rate_limit_for_user('a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11', 'upgrade-check', 3, 1);
SELECT increment_rate_limit('a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11', 'tasks', 50, 3600, 10);
SELECT * FROM check_rate_limit(p_key => 'login', p_limit => 3, p_window_seconds => 60);
SELECT * FROM ratelimit.consume('upgraded-from-0.6.0', 2, '1 minute');
TRUNCATE upgraded;
INSERT INTO upgraded SELECT item FROM pg_temp.extension_shape();
SELECT 'only after upgrade' AS side, item FROM (TABLE upgraded EXCEPT TABLE fresh) AS u
UNION ALL
SELECT 'only in fresh install', item FROM (TABLE fresh EXCEPT TABLE upgraded) AS f;
-- The update to the current version gives every function the body of the fresh install's, and
-- every table the same columns, constraints, triggers and indexes.
CREATE TEMP TABLE upgraded_definitions AS SELECT item FROM pg_temp.extension_definitions();
SELECT count(*) > 100 AS definitions_are_not_empty FROM fresh_definitions;
SELECT 'only after upgrade' AS side, item FROM (TABLE upgraded_definitions EXCEPT TABLE fresh_definitions) AS u
UNION ALL
SELECT 'only in fresh install', item FROM (TABLE fresh_definitions EXCEPT TABLE upgraded_definitions) AS f
ORDER BY 2, 1;

-- The drop-ins left in place still count, so their cleanup jobs are listed where they are.
SELECT job_name, command FROM ratelimit.cleanup_jobs();

-- The documented step: each app's extension takes its drop-ins over, rows and all.
CREATE EXTENSION ratelimit_rpc_limits;
CREATE EXTENSION ratelimit_endpoint_limits;
SELECT e.extname, count(*) AS members FROM pg_depend d JOIN pg_extension e ON e.oid = d.refobjid
WHERE d.deptype = 'e' AND e.extname LIKE 'ratelimit\_%'
  -- From PostgreSQL 17 a table's row type and its array type are members too: not counted.
  AND NOT EXISTS (SELECT FROM pg_type t JOIN pg_class c ON c.oid = t.typrelid
                  WHERE d.classid = 'pg_type'::regclass AND c.relkind <> 'c'
                    AND d.objid IN (t.oid, t.typarray))
GROUP BY 1 ORDER BY 1;
SELECT user_id, rpc_name, call_count FROM rpc_rate_limits;
SELECT check_rate_limit_for_user('a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11', 'upgrade-check', 3, 1);
SELECT endpoint, counter FROM rate_limits;
SELECT increment_rate_limit('a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11', 'tasks', 50, 3600, 10);
SELECT error_of($$CREATE EXTENSION ratelimit_sliding_window_limits$$);
-- In a schema of its own app's only, the sliding window's takes over too.
DROP EXTENSION ratelimit_rpc_limits;
CREATE EXTENSION ratelimit_sliding_window_limits;
SELECT key, count FROM rate_limit_buckets;
SELECT * FROM check_rate_limit('login', 3, 60);
SELECT * FROM check_rate_limit('login', 3, 60);
SELECT obj_description('rate_limit_buckets'::regclass, 'pg_class') AS comment;

RESET ratelimit.test_clock;
DROP EXTENSION ratelimit CASCADE;
