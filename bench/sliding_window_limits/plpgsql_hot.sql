SELECT * FROM bench_plpgsql_check_rate_limit('bench_plpgsql_hot', 100000000, 60, 1);
