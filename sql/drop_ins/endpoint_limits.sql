-- The hourly endpoint limits, drop-in (the extension ratelimit_endpoint_limits): rate_limits
-- and increment_rate_limit, one row per (user_id, endpoint, window), windows aligned to multiples
-- of their length.

SELECT ratelimit.drop_in_install_begin('ratelimit_endpoint_limits', '@extschema@',
    ARRAY['rate_limits'], ARRAY['increment_rate_limit', 'cleanup_expired_rate_limits']);

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
    'ratelimit: endpoint counters, one row per (user_id, endpoint, aligned window); written only through increment_rate_limit';

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
AS 'MODULE_PATHNAME', 'ratelimit_endpoint_limits_increment_rate_limit';

COMMENT ON FUNCTION @extschema@.increment_rate_limit(uuid, text, integer, integer, integer) IS
    'ratelimit: endpoint limit, atomic increment; returns {allowed, current, limit, retryAfter}';

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

SELECT ratelimit.drop_in_install_end('@extschema@', ARRAY['rate_limits']);

-- An authenticated user spends only its own endpoint quota (checked against the JWT);
-- service_role (Supabase's trusted server code) any user's, and runs the cleanup.
SELECT ratelimit.set_member_privileges('ratelimit_endpoint_limits', true, ARRAY[
    ARRAY['EXECUTE', 'FUNCTION', '@extschema@.increment_rate_limit(uuid, text, integer, integer, integer)', 'authenticated'],
    ARRAY['EXECUTE', 'FUNCTION', '@extschema@.increment_rate_limit(uuid, text, integer, integer, integer)', 'service_role'],
    ARRAY['EXECUTE', 'FUNCTION', '@extschema@.cleanup_expired_rate_limits()', 'service_role']
]);
