-- One memory-engine decision per transaction, answered as a boolean (ratelimit.allow).
-- Variables as in consume_star.sql.
\set k random(0, :keys - 1)
SELECT ratelimit.allow(:prefix::text || :k::text, :limit, :period::interval, 1,
                       'fixed_window', 'memory');
