-- The SQL edition's body of ratelimit.pre_request() (sql/install/postgrest.sql), PostgREST's
-- db-pre-request hook, as src/pg/postgrest/pre_request.cpp runs it: the request's routes
-- (src/core/request_routes.cpp), its caller and address (ratelimit.jwt_subject() and
-- ratelimit.client_address()), its tier from the JWT claims, one check_http over the policies of
-- the matching routes; then the headers appended to response.headers, or PostgREST's 429.
--
-- The SQL edition counts in tables, which a read-only transaction cannot write: PostgREST runs
-- GET and HEAD, calls of STABLE and IMMUTABLE functions, and every request on a read replica
-- read-only. A request there that must be counted is refused with an error naming the C edition
-- (whose memory engine counts it), never let through uncounted.

-- @begin ratelimit_pre_request
LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    method constant text := NULLIF(pg_catalog.current_setting('request.method', true), '');
    path constant text := coalesce(pg_catalog.current_setting('request.path', true), '');
    -- The role PostgREST switched to (SET ROLE): the caller this function runs for.
    request_role constant text := CASE WHEN pg_catalog.current_setting('role') = 'none' THEN session_user::text
                                       ELSE pg_catalog.current_setting('role') END;
    route record;
    subject text;
    identity_error text;
    identity_state text;
    address inet;
    address_key text;
    route_key text;
    policies text[] := '{}';
    keys text[] := '{}';
    tier_claims text[] := '{}';
    uses_user boolean := false;
    caller uuid;
    claims jsonb;
    claim jsonb;
    claim_path text;
    member text;
    tier text;
    answer jsonb;
    header record;
    ours text := '';
    existing text;
    inside text;
    retry_seconds bigint;
    details text;
