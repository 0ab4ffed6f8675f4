-- One decision per transaction on one engine. Variables (pgbench -D): keys (1: the hot key),
-- limit, period, engine. Keys are k0 .. k<keys - 1>.
\set k random(0, :keys - 1)
SELECT ratelimit.consume('k' || :k::text, :limit, :period::interval, 1, 'fixed_window',
                         :engine::text);
