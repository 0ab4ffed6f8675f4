-- The drop-in extensions' install steps. Each app's drop-ins are an extension of their own
-- (ratelimit_rpc_limits, ratelimit_endpoint_limits, ratelimit_sliding_window_limits; their
-- definitions are in sql/drop_ins/), so a database gets only the drop-ins its app asks for, in
-- the schema the app calls (public by default), and the two apps' check_rate_limit, which take
-- the same argument types, never meet in one schema.

-- Whether `p_object` (of catalog `p_catalog`) is a drop-in that ratelimit 0.6.0 made and left in
-- place when it was updated to 0.7.0, of p_extension's app or (NULL) of any: the update says so in
-- its comment.
CREATE FUNCTION ratelimit.left_by_ratelimit(p_object oid, p_catalog name, p_extension text)
RETURNS boolean
LANGUAGE sql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT coalesce(pg_catalog.obj_description(p_object, p_catalog), '')
           LIKE 'ratelimit 0.6.0 drop-in, kept in place: CREATE EXTENSION '
                || coalesce(p_extension || ' %', '%')
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
    conflicts text[] := '{}';
    found record;
    statements text[];
    statement text;
BEGIN
    FOR found IN
        SELECT c.oid, pg_catalog.format('table %I.%I', p_schema, c.relname) AS what,
               ratelimit.left_by_ratelimit(c.oid, 'pg_class', NULL) AS left_over
        FROM pg_catalog.pg_class c
        WHERE c.relnamespace = p_schema::pg_catalog.regnamespace AND c.relname = ANY (p_tables)
        ORDER BY c.relname
    LOOP
        IF NOT found.left_over THEN
            conflicts := conflicts || found.what;
        END IF;
    END LOOP;
    FOR found IN
        SELECT p.oid, pg_catalog.format('function %I.%I(%s)', p_schema, p.proname,
                                        pg_catalog.pg_get_function_identity_arguments(p.oid)) AS what,
               ratelimit.left_by_ratelimit(p.oid, 'pg_proc', NULL) AS left_over
        FROM pg_catalog.pg_proc p
        WHERE p.pronamespace = p_schema::pg_catalog.regnamespace AND p.proname = ANY (p_functions)
        ORDER BY 2
    LOOP
        IF NOT found.left_over THEN
            conflicts := conflicts || found.what;
        END IF;
    END LOOP;
    IF pg_catalog.cardinality(conflicts) > 0 THEN
        RAISE EXCEPTION '% cannot be installed in schema %: % already there', p_extension, p_schema,
            pg_catalog.array_to_string(conflicts, ', ')
            USING ERRCODE = 'duplicate_object',
                  DETAIL = 'They are not ratelimit''s: your app''s own limiter, or another app''s drop-ins. Nothing was changed.',
                  HINT = 'To keep their rows, follow "Installing over your own limiter" in docs/migrating.md '
                         '(rename them, CREATE EXTENSION ' || p_extension || ', copy the rows in); or install '
                         'into another schema: CREATE EXTENSION ' || p_extension || ' SCHEMA <schema>.';
    END IF;
    -- The tables and their indexes (whose names the new tables' constraints take) are renamed,
    -- the statements made first and run after.
    SELECT coalesce(pg_catalog.array_agg(s.statement), '{}') INTO statements FROM (
        SELECT pg_catalog.format('ALTER TABLE %I.%I RENAME TO %I', p_schema, c.relname,
                                 c.relname || '_0_6_0') AS statement
        FROM pg_catalog.pg_class c
        WHERE c.relnamespace = p_schema::pg_catalog.regnamespace AND c.relname = ANY (p_tables)
          AND ratelimit.left_by_ratelimit(c.oid, 'pg_class', p_extension)
        UNION ALL
        SELECT pg_catalog.format('ALTER INDEX %I.%I RENAME TO %I', p_schema, i.relname,
                                 i.relname || '_0_6_0')
        FROM pg_catalog.pg_class c
        JOIN pg_catalog.pg_index x ON x.indrelid = c.oid
        JOIN pg_catalog.pg_class i ON i.oid = x.indexrelid
        WHERE c.relnamespace = p_schema::pg_catalog.regnamespace AND c.relname = ANY (p_tables)
          AND ratelimit.left_by_ratelimit(c.oid, 'pg_class', p_extension)
        UNION ALL
        SELECT pg_catalog.format('DROP FUNCTION %s', p.oid::pg_catalog.regprocedure)
        FROM pg_catalog.pg_proc p
        WHERE p.pronamespace = p_schema::pg_catalog.regnamespace AND p.proname = ANY (p_functions)
          AND ratelimit.left_by_ratelimit(p.oid, 'pg_proc', p_extension)
    ) AS s;
    FOREACH statement IN ARRAY statements LOOP
        EXECUTE statement;
    END LOOP;
END
$$;

-- Run last by each drop-in extension: the rows of the tables drop_in_install_begin moved aside,
-- copied into the extension's (the columns they share), and the old tables dropped. The counts
-- in flight go on counting.
CREATE FUNCTION ratelimit.drop_in_install_end(p_schema text, p_tables text[])
RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    table_name text;
    old_table pg_catalog.regclass;
    new_table pg_catalog.regclass;
    columns text;
BEGIN
    FOREACH table_name IN ARRAY p_tables LOOP
        old_table := pg_catalog.to_regclass(pg_catalog.format('%I.%I', p_schema, table_name || '_0_6_0'));
        CONTINUE WHEN old_table IS NULL;
        new_table := pg_catalog.format('%I.%I', p_schema, table_name)::pg_catalog.regclass;
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
