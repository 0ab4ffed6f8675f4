-- The native call over 10,000 keys.
\set k random(1, 10000)
SELECT (ratelimit.consume('public.bench_declared-k' || :k, 1000000000, '365 days')).allowed;
