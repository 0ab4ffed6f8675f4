-- A tour of ratelimit, run by scripts/demo.sh against a throwaway cluster.
\pset footer off
\echo
\echo '== CREATE EXTENSION ratelimit'
CREATE EXTENSION ratelimit;
-- A fresh install has no policies: load the apps' limits, which ship as presets.
SELECT * FROM ratelimit.presets();
SELECT preset, ratelimit.load_preset(preset) AS rows_written FROM ratelimit.presets();

\echo
\echo '== Each app''s drop-ins are an extension of their own, in the schema the app calls'
-- The per-RPC limits and the endpoint limits in public; the sliding-window app's check_rate_limit
-- has the per-RPC one's name and argument types, so it gets a schema of its own (in a database of
-- its app alone it would be in public).
CREATE EXTENSION ratelimit_rpc_limits;
CREATE EXTENSION ratelimit_endpoint_limits;
CREATE SCHEMA cleanup_app;
CREATE EXTENSION ratelimit_sliding_window_limits SCHEMA cleanup_app;
SELECT extname AS extension, extnamespace::regnamespace AS schema FROM pg_extension
 WHERE extname LIKE 'ratelimit%' ORDER BY 1;

\echo
\echo '== Per-RPC limits: check_rate_limit for the JWT caller (as PostgREST sets it), login: 5 per 15 minutes'
SET request.jwt.claims = '{"sub":"a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11","role":"authenticated"}';
SELECT n AS call,
       check_rate_limit(p_rpc_name => 'login-with-username-pin',
                        p_max_calls => 5, p_window_minutes => 15) AS allowed
FROM generate_series(1, 7) AS n;

\echo
\echo '== One row per (user, rpc): denied calls are counted too'
SELECT user_id, rpc_name, call_count, window_start FROM rpc_rate_limits;

\echo
\echo '== Sixteen minutes later (test clock, superuser only) the window has restarted'
SELECT set_config('ratelimit.test_clock', (clock_timestamp() + interval '16 minutes')::text, false) IS NOT NULL AS clock_moved;
SELECT check_rate_limit(p_rpc_name => 'login-with-username-pin', p_max_calls => 5, p_window_minutes => 15) AS allowed;
SELECT rpc_name, call_count, window_start FROM rpc_rate_limits;
RESET ratelimit.test_clock;

\echo
\echo '== No identity (anon key): allowed and not counted'
RESET request.jwt.claims;
SELECT check_rate_limit(p_rpc_name => 'complete-game', p_max_calls => 20, p_window_minutes => 1) AS allowed;

\echo
\echo '== A trusted caller names the user explicitly'
SELECT check_rate_limit_for_user('b1ffcd00-0000-4000-8000-000000000002', 'complete-game', 20, 1) AS allowed;

\echo
\echo '== Bad input is refused with SQLSTATE 22023 and the argument''s name, and writes nothing'
\set VERBOSITY verbose
\set ON_ERROR_STOP 0
SELECT check_rate_limit(p_rpc_name => 'complete-game', p_max_calls => 0, p_window_minutes => 1);
SET request.jwt.claims = '{"sub":"not-a-uuid"}';
SELECT check_rate_limit(p_rpc_name => 'complete-game', p_max_calls => 20, p_window_minutes => 1);
\set ON_ERROR_STOP 1
RESET request.jwt.claims;

\echo
\echo '== Hourly endpoint limits: increment_rate_limit, 50 tasks per hour in batches (denied batches count too)'
SELECT n AS batch, increment_rate_limit('a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11', 'tasks', 50, 3600, 20) AS result
FROM generate_series(1, 3) AS n;

\echo
\echo '== Sliding-window limits: check_rate_limit(p_key, p_limit, p_window_seconds), 3 per minute per key, called as the app does; a denied call changes nothing'
SELECT 1 AS call, * FROM cleanup_app.check_rate_limit('ip:demo', 3, 60)
UNION ALL SELECT 2, * FROM cleanup_app.check_rate_limit('ip:demo', 3, 60)
UNION ALL SELECT 3, * FROM cleanup_app.check_rate_limit('ip:demo', 3, 60)
UNION ALL SELECT 4, * FROM cleanup_app.check_rate_limit('ip:demo', 3, 60);

