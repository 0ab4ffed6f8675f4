-- 10k distinct keys: bench_plpgsql_10k:<n>.
\set k random(1, 10000)
SELECT * FROM bench_plpgsql_check_rate_limit('bench_plpgsql_10k:' || :k::text, 100000000, 60, 1);
