-- The drop-ins PostgREST exposes to the users they limit: the server's policy decides, not the
-- caller's arguments; a window cannot be restarted early by passing another length; a JWT role
-- without a sub acts on no user id. Calls are made as PostgREST makes them: SET LOCAL ROLE and
-- request.jwt.claims. The clock and the settings are superuser-only, so they are changed with
-- the role reset.
BEGIN;
CREATE EXTENSION IF NOT EXISTS pgtap;

\ir supabase_roles.psql

\ir install_edition.psql
\set drop_in rpc_limits
\ir install_drop_in.psql
\set drop_in endpoint_limits
\ir install_drop_in.psql

SELECT plan(64);

-- The settings and their defaults; only superusers may change them. The SQL edition has no
-- library to define them: a name it reads is unset until a session sets it, to any value, as any
-- role (docs/sql-edition.md, "What is not in it").
\if :c_edition
SELECT is(current_setting('ratelimit.dropin_caller_limits'), 'ignore', 'dropin_caller_limits defaults to ignore');
SELECT is(current_setting('ratelimit.dropin_require_policy'), 'off', 'dropin_require_policy defaults to off');
SELECT is(current_setting('ratelimit.jwt_roles'), 'anon,authenticated', 'jwt_roles defaults to anon,authenticated');
SELECT throws_ok($$SET LOCAL ratelimit.dropin_caller_limits = 'sometimes'$$, '22023', NULL,
                 'dropin_caller_limits takes ignore or must_match only');
SELECT lives_ok($$SET LOCAL ratelimit.dropin_caller_limits = 'must_match'$$, 'dropin_caller_limits takes must_match');
SELECT throws_ok($$SET LOCAL ratelimit.dropin_require_policy = 'maybe'$$, '22023', NULL,
                 'dropin_require_policy is a boolean');
SELECT throws_ok($$SET LOCAL ratelimit.jwt_roles = '"anon'$$, '22023', NULL,
                 'jwt_roles must be a list of role names');
SELECT lives_ok($$SET LOCAL ratelimit.jwt_roles = 'anon, authenticated, app_user'$$, 'jwt_roles takes a list');
RESET ratelimit.dropin_caller_limits;
RESET ratelimit.jwt_roles;
SET LOCAL ROLE authenticated;
SELECT throws_ok($$SET LOCAL ratelimit.dropin_caller_limits = 'ignore'$$, '42501', NULL,
                 'authenticated cannot change dropin_caller_limits');
SELECT throws_ok($$SET LOCAL ratelimit.dropin_require_policy = off$$, '42501', NULL,
                 'authenticated cannot change dropin_require_policy');
SELECT throws_ok($$SET LOCAL ratelimit.jwt_roles = ''$$, '42501', NULL,
                 'authenticated cannot leave the JWT roles');
RESET ROLE;
\else
SELECT skip('the SQL edition defines no settings: their defaults, checks and superuser-only changes are the C edition''s', 11);
\endif

-- The server's limits: 3 redemptions an hour, 3 exports an hour, 2 spins per 90 seconds.
INSERT INTO ratelimit.policies (name, algorithm, "limit", period) VALUES
    ('rpc.redeem-code', 'rolling_window', 3, '1 hour'),
    ('rpc.spin', 'rolling_window', 2, '90 seconds'),
    ('endpoint.export', 'fixed_window', 3, '1 hour');
SELECT lives_ok($$SELECT ratelimit.load_preset('hourly-endpoints')$$, 'the hourly endpoint preset loads');

------------------------------------------------------------------------------------------------
-- Attack 1: after 3 of 3 calls in an hour, ask for 1000 calls a minute.
------------------------------------------------------------------------------------------------
SET LOCAL ratelimit.test_clock = '2026-03-01 10:00:00+00';
SET LOCAL ROLE authenticated;
SELECT set_config('request.jwt.claims', '{"sub":"a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11","role":"authenticated"}', true);
SELECT is(ARRAY(SELECT check_rate_limit(p_rpc_name => 'redeem-code', p_max_calls => 3, p_window_minutes => 60)
                FROM generate_series(1, 3)),
          ARRAY[true, true, true], 'authenticated: 3 of 3 redemptions allowed');
