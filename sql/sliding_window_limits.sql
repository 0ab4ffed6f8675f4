-- The orphaned-user cleanup's sliding-window limits: check_rate_limit(p_key, p_limit,
-- p_window_seconds) over per-second buckets, a true sliding window; and its three tiers
-- (check_rate_limit_tiers) in one all-or-nothing call.
SET timezone = 'UTC';
CREATE EXTENSION ratelimit_sliding_window_limits CASCADE;

-- Its call forms. Named, as supabase.rpc('check_rate_limit', {...}) sends it:
SET ratelimit.test_clock = '2025-10-28 12:00:45+00';
SELECT * FROM check_rate_limit(p_key => 'ip:a1b2c3', p_limit => 5, p_window_seconds => 60);
-- Positional, as the app's documents call it (only this app's drop-ins are in the database;
-- later calls add a fourth argument, the cost).
SELECT * FROM check_rate_limit('ip:a1b2c3', 5, 60);

-- A limit of 5 in 60 s: calls at 45 s, 45 s, 50 s, 55 s, 59 s; the 6th is denied, changes
-- nothing, and waits for the oldest bucket (12:00:45) to leave the window at 12:01:45.
SET ratelimit.test_clock = '2025-10-28 12:00:50+00';
SELECT * FROM check_rate_limit('ip:a1b2c3', 5, 60, 1);
SET ratelimit.test_clock = '2025-10-28 12:00:55+00';
SELECT * FROM check_rate_limit('ip:a1b2c3', 5, 60, 1);
SET ratelimit.test_clock = '2025-10-28 12:00:59.250+00';
SELECT * FROM check_rate_limit('ip:a1b2c3', 5, 60, 1);
SELECT * FROM check_rate_limit('ip:a1b2c3', 5, 60, 1);
SELECT key, bucket_time, count FROM rate_limit_buckets ORDER BY bucket_time;
-- The second before, at, and after the boundary.
SET ratelimit.test_clock = '2025-10-28 12:01:44+00';
SELECT * FROM check_rate_limit('ip:a1b2c3', 5, 60, 1);
SET ratelimit.test_clock = '2025-10-28 12:01:44.999999+00';
SELECT * FROM check_rate_limit('ip:a1b2c3', 5, 60, 1);
SET ratelimit.test_clock = '2025-10-28 12:01:45+00';
SELECT * FROM check_rate_limit('ip:a1b2c3', 5, 60, 1);
SELECT * FROM check_rate_limit('ip:a1b2c3', 5, 60, 1);
SET ratelimit.test_clock = '2025-10-28 12:01:46+00';
SELECT * FROM check_rate_limit('ip:a1b2c3', 5, 60, 1);
SELECT bucket_time, count FROM rate_limit_buckets WHERE key = 'ip:a1b2c3' ORDER BY bucket_time;

-- A cost counts that many calls and never debits partially.
SELECT * FROM check_rate_limit('batch', 10, 60, 7);
SELECT * FROM check_rate_limit('batch', 10, 60, 4);
SELECT * FROM check_rate_limit('batch', 10, 60, 3);

-- The cleanup's tiers: global 1000/60 s, IP 5/60 s, email 3/3600 s. Three requests for one
-- email from three IPs pass; the fourth is denied by the email tier with its retry-after,
-- and charges no tier.
SET ratelimit.test_clock = '2025-10-28 13:00:00+00';
SELECT * FROM check_rate_limit_tiers('203.0.113.7', 'Alice@Example.com');
SET ratelimit.test_clock = '2025-10-28 13:00:10+00';
SELECT * FROM check_rate_limit_tiers('203.0.113.8', 'alice@example.com ');
SET ratelimit.test_clock = '2025-10-28 13:00:20+00';
SELECT * FROM check_rate_limit_tiers(p_ip => '2001:db8::1', p_email => 'alice@example.com');
SET ratelimit.test_clock = '2025-10-28 13:00:30+00';
SELECT * FROM check_rate_limit_tiers('203.0.113.9', 'alice@example.com');
-- IP and email are stored only as SHA-256 digests.
SELECT key, count FROM rate_limit_buckets
WHERE key = 'global' OR key LIKE 'email:%' OR key LIKE 'ip:%' AND length(key) > 20
ORDER BY key, bucket_time;
SELECT count(*) AS clear_text_keys FROM rate_limit_buckets
WHERE key LIKE '%alice%' OR key LIKE '%203.0.113%';
-- One IP, five emails: the sixth request is denied by the IP tier.
SELECT (check_rate_limit_tiers('198.51.100.1', 'user' || n || '@example.com')).*
FROM generate_series(1, 6) AS n;
-- The global tier (here 3 per 60 s, to keep the test short) denies first, in the tiers' order.
SELECT * FROM check_rate_limit_tiers('198.51.100.2', 'bob@example.com', p_global_limit => 3);

