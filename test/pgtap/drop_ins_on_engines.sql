-- The drop-ins on the engines (ratelimit.dropin_engine = unlogged | memory): the same calls give
-- the same results as on the apps' own tables (table), the same errors for bad input, the same
-- JWT caller rule; the apps' tables are left alone; the setting is the superuser's. The three
-- apps' drop-ins in one database: the per-RPC and endpoint limits in public, the sliding window's
-- in a schema of their own (its check_rate_limit would clash with the per-RPC one in public).
BEGIN;
CREATE EXTENSION IF NOT EXISTS pgtap;

\ir supabase_roles.psql

\ir install_edition.psql
\set drop_in rpc_limits
\ir install_drop_in.psql
\set drop_in endpoint_limits
\ir install_drop_in.psql
\set drop_in sliding_window_limits
\set drop_in_schema sliding_window
\ir install_drop_in.psql

SELECT plan(39);

SELECT skip('the SQL edition has no memory engine', 6) WHERE NOT :memory_engine;

SET LOCAL timezone = 'UTC';
CREATE SCHEMA eng;

-- The memory engine lives outside the transaction: the users and names are new on every run,
-- and so is the day, later on each run (check_rate_limit_tiers' 'global' key is the same in
-- every run, and a clock that went back would find it still counting). The days are some 75
-- years ahead of the real clock, which the memory engine's worker expires keys on.
CREATE TABLE eng.run AS
SELECT left(md5(random()::text || clock_timestamp()::text), 10) AS token,
       gen_random_uuid() AS user_a, gen_random_uuid() AS user_b,
       make_interval(days => 27000 + (floor(extract(epoch FROM clock_timestamp()))::bigint % 2000000)::integer) AS shift;

-- The clock at that instant of the run's day.
CREATE FUNCTION eng.at(p_instant text) RETURNS void LANGUAGE sql AS $$
    SELECT set_config('ratelimit.test_clock', (p_instant::timestamptz + (SELECT shift FROM eng.run))::text, true)
$$;

CREATE FUNCTION eng.claims(p_user uuid) RETURNS void LANGUAGE sql AS $$
    SELECT set_config('request.jwt.claims',
                      CASE WHEN p_user IS NULL THEN '{}' ELSE json_build_object('sub', p_user)::text END, true)
$$;

-- Everything the apps' tables hold.
CREATE FUNCTION eng.app_tables() RETURNS jsonb LANGUAGE sql AS $$
    SELECT jsonb_build_object(
        'rpc_rate_limits', (SELECT jsonb_agg(to_jsonb(t) ORDER BY t.id) FROM public.rpc_rate_limits t),
        'rate_limits', (SELECT jsonb_agg(to_jsonb(t) ORDER BY t.id) FROM public.rate_limits t),
        'rate_limit_buckets', (SELECT jsonb_agg(to_jsonb(t) ORDER BY t.key, t.bucket_time) FROM sliding_window.rate_limit_buckets t))
$$;

-- The server's limits some calls meet.
INSERT INTO ratelimit.policies (name, algorithm, "limit", period) VALUES
    ('rpc.eng-policy', 'rolling_window', 2, '1 minute'),
    ('endpoint.eng-policy', 'fixed_window', 3, '1 hour');

------------------------------------------------------------------------------------------------
-- The per-RPC limits: check_rate_limit(p_rpc_name, ...) and check_rate_limit_for_user.
------------------------------------------------------------------------------------------------
CREATE FUNCTION eng.rpc_calls(p_engine text) RETURNS text[] LANGUAGE plpgsql AS $$
DECLARE
    r eng.run := (SELECT x FROM eng.run x);
    rpc text := 'login-' || r.token;
    out text[] := '{}';
