-- declare_limiter: an app's own function, made over an algorithm or a policy, keeps the app's
-- name, arguments (positional and by name) and result shape (boolean, "is limited", a row with
-- the app's columns, jsonb with the app's keys); keyed by arguments, a hashed argument, the
-- JWT's sub (through a role switch, as PostgREST makes one) and the client address; SECURITY
-- DEFINER with a pinned search_path, granted only to the roles named; an app's function of the
-- same signature is taken over only when asked; declared again and dropped cleanly.
BEGIN;
CREATE EXTENSION IF NOT EXISTS pgtap;
\ir install_edition.psql

SELECT plan(44);

\ir supabase_roles.psql
GRANT USAGE ON SCHEMA public TO anon, authenticated;
SET ratelimit.test_clock = '2026-03-01 10:00:00+00';

-- calls(N, CALL): CALL (a query of one row) run N times, one statement each, as an app calls;
-- each answer as text.
CREATE FUNCTION pg_temp.calls(p_times integer, p_call text) RETURNS SETOF text LANGUAGE plpgsql AS $$
DECLARE
    answer text;
BEGIN
    FOR i IN 1 .. p_times LOOP
        EXECUTE 'SELECT (' || p_call || ')::text' INTO answer;
        RETURN NEXT answer;
    END LOOP;
END
$$;

-- ---- arguments as the key, a row with the app's columns, the caller's limit and window -------
SELECT is(ratelimit.declare_limiter('public.check_rate_limit',
              ARRAY['p_user_id uuid', 'p_action text', 'p_max integer DEFAULT 5',
                    'p_window_seconds integer DEFAULT 60'],
              p_returns => 'row',
              p_columns => ARRAY['allowed allowed', 'current_count used', 'reset_at reset_at'],
              p_key => ARRAY['arg:p_user_id', 'arg:p_action'],
              p_limit_argument => 'p_max', p_period_argument => 'p_window_seconds')::text,
          'check_rate_limit(uuid,text,integer,integer)', 'declare_limiter returns the function it made');
SELECT is(pg_get_function_arguments('public.check_rate_limit'::regproc),
          'p_user_id uuid, p_action text, p_max integer DEFAULT 5, p_window_seconds integer DEFAULT 60',
          'the app''s arguments, names, types and defaults');
SELECT is(pg_get_function_result('public.check_rate_limit'::regproc),
          'TABLE(allowed boolean, current_count integer, reset_at timestamp with time zone)',
          'the app''s result columns, in its order');
SELECT ok((SELECT prosecdef AND proconfig IS NULL
                  AND prosrc !~ '(^|[^.a-z_])(text|integer|interval|timestamptz)([^a-z_]|$)'
           FROM pg_proc WHERE oid = 'public.check_rate_limit'::regproc),
          'SECURITY DEFINER; every type in its body named with its schema, so no SET search_path is needed');
SELECT results_eq(
    $$SELECT pg_temp.calls(6, $c$SELECT (allowed, current_count) FROM public.check_rate_limit('5d0b9a34-7c1e-4f2a-9e6b-2c8d1f3a4b5c', 'post')$c$)$$,
    $$VALUES ('(t,1)'), ('(t,2)'), ('(t,3)'), ('(t,4)'), ('(t,5)'), ('(f,5)')$$,
    'called positionally with the defaults: 5 a minute, the sixth denied');
SELECT is((SELECT reset_at FROM public.check_rate_limit('5d0b9a34-7c1e-4f2a-9e6b-2c8d1f3a4b5c', 'post')),
          '2026-03-01 10:01:00+00'::timestamptz, 'reset_at: the window''s end');
SELECT results_eq(
    $$SELECT pg_temp.calls(3, $c$SELECT allowed FROM public.check_rate_limit(p_action => 'post', p_max => 7,
                                             p_user_id => '5d0b9a34-7c1e-4f2a-9e6b-2c8d1f3a4b5c')$c$)$$,
    $$VALUES ('true'), ('true'), ('false')$$,
    'called by name with the caller''s limit of 7: two more');
