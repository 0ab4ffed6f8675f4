-- The drop-in extensions' install steps. Each app's drop-ins are an extension of their own
-- (ratelimit_rpc_limits, ratelimit_endpoint_limits, ratelimit_sliding_window_limits; their
-- definitions are in sql/drop_ins/), so a database gets only the drop-ins its app asks for, in
-- the schema the app calls (public by default), and the two apps' check_rate_limit, which take
-- the same argument types, never meet in one schema.

-- Whether `p_object` (of catalog `p_catalog`, pg_class or pg_proc) is a drop-in that ratelimit
-- 0.6.0 made and left in place when it was updated to 0.7.0, of p_extension's app or (NULL) of
-- any: the update says so in its comment, and the object is owned by ratelimit's owner (either
-- edition's: one serves a database) or a superuser. Only an object's owner (or a superuser) can
-- comment on it, so a role that makes its own table of a drop-in's name, comment and all, cannot
-- pass it off as ratelimit's. A relation must be an ordinary table: a view (whose functions would
-- run as the installing role when its rows are copied) never is. drop_in_install_end checks its
-- columns too.
CREATE FUNCTION ratelimit.left_by_ratelimit(p_object oid, p_catalog name, p_extension text)
RETURNS boolean
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    object_owner oid;
BEGIN
    IF p_object IS NULL THEN
        RAISE EXCEPTION 'p_object must not be NULL' USING ERRCODE = 'null_value_not_allowed';
    END IF;
    IF p_catalog IS NULL OR p_catalog NOT IN ('pg_class', 'pg_proc') THEN
        RAISE EXCEPTION 'p_catalog must be pg_class or pg_proc (got %)', coalesce(pg_catalog.quote_literal(p_catalog), 'NULL')
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF p_catalog = 'pg_class' THEN
        SELECT c.relowner INTO object_owner FROM pg_catalog.pg_class c
        WHERE c.oid = p_object AND c.relkind = 'r';
    ELSE
        SELECT p.proowner INTO object_owner FROM pg_catalog.pg_proc p WHERE p.oid = p_object;
    END IF;
    RETURN coalesce(pg_catalog.obj_description(p_object, p_catalog), '')
               LIKE 'ratelimit 0.6.0 drop-in, kept in place: CREATE EXTENSION '
                    || coalesce(p_extension || ' %', '%')
           AND EXISTS (SELECT FROM pg_catalog.pg_roles r
                       WHERE r.oid = object_owner
                         AND (r.rolsuper OR r.oid = (SELECT e.extowner FROM pg_catalog.pg_extension e
                                                     WHERE e.extname IN ('ratelimit', 'ratelimit_sql'))));
END
$$;

