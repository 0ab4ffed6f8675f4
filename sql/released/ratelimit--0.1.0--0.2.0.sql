-- ratelimit 0.1.0 -> 0.2.0: the hourly endpoint limits' increment_rate_limit, the orphaned-user cleanup's sliding-window
-- check_rate_limit and its three tiers, their cleanups, and cleanup scheduling on pg_cron.
\echo Use "ALTER EXTENSION ratelimit UPDATE TO '0.2.0'" to load this file. \quit

------------------------------------------------------------------------------------------------
-- The hourly endpoint limits: one row per (user_id, endpoint, window), windows aligned to multiples of their
-- length; every call adds its batch size, allowed or not.
------------------------------------------------------------------------------------------------

CREATE TABLE @extschema@.rate_limits (
    id           uuid        PRIMARY KEY DEFAULT pg_catalog.gen_random_uuid(),
    user_id      uuid        NOT NULL,
    endpoint     text        NOT NULL,
    counter      integer     NOT NULL DEFAULT 1,
    window_start timestamptz NOT NULL,
    expires_at   timestamptz NOT NULL,
    created_at   timestamptz NOT NULL DEFAULT pg_catalog.now(),
    CONSTRAINT ux_rate_limits_user_endpoint_window UNIQUE (user_id, endpoint, window_start)
) WITH (fillfactor = 70);

-- Cleanup finds expired windows by expires_at, which a call never changes (updates stay HOT).
CREATE INDEX rate_limits_expires_at_idx ON @extschema@.rate_limits (expires_at);

COMMENT ON TABLE @extschema@.rate_limits IS
    'ratelimit: hourly endpoint limit counters, one row per (user_id, endpoint, aligned window); written only through increment_rate_limit';

ALTER TABLE @extschema@.rate_limits ENABLE ROW LEVEL SECURITY;
REVOKE ALL ON TABLE @extschema@.rate_limits FROM PUBLIC;

CREATE FUNCTION @extschema@.increment_rate_limit(
    p_user_id uuid,
    p_endpoint text,
    p_limit integer,
    p_window_seconds integer,
    p_increment integer DEFAULT 1)
RETURNS jsonb
LANGUAGE c VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS 'MODULE_PATHNAME', 'rl_increment_rate_limit';

COMMENT ON FUNCTION @extschema@.increment_rate_limit(uuid, text, integer, integer, integer) IS
    'ratelimit: hourly endpoint limit, atomic increment; returns {allowed, current, limit, retryAfter}';

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

------------------------------------------------------------------------------------------------
-- The sliding-window limits: per-second buckets, a true sliding window; only allowed calls are recorded.
-- (The cleanup flow named its table rate_limits too; the endpoint limits own that name here.)
------------------------------------------------------------------------------------------------

CREATE TABLE @extschema@.rate_limit_buckets (
    key            text        NOT NULL,
    bucket_time    timestamptz NOT NULL,
    count          integer     NOT NULL DEFAULT 1,
    -- The longest window this bucket was counted under: cleanup keeps every bucket younger
    -- than the longest window in use.
    window_seconds integer     NOT NULL,
    PRIMARY KEY (key, bucket_time)
) WITH (fillfactor = 70);

CREATE INDEX rate_limit_buckets_bucket_time_idx ON @extschema@.rate_limit_buckets (bucket_time);

COMMENT ON TABLE @extschema@.rate_limit_buckets IS
    'ratelimit: sliding-window per-second buckets; written only through check_rate_limit(p_key, ...)';

ALTER TABLE @extschema@.rate_limit_buckets ENABLE ROW LEVEL SECURITY;
REVOKE ALL ON TABLE @extschema@.rate_limit_buckets FROM PUBLIC;

-- The per-RPC check_rate_limit(text, integer, integer) already has this name and these three
-- argument types, so the sliding-window one takes a trailing p_cost with a default: PostgREST's
-- named-argument calls resolve to the right one by parameter names.
CREATE FUNCTION @extschema@.check_rate_limit(
    p_key text,
    p_limit integer,
    p_window_seconds integer,
    p_cost integer DEFAULT 1)
