\set k random(1, 100000)
SELECT ratelimit_router.consume('bench:' || :k, 1000000, '1 hour', 1, 'fixed_window', :engine);
