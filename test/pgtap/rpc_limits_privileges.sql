-- Who may do what with the game backend's per-RPC limits (check_rate_limit(p_rpc_name, ...),
-- check_rate_limit_for_user, rpc_rate_limits), on Supabase-shaped roles (supabase_roles.psql).
BEGIN;
CREATE EXTENSION IF NOT EXISTS pgtap;

\ir supabase_roles.psql

\ir install_edition.psql
\set drop_in rpc_limits
\ir install_drop_in.psql

SELECT plan(31);

SELECT has_function('public', 'check_rate_limit', ARRAY['text', 'integer', 'integer']);
SELECT function_returns('public', 'check_rate_limit', ARRAY['text', 'integer', 'integer'], 'boolean');
SELECT has_function('public', 'check_rate_limit_for_user', ARRAY['uuid', 'text', 'integer', 'integer']);
SELECT has_function('public', 'cleanup_rpc_rate_limits', ARRAY['interval']);

-- Every function that writes counters runs as the extension's owner with a pinned search_path.
SELECT is_definer('public', 'check_rate_limit', ARRAY['text', 'integer', 'integer']);
SELECT is_definer('public', 'check_rate_limit_for_user', ARRAY['uuid', 'text', 'integer', 'integer']);
SELECT is_definer('public', 'cleanup_rpc_rate_limits', ARRAY['interval']);
SELECT is(
    (SELECT count(*)::integer FROM pg_proc
     WHERE oid IN ('public.check_rate_limit(text, integer, integer)'::regprocedure,
                   'public.check_rate_limit_for_user(uuid, text, integer, integer)'::regprocedure,
                   'public.cleanup_rpc_rate_limits(interval)'::regprocedure)
       AND proconfig = ARRAY['search_path=pg_catalog, pg_temp']),
    3, 'all three pin search_path to pg_catalog, pg_temp');

-- The counter table: row level security on with no policy, no privileges for API roles.
SELECT ok((SELECT relrowsecurity FROM pg_class WHERE oid = 'public.rpc_rate_limits'::regclass),
          'rpc_rate_limits has row level security enabled');
SELECT is((SELECT count(*)::integer FROM pg_policy WHERE polrelid = 'public.rpc_rate_limits'::regclass),
          0, 'rpc_rate_limits has no policy');
SELECT table_privs_are('public', 'rpc_rate_limits', 'anon', ARRAY[]::text[]);
SELECT table_privs_are('public', 'rpc_rate_limits', 'authenticated', ARRAY[]::text[]);
SELECT table_privs_are('public', 'rpc_rate_limits', 'app_user', ARRAY[]::text[]);

-- authenticated: may check its own limit, may not touch the table or name another user.
SET LOCAL request.jwt.claims = '{"sub":"a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11","role":"authenticated"}';
SET LOCAL ROLE authenticated;
SELECT is(check_rate_limit(p_rpc_name => 'complete-game', p_max_calls => 2, p_window_minutes => 1), true, 'authenticated: first call allowed');
SELECT is(check_rate_limit(p_rpc_name => 'complete-game', p_max_calls => 2, p_window_minutes => 1), true, 'authenticated: second call allowed');
SELECT is(check_rate_limit(p_rpc_name => 'complete-game', p_max_calls => 2, p_window_minutes => 1), false, 'authenticated: third call denied');
SELECT throws_ok('SELECT * FROM public.rpc_rate_limits', '42501', NULL, 'authenticated cannot read counters');
SELECT throws_ok($$UPDATE public.rpc_rate_limits SET call_count = 0$$, '42501', NULL,
                 'authenticated cannot reset its own counter');
SELECT throws_ok($$DELETE FROM public.rpc_rate_limits$$, '42501', NULL, 'authenticated cannot delete counters');
SELECT throws_ok($$SELECT check_rate_limit_for_user('b1ffcd00-0000-4000-8000-000000000002', 'complete-game', 1, 1)$$,
                 '42501', NULL, 'authenticated cannot spend another user''s quota');
SELECT throws_ok($$SELECT cleanup_rpc_rate_limits()$$, '42501', NULL, 'authenticated cannot run cleanup');
RESET ROLE;

-- anon: no identity, allowed without being counted; no table access either.
SET LOCAL request.jwt.claims = '{"role":"anon"}';
SET LOCAL ROLE anon;
SELECT is(check_rate_limit(p_rpc_name => 'login-with-username-pin', p_max_calls => 1, p_window_minutes => 15), true, 'anon: allowed (no identity)');
SELECT throws_ok('SELECT * FROM public.rpc_rate_limits', '42501', NULL, 'anon cannot read counters');
SELECT throws_ok($$INSERT INTO public.rpc_rate_limits (user_id, rpc_name) VALUES (gen_random_uuid(), 'x')$$,
                 '42501', NULL, 'anon cannot write counters');
RESET ROLE;

-- service_role: trusted server code may name the user and run cleanup.
SET LOCAL ROLE service_role;
SELECT is(check_rate_limit_for_user('b1ffcd00-0000-4000-8000-000000000002', 'send-dm', 5, 1), true,
          'service_role may check an explicit user');
SELECT lives_ok($$SELECT cleanup_rpc_rate_limits()$$, 'service_role may run cleanup');
RESET ROLE;

-- A plain PostgreSQL app role gets check_rate_limit through PUBLIC and nothing else.
SET LOCAL ROLE app_user;
SELECT lives_ok($$SELECT check_rate_limit(p_rpc_name => 'x', p_max_calls => 1, p_window_minutes => 1)$$, 'app role may call check_rate_limit');
SELECT throws_ok('SELECT * FROM public.rpc_rate_limits', '42501', NULL, 'app role cannot read counters');
RESET ROLE;

-- search_path hijack: a look-alike table and function earlier on the caller's path change nothing.
CREATE SCHEMA hijack;
CREATE TABLE hijack.rpc_rate_limits (LIKE public.rpc_rate_limits INCLUDING ALL);
CREATE FUNCTION hijack.gen_random_uuid() RETURNS uuid LANGUAGE sql AS $$SELECT '00000000-0000-0000-0000-000000000000'::uuid$$;
SET LOCAL search_path = hijack, public;
SET LOCAL request.jwt.claims = '{"sub":"c2000000-0000-4000-8000-000000000003"}';
SELECT is(check_rate_limit(p_rpc_name => 'hijack-test', p_max_calls => 5, p_window_minutes => 1), true, 'a call with a hijacked search_path is allowed');
RESET search_path;
SELECT is((SELECT count(*)::integer FROM hijack.rpc_rate_limits), 0, 'the look-alike table was not written');
SELECT is((SELECT call_count FROM public.rpc_rate_limits WHERE rpc_name = 'hijack-test'), 1,
          'the call was counted in the extension''s table');

SELECT * FROM finish();
ROLLBACK;
