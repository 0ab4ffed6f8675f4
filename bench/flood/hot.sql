-- The hot key whose latency bench/flood.sh measures while another connection floods the
-- engine with new keys: one decision per transaction, always allowed (10^9 per hour). The
-- rolling window opens at the key's first call and lasts the hour, so no window boundary
-- resets the count during a pass, and the remaining it reports falls by exactly one per call
-- for as long as the key is kept. Variables (pgbench -D): engine.
SELECT * FROM ratelimit.consume('hot', 1000000000, '1 hour', 1,
                                p_algorithm => 'rolling_window', p_engine => :engine);
