-- One memory-engine decision per transaction, its columns as a row (SELECT * FROM ...).
-- Variables (pgbench -D): prefix, keys (1: the hot key), limit, period. Keys are
-- prefix || 0 .. prefix || keys - 1. In -M prepared they are parameters of one prepared call.
\set k random(0, :keys - 1)
SELECT * FROM ratelimit.consume(:prefix::text || :k::text, :limit, :period::interval, 1,
                                'fixed_window', 'memory');