\echo
\echo '== Sliding-window tiers, check_rate_limit_tiers (global 1000/min, IP 5/min, email 3/hour): the 4th request for one email is denied, no tier charged'
SELECT n AS request, r.* FROM generate_series(1, 4) AS n,
       LATERAL cleanup_app.check_rate_limit_tiers('203.0.113.' || n,
                                      CASE WHEN n % 2 = 0 THEN 'Alice@Example.com' ELSE 'alice@example.com' END) AS r;

\echo
\echo '== Stats: counters per table'
SELECT 'rpc_rate_limits' AS "table", count(*) AS rows, sum(call_count) AS counted FROM rpc_rate_limits
UNION ALL SELECT 'rate_limits', count(*), sum(counter) FROM rate_limits
UNION ALL SELECT 'cleanup_app.rate_limit_buckets', count(*), sum(count) FROM cleanup_app.rate_limit_buckets;

\echo
\echo '== Native API: ratelimit.consume(key, limit, period) -- fixed window on the table engine by default'
SET ratelimit.test_clock = '2026-06-01 12:00:00+00';
-- n calls in a row, one after the other (a function in FROM would be evaluated only once).
CREATE FUNCTION pg_temp.calls(p_key text, p_algorithm text, p_engine text, p_calls integer)
RETURNS TABLE(call integer, allowed boolean, remaining integer, retry_after_ms bigint,
              reset_after_ms bigint)
LANGUAGE plpgsql AS $$
DECLARE
    d ratelimit.decision;
BEGIN
    FOR i IN 1..p_calls LOOP
        d := ratelimit.consume(p_key, 3, '10 seconds', p_algorithm => p_algorithm,
                               p_engine => p_engine);
        call := i;
        allowed := d.allowed;
        remaining := d.remaining;
        retry_after_ms := d.retry_after_ms;
        reset_after_ms := d.reset_after_ms;
        RETURN NEXT;
    END LOOP;
END
$$;
SELECT * FROM pg_temp.calls('api:user-42', 'fixed_window', 'table', 4);

\echo
\echo '== The same 4 calls with every algorithm, on the unlogged engine (3 per 10 seconds)'
SELECT a AS algorithm, c.*
FROM unnest(ARRAY['fixed_window', 'rolling_window', 'sliding_window', 'sliding_window_counter',
                  'token_bucket', 'gcra']) WITH ORDINALITY AS a(a, o),
     LATERAL pg_temp.calls('demo:' || a, a, 'unlogged', 4) AS c
ORDER BY o, c.call;

\echo
\echo '== retry_after_ms is true: 1 ms earlier is still denied, exactly then it is allowed'
SET ratelimit.test_clock = '2026-06-01 12:00:09.999+00';
SELECT allowed, retry_after_ms FROM ratelimit.consume('api:user-42', 3, '10 seconds');
SET ratelimit.test_clock = '2026-06-01 12:00:10+00';
SELECT allowed, remaining FROM ratelimit.consume('api:user-42', 3, '10 seconds');

\echo
\echo '== peek decides without consuming; refund gives units back; block denies until it ends; reset forgets'
SELECT 'peek' AS step, * FROM ratelimit.peek('api:user-42', 3, '10 seconds')
UNION ALL SELECT 'refund 1', * FROM ratelimit.refund('api:user-42', 3, '10 seconds', 1);
SELECT ratelimit.block('api:abuser', '15 minutes') AS blocked_until;
SELECT * FROM ratelimit.consume('api:abuser', 100, '1 minute');
SELECT ratelimit.reset('api:abuser') AS forgotten;
SELECT * FROM ratelimit.consume('api:abuser', 100, '1 minute');

\echo
\echo '== Calendar quotas: 1,000 a day from midnight in Berlin (the day the clocks go forward lasts 23 hours), 50,000 a month in UTC'
SET ratelimit.test_clock = '2026-03-28 23:00:00+00';
SELECT 'Berlin midnight, 2026-03-29' AS at, allowed, remaining, reset_after_ms / 3600000 AS hours_to_reset
  FROM ratelimit.consume('quota:acme', 1000, '1 day', p_time_zone => 'Europe/Berlin');
