-- Declared limiters: an app's own rate-limit function (its name, arguments and result shape),
-- made by one call over a policy or over an algorithm with a limit and period, so that every
-- existing call keeps working. The function made is plain PL/pgSQL glue that calls the public
-- API (consume, check, jwt_subject, client_address); every name and value in it comes from a
-- catalog lookup or is quoted as a literal, never spliced in as the caller wrote it.

-- What a declared function can return, by field: its default type and its value, an expression
-- over the decision (ratelimit_d, a ratelimit.decision or ratelimit.policy_decision), every
-- operator, function and type in it named with its schema (see declare_limiter).
-- @begin declared_limiter_fields
CREATE OR REPLACE FUNCTION ratelimit.declared_limiter_fields()
RETURNS TABLE (field text, default_type regtype, expression text, description text)
LANGUAGE sql IMMUTABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
    VALUES
        ('allowed', 'boolean'::regtype, 'ratelimit_d.allowed', 'the call may go ahead (and was counted)'),
        ('limited', 'boolean', 'NOT ratelimit_d.allowed', 'the call is over the limit'),
        ('limit', 'integer', 'ratelimit_d."limit"', 'the limit in force'),
        ('remaining', 'integer', 'ratelimit_d.remaining', 'what a call could take now'),
        ('used', 'integer', 'ratelimit_d."limit" OPERATOR(pg_catalog.-) ratelimit_d.remaining', 'the limit less what remains: the count in the window'),
        ('retry_after', 'integer', 'pg_catalog.ceil(ratelimit_d.retry_after_ms OPERATOR(pg_catalog./) 1000.0)::pg_catalog.int4', 'seconds until a denied call would be allowed (0 when allowed)'),
        ('retry_after_ms', 'bigint', 'ratelimit_d.retry_after_ms', 'the same in milliseconds'),
        ('reset_after', 'integer', 'pg_catalog.ceil(ratelimit_d.reset_after_ms OPERATOR(pg_catalog./) 1000.0)::pg_catalog.int4', 'seconds until the key is back to its full allowance'),
        ('reset_after_ms', 'bigint', 'ratelimit_d.reset_after_ms', 'the same in milliseconds'),
        ('retry_at', 'timestamp with time zone', 'ratelimit_now OPERATOR(pg_catalog.+) (ratelimit_d.retry_after_ms OPERATOR(pg_catalog.*) ''1 millisecond''::pg_catalog.interval)', 'the instant a denied call would be allowed'),
        ('reset_at', 'timestamp with time zone', 'ratelimit_now OPERATOR(pg_catalog.+) (ratelimit_d.reset_after_ms OPERATOR(pg_catalog.*) ''1 millisecond''::pg_catalog.interval)', 'the instant the key is back to its full allowance'),
        ('key', 'text', 'ratelimit_key', 'the key counted')
$$;
-- @end declared_limiter_fields

-- @begin declare_limiter
-- p_function: the app's function, 'name' or 'schema.name' (public by default). p_arguments: its
-- parameters in order, each 'name type' or 'name type DEFAULT value'. p_returns: 'boolean'
-- (true = allowed), 'limited' (true = over the limit), 'row' or 'jsonb', the last two with
-- p_columns, each 'name field' or 'name field type' (fields: declared_limiter_fields()).
-- p_key: the key's parts, joined with ':': 'user' (the JWT's sub, as user:<sub>), 'ip' (the
-- client address, as ip:<address>), 'arg:<name>' (an argument's value), 'hash:<name>' (its
-- SHA-256, hash_subject), 'text:<value>'. Over p_policy, or over p_limit per p_period with
-- p_algorithm on p_engine; p_limit_argument, p_period_argument (with p_period_unit for a
-- number) and p_cost_argument name arguments the caller passes them in.
CREATE OR REPLACE FUNCTION ratelimit.declare_limiter(
    p_function text,
    p_arguments text[] DEFAULT '{}',
    p_returns text DEFAULT 'boolean',
    p_columns text[] DEFAULT NULL,
    p_key text[] DEFAULT ARRAY['user'],
    p_policy text DEFAULT NULL,
    p_limit integer DEFAULT NULL,
    p_period interval DEFAULT NULL,
    p_algorithm text DEFAULT 'fixed_window',
    p_engine text DEFAULT 'table',
    p_limit_argument text DEFAULT NULL,
    p_period_argument text DEFAULT NULL,
    p_period_unit interval DEFAULT '1 second',
    p_cost_argument text DEFAULT NULL,
    p_anonymous text DEFAULT 'refuse',
    p_roles text[] DEFAULT ARRAY['authenticated'],
    p_replace boolean DEFAULT false)