BEGIN
    PERFORM set_config('ratelimit.dropin_engine', p_engine, true);
    PERFORM eng.claims(r.user_a);
    PERFORM eng.at('2026-03-01 10:00:00+00');
    FOR i IN 1..7 LOOP
        out := out || check_rate_limit(p_rpc_name => rpc, p_max_calls => 5, p_window_minutes => 15)::text;
    END LOOP;
    -- A shorter window does not restart the open one; a higher limit counts on from 7.
    PERFORM eng.at('2026-03-01 10:02:00+00');
    out := out || check_rate_limit(p_rpc_name => rpc, p_max_calls => 50, p_window_minutes => 1)::text;
    -- The window's last instant still counts; the next one starts a window.
    PERFORM eng.at('2026-03-01 10:15:00+00');
    out := out || check_rate_limit(p_rpc_name => rpc, p_max_calls => 9, p_window_minutes => 1)::text;
    PERFORM eng.at('2026-03-01 10:15:00.000001+00');
    out := out || check_rate_limit(p_rpc_name => rpc, p_max_calls => 1, p_window_minutes => 1)::text;
    out := out || check_rate_limit(p_rpc_name => rpc, p_max_calls => 1, p_window_minutes => 1)::text;
    -- A longer window passed later does not lengthen the one-minute window opened above.
    PERFORM eng.at('2026-03-01 10:16:00.000002+00');
    out := out || check_rate_limit(p_rpc_name => rpc, p_max_calls => 1, p_window_minutes => 60)::text;
    out := out || check_rate_limit(p_rpc_name => rpc, p_max_calls => 1, p_window_minutes => 60)::text;
    -- No identity: allowed and not counted.
    PERFORM eng.claims(NULL);
    FOR i IN 1..3 LOOP
        out := out || check_rate_limit(p_rpc_name => rpc, p_max_calls => 1, p_window_minutes => 1)::text;
    END LOOP;
    -- An explicit user.
    FOR i IN 1..3 LOOP
        out := out || check_rate_limit_for_user(r.user_b, rpc, 2, 1)::text;
    END LOOP;
    -- The policy rpc.eng-policy (2 per minute) decides, not the caller's 100 per hour.
    PERFORM eng.claims(r.user_a);
    FOR i IN 1..3 LOOP
        out := out || check_rate_limit(p_rpc_name => 'eng-policy', p_max_calls => 100, p_window_minutes => 60)::text;
    END LOOP;
    PERFORM eng.at('2026-03-01 10:17:00.000003+00');
    out := out || check_rate_limit(p_rpc_name => 'eng-policy', p_max_calls => 100, p_window_minutes => 60)::text;
    PERFORM set_config('ratelimit.dropin_engine', 'table', true);
    RETURN out;
END
$$;

------------------------------------------------------------------------------------------------
-- The hourly endpoint limits: increment_rate_limit.
------------------------------------------------------------------------------------------------
CREATE FUNCTION eng.endpoint_calls(p_engine text) RETURNS text[] LANGUAGE plpgsql AS $$
DECLARE
    r eng.run := (SELECT x FROM eng.run x);
    endpoint text := 'sync-' || r.token;
    out text[] := '{}';
BEGIN
    PERFORM set_config('ratelimit.dropin_engine', p_engine, true);
    PERFORM eng.claims(NULL);
    PERFORM eng.at('2026-03-01 07:30:00+00');
    FOR i IN 1..3 LOOP
        out := out || increment_rate_limit(r.user_a, endpoint, 50, 3600, 20)::text;
    END LOOP;
    -- A one-minute window counts in the hour still open, until it ends.
    out := out || increment_rate_limit(r.user_a, endpoint, 50, 60, 1)::text;
    PERFORM eng.at('2026-03-01 07:59:59.5+00');
    out := out || increment_rate_limit(r.user_a, endpoint, 50, 60, 1)::text;
    PERFORM eng.at('2026-03-01 08:00:00+00');
    out := out || increment_rate_limit(r.user_a, endpoint, 1, 60, 1)::text;
    out := out || increment_rate_limit(r.user_a, endpoint, 1, 60, 1)::text;
    PERFORM eng.at('2026-03-01 08:00:59.999999+00');
    out := out || increment_rate_limit(r.user_a, endpoint, 1, 60, 1)::text;
    PERFORM eng.at('2026-03-01 08:01:00+00');
    out := out || increment_rate_limit(r.user_a, endpoint, 1, 60, 1)::text;
    -- The counter stops at 2^31 - 1, like the table's integer column, and denies from there.
    out := out || increment_rate_limit(r.user_b, endpoint, 10, 60, 2147483647)::text;
    out := out || increment_rate_limit(r.user_b, endpoint, 2147483647, 60, 1)::text;
    -- The policy endpoint.eng-policy (3 an hour) decides.
    FOR i IN 1..4 LOOP
        out := out || increment_rate_limit(r.user_a, 'eng-policy-' || r.token, 100, 60, 1)::text;
        out := out || increment_rate_limit(r.user_b, 'eng-policy', 100, 60, 1)::text;
    END LOOP;
    PERFORM set_config('ratelimit.dropin_engine', 'table', true);
    RETURN out;
