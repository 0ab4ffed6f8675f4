-- Per-policy counters, top offenders (shared memory: needs shared_preload_libraries).

-- Counts one call's outcome per policy; called by decide_policies only.
CREATE FUNCTION ratelimit.record_outcomes(p_policies text[], p_subjects text[], p_outcomes text[])
RETURNS boolean
LANGUAGE c VOLATILE PARALLEL UNSAFE
AS 'MODULE_PATHNAME', 'ratelimit_record_outcomes';

-- Calls each policy allowed, denied and shadow-denied in this database since `since` (its
-- first counted call, or reset_policy_stats). A call that skipped a policy (allow list, bypass)
-- counts as allowed. near_limit: allowed calls that left the key with more than
-- ratelimit.near_limit_ratio of the limit used; denials_not_logged: denials of a log_denials
-- policy the denial log did not record (sampled out, the log off, its queue full, a standby).
-- counted = false: calls that found no counter (policy NULL), and each policy without one
-- (counts NULL), listed when the database ran out of room (ratelimit.policy_counters).
CREATE FUNCTION ratelimit.policy_stats()
RETURNS TABLE(policy text, allowed bigint, denied bigint, shadow_denied bigint, since timestamptz,
              near_limit bigint, denials_not_logged bigint, counted boolean)
LANGUAGE c VOLATILE PARALLEL SAFE
AS 'MODULE_PATHNAME', 'ratelimit_policy_stats';

CREATE VIEW ratelimit.policy_stats AS
    SELECT * FROM ratelimit.policy_stats();

-- The subjects denied most often, per policy, most denials first. The table holds 128 pairs:
-- every pair denied more than 1/128 of all denials is there, and its true count lies between
-- denials - overcount and denials.
CREATE FUNCTION ratelimit.top_offenders(p_limit integer DEFAULT 10)
RETURNS TABLE(policy text, subject text, denials bigint, overcount bigint,
              first_denied_at timestamptz, last_denied_at timestamptz)
LANGUAGE c VOLATILE PARALLEL SAFE
AS 'MODULE_PATHNAME', 'ratelimit_top_offenders';

CREATE FUNCTION ratelimit.reset_policy_stats()
RETURNS void
LANGUAGE c VOLATILE PARALLEL UNSAFE
AS 'MODULE_PATHNAME', 'ratelimit_reset_policy_stats';

-- This database's policy counters and the memory engine's store in the Prometheus text format
-- (docs/operations.md#metrics).
CREATE FUNCTION ratelimit.metrics()
RETURNS text
LANGUAGE c VOLATILE PARALLEL SAFE
AS 'MODULE_PATHNAME', 'ratelimit_metrics';
