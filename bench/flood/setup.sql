-- Benchmark database of bench/flood.sh: the extension alone; the checks stop the benchmark
-- early, with a clear message, when the server cannot run it.
\set ON_ERROR_STOP on

CREATE EXTENSION ratelimit;

DO $$
BEGIN
    IF to_regclass('ratelimit.memory_stats') IS NULL THEN
        RAISE EXCEPTION 'ratelimit % has no memory engine (no ratelimit.memory_stats)',
            (SELECT extversion FROM pg_extension WHERE extname = 'ratelimit');
    END IF;
    IF NOT 'ratelimit' = ANY (string_to_array(
            replace(current_setting('shared_preload_libraries'), ' ', ''), ',')) THEN
        RAISE EXCEPTION 'the server does not preload ratelimit (shared_preload_libraries = %)',
            current_setting('shared_preload_libraries');
    END IF;
END
$$;
