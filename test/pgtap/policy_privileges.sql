-- Who may do what with policies, on Supabase-shaped roles: service_role decides by policy and
-- reads the counters; no API or app role reads or edits the policy tables, calls the internal
-- functions, or reads the denial log; search_path tricks do not reach the policy functions.
BEGIN;
CREATE EXTENSION IF NOT EXISTS pgtap;

\ir supabase_roles.psql

\ir install_edition.psql
SELECT ratelimit.load_preset('game-backend'), ratelimit.load_preset('social-activity');

SELECT plan(25);

SELECT ok((SELECT bool_and(relrowsecurity) FROM pg_class
           WHERE oid IN ('ratelimit.policies'::regclass, 'ratelimit.tiers'::regclass,
                         'ratelimit.key_overrides'::regclass, 'ratelimit.access_list'::regclass,
                         'ratelimit.denial_log'::regclass)),
          'the policy tables have row level security enabled');
SELECT table_privs_are('ratelimit', t, r, ARRAY[]::text[])
  FROM unnest(ARRAY['policies', 'access_list', 'denial_log']) t,
       unnest(ARRAY['anon', 'authenticated', 'service_role', 'app_user']) r;

SELECT ok(has_function_privilege('service_role', 'ratelimit.check(text, text, integer, text, inet, uuid)', 'EXECUTE')
          AND has_function_privilege('service_role', 'ratelimit.check_all(text[], text[], integer, text, inet, uuid)', 'EXECUTE')
          AND has_function_privilege('service_role', 'ratelimit.check_http(text[], text[], integer, text, inet, uuid, text, text)', 'EXECUTE')
          AND has_function_privilege('service_role', 'ratelimit.top_offenders(integer)', 'EXECUTE'),
          'service_role may decide by policy and read the offenders');
SELECT ok(NOT has_function_privilege('anon', 'ratelimit.check(text, text, integer, text, inet, uuid)', 'EXECUTE')
          AND NOT has_function_privilege('authenticated', 'ratelimit.check_all(text[], text[], integer, text, inet, uuid)', 'EXECUTE')
          AND NOT has_function_privilege('app_user', 'ratelimit.check_http(text[], text[], integer, text, inet, uuid, text, text)', 'EXECUTE'),
          'API and app roles may not (grant EXECUTE to let them)');
SELECT ok(NOT has_function_privilege('service_role', 'ratelimit.decide_policies(text[], text[], integer, text, inet, uuid, text, text)', 'EXECUTE')
          AND NOT has_function_privilege('service_role', 'ratelimit.record_outcomes(text[], text[], text[])', 'EXECUTE')
          AND NOT has_function_privilege('service_role', 'ratelimit.reset_policy_stats()', 'EXECUTE'),
          'nobody but administrators calls the internals or resets the counters');

SET LOCAL ROLE service_role;
SELECT is((ratelimit.check('activity.create_post', 'privileges-user')).allowed, true,
          'service_role decides by policy');
SELECT throws_ok($$SELECT * FROM ratelimit.policies$$, '42501', NULL, 'but cannot read the policies');
SELECT throws_ok($$UPDATE ratelimit.policies SET "limit" = 1000000 WHERE name = 'rpc.auth'$$, '42501', NULL,
                 'nor raise a limit');
SELECT throws_ok($$INSERT INTO ratelimit.access_list (action, ip) VALUES ('allow', '0.0.0.0/0')$$, '42501', NULL,
                 'nor allow-list itself');
RESET ROLE;
SET LOCAL ROLE authenticated;
SELECT throws_ok($$SELECT ratelimit.reset('activity.create_post:privileges-user')$$, '42501', NULL,
                 'an API role cannot reset a key');
SELECT throws_ok($$SELECT ratelimit.reset_policy_key('activity.create_post', 'privileges-user')$$, '42501', NULL,
                 'nor a policy''s key');
RESET ROLE;

-- A role that may create objects shadows names the policy functions use; the decisions and
-- the counters they write do not change.
CREATE SCHEMA attacker;
GRANT USAGE, CREATE ON SCHEMA attacker TO service_role;
SET LOCAL ROLE service_role;
CREATE FUNCTION attacker.sha256(bytea) RETURNS bytea LANGUAGE sql AS $$SELECT '\x00'::bytea$$;
CREATE FUNCTION attacker.format(text, VARIADIC text[]) RETURNS text LANGUAGE sql AS $$SELECT 'hijacked'$$;
CREATE TABLE attacker.policies (name text, "limit" integer);
SET LOCAL search_path = attacker, public, pg_catalog;
SELECT is(ratelimit.hash_subject('192.168.1.100'),
          '2a39f1eedcd9f986327b5e4da842426f4f05b8f16f0ef385639dbec0db70eaae',
          'hash_subject ignores a shadowing sha256()');
SELECT is((SELECT count(*)::int FROM generate_series(1, 12) WHERE (ratelimit.check('activity.create_post', 'hijack-user')).allowed),
          10, 'check keeps the real limit under a hijacked search_path');
RESET ROLE;
SELECT is((SELECT count(*) FROM ratelimit.key_state WHERE policy = 'activity.create_post' AND key = 'hijack-user'), 1::bigint,
          'and writes the key it should');

SELECT * FROM finish();
ROLLBACK;
