-- One policy check: ratelimit.check(policy, subject). Variables (pgbench -D): policy, prefix,
-- subjects (1: the hot subject).
\set s random(1, :subjects)
SELECT * FROM ratelimit.check(:policy::text, :prefix::text || :s::text);
