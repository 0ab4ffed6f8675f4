-- One memory-engine decision per transaction, the decision as one composite column
-- (SELECT ratelimit.consume(...)). Variables as in consume_star.sql.
\set k random(0, :keys - 1)
SELECT ratelimit.consume(:prefix::text || :k::text, :limit, :period::interval, 1,
                         'fixed_window', 'memory');