SELECT is((SELECT allowed FROM public.check_rate_limit('5d0b9a34-7c1e-4f2a-9e6b-2c8d1f3a4b5c', 'comment')),
          true, 'another action is another key');
SELECT ok(EXISTS (SELECT FROM ratelimit.key_state
                  WHERE key = 'public.check_rate_limit:5d0b9a34-7c1e-4f2a-9e6b-2c8d1f3a4b5c:post'),
          'the key: the function''s name, then the arguments, joined with :');
SELECT throws_ok($$SELECT * FROM public.check_rate_limit(NULL, 'post')$$, '22004',
                 'p_user_id must not be NULL: it is part of the key', 'a NULL key argument is refused, naming it');
SELECT throws_ok($$SELECT * FROM public.check_rate_limit('5d0b9a34-7c1e-4f2a-9e6b-2c8d1f3a4b5c', 'x', -1)$$,
                 '22023', 'p_max must be a whole number from 0 to 2147483647, not -1',
                 'a bad caller limit is refused, naming the argument');

-- ---- grants: the roles named only ------------------------------------------------------------
SELECT ok(has_function_privilege('authenticated', 'public.check_rate_limit(uuid,text,integer,integer)', 'EXECUTE'),
          'granted to authenticated (the default)');
SELECT ok(NOT has_function_privilege('anon', 'public.check_rate_limit(uuid,text,integer,integer)', 'EXECUTE'),
          'not to anon');
SELECT ok(NOT EXISTS (SELECT FROM pg_proc p, aclexplode(p.proacl) a
                      WHERE p.oid = 'public.check_rate_limit'::regproc AND a.grantee = 0),
          'not to PUBLIC');

-- ---- "is limited", keyed by a hashed argument, for anon --------------------------------------
SELECT lives_ok($$SELECT ratelimit.declare_limiter('is_rate_limited', ARRAY['p_email text'], 'limited',
                      p_key => ARRAY['hash:p_email'], p_limit => 3, p_period => '15 minutes',
                      p_roles => ARRAY['anon'])$$, 'a login form''s limiter, for anon');
SET ROLE anon;
SELECT results_eq($$SELECT public.is_rate_limited('someone@example.com') FROM generate_series(1, 4)$$,
                  $$VALUES (false), (false), (false), (true)$$,
                  'called as anon: true means limited, the fourth in 15 minutes');
RESET ROLE;
SELECT ok(EXISTS (SELECT FROM ratelimit.key_state
                  WHERE key = 'public.is_rate_limited:' || ratelimit.hash_subject('someone@example.com')),
          'the key holds the address''s SHA-256, not the address');
SELECT ok(NOT has_function_privilege('authenticated', 'public.is_rate_limited(text)', 'EXECUTE'),
          'granted to anon only');

-- ---- the JWT's sub, jsonb with the app's keys, through a role switch -------------------------
SELECT lives_ok($$SELECT ratelimit.declare_limiter('api_limit', '{}', 'jsonb',
                      ARRAY['ok allowed', 'remaining remaining', 'retryAfter retry_after'],
                      p_limit => 2, p_period => '1 minute')$$, 'keyed by the caller (the default), jsonb');
SET ROLE authenticated;
SET request.jwt.claims = '{"sub": "user-1", "role": "authenticated"}';
SELECT results_eq($$SELECT public.api_limit() FROM generate_series(1, 3)$$,
                  $$VALUES ('{"ok": true, "remaining": 1, "retryAfter": 0}'::jsonb),
                           ('{"ok": true, "remaining": 0, "retryAfter": 0}'),
                           ('{"ok": false, "remaining": 0, "retryAfter": 60}')$$,
                  'the app''s keys, as written; the third call in a minute denied');