RETURNS TABLE(allowed boolean, current_count integer, retry_after integer)
LANGUAGE c VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS 'MODULE_PATHNAME', 'rl_check_rate_limit_buckets';

COMMENT ON FUNCTION @extschema@.check_rate_limit(text, integer, integer, integer) IS
    'ratelimit: sliding-window check of p_key; a denied call changes nothing';

-- The cleanup flow's three tiers as one all-or-nothing decision: IP and email are trimmed (the email
-- also lower-cased) and hashed with SHA-256 in the database, never stored in clear.
CREATE FUNCTION @extschema@.check_rate_limit_tiers(
    p_ip text,
    p_email text,
    p_global_limit integer DEFAULT 1000,
    p_global_window_seconds integer DEFAULT 60,
    p_ip_limit integer DEFAULT 5,
    p_ip_window_seconds integer DEFAULT 60,
    p_email_limit integer DEFAULT 3,
    p_email_window_seconds integer DEFAULT 3600)
RETURNS TABLE(allowed boolean, denied_tier text, retry_after integer,
              global_count integer, ip_count integer, email_count integer)
LANGUAGE c VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS 'MODULE_PATHNAME', 'rl_check_rate_limit_tiers';

COMMENT ON FUNCTION @extschema@.check_rate_limit_tiers(text, text, integer, integer, integer, integer, integer, integer) IS
    'ratelimit: global -> IP -> email tiers in one all-or-nothing call';

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

------------------------------------------------------------------------------------------------
-- Cleanup on pg_cron.
------------------------------------------------------------------------------------------------

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
         'SELECT @extschema@.cleanup_old_rate_limit_buckets()')
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

------------------------------------------------------------------------------------------------
-- Privileges. An authenticated user may only spend its own endpoint quota (the function checks
-- p_user_id against the JWT sub); the sliding-window keys are chosen by the caller, so only trusted
-- roles may check them; cleanup and scheduling are for administrators.
------------------------------------------------------------------------------------------------

REVOKE EXECUTE ON FUNCTION
    @extschema@.increment_rate_limit(uuid, text, integer, integer, integer),
    @extschema@.check_rate_limit(text, integer, integer, integer),
    @extschema@.check_rate_limit_tiers(text, text, integer, integer, integer, integer, integer, integer),
    @extschema@.cleanup_expired_rate_limits(),
    @extschema@.cleanup_old_rate_limit_buckets(),
    ratelimit.schedule_cleanup(text),
    ratelimit.unschedule_cleanup()
FROM PUBLIC;

DO $$
DECLARE
    api_role text;
    trusted_functions constant text :=
        '@extschema@.increment_rate_limit(uuid, text, integer, integer, integer), '
        '@extschema@.check_rate_limit(text, integer, integer, integer), '
        '@extschema@.check_rate_limit_tiers(text, text, integer, integer, integer, integer, integer, integer), '
        '@extschema@.cleanup_expired_rate_limits(), '
        '@extschema@.cleanup_old_rate_limit_buckets()';
BEGIN
    FOREACH api_role IN ARRAY ARRAY['anon', 'authenticated'] LOOP
        IF EXISTS (SELECT 1 FROM pg_catalog.pg_roles WHERE rolname = api_role) THEN
            EXECUTE pg_catalog.format('REVOKE ALL ON TABLE @extschema@.rate_limits, '
                                      '@extschema@.rate_limit_buckets FROM %I', api_role);
            EXECUTE pg_catalog.format('REVOKE EXECUTE ON FUNCTION %s FROM %I',
                                      trusted_functions, api_role);
        END IF;
    END LOOP;
    IF EXISTS (SELECT 1 FROM pg_catalog.pg_roles WHERE rolname = 'authenticated') THEN
        GRANT EXECUTE ON FUNCTION
            @extschema@.increment_rate_limit(uuid, text, integer, integer, integer) TO authenticated;
    END IF;
    IF EXISTS (SELECT 1 FROM pg_catalog.pg_roles WHERE rolname = 'service_role') THEN
        EXECUTE pg_catalog.format('GRANT EXECUTE ON FUNCTION %s TO service_role', trusted_functions);
    END IF;
END
$$;
