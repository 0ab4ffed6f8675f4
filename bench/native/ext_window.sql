-- The extension, window algorithms. Variables (pgbench -D): prefix, keys (1: the hot key),
-- limit, period, algorithm, engine. In -M prepared they are parameters of one prepared call.
\set k random(1, :keys)
SELECT * FROM ratelimit.consume(:prefix::text || :k::text, :limit, :period::interval, 1,
                                p_algorithm => :algorithm, p_engine => :engine);
