\echo Use "ALTER EXTENSION ratelimit UPDATE" to load this file. \quit

------------------------------------------------------------------------------------------------
-- The drop-ins leave ratelimit: each app's are now an extension of their own (ratelimit_rpc_limits,
-- ratelimit_endpoint_limits, ratelimit_sliding_window_limits), so a database gets only those its
-- app calls. The 0.6.0 drop-ins stay where they are and keep working (rows, grants and all), no
-- longer members of ratelimit; CREATE EXTENSION of their app's extension then makes them its
-- own, rows kept (docs/migrating.md). Their comment says so, which is how that extension knows
-- them from an app's own objects of the same names.
------------------------------------------------------------------------------------------------

ALTER EXTENSION ratelimit DROP TABLE @extschema@.rpc_rate_limits;
ALTER EXTENSION ratelimit DROP TABLE @extschema@.rate_limits;
ALTER EXTENSION ratelimit DROP TABLE @extschema@.rate_limit_buckets;
ALTER EXTENSION ratelimit DROP FUNCTION @extschema@.check_rate_limit(text, integer, integer);
ALTER EXTENSION ratelimit DROP FUNCTION @extschema@.check_rate_limit_for_user(uuid, text, integer, integer);
ALTER EXTENSION ratelimit DROP FUNCTION @extschema@.cleanup_rpc_rate_limits(interval);
ALTER EXTENSION ratelimit DROP FUNCTION @extschema@.increment_rate_limit(uuid, text, integer, integer, integer);
ALTER EXTENSION ratelimit DROP FUNCTION @extschema@.cleanup_expired_rate_limits();
ALTER EXTENSION ratelimit DROP FUNCTION @extschema@.check_rate_limit(text, integer, integer, integer);
ALTER EXTENSION ratelimit DROP FUNCTION @extschema@.check_rate_limit_tiers(text, text, integer, integer, integer, integer, integer, integer);
ALTER EXTENSION ratelimit DROP FUNCTION @extschema@.cleanup_old_rate_limit_buckets();

COMMENT ON TABLE @extschema@.rpc_rate_limits IS
    'ratelimit 0.6.0 drop-in, kept in place: CREATE EXTENSION ratelimit_rpc_limits makes it that extension''s, rows kept';
COMMENT ON TABLE @extschema@.rate_limits IS
    'ratelimit 0.6.0 drop-in, kept in place: CREATE EXTENSION ratelimit_endpoint_limits makes it that extension''s, rows kept';
COMMENT ON TABLE @extschema@.rate_limit_buckets IS
    'ratelimit 0.6.0 drop-in, kept in place: CREATE EXTENSION ratelimit_sliding_window_limits makes it that extension''s, rows kept';
COMMENT ON FUNCTION @extschema@.check_rate_limit(text, integer, integer) IS
    'ratelimit 0.6.0 drop-in, kept in place: CREATE EXTENSION ratelimit_rpc_limits makes it that extension''s';
COMMENT ON FUNCTION @extschema@.check_rate_limit_for_user(uuid, text, integer, integer) IS
    'ratelimit 0.6.0 drop-in, kept in place: CREATE EXTENSION ratelimit_rpc_limits makes it that extension''s';
COMMENT ON FUNCTION @extschema@.cleanup_rpc_rate_limits(interval) IS
    'ratelimit 0.6.0 drop-in, kept in place: CREATE EXTENSION ratelimit_rpc_limits makes it that extension''s';
COMMENT ON FUNCTION @extschema@.increment_rate_limit(uuid, text, integer, integer, integer) IS
    'ratelimit 0.6.0 drop-in, kept in place: CREATE EXTENSION ratelimit_endpoint_limits makes it that extension''s';
COMMENT ON FUNCTION @extschema@.cleanup_expired_rate_limits() IS
    'ratelimit 0.6.0 drop-in, kept in place: CREATE EXTENSION ratelimit_endpoint_limits makes it that extension''s';
