-- The declared limiter over 10,000 keys.
\set k random(1, 10000)
SELECT bench_declared('k' || :k);
