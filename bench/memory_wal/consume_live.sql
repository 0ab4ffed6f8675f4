-- One decision per transaction on the checkpoint case's live keys (live-0 .. live-<keys - 1>).
-- Variables (pgbench -D): keys, limit, period, engine.
\set k random(0, :keys - 1)
SELECT ratelimit.consume('live-' || :k::text, :limit, :period::interval, 1, 'fixed_window',
                         :engine::text);