COMMENT ON FUNCTION @extschema@.check_rate_limit(text, integer, integer, integer) IS
    'ratelimit 0.6.0 drop-in, kept in place: CREATE EXTENSION ratelimit_sliding_window_limits makes it that extension''s';
COMMENT ON FUNCTION @extschema@.check_rate_limit_tiers(text, text, integer, integer, integer, integer, integer, integer) IS
    'ratelimit 0.6.0 drop-in, kept in place: CREATE EXTENSION ratelimit_sliding_window_limits makes it that extension''s';
COMMENT ON FUNCTION @extschema@.cleanup_old_rate_limit_buckets() IS
    'ratelimit 0.6.0 drop-in, kept in place: CREATE EXTENSION ratelimit_sliding_window_limits makes it that extension''s';

-- Whether `p_object` (of catalog `p_catalog`, pg_class or pg_proc) is a drop-in that ratelimit
-- 0.6.0 made and left in place when it was updated to 0.7.0, of p_extension's app or (NULL) of
-- any: the update says so in its comment, and the object is owned by ratelimit's owner or a
-- superuser. Only an object's owner (or a superuser) can comment on it, so a role that makes its
-- own table of a drop-in's name, comment and all, cannot pass it off as ratelimit's.
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
        SELECT c.relowner INTO object_owner FROM pg_catalog.pg_class c WHERE c.oid = p_object;
    ELSE
        SELECT p.proowner INTO object_owner FROM pg_catalog.pg_proc p WHERE p.oid = p_object;
    END IF;
    RETURN coalesce(pg_catalog.obj_description(p_object, p_catalog), '')
               LIKE 'ratelimit 0.6.0 drop-in, kept in place: CREATE EXTENSION '
                    || coalesce(p_extension || ' %', '%')
           AND EXISTS (SELECT FROM pg_catalog.pg_roles r
                       WHERE r.oid = object_owner
                         AND (r.rolsuper OR r.oid = (SELECT e.extowner FROM pg_catalog.pg_extension e
                                                     WHERE e.extname = 'ratelimit')));
END
$$;

-- The arguments of the drop-in install steps: none NULL, the extension one of the drop-ins', the
-- schema one that exists, named as an SQL identifier (as an extension script's schema is).
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
                                                  'ratelimit_sliding_window_limits') THEN
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
    conflicts text[] := '{}';
    found record;
    statements text[];
    statement text;
BEGIN
    PERFORM ratelimit.drop_in_install_check(p_extension, p_schema, p_tables, p_functions);
    schema_oid := pg_catalog.to_regnamespace(p_schema);
    FOR found IN
        SELECT pg_catalog.format('table %s.%I', schema_oid, c.relname) AS what,
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
        SELECT pg_catalog.format('function %s.%I(%s)', schema_oid, p.proname,
                                 pg_catalog.pg_get_function_identity_arguments(p.oid)) AS what,
               ratelimit.left_by_ratelimit(p.oid, 'pg_proc', NULL) AS left_over
        FROM pg_catalog.pg_proc p
        WHERE p.pronamespace = schema_oid AND p.proname = ANY (p_functions)
        ORDER BY 1
    LOOP
        IF NOT found.left_over THEN
            conflicts := conflicts || found.what;
        END IF;
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
          AND ratelimit.left_by_ratelimit(c.oid, 'pg_class', p_extension)
        UNION ALL
        SELECT pg_catalog.format('ALTER INDEX %s.%I RENAME TO %I', schema_oid, i.relname,
                                 i.relname || '_0_6_0')
        FROM pg_catalog.pg_class c
        JOIN pg_catalog.pg_index x ON x.indrelid = c.oid
        JOIN pg_catalog.pg_class i ON i.oid = x.indexrelid
        WHERE c.relnamespace = schema_oid AND c.relname = ANY (p_tables)
          AND ratelimit.left_by_ratelimit(c.oid, 'pg_class', p_extension)
        UNION ALL
        SELECT pg_catalog.format('DROP FUNCTION %s', p.oid::pg_catalog.regprocedure)
        FROM pg_catalog.pg_proc p
        WHERE p.pronamespace = schema_oid AND p.proname = ANY (p_functions)
          AND ratelimit.left_by_ratelimit(p.oid, 'pg_proc', p_extension)
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

