-- The native call on the memory engine, over 10,000 keys.
\set k random(1, 10000)
SELECT (ratelimit.consume('public.bench_declared_memory-k' || :k, 1000000000, '365 days', p_engine => 'memory')).allowed;
