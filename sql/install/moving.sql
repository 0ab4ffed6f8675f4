-- Moving a database between the two editions (docs/sql-edition.md, "Moving to the C edition"),
-- keeping every count, block and policy: export_state in the edition that is installed, DROP
-- EXTENSION, CREATE EXTENSION of the other, import_state there. The state a database keeps is
-- in tables both editions define alike, so the rows move as they are. Granted to nobody: the
-- extension's owner (or a superuser) moves.

-- The tables that move, in the order they go back (a table before those that refer to it);
-- partition_key_secret keeps the partition keys clients have seen.
-- @begin moving_tables
CREATE FUNCTION ratelimit.moving_tables()
RETURNS text[]
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$
    SELECT ARRAY['key_state', 'key_state_unlogged', 'policies', 'tiers', 'key_overrides',
                 'access_list', 'denial_log', 'partition_key_secret', 'request_routes']
$$;

CREATE FUNCTION ratelimit.moving_sequences()
RETURNS text[]
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$ SELECT ARRAY['access_list_id_seq', 'request_routes_id_seq', 'denial_log_position'] $$;
-- @end moving_tables

-- Copies the rows of every table that moves into tables of the same names in a new schema
-- p_schema, with a row saying what they came from (ratelimit_moved_from), and returns how many
-- rows were copied. The memory engine's keys live in shared memory and do not move.
-- @begin export_state
CREATE FUNCTION ratelimit.export_state(p_schema text)
RETURNS bigint
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    copied bigint := 0;
    rows_now bigint;
    moved text;
BEGIN
    IF p_schema IS NULL OR p_schema = '' THEN
        RAISE EXCEPTION 'p_schema must name a schema to create' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF EXISTS (SELECT FROM pg_catalog.pg_namespace WHERE nspname = p_schema) THEN
        RAISE EXCEPTION 'p_schema: schema % already exists', pg_catalog.quote_ident(p_schema)
            USING ERRCODE = 'duplicate_schema', HINT = 'export_state makes a schema of its own.';
    END IF;
    EXECUTE pg_catalog.format('CREATE SCHEMA %I', p_schema);
    EXECUTE pg_catalog.format('CREATE TABLE %I.ratelimit_moved_from AS SELECT %L::text AS edition, %L::text AS version, pg_catalog.now() AS exported_at',
                              p_schema,
                              CASE WHEN pg_catalog.to_regclass('ratelimit.sql_edition') IS NULL THEN 'C' ELSE 'SQL' END,
                              (SELECT e.extversion FROM pg_catalog.pg_extension e
                               WHERE e.extname IN ('ratelimit', 'ratelimit_sql')
                               UNION ALL SELECT NULL LIMIT 1));
    EXECUTE pg_catalog.format('CREATE TABLE %I.ratelimit_sequences (name text, last_value bigint, is_called boolean)', p_schema);
    FOREACH moved IN ARRAY ratelimit.moving_sequences() LOOP
        EXECUTE pg_catalog.format('INSERT INTO %I.ratelimit_sequences SELECT %L, last_value, is_called FROM ratelimit.%I',
                                  p_schema, moved, moved);
    END LOOP;
    FOREACH moved IN ARRAY ratelimit.moving_tables() LOOP
        EXECUTE pg_catalog.format('CREATE TABLE %I.%I AS TABLE ratelimit.%I', p_schema, moved, moved);
        GET DIAGNOSTICS rows_now = ROW_COUNT;
        copied := copied + rows_now;
    END LOOP;
    RETURN copied;
END
$$;
-- @end export_state

-- Puts back the rows export_state copied into p_schema, in place of what this install holds in
-- those tables, sets the sequences past them, drops p_schema, and returns how many rows it put
-- back. Policies go through their checks again, as any write does.
-- @begin import_state
CREATE FUNCTION ratelimit.import_state(p_schema text)
RETURNS bigint
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    copied bigint := 0;
    rows_now bigint;
    moved text;
    columns text;
BEGIN
    IF p_schema IS NULL OR pg_catalog.to_regclass(pg_catalog.format('%I.ratelimit_moved_from', p_schema)) IS NULL THEN
        RAISE EXCEPTION 'p_schema: % holds no state exported by ratelimit.export_state', coalesce(pg_catalog.quote_ident(p_schema), 'NULL')
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    -- Rows that refer to others go first, then come back in the order of moving_tables().
    DELETE FROM ratelimit.key_overrides;
    DELETE FROM ratelimit.tiers;
    DELETE FROM ratelimit.access_list;
    DELETE FROM ratelimit.policies;
    FOREACH moved IN ARRAY ratelimit.moving_tables() LOOP
        -- The columns by name, those of this install that the export has: the same version
        -- has them all.
        SELECT pg_catalog.string_agg(pg_catalog.quote_ident(a.attname), ', ' ORDER BY a.attnum)
        INTO columns
        FROM pg_catalog.pg_attribute a
        WHERE a.attrelid = pg_catalog.format('ratelimit.%I', moved)::pg_catalog.regclass
          AND a.attnum > 0 AND NOT a.attisdropped
          AND EXISTS (SELECT FROM pg_catalog.pg_attribute b
                      WHERE b.attrelid = pg_catalog.format('%I.%I', p_schema, moved)::pg_catalog.regclass
                        AND b.attname = a.attname AND NOT b.attisdropped);
        IF moved NOT IN ('policies', 'tiers', 'key_overrides', 'access_list') THEN
            EXECUTE pg_catalog.format('DELETE FROM ratelimit.%I', moved);
        END IF;
        EXECUTE pg_catalog.format('INSERT INTO ratelimit.%I (%s) OVERRIDING SYSTEM VALUE SELECT %s FROM %I.%I',
                                  moved, columns, columns, p_schema, moved);
        GET DIAGNOSTICS rows_now = ROW_COUNT;
        copied := copied + rows_now;
    END LOOP;
    -- The sequences go on from where they were: the next access_list and request_routes ids,
    -- and the denial log's next slot in its ring.
    FOREACH moved IN ARRAY ratelimit.moving_sequences() LOOP
        EXECUTE pg_catalog.format('SELECT pg_catalog.setval(%L, s.last_value, s.is_called) FROM %I.ratelimit_sequences s WHERE s.name = %L',
                                  'ratelimit.' || moved, p_schema, moved);
    END LOOP;
    EXECUTE pg_catalog.format('DROP SCHEMA %I CASCADE', p_schema);
    RETURN copied;
END
$$;
-- @end import_state
