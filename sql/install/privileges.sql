-- Privileges: row level security on the policy tables, then every member object's grants, set
-- by construction (the last block), whatever default privileges the database has.

-- The policy tables have no policy: only their owner (and superusers) read or write them.
ALTER TABLE ratelimit.policies ENABLE ROW LEVEL SECURITY;
ALTER TABLE ratelimit.tiers ENABLE ROW LEVEL SECURITY;
ALTER TABLE ratelimit.key_overrides ENABLE ROW LEVEL SECURITY;
ALTER TABLE ratelimit.access_list ENABLE ROW LEVEL SECURITY;
ALTER TABLE ratelimit.denial_log ENABLE ROW LEVEL SECURITY;
ALTER TABLE ratelimit.request_routes ENABLE ROW LEVEL SECURITY;

------------------------------------------------------------------------------------------------
-- Privileges by construction. Default privileges (ALTER DEFAULT PRIVILEGES, database-wide or
-- IN SCHEMA) hand new tables, views, sequences, functions, types and schemas to whichever roles
-- they name, TRUNCATE (which ignores row level security) and EXECUTE on reset and block
-- included. So every member of an extension of ratelimit's loses every grant but its owner's,
-- PUBLIC's included, and then gets exactly the grants its script lists: the list of
-- docs/operations.md, "Who may call what". ratelimit's own list is the last block here; each
-- drop-in extension passes its own (sql/drop_ins/).
------------------------------------------------------------------------------------------------

-- @begin set_member_privileges
-- The members of extension p_extension; with NULL, of the SQL edition's plain install, which is
-- no extension: the schema ratelimit and every object in it.
CREATE FUNCTION ratelimit.extension_members(p_extension text)
RETURNS TABLE (classid pg_catalog.oid, objid pg_catalog.oid)
LANGUAGE sql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT d.classid, d.objid
    FROM pg_catalog.pg_depend d
    JOIN pg_catalog.pg_extension e ON e.oid = d.refobjid
    WHERE p_extension IS NOT NULL
      AND d.refclassid = 'pg_catalog.pg_extension'::pg_catalog.regclass
      AND d.deptype = 'e' AND e.extname = p_extension
    UNION ALL
    SELECT 'pg_catalog.pg_namespace'::pg_catalog.regclass, n.oid
    FROM pg_catalog.pg_namespace n WHERE p_extension IS NULL AND n.nspname = 'ratelimit'
    UNION ALL
    SELECT 'pg_catalog.pg_class'::pg_catalog.regclass, c.oid
    FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
    WHERE p_extension IS NULL AND n.nspname = 'ratelimit'
      AND c.relkind IN ('r', 'p', 'v', 'm', 'f', 'S')
    UNION ALL
    SELECT 'pg_catalog.pg_proc'::pg_catalog.regclass, p.oid
    FROM pg_catalog.pg_proc p JOIN pg_catalog.pg_namespace n ON n.oid = p.pronamespace
    WHERE p_extension IS NULL AND n.nspname = 'ratelimit'
    UNION ALL
    SELECT 'pg_catalog.pg_type'::pg_catalog.regclass, t.oid
    FROM pg_catalog.pg_type t JOIN pg_catalog.pg_namespace n ON n.oid = t.typnamespace
    WHERE p_extension IS NULL AND n.nspname = 'ratelimit'
$$;

-- p_extension NULL: the SQL edition's plain install (ratelimit.extension_members).
-- p_reset_every_role: at install the objects are new, so any grant on them came from default
-- privileges and goes; an update takes back only from the roles the list speaks for (anon,
-- authenticated). p_grants: rows of (privilege, kind, name, grantee), a role that does not
-- exist skipped; checked whole before anything changes. Run by the extensions' scripts only
-- (granted to nobody).
CREATE FUNCTION ratelimit.set_member_privileges(p_extension text, p_reset_every_role boolean,
                                                p_grants text[])
RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    reset_every_role constant boolean := p_reset_every_role;
    -- The roles the list speaks for; an update takes back from them whatever it does not give.
    api_roles constant text[] := ARRAY['anon', 'authenticated'];
    member record;
    grantees text;
    granted pg_catalog.oid[] := '{}';
    i integer;
