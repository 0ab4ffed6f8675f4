-- One memory-engine decision per transaction. Variables (pgbench -D): prefix, keys (1: the hot
-- key), limit, period, algorithm. In -M prepared they are parameters of one prepared call,
-- the same call as bench/native/ext_window.sql with the engine fixed to memory.
\set k random(1, :keys)
SELECT * FROM ratelimit.consume(:prefix::text || :k::text, :limit, :period::interval, 1,
                                p_algorithm => :algorithm, p_engine => 'memory');
