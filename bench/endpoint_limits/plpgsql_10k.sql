-- 10k distinct users: user n is the uuid 00000000-0000-0000-0000-<n on 12 digits>.
\set uid random(1, 10000)
SELECT bench_plpgsql_increment_rate_limit(('00000000-0000-0000-0000-' || lpad(:uid::text, 12, '0'))::uuid, 'bench_plpgsql_10k', 1000000, 3600);
