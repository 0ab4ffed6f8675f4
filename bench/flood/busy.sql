-- The control of bench/flood.sh: one backend busy for :seconds seconds (psql -v seconds=N)
-- with the flood's own loop (generate_series, the key's concatenation, one function call per
-- row) but no decision, so that the hot key's latency under the flood can be told apart from
-- what any busy backend costs it on this machine's two CPUs.
\set ON_ERROR_STOP on
SET jit = off;
SELECT set_config('flood.busy_seconds', :'seconds', false);
DO $$
DECLARE
    until constant timestamptz :=
        clock_timestamp() + make_interval(secs => current_setting('flood.busy_seconds')::float8);
    n bigint;
BEGIN
    WHILE clock_timestamp() < until LOOP
        SELECT count(*) INTO n
        FROM generate_series(1, 100000) AS g
        WHERE octet_length('busy:' || g) > 0;
    END LOOP;
END
$$;
