-- The SQL edition's bodies of the C functions of sql/install/schema_and_clock.sql.

-- The server's clock; ratelimit.use_test_clock(true) makes it read ratelimit.test_clock.
-- @begin ratelimit_clock_now
LANGUAGE sql VOLATILE PARALLEL SAFE
AS 'SELECT pg_catalog.clock_timestamp()';
-- @end ratelimit_clock_now