-- The cleanup jobs: name, default schedule, command. The state tables' always; each drop-in
-- app's in the schema of its extension when that is installed, else where a ratelimit 0.6.0
-- install left its drop-ins in place (they still count, so they still need cleaning). It reads
-- the catalogs only; SECURITY DEFINER lets anyone list the jobs through left_by_ratelimit.
CREATE OR REPLACE FUNCTION ratelimit.cleanup_jobs()
RETURNS TABLE(job_name text, schedule text, command text)
LANGUAGE sql STABLE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT j.job_name, j.schedule, pg_catalog.format('SELECT %I.%I()', s.schema_name, j.function_name)
    FROM (VALUES
        (1, 'ratelimit_rpc_limits', 'ratelimit-cleanup-rpc-rate-limits', '17 3 * * *',
         'cleanup_rpc_rate_limits'),
        (2, 'ratelimit_endpoint_limits', 'ratelimit-cleanup-expired-rate-limits', '0 * * * *',
         'cleanup_expired_rate_limits'),
        (3, 'ratelimit_sliding_window_limits', 'ratelimit-cleanup-old-rate-limit-buckets',
         '*/10 * * * *', 'cleanup_old_rate_limit_buckets'),
        (4, NULL, 'ratelimit-cleanup-key-state', '*/5 * * * *', 'cleanup_key_state')
    ) AS j(n, extension, job_name, schedule, function_name)
    CROSS JOIN LATERAL (
        SELECT coalesce(
            CASE WHEN j.extension IS NULL THEN 'ratelimit' END,
            (SELECT n.nspname FROM pg_catalog.pg_extension e
             JOIN pg_catalog.pg_namespace n ON n.oid = e.extnamespace
             WHERE e.extname = j.extension),
            (SELECT n.nspname FROM pg_catalog.pg_proc p
             JOIN pg_catalog.pg_namespace n ON n.oid = p.pronamespace
             WHERE p.proname = j.function_name
               AND ratelimit.left_by_ratelimit(p.oid, 'pg_proc', j.extension)
             ORDER BY 1 LIMIT 1)) AS schema_name
    ) AS s
    WHERE s.schema_name IS NOT NULL
    ORDER BY j.n
$$;

-- Schedules every cleanup with pg_cron (again: an existing job of the same name is updated),
-- on each job's default schedule or on p_schedule for all, and removes the jobs of drop-in
-- extensions dropped since. The jobs run as the calling role.
CREATE OR REPLACE FUNCTION ratelimit.schedule_cleanup(p_schedule text DEFAULT NULL)
RETURNS TABLE(job_name text, schedule text, command text, job_id bigint)
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    job record;
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_catalog.pg_extension WHERE extname = 'pg_cron') THEN
        RAISE EXCEPTION 'pg_cron is not installed in database %', pg_catalog.current_database()
            USING ERRCODE = 'object_not_in_prerequisite_state',
                  HINT = 'Add pg_cron to shared_preload_libraries, set cron.database_name to this '
                         'database, run CREATE EXTENSION pg_cron, then call ratelimit.schedule_cleanup() '
                         'again; or run the cleanup functions from another scheduler.';
    END IF;
    -- The jobs named ratelimit-cleanup-* are ratelimit's: one whose drop-in extension is no
    -- longer installed would fail at every run, so it goes.
    EXECUTE 'SELECT cron.unschedule(jobid) FROM cron.job WHERE jobname LIKE ''ratelimit-cleanup-%'' '
            'AND jobname NOT IN (SELECT c.job_name FROM ratelimit.cleanup_jobs() AS c) '
            'AND database = pg_catalog.current_database()';
    FOR job IN SELECT * FROM ratelimit.cleanup_jobs() LOOP
        job_name := job.job_name;
        schedule := coalesce(p_schedule, job.schedule);
        command := job.command;
        EXECUTE 'SELECT cron.schedule($1, $2, $3)' INTO job_id
            USING job.job_name, schedule, job.command;
        RETURN NEXT;
    END LOOP;
