-- In-flight leases: "at most N at once" (concurrent requests, running jobs). A lease counts
-- against its key's limit until it is released, or until the transaction or session holding it
-- ends, or its maximum hold time passes. Leases live in shared memory, like the memory engine:
-- the library must be preloaded.

CREATE TYPE ratelimit.lease AS (
    lease_id bigint,        -- NULL when denied
    allowed boolean,
    "limit" integer,
    in_flight integer,      -- units the key holds after the call
    retry_after_ms bigint   -- when denied: until the first of the key's leases reaches its
                            -- maximum hold time; NULL when none has one
);

-- Takes p_cost of p_key's p_limit in-flight units. p_scope 'transaction' (the default) ends the
-- lease with the transaction that took it (commit or rollback, or the rollback of its
-- savepoint); 'session' with the session, unless released first. p_max_hold ends it anyway.
CREATE FUNCTION ratelimit.acquire(
    p_key text,
    p_limit integer,
    p_cost integer DEFAULT 1,
    p_scope text DEFAULT 'transaction',
    p_max_hold interval DEFAULT NULL)
RETURNS ratelimit.lease
LANGUAGE c VOLATILE PARALLEL UNSAFE
AS 'MODULE_PATHNAME', 'ratelimit_acquire';

-- Ends a lease now; a lease that is not held (released, ended, past its hold time) is an error.
CREATE FUNCTION ratelimit.release(p_lease bigint)
RETURNS boolean
LANGUAGE c VOLATILE PARALLEL UNSAFE
AS 'MODULE_PATHNAME', 'ratelimit_release';

-- The units p_key holds in live leases.
CREATE FUNCTION ratelimit.in_flight(p_key text)
RETURNS integer
LANGUAGE c VOLATILE PARALLEL UNSAFE
AS 'MODULE_PATHNAME', 'ratelimit_in_flight';

-- Leases through a policy whose quota_unit is 'concurrent-requests' (a concurrency policy):
-- its limit is the units one subject may hold in flight at once, after the key's override or
-- the tier, and its period the longest a lease is held. The lists apply as for check: a deny
-- entry denies and holds nothing; an allow entry or a bypass lets the call go with no lease
-- (lease_id NULL, nothing to release). The policy's leases are its own: neither another
-- policy's nor a native acquire's share them. Counted in policy_stats as check counts.
CREATE FUNCTION ratelimit.acquire_policy(
    p_policy text,
    p_key text,
    p_cost integer DEFAULT 1,
    p_scope text DEFAULT 'transaction',
    p_tier text DEFAULT NULL,
    p_ip inet DEFAULT NULL,
    p_user uuid DEFAULT NULL)
RETURNS ratelimit.lease
LANGUAGE c VOLATILE PARALLEL UNSAFE SECURITY INVOKER
AS 'MODULE_PATHNAME', 'ratelimit_acquire_policy';
