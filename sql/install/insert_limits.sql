-- Insert limits: at most p_limit rows per key per p_period in a table, the key made of the new
-- row's columns and the caller. A BEFORE trigger charges the key with consume on the table
-- engine in the inserting transaction, so a rolled-back insert gives its charge back,
-- concurrent inserts wait on the key's row and never overshoot, and the instant is the server's,
-- never a timestamp the client wrote. The trigger function is PL/pgSQL made for the table; every
-- name and value in it comes from the catalog or is quoted as a literal.

-- @begin limit_inserts
-- p_key: the key's parts, joined with ':': 'column:<name>' (the new row's column), 'user' (the
-- JWT's sub, as user:<sub>), 'ip' (the client address), 'text:<value>'. p_error_code and
-- p_error_message: what a denied insert raises (a HINT gives the retry time). p_count_existing:
-- a timestamp column of the table; the rows already there whose instant is within the last
-- p_period are charged to their keys at once, so a limiter that counted rows keeps its counts
-- (only for keys made of columns). p_on_update: updates are charged as well.
CREATE OR REPLACE FUNCTION ratelimit.limit_inserts(
    p_table regclass,
    p_limit integer,
    p_period interval,
    p_key text[] DEFAULT ARRAY['user'],
    p_name text DEFAULT 'inserts',
    p_algorithm text DEFAULT 'sliding_window',
    p_engine text DEFAULT 'table',
    p_error_code text DEFAULT 'P0001',
    p_error_message text DEFAULT NULL,
    p_count_existing text DEFAULT NULL,
    p_on_update boolean DEFAULT false,
    p_anonymous text DEFAULT 'refuse')
RETURNS text
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $limit$
DECLARE
    missing text;
    table_schema text;
    table_name text;
    key_sql text[] := '{}';
    column_keys text[] := '{}';
    key_checks text[] := '{}';
    uses_caller boolean := false;
    column_name text;
    column_type regtype;
    function_name text;
    trigger_name text;
    key_prefix text;
    message text;
    body text;
    existing record;
    seeded bigint := 0;
    i integer;
BEGIN
    missing := CASE WHEN p_table IS NULL THEN 'p_table' WHEN p_limit IS NULL THEN 'p_limit'
                    WHEN p_period IS NULL THEN 'p_period' WHEN p_key IS NULL THEN 'p_key'
                    WHEN p_name IS NULL THEN 'p_name' WHEN p_algorithm IS NULL THEN 'p_algorithm'
                    WHEN p_engine IS NULL THEN 'p_engine' WHEN p_error_code IS NULL THEN 'p_error_code'
                    WHEN p_on_update IS NULL THEN 'p_on_update' WHEN p_anonymous IS NULL THEN 'p_anonymous' END;
    IF missing IS NOT NULL THEN
        RAISE EXCEPTION '% must not be NULL', missing USING ERRCODE = 'null_value_not_allowed';
    END IF;
    SELECT n.nspname, c.relname INTO table_schema, table_name
    FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
    WHERE c.oid = p_table AND c.relkind IN ('r', 'p');
    IF NOT FOUND THEN
        RAISE EXCEPTION 'p_table: % is not a table', p_table USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF table_schema = 'ratelimit' OR table_schema = 'pg_catalog' OR table_schema LIKE 'pg\_%' THEN
        RAISE EXCEPTION 'p_table: % is in a reserved schema', p_table USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF p_name !~ '^[a-z][a-z0-9_]{0,29}$' THEN
        RAISE EXCEPTION 'p_name: % is not a name of lower-case letters, digits and _ (up to 30, a letter first)', pg_catalog.quote_literal(p_name)
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    -- Only engines whose counts roll back with the insert.
    IF p_engine NOT IN ('table', 'unlogged') THEN
        RAISE EXCEPTION 'p_engine: % is not ''table'' or ''unlogged'' (an insert limit''s count must roll back with the insert)', pg_catalog.quote_literal(p_engine)
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    PERFORM ratelimit.validate_limit(p_limit, p_period, p_algorithm, p_engine);
    IF p_error_code !~ '^[0-9A-Z]{5}$' OR p_error_code LIKE '00%' THEN
        RAISE EXCEPTION 'p_error_code: % is not an error SQLSTATE (five digits or capital letters, not class 00)', pg_catalog.quote_literal(p_error_code)
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF p_anonymous NOT IN ('refuse', 'ip') THEN
        RAISE EXCEPTION 'p_anonymous: % is not ''refuse'' or ''ip''', pg_catalog.quote_literal(p_anonymous)
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF pg_catalog.cardinality(p_key) = 0 THEN
        RAISE EXCEPTION 'p_key: at least one part (''column:<name>'', ''user'', ''ip'', ''text:<value>'')'
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    FOR i IN 1 .. pg_catalog.cardinality(p_key) LOOP
        IF p_key[i] = 'user' THEN
            uses_caller := true;
            key_sql := key_sql || 'ratelimit_user'::text;
        ELSIF p_key[i] = 'ip' THEN
            uses_caller := true;
            key_sql := key_sql || '''ip:'' || coalesce(pg_catalog.host(ratelimit.client_address()), ''unknown'')'::text;
        ELSIF p_key[i] LIKE 'column:%' THEN
            column_name := pg_catalog.substr(p_key[i], 8);
            IF NOT EXISTS (SELECT FROM pg_catalog.pg_attribute
                           WHERE attrelid = p_table AND attname = column_name AND attnum > 0 AND NOT attisdropped) THEN
                RAISE EXCEPTION 'p_key[%]: % has no column %', i, p_table, pg_catalog.quote_ident(column_name)
                    USING ERRCODE = 'invalid_parameter_value';
            END IF;
            column_keys := column_keys || column_name;
            key_checks := key_checks || pg_catalog.format(
                '    IF NEW.%I IS NULL THEN RAISE EXCEPTION %L USING ERRCODE = ''null_value_not_allowed''; END IF;',
                column_name, column_name || ' must not be NULL: it is part of the key');
            key_sql := key_sql || pg_catalog.format('NEW.%I::text', column_name);
        ELSIF p_key[i] LIKE 'text:%' THEN
            key_sql := key_sql || pg_catalog.quote_literal(pg_catalog.substr(p_key[i], 6));
        ELSE
            RAISE EXCEPTION 'p_key[%]: % is not ''column:<name>'', ''user'', ''ip'' or ''text:<value>''', i, pg_catalog.quote_literal(coalesce(p_key[i], 'NULL'))
                USING ERRCODE = 'invalid_parameter_value';
        END IF;
    END LOOP;
    IF p_count_existing IS NOT NULL THEN
        SELECT a.atttypid::regtype INTO column_type FROM pg_catalog.pg_attribute a
        WHERE a.attrelid = p_table AND a.attname = p_count_existing AND a.attnum > 0 AND NOT a.attisdropped;
        IF column_type IS NULL OR column_type NOT IN ('timestamp with time zone'::regtype, 'timestamp without time zone') THEN
            RAISE EXCEPTION 'p_count_existing: % has no timestamp column %', p_table, pg_catalog.quote_ident(p_count_existing)
                USING ERRCODE = 'invalid_parameter_value';
        END IF;
        IF uses_caller THEN
            RAISE EXCEPTION 'p_count_existing: the rows already there can be counted only for a key made of their columns (not ''user'' or ''ip'')'
                USING ERRCODE = 'invalid_parameter_value';
        END IF;
    END IF;

    function_name := pg_catalog.left(table_name, 30) || '_ratelimit_' || p_name;
    trigger_name := 'ratelimit_' || p_name;
    key_prefix := pg_catalog.format('%I.%I:%s:', table_schema, table_name, p_name);
    message := coalesce(p_error_message,
        pg_catalog.format('rate limit exceeded: at most %s rows per %s in %s', p_limit, p_period, p_table));
    body := pg_catalog.concat_ws(E'\n',
        'DECLARE',
        '    ratelimit_d ratelimit.decision;',
        '    ratelimit_user text;',
        '    ratelimit_key text;',
        'BEGIN',
        CASE WHEN uses_caller THEN pg_catalog.concat_ws(E'\n',
            '    ratelimit_user := ''user:'' || ratelimit.jwt_subject();',
            '    IF ratelimit_user IS NULL THEN',
            CASE p_anonymous
                WHEN 'ip' THEN '        ratelimit_user := ''ip:'' || coalesce(pg_catalog.host(ratelimit.client_address()), ''unknown'');'
                ELSE pg_catalog.format('        RAISE EXCEPTION %L USING ERRCODE = ''insufficient_privilege'';',
                                       pg_catalog.format('inserting into %s needs a signed-in caller (a JWT sub claim)', p_table)) END,
            '    END IF;') END,
        CASE WHEN pg_catalog.cardinality(key_checks) > 0 THEN pg_catalog.array_to_string(key_checks, E'\n') END,
        pg_catalog.format('    ratelimit_key := %L || %s;', key_prefix, pg_catalog.array_to_string(key_sql, ' || '':'' || ')),
        pg_catalog.format('    ratelimit_d := ratelimit.consume(ratelimit_key, %s, %L::interval, 1, %L, %L);',
                          p_limit, p_period, p_algorithm, p_engine),
        '    IF NOT ratelimit_d.allowed THEN',
        pg_catalog.format('        RAISE EXCEPTION USING ERRCODE = %L, MESSAGE = %L,', p_error_code, message),
        '            HINT = pg_catalog.format(''Retry after %s seconds.'', pg_catalog.ceil(ratelimit_d.retry_after_ms / 1000.0));',
        '    END IF;',
        '    RETURN NEW;',
        'END');

    -- A trigger or function of these names that limit_inserts did not make is the app's: it stays.
    IF EXISTS (SELECT FROM pg_catalog.pg_trigger t WHERE t.tgrelid = p_table AND t.tgname = trigger_name
               AND coalesce(pg_catalog.obj_description(t.tgfoid, 'pg_proc'), '') NOT LIKE 'ratelimit: insert limit %')
       OR EXISTS (SELECT FROM pg_catalog.pg_proc p JOIN pg_catalog.pg_namespace n ON n.oid = p.pronamespace
                  WHERE n.nspname = table_schema AND p.proname = function_name AND p.pronargs = 0
                    AND coalesce(pg_catalog.obj_description(p.oid, 'pg_proc'), '') NOT LIKE 'ratelimit: insert limit %') THEN
        RAISE EXCEPTION 'p_name: trigger % on % or function %.%() exists already and is not an insert limit', pg_catalog.quote_ident(trigger_name),
            p_table, pg_catalog.quote_ident(table_schema), pg_catalog.quote_ident(function_name)
            USING ERRCODE = 'duplicate_object', HINT = 'Give the limit another p_name.';
    END IF;
    IF EXISTS (SELECT FROM pg_catalog.pg_trigger WHERE tgrelid = p_table AND tgname = trigger_name) THEN
        EXECUTE pg_catalog.format('DROP TRIGGER %I ON %s', trigger_name, p_table);
    END IF;
    EXECUTE pg_catalog.format(
        'CREATE OR REPLACE FUNCTION %I.%I() RETURNS trigger LANGUAGE plpgsql VOLATILE SECURITY DEFINER '
        'SET search_path = pg_catalog, pg_temp AS %L', table_schema, function_name, body);
    EXECUTE pg_catalog.format('REVOKE ALL ON FUNCTION %I.%I() FROM PUBLIC', table_schema, function_name);
    EXECUTE pg_catalog.format('COMMENT ON FUNCTION %I.%I() IS %L', table_schema, function_name,
        pg_catalog.format('ratelimit: insert limit %s on %s: %s rows per %s, keyed by %s', p_name, p_table,
                          p_limit, p_period, pg_catalog.array_to_string(p_key, ', ')));
    EXECUTE pg_catalog.format('CREATE TRIGGER %I BEFORE INSERT%s ON %s FOR EACH ROW EXECUTE FUNCTION %I.%I()',
        trigger_name, CASE WHEN p_on_update THEN ' OR UPDATE' ELSE '' END, p_table, table_schema, function_name);

    -- The rows already there, charged to their keys: each key as many as it has within the
    -- last p_period (at most the limit), as of now.
    IF p_count_existing IS NOT NULL THEN
        FOR existing IN EXECUTE pg_catalog.format(
            'SELECT %L || %s AS key, LEAST(pg_catalog.count(*), %s)::integer AS n FROM %s '
            'WHERE %I > ratelimit.clock_now() - %L::interval AND %s GROUP BY 1',
            key_prefix,
            (SELECT pg_catalog.string_agg(CASE WHEN k LIKE 'column:%' THEN pg_catalog.format('%I::text', pg_catalog.substr(k, 8))
                                               ELSE pg_catalog.quote_literal(pg_catalog.substr(k, 6)) END, ' || '':'' || ' ORDER BY o)
             FROM pg_catalog.unnest(p_key) WITH ORDINALITY AS u (k, o)),
            p_limit, p_table, p_count_existing, p_period,
            coalesce((SELECT pg_catalog.string_agg(pg_catalog.format('%I IS NOT NULL', c), ' AND ')
                      FROM pg_catalog.unnest(column_keys) AS c), 'true'))
        LOOP
            PERFORM ratelimit.consume(existing.key, p_limit, p_period, existing.n, p_algorithm, p_engine);
            seeded := seeded + existing.n;
        END LOOP;
    END IF;
    RETURN pg_catalog.format('%s on %s%s', trigger_name, p_table,
                             CASE WHEN p_count_existing IS NULL THEN ''
                                  ELSE pg_catalog.format(', %s existing rows counted', seeded) END);
END
$limit$;
-- @end limit_inserts

-- @begin drop_insert_limit
-- Drops the trigger and function limit_inserts made for p_table under p_name.
CREATE OR REPLACE FUNCTION ratelimit.drop_insert_limit(p_table regclass, p_name text DEFAULT 'inserts')
RETURNS void
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    trigger_function regprocedure;
BEGIN
    IF p_table IS NULL OR p_name IS NULL THEN
        RAISE EXCEPTION '% must not be NULL', CASE WHEN p_table IS NULL THEN 'p_table' ELSE 'p_name' END
            USING ERRCODE = 'null_value_not_allowed';
    END IF;
    SELECT t.tgfoid::regprocedure INTO trigger_function FROM pg_catalog.pg_trigger t
    WHERE t.tgrelid = p_table AND t.tgname = 'ratelimit_' || p_name
      AND pg_catalog.obj_description(t.tgfoid, 'pg_proc') LIKE 'ratelimit: insert limit %';
    IF NOT FOUND THEN
        RAISE EXCEPTION 'p_name: % has no insert limit %', p_table, pg_catalog.quote_literal(p_name)
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    EXECUTE pg_catalog.format('DROP TRIGGER %I ON %s', 'ratelimit_' || p_name, p_table);
    EXECUTE pg_catalog.format('DROP FUNCTION %s', trigger_function);
END
$$;
-- @end drop_insert_limit