RETURNS regprocedure
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $declare$
DECLARE
    parts text[];
    schema_name text;
    function_name text;
    arg_names text[] := '{}';
    arg_types regtype[] := '{}';
    arg_defaults text[] := '{}';
    arg_sql text[] := '{}';
    matched text[];
    type_oid regtype;
    default_sql text;
    column_names text[] := '{}';
    column_types regtype[] := '{}';
    column_values text[] := '{}';
    field_row record;
    key_sql text[] := '{}';
    checks text[] := '{}';
    checked_numbers text[] := '{}';
    uses_user boolean := false;
    uses_now boolean := false;
    name_of text;
    key_prefix text;
    limit_sql text;
    period_sql text;
    cost_sql text := '1';
    -- The decision's call, its key between the two: head || key || tail.
    decide_head text;
    decide_tail text;
    key_expression text;
    returns_sql text;
    answer_sql text;
    body text;
    signature text;
    existing regprocedure;
    existing_comment text;
    made regprocedure;
    role_name text;
    missing text;
    i integer;
BEGIN
    -- Only p_columns, p_policy, p_limit, p_period and the p_*_argument names may be NULL.
    missing := CASE WHEN p_function IS NULL THEN 'p_function' WHEN p_arguments IS NULL THEN 'p_arguments'
                      WHEN p_returns IS NULL THEN 'p_returns' WHEN p_key IS NULL THEN 'p_key'
                      WHEN p_algorithm IS NULL THEN 'p_algorithm' WHEN p_engine IS NULL THEN 'p_engine'
                      WHEN p_period_unit IS NULL THEN 'p_period_unit' WHEN p_anonymous IS NULL THEN 'p_anonymous'
                      WHEN p_roles IS NULL THEN 'p_roles' WHEN p_replace IS NULL THEN 'p_replace' END;
    IF missing IS NOT NULL THEN
        RAISE EXCEPTION '% must not be NULL', missing USING ERRCODE = 'null_value_not_allowed';
    END IF;

    -- The function's name: one or two identifiers, as PostgreSQL reads them.
    BEGIN
        parts := pg_catalog.parse_ident(p_function);
    EXCEPTION WHEN invalid_parameter_value OR syntax_error THEN
        RAISE EXCEPTION 'p_function: % is not a function name (name or schema.name)', pg_catalog.quote_literal(p_function)
            USING ERRCODE = 'invalid_parameter_value';
    END;
    IF pg_catalog.cardinality(parts) NOT IN (1, 2) THEN
        RAISE EXCEPTION 'p_function: % is not a function name (name or schema.name)', pg_catalog.quote_literal(p_function)
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    schema_name := CASE WHEN pg_catalog.cardinality(parts) = 2 THEN parts[1] ELSE 'public' END;
    function_name := parts[pg_catalog.cardinality(parts)];
    IF NOT EXISTS (SELECT FROM pg_catalog.pg_namespace WHERE nspname = schema_name) THEN
        RAISE EXCEPTION 'p_function: schema % does not exist', pg_catalog.quote_ident(schema_name)
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF schema_name IN ('ratelimit', 'pg_catalog', 'information_schema') OR schema_name LIKE 'pg\_%' THEN
        RAISE EXCEPTION 'p_function: schema % is reserved', pg_catalog.quote_ident(schema_name)
            USING ERRCODE = 'invalid_parameter_value';
    END IF;

    -- The arguments: 'name type' or 'name type DEFAULT value'; the type read by its input
    -- function, the default checked against it and written back as a quoted literal.
    FOR i IN 1 .. coalesce(pg_catalog.array_length(p_arguments, 1), 0) LOOP
        matched := pg_catalog.regexp_match(p_arguments[i],
            '^\s*("(?:[^"]|"")+"|[A-Za-z_][A-Za-z0-9_$]*)\s+(.+?)(?:\s+(?:DEFAULT|=)\s+(.*?))?\s*$', 'is');
        IF matched IS NULL THEN
            RAISE EXCEPTION 'p_arguments[%]: % is not ''name type'' or ''name type DEFAULT value''', i, pg_catalog.quote_literal(coalesce(p_arguments[i], 'NULL'))
                USING ERRCODE = 'invalid_parameter_value';
        END IF;
        matched[1] := CASE WHEN matched[1] LIKE '"%' THEN pg_catalog.replace(pg_catalog.substr(matched[1], 2, pg_catalog.length(matched[1]) - 2), '""', '"')
                           ELSE pg_catalog.lower(matched[1]) END;
        IF matched[1] LIKE 'ratelimit\_%' THEN
            RAISE EXCEPTION 'p_arguments[%]: the names ratelimit_* are reserved for the function''s own variables', i
                USING ERRCODE = 'invalid_parameter_value';
        END IF;
        IF matched[1] = ANY (arg_names) THEN
            RAISE EXCEPTION 'p_arguments[%]: % is named twice', i, pg_catalog.quote_ident(matched[1])
                USING ERRCODE = 'invalid_parameter_value';
        END IF;
        BEGIN
            type_oid := pg_catalog.to_regtype(matched[2]);
        EXCEPTION WHEN OTHERS THEN
            type_oid := NULL;
        END;
        IF type_oid IS NULL THEN
            RAISE EXCEPTION 'p_arguments[%]: type % does not exist', i, pg_catalog.quote_literal(matched[2])
                USING ERRCODE = 'invalid_parameter_value';
        END IF;
        default_sql := NULL;
        IF matched[3] IS NOT NULL THEN
            IF matched[3] ~* '^null$' THEN
                default_sql := pg_catalog.format('NULL::%s', type_oid);
            ELSE
                IF matched[3] ~ '^''.*''$' THEN
                    matched[3] := pg_catalog.replace(pg_catalog.substr(matched[3], 2, pg_catalog.length(matched[3]) - 2), '''''', '''');
                END IF;
                default_sql := pg_catalog.format('%L::%s', matched[3], type_oid);
                BEGIN
                    EXECUTE 'SELECT ' || default_sql;
                EXCEPTION WHEN OTHERS THEN
                    RAISE EXCEPTION 'p_arguments[%]: % is not a value of type %', i, pg_catalog.quote_literal(matched[3]), type_oid
                        USING ERRCODE = 'invalid_parameter_value';
                END;
            END IF;
        ELSIF EXISTS (SELECT FROM pg_catalog.unnest(arg_defaults) AS d WHERE d IS NOT NULL) THEN
            RAISE EXCEPTION 'p_arguments[%]: % follows an argument with a default, so it needs one too', i, pg_catalog.quote_ident(matched[1])
                USING ERRCODE = 'invalid_parameter_value';
        END IF;
        arg_names := arg_names || matched[1];
        arg_types := arg_types || type_oid;
        arg_defaults := arg_defaults || default_sql;
        arg_sql := arg_sql || pg_catalog.format('%I %s%s', matched[1], type_oid,
                                                 CASE WHEN default_sql IS NULL THEN '' ELSE ' DEFAULT ' || default_sql END);
    END LOOP;

    -- The key's parts.
    IF pg_catalog.cardinality(p_key) = 0 THEN
        RAISE EXCEPTION 'p_key: at least one part (''user'', ''ip'', ''arg:<name>'', ''hash:<name>'', ''text:<value>'')'
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    FOR i IN 1 .. pg_catalog.cardinality(p_key) LOOP
        IF p_key[i] = 'user' THEN
            uses_user := true;
            key_sql := key_sql || 'ratelimit_user'::text;
        ELSIF p_key[i] = 'ip' THEN
            key_sql := key_sql || '''ip:'' OPERATOR(pg_catalog.||) coalesce(pg_catalog.host(ratelimit.client_address()), ''unknown'')'::text;
        ELSIF p_key[i] ~ '^(arg|hash):' THEN
            IF NOT (pg_catalog.substr(p_key[i], 6 - (p_key[i] LIKE 'arg:%')::integer) = ANY (arg_names)) THEN
                RAISE EXCEPTION 'p_key[%]: % names no argument of the function', i, pg_catalog.quote_literal(p_key[i])
                    USING ERRCODE = 'invalid_parameter_value';
            END IF;
            name_of := pg_catalog.substr(p_key[i], 6 - (p_key[i] LIKE 'arg:%')::integer);
            -- A NULL key part is refused, naming the argument, before anything is counted.
            checks := checks || pg_catalog.format(
                'IF %I IS NULL THEN RAISE EXCEPTION %L USING ERRCODE = ''null_value_not_allowed''; END IF;',
                name_of, name_of || ' must not be NULL: it is part of the key');
            key_sql := key_sql || CASE WHEN p_key[i] LIKE 'arg:%'
                THEN pg_catalog.format('%I::pg_catalog.text', name_of)
                ELSE pg_catalog.format('ratelimit.hash_subject(%I::pg_catalog.text)', name_of) END;
        ELSIF p_key[i] LIKE 'text:%' THEN
            key_sql := key_sql || pg_catalog.quote_literal(pg_catalog.substr(p_key[i], 6));
        ELSE
            RAISE EXCEPTION 'p_key[%]: % is not ''user'', ''ip'', ''arg:<name>'', ''hash:<name>'' or ''text:<value>''', i, pg_catalog.quote_literal(coalesce(p_key[i], 'NULL'))
                USING ERRCODE = 'invalid_parameter_value';
        END IF;
    END LOOP;
    IF p_anonymous NOT IN ('refuse', 'allow', 'ip') THEN
        RAISE EXCEPTION 'p_anonymous: % is not ''refuse'', ''allow'' or ''ip''', pg_catalog.quote_literal(p_anonymous)
            USING ERRCODE = 'invalid_parameter_value';
    END IF;

    -- The arguments the caller passes the limit, period and cost in.
    IF p_limit_argument IS NOT NULL AND NOT (p_limit_argument = ANY (arg_names)
            AND arg_types[pg_catalog.array_position(arg_names, p_limit_argument)] IN ('smallint'::regtype, 'integer', 'bigint', 'numeric')) THEN
        RAISE EXCEPTION 'p_limit_argument: % is no integer argument of the function', pg_catalog.quote_literal(p_limit_argument)
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF p_period_argument IS NOT NULL AND NOT (p_period_argument = ANY (arg_names)
            AND arg_types[pg_catalog.array_position(arg_names, p_period_argument)] IN ('smallint'::regtype, 'integer', 'bigint', 'numeric', 'interval')) THEN
        RAISE EXCEPTION 'p_period_argument: % is no number or interval argument of the function', pg_catalog.quote_literal(p_period_argument)
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF p_cost_argument IS NOT NULL AND NOT (p_cost_argument = ANY (arg_names)
            AND arg_types[pg_catalog.array_position(arg_names, p_cost_argument)] IN ('smallint'::regtype, 'integer', 'bigint', 'numeric')) THEN
        RAISE EXCEPTION 'p_cost_argument: % is no integer argument of the function', pg_catalog.quote_literal(p_cost_argument)
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    -- A number the caller passes: NULL refused, and a whole number within integer, named.
    FOREACH name_of IN ARRAY ARRAY[p_cost_argument, p_limit_argument, p_period_argument] LOOP
        CONTINUE WHEN name_of IS NULL OR name_of = ANY (checked_numbers);
        checked_numbers := checked_numbers || name_of;
        type_oid := arg_types[pg_catalog.array_position(arg_names, name_of)];
        checks := checks || pg_catalog.format(
            'IF %I IS NULL THEN RAISE EXCEPTION %L USING ERRCODE = ''null_value_not_allowed''; END IF;',
            name_of, name_of || ' must not be NULL');
        IF type_oid <> 'interval'::regtype THEN
            checks := checks || pg_catalog.format(
                'IF %1$I OPERATOR(pg_catalog.<) 0%2$s THEN RAISE EXCEPTION %3$L, %1$I USING ERRCODE = ''invalid_parameter_value''; END IF;',
                name_of,
                CASE WHEN type_oid IN ('bigint'::regtype, 'numeric') THEN pg_catalog.format(' OR %I OPERATOR(pg_catalog.>) 2147483647', name_of) ELSE '' END
                || CASE WHEN type_oid = 'numeric'::regtype THEN pg_catalog.format(' OR %1$I OPERATOR(pg_catalog.<>) pg_catalog.trunc(%1$I)', name_of) ELSE '' END,
                name_of || ' must be a whole number from 0 to 2147483647, not %');
        END IF;
    END LOOP;
    IF p_cost_argument IS NOT NULL THEN
        cost_sql := pg_catalog.format('%I::pg_catalog.int4', p_cost_argument);
    END IF;
    IF p_limit_argument IS NOT NULL THEN
        limit_sql := pg_catalog.format('%I::pg_catalog.int4', p_limit_argument);
    END IF;
    IF p_period_argument IS NOT NULL THEN
        period_sql := CASE WHEN arg_types[pg_catalog.array_position(arg_names, p_period_argument)] = 'interval'::regtype
            THEN pg_catalog.format('%I', p_period_argument)
            ELSE pg_catalog.format('(%I::pg_catalog.int4 OPERATOR(pg_catalog.*) %L::pg_catalog.interval)', p_period_argument, p_period_unit) END;
    END IF;

    -- What it decides over: a policy, or an algorithm with a limit and period.
    IF p_policy IS NOT NULL THEN
        IF p_limit IS NOT NULL OR p_period IS NOT NULL THEN
            RAISE EXCEPTION 'p_policy: a declared limiter decides over a policy or over p_limit and p_period, not both'
                USING ERRCODE = 'invalid_parameter_value';
        END IF;
        IF NOT EXISTS (SELECT FROM ratelimit.policies WHERE name = p_policy) THEN
            RAISE EXCEPTION 'p_policy: no policy %', pg_catalog.quote_literal(p_policy)
                USING ERRCODE = 'invalid_parameter_value';
        END IF;
        key_prefix := '';
        decide_head := 'ratelimit.declared_limiter_check(' || pg_catalog.quote_literal(p_policy) || ', ';
        decide_tail := pg_catalog.format(', %s, %s, %s)',
            cost_sql, coalesce(limit_sql, 'NULL'), coalesce(period_sql, 'NULL'));
    ELSE
        IF p_limit IS NULL AND p_limit_argument IS NULL THEN
            RAISE EXCEPTION 'p_limit: a declared limiter needs p_policy, or p_limit or p_limit_argument'
                USING ERRCODE = 'invalid_parameter_value';
        END IF;
        IF p_period IS NULL AND p_period_argument IS NULL THEN
            RAISE EXCEPTION 'p_period: a declared limiter needs p_policy, or p_period or p_period_argument'
                USING ERRCODE = 'invalid_parameter_value';
        END IF;
        PERFORM ratelimit.validate_limit(coalesce(p_limit, 1), coalesce(p_period, interval '1 hour'), p_algorithm, p_engine);
        key_prefix := pg_catalog.format('%I.%I:', schema_name, function_name);
        decide_head := 'ratelimit.consume(';
        decide_tail := pg_catalog.format(
            ', %s, %s, %s, %L, %L)',
            CASE WHEN limit_sql IS NULL THEN pg_catalog.format('%s', p_limit)
                 WHEN p_limit IS NULL THEN limit_sql
                 ELSE pg_catalog.format('coalesce(%s, %s)', limit_sql, p_limit) END,
            CASE WHEN period_sql IS NULL THEN pg_catalog.format('%L::pg_catalog.interval', p_period)
                 WHEN p_period IS NULL THEN period_sql
                 ELSE pg_catalog.format('coalesce(%s, %L::pg_catalog.interval)', period_sql, p_period) END,
            cost_sql, p_algorithm, p_engine);
    END IF;

    -- The result.
    IF p_returns IN ('boolean', 'limited') THEN
        IF p_columns IS NOT NULL THEN
            RAISE EXCEPTION 'p_columns: only a ''row'' or ''jsonb'' result has columns'
                USING ERRCODE = 'invalid_parameter_value';
        END IF;
        returns_sql := 'boolean';
        answer_sql := CASE p_returns WHEN 'boolean' THEN 'RETURN ratelimit_d.allowed;' ELSE 'RETURN NOT ratelimit_d.allowed;' END;
    ELSIF p_returns IN ('row', 'jsonb') THEN
        IF p_columns IS NULL OR pg_catalog.cardinality(p_columns) = 0 THEN
            RAISE EXCEPTION 'p_columns: a ''%'' result needs its columns, each ''name field'' or ''name field type''', p_returns
                USING ERRCODE = 'invalid_parameter_value';
        END IF;
        FOR i IN 1 .. pg_catalog.cardinality(p_columns) LOOP
            matched := pg_catalog.regexp_match(p_columns[i],
                '^\s*("(?:[^"]|"")+"|[A-Za-z_][A-Za-z0-9_$]*)\s+([a-z_]+)(?:\s+(.+?))?\s*$', 'i');
            IF matched IS NULL THEN
                RAISE EXCEPTION 'p_columns[%]: % is not ''name field'' or ''name field type''', i, pg_catalog.quote_literal(coalesce(p_columns[i], 'NULL'))
                    USING ERRCODE = 'invalid_parameter_value';
            END IF;
            -- A row's columns are identifiers; a jsonb result's keys are as written.
            matched[1] := CASE WHEN matched[1] LIKE '"%' THEN pg_catalog.replace(pg_catalog.substr(matched[1], 2, pg_catalog.length(matched[1]) - 2), '""', '"')
                               WHEN p_returns = 'row' THEN pg_catalog.lower(matched[1]) ELSE matched[1] END;
            SELECT * INTO field_row FROM ratelimit.declared_limiter_fields() AS f WHERE f.field = pg_catalog.lower(matched[2]);
            IF NOT FOUND THEN
                RAISE EXCEPTION 'p_columns[%]: % is not a field (%)', i, pg_catalog.quote_literal(matched[2]),
                    (SELECT pg_catalog.string_agg(f.field, ', ') FROM ratelimit.declared_limiter_fields() AS f)
                    USING ERRCODE = 'invalid_parameter_value';
            END IF;
            IF matched[1] LIKE 'ratelimit\_%' OR matched[1] = ANY (column_names)
               OR (p_returns = 'row' AND matched[1] = ANY (arg_names)) THEN
                RAISE EXCEPTION 'p_columns[%]: the name % is reserved, taken by another column or by an argument', i, pg_catalog.quote_ident(matched[1])
                    USING ERRCODE = 'invalid_parameter_value';
            END IF;
            type_oid := field_row.default_type;
            IF matched[3] IS NOT NULL THEN
                BEGIN
                    type_oid := pg_catalog.to_regtype(matched[3]);
                EXCEPTION WHEN OTHERS THEN
                    type_oid := NULL;
                END;
                IF type_oid IS NULL THEN
                    RAISE EXCEPTION 'p_columns[%]: type % does not exist', i, pg_catalog.quote_literal(matched[3])
                        USING ERRCODE = 'invalid_parameter_value';
                END IF;
            END IF;
            column_names := column_names || matched[1];
            column_types := column_types || type_oid;
            column_values := column_values || pg_catalog.format('(%s)::%I.%I', field_row.expression,
                (SELECT n.nspname FROM pg_catalog.pg_type t JOIN pg_catalog.pg_namespace n ON n.oid = t.typnamespace WHERE t.oid = type_oid),
                (SELECT t.typname FROM pg_catalog.pg_type t WHERE t.oid = type_oid));
            uses_now := uses_now OR field_row.expression LIKE '%ratelimit_now%';
        END LOOP;
        IF p_returns = 'row' THEN
            returns_sql := pg_catalog.format('TABLE (%s)', (
                SELECT pg_catalog.string_agg(pg_catalog.format('%I %s', n, t), ', ' ORDER BY o)
                FROM ROWS FROM (pg_catalog.unnest(column_names), pg_catalog.unnest(column_types)) WITH ORDINALITY AS c (n, t, o)));
            answer_sql := (SELECT pg_catalog.string_agg(pg_catalog.format('%I := %s;', n, v), ' ' ORDER BY o)
                           FROM ROWS FROM (pg_catalog.unnest(column_names), pg_catalog.unnest(column_values)) WITH ORDINALITY AS c (n, v, o))
                          || ' RETURN NEXT;';
        ELSE
            returns_sql := 'jsonb';
            answer_sql := pg_catalog.format('RETURN pg_catalog.jsonb_build_object(%s);', (
                SELECT pg_catalog.string_agg(pg_catalog.format('%L, %s', n, v), ', ' ORDER BY o)
                FROM ROWS FROM (pg_catalog.unnest(column_names), pg_catalog.unnest(column_values)) WITH ORDINALITY AS c (n, v, o)));
        END IF;
    ELSE
        RAISE EXCEPTION 'p_returns: % is not ''boolean'', ''limited'', ''row'' or ''jsonb''', pg_catalog.quote_literal(p_returns)
            USING ERRCODE = 'invalid_parameter_value';
    END IF;

    -- The roles it is granted to.
    FOREACH role_name IN ARRAY p_roles LOOP
        IF role_name IS NULL OR (role_name <> 'PUBLIC' AND NOT EXISTS (SELECT FROM pg_catalog.pg_roles WHERE rolname = role_name)) THEN
            RAISE EXCEPTION 'p_roles: role % does not exist', coalesce(pg_catalog.quote_ident(role_name), 'NULL')
                USING ERRCODE = 'invalid_parameter_value';
        END IF;
    END LOOP;

    -- The body: the key, the decision, the answer. The caller's identity comes from the JWT
    -- PostgREST verified (jwt_subject), never from an argument, unless the key says so.
    -- It runs as its owner (SECURITY DEFINER) with the caller's search_path: instead of pinning
    -- it with SET, which costs each call a GUC save and restore (a fifth of a memory engine
    -- call), every function, operator and type in the body is named with its schema, so that
    -- nothing a caller puts on its search_path is found.
    key_expression := pg_catalog.format('%L OPERATOR(pg_catalog.||) %s', key_prefix,
        pg_catalog.array_to_string(key_sql, ' OPERATOR(pg_catalog.||) '':'' OPERATOR(pg_catalog.||) '));
    body := pg_catalog.concat_ws(E'\n',
        'DECLARE',
        CASE WHEN p_returns IN ('boolean', 'limited') THEN NULL
             WHEN p_policy IS NULL THEN '    ratelimit_d ratelimit.decision;' ELSE '    ratelimit_d ratelimit.policy_decision;' END,
        CASE WHEN uses_now OR (uses_user AND p_anonymous = 'allow' AND p_policy IS NOT NULL)
             THEN '    ratelimit_now pg_catalog.timestamptz := ratelimit.clock_now();' END,
        CASE WHEN uses_user THEN '    ratelimit_user pg_catalog.text;' END,
        CASE WHEN p_returns NOT IN ('boolean', 'limited') THEN '    ratelimit_key pg_catalog.text;' END,
        'BEGIN',
        CASE WHEN pg_catalog.cardinality(checks) > 0 THEN '    ' || pg_catalog.array_to_string(checks, E'\n    ') END,
        CASE WHEN uses_user THEN pg_catalog.concat_ws(E'\n',
            '    ratelimit_user := ''user:'' OPERATOR(pg_catalog.||) ratelimit.jwt_subject();',
            '    IF ratelimit_user IS NULL THEN',
            CASE p_anonymous
                WHEN 'refuse' THEN pg_catalog.format(
                    '        RAISE EXCEPTION %L USING ERRCODE = ''insufficient_privilege'';',
                    pg_catalog.format('%s needs a signed-in caller (a JWT sub claim)', function_name))
                WHEN 'ip' THEN '        ratelimit_user := ''ip:'' OPERATOR(pg_catalog.||) coalesce(pg_catalog.host(ratelimit.client_address()), ''unknown'');'
                WHEN 'allow' THEN CASE WHEN p_returns IN ('boolean', 'limited')
                    THEN '        RETURN ' || (p_returns = 'boolean')::text || ';  -- allowed, not counted' ELSE pg_catalog.concat_ws(E'\n',
                    '        -- An anonymous caller is allowed and not counted.',
                    CASE WHEN p_policy IS NULL
                        THEN pg_catalog.format('        ratelimit_d := ROW(true, %1$s, %1$s, 0, 0);',
                                               coalesce(limit_sql, p_limit::text, 'NULL'))
                        ELSE pg_catalog.format('        ratelimit_d := ROW(true, %L, NULL, NULL, 0, 0, NULL, 0, ''anonymous'', ''{}'', ratelimit_now, NULL);',
                                               p_policy) END,
                    '        ' || answer_sql,
                    CASE WHEN p_returns = 'row' THEN '        RETURN;' END) END END,
            '    END IF;') END,
        -- A boolean answer is the call's allowed, returned at once: one statement.
        CASE WHEN p_returns IN ('boolean', 'limited')
             THEN pg_catalog.format('    RETURN %s(%s%s%s).allowed;', CASE p_returns WHEN 'limited' THEN 'NOT ' ELSE '' END,
                                    decide_head, key_expression, decide_tail)
             ELSE pg_catalog.concat_ws(E'\n',
                      '    ratelimit_key := ' || key_expression || ';',
                      '    ratelimit_d := ' || decide_head || 'ratelimit_key' || decide_tail || ';',
                      '    ' || answer_sql,
                      CASE WHEN p_returns = 'row' THEN '    RETURN;' END) END,
        'END');
    signature := pg_catalog.format('%I.%I(%s)', schema_name, function_name, pg_catalog.array_to_string(arg_sql, ', '));

    -- The app's own function of that name and argument types: taken over only when asked.
    existing := pg_catalog.to_regprocedure(pg_catalog.format('%I.%I(%s)', schema_name, function_name,
        (SELECT pg_catalog.string_agg(t::text, ', ') FROM pg_catalog.unnest(arg_types) AS t)));
    IF existing IS NOT NULL THEN
        existing_comment := pg_catalog.obj_description(existing, 'pg_proc');
        IF NOT p_replace AND (existing_comment IS NULL OR existing_comment NOT LIKE 'ratelimit: declared limiter%') THEN
            RAISE EXCEPTION 'p_function: function % exists already, owned by %', existing,
                (SELECT pg_catalog.quote_ident(r.rolname) FROM pg_catalog.pg_proc p JOIN pg_catalog.pg_roles r ON r.oid = p.proowner WHERE p.oid = existing)
                USING ERRCODE = 'duplicate_function',
                      HINT = 'To replace it with the declared limiter, call declare_limiter again with p_replace => true.';
        END IF;
        EXECUTE pg_catalog.format('DROP FUNCTION %s', existing);
    END IF;

    EXECUTE pg_catalog.format(
        'CREATE FUNCTION %s RETURNS %s LANGUAGE plpgsql VOLATILE SECURITY DEFINER AS %L',
        signature, returns_sql, body);
    made := pg_catalog.to_regprocedure(pg_catalog.format('%I.%I(%s)', schema_name, function_name,
        (SELECT pg_catalog.string_agg(t::text, ', ') FROM pg_catalog.unnest(arg_types) AS t)));
    -- Granted to the roles named only: PUBLIC's default EXECUTE goes, and so does the EXECUTE
    -- that Supabase's default privileges give anon, unless anon is named.
    EXECUTE pg_catalog.format('REVOKE ALL ON FUNCTION %s FROM PUBLIC', made);
    FOR role_name IN SELECT r.rolname FROM pg_catalog.pg_roles r
                     WHERE r.rolname IN ('anon', 'authenticated', 'service_role') AND r.rolname <> ALL (p_roles) LOOP
        EXECUTE pg_catalog.format('REVOKE ALL ON FUNCTION %s FROM %I', made, role_name);
    END LOOP;
    FOREACH role_name IN ARRAY p_roles LOOP
        EXECUTE pg_catalog.format('GRANT EXECUTE ON FUNCTION %s TO %s', made,
                                  CASE role_name WHEN 'PUBLIC' THEN 'PUBLIC' ELSE pg_catalog.quote_ident(role_name) END);
    END LOOP;
    EXECUTE pg_catalog.format('COMMENT ON FUNCTION %s IS %L', made,
        pg_catalog.format('ratelimit: declared limiter over %s, keyed by %s',
            coalesce('policy ' || p_policy, pg_catalog.format('%s %s per %s', p_algorithm,
                coalesce(p_limit::text, p_limit_argument), coalesce(p_period::text, p_period_argument))),
            pg_catalog.array_to_string(p_key, ', ')));
    RETURN made;
END
$declare$;
-- @end declare_limiter

-- @begin drop_limiter
-- Drops a function declare_limiter made (and nothing else).
CREATE OR REPLACE FUNCTION ratelimit.drop_limiter(p_function regprocedure)
RETURNS void
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF p_function IS NULL THEN
        RAISE EXCEPTION 'p_function must not be NULL' USING ERRCODE = 'null_value_not_allowed';
    END IF;
    IF coalesce(pg_catalog.obj_description(p_function, 'pg_proc'), '') NOT LIKE 'ratelimit: declared limiter%' THEN
        RAISE EXCEPTION 'p_function: % is not a declared limiter', p_function
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    EXECUTE pg_catalog.format('DROP FUNCTION %s', p_function);
END
$$;
-- @end drop_limiter

-- @begin declared_limiter_helpers
-- A policy's decision for a declared limiter. The caller's limit and period, when it passes
-- them, are the policy's to decide, as for the drop-ins (ratelimit.dropin_caller_limits):
-- ignored, or, with must_match, refused when they differ from the policy's row, before anything
-- is counted. As the extension's owner, who may read the policies.
CREATE OR REPLACE FUNCTION ratelimit.declared_limiter_check(
    p_policy text, p_key text, p_cost integer, p_caller_limit integer, p_caller_period interval)
RETURNS ratelimit.policy_decision
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    caller_user uuid;
    sub text := ratelimit.jwt_subject();
    policy_limit integer;
    policy_period interval;
BEGIN
    IF sub ~* '^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$' THEN
        caller_user := sub::uuid;
    END IF;
    IF (p_caller_limit IS NOT NULL OR p_caller_period IS NOT NULL)
       AND pg_catalog.current_setting('ratelimit.dropin_caller_limits', true) = 'must_match' THEN
        SELECT p."limit", p.period INTO policy_limit, policy_period FROM ratelimit.policies AS p WHERE p.name = p_policy;
        IF FOUND AND (p_caller_limit IS DISTINCT FROM policy_limit
                      OR (p_caller_period IS NOT NULL AND p_caller_period <> policy_period)) THEN
            RAISE EXCEPTION 'the caller''s limit or period differs from policy %''s (ratelimit.dropin_caller_limits = must_match)', p_policy
                USING ERRCODE = 'insufficient_privilege';
        END IF;
    END IF;
    RETURN ratelimit.check(p_policy, p_key, p_cost, NULL, ratelimit.client_address(), caller_user);
END
$$;
-- @end declared_limiter_helpers
