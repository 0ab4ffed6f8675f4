-- The orphaned-user cleanup's sliding-window limits, drop-in (the extension
-- ratelimit_sliding_window_limits): rate_limit_buckets, the bucket check_rate_limit and
-- check_rate_limit_tiers; per-second buckets, only allowed calls recorded.

SELECT ratelimit.drop_in_install_begin('ratelimit_sliding_window_limits', '@extschema@',
    ARRAY['rate_limit_buckets'],
    ARRAY['check_rate_limit', 'check_rate_limit_tiers', 'cleanup_old_rate_limit_buckets']);

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

-- The app's check_rate_limit(p_key, p_limit, p_window_seconds), with a trailing p_cost (1 by
-- default) for calls that count more than one unit.
CREATE FUNCTION @extschema@.check_rate_limit(
    p_key text,
    p_limit integer,
    p_window_seconds integer,
    p_cost integer DEFAULT 1)
RETURNS TABLE(allowed boolean, current_count integer, retry_after integer)
LANGUAGE c VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS 'MODULE_PATHNAME', 'ratelimit_sliding_window_limits_check_rate_limit';

COMMENT ON FUNCTION @extschema@.check_rate_limit(text, integer, integer, integer) IS
    'ratelimit: sliding-window check of p_key; a denied call changes nothing';

-- The cleanup's three tiers as one all-or-nothing decision: IP and email are trimmed (the email
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
AS 'MODULE_PATHNAME', 'ratelimit_sliding_window_limits_check_rate_limit_tiers';

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

SELECT ratelimit.drop_in_install_end('@extschema@', ARRAY['rate_limit_buckets']);

-- The keyed calls and the cleanup are service_role's (Supabase's trusted server code).
SELECT ratelimit.set_member_privileges('ratelimit_sliding_window_limits', true, ARRAY[
    ARRAY['EXECUTE', 'FUNCTION', '@extschema@.check_rate_limit(text, integer, integer, integer)', 'service_role'],
    ARRAY['EXECUTE', 'FUNCTION', '@extschema@.check_rate_limit_tiers(text, text, integer, integer, integer, integer, integer, integer)', 'service_role'],
    ARRAY['EXECUTE', 'FUNCTION', '@extschema@.cleanup_old_rate_limit_buckets()', 'service_role']
]);
