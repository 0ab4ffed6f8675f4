SELECT bench_plpgsql_increment_rate_limit('00000000-0000-0000-0000-000000000001', 'bench_plpgsql_hot', 1000000, 3600);
