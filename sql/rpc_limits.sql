-- The game backend's per-RPC limits: check_rate_limit(p_rpc_name, p_max_calls, p_window_minutes)
-- over rpc_rate_limits, with the tests recommended for the original function, on the test clock.
SET timezone = 'UTC';
CREATE EXTENSION ratelimit_rpc_limits CASCADE;

SET ratelimit.test_clock = '2026-03-01 10:00:00+00';
SET request.jwt.claims = '{"sub":"a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11","role":"authenticated"}';

-- 11 calls with limit 10: the first 10 are allowed, the 11th is not.
SELECT n, check_rate_limit(p_rpc_name => 'complete-game', p_max_calls => 10, p_window_minutes => 1) AS allowed
FROM generate_series(1, 11) AS n;
SELECT user_id, rpc_name, call_count, window_start FROM rpc_rate_limits;

-- Exactly one window after it started, the window still holds (the original function compares
-- with <).
SET ratelimit.test_clock = '2026-03-01 10:01:00+00';
SELECT check_rate_limit(p_rpc_name => 'complete-game', p_max_calls => 10, p_window_minutes => 1) AS at_the_edge;
-- One microsecond later it has expired: the next 10 calls are allowed, and the row holds 10.
SET ratelimit.test_clock = '2026-03-01 10:01:00.000001+00';
SELECT n, check_rate_limit(p_rpc_name => 'complete-game', p_max_calls => 10, p_window_minutes => 1) AS allowed
FROM generate_series(1, 10) AS n;
SELECT call_count, window_start FROM rpc_rate_limits WHERE rpc_name = 'complete-game';

-- A second before the window ends, still denied at the 11th call.
SET ratelimit.test_clock = '2026-03-01 10:02:00+00';
SELECT check_rate_limit(p_rpc_name => 'complete-game', p_max_calls => 10, p_window_minutes => 1) AS eleventh_call;

-- The PostgREST form: named arguments, as supabase.rpc('check_rate_limit', {...}) sends them.
SELECT check_rate_limit(p_rpc_name => 'login-with-username-pin', p_max_calls => 5,
                        p_window_minutes => 15) AS named
FROM generate_series(1, 6);
-- Defaults: 10 calls per minute.
SELECT count(*) FILTER (WHERE check_rate_limit(p_rpc_name => 'claim-daily-gift')) AS allowed_of_12
FROM generate_series(1, 12);
SELECT rpc_name, call_count, window_start, window_expires_at
FROM rpc_rate_limits ORDER BY rpc_name;

-- Positional calls with one and two arguments: the defaults fill in the rest.
SELECT check_rate_limit('send-friend-request') AS one_argument,
       check_rate_limit('send-friend-request', 10) AS two_arguments;

-- Identity from the older setting request.jwt.claim.sub wins over request.jwt.claims.
SET request.jwt.claim.sub = 'b1ffcd00-0000-4000-8000-000000000002';
SELECT check_rate_limit(p_rpc_name => 'send-dm', p_max_calls => 100, p_window_minutes => 1);
SELECT user_id, call_count FROM rpc_rate_limits WHERE rpc_name = 'send-dm';
RESET request.jwt.claim.sub;

-- No identity: allowed, nothing written (the original function's fail-open for anonymous
-- callers).
SET request.jwt.claims = '{"role":"anon"}';
SELECT check_rate_limit(p_rpc_name => 'complete-game', p_max_calls => 1, p_window_minutes => 1) FROM generate_series(1, 3);
SET request.jwt.claims = '{"sub":null,"role":"anon"}';
SELECT check_rate_limit(p_rpc_name => 'complete-game', p_max_calls => 1, p_window_minutes => 1);
RESET request.jwt.claims;
SELECT check_rate_limit(p_rpc_name => 'complete-game', p_max_calls => 1, p_window_minutes => 1);
SELECT count(*) AS rows_after_anonymous_calls FROM rpc_rate_limits;

-- Explicit user id, for callers without JWT settings.
SELECT check_rate_limit_for_user('c2000000-0000-4000-8000-000000000003', 'lootbox-decide', 2, 1)
FROM generate_series(1, 3);
SELECT check_rate_limit_for_user(p_user_id => 'c2000000-0000-4000-8000-000000000003',
                                 p_rpc_name => 'lootbox-decide') AS defaults_10_per_minute;

