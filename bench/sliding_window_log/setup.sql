-- Benchmark database for the sliding_window log: only the extension. Every case uses its own
-- hot key, so that each starts from an empty log.
\set ON_ERROR_STOP on

CREATE EXTENSION ratelimit;