SET request.jwt.claims = '{"sub": "user-2", "role": "authenticated"}';
SELECT is(public.api_limit() ->> 'remaining', '1', 'another sub is another key');
SET request.jwt.claims = '{"role": "authenticated"}';
SELECT throws_ok($$SELECT public.api_limit()$$, '42501', 'api_limit needs a signed-in caller (a JWT sub claim)',
                 'no sub: refused (p_anonymous refuse, the default)');
SET request.jwt.claims = '{"sub": 5}';
SELECT throws_ok($$SELECT public.api_limit()$$, '22023', NULL, 'malformed claims: an error, not an anonymous caller');
RESET ROLE;
SELECT ok(EXISTS (SELECT FROM ratelimit.key_state WHERE key = 'public.api_limit:user:user-1'),
          'the caller''s key: user:<sub>, as the PostgREST hook keys users');

-- ---- anonymous callers allowed, or keyed by the client address -------------------------------
SELECT lives_ok($$SELECT ratelimit.declare_limiter('search_limit', '{}', 'boolean', p_limit => 1,
                      p_period => '1 minute', p_anonymous => 'allow', p_roles => ARRAY['anon', 'authenticated'])$$,
                'p_anonymous allow');
SET request.jwt.claims = '{"role": "anon"}';
SELECT results_eq($$SELECT public.search_limit() FROM generate_series(1, 3)$$, $$VALUES (true), (true), (true)$$,
                  'an anonymous caller is allowed, and not counted');
SELECT lives_ok($$SELECT ratelimit.declare_limiter('search_limit', '{}', 'boolean', p_limit => 1,
                      p_period => '1 minute', p_anonymous => 'ip', p_roles => ARRAY['anon', 'authenticated'])$$,
                'declared again, with p_anonymous ip: no p_replace needed');
SET request.headers = '{"x-forwarded-for": "198.51.100.7"}';
SELECT results_eq($$SELECT public.search_limit() FROM generate_series(1, 2)$$, $$VALUES (true), (false)$$,
                  'an anonymous caller counted by its address');
SELECT ok(EXISTS (SELECT FROM ratelimit.key_state WHERE key = 'public.search_limit:ip:198.51.100.7'),
          'the key: ip:<address>, the hop ratelimit.client_ip_trusted_proxies names');
SELECT is(ratelimit.client_address(), '198.51.100.7'::inet, 'client_address() as pre_request reads it');

-- ---- a fixed text and the address together, positionally and by name ---------------------------
SELECT lives_ok($$SELECT ratelimit.declare_limiter('login_attempt', ARRAY['p_email text'], 'row',
                      ARRAY['ok allowed', 'left remaining', 'key key'], p_key => ARRAY['text:login', 'ip', 'hash:p_email'],
                      p_limit => 5, p_period => '15 minutes', p_roles => ARRAY['anon'])$$,
                'keyed by a fixed text, the address and a hashed argument');
SELECT 'public.login_attempt:login:ip:198.51.100.7:' || ratelimit.hash_subject('a@example.com') AS login_key \gset
SET ROLE anon;
SELECT is((SELECT key FROM public.login_attempt('a@example.com')), :'login_key',
          'the parts in the order given, joined with :');
SELECT is((SELECT "left" FROM public.login_attempt(p_email => 'a@example.com')), 3, 'called by name: the same key');
RESET ROLE;

-- ---- the caller's search_path finds nothing ------------------------------------------------------
-- The made function runs as its owner with the caller's search_path: a schema of the caller's
-- first on it, with its own ||, <, - and a type named text, changes nothing.
CREATE SCHEMA hostile_path;
CREATE FUNCTION hostile_path.concat(text, text) RETURNS text LANGUAGE plpgsql AS
    $$BEGIN RAISE EXCEPTION 'the caller''s || ran as the owner'; END$$;
CREATE OPERATOR hostile_path.|| (LEFTARG = text, RIGHTARG = text, FUNCTION = hostile_path.concat);
CREATE FUNCTION hostile_path.less(integer, integer) RETURNS boolean LANGUAGE plpgsql AS
    $$BEGIN RAISE EXCEPTION 'the caller''s < ran as the owner'; END$$;