SELECT is(check_rate_limit(p_rpc_name => 'redeem-code', p_max_calls => 1000, p_window_minutes => 1), false,
          'the policy''s 3 per hour decides, not the caller''s 1000 per minute');
RESET ROLE;
SET LOCAL ratelimit.test_clock = '2026-03-01 10:02:00+00';
SET LOCAL ROLE authenticated;
SELECT is(check_rate_limit(p_rpc_name => 'redeem-code', p_max_calls => 1000, p_window_minutes => 1), false,
          'two minutes later the one-minute window the caller asks for does not restart the hour');
RESET ROLE;
SELECT results_eq(
    $$SELECT call_count, window_start, window_expires_at FROM public.rpc_rate_limits WHERE rpc_name = 'redeem-code'$$,
    $$VALUES (5, '2026-03-01 10:00:00+00'::timestamptz, '2026-03-01 11:00:00+00'::timestamptz)$$,
    'the row keeps the window opened at 10:00 for the policy''s hour');
SET LOCAL ratelimit.test_clock = '2026-03-01 11:00:00+00';
SET LOCAL ROLE authenticated;
SELECT is(check_rate_limit(p_rpc_name => 'redeem-code', p_max_calls => 1000, p_window_minutes => 1), false,
          'at the end of the hour the window still holds');
RESET ROLE;
SET LOCAL ratelimit.test_clock = '2026-03-01 11:00:00.000001+00';
SET LOCAL ROLE authenticated;
SELECT is(check_rate_limit(p_rpc_name => 'redeem-code', p_max_calls => 1000, p_window_minutes => 1), true,
          'once the hour has passed a new window opens');
RESET ROLE;
SELECT results_eq(
    $$SELECT call_count, window_expires_at - window_start FROM public.rpc_rate_limits WHERE rpc_name = 'redeem-code'$$,
    $$VALUES (1, interval '1 hour')$$, 'the new window is the policy''s hour');

-- A period that is not a whole number of minutes is rounded up: 90 seconds count as 2 minutes.
SET LOCAL ROLE authenticated;
SELECT is(check_rate_limit(p_rpc_name => 'spin', p_max_calls => 50, p_window_minutes => 1), true, 'first spin allowed');
RESET ROLE;
SELECT is((SELECT window_expires_at - window_start FROM public.rpc_rate_limits WHERE rpc_name = 'spin'),
          interval '2 minutes', 'a 90-second policy period is rounded up to 2 minutes');

-- Without a policy the caller's window is used, but a window already open is not restarted by a
-- shorter one.
SET LOCAL ratelimit.test_clock = '2026-03-01 12:00:00+00';
SET LOCAL ROLE authenticated;
SELECT is(ARRAY(SELECT check_rate_limit(p_rpc_name => 'no-policy', p_max_calls => 2, p_window_minutes => 60)
                FROM generate_series(1, 3)),
          ARRAY[true, true, false], 'no policy: 2 per hour as asked');
RESET ROLE;
SET LOCAL ratelimit.test_clock = '2026-03-01 12:05:00+00';
SET LOCAL ROLE authenticated;
SELECT is(check_rate_limit(p_rpc_name => 'no-policy', p_max_calls => 2, p_window_minutes => 1), false,
          'no policy: a one-minute window does not restart the hour opened at 12:00');
RESET ROLE;
SELECT results_eq(
    $$SELECT window_start, window_expires_at FROM public.rpc_rate_limits WHERE rpc_name = 'no-policy'$$,
    $$VALUES ('2026-03-01 12:00:00+00'::timestamptz, '2026-03-01 13:00:00+00'::timestamptz)$$,
    'no policy: the window in force is kept');

