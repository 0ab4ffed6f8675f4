-- consume on the table engine over 10,000 keys.
\set k random(1, 10000)
SELECT ratelimit.consume('bench-' || :k, 1000000000, '365 days', p_engine => 'table');
