-- One consume_many of :n consecutive keys of the 100k set per transaction, from a random
-- offset, wrapping around. Variables (pgbench -D): n, limit, period, engine.
\set off random(0, 99999)
SELECT ratelimit.consume_many(
    ARRAY(SELECT 'k' || ((:off::int + g) % 100000) FROM generate_series(1, :n::int) AS g),
    :limit, :period::interval, 1, 'fixed_window', :engine::text);
