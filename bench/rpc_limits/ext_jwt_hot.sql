-- The caller is the JWT subject, set per connection through PGOPTIONS by bench/rpc_limits.sh.
-- Named arguments: a 3-argument positional call is ambiguous with the sliding-window
-- check_rate_limit(p_key, p_limit, p_window_seconds, p_cost DEFAULT 1).
SELECT check_rate_limit(p_rpc_name => 'bench_ext_jwt_hot', p_max_calls => 1000000, p_window_minutes => 60);
