-- Default privileges do not reach the extensions' objects: with database-wide default privileges
-- granting everything to anon, authenticated and PUBLIC in force when ratelimit and the three
-- apps' drop-in extensions are created (or ratelimit updated and the drop-ins taken over), those
-- roles reach exactly what docs/operations.md "Who may call what" lists. The per-RPC and endpoint
-- limits are in public, the sliding window's in the schema sliding_window.
BEGIN;
CREATE EXTENSION IF NOT EXISTS pgtap;

\ir supabase_roles.psql

-- A careless database: everything the installing role creates, anywhere, goes to everyone.
ALTER DEFAULT PRIVILEGES GRANT ALL ON TABLES TO anon, authenticated, PUBLIC;
ALTER DEFAULT PRIVILEGES GRANT ALL ON FUNCTIONS TO anon, authenticated, PUBLIC;
ALTER DEFAULT PRIVILEGES GRANT ALL ON SEQUENCES TO anon, authenticated, PUBLIC;
ALTER DEFAULT PRIVILEGES GRANT ALL ON TYPES TO anon, authenticated, PUBLIC;
ALTER DEFAULT PRIVILEGES GRANT ALL ON SCHEMAS TO anon, authenticated, PUBLIC;

SELECT plan(14);

-- Every privilege the role holds (directly or through PUBLIC) on every member of ratelimit and
-- of the drop-in extensions, of either edition. The SQL edition's plain files make the same
-- objects as members of no extension: the schema ratelimit and what is in it, and the drop-ins'
-- tables and functions, which their comments name as ratelimit's.
CREATE FUNCTION pg_temp.reached(role_name text)
RETURNS TABLE(item text)
LANGUAGE sql AS $$
    WITH member_ids AS (
        SELECT d.classid, d.objid
        FROM pg_depend d
        WHERE d.refclassid = 'pg_extension'::regclass AND d.deptype = 'e'
          AND d.refobjid IN (SELECT oid FROM pg_extension
                             WHERE extname IN ('ratelimit', 'ratelimit_rpc_limits', 'ratelimit_endpoint_limits',
                                               'ratelimit_sliding_window_limits', 'ratelimit_sql',
                                               'ratelimit_sql_rpc_limits', 'ratelimit_sql_endpoint_limits',
                                               'ratelimit_sql_sliding_window_limits'))
        UNION
        SELECT 'pg_namespace'::regclass, n.oid FROM pg_namespace n WHERE n.nspname = 'ratelimit'
        UNION
        SELECT 'pg_class'::regclass, c.oid
        FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
        WHERE (n.nspname = 'ratelimit' AND c.relkind IN ('r', 'p', 'v', 'm', 'f', 'S'))
           OR (c.relkind = 'r' AND obj_description(c.oid, 'pg_class') LIKE 'ratelimit: %')
        UNION
        SELECT 'pg_proc'::regclass, p.oid
        FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
        WHERE n.nspname = 'ratelimit' OR obj_description(p.oid, 'pg_proc') LIKE 'ratelimit: %'
        UNION
        SELECT 'pg_type'::regclass, t.oid
        FROM pg_type t JOIN pg_namespace n ON n.oid = t.typnamespace
        WHERE n.nspname = 'ratelimit'),
    members AS (
        SELECT classid, objid, pg_describe_object(classid, objid, 0) AS object FROM member_ids)
    SELECT m.object || ' ' || k.privilege
    FROM members m
    JOIN pg_class c ON m.classid = 'pg_class'::regclass AND c.oid = m.objid AND c.relkind <> 'S'
    CROSS JOIN unnest(ARRAY['SELECT', 'INSERT', 'UPDATE', 'DELETE', 'TRUNCATE', 'REFERENCES',
                            'TRIGGER']) AS k(privilege)
    WHERE has_table_privilege(role_name, c.oid, k.privilege)
       OR (k.privilege IN ('SELECT', 'INSERT', 'UPDATE', 'REFERENCES')
           AND has_any_column_privilege(role_name, c.oid, k.privilege))
    UNION ALL
    SELECT m.object || ' ' || k.privilege
    FROM members m
    JOIN pg_class c ON m.classid = 'pg_class'::regclass AND c.oid = m.objid AND c.relkind = 'S'
    CROSS JOIN unnest(ARRAY['USAGE', 'SELECT', 'UPDATE']) AS k(privilege)
    WHERE has_sequence_privilege(role_name, c.oid, k.privilege)
    UNION ALL
    SELECT m.object || ' EXECUTE'
    FROM members m
    WHERE m.classid = 'pg_proc'::regclass AND has_function_privilege(role_name, m.objid, 'EXECUTE')
    UNION ALL
    SELECT m.object || ' USAGE'
    FROM members m
    WHERE m.classid = 'pg_type'::regclass AND has_type_privilege(role_name, m.objid, 'USAGE')
      -- From PostgreSQL 17 the tables' row types and the array types are members too: a row
      -- type goes with its table, an array type's rights are its element's.
      AND NOT EXISTS (SELECT FROM pg_type t LEFT JOIN pg_class c ON c.oid = t.typrelid
                      WHERE t.oid = m.objid
                        AND (t.typsubscript = 'array_subscript_handler'::regproc OR c.relkind <> 'c'))
    UNION ALL
    SELECT m.object || ' ' || k.privilege
    FROM members m
    CROSS JOIN unnest(ARRAY['USAGE', 'CREATE']) AS k(privilege)
    WHERE m.classid = 'pg_namespace'::regclass AND has_schema_privilege(role_name, m.objid, k.privilege)
