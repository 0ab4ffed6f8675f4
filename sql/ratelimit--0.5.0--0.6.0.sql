-- ratelimit 0.5.0 -> 0.6.0: policies decided natively. check, check_all, check_http,
-- http_headers and http_body are C functions over a per-backend cache of the policy tables,
-- kept exact by relcache invalidations; each policy's counters live in a namespace of their
-- own (the policy column of the state tables), so no policy name, subject or native key can
-- reach another's counter. Policy counters of 0.5.0 (rows keyed 'policy:subject') are not
-- carried over: every policy starts this version with fresh counters, and the old rows, now
-- plain native keys, go with the next cleanup_key_state() once they expire.
\echo Use "ALTER EXTENSION ratelimit UPDATE TO '0.6.0'" to load this file. \quit

------------------------------------------------------------------------------------------------
-- Namespaces: a row is (policy, key); the native API's keys have policy ''.
------------------------------------------------------------------------------------------------

ALTER TABLE ratelimit.key_state ADD COLUMN policy text COLLATE "C" NOT NULL DEFAULT '';
ALTER TABLE ratelimit.key_state DROP CONSTRAINT key_state_pkey,
    ADD CONSTRAINT key_state_pkey PRIMARY KEY (policy, key);
ALTER TABLE ratelimit.key_state_unlogged ADD COLUMN policy text COLLATE "C" NOT NULL DEFAULT '';
ALTER TABLE ratelimit.key_state_unlogged DROP CONSTRAINT key_state_unlogged_pkey,
    ADD CONSTRAINT key_state_unlogged_pkey PRIMARY KEY (policy, key);

------------------------------------------------------------------------------------------------
-- The policy tables' cache: a statement that changes one of them invalidates every backend's
-- copy when its transaction commits (src/pg/policy_cache.hpp).
------------------------------------------------------------------------------------------------

CREATE FUNCTION ratelimit.policy_tables_changed()
RETURNS trigger
LANGUAGE c
AS 'MODULE_PATHNAME', 'ratelimit_policy_tables_changed';

CREATE TRIGGER policies_changed AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE
    ON ratelimit.policies FOR EACH STATEMENT EXECUTE FUNCTION ratelimit.policy_tables_changed();
CREATE TRIGGER tiers_changed AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE
    ON ratelimit.tiers FOR EACH STATEMENT EXECUTE FUNCTION ratelimit.policy_tables_changed();
CREATE TRIGGER key_overrides_changed AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE
    ON ratelimit.key_overrides FOR EACH STATEMENT
    EXECUTE FUNCTION ratelimit.policy_tables_changed();
CREATE TRIGGER access_list_changed AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE
    ON ratelimit.access_list FOR EACH STATEMENT
    EXECUTE FUNCTION ratelimit.policy_tables_changed();

REVOKE EXECUTE ON FUNCTION ratelimit.policy_tables_changed() FROM PUBLIC;

------------------------------------------------------------------------------------------------
-- Deciding by policy, natively. Same names, parameters and results as 0.5.0. They read the
-- policy tables through the cache and write counters through the engines, neither of which
-- goes through SQL, so they need neither SECURITY DEFINER nor a pinned search_path (the
-- denial log is written as its table's owner with schema-qualified statements).
------------------------------------------------------------------------------------------------

CREATE OR REPLACE FUNCTION ratelimit.decide_policies(
    p_policies text[],
    p_keys text[],
    p_cost integer,
    p_tier text,
    p_ip inet,
    p_user uuid,
    p_policy_argument text,
    p_key_argument text)
RETURNS ratelimit.policy_decision
LANGUAGE c VOLATILE PARALLEL UNSAFE SECURITY INVOKER
AS 'MODULE_PATHNAME', 'ratelimit_decide_policies';

CREATE OR REPLACE FUNCTION ratelimit.check(
    p_policy text,
    p_key text,
    p_cost integer DEFAULT 1,
    p_tier text DEFAULT NULL,
    p_ip inet DEFAULT NULL,
    p_user uuid DEFAULT NULL)
RETURNS ratelimit.policy_decision
LANGUAGE c VOLATILE PARALLEL UNSAFE SECURITY INVOKER
AS 'MODULE_PATHNAME', 'ratelimit_check';

CREATE OR REPLACE FUNCTION ratelimit.check_all(
    p_policies text[],
    p_keys text[],
    p_cost integer DEFAULT 1,
    p_tier text DEFAULT NULL,
    p_ip inet DEFAULT NULL,
    p_user uuid DEFAULT NULL)
RETURNS ratelimit.policy_decision
LANGUAGE c VOLATILE PARALLEL UNSAFE SECURITY INVOKER
AS 'MODULE_PATHNAME', 'ratelimit_check_all';

CREATE OR REPLACE FUNCTION ratelimit.check_http(
    p_policies text[],
    p_keys text[],
    p_cost integer DEFAULT 1,
    p_tier text DEFAULT NULL,
    p_ip inet DEFAULT NULL,
    p_user uuid DEFAULT NULL,
    p_reset_format text DEFAULT 'iso8601',
    p_body_shape text DEFAULT 'error_message')
RETURNS jsonb
LANGUAGE c VOLATILE PARALLEL UNSAFE SECURITY INVOKER
AS 'MODULE_PATHNAME', 'ratelimit_check_http';

CREATE OR REPLACE FUNCTION ratelimit.http_headers(
    p_decision ratelimit.policy_decision,
    p_reset_format text DEFAULT 'iso8601')
RETURNS jsonb
LANGUAGE c IMMUTABLE PARALLEL SAFE
AS 'MODULE_PATHNAME', 'ratelimit_http_headers';

CREATE OR REPLACE FUNCTION ratelimit.http_body(
    p_decision ratelimit.policy_decision,
    p_shape text DEFAULT 'error_message')
RETURNS jsonb
LANGUAGE c IMMUTABLE PARALLEL SAFE
AS 'MODULE_PATHNAME', 'ratelimit_http_body';
