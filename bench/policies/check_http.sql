-- One policy check answered as an HTTP response (status, headers, body, decision as jsonb):
-- ratelimit.check_http(ARRAY[policy], ARRAY[subject]), the single round trip of an edge
-- function. Variables (pgbench -D): policy, prefix, subjects (1: the hot subject).
\set s random(1, :subjects)
SELECT ratelimit.check_http(ARRAY[:policy::text], ARRAY[:prefix::text || :s::text]);
