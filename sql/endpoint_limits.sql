-- The hourly endpoint limits: increment_rate_limit over rate_limits; windows aligned to
-- multiples of their length, batch increments, denied calls counted, retryAfter in whole seconds
-- (>= 1 when denied).
SET timezone = 'UTC';
CREATE EXTENSION ratelimit_endpoint_limits CASCADE;

-- The endpoint limits' batch example: tasks, 50 per hour, incremented by the batch size.
SET ratelimit.test_clock = '2025-10-28 07:01:00+00';
SELECT increment_rate_limit('a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11', 'tasks', 50, 3600, 20);
SELECT increment_rate_limit('a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11', 'tasks', 50, 3600, 30);
-- The next batch does not fit: denied, and counted (the original 429 shows current above limit).
SELECT increment_rate_limit('a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11', 'tasks', 50, 3600, 5);
SELECT user_id, endpoint, counter, window_start, expires_at, created_at FROM rate_limits;

-- Assessments, 10 per hour: 11 calls, the 11th is the original 429 (current 11, retryAfter 3540).
SELECT n, increment_rate_limit('a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11', 'assessments', 10, 3600)
FROM generate_series(1, 11) AS n;

-- Window edges, with the hour aligned to 07:00: the last microsecond of the window still
-- denies with retryAfter 1; at 08:00:00 a new window (a new row) starts.
SET ratelimit.test_clock = '2025-10-28 07:59:59+00';
SELECT increment_rate_limit('a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11', 'assessments', 10, 3600);
SET ratelimit.test_clock = '2025-10-28 07:59:59.999999+00';
SELECT increment_rate_limit('a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11', 'assessments', 10, 3600);
SET ratelimit.test_clock = '2025-10-28 08:00:00+00';
SELECT increment_rate_limit('a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11', 'assessments', 10, 3600);
SET ratelimit.test_clock = '2025-10-28 08:00:01+00';
SELECT increment_rate_limit('a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11', 'assessments', 10, 3600);
SELECT endpoint, counter, window_start, expires_at FROM rate_limits
WHERE endpoint = 'assessments' ORDER BY window_start;

-- Named arguments, as supabase.rpc('increment_rate_limit', {...}) sends them.
SELECT increment_rate_limit(p_user_id => 'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11',
                            p_endpoint => 'posts', p_limit => 5, p_window_seconds => 3600)
       ->> 'allowed' AS allowed;

-- Windows are aligned to multiples of their length since the epoch, not to the first call.
SET ratelimit.test_clock = '2025-10-28 08:00:07+00';
SELECT increment_rate_limit('b1ffcd00-0000-4000-8000-000000000002', 'short', 2, 10);
SELECT window_start, expires_at FROM rate_limits WHERE endpoint = 'short';

-- An authenticated caller may only spend its own quota.
SET request.jwt.claims = '{"sub":"b1ffcd00-0000-4000-8000-000000000002","role":"authenticated"}';
SELECT error_of($$SELECT increment_rate_limit('a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11', 'posts', 5, 3600)$$);
SELECT increment_rate_limit('b1ffcd00-0000-4000-8000-000000000002', 'posts', 5, 3600) ->> 'allowed' AS own_quota;
RESET request.jwt.claims;

-- Bad input: a clear error naming the argument, nothing written.
SELECT count(*) AS rows_before, sum(counter) AS counted_before FROM rate_limits;
SELECT error_of($$SELECT increment_rate_limit(NULL, 'tasks', 50, 3600)$$);
SELECT error_of($$SELECT increment_rate_limit('a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11', NULL, 50, 3600)$$);
SELECT error_of($$SELECT increment_rate_limit('a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11', '', 50, 3600)$$);
SELECT error_of($$SELECT increment_rate_limit('a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11', 'tasks', NULL, 3600)$$);
SELECT error_of($$SELECT increment_rate_limit('a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11', 'tasks', 0, 3600)$$);
SELECT error_of($$SELECT increment_rate_limit('a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11', 'tasks', 50, 0)$$);
SELECT error_of($$SELECT increment_rate_limit('a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11', 'tasks', 50, 31536001)$$);
SELECT error_of($$SELECT increment_rate_limit('a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11', 'tasks', 50, 3600, 0)$$);
SELECT error_of($$SELECT increment_rate_limit('a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11', 'tasks', 50, 3600, -3)$$);
SELECT error_of($$SELECT increment_rate_limit('a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11', 'tasks', 50, 3600, NULL)$$);
SELECT error_of($$SELECT increment_rate_limit('a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11', 'tasks', 2147483648, 3600)$$);
SELECT error_of($$SELECT increment_rate_limit('a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11', 'tasks', 50, 3600, 2147483648)$$);
SELECT count(*) AS rows_after, sum(counter) AS counted_after FROM rate_limits;

-- The largest increments saturate the counter instead of overflowing it, and a saturated
-- counter denies.
SELECT increment_rate_limit('c2000000-0000-4000-8000-000000000003', 'huge', 2147483646, 3600, 2147483000);
SELECT increment_rate_limit('c2000000-0000-4000-8000-000000000003', 'huge', 2147483646, 3600, 2147483647);
SELECT counter FROM rate_limits WHERE endpoint = 'huge';

-- Cleanup deletes the windows that have ended, and only those.
SET ratelimit.test_clock = '2025-10-28 08:59:59.999999+00';
SELECT cleanup_expired_rate_limits() AS deleted;
SELECT endpoint, window_start FROM rate_limits ORDER BY endpoint, window_start;
SET ratelimit.test_clock = '2025-10-28 09:00:00+00';
SELECT cleanup_expired_rate_limits() AS deleted;
SELECT count(*) AS rows_left FROM rate_limits;

RESET ratelimit.test_clock;
DROP EXTENSION ratelimit_endpoint_limits, ratelimit;
