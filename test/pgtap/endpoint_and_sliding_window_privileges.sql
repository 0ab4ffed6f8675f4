-- Who may do what with the endpoint limits (increment_rate_limit) and the sliding-window limits
-- (check_rate_limit(p_key, ...), check_rate_limit_tiers), on Supabase-shaped roles. The endpoint
-- limits are in public; the sliding window's in a schema of their own, as in a database that has
-- the per-RPC limits too.
BEGIN;
CREATE EXTENSION IF NOT EXISTS pgtap;

\ir supabase_roles.psql

\ir install_edition.psql
\set drop_in endpoint_limits
\ir install_drop_in.psql
\set drop_in sliding_window_limits
\set drop_in_schema sliding_window
\ir install_drop_in.psql
-- Every role reaches the schema, as it does public: what refuses a call below is the function's
-- own privilege.
GRANT USAGE ON SCHEMA sliding_window TO PUBLIC;

SELECT plan(26);

-- Every SECURITY DEFINER function of ratelimit and of the drop-ins (each of theirs says so in
-- its comment) pins its search_path.
SELECT is((SELECT array_agg(p.oid::regprocedure::text ORDER BY 1) FROM pg_proc p
           WHERE (p.pronamespace = 'ratelimit'::regnamespace
                  OR obj_description(p.oid, 'pg_proc') LIKE 'ratelimit: %')
             AND p.prosecdef
             AND p.proconfig IS DISTINCT FROM ARRAY['search_path=pg_catalog, pg_temp']),
          NULL, 'no SECURITY DEFINER function without a pinned search_path');

-- The counter tables: row level security, nothing for API or app roles.
SELECT ok((SELECT bool_and(relrowsecurity) FROM pg_class
           WHERE oid IN ('public.rate_limits'::regclass, 'sliding_window.rate_limit_buckets'::regclass)),
          'rate_limits and rate_limit_buckets have row level security enabled');
SELECT table_privs_are('public', 'rate_limits', 'anon', ARRAY[]::text[]);
SELECT table_privs_are('public', 'rate_limits', 'authenticated', ARRAY[]::text[]);
SELECT table_privs_are('sliding_window', 'rate_limit_buckets', 'anon', ARRAY[]::text[]);
SELECT table_privs_are('sliding_window', 'rate_limit_buckets', 'authenticated', ARRAY[]::text[]);
SELECT table_privs_are('sliding_window', 'rate_limit_buckets', 'app_user', ARRAY[]::text[]);

-- increment_rate_limit: an authenticated user spends its own quota, not another user's.
SET LOCAL request.jwt.claims = '{"sub":"a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11","role":"authenticated"}';
SET LOCAL ROLE authenticated;
SELECT is((increment_rate_limit('a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11', 'posts', 5, 3600) ->> 'allowed'),
          'true', 'authenticated may increment its own counter');
SELECT throws_ok($$SELECT increment_rate_limit('b1ffcd00-0000-4000-8000-000000000002', 'posts', 5, 3600)$$,
                 '42501', NULL, 'authenticated may not spend another user''s quota');
SELECT throws_ok($$SELECT * FROM public.rate_limits$$, '42501', NULL, 'authenticated cannot read rate_limits');
SELECT throws_ok($$SELECT * FROM sliding_window.check_rate_limit('global', 1000, 60, 1)$$, '42501', NULL,
                 'authenticated cannot spend a sliding-window key');
SELECT throws_ok($$SELECT * FROM sliding_window.check_rate_limit_tiers('1.2.3.4', 'a@b.c')$$, '42501', NULL,
                 'authenticated cannot spend sliding-window tiers');
SELECT throws_ok($$SELECT cleanup_expired_rate_limits()$$, '42501', NULL, 'authenticated cannot clean up');
RESET ROLE;

SET LOCAL request.jwt.claims = '{"role":"anon"}';
SET LOCAL ROLE anon;
SELECT throws_ok($$SELECT increment_rate_limit('a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11', 'posts', 5, 3600)$$,
                 '42501', NULL, 'anon cannot name a user');
SELECT throws_ok($$SELECT * FROM sliding_window.check_rate_limit('global', 1000, 60, 1)$$, '42501', NULL,
                 'anon cannot spend a sliding-window key');
SELECT throws_ok($$SELECT * FROM sliding_window.rate_limit_buckets$$, '42501', NULL, 'anon cannot read buckets');
SELECT throws_ok($$SELECT sliding_window.cleanup_old_rate_limit_buckets()$$, '42501', NULL, 'anon cannot clean up');
RESET ROLE;

-- service_role: the trusted server side.
RESET request.jwt.claims;
SET LOCAL ROLE service_role;
SELECT is((increment_rate_limit('b1ffcd00-0000-4000-8000-000000000002', 'tasks', 50, 3600, 20) ->> 'current'),
          '20', 'service_role may increment any user''s counter');
SELECT is((SELECT allowed FROM sliding_window.check_rate_limit(p_key => 'global', p_limit => 1000, p_window_seconds => 60)),
          true, 'service_role may check a sliding-window key');
SELECT is((SELECT allowed FROM sliding_window.check_rate_limit_tiers('1.2.3.4', 'a@b.c')), true,
          'service_role may check sliding-window tiers');
SELECT lives_ok($$SELECT cleanup_expired_rate_limits(), sliding_window.cleanup_old_rate_limit_buckets()$$,
                'service_role may run the cleanups');
RESET ROLE;

-- A plain app role has nothing until it is granted.
SET LOCAL ROLE app_user;
SELECT throws_ok($$SELECT increment_rate_limit('b1ffcd00-0000-4000-8000-000000000002', 'tasks', 50, 3600)$$,
                 '42501', NULL, 'an ungranted app role cannot increment');
SELECT throws_ok($$SELECT * FROM ratelimit.schedule_cleanup()$$, '42501', NULL,
                 'an ungranted app role cannot schedule jobs');
RESET ROLE;
GRANT EXECUTE ON FUNCTION increment_rate_limit(uuid, text, integer, integer, integer) TO app_user;
SET LOCAL ROLE app_user;
SELECT is((increment_rate_limit('b1ffcd00-0000-4000-8000-000000000002', 'tasks', 50, 3600) ->> 'current'),
          '21', 'once granted, it can');
RESET ROLE;

-- Keys are data: a key that looks like SQL is just a key.
SET LOCAL ROLE service_role;
SELECT is((SELECT current_count FROM sliding_window.check_rate_limit($$k'); DROP TABLE rate_limit_buckets; --$$, 5, 60, 1)),
          1, 'a key with quotes and semicolons is counted like any other');
RESET ROLE;
SELECT has_table('sliding_window', 'rate_limit_buckets', 'the bucket table is still there');

SELECT * FROM finish();
ROLLBACK;
