-- Limits inside row level security: within_limit(policy) for a policy's USING or WITH CHECK
-- expression, keyed only by the request's caller as PostgREST verified it (the JWT's sub), or,
-- for an anonymous caller, by its client address: never by anything the row or the statement
-- says.

-- @begin within_limit
-- True while the caller is within p_policy's limit, charging p_cost for this row (check).
-- Evaluated once for each row the expression is checked against: in an INSERT's WITH CHECK,
-- once per row inserted.
CREATE OR REPLACE FUNCTION ratelimit.within_limit(p_policy text, p_cost integer DEFAULT 1)
RETURNS boolean
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    sub text := ratelimit.jwt_subject();
BEGIN
    IF p_policy IS NULL OR p_cost IS NULL THEN
        RAISE EXCEPTION '% must not be NULL', CASE WHEN p_policy IS NULL THEN 'p_policy' ELSE 'p_cost' END
            USING ERRCODE = 'null_value_not_allowed';
    END IF;
    RETURN (ratelimit.declared_limiter_check(
        p_policy,
        CASE WHEN sub IS NOT NULL THEN 'user:' || sub
             ELSE 'ip:' || coalesce(pg_catalog.host(ratelimit.client_address()), 'unknown') END,
        p_cost, NULL, NULL)).allowed;
END
$$;
-- @end within_limit
