-- The declared limiter, on one key.
SELECT bench_declared('hot');
