SELECT check_rate_limit_for_user('00000000-0000-0000-0000-000000000001', 'bench_ext_user_hot', 1000000, 60);
