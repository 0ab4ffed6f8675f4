-- What the keys of a set hold (psql -v engine, prefix, keys, limit, period): "keys calls",
-- the keys that hold a count and the sum of their counts in the current window. The memory
-- engine: a peek at each key (peek_many, 10,000 keys a call), whose remaining is the limit less
-- the calls counted (a missing key answers the full limit and counts nothing); the table
-- engines: the rows of the set's keys, found by the primary key's range (collation C).
\set ON_ERROR_STOP on
SELECT CASE WHEN :'engine' = 'memory' THEN
           (SELECT count(*) FILTER (WHERE d.remaining < :limit) || ' ' ||
                   coalesce(sum(:limit - d.remaining), 0)
            FROM generate_series(0, (:keys - 1) / 10000) AS c,
                 LATERAL unnest(ratelimit.peek_many(
                     ARRAY(SELECT :'prefix' || g
                           FROM generate_series(c * 10000, least(c * 10000 + 9999, :keys - 1)) AS g),
                     :limit, :'period'::interval, 1, 'fixed_window', 'memory')) AS d)
       WHEN :'engine' = 'unlogged' THEN
           (SELECT count(*) || ' ' || coalesce(sum(amount), 0)
            FROM ratelimit.key_state_unlogged
            WHERE key >= :'prefix' AND key < :'prefix' || chr(255))
       ELSE
           (SELECT count(*) || ' ' || coalesce(sum(amount), 0)
            FROM ratelimit.key_state
            WHERE key >= :'prefix' AND key < :'prefix' || chr(255))
       END;
