-- The first call of 10,000 keys of the 100k set, k<first> .. k<first + 9999> (consume_many's
-- most), on one engine (psql -v engine, first, limit, period), so that the measured calls
-- update keys that exist. bench/batch.sh runs it ten times, each in its own transaction: on
-- the table engines a call holds a lock per key until its commit, and 100,000 of them would
-- not fit in the lock table. Prints how many calls were allowed; bench/batch.sh wants every one.
\set ON_ERROR_STOP on
SELECT count(*) FILTER (WHERE d.allowed)
FROM unnest(ratelimit.consume_many(
         ARRAY(SELECT 'k' || g FROM generate_series(:first, :first + 9999) AS g),
         :limit, :'period'::interval, 1, 'fixed_window', :'engine')) AS d;
