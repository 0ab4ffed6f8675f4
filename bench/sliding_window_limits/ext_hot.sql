-- Always 4 arguments: with 3, check_rate_limit(text, integer, integer) is the per-RPC function.
SELECT * FROM check_rate_limit('bench_ext_hot', 100000000, 60, 1);