SET ratelimit.test_clock = '2026-03-29 22:00:00+00';
SELECT 'Berlin midnight, 2026-03-30' AS at, allowed, remaining, reset_after_ms / 3600000 AS hours_to_reset
  FROM ratelimit.consume('quota:acme', 1000, '1 day', p_time_zone => 'Europe/Berlin');
SELECT 'UTC month, from 2026-03-29 22:00' AS at, allowed, remaining, reset_after_ms / 3600000 AS hours_to_reset
  FROM ratelimit.consume('quota:globex', 50000, '1 month');
RESET ratelimit.test_clock;

\echo
\echo '== Bad input names its argument (SQLSTATE 22023) and writes nothing'
\set ON_ERROR_STOP 0
SELECT * FROM ratelimit.consume('api:user-42', 3, '2 months');
SELECT * FROM ratelimit.consume('api:user-42', 3, '1 day', p_time_zone => 'Mars/Olympus_Mons');
SELECT * FROM ratelimit.consume('api:user-42', 3, '10 seconds', p_algorithm => 'leaky');
\set ON_ERROR_STOP 1

\echo
\echo '== Native key states, one row per key'
SELECT 'table' AS engine, count(*) AS keys FROM ratelimit.key_state
UNION ALL SELECT 'unlogged', count(*) FROM ratelimit.key_state_unlogged;

\echo
\echo '== Memory engine (shared_preload_libraries = ''ratelimit''): the same calls, decided in shared memory'
SET ratelimit.test_clock = '2026-06-01 12:00:00+00';
SELECT a AS algorithm, c.*
FROM unnest(ARRAY['fixed_window', 'token_bucket', 'gcra']) WITH ORDINALITY AS a(a, o),
     LATERAL pg_temp.calls('demo:' || a, a, 'memory', 4) AS c
ORDER BY o, c.call;

\echo
\echo '== Not transactional: a decision survives its transaction''s rollback, and read-only transactions decide'
BEGIN;
SELECT allowed, remaining FROM ratelimit.consume('api:rollback', 3, '10 seconds', p_engine => 'memory');
ROLLBACK;
BEGIN READ ONLY;
SELECT allowed, remaining FROM ratelimit.consume('api:rollback', 3, '10 seconds', p_engine => 'memory');
COMMIT;
RESET ratelimit.test_clock;

\echo
\echo '== A million decisions over 100,000 keys in one query (the store holds them all; see bench/memory.sh)'
\timing on
SELECT count(*) FILTER (WHERE (d).allowed) AS allowed
FROM (SELECT ratelimit.consume('bulk:' || (g % 100000), 1000000, '1 hour', p_engine => 'memory') AS d
      FROM generate_series(1, 1000000) AS g) AS s;
\timing off

\echo
\echo '== Memory engine stats: keys tracked, capacity, shared memory, evictions, expiries, decisions'
SELECT entries, capacity, shared_bytes, round(shared_bytes::numeric / capacity, 1) AS bytes_per_key,
       evictions, expired, allowed, denied
FROM ratelimit.memory_stats;

\echo
\echo '== Policies: the apps'' limits by name (ratelimit.policies); edit a row and the next call follows it'
-- n calls of check_all in a row (a function in FROM would run once, not once per row).
CREATE FUNCTION pg_temp.policy_calls(p_policies text[], p_keys text[], p_calls integer,
                                     p_tier text DEFAULT NULL)
RETURNS TABLE(call integer, allowed boolean, policy text, "limit" integer, remaining integer,
              retry_after_ms bigint, reason text)
LANGUAGE plpgsql AS $$
DECLARE
    d ratelimit.policy_decision;
BEGIN
    FOR i IN 1..p_calls LOOP
        d := ratelimit.check_all(p_policies, p_keys, 1, p_tier);
        call := i;
        allowed := d.allowed;
        policy := d.policy;
        "limit" := d."limit";
        remaining := d.remaining;
        retry_after_ms := d.retry_after_ms;
        reason := d.reason;
        RETURN NEXT;
    END LOOP;
