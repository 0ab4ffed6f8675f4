\set k random(1, 100000)
SELECT ratelimit_router.shard_consume(ratelimit_router.routing_hash('bench:' || :k), 'bench:' || :k, 1000000, '1 hour', 1, 'fixed_window', :engine, NULL, NULL);