-- must_match: a call whose values differ from the policy's is refused, and nothing is charged.
SET LOCAL ratelimit.dropin_caller_limits = 'must_match';
SET LOCAL ROLE authenticated;
SELECT throws_ok($$SELECT check_rate_limit(p_rpc_name => 'redeem-code', p_max_calls => 1000, p_window_minutes => 1)$$,
                 '42501', 'p_max_calls must be 3, the limit of the policy rpc.redeem-code (ratelimit.dropin_caller_limits is must_match), got 1000',
                 'must_match: a different p_max_calls is refused');
SELECT throws_ok($$SELECT check_rate_limit(p_rpc_name => 'redeem-code', p_max_calls => 3, p_window_minutes => 1)$$,
                 '42501', 'p_window_minutes must be 60, the period of the policy rpc.redeem-code (ratelimit.dropin_caller_limits is must_match), got 1',
                 'must_match: a different p_window_minutes is refused');
RESET ROLE;
SELECT is((SELECT call_count FROM public.rpc_rate_limits WHERE rpc_name = 'redeem-code'), 1,
          'must_match: the refused calls were not counted');
SET LOCAL ROLE authenticated;
SELECT is(check_rate_limit(p_rpc_name => 'redeem-code', p_max_calls => 3, p_window_minutes => 60), true,
          'must_match: the policy''s own values pass');
SELECT is(check_rate_limit(p_rpc_name => 'spin', p_max_calls => 2, p_window_minutes => 2), true,
          'must_match: the rounded-up period matches');
SELECT is(check_rate_limit(p_rpc_name => 'no-policy', p_max_calls => 7, p_window_minutes => 3), true,
          'must_match: no policy, nothing to match (the caller''s values apply)');
RESET ROLE;
RESET ratelimit.dropin_caller_limits;

------------------------------------------------------------------------------------------------
-- The endpoint limits: the policy decides, and a changed p_window_seconds opens no fresh window.
------------------------------------------------------------------------------------------------
SET LOCAL ratelimit.test_clock = '2026-03-01 10:00:00+00';
SET LOCAL ROLE authenticated;
SELECT set_config('request.jwt.claims', '{"sub":"a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11","role":"authenticated"}', true);
SELECT is(ARRAY(SELECT (increment_rate_limit('a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11', 'export', 1000, 1) ->> 'allowed')::boolean
                FROM generate_series(1, 4)),
          ARRAY[true, true, true, false], 'endpoint: the policy''s 3 per hour decides, not 1000 per second');
SELECT is(increment_rate_limit('a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11', 'export', 1000, 1),
          '{"allowed": false, "current": 5, "limit": 3, "retryAfter": 3600}'::jsonb,
          'endpoint: the answer shows the policy''s limit and the hour''s end');
SELECT is(increment_rate_limit('a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11', 'ai-inference', 10, 3600) ->> 'limit',
          '10', 'endpoint: the preset''s endpoint.ai-inference applies');
RESET ROLE;
SET LOCAL ratelimit.test_clock = '2026-03-01 10:20:00+00';
SET LOCAL ROLE authenticated;
SELECT is(ARRAY(SELECT (increment_rate_limit('a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11', 'open-endpoint', 2, 3600) ->> 'allowed')::boolean
                FROM generate_series(1, 2)),
          ARRAY[true, true], 'no policy: 2 per hour as asked');
SELECT is(increment_rate_limit('a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11', 'open-endpoint', 2, 10),
          '{"allowed": false, "current": 3, "limit": 2, "retryAfter": 2400}'::jsonb,
          'no policy: a 10-second window is counted in the open hour, not in a fresh window');
SELECT is(increment_rate_limit('a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11', 'open-endpoint', 2, 86400) ->> 'current',
          '4', 'no policy: a day-long window is counted in the open hour too');
