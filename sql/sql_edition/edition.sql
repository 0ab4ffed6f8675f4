-- The SQL edition's own objects: what is installed, and the switch of its test clock.

-- One row: the SQL edition's version, and how it was installed (an extension, through pg_tle or
-- a control file; or the plain file, which is no extension and has no other record).
CREATE TABLE ratelimit.sql_edition (
    version text NOT NULL,
    installed_as text NOT NULL CHECK (installed_as IN ('extension', 'plain file'))
);
INSERT INTO ratelimit.sql_edition
SELECT '@VERSION@', CASE WHEN EXISTS (SELECT FROM pg_catalog.pg_extension WHERE extname = 'ratelimit_sql')
                         THEN 'extension' ELSE 'plain file' END;

-- The C edition's ratelimit.test_clock is a superuser-only setting. Without a library a
-- setting cannot be kept from anyone (any role may SET a name with a dot), so the SQL edition
-- reads it only once its owner has switched it on here, for tests; otherwise clock_now() is
-- the server's clock, whatever the setting says. Switching rewrites clock_now(), so that a
-- decision pays nothing for the switch. Granted to nobody.
CREATE FUNCTION ratelimit.use_test_clock(p_on boolean)
RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF p_on IS NULL THEN
        RAISE EXCEPTION 'p_on must not be NULL' USING ERRCODE = 'null_value_not_allowed';
    END IF;
    IF p_on THEN
        CREATE OR REPLACE FUNCTION ratelimit.clock_now()
        RETURNS timestamptz
        LANGUAGE sql VOLATILE PARALLEL SAFE
        AS 'SELECT COALESCE(NULLIF(pg_catalog.current_setting(''ratelimit.test_clock'', true), '''')::timestamptz, pg_catalog.clock_timestamp())';
    ELSE
        CREATE OR REPLACE FUNCTION ratelimit.clock_now()
        RETURNS timestamptz
        LANGUAGE sql VOLATILE PARALLEL SAFE
        AS 'SELECT pg_catalog.clock_timestamp()';
    END IF;
END
$$;
