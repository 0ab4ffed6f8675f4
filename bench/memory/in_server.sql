-- The in-server cost of a decision: one query that makes :calls memory-engine decisions, the
-- key of call g being prefix || (1 + g % keys) (prefix || 1 for the hot key), or, with
-- baseline set to true, the same query with a trivial built-in (octet_length of the same key)
-- in place of the decision: generate_series, the key's concatenation, one function call per
-- row and the count, which bench/memory.sh subtracts. Prints the rows that answered (allowed
-- decisions, or non-empty keys) and the elapsed microseconds. psql variables: prefix, keys,
-- calls, limit, period, algorithm, baseline (true or false).
\set ON_ERROR_STOP on
-- No JIT: its compile time would be counted in the query's time, not a decision's. No
-- parallel workers: the baseline is parallel safe and consume is not, so only the baseline
-- could run in parallel.
SET jit = off;
SET max_parallel_workers_per_gather = 0;
-- The query's own time, taken on the server just before and just after it: the round trips in
-- between (well under a millisecond) are negligible against the query's second or so.
SELECT extract(epoch FROM clock_timestamp()) * 1000000 AS started \gset
\if :baseline
SELECT count(*) FILTER (WHERE d > 0) AS answered
FROM (SELECT octet_length(:'prefix' || (1 + g % :keys)) AS d
      FROM generate_series(1, :calls) AS g) AS s \gset
\else
SELECT count(*) FILTER (WHERE (d).allowed) AS answered
FROM (SELECT ratelimit.consume(:'prefix' || (1 + g % :keys), :limit, :'period'::interval, 1,
                               p_algorithm => :'algorithm', p_engine => 'memory') AS d
      FROM generate_series(1, :calls) AS g) AS s \gset
\endif
SELECT :answered, round(extract(epoch FROM clock_timestamp()) * 1000000 - :started);
