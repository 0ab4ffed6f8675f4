-- The native call a declared limiter stands for, on one key.
SELECT (ratelimit.consume('public.bench_declared-hot', 1000000000, '365 days')).allowed;