END
$$;
SET ratelimit.test_clock = '2026-06-01 12:00:30+00';
SELECT name, algorithm, "limit", period, engine FROM ratelimit.policies
WHERE name IN ('rpc.auth', 'activity.create_post', 'endpoint.ai-inference', 'lotto.ip', 'cleanup.email')
ORDER BY name;
SELECT * FROM pg_temp.policy_calls(ARRAY['activity.bulk_import'], ARRAY['user-42'], 6);
UPDATE ratelimit.policies SET "limit" = 7 WHERE name = 'activity.bulk_import';
SELECT * FROM pg_temp.policy_calls(ARRAY['activity.bulk_import'], ARRAY['user-42'], 3);

\echo
\echo '== Tiers (premium x2, verified x1.5, admin bypass) and allow/deny lists (inet/cidr)'
SELECT t AS tier, c.* FROM unnest(ARRAY['premium', 'verified', 'admin']) AS t,
     LATERAL pg_temp.policy_calls(ARRAY['activity.create_post'], ARRAY['user-' || t], 1, t) AS c;
INSERT INTO ratelimit.access_list (action, ip, reason) VALUES ('deny', '2001:db8:bad::/48', 'abuse');
SELECT allowed, policy, reason FROM ratelimit.check('activity.create_post', 'user-7', 1, NULL, '2001:db8:bad::17');

\echo
\echo '== All or nothing: global -> IP -> transaction in one decision; the denial charges no other policy'
SELECT * FROM pg_temp.policy_calls(ARRAY['lotto.global', 'lotto.ip', 'lotto.transaction'],
                                   ARRAY['global', '198.51.100.23', 'txn-1'], 11)
WHERE call IN (1, 10, 11);
SELECT (ratelimit.check('lotto.ip', '198.51.100.23', 0)).remaining AS ip_remaining_after_11_calls;

\echo
\echo '== HTTP: the headers and the 429 body an edge function copies into its response'
SELECT (ratelimit.check_http(ARRAY['endpoint.create-post'], ARRAY['user-9'], 5)) -> 'headers' AS five_posts_allowed;
SELECT jsonb_pretty(ratelimit.check_http(ARRAY['endpoint.create-post'], ARRAY['user-9'],
                                         p_body_shape => 'detailed') - 'decision') AS sixth_post_denied;
SELECT ratelimit.http_headers(ratelimit.check('endpoint.create-post', 'user-9'), 'unix') AS unix_reset_headers;

\echo
\echo '== Leases: at most 2 exports in flight per customer; each ends with its transaction'
BEGIN;
SELECT allowed, in_flight FROM ratelimit.acquire('export:acme', 2);
SELECT allowed, in_flight FROM ratelimit.acquire('export:acme', 2);
SELECT allowed, in_flight FROM ratelimit.acquire('export:acme', 2) AS third_export;
COMMIT;
SELECT ratelimit.in_flight('export:acme') AS in_flight_after_commit;

\echo
\echo '== Leases by policy: quota_unit concurrent-requests; tiers apply, the headers say qu="concurrent-requests", check refuses it'
INSERT INTO ratelimit.policies (name, "limit", period, engine, quota_unit, description)
VALUES ('export.running', 2, '10 minutes', 'memory', 'concurrent-requests',
        'Exports in flight per customer, each held at most 10 minutes');
BEGIN;
SELECT allowed, "limit", in_flight FROM ratelimit.acquire_policy('export.running', 'acme');
SELECT allowed, "limit", in_flight FROM ratelimit.acquire_policy('export.running', 'acme');
SELECT allowed, in_flight, retry_after_ms FROM ratelimit.acquire_policy('export.running', 'acme') AS third_export;
SELECT allowed, "limit", in_flight FROM ratelimit.acquire_policy('export.running', 'acme', p_tier => 'premium') AS premium_doubles_it;
SELECT ratelimit.http_headers(ratelimit.lease_decision('export.running',
           ratelimit.acquire_policy('export.running', 'acme'))) AS full_headers;
COMMIT;
SELECT allowed, in_flight FROM ratelimit.acquire_policy('export.running', 'acme') AS after_commit;
\set ON_ERROR_STOP 0
SELECT ratelimit.check('export.running', 'acme');
\set ON_ERROR_STOP 1