CREATE OPERATOR hostile_path.< (LEFTARG = integer, RIGHTARG = integer, FUNCTION = hostile_path.less);
CREATE TYPE hostile_path.text AS (stolen integer);
GRANT USAGE ON SCHEMA hostile_path TO PUBLIC;
-- Runs p_sql with that search_path (pgTAP's own functions would find those operators too).
CREATE FUNCTION public.with_hostile_path(p_sql text) RETURNS text LANGUAGE plpgsql
SET search_path = hostile_path, pg_catalog, public AS $$
BEGIN
    EXECUTE p_sql;
    RETURN 'ran as declared';
EXCEPTION WHEN OTHERS THEN
    RETURN SQLERRM;
END
$$;
GRANT EXECUTE ON FUNCTION public.with_hostile_path(text) TO authenticated;
SET ROLE authenticated;
SET request.jwt.claims = '{"sub": "user-9", "role": "authenticated"}';
SELECT is(public.with_hostile_path($$SELECT * FROM public.check_rate_limit('5d0b9a34-7c1e-4f2a-9e6b-2c8d1f3a4b5c', 'path', 5, 60)$$),
          'ran as declared', 'with the caller''s operators and types first on its search_path, the row limiter runs as declared');
SELECT is(public.with_hostile_path($$SELECT public.api_limit()$$), 'ran as declared', 'and so does the jsonb one');
RESET ROLE;
RESET request.jwt.claims;

-- ---- over a policy ---------------------------------------------------------------------------
INSERT INTO ratelimit.policies (name, "limit", period) VALUES ('declared.upload', 2, '1 hour');
SELECT lives_ok($$SELECT ratelimit.declare_limiter('can_upload', ARRAY['p_user uuid', 'p_max integer DEFAULT 100'],
                      p_key => ARRAY['arg:p_user'], p_policy => 'declared.upload', p_limit_argument => 'p_max')$$,
                'over a policy');
SELECT results_eq($$SELECT public.can_upload('0b7e1d2c-0000-4000-8000-000000000001') FROM generate_series(1, 3)$$,
                  $$VALUES (true), (true), (false)$$, 'the policy''s limit wins over the caller''s 100 (ignore)');
SET ratelimit.dropin_caller_limits = 'must_match';
SELECT throws_ok($$SELECT public.can_upload('0b7e1d2c-0000-4000-8000-000000000002')$$, '42501', NULL,
                 'with must_match, a caller''s limit that differs is refused');
RESET ratelimit.dropin_caller_limits;

-- ---- over the app's own function ---------------------------------------------------------------
CREATE FUNCTION public.rate_ok(p_key text) RETURNS boolean LANGUAGE sql AS 'SELECT true';
SELECT throws_ok($$SELECT ratelimit.declare_limiter('rate_ok', ARRAY['p_key text'], p_key => ARRAY['arg:p_key'],
                      p_limit => 1, p_period => '1 minute')$$, '42723',
                 format('p_function: function public.rate_ok(text) exists already, owned by %s', quote_ident(current_user)),
                 'the app''s own function stops the declaration, named with its owner');
SELECT is(public.rate_ok('k'), true, 'and is left as it was');
SELECT lives_ok($$SELECT ratelimit.declare_limiter('rate_ok', ARRAY['p_key text'], p_key => ARRAY['arg:p_key'],
                      p_limit => 1, p_period => '1 minute', p_replace => true)$$, 'taken over with p_replace');
SELECT results_eq($$SELECT public.rate_ok('k') FROM generate_series(1, 2)$$, $$VALUES (true), (false)$$,
                  'now it limits');

-- ---- dropped ------------------------------------------------------------------------------------
SELECT lives_ok($$SELECT ratelimit.drop_limiter('public.rate_ok(text)')$$, 'drop_limiter');
SELECT ok(to_regprocedure('public.rate_ok(text)') IS NULL, 'the function is gone');

SELECT * FROM finish();
ROLLBACK;
