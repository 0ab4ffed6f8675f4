-- The drop-in functions, routed. Each is the shard's own function of the same name and
-- arguments, found through the shard's search_path: the schema its drop-in extension
-- (ratelimit_rpc_limits, ratelimit_endpoint_limits, ratelimit_sliding_window_limits) was given
-- there, normally public. A shard that holds both apps' check_rate_limit keeps them in two
-- schemas and names both in its search_path: the per-RPC call names its arguments and the keyed
-- one passes four, so each finds only its own. Each runs as the calling role, for the caller the
-- router resolved: the router reads the JWT caller from its own request settings
-- (request.jwt.claim.sub, then request.jwt.claims' "sub") and the shard's statement runs with
-- request.jwt.claim.sub set to that caller alone (set by a subquery that runs first: OFFSET 0
-- keeps it from being merged into the outer query), so the shard applies the caller rule of the
-- local functions to the same caller and role. A user's keys are routed by the user's id, so one
-- user's counts live on one shard. check_rate_limit_tiers is not routed: its global tier is one
-- key for every caller, and all or nothing over it and a caller's keys cannot run on one shard.

-- The JWT caller as the local functions resolve it (the extension's own code), or NULL when the
-- request has none. Refused as locally: a request.jwt.claim.sub that is not a UUID, claims that
-- are not a JSON object or whose "sub" is not a UUID (22023).
CREATE FUNCTION ratelimit_router.jwt_caller()
RETURNS uuid
LANGUAGE c STABLE
AS '$libdir/ratelimit', 'ratelimit_router_jwt_caller';

-- Each drop-in's arguments and caller rule, checked on the router by the extension's own code as
-- the shard would check them, nothing counted.
CREATE FUNCTION ratelimit_router.rpc_limit_arguments(p_rpc_name text, p_max_calls integer,
    p_window_minutes integer)
RETURNS void
LANGUAGE c STABLE
AS '$libdir/ratelimit', 'ratelimit_router_rpc_limit_arguments';

CREATE FUNCTION ratelimit_router.rpc_limit_for_user_arguments(p_user_id uuid, p_rpc_name text,
    p_max_calls integer, p_window_minutes integer)
RETURNS void
LANGUAGE c STABLE
AS '$libdir/ratelimit', 'ratelimit_router_rpc_limit_for_user_arguments';

CREATE FUNCTION ratelimit_router.increment_rate_limit_arguments(p_user_id uuid, p_endpoint text,
    p_limit integer, p_window_seconds integer, p_increment integer)
RETURNS void
LANGUAGE c STABLE
AS '$libdir/ratelimit', 'ratelimit_router_increment_rate_limit_arguments';

-- Its arguments are named apart from the drop-in's: the shard's call names them (the two
-- check_rate_limit functions both take three arguments), and PL/Proxy replaces every name of
-- one of its own arguments in the statement.
CREATE FUNCTION ratelimit_router.shard_check_rate_limit(p_hash integer, p_caller text,
    p_rpc text, p_calls integer, p_minutes integer)
RETURNS boolean
LANGUAGE plproxy
AS $$
    CLUSTER 'ratelimit_router';
    RUN ON p_hash;
    SELECT check_rate_limit(p_rpc_name => p_rpc, p_max_calls => p_calls, p_window_minutes => p_minutes)
    FROM (SELECT pg_catalog.set_config('request.jwt.claim.sub', p_caller, true),
                 pg_catalog.set_config('request.jwt.claims', '', true)
          OFFSET 0) AS caller;
$$;

CREATE FUNCTION ratelimit_router.shard_check_rate_limit_for_user(p_hash integer, p_caller text,
    p_user_id uuid, p_rpc_name text, p_max_calls integer, p_window_minutes integer)
RETURNS boolean
LANGUAGE plproxy
AS $$
    CLUSTER 'ratelimit_router';
    RUN ON p_hash;
    SELECT check_rate_limit_for_user(p_user_id, p_rpc_name, p_max_calls, p_window_minutes)
    FROM (SELECT pg_catalog.set_config('request.jwt.claim.sub', p_caller, true),
                 pg_catalog.set_config('request.jwt.claims', '', true)
          OFFSET 0) AS caller;
$$;

CREATE FUNCTION ratelimit_router.shard_increment_rate_limit(p_hash integer, p_caller text,
    p_user_id uuid, p_endpoint text, p_limit integer, p_window_seconds integer, p_increment integer)
RETURNS jsonb
LANGUAGE plproxy
AS $$
    CLUSTER 'ratelimit_router';
    RUN ON p_hash;
    SELECT increment_rate_limit(p_user_id, p_endpoint, p_limit, p_window_seconds, p_increment)
    FROM (SELECT pg_catalog.set_config('request.jwt.claim.sub', p_caller, true),
                 pg_catalog.set_config('request.jwt.claims', '', true)
          OFFSET 0) AS caller;
$$;

CREATE FUNCTION ratelimit_router.shard_check_rate_limit_key(p_hash integer, p_key text,
    p_limit integer, p_window_seconds integer, p_cost integer)
RETURNS TABLE(allowed boolean, current_count integer, retry_after integer)
LANGUAGE plproxy
AS $$
    CLUSTER 'ratelimit_router';
    RUN ON p_hash;
    SELECT * FROM check_rate_limit(p_key, p_limit, p_window_seconds, p_cost);
$$;

-- The game backend's check for the JWT caller: routed by the caller's id (a request without
-- one is not counted locally, and is sent by its RPC name so that its arguments are checked).
CREATE FUNCTION ratelimit_router.check_rate_limit(p_rpc_name text, p_max_calls integer DEFAULT 10,
    p_window_minutes integer DEFAULT 1)
RETURNS boolean
LANGUAGE plpgsql
AS $$
DECLARE
    v_caller uuid;
    v_policy text;
BEGIN
    PERFORM ratelimit_router.rpc_limit_arguments(p_rpc_name, p_max_calls, p_window_minutes);
    v_caller := ratelimit_router.jwt_caller();
    FOR v_attempt IN 1 .. 2 LOOP
        BEGIN
            RETURN ratelimit_router.shard_check_rate_limit(
                ratelimit_router.routing_hash(coalesce(v_caller::text, p_rpc_name, '')),
                coalesce(v_caller::text, ''), p_rpc_name, p_max_calls, p_window_minutes);
        EXCEPTION
            WHEN query_canceled OR OTHERS THEN
                v_policy := ratelimit_router.after_shard_error(v_attempt, SQLSTATE, SQLERRM);
                IF v_policy = 'raise' THEN
                    RAISE;
                ELSIF v_policy = 'retry' THEN
                    CONTINUE;
                END IF;
                RETURN v_policy = 'allow';
        END;
    END LOOP;
END;
$$;

CREATE FUNCTION ratelimit_router.check_rate_limit_for_user(p_user_id uuid, p_rpc_name text,
    p_max_calls integer DEFAULT 10, p_window_minutes integer DEFAULT 1)
RETURNS boolean
LANGUAGE plpgsql
AS $$
DECLARE
    v_caller uuid;
    v_policy text;
BEGIN
    PERFORM ratelimit_router.rpc_limit_for_user_arguments(p_user_id, p_rpc_name, p_max_calls,
                                                          p_window_minutes);
    v_caller := ratelimit_router.jwt_caller();
    FOR v_attempt IN 1 .. 2 LOOP
        BEGIN
            RETURN ratelimit_router.shard_check_rate_limit_for_user(
                ratelimit_router.routing_hash(p_user_id::text), coalesce(v_caller::text, ''),
                p_user_id, p_rpc_name, p_max_calls, p_window_minutes);
        EXCEPTION
            WHEN query_canceled OR OTHERS THEN
                v_policy := ratelimit_router.after_shard_error(v_attempt, SQLSTATE, SQLERRM);
                IF v_policy = 'raise' THEN
                    RAISE;
                ELSIF v_policy = 'retry' THEN
                    CONTINUE;
                END IF;
                RETURN v_policy = 'allow';
        END;
    END LOOP;
END;
$$;

-- The hourly endpoints' increment, routed by p_user_id. A request with a JWT caller may act
-- only on its own id: refused here (42501) as the shard would refuse it, by the same code.
CREATE FUNCTION ratelimit_router.increment_rate_limit(p_user_id uuid, p_endpoint text,
    p_limit integer, p_window_seconds integer, p_increment integer DEFAULT 1)
RETURNS jsonb
LANGUAGE plpgsql
AS $$
DECLARE
    v_caller uuid;
    v_policy text;
BEGIN
    PERFORM ratelimit_router.increment_rate_limit_arguments(p_user_id, p_endpoint, p_limit,
                                                            p_window_seconds, p_increment);
    v_caller := ratelimit_router.jwt_caller();
    FOR v_attempt IN 1 .. 2 LOOP
        BEGIN
            RETURN ratelimit_router.shard_increment_rate_limit(
                ratelimit_router.routing_hash(p_user_id::text), coalesce(v_caller::text, ''),
                p_user_id, p_endpoint, p_limit, p_window_seconds, p_increment);
        EXCEPTION
            WHEN query_canceled OR OTHERS THEN
                v_policy := ratelimit_router.after_shard_error(v_attempt, SQLSTATE, SQLERRM);
                IF v_policy = 'raise' THEN
                    RAISE;
                ELSIF v_policy = 'retry' THEN
                    CONTINUE;
                END IF;
                RETURN pg_catalog.jsonb_build_object('allowed', v_policy = 'allow', 'current', NULL,
                    'limit', p_limit, 'retryAfter', CASE WHEN v_policy = 'allow' THEN 0 ELSE 1 END,
                    'reason', 'shard_unavailable');
        END;
    END LOOP;
END;
$$;

-- The keyed check's arguments, checked on the router by the extension's own code, nothing
-- counted.
CREATE FUNCTION ratelimit_router.check_rate_limit_arguments(p_key text, p_limit integer,
    p_window_seconds integer, p_cost integer)
RETURNS void
LANGUAGE c STABLE
AS '$libdir/ratelimit', 'ratelimit_router_check_rate_limit_arguments';

-- The orphaned-user cleanup's keyed check, routed by p_key.
CREATE FUNCTION ratelimit_router.check_rate_limit(p_key text, p_limit integer, p_window_seconds integer,
    p_cost integer DEFAULT 1)
RETURNS TABLE(allowed boolean, current_count integer, retry_after integer)
LANGUAGE plpgsql
AS $$
DECLARE
    v_policy text;
BEGIN
    PERFORM ratelimit_router.check_rate_limit_arguments(p_key, p_limit, p_window_seconds, p_cost);
    FOR v_attempt IN 1 .. 2 LOOP
        BEGIN
            RETURN QUERY SELECT * FROM ratelimit_router.shard_check_rate_limit_key(
                ratelimit_router.routing_hash(p_key), p_key, p_limit, p_window_seconds, p_cost);
            RETURN;
        EXCEPTION
            WHEN query_canceled OR OTHERS THEN
                v_policy := ratelimit_router.after_shard_error(v_attempt, SQLSTATE, SQLERRM);
                IF v_policy = 'raise' THEN
                    RAISE;
                ELSIF v_policy = 'retry' THEN
                    CONTINUE;
                END IF;
                RETURN QUERY SELECT v_policy = 'allow', NULL::integer,
                                    CASE WHEN v_policy = 'allow' THEN 0 ELSE 1 END;
                RETURN;
        END;
    END LOOP;
END;
$$;
