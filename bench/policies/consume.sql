-- The native call under a policy check: ratelimit.consume with the policy's limit, period,
-- algorithm and engine, on a key of its own per subject, 'native:<policy>:<subject>', as many
-- keys as the policy has and as long. Variables (pgbench -D): policy, prefix, subjects (1: the
-- hot subject), limit, period, algorithm, engine. In -M prepared they are parameters of one
-- prepared call.
\set s random(1, :subjects)
SELECT * FROM ratelimit.consume('native:' || :policy::text || ':' || :prefix::text || :s::text,
                                :limit, :period::interval, 1, :algorithm::text, :engine::text);