RESET ROLE;
SELECT results_eq(
    $$SELECT counter, window_start, expires_at FROM public.rate_limits WHERE endpoint = 'open-endpoint'$$,
    $$VALUES (4, '2026-03-01 10:00:00+00'::timestamptz, '2026-03-01 11:00:00+00'::timestamptz)$$,
    'no policy: one row, the hour in force');
SET LOCAL ratelimit.test_clock = '2026-03-01 11:00:05+00';
SET LOCAL ROLE authenticated;
SELECT is(increment_rate_limit('a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11', 'open-endpoint', 2, 10) ->> 'current',
          '1', 'no policy: once the hour has ended the caller''s window opens');
RESET ROLE;
SELECT is((SELECT expires_at - window_start FROM public.rate_limits
           WHERE endpoint = 'open-endpoint' AND window_start = '2026-03-01 11:00:00+00'),
          interval '10 seconds', 'no policy: the new window is aligned to 10 seconds');

-- must_match on the endpoint limits.
SET LOCAL ratelimit.dropin_caller_limits = 'must_match';
SET LOCAL ROLE authenticated;
SELECT throws_ok($$SELECT increment_rate_limit('a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11', 'export', 3, 60)$$,
                 '42501', 'p_window_seconds must be 3600, the period of the policy endpoint.export (ratelimit.dropin_caller_limits is must_match), got 60',
                 'must_match: a different p_window_seconds is refused');
RESET ROLE;
RESET ratelimit.dropin_caller_limits;

------------------------------------------------------------------------------------------------
-- Attack 2: a JWT role without a sub names a user.
------------------------------------------------------------------------------------------------
CREATE TEMP TABLE rows_before AS
    SELECT user_id, endpoint, counter, window_start FROM public.rate_limits
    UNION ALL SELECT user_id, rpc_name, call_count, window_start FROM public.rpc_rate_limits;
-- Granted here so that the rule itself, not a missing privilege, is what refuses.
GRANT EXECUTE ON FUNCTION public.check_rate_limit_for_user(uuid, text, integer, integer) TO authenticated, app_user;
GRANT EXECUTE ON FUNCTION public.increment_rate_limit(uuid, text, integer, integer, integer) TO anon, app_user;
SET LOCAL ROLE authenticated;
SELECT set_config('request.jwt.claims', '{"role":"authenticated"}', true);
SELECT throws_ok($$SELECT increment_rate_limit('b1ffcd00-0000-4000-8000-000000000002', 'export', 3, 3600)$$,
                 '42501', 'p_user_id needs a JWT sub claim: a request without one cannot act on a user''s id',
                 'authenticated without sub: increment_rate_limit refused');
SELECT throws_ok($$SELECT increment_rate_limit('b1ffcd00-0000-4000-8000-000000000002', 'open-endpoint', 2, 3600)$$,
                 '42501', 'p_user_id needs a JWT sub claim: a request without one cannot act on a user''s id',
                 'authenticated without sub: refused without a policy too');
SELECT throws_ok($$SELECT check_rate_limit_for_user('b1ffcd00-0000-4000-8000-000000000002', 'redeem-code', 3, 60)$$,
                 '42501', 'p_user_id needs a JWT sub claim: a request without one cannot act on a user''s id',
                 'authenticated without sub: check_rate_limit_for_user refused, were it granted');
SELECT set_config('request.jwt.claims', '{"sub":null,"role":"authenticated"}', true);
SELECT throws_ok($$SELECT increment_rate_limit('b1ffcd00-0000-4000-8000-000000000002', 'export', 3, 3600)$$,
                 '42501', NULL, 'authenticated with a null sub: refused');
SELECT set_config('request.jwt.claims', '', true);
SELECT throws_ok($$SELECT increment_rate_limit('b1ffcd00-0000-4000-8000-000000000002', 'export', 3, 3600)$$,
                 '42501', NULL, 'authenticated without any claims: refused');
