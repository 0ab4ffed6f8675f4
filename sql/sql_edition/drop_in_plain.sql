-- The grants of a drop-in's plain install (ratelimit_sql_<app>--<version>.plain.sql), which is
-- no extension: set_member_privileges finds the members of an extension by its dependencies, so
-- a plain drop-in's grants go through this instead, given the objects drop_in_install_begin was
-- given. As for an extension: each of the drop-in's tables and functions in p_schema loses every
-- grant but its owner's (default privileges may have handed them to the API roles, TRUNCATE,
-- which ignores row level security, included), PUBLIC's included, then gets exactly the grants
-- of p_grants, rows of (privilege, kind, object, grantee) checked whole before anything changes
-- (a role that does not exist is skipped). Another app's drop-ins a ratelimit 0.6.0 install left
-- there are none of its objects. Run by the plain files only (granted to nobody).
CREATE FUNCTION ratelimit.set_drop_in_privileges(p_extension text, p_schema text, p_tables text[],
                                                 p_functions text[], p_grants text[])
RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    schema_oid pg_catalog.regnamespace;
    members pg_catalog.oid[];
    granted pg_catalog.oid[] := '{}';
    member record;
    grantees text;
    i integer;
BEGIN
    PERFORM ratelimit.drop_in_install_check(p_extension, p_schema, p_tables, p_functions);
    schema_oid := pg_catalog.to_regnamespace(p_schema);
    members := ARRAY(
        SELECT c.oid FROM pg_catalog.pg_class c
        WHERE c.relnamespace = schema_oid AND c.relname = ANY (p_tables) AND c.relkind IN ('r', 'p')
          AND NOT ratelimit.left_by_ratelimit(c.oid, 'pg_class', NULL)
        UNION ALL
        SELECT p.oid FROM pg_catalog.pg_proc p
        WHERE p.pronamespace = schema_oid AND p.proname = ANY (p_functions)
          AND NOT ratelimit.left_by_ratelimit(p.oid, 'pg_proc', NULL));
    IF p_grants IS NULL OR pg_catalog.cardinality(p_grants) = 0 OR pg_catalog.array_ndims(p_grants) <> 2
       OR pg_catalog.array_length(p_grants, 2) <> 4 OR EXISTS (SELECT FROM pg_catalog.unnest(p_grants) AS g(field) WHERE g.field IS NULL) THEN
        RAISE EXCEPTION 'p_grants must be a list of (privilege, kind, object, grantee) rows without NULLs, at least one'
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    FOR i IN 1 .. pg_catalog.array_length(p_grants, 1) LOOP
        IF (p_grants[i][2], p_grants[i][1]) NOT IN (('FUNCTION', 'EXECUTE'), ('TABLE', 'SELECT')) THEN
            RAISE EXCEPTION 'p_grants[%]: % on a % is not a grant of the drop-ins'' lists (EXECUTE on a FUNCTION, SELECT on a TABLE)',
                i, pg_catalog.quote_literal(p_grants[i][1]), pg_catalog.quote_literal(p_grants[i][2])
                USING ERRCODE = 'invalid_parameter_value';
        END IF;
        -- Read by the type's input function, never spliced in as SQL.
        BEGIN
            granted[i] := CASE p_grants[i][2]
                WHEN 'FUNCTION' THEN pg_catalog.to_regprocedure(p_grants[i][3])::pg_catalog.oid
                ELSE pg_catalog.to_regclass(p_grants[i][3])::pg_catalog.oid END;
        EXCEPTION WHEN syntax_error OR invalid_name OR invalid_text_representation THEN
            granted[i] := NULL;
        END;
        IF granted[i] IS NULL OR granted[i] <> ALL (members) THEN
            RAISE EXCEPTION 'p_grants[%]: % % is not one of the objects of %', i,
                pg_catalog.lower(p_grants[i][2]), pg_catalog.quote_literal(p_grants[i][3]), p_extension
                USING ERRCODE = 'invalid_parameter_value';
        END IF;
    END LOOP;

    FOR member IN
        SELECT 'TABLE' AS kind, c.oid::pg_catalog.regclass::text AS name, c.relowner AS owner,
               ARRAY(SELECT a.grantee FROM pg_catalog.aclexplode(c.relacl) a
                     UNION
                     SELECT a.grantee FROM pg_catalog.pg_attribute att,
                                           pg_catalog.aclexplode(att.attacl) a
                     WHERE att.attrelid = c.oid) AS grantees
        FROM pg_catalog.pg_class c WHERE c.oid = ANY (members)
        UNION ALL
        SELECT 'ROUTINE', p.oid::pg_catalog.regprocedure::text, p.proowner,
               ARRAY(SELECT a.grantee FROM pg_catalog.aclexplode(p.proacl) a)
        FROM pg_catalog.pg_proc p WHERE p.oid = ANY (members)
    LOOP
        SELECT pg_catalog.string_agg(pg_catalog.quote_ident(r.rolname), ', ' ORDER BY r.rolname)
        INTO grantees
        FROM pg_catalog.pg_roles r
        WHERE r.oid = ANY (member.grantees) AND r.oid <> member.owner;
        EXECUTE pg_catalog.format('REVOKE ALL ON %s %s FROM %s CASCADE', member.kind, member.name,
                                  pg_catalog.concat_ws(', ', 'PUBLIC', grantees));
    END LOOP;

    FOR i IN 1 .. pg_catalog.array_length(p_grants, 1) LOOP
        IF p_grants[i][4] = 'PUBLIC'
           OR EXISTS (SELECT 1 FROM pg_catalog.pg_roles r WHERE r.rolname = p_grants[i][4]) THEN
            EXECUTE pg_catalog.format('GRANT %s ON %s %s TO %s', p_grants[i][1], p_grants[i][2],
                                      CASE p_grants[i][2]
                                          WHEN 'FUNCTION' THEN granted[i]::pg_catalog.regprocedure::text
                                          ELSE granted[i]::pg_catalog.regclass::text END,
                                      CASE p_grants[i][4] WHEN 'PUBLIC' THEN 'PUBLIC'
                                      ELSE pg_catalog.quote_ident(p_grants[i][4]) END);
        END IF;
    END LOOP;
END
$$;
