-- Leases through a policy, as policy decisions: after policies.sql, which defines
-- ratelimit.policy_decision (ratelimit.acquire_policy is in leases.sql).

-- What acquire_policy answered for p_policy, as a policy decision for http_headers and
-- http_body: remaining is the limit less the units in flight, a denial waits for the first
-- lease to reach its maximum hold, and the reasons 'leased' and 'concurrency_limited' make the
-- headers count the limit in concurrent requests.
CREATE FUNCTION ratelimit.lease_decision(p_policy text, p_lease ratelimit.lease)
RETURNS ratelimit.policy_decision
LANGUAGE c STABLE PARALLEL UNSAFE SECURITY INVOKER
AS 'MODULE_PATHNAME', 'ratelimit_lease_decision';
