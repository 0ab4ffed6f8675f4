-- Cleanup: the functions that delete rows that no longer count, and their pg_cron jobs.

-- Deletes rows whose window ended more than p_older_than ago: they no longer count (the next
-- call would restart them) and nobody has called since. Returns how many rows went.
CREATE FUNCTION @extschema@.cleanup_rpc_rate_limits(p_older_than interval DEFAULT interval '48 hours')
RETURNS integer
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    deleted integer;
BEGIN
    IF p_older_than IS NULL THEN
        RAISE EXCEPTION 'p_older_than must not be NULL' USING ERRCODE = 'null_value_not_allowed';
    END IF;
    IF p_older_than < interval '0' THEN
        RAISE EXCEPTION 'p_older_than must not be negative, got %', p_older_than
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    DELETE FROM @extschema@.rpc_rate_limits
    WHERE window_expires_at < ratelimit.clock_now() - p_older_than;
    GET DIAGNOSTICS deleted = ROW_COUNT;
    RETURN deleted;
END
$$;

COMMENT ON FUNCTION @extschema@.cleanup_rpc_rate_limits(interval) IS
    'ratelimit: deletes rpc_rate_limits rows whose window ended more than p_older_than ago';

-- Deletes windows that have ended; returns how many rows went.
CREATE FUNCTION @extschema@.cleanup_expired_rate_limits()
RETURNS integer
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    deleted integer;
BEGIN
    DELETE FROM @extschema@.rate_limits WHERE expires_at <= ratelimit.clock_now();
    GET DIAGNOSTICS deleted = ROW_COUNT;
    RETURN deleted;
END
$$;

COMMENT ON FUNCTION @extschema@.cleanup_expired_rate_limits() IS
    'ratelimit: deletes rate_limits windows that have ended';

-- Deletes buckets that no longer count for the longest window in use; returns how many.
CREATE FUNCTION @extschema@.cleanup_old_rate_limit_buckets()
RETURNS integer
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    longest_window integer;
    deleted integer;
BEGIN
    SELECT max(window_seconds) INTO longest_window FROM @extschema@.rate_limit_buckets;
    IF longest_window IS NULL THEN
        RETURN 0;
    END IF;
    DELETE FROM @extschema@.rate_limit_buckets
    WHERE bucket_time <= ratelimit.clock_now() - make_interval(secs => longest_window);
    GET DIAGNOSTICS deleted = ROW_COUNT;
    RETURN deleted;
END
$$;

COMMENT ON FUNCTION @extschema@.cleanup_old_rate_limit_buckets() IS
    'ratelimit: deletes rate_limit_buckets rows that no longer count for the longest window in use';

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

-- The cleanup jobs: name, default schedule, command.
CREATE FUNCTION ratelimit.cleanup_jobs()
RETURNS TABLE(job_name text, schedule text, command text)
LANGUAGE sql IMMUTABLE
SET search_path = pg_catalog, pg_temp
AS $$
    VALUES
        ('ratelimit-cleanup-rpc-rate-limits', '17 3 * * *',
         'SELECT @extschema@.cleanup_rpc_rate_limits()'),
        ('ratelimit-cleanup-expired-rate-limits', '0 * * * *',
         'SELECT @extschema@.cleanup_expired_rate_limits()'),
        ('ratelimit-cleanup-old-rate-limit-buckets', '*/10 * * * *',
         'SELECT @extschema@.cleanup_old_rate_limit_buckets()'),
        ('ratelimit-cleanup-key-state', '*/5 * * * *',
         'SELECT ratelimit.cleanup_key_state()')
$$;

-- Schedules every cleanup with pg_cron (again: an existing job of the same name is updated),
-- on each job's default schedule or on p_schedule for all. The jobs run as the calling role.
CREATE FUNCTION ratelimit.schedule_cleanup(p_schedule text DEFAULT NULL)
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

-- Removes the jobs schedule_cleanup() created; returns how many it removed.
CREATE FUNCTION ratelimit.unschedule_cleanup()
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
    FOR job IN EXECUTE 'SELECT jobid FROM cron.job WHERE jobname IN '
                       '(SELECT job_name FROM ratelimit.cleanup_jobs())' LOOP
        EXECUTE 'SELECT cron.unschedule($1::bigint)' USING job.jobid;
        removed := removed + 1;
    END LOOP;
    RETURN removed;
END
$$;