-- Bad input: a clear error naming the argument, nothing written.
SELECT count(*) AS buckets_before, sum(count) AS counted_before FROM rate_limit_buckets;
SELECT error_of($$SELECT * FROM check_rate_limit(NULL::text, 5, 60, 1)$$);
SELECT error_of($$SELECT * FROM check_rate_limit('', 5, 60, 1)$$);
SELECT error_of($$SELECT * FROM check_rate_limit(repeat('k', 300), 5, 60, 1)$$);
SELECT error_of($$SELECT * FROM check_rate_limit('k', 0, 60, 1)$$);
SELECT error_of($$SELECT * FROM check_rate_limit('k', NULL, 60, 1)$$);
SELECT error_of($$SELECT * FROM check_rate_limit('k', 5, 0, 1)$$);
SELECT error_of($$SELECT * FROM check_rate_limit('k', 5, 31536001, 1)$$);
SELECT error_of($$SELECT * FROM check_rate_limit('k', 5, 60, -1)$$);
SELECT error_of($$SELECT * FROM check_rate_limit('k', 5, 60, 6)$$);
SELECT error_of($$SELECT * FROM check_rate_limit('k', 2147483648, 60, 1)$$);
SELECT error_of($$SELECT * FROM check_rate_limit_tiers(NULL, 'a@b.c')$$);
SELECT error_of($$SELECT * FROM check_rate_limit_tiers('1.2.3.4', '')$$);
SELECT error_of($$SELECT * FROM check_rate_limit_tiers('1.2.3.4', 'a@b.c', p_ip_limit => -1)$$);
SELECT error_of($$SELECT * FROM check_rate_limit_tiers('1.2.3.4', 'a@b.c', p_email_window_seconds => 0)$$);
SELECT count(*) AS buckets_after, sum(count) AS counted_after FROM rate_limit_buckets;

-- Exactness needs READ COMMITTED: other levels are refused, not silently inexact.
BEGIN ISOLATION LEVEL REPEATABLE READ;
SELECT error_of($$SELECT * FROM check_rate_limit('k', 5, 60, 1)$$);
COMMIT;

-- Cleanup keeps every bucket that still counts for the longest window in use (3600 s here).
SET ratelimit.test_clock = '2025-10-28 13:59:59+00';
SELECT cleanup_old_rate_limit_buckets() AS deleted;
SELECT count(*) FILTER (WHERE key LIKE 'email:%') AS email_buckets_kept FROM rate_limit_buckets;
SET ratelimit.test_clock = '2025-10-28 14:00:00+00';
SELECT cleanup_old_rate_limit_buckets() AS deleted;
SELECT bucket_time, key FROM rate_limit_buckets ORDER BY bucket_time, key;
SET ratelimit.test_clock = '2025-10-28 15:00:00+00';
SELECT cleanup_old_rate_limit_buckets() AS deleted;
SELECT count(*) AS buckets_left FROM rate_limit_buckets;

-- Buckets counted at the largest limit in two seconds, then summed under a longer window: the
-- count stops at 2^31 - 1, as the other apps' counts do, and the call is denied.
SET ratelimit.test_clock = '2025-10-28 16:00:00+00';
SELECT * FROM check_rate_limit('huge', 2147483647, 1, 2147483647);
SELECT * FROM check_rate_limit('global', 2147483647, 1, 2147483647);
SET ratelimit.test_clock = '2025-10-28 16:00:01+00';
SELECT * FROM check_rate_limit('huge', 2147483647, 1, 2147483647);
SELECT * FROM check_rate_limit('global', 2147483647, 1, 2147483647);
SELECT * FROM check_rate_limit('huge', 5, 60, 1);
SELECT * FROM check_rate_limit_tiers('1.2.3.4', 'a@b.c');

RESET ratelimit.test_clock;
DROP EXTENSION ratelimit_sliding_window_limits, ratelimit;
