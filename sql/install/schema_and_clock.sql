-- The schema ratelimit and the clock every decision reads.

-- ratelimit has two editions on one schema: the C edition (extension ratelimit) and the SQL
-- edition (extension ratelimit_sql, or its plain file). Installing one where the other is
-- stops here, with the way to move, rather than at the first object that stands in the way.
DO $$
DECLARE
    present text;
BEGIN
    IF EXISTS (SELECT FROM pg_catalog.pg_namespace WHERE nspname = 'ratelimit') THEN
        -- The extension the schema belongs to (the one being created has its row already).
        SELECT CASE e.extname
                   WHEN 'ratelimit_sql' THEN 'the SQL edition of ratelimit (extension ratelimit_sql) is installed'
                   WHEN 'ratelimit' THEN 'the C edition of ratelimit (extension ratelimit) is installed'
                   ELSE pg_catalog.format('schema ratelimit belongs to extension %s', e.extname) END
        INTO present
        FROM pg_catalog.pg_depend d
        JOIN pg_catalog.pg_extension e ON e.oid = d.refobjid
        WHERE d.classid = 'pg_catalog.pg_namespace'::pg_catalog.regclass
          AND d.objid = 'ratelimit'::pg_catalog.regnamespace
          AND d.refclassid = 'pg_catalog.pg_extension'::pg_catalog.regclass AND d.deptype = 'e';
        IF present IS NULL THEN
            present := CASE WHEN pg_catalog.to_regclass('ratelimit.sql_edition') IS NOT NULL
                            THEN 'the SQL edition of ratelimit (its plain file) is installed'
                            ELSE 'a schema named ratelimit exists' END;
        END IF;
        RAISE EXCEPTION 'ratelimit cannot be installed in this database: %', present
            USING ERRCODE = 'duplicate_schema',
                  HINT = 'One edition serves a database. To move from the SQL edition to the C edition, keeping every count and policy, see docs/sql-edition.md, "Moving to the C edition".';
    END IF;
END
$$;

CREATE SCHEMA ratelimit;
COMMENT ON SCHEMA ratelimit IS 'ratelimit: native API and internals';

-- @begin clock_now
-- The instant decisions are made at: the server clock, or ratelimit.test_clock when set.
CREATE OR REPLACE FUNCTION ratelimit.clock_now()
RETURNS timestamptz
LANGUAGE c VOLATILE PARALLEL SAFE
AS 'MODULE_PATHNAME', 'ratelimit_clock_now';
-- @end clock_now
