-- Cleanup: the functions that delete rows that no longer count, and their pg_cron jobs.

-- Deletes the rows that decide exactly like no row (expired windows, full buckets, ended
-- blocks) from one engine's table, or both when p_engine is NULL; returns how many.
CREATE FUNCTION ratelimit.cleanup_key_state(p_engine text DEFAULT NULL)
RETURNS bigint
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    now_micros constant bigint :=
        (extract(epoch FROM ratelimit.clock_now()) * 1000000)::bigint;
    deleted bigint := 0;
    n bigint;
BEGIN
    IF p_engine IS NOT NULL AND p_engine NOT IN ('table', 'unlogged') THEN
        RAISE EXCEPTION 'p_engine must be one of table, unlogged (got "%")', left(p_engine, 64)
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF p_engine IS NULL OR p_engine = 'table' THEN
        DELETE FROM ratelimit.key_state WHERE expires_at <= now_micros;
        GET DIAGNOSTICS n = ROW_COUNT;
        deleted := deleted + n;
    END IF;
    IF p_engine IS NULL OR p_engine = 'unlogged' THEN
        DELETE FROM ratelimit.key_state_unlogged WHERE expires_at <= now_micros;
        GET DIAGNOSTICS n = ROW_COUNT;
        deleted := deleted + n;
    END IF;
    RETURN deleted;
END
$$;

-- @begin cleanup_jobs
-- The cleanup jobs: name, default schedule, command. The state tables' always; each drop-in
-- app's in the schema of its extension when that is installed, else where a ratelimit 0.6.0
-- install left its drop-ins in place (they still count, so they still need cleaning). It reads
-- the catalogs only; SECURITY DEFINER lets anyone list the jobs through left_by_ratelimit.
CREATE OR REPLACE FUNCTION ratelimit.cleanup_jobs()
RETURNS TABLE(job_name text, schedule text, command text)
LANGUAGE sql STABLE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT j.job_name, j.schedule, pg_catalog.format('SELECT %I.%I()', s.schema_name, j.function_name)
    FROM (VALUES
        (1, 'ratelimit_rpc_limits', 'ratelimit-cleanup-rpc-rate-limits', '17 3 * * *',
         'cleanup_rpc_rate_limits'),
        (2, 'ratelimit_endpoint_limits', 'ratelimit-cleanup-expired-rate-limits', '0 * * * *',
         'cleanup_expired_rate_limits'),
        (3, 'ratelimit_sliding_window_limits', 'ratelimit-cleanup-old-rate-limit-buckets',
         '*/10 * * * *', 'cleanup_old_rate_limit_buckets'),
        (4, NULL, 'ratelimit-cleanup-key-state', '*/5 * * * *', 'cleanup_key_state')
    ) AS j(n, extension, job_name, schedule, function_name)
    CROSS JOIN LATERAL (
        SELECT coalesce(
            CASE WHEN j.extension IS NULL THEN 'ratelimit' END,
            (SELECT n.nspname FROM pg_catalog.pg_extension e
             JOIN pg_catalog.pg_namespace n ON n.oid = e.extnamespace
             -- The SQL edition's drop-ins are ratelimit_sql_<app>.
             WHERE e.extname IN (j.extension, pg_catalog.replace(j.extension, 'ratelimit_', 'ratelimit_sql_'))
             ORDER BY e.extname LIMIT 1),
            (SELECT n.nspname FROM pg_catalog.pg_proc p
             JOIN pg_catalog.pg_namespace n ON n.oid = p.pronamespace
             WHERE p.proname = j.function_name
               AND ratelimit.left_by_ratelimit(p.oid, 'pg_proc', j.extension)
             ORDER BY 1 LIMIT 1)) AS schema_name
    ) AS s
    WHERE s.schema_name IS NOT NULL
    ORDER BY j.n
$$;
-- @end cleanup_jobs

-- @begin schedule_cleanup
-- Schedules every cleanup with pg_cron (again: an existing job of the same name is updated),
-- on each job's default schedule or on p_schedule for all, and removes the jobs of drop-in
-- extensions dropped since. The jobs run as the calling role.
CREATE OR REPLACE FUNCTION ratelimit.schedule_cleanup(p_schedule text DEFAULT NULL)
RETURNS TABLE(job_name text, schedule text, command text, job_id bigint)
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    job record;
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_catalog.pg_extension WHERE extname = 'pg_cron') THEN
        RAISE EXCEPTION 'pg_cron is not installed in database %', pg_catalog.current_database()
            USING ERRCODE = 'object_not_in_prerequisite_state',
                  HINT = 'Add pg_cron to shared_preload_libraries, set cron.database_name to this '
                         'database, run CREATE EXTENSION pg_cron, then call ratelimit.schedule_cleanup() '
                         'again; or run the cleanup functions from another scheduler.';
    END IF;
    -- The jobs named ratelimit-cleanup-* are ratelimit's: one whose drop-in extension is no
    -- longer installed would fail at every run, so it goes.
    EXECUTE 'SELECT cron.unschedule(jobid) FROM cron.job WHERE jobname LIKE ''ratelimit-cleanup-%'' '
            'AND jobname NOT IN (SELECT c.job_name FROM ratelimit.cleanup_jobs() AS c) '
            'AND database = pg_catalog.current_database()';
    FOR job IN SELECT * FROM ratelimit.cleanup_jobs() LOOP
        job_name := job.job_name;
        schedule := coalesce(p_schedule, job.schedule);
        command := job.command;
        EXECUTE 'SELECT cron.schedule($1, $2, $3)' INTO job_id
            USING job.job_name, schedule, job.command;
        RETURN NEXT;
    END LOOP;
END
$$;
-- @end schedule_cleanup

-- @begin unschedule_cleanup
-- Removes the jobs schedule_cleanup() created (every ratelimit-cleanup-* job of this
-- database, also one of a drop-in extension dropped since); returns how many it removed.
CREATE OR REPLACE FUNCTION ratelimit.unschedule_cleanup()
RETURNS integer
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    removed integer := 0;
    job record;
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_catalog.pg_extension WHERE extname = 'pg_cron') THEN
        RAISE EXCEPTION 'pg_cron is not installed in database %', pg_catalog.current_database()
            USING ERRCODE = 'object_not_in_prerequisite_state';
    END IF;
    FOR job IN EXECUTE 'SELECT jobid FROM cron.job WHERE jobname LIKE ''ratelimit-cleanup-%'' '
                       'AND database = pg_catalog.current_database()' LOOP
        EXECUTE 'SELECT cron.unschedule($1::bigint)' USING job.jobid;
        removed := removed + 1;
    END LOOP;
    RETURN removed;
END
$$;
-- @end unschedule_cleanup