BEGIN
    IF method IS NULL THEN
        RETURN;  -- not a PostgREST request
    END IF;

    -- The caller, as any identity provider's sub: a malformed identity is refused only if a
    -- matching route counts by user (below), so that a request no such route matches passes.
    BEGIN
        subject := ratelimit.jwt_subject();
    EXCEPTION
        WHEN invalid_parameter_value OR null_value_not_allowed THEN
            identity_error := SQLERRM;
            identity_state := SQLSTATE;
        WHEN invalid_text_representation THEN
            -- Claims that are not JSON at all, as the C edition words it.
            identity_error := 'request.jwt.claims must be a JSON object';
            identity_state := 'invalid_parameter_value';
    END;
    address := ratelimit.client_address();
    address_key := 'ip:' || coalesce(pg_catalog.host(address), 'unknown');

    -- Every matching route applies, in id order; a policy named by several is checked once,
    -- under the first.
    FOR route IN
        SELECT r.methods::text[] AS methods, r.path_pattern, r.roles::text[] AS roles, r.policy, r.key, r.tier_claim
          FROM ratelimit.request_routes r
         ORDER BY r.id
    LOOP
        IF route.key NOT IN ('user', 'ip', 'user_or_ip', 'global') THEN
            RAISE EXCEPTION 'key must be user, ip, user_or_ip or global' USING ERRCODE = 'invalid_parameter_value';
        END IF;
        CONTINUE WHEN NOT ('*' = ANY (route.methods) OR method = ANY (route.methods));
        CONTINUE WHEN coalesce(pg_catalog.cardinality(route.roles), 0) > 0 AND NOT (request_role = ANY (route.roles));
        -- '*' is any run of characters, '/' included; every other character stands for itself.
        CONTINUE WHEN path NOT LIKE pg_catalog.replace(pg_catalog.replace(pg_catalog.replace(pg_catalog.replace(
                          route.path_pattern, '\', '\\'), '%', '\%'), '_', '\_'), '*', '%');
        CONTINUE WHEN route.policy = ANY (policies);
        IF route.key IN ('user', 'user_or_ip') THEN
            uses_user := true;
        END IF;
        route_key := CASE route.key
                         WHEN 'user' THEN 'user:' || subject
                         WHEN 'ip' THEN address_key
                         WHEN 'user_or_ip' THEN coalesce('user:' || subject, address_key)
                         ELSE 'global' END;
        -- A route by user skips a request without one.
        CONTINUE WHEN route_key IS NULL;
        policies := policies || route.policy;
        keys := keys || route_key;
        IF route.tier_claim <> '' THEN
            tier_claims := tier_claims || route.tier_claim;
        END IF;
    END LOOP;
    IF pg_catalog.cardinality(policies) = 0 THEN
        RETURN;
    END IF;
    IF identity_error IS NOT NULL AND uses_user THEN
        RAISE EXCEPTION '%', identity_error USING ERRCODE = identity_state;
    END IF;
    -- The access list keeps users as uuid: a sub of another form matches no user entry.
    IF subject ~ '^([0-9a-fA-F]{32}|[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12})$' THEN
        caller := subject::uuid;
    END IF;

    -- The request's tier: the first of the routes' tier claims that the claims hold as a string,
    -- if it names a tier of ratelimit.tiers; none otherwise (claims that are not JSON hold none).
    IF pg_catalog.cardinality(tier_claims) > 0 THEN
        BEGIN
            claims := NULLIF(pg_catalog.current_setting('request.jwt.claims', true), '')::jsonb;
        EXCEPTION WHEN invalid_text_representation OR program_limit_exceeded OR statement_too_complex THEN
            claims := NULL;
        END;
        -- Claims nested more than 512 deep are not read either.
        IF pg_catalog.length(claims::text) > 1025 THEN
            claims := ratelimit.policy_claims_within_depth(claims);
        END IF;
        FOREACH claim_path IN ARRAY tier_claims LOOP
            -- Member names only: nothing inside an array is at a path of names.
            claim := claims;
            FOREACH member IN ARRAY pg_catalog.string_to_array(claim_path, '.') LOOP
                claim := CASE WHEN pg_catalog.jsonb_typeof(claim) = 'object' THEN claim -> member END;
            END LOOP;
            IF pg_catalog.jsonb_typeof(claim) = 'string' THEN
                SELECT t.name INTO tier FROM ratelimit.tiers t WHERE t.name = claim #>> '{}';
                EXIT;
            END IF;
        END LOOP;
    END IF;

    -- One check over the routes' policies, all or nothing, as an HTTP answer. A read-only
    -- transaction cannot count it here.
    IF pg_catalog.current_setting('transaction_read_only') = 'on' THEN
        BEGIN
            answer := ratelimit.check_http(policies, keys, 1, tier, address, caller, 'unix', 'error_message');
        EXCEPTION WHEN read_only_sql_transaction THEN
            RAISE EXCEPTION 'ratelimit.pre_request(): the SQL edition of ratelimit cannot count this request, which PostgREST runs in a read-only transaction (%, %)', method, path
                USING ERRCODE = 'read_only_sql_transaction',
                      DETAIL = 'The SQL edition keeps its counters in tables. PostgREST runs GET and HEAD, calls of STABLE and IMMUTABLE functions, and every request on a read replica read-only.',
                      HINT = 'Route only requests that PostgREST runs read-write here, or use the C edition (CREATE EXTENSION ratelimit), whose memory engine counts read-only requests: docs/sql-edition.md says how to move.';
        END;
    ELSE
        answer := ratelimit.check_http(policies, keys, 1, tier, address, caller, 'unix', 'error_message');
    END IF;

    IF NOT coalesce((answer -> 'allowed') = 'true', false) THEN
        -- PostgREST's custom error: the message is the JSON body, the detail the status and
        -- headers.
        retry_seconds := GREATEST((coalesce((answer -> 'decision' ->> 'retry_after_ms')::bigint, 0) + 999) / 1000, 1);
        details := 'Rate limit exceeded';
        IF coalesce(answer -> 'decision' ->> 'policy', '') <> ''
           AND coalesce((answer -> 'decision' ->> 'limit')::bigint, 0) > 0
           AND coalesce((answer -> 'decision' ->> 'period_ms')::bigint, 0) > 0 THEN
            details := 'Policy ' || (answer -> 'decision' ->> 'policy') || ' allows '
                || (answer -> 'decision' ->> 'limit')
                || CASE WHEN (answer -> 'decision' ->> 'limit')::bigint = 1 THEN ' request per ' ELSE ' requests per ' END
                || ratelimit.policy_describe_period((answer -> 'decision' ->> 'period_ms')::bigint) || '.';
        END IF;
        RAISE SQLSTATE 'PGRST' USING
            MESSAGE = '{"code": "RATE_LIMITED", "message": "Too many requests", "details": ' || pg_catalog.to_json(details)::text
                      || ', "hint": ' || pg_catalog.to_json('Retry after ' || retry_seconds || ' seconds.')::text || '}',
            DETAIL = '{"status": 429, "status_text": "Too Many Requests", "headers": {'
                     || coalesce((SELECT pg_catalog.string_agg(pg_catalog.to_json(h.key)::text || ': ' || pg_catalog.to_json(h.value)::text, ', ')
                                    FROM pg_catalog.jsonb_each_text(answer -> 'headers') AS h), '')
                     || '}}';
    END IF;

    -- PostgREST's form of response.headers, [{"Name": "value"}, ...], appended to what an
    -- earlier step of the transaction set.
    FOR header IN SELECT h.key, h.value FROM pg_catalog.jsonb_each_text(answer -> 'headers') AS h LOOP
        ours := ours || CASE WHEN ours = '' THEN '' ELSE ', ' END
                || '{' || pg_catalog.to_json(header.key)::text || ': ' || pg_catalog.to_json(header.value)::text || '}';
    END LOOP;
    IF ours = '' THEN
        RETURN;
    END IF;
    existing := coalesce(pg_catalog.current_setting('response.headers', true), '');
    IF pg_catalog.left(existing, 1) = '[' AND pg_catalog.strpos(existing, ']') > 0 THEN
        inside := pg_catalog.substr(existing, 2, pg_catalog.length(existing) - pg_catalog.strpos(pg_catalog.reverse(existing), ']') - 1);
        existing := '[' || CASE WHEN inside ~ '^[ \t\r\n]*$' THEN '' ELSE inside || ', ' END || ours || ']';
    ELSE
        existing := '[' || ours || ']';
    END IF;
    PERFORM pg_catalog.set_config('response.headers', existing, true);
END
$$;
-- @end ratelimit_pre_request