END
$$;

-- Removes the jobs schedule_cleanup() created (every ratelimit-cleanup-* job of this
-- database, also one of a drop-in extension dropped since); returns how many it removed.
CREATE OR REPLACE FUNCTION ratelimit.unschedule_cleanup()
RETURNS integer
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    removed integer := 0;
    job record;
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_catalog.pg_extension WHERE extname = 'pg_cron') THEN
        RAISE EXCEPTION 'pg_cron is not installed in database %', pg_catalog.current_database()
            USING ERRCODE = 'object_not_in_prerequisite_state';
    END IF;
    FOR job IN EXECUTE 'SELECT jobid FROM cron.job WHERE jobname LIKE ''ratelimit-cleanup-%'' '
                       'AND database = pg_catalog.current_database()' LOOP
        EXECUTE 'SELECT cron.unschedule($1::bigint)' USING job.jobid;
        removed := removed + 1;
    END LOOP;
    RETURN removed;
END
$$;

------------------------------------------------------------------------------------------------
-- A policy's name is checked in words; a route may take the request's tier from a JWT claim.
------------------------------------------------------------------------------------------------

CREATE OR REPLACE FUNCTION ratelimit.policies_validate()
RETURNS trigger
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    -- The name first, in words (the table's check constraint would only name itself).
    IF NEW.name IS NOT NULL AND NEW.name !~ '^[A-Za-z0-9_.:-]{1,63}$' THEN
        RAISE EXCEPTION 'name may hold only letters, digits, _ . : and - (1 to 63 of them; / is reserved): group names with dots, as in activity.create_post'
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    PERFORM ratelimit.validate_limit(NEW."limit", NEW.period, NEW.algorithm, NEW.engine,
                                     NEW.burst, NEW.time_zone);
    PERFORM ratelimit.validate_policy_options(NEW.algorithm, NEW.penalty_blocks,
                                              NEW.penalty_decay, NEW.max_delay);
    IF NEW.reset_jitter IS NOT NULL
       AND (NEW.reset_jitter < interval '0' OR NEW.reset_jitter > interval '1 hour'
            OR pg_catalog.date_part('month', NEW.reset_jitter) <> 0
            OR pg_catalog.date_part('year', NEW.reset_jitter) <> 0) THEN
        RAISE EXCEPTION 'reset_jitter must be between 0 and 1 hour (got "%")', NEW.reset_jitter
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    -- An sf-token, as the header carries it.
    IF NEW.quota_unit IS NOT NULL
       AND NEW.quota_unit !~ '^[A-Za-z*][A-Za-z0-9!#$%&''*+.^_`|~:/-]{0,62}$' THEN
        RAISE EXCEPTION 'quota_unit must be requests, content-bytes, concurrent-requests or another token (a letter or *, then letters, digits or !#$&''*+-.^_`|~:/, at most 63 characters) (got "%")',
            left(NEW.quota_unit, 64)
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    -- A concurrency policy is decided by leases (acquire_policy): its limit is the units in
    -- flight at once, its period the longest a lease is held. Leases live in shared memory and
    -- nothing refills, so its engine is memory and what only a rate means is refused.
    IF NEW.quota_unit = 'concurrent-requests' THEN
        IF NEW.engine <> 'memory' THEN
            RAISE EXCEPTION 'a concurrency policy (quota_unit concurrent-requests) must have engine memory, where its leases live (got "%")',
                left(NEW.engine, 64)
                USING ERRCODE = 'invalid_parameter_value';
        END IF;
        IF NEW.algorithm <> 'fixed_window' OR NEW.burst IS NOT NULL
           OR NEW.time_zone IS NOT NULL OR NEW.count_denied OR NEW.shadow
           OR NEW.penalty_blocks IS NOT NULL OR NEW.max_delay IS NOT NULL
           OR pg_catalog.date_part('month', NEW.period) <> 0
           OR pg_catalog.date_part('year', NEW.period) <> 0 THEN
            RAISE EXCEPTION 'a concurrency policy (quota_unit concurrent-requests) takes algorithm fixed_window, no burst, time_zone, count_denied, shadow, penalty_blocks or max_delay, and a period (its longest lease) without months'
                USING ERRCODE = 'invalid_parameter_value';
        END IF;
        IF EXISTS (SELECT 1 FROM ratelimit.request_routes r WHERE r.policy = NEW.name) THEN
            RAISE EXCEPTION 'a concurrency policy (quota_unit concurrent-requests) is decided by leases, not by the routes of ratelimit.request_routes that name it'
                USING ERRCODE = 'invalid_parameter_value';
        END IF;
    END IF;
    RETURN NEW;
EXCEPTION
    WHEN invalid_parameter_value OR null_value_not_allowed THEN
        RAISE EXCEPTION 'policy "%": %', NEW.name, SQLERRM USING ERRCODE = SQLSTATE;
END
$$;

ALTER TABLE ratelimit.request_routes ADD COLUMN tier_claim text;

CREATE OR REPLACE FUNCTION ratelimit.request_routes_validate()
RETURNS trigger
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    engine text;
BEGIN
    IF pg_catalog.cardinality(NEW.methods) = 0 OR pg_catalog.array_position(NEW.methods, NULL) IS NOT NULL
       OR EXISTS (SELECT 1 FROM pg_catalog.unnest(NEW.methods) AS m(method)
                  WHERE m.method NOT IN ('*', 'GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS')) THEN
        RAISE EXCEPTION 'methods must hold GET, HEAD, POST, PUT, PATCH, DELETE, OPTIONS or *, in upper case (got %)', NEW.methods
            USING ERRCODE = '22023';
    END IF;
    IF NEW.path_pattern !~ '^[/*]' OR pg_catalog.octet_length(NEW.path_pattern) > 1000 THEN
        RAISE EXCEPTION 'path_pattern must start with / or * and be at most 1000 bytes (got "%")',
            pg_catalog.left(NEW.path_pattern, 64)
            USING ERRCODE = '22023';
    END IF;
    IF NEW.roles IS NOT NULL AND pg_catalog.array_position(NEW.roles, NULL) IS NOT NULL THEN
        RAISE EXCEPTION 'roles must not hold NULL (NULL instead of the array means any role)'
            USING ERRCODE = '22004';
    END IF;
    IF NEW.key NOT IN ('user', 'ip', 'user_or_ip', 'global') THEN
        RAISE EXCEPTION 'key must be user, ip, user_or_ip or global (got "%")', pg_catalog.left(NEW.key, 64)
            USING ERRCODE = '22023';
    END IF;
    IF NEW.tier_claim IS NOT NULL
       AND (NEW.tier_claim !~ '^[A-Za-z0-9_$-]+([.][A-Za-z0-9_$-]+){0,7}$'
            OR pg_catalog.octet_length(NEW.tier_claim) > 200) THEN
        RAISE EXCEPTION 'tier_claim must be 1 to 8 JSON member names of letters, digits, _, - or $ joined by . (got "%")',
            pg_catalog.left(NEW.tier_claim, 64)
            USING ERRCODE = '22023',
                  HINT = 'For Supabase''s app_metadata.tier: tier_claim = ''app_metadata.tier''. Never a claim the user can write (user_metadata).';
    END IF;
    SELECT p.engine INTO engine FROM ratelimit.policies p WHERE p.name = NEW.policy;
    -- A concurrency policy is decided by leases, which a request's check cannot take.
    IF EXISTS (SELECT 1 FROM ratelimit.policies p
               WHERE p.name = NEW.policy AND p.quota_unit = 'concurrent-requests') THEN
        RAISE EXCEPTION 'policy: "%" is a concurrency policy (quota_unit concurrent-requests), decided by leases (ratelimit.acquire_policy), not by a route', NEW.policy
            USING ERRCODE = '22023';
    END IF;
    IF engine IS DISTINCT FROM 'memory' AND NEW.methods && ARRAY['*', 'GET', 'HEAD'] THEN
        RAISE EXCEPTION 'policy: a route for GET or HEAD needs a memory-engine policy, and "%" uses the % engine', NEW.policy, engine
            USING ERRCODE = '22023',
                  HINT = 'PostgREST runs GET and HEAD in read-only transactions, also on read replicas, where only the memory engine counts. Give the route other methods, or the policy engine = ''memory''.';
    END IF;
    RETURN NEW;
END
$$;

------------------------------------------------------------------------------------------------
-- Privileges: the grants of each extension are set by one function, which the drop-in
-- extensions' scripts call too; ratelimit's list as in 0.7.0.
------------------------------------------------------------------------------------------------

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
    IF p_extension IS NULL OR NOT EXISTS (SELECT FROM pg_catalog.pg_extension e WHERE e.extname = p_extension) THEN
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
               SELECT FROM pg_catalog.pg_depend d
               JOIN pg_catalog.pg_extension e ON e.oid = d.refobjid
               WHERE d.refclassid = 'pg_catalog.pg_extension'::pg_catalog.regclass AND d.deptype = 'e'
                 AND e.extname = p_extension AND d.objid = granted[i]
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
        WITH members AS (
            SELECT d.classid, d.objid
            FROM pg_catalog.pg_depend d
            JOIN pg_catalog.pg_extension e ON e.oid = d.refobjid
            WHERE d.refclassid = 'pg_catalog.pg_extension'::pg_catalog.regclass
              AND d.deptype = 'e' AND e.extname = p_extension)
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

SELECT ratelimit.set_member_privileges('ratelimit', false, ARRAY[
    -- Everyone: these compute from their arguments only. A type reveals nothing.
    ARRAY['EXECUTE', 'FUNCTION', 'ratelimit.http_headers(ratelimit.policy_decision, text)'::pg_catalog.regprocedure::text, 'PUBLIC'],
    ARRAY['EXECUTE', 'FUNCTION', 'ratelimit.http_body(ratelimit.policy_decision, text)'::pg_catalog.regprocedure::text, 'PUBLIC'],
    ARRAY['EXECUTE', 'FUNCTION', 'ratelimit.validate_limit(integer, interval, text, text, integer, text)'::pg_catalog.regprocedure::text, 'PUBLIC'],
    ARRAY['EXECUTE', 'FUNCTION', 'ratelimit.validate_policy_options(text, interval[], interval, interval)'::pg_catalog.regprocedure::text, 'PUBLIC'],
    ARRAY['EXECUTE', 'FUNCTION', 'ratelimit.hash_subject(text)'::pg_catalog.regprocedure::text, 'PUBLIC'],
    ARRAY['EXECUTE', 'FUNCTION', 'ratelimit.describe_period(interval)'::pg_catalog.regprocedure::text, 'PUBLIC'],
    ARRAY['EXECUTE', 'FUNCTION', 'ratelimit.clock_now()'::pg_catalog.regprocedure::text, 'PUBLIC'],
    ARRAY['EXECUTE', 'FUNCTION', 'ratelimit.cleanup_jobs()'::pg_catalog.regprocedure::text, 'PUBLIC'],
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
]);

-- Each C entry point is named after its SQL function (<extension>_<function>); the names the
-- released scripts used stay in the library for the databases they made.
CREATE OR REPLACE FUNCTION ratelimit.clock_now()
RETURNS timestamptz
LANGUAGE c VOLATILE PARALLEL SAFE
AS 'MODULE_PATHNAME', 'ratelimit_clock_now';
