-- The first call of 100,000 keys, <prefix><first> .. <prefix><first + 99999>, on the memory
-- engine, 10,000 a call (psql -v prefix, first, period): the keys one checkpoint's pass may
-- carry. Run with ratelimit.test_clock set, the keys' windows end before the real clock's now.
\set ON_ERROR_STOP on
SELECT sum(c.allowed)
FROM generate_series(:first, :first + 90000, 10000) AS b,
     LATERAL (SELECT count(*) FILTER (WHERE d.allowed) AS allowed
              FROM unnest(ratelimit.consume_many(
                       ARRAY(SELECT :'prefix' || g FROM generate_series(b, b + 9999) AS g),
                       1000, :'period'::interval, 1, 'fixed_window', 'memory')) AS d) AS c;