BEGIN
    IF p_extension IS NOT NULL AND NOT EXISTS (SELECT FROM pg_catalog.pg_extension e WHERE e.extname = p_extension) THEN
        RAISE EXCEPTION 'p_extension: extension % does not exist', coalesce(pg_catalog.quote_ident(p_extension), 'NULL')
            USING ERRCODE = 'undefined_object';
    END IF;
    IF p_reset_every_role IS NULL THEN
        RAISE EXCEPTION 'p_reset_every_role must not be NULL' USING ERRCODE = 'null_value_not_allowed';
    END IF;
    -- Every member loses its grants first, so an empty or a bad list would leave them with their
    -- owner's only: the whole list is checked before anything changes. Each row grants one of the
    -- privileges these lists use on a member of the extension, named as PostgreSQL names it.
    IF p_grants IS NULL OR pg_catalog.cardinality(p_grants) = 0 OR pg_catalog.array_ndims(p_grants) <> 2
       OR pg_catalog.array_length(p_grants, 2) <> 4 OR EXISTS (SELECT FROM pg_catalog.unnest(p_grants) AS g(field) WHERE g.field IS NULL) THEN
        RAISE EXCEPTION 'p_grants must be a list of (privilege, kind, object, grantee) rows without NULLs, at least one'
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    FOR i IN 1 .. pg_catalog.array_length(p_grants, 1) LOOP
        IF (p_grants[i][2], p_grants[i][1]) NOT IN (('FUNCTION', 'EXECUTE'), ('TABLE', 'SELECT'),
                                                     ('SCHEMA', 'USAGE'), ('TYPE', 'USAGE')) THEN
            RAISE EXCEPTION 'p_grants[%]: % on a % is not a grant of the extensions'' lists (EXECUTE on a FUNCTION, SELECT on a TABLE, USAGE on a SCHEMA or a TYPE)',
                i, pg_catalog.quote_literal(p_grants[i][1]), pg_catalog.quote_literal(p_grants[i][2])
                USING ERRCODE = 'invalid_parameter_value';
        END IF;
        -- The object's name is read by its type's input function, never spliced in as SQL
        -- (PostgreSQL 15 raises on a name it cannot parse where later majors answer NULL).
        BEGIN
            granted[i] := CASE p_grants[i][2]
                WHEN 'FUNCTION' THEN pg_catalog.to_regprocedure(p_grants[i][3])::pg_catalog.oid
                WHEN 'TABLE' THEN pg_catalog.to_regclass(p_grants[i][3])::pg_catalog.oid
                WHEN 'SCHEMA' THEN pg_catalog.to_regnamespace(p_grants[i][3])::pg_catalog.oid
                ELSE pg_catalog.to_regtype(p_grants[i][3])::pg_catalog.oid END;
        EXCEPTION WHEN syntax_error OR invalid_name OR invalid_text_representation THEN
            granted[i] := NULL;
        END;
        IF granted[i] IS NULL OR NOT EXISTS (
               SELECT FROM ratelimit.extension_members(p_extension) d
               WHERE d.objid = granted[i]
                 AND d.classid = CASE p_grants[i][2]
                     WHEN 'FUNCTION' THEN 'pg_catalog.pg_proc'::pg_catalog.regclass
                     WHEN 'TABLE' THEN 'pg_catalog.pg_class'::pg_catalog.regclass
                     WHEN 'SCHEMA' THEN 'pg_catalog.pg_namespace'::pg_catalog.regclass
                     ELSE 'pg_catalog.pg_type'::pg_catalog.regclass END) THEN
            RAISE EXCEPTION 'p_grants[%]: % % is not a member of extension %', i,
                pg_catalog.lower(p_grants[i][2]), pg_catalog.quote_literal(p_grants[i][3]), p_extension
                USING ERRCODE = 'invalid_parameter_value';
        END IF;
    END LOOP;

    FOR member IN
        WITH members AS (SELECT d.classid, d.objid FROM ratelimit.extension_members(p_extension) d)
        SELECT CASE c.relkind WHEN 'S' THEN 'SEQUENCE' ELSE 'TABLE' END AS kind,
               pg_catalog.format('%I.%I', n.nspname, c.relname) AS name, c.relowner AS owner,
               ARRAY(SELECT a.grantee FROM pg_catalog.aclexplode(c.relacl) a
                     UNION
                     SELECT a.grantee FROM pg_catalog.pg_attribute att,
                                           pg_catalog.aclexplode(att.attacl) a
                     WHERE att.attrelid = c.oid) AS grantees
        FROM members m
        JOIN pg_catalog.pg_class c ON m.classid = 'pg_catalog.pg_class'::pg_catalog.regclass
                                  AND c.oid = m.objid
        JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
        WHERE c.relkind IN ('r', 'p', 'v', 'm', 'f', 'S')
        UNION ALL
        SELECT 'ROUTINE',
               pg_catalog.format('%I.%I(%s)', n.nspname, p.proname,
                                 pg_catalog.pg_get_function_identity_arguments(p.oid)),
               p.proowner, ARRAY(SELECT a.grantee FROM pg_catalog.aclexplode(p.proacl) a)
        FROM members m
        JOIN pg_catalog.pg_proc p ON m.classid = 'pg_catalog.pg_proc'::pg_catalog.regclass
                                 AND p.oid = m.objid
        JOIN pg_catalog.pg_namespace n ON n.oid = p.pronamespace
        UNION ALL
        SELECT 'TYPE', pg_catalog.format('%I.%I', n.nspname, t.typname), t.typowner,
               ARRAY(SELECT a.grantee FROM pg_catalog.aclexplode(t.typacl) a)
        FROM members m
        JOIN pg_catalog.pg_type t ON m.classid = 'pg_catalog.pg_type'::pg_catalog.regclass
                                 AND t.oid = m.objid
        JOIN pg_catalog.pg_namespace n ON n.oid = t.typnamespace
        -- From 17 the row types of the tables and all array types are members too. A row type
        -- goes with its table and an array type's privileges are its element type's (GRANT
        -- refuses it): the types CREATE TYPE made are listed, as on 15.
        WHERE t.typsubscript <> 'pg_catalog.array_subscript_handler'::pg_catalog.regproc
          AND NOT EXISTS (SELECT FROM pg_catalog.pg_class c WHERE c.oid = t.typrelid AND c.relkind <> 'c')
        UNION ALL
        SELECT 'SCHEMA', pg_catalog.quote_ident(n.nspname), n.nspowner,
               ARRAY(SELECT a.grantee FROM pg_catalog.aclexplode(n.nspacl) a)
        FROM members m
        JOIN pg_catalog.pg_namespace n ON m.classid = 'pg_catalog.pg_namespace'::pg_catalog.regclass
                                      AND n.oid = m.objid
    LOOP
        SELECT pg_catalog.string_agg(pg_catalog.quote_ident(r.rolname), ', ' ORDER BY r.rolname)
        INTO grantees
        FROM pg_catalog.pg_roles r
        WHERE r.oid = ANY (member.grantees) AND r.oid <> member.owner
          AND (reset_every_role OR r.rolname = ANY (api_roles));
        EXECUTE pg_catalog.format('REVOKE ALL ON %s %s FROM %s CASCADE', member.kind, member.name,
                                  pg_catalog.concat_ws(', ', 'PUBLIC', grantees));
        -- Nobody but the owner creates objects in the extension's schema.
        IF member.kind = 'SCHEMA' AND NOT reset_every_role THEN
            SELECT pg_catalog.string_agg(pg_catalog.quote_ident(r.rolname), ', ' ORDER BY r.rolname)
            INTO grantees
            FROM pg_catalog.pg_roles r
            WHERE r.oid = ANY (member.grantees) AND r.oid <> member.owner;
            IF grantees IS NOT NULL THEN
                EXECUTE pg_catalog.format('REVOKE CREATE ON SCHEMA %s FROM %s CASCADE',
                                          member.name, grantees);
            END IF;
        END IF;
    END LOOP;

    FOR i IN 1 .. pg_catalog.array_length(p_grants, 1) LOOP
        IF p_grants[i][4] = 'PUBLIC'
           OR EXISTS (SELECT 1 FROM pg_catalog.pg_roles r WHERE r.rolname = p_grants[i][4]) THEN
            EXECUTE pg_catalog.format('GRANT %s ON %s %s TO %s', p_grants[i][1], p_grants[i][2],
                                      CASE p_grants[i][2]
                                          WHEN 'FUNCTION' THEN granted[i]::pg_catalog.regprocedure::text
                                          WHEN 'TABLE' THEN granted[i]::pg_catalog.regclass::text
                                          WHEN 'SCHEMA' THEN granted[i]::pg_catalog.regnamespace::text
                                          ELSE granted[i]::pg_catalog.regtype::text END,
                                      CASE p_grants[i][4] WHEN 'PUBLIC' THEN 'PUBLIC'
                                      ELSE pg_catalog.quote_ident(p_grants[i][4]) END);
        END IF;
    END LOOP;
