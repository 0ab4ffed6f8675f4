-- The native call under check_all.sql: ratelimit.consume_all on three keys of its own per
-- subject ('native:<policy>:<subject>', 'native:<policy>.b:<subject>',
-- 'native:<policy>.c:<subject>') with the three policies' limit, period, algorithm and engine.
-- Variables (pgbench -D): policy, prefix, subjects (1: the hot subject), limit, period,
-- algorithm, engine.
\set s random(1, :subjects)
SELECT * FROM ratelimit.consume_all(
    ARRAY['native:' || :policy::text || ':' || :prefix::text || :s::text,
          'native:' || :policy::text || '.b:' || :prefix::text || :s::text,
          'native:' || :policy::text || '.c:' || :prefix::text || :s::text],
    ARRAY[:limit::integer, :limit::integer, :limit::integer],
    ARRAY[:period::interval, :period::interval, :period::interval]::interval[],
    ARRAY[:algorithm::text, :algorithm::text, :algorithm::text],
    ARRAY[:engine::text, :engine::text, :engine::text]);