$$;

-- What docs/operations.md "Who may call what" gives everyone.
CREATE TEMP TABLE for_everyone(item text);
INSERT INTO for_everyone VALUES
    ('function check_rate_limit(text,integer,integer) EXECUTE'),
    ('function ratelimit.http_headers(ratelimit.policy_decision,text) EXECUTE'),
    ('function ratelimit.http_body(ratelimit.policy_decision,text) EXECUTE'),
    ('function ratelimit.validate_limit(integer,interval,text,text,integer,text) EXECUTE'),
    ('function ratelimit.validate_policy_options(text,interval[],interval,interval) EXECUTE'),
    ('function ratelimit.hash_subject(text) EXECUTE'),
    ('function ratelimit.describe_period(interval) EXECUTE'),
    ('function ratelimit.clock_now() EXECUTE'),
    ('function ratelimit.cleanup_jobs() EXECUTE'),
    ('function ratelimit.jwt_subject() EXECUTE'),
    ('function ratelimit.client_address() EXECUTE'),
    ('function ratelimit.declared_limiter_fields() EXECUTE'),
    ('function ratelimit.within_limit(text,integer) EXECUTE'),
    ('function ratelimit.pre_request() EXECUTE'),
    ('type ratelimit.decision USAGE'),
    ('type ratelimit.policy_decision USAGE');

-- On the SQL edition, installed before this file under its owner's default privileges, which
-- grant the same and service_role too (test/sql_edition/install.sh).
\ir install_edition.psql
\set drop_in rpc_limits
\ir install_drop_in.psql
\set drop_in endpoint_limits
\ir install_drop_in.psql
\set drop_in sliding_window_limits
\set drop_in_schema sliding_window
\ir install_drop_in.psql

SELECT set_eq('SELECT item FROM pg_temp.reached(''public'')', 'SELECT item FROM for_everyone',
              'install: PUBLIC reaches only the functions and types for everyone');
