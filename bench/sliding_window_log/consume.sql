-- One call on the case's hot key (pgbench -D key=... -D lim=... -D engine=...).
SELECT ratelimit.consume(:key::text, :lim::integer, '1 minute', 1, 'sliding_window', :engine::text);
