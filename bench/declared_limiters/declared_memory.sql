-- The declared limiter on the memory engine, over 10,000 keys.
\set k random(1, 10000)
SELECT bench_declared_memory('k' || :k);
