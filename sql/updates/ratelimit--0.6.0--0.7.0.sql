\echo Use "ALTER EXTENSION ratelimit UPDATE" to load this file. \quit

-- The source of build/ratelimit--0.6.0--0.7.0.sql, which scripts/build-sql.sh makes:
-- each include line stands for the current definition it names, written once there
-- (CONTRIBUTING.md, Versions).

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

-- @include sql/install/drop_in_extensions.sql

-- The cleanup jobs follow the drop-ins into their extensions (or to where 0.6.0 left them).
-- @include sql/install/cleanup.sql cleanup_jobs

-- @include sql/install/cleanup.sql schedule_cleanup

-- @include sql/install/cleanup.sql unschedule_cleanup

------------------------------------------------------------------------------------------------
-- A policy's name is checked in words, and its lookups (below); a route may take the request's
-- tier from a JWT claim.
------------------------------------------------------------------------------------------------

-- @include sql/install/policies.sql policies_validate

-- The column on a table that exists (sql/install/postgrest.sql creates the table with it).
ALTER TABLE ratelimit.request_routes ADD COLUMN tier_claim text,
    ADD COLUMN tier_claim_user_writable boolean NOT NULL DEFAULT false;

-- @include sql/install/postgrest.sql request_routes_validate

------------------------------------------------------------------------------------------------
-- memory_stats says whether the WAL's worker runs and what replay could not place (its grants
-- come back with the privileges below).
------------------------------------------------------------------------------------------------

DROP VIEW ratelimit.memory_stats;
DROP FUNCTION ratelimit.memory_stats();
-- @include sql/install/memory_engine.sql memory_stats

------------------------------------------------------------------------------------------------
-- Limits and tiers from the app's data: a policy's lookups, checked when written.
------------------------------------------------------------------------------------------------

ALTER TABLE ratelimit.policies ADD COLUMN tier_lookup text,
    ADD COLUMN limit_lookup text;
-- @include sql/install/policies.sql validate_policy_lookup

------------------------------------------------------------------------------------------------
-- Declared limiters: an app's own function over a policy or an algorithm, and the request's
-- caller and address they key by.
------------------------------------------------------------------------------------------------

-- @include sql/install/postgrest.sql request_identity
-- @include sql/install/declared_limiters.sql
-- @include sql/install/insert_limits.sql
-- @include sql/install/row_security_limits.sql
-- @include sql/install/moving.sql

------------------------------------------------------------------------------------------------
-- Privileges: the grants of each extension are set by one function, which the drop-in
-- extensions' scripts call too; ratelimit's list as in 0.7.0.
------------------------------------------------------------------------------------------------

-- @include sql/install/privileges.sql set_member_privileges

-- The list is the install's; the call is not: false, because an update takes back only from the
-- roles the list speaks for (anon, authenticated), where the install (true) resets every role.
SELECT ratelimit.set_member_privileges('ratelimit', false, ARRAY[
-- @include sql/install/privileges.sql ratelimit_grants
]);

-- Each C entry point is named after its SQL function (<extension>_<function>); the names the
-- released scripts used stay in the library for the databases they made.
-- @include sql/install/schema_and_clock.sql clock_now