\echo
\echo '== Reservations: 10,000 LLM tokens an hour; reserve an estimate before the call, settle with what it used'
SELECT reservation_id AS llm_call, allowed, remaining FROM ratelimit.reserve('llm:acme', 10000, '1 hour', 2000) \gset
SELECT allowed, remaining FROM ratelimit.settle(:llm_call, 1200) AS used_less_refunded;
SELECT reservation_id AS llm_call FROM ratelimit.reserve('llm:acme', 10000, '1 hour', 2000) \gset
SELECT allowed, remaining, retry_after_ms FROM ratelimit.settle(:llm_call, 12000) AS used_more_charged_past_the_limit;
SELECT allowed FROM ratelimit.consume('llm:acme', 10000, '1 hour', 1) AS next_call_denied;
SELECT reservation_id AS llm_call FROM ratelimit.reserve('llm:beta', 10000, '1 hour', 2000) \gset
SELECT remaining FROM ratelimit.cancel(:llm_call) AS cancelled_gives_it_back;

\echo
\echo '== Reservations by policy: decided as check decides (tiers, lists, counters); the settle corrects the policy''s counter'
INSERT INTO ratelimit.policies (name, "limit", period, description)
VALUES ('llm.tokens', 10000, '1 hour', 'LLM tokens per customer and hour');
SELECT reservation_id AS llm_call, "limit", remaining FROM ratelimit.reserve_policy('llm.tokens', 'acme', 2000, p_tier => 'premium') \gset
SELECT :limit AS premium_limit, :remaining AS remaining_after_reserve;
SELECT allowed, "limit", remaining FROM ratelimit.settle(:llm_call, 3500) AS settled_on_the_policy;
SELECT allowed, remaining FROM ratelimit.check('llm.tokens', 'acme', 0, 'premium') AS policy_counter_after;
SELECT allowed, remaining FROM ratelimit.peek('acme', 10000, '1 hour') AS native_key_untouched;

\echo
\echo '== Delay instead of deny: a geocoder takes 2 requests a second; a call that would wait at most a second is admitted for later (retry_after_ms), its units taken now; a window algorithm refuses p_max_wait'
SELECT n AS call, d.allowed, d.remaining, d.retry_after_ms
  FROM generate_series(1, 6) AS n
 CROSS JOIN LATERAL ratelimit.consume('geocoder:acme', 2, '1 second', p_cost => 1 + 0 * n,
                                      p_algorithm => 'gcra', p_max_wait => '1 second') AS d;
\set ON_ERROR_STOP 0
SELECT * FROM ratelimit.consume('geocoder:acme', 2, '1 second', p_max_wait => '1 second');
\set ON_ERROR_STOP 1

\echo
\echo '== Escalating penalties: 3 guesses a minute; each denial blocks longer (1 min, 5 min, 30 min, then 24 h), forgiven one step a day'
INSERT INTO ratelimit.policies (name, "limit", period, penalty_blocks, penalty_decay, description)
VALUES ('auth.guess', 3, '1 minute', '{1 minute,5 minutes,30 minutes,24 hours}', '1 day',
        'Password guesses per IP, with escalating blocks');
SELECT n AS call, d.allowed, d.reason, d.penalty_level, d.retry_after_ms
  FROM generate_series(1, 4) AS n
 CROSS JOIN LATERAL ratelimit.check('auth.guess', 'ip:203.0.113.7', p_cost => 1 + 0 * n) AS d;
SELECT allowed, reason, penalty_level, retry_after_ms FROM ratelimit.check('auth.guess', 'ip:203.0.113.7') AS during_the_block;
SET ratelimit.test_clock = '2026-06-01 12:01:31+00';
SELECT n AS call, d.allowed, d.reason, d.penalty_level, d.retry_after_ms
  FROM generate_series(1, 4) AS n
 CROSS JOIN LATERAL ratelimit.check('auth.guess', 'ip:203.0.113.7', p_cost => 1 + 0 * n) AS d;
SELECT ratelimit.reset_policy_key('auth.guess', 'ip:203.0.113.7') AS reset_starts_the_ladder_over;

\echo
\echo '== Observability: per-policy counters and top offenders'
SELECT * FROM ratelimit.policy_stats ORDER BY policy;
SELECT policy, subject, denials FROM ratelimit.top_offenders(3);
RESET ratelimit.test_clock;
