\set k random(0, 999)
SELECT ratelimit.consume_many(ARRAY(SELECT 'bench:' || (:k * 100 + i) FROM generate_series(1, 100) AS i), 1000000, '1 hour', 1, 'fixed_window', :engine);