-- anon and authenticated get the schema, where they reach pre_request (PostgREST's hook runs
-- as the request's role) and what PUBLIC does.
SELECT set_eq('SELECT item FROM pg_temp.reached(''anon'')',
              $$SELECT item FROM for_everyone UNION ALL SELECT 'schema ratelimit USAGE'$$,
              'install: anon reaches only those, and the schema');
SELECT set_eq('SELECT item FROM pg_temp.reached(''authenticated'')',
              $$SELECT item FROM for_everyone UNION ALL SELECT 'schema ratelimit USAGE'
                UNION ALL SELECT 'function increment_rate_limit(uuid,text,integer,integer,integer) EXECUTE'$$,
              'install: authenticated reaches only those, the schema and increment_rate_limit');
SELECT set_eq('SELECT item FROM pg_temp.reached(''app_user'')', 'SELECT item FROM for_everyone',
              'install: a role named by no grant reaches what PUBLIC does');
SELECT set_eq('SELECT item FROM pg_temp.reached(''service_role'')',
              $$SELECT item FROM for_everyone UNION ALL SELECT item FROM (VALUES
                ('schema ratelimit USAGE'),
                ('function ratelimit."check"(text,text,integer,text,inet,uuid) EXECUTE'),
                ('function ratelimit.check_many(text,text[],integer,text,inet,uuid) EXECUTE'),
                ('function ratelimit.check_all(text[],text[],integer,text,inet,uuid) EXECUTE'),
                ('function ratelimit.check_http(text[],text[],integer,text,inet,uuid,text,text) EXECUTE'),
                ('function ratelimit.declared_limiter_check(text,text,integer,integer,interval) EXECUTE'),
                ('function ratelimit.consume(text,integer,interval,integer,text,text,integer,text,interval) EXECUTE'),
                ('function ratelimit.peek(text,integer,interval,integer,text,text,integer,text) EXECUTE'),
                ('function ratelimit.refund(text,integer,interval,integer,text,text,integer,text) EXECUTE'),
                ('function ratelimit.allow(text,integer,interval,integer,text,text,integer,text) EXECUTE'),
                ('function ratelimit.consume_many(text[],integer,interval,integer,text,text,integer,text) EXECUTE'),
                ('function ratelimit.peek_many(text[],integer,interval,integer,text,text,integer,text) EXECUTE'),
                ('function ratelimit.acquire(text,integer,integer,text,interval) EXECUTE'),
                ('function ratelimit.release(bigint) EXECUTE'),
                ('function ratelimit.in_flight(text) EXECUTE'),
                ('function ratelimit.reserve(text,integer,interval,integer,text,text,integer,interval) EXECUTE'),
                ('function ratelimit.settle(bigint,integer) EXECUTE'),
                ('function ratelimit.cancel(bigint) EXECUTE'),
                ('function ratelimit.reserve_policy(text,text,integer,interval,text,inet,uuid) EXECUTE'),
                ('function ratelimit.acquire_policy(text,text,integer,text,text,inet,uuid) EXECUTE'),
                ('function ratelimit.lease_decision(text,ratelimit.lease) EXECUTE'),
                ('function ratelimit.reset(text,text) EXECUTE'),
                ('function ratelimit.block(text,interval,text) EXECUTE'),
                ('function ratelimit.consume_all(text[],integer[],interval[],text[],text[],integer[],boolean[],integer) EXECUTE'),
                ('function ratelimit.reset_policy_key(text,text) EXECUTE'),
                ('function ratelimit.block_policy_key(text,text,interval) EXECUTE'),
                ('function ratelimit.policy_stats() EXECUTE'),
                ('view ratelimit.policy_stats SELECT'),
                ('function ratelimit.top_offenders(integer) EXECUTE'),
                ('function ratelimit.metrics() EXECUTE'),
                ('function ratelimit.memory_stats() EXECUTE'),
                ('view ratelimit.memory_stats SELECT'),
                ('function ratelimit.memory_stats_by_database() EXECUTE'),
                ('function check_rate_limit_for_user(uuid,text,integer,integer) EXECUTE'),
                ('function cleanup_rpc_rate_limits(interval) EXECUTE'),
                ('function increment_rate_limit(uuid,text,integer,integer,integer) EXECUTE'),
                ('function sliding_window.check_rate_limit(text,integer,integer,integer) EXECUTE'),
                ('function sliding_window.check_rate_limit_tiers(text,text,integer,integer,integer,integer,integer,integer) EXECUTE'),
                ('function cleanup_expired_rate_limits() EXECUTE'),
                ('function sliding_window.cleanup_old_rate_limit_buckets() EXECUTE')) AS v(item)$$,
              'install: service_role reaches exactly its list');

SET LOCAL ROLE anon;
SELECT throws_ok('TRUNCATE ratelimit.key_state', '42501', NULL,
                 'install: anon cannot truncate the state table');
SELECT throws_ok($$SELECT ratelimit.reset('victim')$$, '42501', NULL, 'install: anon cannot reset a key');
SELECT throws_ok($$SELECT ratelimit.block('victim', '1 day')$$, '42501', NULL,
                 'install: anon cannot block a key');
RESET ROLE;

-- The same after an update from 0.5.0 made under the same default privileges, and the drop-ins
-- it leaves in place taken over by their apps' extensions (the per-RPC and endpoint limits'; the
-- sliding window's extension goes into its own schema). An application role's own grant
-- survives it. The SQL edition has no version before 0.7.0 to update from.
\if :c_edition
DROP EXTENSION ratelimit_rpc_limits, ratelimit_endpoint_limits, ratelimit_sliding_window_limits, ratelimit;
CREATE EXTENSION ratelimit VERSION '0.5.0';
GRANT USAGE ON SCHEMA ratelimit TO anon, app_user;
GRANT EXECUTE ON FUNCTION ratelimit.consume(text, integer, interval, integer, text, text, integer)
    TO app_user;
ALTER EXTENSION ratelimit UPDATE;
CREATE EXTENSION ratelimit_rpc_limits;
CREATE EXTENSION ratelimit_endpoint_limits;
CREATE EXTENSION ratelimit_sliding_window_limits SCHEMA sliding_window;

SELECT ok(has_schema_privilege('anon', 'ratelimit', 'USAGE')
          AND NOT has_schema_privilege('anon', 'ratelimit', 'CREATE'),
          'update: anon keeps the schema''s USAGE (for pre_request), not CREATE');

SELECT set_eq('SELECT item FROM pg_temp.reached(''public'')', 'SELECT item FROM for_everyone',
              'update: PUBLIC reaches only the functions and types for everyone');
SELECT set_eq('SELECT item FROM pg_temp.reached(''anon'')',
              $$SELECT item FROM for_everyone UNION ALL SELECT 'schema ratelimit USAGE'$$,
              'update: anon reaches only those, and the schema');
SELECT set_eq('SELECT item FROM pg_temp.reached(''authenticated'')',
              $$SELECT item FROM for_everyone UNION ALL SELECT 'schema ratelimit USAGE'
                UNION ALL SELECT 'function increment_rate_limit(uuid,text,integer,integer,integer) EXECUTE'$$,
              'update: authenticated reaches only those, the schema and increment_rate_limit');
SELECT ok(has_function_privilege('app_user', 'ratelimit.consume(text, integer, interval, integer, text, text, integer, text, interval)', 'EXECUTE')
          AND has_schema_privilege('app_user', 'ratelimit', 'USAGE')
          AND NOT has_schema_privilege('app_user', 'ratelimit', 'CREATE'),
          'update: an application role keeps the grants it was given, not CREATE on the schema');

SET LOCAL ROLE anon;
SELECT throws_ok('TRUNCATE ratelimit.key_state', '42501', NULL,
                 'update: anon cannot truncate the state table');
RESET ROLE;
\else
SELECT skip('the SQL edition has no 0.5.0 to update from', 6);
\endif

SELECT * FROM finish();
ROLLBACK;