SELECT set_config('request.jwt.claims', '{"sub":"a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11","role":"authenticated"}', true);
SELECT throws_ok($$SELECT check_rate_limit_for_user('b1ffcd00-0000-4000-8000-000000000002', 'redeem-code', 3, 60)$$,
                 '42501', 'p_user_id must be the caller''s own id (the JWT sub)',
                 'authenticated with a sub: check_rate_limit_for_user names only its own id');
RESET ROLE;
SET LOCAL ROLE anon;
SELECT set_config('request.jwt.claims', '{"role":"anon"}', true);
SELECT throws_ok($$SELECT increment_rate_limit('b1ffcd00-0000-4000-8000-000000000002', 'export', 3, 3600)$$,
                 '42501', 'p_user_id needs a JWT sub claim: a request without one cannot act on a user''s id',
                 'anon: increment_rate_limit refused, were it granted');
RESET ROLE;
-- A role added to ratelimit.jwt_roles is held to the same rule; the others are trusted.
SELECT set_config('request.jwt.claims', '', true);
SET LOCAL ratelimit.jwt_roles = 'anon, authenticated, app_user';
SET LOCAL ROLE app_user;
SELECT throws_ok($$SELECT increment_rate_limit('b1ffcd00-0000-4000-8000-000000000002', 'export', 3, 3600)$$,
                 '42501', 'p_user_id needs a JWT sub claim: a request without one cannot act on a user''s id',
                 'a role listed in jwt_roles without sub: refused');
RESET ROLE;
SELECT set_eq($$SELECT user_id, endpoint, counter, window_start FROM public.rate_limits
                UNION ALL SELECT user_id, rpc_name, call_count, window_start FROM public.rpc_rate_limits$$,
              $$SELECT * FROM rows_before$$, 'the refused calls wrote nothing');
RESET ratelimit.jwt_roles;
SET LOCAL ROLE app_user;
SELECT is(increment_rate_limit('b1ffcd00-0000-4000-8000-000000000002', 'export', 3, 3600) ->> 'allowed',
          'true', 'a role not in jwt_roles names the user (trusted server code)');
RESET ROLE;

------------------------------------------------------------------------------------------------
-- dropin_require_policy: caller-chosen limits only for service_role, superusers and the owner.
------------------------------------------------------------------------------------------------
SET LOCAL ratelimit.dropin_require_policy = on;
SET LOCAL ROLE authenticated;
SELECT set_config('request.jwt.claims', '{"sub":"a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11","role":"authenticated"}', true);
SELECT throws_ok($$SELECT check_rate_limit(p_rpc_name => 'unlisted', p_max_calls => 1000, p_window_minutes => 1)$$,
                 '42501', 'p_rpc_name has no policy rpc.unlisted: ratelimit.dropin_require_policy refuses limits chosen by the caller',
                 'require_policy: authenticated cannot choose its own limits');
SELECT throws_ok($$SELECT increment_rate_limit('a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11', 'unlisted', 1000, 1)$$,
                 '42501', 'p_endpoint has no policy endpoint.unlisted: ratelimit.dropin_require_policy refuses limits chosen by the caller',
                 'require_policy: nor on the endpoint limits');
SELECT lives_ok($$SELECT check_rate_limit(p_rpc_name => 'spin', p_max_calls => 2, p_window_minutes => 2)$$,
                'require_policy: a name with a policy still works');
RESET ROLE;
SET LOCAL ROLE anon;
SELECT set_config('request.jwt.claims', '{"role":"anon"}', true);
SELECT throws_ok($$SELECT check_rate_limit(p_rpc_name => 'unlisted', p_max_calls => 1000, p_window_minutes => 1)$$,
                 '42501', NULL, 'require_policy: anon is refused too');
RESET ROLE;
SELECT is((SELECT count(*)::integer FROM public.rpc_rate_limits WHERE rpc_name = 'unlisted')
          + (SELECT count(*)::integer FROM public.rate_limits WHERE endpoint = 'unlisted'), 0,
          'require_policy: the refused calls wrote nothing');
