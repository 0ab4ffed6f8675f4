-- Three policies as one all-or-nothing decision: ratelimit.check_all over <policy>,
-- <policy>.b and <policy>.c (same limit, same engine), one subject under each. Variables
-- (pgbench -D): policy, prefix, subjects (1: the hot subject).
\set s random(1, :subjects)
SELECT * FROM ratelimit.check_all(
    ARRAY[:policy::text, :policy::text || '.b', :policy::text || '.c'],
    ARRAY[:prefix::text || :s::text, :prefix::text || :s::text, :prefix::text || :s::text]);