END
$$;
-- @end set_member_privileges

-- ratelimit's list. Keep this statement last.
SELECT ratelimit.set_member_privileges('ratelimit', true, ARRAY[
-- @begin ratelimit_grants
    -- Everyone: these compute from their arguments only. A type reveals nothing.
    ARRAY['EXECUTE', 'FUNCTION', 'ratelimit.http_headers(ratelimit.policy_decision, text)'::pg_catalog.regprocedure::text, 'PUBLIC'],
    ARRAY['EXECUTE', 'FUNCTION', 'ratelimit.http_body(ratelimit.policy_decision, text)'::pg_catalog.regprocedure::text, 'PUBLIC'],
    ARRAY['EXECUTE', 'FUNCTION', 'ratelimit.validate_limit(integer, interval, text, text, integer, text)'::pg_catalog.regprocedure::text, 'PUBLIC'],
    ARRAY['EXECUTE', 'FUNCTION', 'ratelimit.validate_policy_options(text, interval[], interval, interval)'::pg_catalog.regprocedure::text, 'PUBLIC'],
    ARRAY['EXECUTE', 'FUNCTION', 'ratelimit.hash_subject(text)'::pg_catalog.regprocedure::text, 'PUBLIC'],
    ARRAY['EXECUTE', 'FUNCTION', 'ratelimit.describe_period(interval)'::pg_catalog.regprocedure::text, 'PUBLIC'],
    ARRAY['EXECUTE', 'FUNCTION', 'ratelimit.clock_now()'::pg_catalog.regprocedure::text, 'PUBLIC'],
    ARRAY['EXECUTE', 'FUNCTION', 'ratelimit.cleanup_jobs()'::pg_catalog.regprocedure::text, 'PUBLIC'],
    -- The caller's own identity and address, as the request gives them; the fields a declared
    -- limiter can return.
    ARRAY['EXECUTE', 'FUNCTION', 'ratelimit.jwt_subject()'::pg_catalog.regprocedure::text, 'PUBLIC'],
    ARRAY['EXECUTE', 'FUNCTION', 'ratelimit.client_address()'::pg_catalog.regprocedure::text, 'PUBLIC'],
    ARRAY['EXECUTE', 'FUNCTION', 'ratelimit.declared_limiter_fields()'::pg_catalog.regprocedure::text, 'PUBLIC'],
    -- Row level security runs as the querying role, anon included: it charges only the
    -- caller's own key (the JWT's sub, or its address).
    ARRAY['EXECUTE', 'FUNCTION', 'ratelimit.within_limit(text, integer)'::pg_catalog.regprocedure::text, 'PUBLIC'],
    -- PostgREST calls its db-pre-request hook as the request's role, whatever it is;
    -- its API roles need the schema to reach it (and reach nothing else there that
    -- PUBLIC does not).
    ARRAY['EXECUTE', 'FUNCTION', 'ratelimit.pre_request()'::pg_catalog.regprocedure::text, 'PUBLIC'],
    ARRAY['USAGE', 'SCHEMA', 'ratelimit', 'anon'],
    ARRAY['USAGE', 'SCHEMA', 'ratelimit', 'authenticated'],
    ARRAY['USAGE', 'TYPE', 'ratelimit.decision'::pg_catalog.regtype::text, 'PUBLIC'],
    ARRAY['USAGE', 'TYPE', 'ratelimit.policy_decision'::pg_catalog.regtype::text, 'PUBLIC'],
    -- An authenticated user spends only its own endpoint quota (checked against the JWT).
    -- service_role (Supabase's trusted server code): deciding and the counters; never the
    -- policy tables.
    ARRAY['USAGE', 'SCHEMA', 'ratelimit', 'service_role'],
    ARRAY['EXECUTE', 'FUNCTION', 'ratelimit.check(text, text, integer, text, inet, uuid)'::pg_catalog.regprocedure::text, 'service_role'],
    ARRAY['EXECUTE', 'FUNCTION', 'ratelimit.check_many(text, text[], integer, text, inet, uuid)'::pg_catalog.regprocedure::text, 'service_role'],
    ARRAY['EXECUTE', 'FUNCTION', 'ratelimit.check_all(text[], text[], integer, text, inet, uuid)'::pg_catalog.regprocedure::text, 'service_role'],
    ARRAY['EXECUTE', 'FUNCTION', 'ratelimit.check_http(text[], text[], integer, text, inet, uuid, text, text)'::pg_catalog.regprocedure::text, 'service_role'],
    ARRAY['EXECUTE', 'FUNCTION', 'ratelimit.declared_limiter_check(text, text, integer, integer, interval)'::pg_catalog.regprocedure::text, 'service_role'],
    ARRAY['EXECUTE', 'FUNCTION', 'ratelimit.consume(text, integer, interval, integer, text, text, integer, text, interval)'::pg_catalog.regprocedure::text, 'service_role'],
    ARRAY['EXECUTE', 'FUNCTION', 'ratelimit.peek(text, integer, interval, integer, text, text, integer, text)'::pg_catalog.regprocedure::text, 'service_role'],
    ARRAY['EXECUTE', 'FUNCTION', 'ratelimit.refund(text, integer, interval, integer, text, text, integer, text)'::pg_catalog.regprocedure::text, 'service_role'],
    ARRAY['EXECUTE', 'FUNCTION', 'ratelimit.allow(text, integer, interval, integer, text, text, integer, text)'::pg_catalog.regprocedure::text, 'service_role'],
    ARRAY['EXECUTE', 'FUNCTION', 'ratelimit.consume_many(text[], integer, interval, integer, text, text, integer, text)'::pg_catalog.regprocedure::text, 'service_role'],
    ARRAY['EXECUTE', 'FUNCTION', 'ratelimit.peek_many(text[], integer, interval, integer, text, text, integer, text)'::pg_catalog.regprocedure::text, 'service_role'],
    ARRAY['EXECUTE', 'FUNCTION', 'ratelimit.acquire(text, integer, integer, text, interval)'::pg_catalog.regprocedure::text, 'service_role'],
    ARRAY['EXECUTE', 'FUNCTION', 'ratelimit.release(bigint)'::pg_catalog.regprocedure::text, 'service_role'],
    ARRAY['EXECUTE', 'FUNCTION', 'ratelimit.in_flight(text)'::pg_catalog.regprocedure::text, 'service_role'],
    ARRAY['EXECUTE', 'FUNCTION', 'ratelimit.acquire_policy(text, text, integer, text, text, inet, uuid)'::pg_catalog.regprocedure::text, 'service_role'],
    ARRAY['EXECUTE', 'FUNCTION', 'ratelimit.lease_decision(text, ratelimit.lease)'::pg_catalog.regprocedure::text, 'service_role'],
    ARRAY['EXECUTE', 'FUNCTION', 'ratelimit.reserve(text, integer, interval, integer, text, text, integer, interval)'::pg_catalog.regprocedure::text, 'service_role'],
    ARRAY['EXECUTE', 'FUNCTION', 'ratelimit.settle(bigint, integer)'::pg_catalog.regprocedure::text, 'service_role'],
    ARRAY['EXECUTE', 'FUNCTION', 'ratelimit.cancel(bigint)'::pg_catalog.regprocedure::text, 'service_role'],
    ARRAY['EXECUTE', 'FUNCTION', 'ratelimit.reserve_policy(text, text, integer, interval, text, inet, uuid)'::pg_catalog.regprocedure::text, 'service_role'],
    ARRAY['EXECUTE', 'FUNCTION', 'ratelimit.reset(text, text)'::pg_catalog.regprocedure::text, 'service_role'],
    ARRAY['EXECUTE', 'FUNCTION', 'ratelimit.block(text, interval, text)'::pg_catalog.regprocedure::text, 'service_role'],
    ARRAY['EXECUTE', 'FUNCTION', 'ratelimit.consume_all(text[], integer[], interval[], text[], text[], integer[], boolean[], integer)'::pg_catalog.regprocedure::text, 'service_role'],
    ARRAY['EXECUTE', 'FUNCTION', 'ratelimit.reset_policy_key(text, text)'::pg_catalog.regprocedure::text, 'service_role'],
    ARRAY['EXECUTE', 'FUNCTION', 'ratelimit.block_policy_key(text, text, interval)'::pg_catalog.regprocedure::text, 'service_role'],
    ARRAY['EXECUTE', 'FUNCTION', 'ratelimit.policy_stats()'::pg_catalog.regprocedure::text, 'service_role'],
    ARRAY['SELECT', 'TABLE', 'ratelimit.policy_stats'::pg_catalog.regclass::text, 'service_role'],
    ARRAY['EXECUTE', 'FUNCTION', 'ratelimit.top_offenders(integer)'::pg_catalog.regprocedure::text, 'service_role'],
    ARRAY['EXECUTE', 'FUNCTION', 'ratelimit.metrics()'::pg_catalog.regprocedure::text, 'service_role'],
    ARRAY['EXECUTE', 'FUNCTION', 'ratelimit.memory_stats()'::pg_catalog.regprocedure::text, 'service_role'],
    ARRAY['SELECT', 'TABLE', 'ratelimit.memory_stats'::pg_catalog.regclass::text, 'service_role'],
    ARRAY['EXECUTE', 'FUNCTION', 'ratelimit.memory_stats_by_database()'::pg_catalog.regprocedure::text, 'service_role']
-- @end ratelimit_grants
]);
