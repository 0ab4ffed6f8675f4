-- 10k distinct keys: bench_ext_10k:<n>. Always 4 arguments: with 3, check_rate_limit(text,
-- integer, integer) is the per-RPC function.
\set k random(1, 10000)
SELECT * FROM check_rate_limit('bench_ext_10k:' || :k::text, 100000000, 60, 1);
