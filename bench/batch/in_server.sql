-- The in-server cost of a memory-engine decision (psql -v set, rounds, limit, period): one
-- consume_many of 10,000 keys per round, timed inside the server with clock_timestamp() around
-- the call alone (its keys are built before), divided by its 10,000 decisions. set = hot: the
-- hot key (hot0) 10,000 times; set = 100k: 10,000 distinct keys of the 100k set, the chunk
-- k<10,000 c> .. k<10,000 c + 9,999> with c = round mod 10. Prints one line per round: the
-- microseconds per decision (bench/batch.sh then checks that every decision was counted).
\set ON_ERROR_STOP on
-- The result is only counted, not kept: assigning it to a variable would copy it first.
CREATE FUNCTION pg_temp.time_consume_many(p_keys text[], p_limit integer, p_period interval)
RETURNS double precision
LANGUAGE plpgsql AS $$
DECLARE
    started timestamptz;
    decided integer;
BEGIN
    started := clock_timestamp();
    decided := cardinality(ratelimit.consume_many(p_keys, p_limit, p_period, 1, 'fixed_window',
                                                  'memory'));
    RETURN extract(epoch FROM clock_timestamp() - started) * 1e6 / decided;
END
$$;
SELECT pg_temp.time_consume_many(
           CASE WHEN :'set' = 'hot' THEN array_fill('hot0'::text, ARRAY[10000])
                ELSE ARRAY(SELECT 'k' || g
                           FROM generate_series((r % 10) * 10000, (r % 10) * 10000 + 9999) AS g)
           END,
           :limit, :'period')
FROM generate_series(0, :rounds - 1) AS r
ORDER BY r;