END
$$;

------------------------------------------------------------------------------------------------
-- The sliding windows: check_rate_limit(p_key, ...) and check_rate_limit_tiers. p_big uses limits
-- above 6 (the memory engine's in-slot log).
------------------------------------------------------------------------------------------------
CREATE FUNCTION eng.sliding_calls(p_engine text, p_big boolean) RETURNS text[] LANGUAGE plpgsql AS $$
DECLARE
    r eng.run := (SELECT x FROM eng.run x);
    k text := 'k-' || r.token || CASE WHEN p_big THEN '-big' ELSE '' END;
    n integer := CASE WHEN p_big THEN 10 ELSE 3 END;
    out text[] := '{}';
BEGIN
    PERFORM set_config('ratelimit.dropin_engine', p_engine, true);
    PERFORM eng.at('2026-03-01 10:00:00.3+00');
    FOR i IN 1..n + 1 LOOP
        out := out || (SELECT x::text FROM sliding_window.check_rate_limit(p_key => k, p_limit => n, p_window_seconds => 10) x);
    END LOOP;
    PERFORM eng.at('2026-03-01 10:00:05.9+00');
    out := out || (SELECT x::text FROM sliding_window.check_rate_limit(p_key => k, p_limit => n + 2, p_window_seconds => 10, p_cost => 2) x);
    -- Counted under a higher limit: the count is reported as it is.
    out := out || (SELECT x::text FROM sliding_window.check_rate_limit(p_key => k, p_limit => 2, p_window_seconds => 10) x);
    PERFORM eng.at('2026-03-01 10:00:09.99+00');
    out := out || (SELECT x::text FROM sliding_window.check_rate_limit(p_key => k, p_limit => n + 2, p_window_seconds => 10) x);
    -- The bucket of 10:00:00 leaves the window at 10:00:10 exactly.
    PERFORM eng.at('2026-03-01 10:00:10+00');
    out := out || (SELECT x::text FROM sliding_window.check_rate_limit(p_key => k, p_limit => n + 2, p_window_seconds => 10) x);
    -- A longer window than the key's earlier calls: an engine keeps no call older than the
    -- window of the key's last write, which is what the table holds once cleanup has deleted
    -- the buckets that no longer count for 10 seconds.
    IF p_engine = 'table' THEN
        DELETE FROM sliding_window.rate_limit_buckets WHERE key = k AND bucket_time <= ratelimit.clock_now() - interval '10 seconds';
    END IF;
    out := out || (SELECT x::text FROM sliding_window.check_rate_limit(p_key => k, p_limit => n + 2, p_window_seconds => 20) x);
    -- The tiers, all or nothing: the global key is check_rate_limit's 'global'.
    PERFORM eng.at('2026-03-01 11:00:00+00');
    out := out || (SELECT x::text FROM sliding_window.check_rate_limit(p_key => 'global', p_limit => 1000, p_window_seconds => 60) x);
    FOR i IN 1..n + 1 LOOP
        out := out || (SELECT x::text FROM sliding_window.check_rate_limit_tiers(' 203.0.113.7 ', r.token || '@Example.com',
                           p_global_limit => n + 2, p_ip_limit => n, p_email_limit => n - 1) x);
    END LOOP;
    PERFORM eng.at('2026-03-01 11:00:30+00');
    out := out || (SELECT x::text FROM sliding_window.check_rate_limit_tiers('203.0.113.7', r.token || '@example.com',
                       p_global_limit => n + 2, p_ip_limit => n, p_email_limit => n - 1) x);
    PERFORM eng.at('2026-03-01 11:01:00+00');
    out := out || (SELECT x::text FROM sliding_window.check_rate_limit_tiers('203.0.113.7', r.token || '@example.com',
                       p_global_limit => n + 2, p_ip_limit => n, p_email_limit => n - 1) x);
    PERFORM set_config('ratelimit.dropin_engine', 'table', true);
    RETURN out;
END
$$;

-- A call's outcome as text: its result, or its SQLSTATE and message.
CREATE FUNCTION eng.outcome(p_engine text, p_call text) RETURNS text LANGUAGE plpgsql AS $$
DECLARE
    result text;
BEGIN
    PERFORM set_config('ratelimit.dropin_engine', p_engine, true);
    BEGIN
        EXECUTE p_call INTO result;
    EXCEPTION WHEN OTHERS THEN
        result := SQLSTATE || ': ' || SQLERRM;
    END;
    PERFORM set_config('ratelimit.dropin_engine', 'table', true);
    RETURN result;
END
$$;

------------------------------------------------------------------------------------------------
-- The setting. The SQL edition has no library to define it: the name is unset until a session
-- sets it, to any value, as any role (docs/sql-edition.md, "What is not in it").
------------------------------------------------------------------------------------------------
\if :c_edition
SELECT is(current_setting('ratelimit.dropin_engine'), 'table', 'dropin_engine defaults to table');
SELECT throws_ok($$SET LOCAL ratelimit.dropin_engine = 'redis'$$, '22023',
                 'invalid value for parameter "ratelimit.dropin_engine": "redis"', 'an unknown engine is refused');
SELECT throws_ok($$SET LOCAL ratelimit.dropin_engine = 'logged'$$, '22023', NULL,
                 'logged is not an engine''s name here (table is)');
SELECT lives_ok($$SET LOCAL ratelimit.dropin_engine = 'unlogged'$$, 'dropin_engine takes unlogged');
SELECT lives_ok($$SET LOCAL ratelimit.dropin_engine = 'memory'$$, 'dropin_engine takes memory');
RESET ratelimit.dropin_engine;
SELECT lives_ok($$ALTER ROLE authenticated SET ratelimit.dropin_engine = 'memory'$$,
                'a superuser sets it for a role');
SELECT is((SELECT setconfig FROM pg_db_role_setting WHERE setrole = 'authenticated'::regrole),
          '{ratelimit.dropin_engine=memory}', 'the role''s setting is stored');
SELECT lives_ok(format($$ALTER DATABASE %I SET ratelimit.dropin_engine = 'unlogged'$$, current_database()),
                'a superuser sets it for a database');
SELECT throws_ok(format($$ALTER DATABASE %I SET ratelimit.dropin_engine = 'redis'$$, current_database()), '22023',
                 NULL, 'an unknown engine is refused for a database too');
SET LOCAL ROLE authenticated;
SELECT throws_ok($$SET LOCAL ratelimit.dropin_engine = 'table'$$, '42501', NULL,
                 'authenticated cannot change dropin_engine');
SELECT throws_ok($$SELECT set_config('ratelimit.dropin_engine', 'memory', true)$$, '42501', NULL,
                 'nor through set_config');
SELECT throws_ok($$ALTER ROLE authenticated SET ratelimit.dropin_engine = 'table'$$, '42501', NULL,
                 'nor for its own role');
RESET ROLE;
SET LOCAL ROLE service_role;
SELECT throws_ok($$SET LOCAL ratelimit.dropin_engine = 'memory'$$, '42501', NULL,
                 'service_role cannot change it either');
RESET ROLE;
\else
SELECT skip('the SQL edition defines no settings: the default, the checks and the superuser-only changes of dropin_engine are the C edition''s', 13);
\endif

------------------------------------------------------------------------------------------------
-- The same calls, the same results.
------------------------------------------------------------------------------------------------
CREATE TABLE eng.on_tables AS
SELECT eng.rpc_calls('table') AS rpc, eng.endpoint_calls('table') AS endpoint,
       eng.sliding_calls('table', false) AS sliding, eng.sliding_calls('table', true) AS sliding_big;
CREATE TABLE eng.tables_after AS SELECT eng.app_tables() AS t;

SELECT is((SELECT rpc FROM eng.on_tables),
          '{true,true,true,true,true,false,false,true,true,true,false,true,false,true,true,true,true,true,false,true,true,false,true}',
          'the per-RPC calls on the apps'' table (the reference)');
SELECT is((SELECT sliding FROM eng.on_tables),
          '{"(t,1,0)","(t,2,0)","(t,3,0)","(f,3,10)","(t,5,0)","(f,5,10)","(f,5,1)","(t,3,0)","(t,4,0)","(t,1,0)","(t,,0,2,1,1)","(t,,0,3,2,2)","(f,email,3600,3,2,2)","(f,email,3600,3,2,2)","(f,email,3570,3,2,2)","(f,email,3540,0,0,2)"}',
          'the sliding-window calls on the apps'' table (the reference)');
SELECT ok((SELECT t -> 'rpc_rate_limits' IS NOT NULL AND t -> 'rate_limits' IS NOT NULL
                  AND t -> 'rate_limit_buckets' IS NOT NULL FROM eng.tables_after),
          'on table the calls write the apps'' tables');

SELECT is(eng.rpc_calls('unlogged'), (SELECT rpc FROM eng.on_tables), 'check_rate_limit(p_rpc_name, ...) on unlogged');
SELECT is(eng.rpc_calls('memory'), (SELECT rpc FROM eng.on_tables), 'check_rate_limit(p_rpc_name, ...) on memory')
WHERE :memory_engine;
SELECT is(eng.endpoint_calls('unlogged'), (SELECT endpoint FROM eng.on_tables), 'increment_rate_limit on unlogged');
SELECT is(eng.endpoint_calls('memory'), (SELECT endpoint FROM eng.on_tables), 'increment_rate_limit on memory')
WHERE :memory_engine;
SELECT is(eng.sliding_calls('unlogged', false), (SELECT sliding FROM eng.on_tables),
          'check_rate_limit(p_key, ...) and check_rate_limit_tiers on unlogged, limits up to 6');
SELECT is(eng.sliding_calls('memory', false), (SELECT sliding FROM eng.on_tables),
          'check_rate_limit(p_key, ...) and check_rate_limit_tiers on memory, limits up to 6')
WHERE :memory_engine;
SELECT is(eng.sliding_calls('unlogged', true), (SELECT sliding_big FROM eng.on_tables),
          'check_rate_limit(p_key, ...) and check_rate_limit_tiers on unlogged, limits above 6');
SELECT is(eng.sliding_calls('memory', true), (SELECT sliding_big FROM eng.on_tables),
          'check_rate_limit(p_key, ...) and check_rate_limit_tiers on memory, limits above 6')
WHERE :memory_engine;

SELECT is(eng.app_tables(), (SELECT t FROM eng.tables_after),
          'on unlogged and memory the apps'' tables are not written');

-- The counts are in the engines, in the drop-ins' own namespaces.
SELECT ok((SELECT count(*) FROM ratelimit.key_state_unlogged WHERE policy = 'drop-in/rpc_rate_limits'
             AND key = (SELECT user_a || ':login-' || token FROM eng.run)) = 1,
          'unlogged: the per-RPC count is the row (drop-in/rpc_rate_limits, <user>:<rpc>)');
SELECT ok((SELECT count(*) FROM ratelimit.key_state_unlogged WHERE policy = 'drop-in/rate_limits') > 0
          AND (SELECT count(*) FROM ratelimit.key_state_unlogged WHERE policy = 'drop-in/rate_limit_buckets') > 0,
          'unlogged: the endpoint and bucket counts are in their namespaces');
SELECT is((SELECT count(*) FROM ratelimit.key_state WHERE policy LIKE 'drop-in/%'), 0::bigint,
          'the logged key_state is not written');
SELECT throws_ok($$INSERT INTO ratelimit.policies (name, algorithm, "limit", period)
                   VALUES ('drop-in/rpc_rate_limits', 'rolling_window', 1, '1 minute')$$, '22023', NULL,
                 'no policy can be named like a drop-in''s namespace');

-- A native key spelled like a drop-in's key is another counter (on the memory engine; the SQL
-- edition's is unlogged).
SELECT CASE WHEN :memory_engine THEN 'memory' ELSE 'unlogged' END AS engine \gset
SELECT is((SELECT array_agg(allowed) FROM (
              SELECT (ratelimit.consume((SELECT user_a || ':ns-' || token FROM eng.run), 1, '1 hour',
                                        p_engine => :'engine')).allowed FROM generate_series(1, 2)) s),
          '{t,f}', format('a native key "<user>:<rpc>" on %s is used up', :'engine'));
SELECT eng.claims((SELECT user_a FROM eng.run));
SELECT is(eng.outcome(:'engine', format('SELECT check_rate_limit(p_rpc_name => %L, p_max_calls => 1)',
                                        'ns-' || (SELECT token FROM eng.run))),
          'true', 'the drop-in''s count of the same user and rpc is its own');
SELECT eng.claims(NULL);

------------------------------------------------------------------------------------------------
-- Bad input: the same SQLSTATE and message on every engine, and nothing counted.
------------------------------------------------------------------------------------------------
CREATE TABLE eng.bad (n serial, call text);
INSERT INTO eng.bad (call) VALUES
    ($$SELECT check_rate_limit(p_rpc_name => NULL)::text$$),
    ($$SELECT check_rate_limit(p_rpc_name => '')::text$$),
    ($$SELECT check_rate_limit(p_rpc_name => repeat('r', 257))::text$$),
    ($$SELECT check_rate_limit(p_rpc_name => 'x', p_max_calls => 0)::text$$),
    ($$SELECT check_rate_limit(p_rpc_name => 'x', p_max_calls => NULL)::text$$),
    ($$SELECT check_rate_limit(p_rpc_name => 'x', p_window_minutes => 0)::text$$),
    ($$SELECT check_rate_limit(p_rpc_name => 'x', p_window_minutes => 525601)::text$$),
    ($$SELECT set_config('request.jwt.claims', '[1]', true), check_rate_limit(p_rpc_name => 'x')::text$$),
    ($$SELECT set_config('request.jwt.claims', '{"sub":"nobody"}', true), check_rate_limit(p_rpc_name => 'x')::text$$),
    ($$SELECT check_rate_limit_for_user(NULL, 'x')::text$$),
    ($$SELECT check_rate_limit_for_user(gen_random_uuid(), 'x', -1)::text$$),
    ($$SELECT increment_rate_limit(NULL, 'e', 10, 60)::text$$),
    ($$SELECT increment_rate_limit(gen_random_uuid(), NULL, 10, 60)::text$$),
    ($$SELECT increment_rate_limit(gen_random_uuid(), 'e', 0, 60)::text$$),
    ($$SELECT increment_rate_limit(gen_random_uuid(), 'e', 10, -1)::text$$),
    ($$SELECT increment_rate_limit(gen_random_uuid(), 'e', 10, 31536001)::text$$),
    ($$SELECT increment_rate_limit(gen_random_uuid(), 'e', 10, 60, 0)::text$$),
    ($$SELECT x::text FROM sliding_window.check_rate_limit(p_key => '', p_limit => 5, p_window_seconds => 60) x$$),
    ($$SELECT x::text FROM sliding_window.check_rate_limit(p_key => NULL, p_limit => 5, p_window_seconds => 60) x$$),
    ($$SELECT x::text FROM sliding_window.check_rate_limit(p_key => 'k', p_limit => 0, p_window_seconds => 60) x$$),
    ($$SELECT x::text FROM sliding_window.check_rate_limit(p_key => 'k', p_limit => 5, p_window_seconds => 0) x$$),
    ($$SELECT x::text FROM sliding_window.check_rate_limit(p_key => 'k', p_limit => 5, p_window_seconds => 60, p_cost => 6) x$$),
    ($$SELECT x::text FROM sliding_window.check_rate_limit_tiers('   ', 'a@example.com') x$$),
    ($$SELECT x::text FROM sliding_window.check_rate_limit_tiers('203.0.113.7', NULL) x$$),
    ($$SELECT x::text FROM sliding_window.check_rate_limit_tiers('203.0.113.7', 'a@example.com', p_ip_limit => 0) x$$),
    ($$SELECT x::text FROM sliding_window.check_rate_limit_tiers('203.0.113.7', 'a@example.com', p_email_window_seconds => 0) x$$);

SELECT is(ARRAY(SELECT eng.outcome('unlogged', call) FROM eng.bad ORDER BY n),
          ARRAY(SELECT eng.outcome('table', call) FROM eng.bad ORDER BY n),
          'bad input: the same errors on unlogged as on table');
SELECT is(ARRAY(SELECT eng.outcome('memory', call) FROM eng.bad ORDER BY n),
          ARRAY(SELECT eng.outcome('table', call) FROM eng.bad ORDER BY n),
          'bad input: the same errors on memory as on table')
WHERE :memory_engine;
SELECT is(ARRAY(SELECT n FROM eng.bad WHERE eng.outcome('table', call) !~ '^(22004|22023|42501): ' ORDER BY n),
          '{}'::integer[], 'every bad call is an error naming its argument (22004, 22023 or 42501)');
SELECT is(eng.app_tables(), (SELECT t FROM eng.tables_after), 'the bad calls wrote nothing');

------------------------------------------------------------------------------------------------
-- The JWT caller rule and the server's limits: the same refusals on every engine, as PostgREST
-- calls (SET ROLE, request.jwt.claims).
------------------------------------------------------------------------------------------------
GRANT EXECUTE ON FUNCTION check_rate_limit_for_user(uuid, text, integer, integer) TO authenticated;
GRANT USAGE ON SCHEMA eng TO authenticated;
GRANT EXECUTE ON ALL FUNCTIONS IN SCHEMA eng TO authenticated;
GRANT SELECT ON eng.run TO authenticated;
CREATE TABLE eng.rule (n serial, setup text, call text);
INSERT INTO eng.rule (setup, call) VALUES
    -- a JWT role without a sub may spend no one's quota
    ('{}', $$SELECT increment_rate_limit((SELECT user_a FROM eng.run), 'e', 10, 60)::text$$),
    -- with a sub, only its own
    ('a', $$SELECT increment_rate_limit((SELECT user_b FROM eng.run), 'e', 10, 60)::text$$),
    ('a', $$SELECT (increment_rate_limit((SELECT user_a FROM eng.run), 'rule-' || (SELECT token FROM eng.run), 10, 60) ->> 'allowed')$$),
    ('a', $$SELECT check_rate_limit_for_user((SELECT user_b FROM eng.run), 'x')::text$$),
    ('{}', $$SELECT check_rate_limit_for_user((SELECT user_a FROM eng.run), 'x')::text$$),
    -- anonymous: allowed, not counted
    ('{}', $$SELECT check_rate_limit(p_rpc_name => 'rule', p_max_calls => 1)::text$$),
    -- must_match: the policy's values or nothing
    ('a must_match', $$SELECT check_rate_limit(p_rpc_name => 'eng-policy', p_max_calls => 3, p_window_minutes => 1)::text$$),
    ('a must_match', $$SELECT check_rate_limit(p_rpc_name => 'eng-policy', p_max_calls => 2, p_window_minutes => 5)::text$$),
    ('a must_match', $$SELECT increment_rate_limit((SELECT user_a FROM eng.run), 'eng-policy', 3, 60)::text$$),
    -- require_policy: no caller-chosen limits for untrusted roles
    ('a require_policy', $$SELECT check_rate_limit(p_rpc_name => 'no-policy', p_max_calls => 5)::text$$),
    ('a require_policy', $$SELECT increment_rate_limit((SELECT user_a FROM eng.run), 'no-policy', 10, 60)::text$$);

CREATE FUNCTION eng.rule_outcomes(p_engine text) RETURNS text[] LANGUAGE plpgsql AS $$
DECLARE
    r record;
    out text[] := '{}';
    sub uuid := (SELECT user_a FROM eng.run);
BEGIN
    PERFORM eng.at('2026-03-01 12:00:00+00');
    FOR r IN SELECT * FROM eng.rule ORDER BY n LOOP
        PERFORM set_config('ratelimit.dropin_caller_limits',
                           CASE WHEN r.setup LIKE '%must_match%' THEN 'must_match' ELSE 'ignore' END, true);
        PERFORM set_config('ratelimit.dropin_require_policy', (r.setup LIKE '%require_policy%')::text, true);
        PERFORM set_config('ratelimit.dropin_engine', p_engine, true);
        PERFORM eng.claims(CASE WHEN r.setup LIKE 'a%' THEN sub END);
        BEGIN
            PERFORM set_config('role', 'authenticated', true);
            out := out || (SELECT eng.outcome_as_caller(r.call));
            PERFORM set_config('role', 'none', true);
        EXCEPTION WHEN OTHERS THEN
            out := out || ('unexpected ' || SQLSTATE || ': ' || SQLERRM);
        END;
    END LOOP;
    PERFORM set_config('ratelimit.dropin_caller_limits', 'ignore', true);
    PERFORM set_config('ratelimit.dropin_require_policy', 'off', true);
    PERFORM set_config('ratelimit.dropin_engine', 'table', true);
    PERFORM eng.claims(NULL);
    RETURN out;
END
$$;

-- The call as the current role, without touching the superuser-only settings.
CREATE FUNCTION eng.outcome_as_caller(p_call text) RETURNS text LANGUAGE plpgsql AS $$
DECLARE
    result text;
BEGIN
    EXECUTE p_call INTO result;
    RETURN result;
EXCEPTION WHEN OTHERS THEN
    RETURN SQLSTATE || ': ' || SQLERRM;
END
$$;
GRANT EXECUTE ON FUNCTION eng.outcome_as_caller(text) TO authenticated;

CREATE TABLE eng.rule_on_tables AS SELECT eng.rule_outcomes('table') AS outcomes;
SELECT is((SELECT outcomes FROM eng.rule_on_tables),
          ARRAY['42501: p_user_id needs a JWT sub claim: a request without one cannot act on a user''s id',
                '42501: p_user_id must be the caller''s own id (the JWT sub)',
                'true',
                '42501: p_user_id must be the caller''s own id (the JWT sub)',
                '42501: p_user_id needs a JWT sub claim: a request without one cannot act on a user''s id',
                'true',
                '42501: p_max_calls must be 2, the limit of the policy rpc.eng-policy (ratelimit.dropin_caller_limits is must_match), got 3',
                '42501: p_window_minutes must be 1, the period of the policy rpc.eng-policy (ratelimit.dropin_caller_limits is must_match), got 5',
                '42501: p_window_seconds must be 3600, the period of the policy endpoint.eng-policy (ratelimit.dropin_caller_limits is must_match), got 60',
                '42501: p_rpc_name has no policy rpc.no-policy: ratelimit.dropin_require_policy refuses limits chosen by the caller',
                '42501: p_endpoint has no policy endpoint.no-policy: ratelimit.dropin_require_policy refuses limits chosen by the caller'],
          'the JWT caller rule and the server''s limits on the apps'' tables (the reference)');
SELECT is(eng.rule_outcomes('unlogged'), (SELECT outcomes FROM eng.rule_on_tables),
          'the same caller rule on unlogged');
SELECT is(eng.rule_outcomes('memory'), (SELECT outcomes FROM eng.rule_on_tables),
          'the same caller rule on memory')
WHERE :memory_engine;
SELECT is(current_user::text, 'postgres', 'back to the superuser');

SELECT * FROM finish();
ROLLBACK;
