-- The first call of 10,000 keys of the 100k set, k<first> .. k<first + 9999>, on one engine
-- (psql -v engine, first, limit, period), so that the measured calls update keys that exist.
\set ON_ERROR_STOP on
SELECT count(*) FILTER (WHERE d.allowed)
FROM unnest(ratelimit.consume_many(
         ARRAY(SELECT 'k' || g FROM generate_series(:first, :first + 9999) AS g),
         :limit, :'period'::interval, 1, 'fixed_window', :'engine')) AS d;
