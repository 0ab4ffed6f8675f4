-- The game backend's per-RPC limits, drop-in (the extension ratelimit_rpc_limits):
-- rpc_rate_limits and check_rate_limit(text, integer, integer), one row per (user_id, rpc_name);
-- the window restarts at the first call after it has lasted longer than p_window_minutes (the
-- policy rpc.<p_rpc_name>'s period when there is one), as it stood when the window opened
-- (window_expires_at). In the schema CREATE EXTENSION installs into (public by default, where
-- PostgREST looks).

SELECT ratelimit.drop_in_install_begin('ratelimit_rpc_limits', '@extschema@',
    ARRAY['rpc_rate_limits'],
    ARRAY['check_rate_limit', 'check_rate_limit_for_user', 'cleanup_rpc_rate_limits']);

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
    'ratelimit: per-RPC counters, one row per (user_id, rpc_name); written only through check_rate_limit';

-- Counters are written by the extension's functions only: no direct access for API roles.
ALTER TABLE @extschema@.rpc_rate_limits ENABLE ROW LEVEL SECURITY;
REVOKE ALL ON TABLE @extschema@.rpc_rate_limits FROM PUBLIC;

-- As in the game backend, a user's counters go when the user does, where Supabase's auth.users
-- exists. Only the real one: a table in a schema auth that a superuser or ratelimit's owner owns
-- (Supabase's is). Where any role with CREATE on the database could have made auth.users first,
-- it would choose which counts can be written and wipe them by deleting its rows.
DO $$
BEGIN
    IF EXISTS (SELECT FROM pg_catalog.pg_class c
               JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
               JOIN pg_catalog.pg_roles r ON r.oid = n.nspowner
               WHERE n.nspname = 'auth' AND c.relname = 'users' AND c.relkind IN ('r', 'p')
                 AND (r.rolsuper OR r.oid = (SELECT e.extowner FROM pg_catalog.pg_extension e
                                             WHERE e.extname = 'ratelimit'))) THEN
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
AS 'MODULE_PATHNAME', 'ratelimit_rpc_limits_check_rate_limit';

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
AS 'MODULE_PATHNAME', 'ratelimit_rpc_limits_check_rate_limit_for_user';

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

SELECT ratelimit.drop_in_install_end('@extschema@', ARRAY['rpc_rate_limits']);

-- Everyone may call the check, which counts only the caller; the calls that name a user, and
-- the cleanup, are service_role's (Supabase's trusted server code).
SELECT ratelimit.set_member_privileges('ratelimit_rpc_limits', true, ARRAY[
    ARRAY['EXECUTE', 'FUNCTION', '@extschema@.check_rate_limit(text, integer, integer)', 'PUBLIC'],
    ARRAY['EXECUTE', 'FUNCTION', '@extschema@.check_rate_limit_for_user(uuid, text, integer, integer)', 'service_role'],
    ARRAY['EXECUTE', 'FUNCTION', '@extschema@.cleanup_rpc_rate_limits(interval)', 'service_role']
]);
