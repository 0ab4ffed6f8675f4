-- consume on the unlogged engine, one key: every call updates the same row.
SELECT ratelimit.consume('bench-hot', 1000000000, '365 days', p_engine => 'unlogged');
