-- One ratelimit.consume_many call per transaction on :n consecutive keys of the 100k set,
-- from a random offset, wrapping around: k<off+1> .. k<off+n> modulo 100,000, all distinct.
-- The array is built in the statement, so a call sends a few parameters, not n keys.
-- Variables (pgbench -D): n, limit, period, engine (memory, unlogged or table).
\set off random(0, 99999)
SELECT ratelimit.consume_many(
    ARRAY(SELECT 'k' || ((:off::int + g) % 100000) FROM generate_series(1, :n::int) AS g),
    :limit, :period::interval, 1, 'fixed_window', :engine::text);
