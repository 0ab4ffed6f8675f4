-- The first call of every key of a key set (psql -v prefix, keys, limit, period, algorithm,
-- cost), so that the measured runs update entries that exist: the steady state of a limiter
-- that sees the same keys again and again. Keys are prefix || 1 .. prefix || keys, as in
-- consume.sql. Prints how many calls were allowed; bench/memory.sh wants every one.
\set ON_ERROR_STOP on
SELECT count(*) FILTER (WHERE (d).allowed)
FROM (SELECT ratelimit.consume(:'prefix' || g, :limit, :'period'::interval, :cost,
                               p_algorithm => :'algorithm', p_engine => 'memory') AS d
      FROM generate_series(1, :keys) AS g) AS s;