-- The arguments of the drop-in install steps: none NULL, the extension one of the drop-ins' (of
-- either edition: ratelimit_sql_<app> is the SQL edition's), the schema one that exists, named as
-- an SQL identifier (as an extension script's schema is).
CREATE FUNCTION ratelimit.drop_in_install_check(p_extension text, p_schema text, p_tables text[],
                                                p_functions text[])
RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    schema_oid pg_catalog.regnamespace;
BEGIN
    IF p_extension IS NULL OR p_extension NOT IN ('ratelimit_rpc_limits', 'ratelimit_endpoint_limits',
                                                  'ratelimit_sliding_window_limits',
                                                  'ratelimit_sql_rpc_limits', 'ratelimit_sql_endpoint_limits',
                                                  'ratelimit_sql_sliding_window_limits') THEN
        RAISE EXCEPTION 'p_extension must be ratelimit_rpc_limits, ratelimit_endpoint_limits or ratelimit_sliding_window_limits (got %)',
            coalesce(pg_catalog.quote_literal(p_extension), 'NULL')
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF p_schema IS NULL THEN
        RAISE EXCEPTION 'p_schema must not be NULL' USING ERRCODE = 'null_value_not_allowed';
    END IF;
    -- PostgreSQL 15 raises on a name that is not an identifier where later majors answer NULL:
    -- one error on all of them.
    BEGIN
        schema_oid := pg_catalog.to_regnamespace(p_schema);
    EXCEPTION WHEN syntax_error OR invalid_name THEN
        schema_oid := NULL;
    END;
    IF schema_oid IS NULL THEN
        RAISE EXCEPTION 'p_schema: no schema is named % (as an SQL identifier, quoted where it needs to be)',
            pg_catalog.quote_literal(p_schema)
            USING ERRCODE = 'invalid_schema_name';
    END IF;
    IF p_tables IS NULL OR EXISTS (SELECT FROM pg_catalog.unnest(p_tables) AS t(name) WHERE t.name IS NULL) THEN
        RAISE EXCEPTION 'p_tables must be an array of table names without NULLs'
            USING ERRCODE = 'null_value_not_allowed';
    END IF;
    IF p_functions IS NULL OR EXISTS (SELECT FROM pg_catalog.unnest(p_functions) AS f(name) WHERE f.name IS NULL) THEN
        RAISE EXCEPTION 'p_functions must be an array of function names without NULLs'
            USING ERRCODE = 'null_value_not_allowed';
    END IF;
END
$$;

-- Run first by each drop-in extension. Its tables and functions (by name: another function of the
-- same name would make the app's positional calls ambiguous) must be missing from p_schema, but
-- for the drop-ins ratelimit 0.6.0 left there: its own are moved aside for the extension to make
-- anew, each table renamed to <name>_0_6_0 (drop_in_install_end copies its rows back), each
-- function dropped; another app's stay beside it, as they stood in 0.6.0. Any other object of
-- those names stops the install before anything changes, with one error that names every one.
CREATE FUNCTION ratelimit.drop_in_install_begin(p_extension text, p_schema text, p_tables text[],
                                                p_functions text[])
RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    schema_oid pg_catalog.regnamespace;
    -- The 0.6.0 update's comments name the C edition's extension of the app.
    left_for text := pg_catalog.replace(p_extension, 'ratelimit_sql_', 'ratelimit_');
    conflicts text[] := '{}';
    found record;
    statements text[];
    statement text;
BEGIN
    PERFORM ratelimit.drop_in_install_check(p_extension, p_schema, p_tables, p_functions);
    schema_oid := pg_catalog.to_regnamespace(p_schema);
    FOR found IN
        SELECT pg_catalog.format('%s %s.%I (owned by %s)',
                                 CASE c.relkind WHEN 'r' THEN 'table' WHEN 'v' THEN 'view'
                                     WHEN 'm' THEN 'materialized view' WHEN 'S' THEN 'sequence'
                                     WHEN 'f' THEN 'foreign table' WHEN 'p' THEN 'table'
                                     ELSE 'relation' END,
                                 schema_oid, c.relname, c.relowner::pg_catalog.regrole) AS what,
               ratelimit.left_by_ratelimit(c.oid, 'pg_class', NULL) AS left_over
        FROM pg_catalog.pg_class c
        WHERE c.relnamespace = schema_oid AND c.relname = ANY (p_tables)
        ORDER BY c.relname
    LOOP
        IF NOT found.left_over THEN
            conflicts := conflicts || found.what;
        END IF;
    END LOOP;
    FOR found IN
        SELECT pg_catalog.format('function %s.%I(%s) (owned by %s)', schema_oid, p.proname,
                                 pg_catalog.pg_get_function_identity_arguments(p.oid),
                                 p.proowner::pg_catalog.regrole) AS what,
               ratelimit.left_by_ratelimit(p.oid, 'pg_proc', NULL) AS left_over
        FROM pg_catalog.pg_proc p
        WHERE p.pronamespace = schema_oid AND p.proname = ANY (p_functions)
        ORDER BY 1
    LOOP
        IF NOT found.left_over THEN
            conflicts := conflicts || found.what;
        END IF;
    END LOOP;
    -- The names the tables and their indexes are moved aside to must be free: a relation another
    -- role made there would stop the rename halfway with an error that names neither.
    FOR found IN
        SELECT DISTINCT pg_catalog.format('%s %s.%I (owned by %s)',
                                 CASE t.relkind WHEN 'i' THEN 'index' WHEN 'v' THEN 'view'
                                     WHEN 'r' THEN 'table' ELSE 'relation' END,
                                 schema_oid, t.relname, t.relowner::pg_catalog.regrole) AS what
        FROM pg_catalog.pg_class c
        LEFT JOIN pg_catalog.pg_index x ON x.indrelid = c.oid
        LEFT JOIN pg_catalog.pg_class i ON i.oid = x.indexrelid
        CROSS JOIN LATERAL (VALUES (c.relname), (i.relname)) AS n(relname)
        JOIN pg_catalog.pg_class t ON t.relnamespace = schema_oid AND t.relname = n.relname || '_0_6_0'
        WHERE c.relnamespace = schema_oid AND c.relname = ANY (p_tables)
          AND ratelimit.left_by_ratelimit(c.oid, 'pg_class', left_for)
        ORDER BY 1
    LOOP
        conflicts := conflicts || found.what;
    END LOOP;
    IF pg_catalog.cardinality(conflicts) > 0 THEN
        RAISE EXCEPTION '% cannot be installed in schema %: % already there', p_extension, schema_oid,
            pg_catalog.array_to_string(conflicts, ', ')
            USING ERRCODE = 'duplicate_object',
                  DETAIL = 'They are not ratelimit''s: your app''s own limiter, or another app''s drop-ins. Nothing was changed.',
                  HINT = 'To keep their rows, follow "Installing over your own limiter" in docs/migrating.md '
                         '(move them to another schema with ALTER ... SET SCHEMA, which takes their indexes along; CREATE EXTENSION ' || p_extension || '; copy the rows in); or install '
                         'into another schema: CREATE EXTENSION ' || p_extension || ' SCHEMA <schema>.';
    END IF;
    -- The tables and their indexes (whose names the new tables' constraints take) are renamed,
    -- the statements made first and run after.
    SELECT coalesce(pg_catalog.array_agg(s.statement), '{}') INTO statements FROM (
        SELECT pg_catalog.format('ALTER TABLE %s.%I RENAME TO %I', schema_oid, c.relname,
                                 c.relname || '_0_6_0') AS statement
        FROM pg_catalog.pg_class c
        WHERE c.relnamespace = schema_oid AND c.relname = ANY (p_tables)
          AND ratelimit.left_by_ratelimit(c.oid, 'pg_class', left_for)
        UNION ALL
        SELECT pg_catalog.format('ALTER INDEX %s.%I RENAME TO %I', schema_oid, i.relname,
                                 i.relname || '_0_6_0')
        FROM pg_catalog.pg_class c
        JOIN pg_catalog.pg_index x ON x.indrelid = c.oid
        JOIN pg_catalog.pg_class i ON i.oid = x.indexrelid
        WHERE c.relnamespace = schema_oid AND c.relname = ANY (p_tables)
          AND ratelimit.left_by_ratelimit(c.oid, 'pg_class', left_for)
        UNION ALL
        SELECT pg_catalog.format('DROP FUNCTION %s', p.oid::pg_catalog.regprocedure)
        FROM pg_catalog.pg_proc p
        WHERE p.pronamespace = schema_oid AND p.proname = ANY (p_functions)
          AND ratelimit.left_by_ratelimit(p.oid, 'pg_proc', left_for)
    ) AS s;
    FOREACH statement IN ARRAY statements LOOP
        EXECUTE statement;
    END LOOP;
END
$$;

-- Run last by each drop-in extension: the rows of the tables drop_in_install_begin moved aside,
-- copied into the extension's (the columns they share), and the old tables dropped. The counts
-- in flight go on counting. A table of the same name that is not ratelimit's is left alone.
CREATE FUNCTION ratelimit.drop_in_install_end(p_schema text, p_tables text[])
RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    schema_oid pg_catalog.regnamespace;
    table_name text;
    old_table pg_catalog.regclass;
    new_table pg_catalog.regclass;
    columns text;
BEGIN
    -- The extension and function names are not this step's: any valid ones pass the check.
    PERFORM ratelimit.drop_in_install_check('ratelimit_rpc_limits', p_schema, p_tables, '{}');
    schema_oid := pg_catalog.to_regnamespace(p_schema);
    FOREACH table_name IN ARRAY p_tables LOOP
        SELECT c.oid INTO old_table FROM pg_catalog.pg_class c
        WHERE c.relnamespace = schema_oid AND c.relname = table_name || '_0_6_0'
          AND ratelimit.left_by_ratelimit(c.oid, 'pg_class', NULL);
        CONTINUE WHEN old_table IS NULL;
        SELECT c.oid INTO new_table FROM pg_catalog.pg_class c
        WHERE c.relnamespace = schema_oid AND c.relname = table_name;
        IF new_table IS NULL THEN
            RAISE EXCEPTION 'p_tables: table %.% does not exist', schema_oid, pg_catalog.quote_ident(table_name)
                USING ERRCODE = 'undefined_table';
        END IF;
        -- Only a table of the drop-in's exact columns (names and types) is copied: a column of
        -- another type would run its cast, whoever wrote it, as the installing role.
        IF EXISTS (
            (SELECT a.attname, a.atttypid FROM pg_catalog.pg_attribute a
             WHERE a.attrelid = new_table AND a.attnum > 0 AND NOT a.attisdropped
             EXCEPT
             SELECT b.attname, b.atttypid FROM pg_catalog.pg_attribute b
             WHERE b.attrelid = old_table AND b.attnum > 0 AND NOT b.attisdropped)
            UNION ALL
            (SELECT b.attname, b.atttypid FROM pg_catalog.pg_attribute b
             WHERE b.attrelid = old_table AND b.attnum > 0 AND NOT b.attisdropped
             EXCEPT
             SELECT a.attname, a.atttypid FROM pg_catalog.pg_attribute a
             WHERE a.attrelid = new_table AND a.attnum > 0 AND NOT a.attisdropped)) THEN
            RAISE EXCEPTION 'table % (owned by %) is not the drop-in table ratelimit 0.6.0 made: its columns differ from %''s',
                old_table, (SELECT c.relowner::pg_catalog.regrole FROM pg_catalog.pg_class c WHERE c.oid = old_table), new_table
                USING ERRCODE = 'duplicate_object',
                      DETAIL = 'Nothing was changed.',
                      HINT = 'Move it out of the way (ALTER TABLE ... SET SCHEMA) and copy its rows in yourself, as "Installing over your own limiter" in docs/migrating.md shows.';
        END IF;
        SELECT pg_catalog.string_agg(pg_catalog.quote_ident(a.attname), ', ' ORDER BY a.attnum)
        INTO columns
        FROM pg_catalog.pg_attribute a
        WHERE a.attrelid = new_table AND a.attnum > 0 AND NOT a.attisdropped
          AND EXISTS (SELECT FROM pg_catalog.pg_attribute b
                      WHERE b.attrelid = old_table AND b.attname = a.attname AND b.attnum > 0
                        AND NOT b.attisdropped);
        EXECUTE pg_catalog.format('INSERT INTO %s (%s) SELECT %s FROM %s', new_table, columns,
                                  columns, old_table);
        EXECUTE pg_catalog.format('DROP TABLE %s', old_table);
    END LOOP;
END
$$;
