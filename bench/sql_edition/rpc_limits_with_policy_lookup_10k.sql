-- The per-RPC app's own limiter with its policy looked up (apps_with_policy_lookup.sql), over 10k users.
\set uid random(1, 10000)
SELECT bench_with_policy_lookup_check_rate_limit(('00000000-0000-0000-0000-' || lpad(:uid::text, 12, '0'))::uuid, 'bench_with_policy_lookup_10k', 1000000, 60);