-- Bad input: a clear error naming the argument, and nothing written.
SET request.jwt.claims = '{"sub":"a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11"}';
SELECT count(*) AS rows_before, sum(call_count) AS calls_before FROM rpc_rate_limits;
SELECT error_of($$SELECT check_rate_limit(p_rpc_name => NULL, p_max_calls => 10, p_window_minutes => 1)$$);
SELECT error_of($$SELECT check_rate_limit(p_rpc_name => '', p_max_calls => 10, p_window_minutes => 1)$$);
SELECT error_of($$SELECT check_rate_limit(p_rpc_name => repeat('k', 257), p_max_calls => 10, p_window_minutes => 1)$$);
SELECT error_of($$SELECT check_rate_limit(p_rpc_name => 'complete-game', p_max_calls => NULL, p_window_minutes => 1)$$);
SELECT error_of($$SELECT check_rate_limit(p_rpc_name => 'complete-game', p_max_calls => 0, p_window_minutes => 1)$$);
SELECT error_of($$SELECT check_rate_limit(p_rpc_name => 'complete-game', p_max_calls => -5, p_window_minutes => 1)$$);
SELECT error_of($$SELECT check_rate_limit(p_rpc_name => 'complete-game', p_max_calls => 10, p_window_minutes => NULL)$$);
SELECT error_of($$SELECT check_rate_limit(p_rpc_name => 'complete-game', p_max_calls => 10, p_window_minutes => 0)$$);
SELECT error_of($$SELECT check_rate_limit(p_rpc_name => 'complete-game', p_max_calls => 10, p_window_minutes => -1)$$);
SELECT error_of($$SELECT check_rate_limit(p_rpc_name => 'complete-game', p_max_calls => 10, p_window_minutes => 525601)$$);
SELECT error_of($$SELECT check_rate_limit(p_rpc_name => 'complete-game', p_max_calls => 10, p_window_minutes => 2147483647)$$);
SELECT error_of($$SELECT check_rate_limit_for_user(NULL, 'x', 10, 1)$$);
SELECT error_of($$SELECT check_rate_limit_for_user('not a uuid', 'x', 10, 1)$$);
-- A malformed identity is an error, not an anonymous allow.
SET request.jwt.claims = '{"sub":"not-a-uuid"}';
SELECT error_of($$SELECT check_rate_limit(p_rpc_name => 'complete-game', p_max_calls => 10, p_window_minutes => 1)$$);
SET request.jwt.claims = '{"sub":12345}';
SELECT error_of($$SELECT check_rate_limit(p_rpc_name => 'complete-game', p_max_calls => 10, p_window_minutes => 1)$$);
SET request.jwt.claims = '{"sub":"a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11"';
SELECT error_of($$SELECT check_rate_limit(p_rpc_name => 'complete-game', p_max_calls => 10, p_window_minutes => 1)$$);
SET request.jwt.claim.sub = 'a0eebc99; DROP TABLE rpc_rate_limits; --';
SELECT error_of($$SELECT check_rate_limit(p_rpc_name => 'complete-game', p_max_calls => 10, p_window_minutes => 1)$$);
RESET request.jwt.claim.sub;
RESET request.jwt.claims;
-- Bad input is refused even for anonymous callers.
SELECT error_of($$SELECT check_rate_limit(p_rpc_name => 'complete-game', p_max_calls => 0, p_window_minutes => 1)$$);
SELECT count(*) AS rows_after, sum(call_count) AS calls_after FROM rpc_rate_limits;

-- Keys are data: quotes and SQL in an rpc name are stored as they are.
SELECT check_rate_limit_for_user('c2000000-0000-4000-8000-000000000003',
                                 $$x'); DELETE FROM rpc_rate_limits; --$$, 5, 1);
SELECT rpc_name FROM rpc_rate_limits WHERE rpc_name LIKE 'x%';

-- One row per (user_id, rpc_name), whatever the traffic.
SELECT count(*) AS groups_with_more_than_one_row
FROM (SELECT user_id, rpc_name FROM rpc_rate_limits
      GROUP BY user_id, rpc_name HAVING count(*) > 1) AS g;

-- Cleanup deletes rows whose window ended more than p_older_than ago, and nothing else.
SET ratelimit.test_clock = '2026-03-03 10:00:00+00';
SELECT check_rate_limit_for_user('d3000000-0000-4000-8000-000000000004', 'year-quota', 3,
                                 525600);
SET ratelimit.test_clock = '2026-03-03 10:16:00+00';
SELECT cleanup_rpc_rate_limits() AS deleted_default_48_hours;
SELECT rpc_name FROM rpc_rate_limits ORDER BY rpc_name;
SELECT cleanup_rpc_rate_limits(interval '0') AS deleted_all_expired;
SELECT rpc_name, call_count FROM rpc_rate_limits ORDER BY rpc_name;
SELECT error_of($$SELECT cleanup_rpc_rate_limits(NULL)$$);
SELECT error_of($$SELECT cleanup_rpc_rate_limits(interval '-1 hour')$$);

RESET ratelimit.test_clock;
DROP EXTENSION ratelimit_rpc_limits, ratelimit;