SELECT set_config('request.jwt.claims', '', true);
SET LOCAL ROLE service_role;
SELECT is(check_rate_limit_for_user('b1ffcd00-0000-4000-8000-000000000002', 'unlisted', 5, 1), true,
          'require_policy: service_role still passes its own limits');
SELECT is(increment_rate_limit('b1ffcd00-0000-4000-8000-000000000002', 'unlisted', 5, 60) ->> 'limit', '5',
          'require_policy: service_role on the endpoint limits too');
RESET ROLE;
SELECT is(check_rate_limit_for_user('b1ffcd00-0000-4000-8000-000000000002', 'unlisted-2', 5, 1), true,
          'require_policy: a superuser still passes its own limits');
SET LOCAL ROLE app_user;
SELECT throws_ok($$SELECT check_rate_limit_for_user('b1ffcd00-0000-4000-8000-000000000002', 'unlisted', 5, 1)$$,
                 '42501', NULL, 'require_policy: any other role is refused');
RESET ROLE;

-- A drop-in ratelimit 0.6.0 left in place is known by its comment and its owner. A role that may
-- create tables in a schema can make one of a drop-in's tables there, comment and all; the
-- install still refuses it as the app's own (it must not take over rows the role wrote), and the
-- last install step leaves such a table of the moved-aside name alone.
CREATE ROLE drop_in_planter NOLOGIN;
CREATE SCHEMA planted;
GRANT USAGE, CREATE ON SCHEMA planted TO drop_in_planter;
SET LOCAL ROLE drop_in_planter;
CREATE TABLE planted.rpc_rate_limits (user_id uuid, rpc_name text, call_count integer, window_start timestamptz);
CREATE TABLE planted.rpc_rate_limits_0_6_0 (LIKE planted.rpc_rate_limits);
INSERT INTO planted.rpc_rate_limits VALUES ('b1ffcd00-0000-4000-8000-000000000009', 'redeem', 1000000, now());
INSERT INTO planted.rpc_rate_limits_0_6_0 SELECT * FROM planted.rpc_rate_limits;
COMMENT ON TABLE planted.rpc_rate_limits IS
    'ratelimit 0.6.0 drop-in, kept in place: CREATE EXTENSION ratelimit_rpc_limits makes it that extension''s, rows kept';
COMMENT ON TABLE planted.rpc_rate_limits_0_6_0 IS
    'ratelimit 0.6.0 drop-in, kept in place: CREATE EXTENSION ratelimit_rpc_limits makes it that extension''s, rows kept';
RESET ROLE;
SELECT is(ratelimit.left_by_ratelimit('planted.rpc_rate_limits'::regclass, 'pg_class', NULL), false,
          'a table with a leftover''s comment, owned by another role, is not a leftover');
SELECT throws_ok($$SELECT ratelimit.drop_in_install_begin('ratelimit_rpc_limits', 'planted', ARRAY['rpc_rate_limits'], ARRAY['check_rate_limit'])$$,
                 '42710', 'ratelimit_rpc_limits cannot be installed in schema planted: table planted.rpc_rate_limits (owned by drop_in_planter) already there',
                 'the install refuses it, as any table of the app''s');
SELECT lives_ok($$SELECT ratelimit.drop_in_install_end('planted', ARRAY['rpc_rate_limits'])$$,
                'the last install step passes over a planted table of the moved-aside name');
SELECT is((SELECT count(*) FROM planted.rpc_rate_limits_0_6_0), 1::bigint,
          'and leaves it and its rows where they were');
ALTER TABLE planted.rpc_rate_limits OWNER TO CURRENT_USER;
SELECT is(ratelimit.left_by_ratelimit('planted.rpc_rate_limits'::regclass, 'pg_class', 'ratelimit_rpc_limits'), true,
          'the same table owned by ratelimit''s owner is one');

SELECT * FROM finish();
ROLLBACK;
