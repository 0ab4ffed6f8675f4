-- ratelimit 0.1.0, the first released version. The install script of every later version is
-- this file followed by the upgrade scripts (the Makefile concatenates them), so each object has
-- one source and a fresh install equals an upgraded one.
--
-- Layout: the drop-in surfaces (check_rate_limit, rpc_rate_limits, ...) go into the
-- schema CREATE EXTENSION installs into (public by default, where PostgREST looks); everything
-- native lives in schema ratelimit.
\echo Use "CREATE EXTENSION ratelimit" to load this file. \quit

CREATE SCHEMA ratelimit;
COMMENT ON SCHEMA ratelimit IS 'ratelimit: native API and internals';

-- The instant decisions are made at: the server clock, or ratelimit.test_clock when set.
CREATE FUNCTION ratelimit.clock_now()
RETURNS timestamptz
LANGUAGE c VOLATILE PARALLEL SAFE
AS 'MODULE_PATHNAME', 'rl_clock_now';

------------------------------------------------------------------------------------------------
-- The game backend's per-RPC limits: one row per (user_id, rpc_name); the window restarts at the first call after it
-- has lasted longer than p_window_minutes.
------------------------------------------------------------------------------------------------

CREATE TABLE @extschema@.rpc_rate_limits (
    id                uuid        PRIMARY KEY DEFAULT pg_catalog.gen_random_uuid(),
    user_id           uuid        NOT NULL,
    rpc_name          text        NOT NULL,
    call_count        integer     NOT NULL DEFAULT 1,
    window_start      timestamptz NOT NULL DEFAULT pg_catalog.now(),
    ip_address        text,
    -- When the current window stops counting; lets cleanup prove a row is dead. Not indexed,
    -- like call_count and window_start, so every update can be a HOT update.
    window_expires_at timestamptz NOT NULL DEFAULT pg_catalog.now(),
    CONSTRAINT rpc_rate_limits_user_id_rpc_name_key UNIQUE (user_id, rpc_name)
) WITH (fillfactor = 70);

COMMENT ON TABLE @extschema@.rpc_rate_limits IS
    'ratelimit: per-RPC limit counters, one row per (user_id, rpc_name); written only through check_rate_limit';

-- Counters are written by the extension's functions only: no direct access for API roles.
ALTER TABLE @extschema@.rpc_rate_limits ENABLE ROW LEVEL SECURITY;
REVOKE ALL ON TABLE @extschema@.rpc_rate_limits FROM PUBLIC;

-- As in the original function, a user's counters go when the user does, where Supabase's auth.users exists.
DO $$
BEGIN
    IF pg_catalog.to_regclass('auth.users') IS NOT NULL THEN
        EXECUTE pg_catalog.format(
            'ALTER TABLE %I.rpc_rate_limits ADD CONSTRAINT rpc_rate_limits_user_id_fkey '
            'FOREIGN KEY (user_id) REFERENCES auth.users(id) ON DELETE CASCADE',
            '@extschema@');
    END IF;
END
$$;

CREATE FUNCTION @extschema@.check_rate_limit(
    p_rpc_name text,
    p_max_calls integer DEFAULT 10,
    p_window_minutes integer DEFAULT 1)
RETURNS boolean
LANGUAGE c VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS 'MODULE_PATHNAME', 'rl_check_rate_limit';

COMMENT ON FUNCTION @extschema@.check_rate_limit(text, integer, integer) IS
    'ratelimit: per-RPC check for the JWT caller (auth.uid()); true = allowed; anonymous callers are allowed';

CREATE FUNCTION @extschema@.check_rate_limit_for_user(
    p_user_id uuid,
    p_rpc_name text,
    p_max_calls integer DEFAULT 10,
    p_window_minutes integer DEFAULT 1)
RETURNS boolean
LANGUAGE c VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS 'MODULE_PATHNAME', 'rl_check_rate_limit_for_user';

COMMENT ON FUNCTION @extschema@.check_rate_limit_for_user(uuid, text, integer, integer) IS
    'ratelimit: per-RPC check for an explicit user id (trusted callers only)';

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

-- Only trusted roles may name the user or run cleanup.
REVOKE EXECUTE ON FUNCTION @extschema@.check_rate_limit_for_user(uuid, text, integer, integer) FROM PUBLIC;
REVOKE EXECUTE ON FUNCTION @extschema@.cleanup_rpc_rate_limits(interval) FROM PUBLIC;

-- Supabase grants new tables and functions in public to its API roles by default privileges;
-- take back what they must not have, and give service_role the trusted calls.
DO $$
DECLARE
    api_role text;
BEGIN
    FOREACH api_role IN ARRAY ARRAY['anon', 'authenticated'] LOOP
        IF EXISTS (SELECT 1 FROM pg_catalog.pg_roles WHERE rolname = api_role) THEN
            EXECUTE pg_catalog.format('REVOKE ALL ON TABLE %I.rpc_rate_limits FROM %I',
                                      '@extschema@', api_role);
            EXECUTE pg_catalog.format(
                'REVOKE EXECUTE ON FUNCTION %I.check_rate_limit_for_user(uuid, text, integer, integer), '
                '%I.cleanup_rpc_rate_limits(interval) FROM %I',
                '@extschema@', '@extschema@', api_role);
        END IF;
    END LOOP;
    IF EXISTS (SELECT 1 FROM pg_catalog.pg_roles WHERE rolname = 'service_role') THEN
        EXECUTE pg_catalog.format(
            'GRANT EXECUTE ON FUNCTION %I.check_rate_limit_for_user(uuid, text, integer, integer), '
            '%I.cleanup_rpc_rate_limits(interval) TO service_role',
            '@extschema@', '@extschema@');
    END IF;
END
$$;
