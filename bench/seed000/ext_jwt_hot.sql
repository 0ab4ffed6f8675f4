-- The caller is the JWT subject, set per connection through PGOPTIONS by bench/seed000.sh.
SELECT check_rate_limit('bench_ext_jwt_hot', 1000000, 60);
