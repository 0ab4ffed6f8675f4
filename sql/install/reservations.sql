-- Reservations: rate limiting for costs known only afterwards (tokens an answer used, bytes
-- sent). reserve consumes an estimate as consume would; settle, with the actual cost, refunds
-- or charges the difference; cancel gives the estimate back. An open reservation not settled
-- within its hold time expires and stays charged its estimate. Reservations live in shared
-- memory: the library must be preloaded, and a restart forgets the open ones (as their expiry
-- would).

CREATE TYPE ratelimit.reservation AS (
    reservation_id bigint,   -- NULL when denied
    allowed boolean,
    "limit" integer,
    remaining integer,
    retry_after_ms bigint,
    reset_after_ms bigint,
    expires_at timestamptz   -- when the reservation expires unless settled; NULL when denied
);

-- Consumes p_estimate of p_key's allowance exactly as consume(p_key, p_limit, p_period,
-- p_estimate, p_algorithm, p_engine, p_burst) would and, when allowed, opens a reservation for
-- p_hold (1 ms to 1 day). A reservation whose transaction rolls back is dropped with it.
CREATE FUNCTION ratelimit.reserve(
    p_key text,
    p_limit integer,
    p_period interval,
    p_estimate integer,
    p_algorithm text DEFAULT 'fixed_window',
    p_engine text DEFAULT 'table',
    p_burst integer DEFAULT NULL,
    p_hold interval DEFAULT '15 minutes')
RETURNS ratelimit.reservation
LANGUAGE c VOLATILE PARALLEL UNSAFE
AS 'MODULE_PATHNAME', 'ratelimit_reserve';

-- Closes an open reservation of the calling role at p_actual units: the difference to its
-- estimate is refunded (never below zero) or charged, even past the limit (the work is done);
-- what goes past the limit denies the calls that follow until it is worked off. Returns what a
-- one-unit peek says afterwards. A settle that rolls back leaves the reservation open.
CREATE FUNCTION ratelimit.settle(p_reservation bigint, p_actual integer)
RETURNS ratelimit.decision
LANGUAGE c VOLATILE PARALLEL UNSAFE
AS 'MODULE_PATHNAME', 'ratelimit_settle';

-- Closes an open reservation with nothing used: settle at 0 units.
CREATE FUNCTION ratelimit.cancel(p_reservation bigint)
RETURNS ratelimit.decision
LANGUAGE c VOLATILE PARALLEL UNSAFE
AS 'MODULE_PATHNAME', 'ratelimit_cancel';

-- Decides exactly as check(p_policy, p_key, p_estimate, p_tier, p_ip, p_user) would (lists,
-- override, tier, shadow, count_denied, counters, denial log) and, when that charged the
-- policy's key, opens a reservation for p_hold on it: settle and cancel then correct the
-- policy's counter for the subject, under the limit the call was decided with. A call that
-- charged nothing (denied, an allow list, a bypass, a shadow policy's would-be denial) opens
-- none: reservation_id is NULL.
CREATE FUNCTION ratelimit.reserve_policy(
    p_policy text,
    p_key text,
    p_estimate integer,
    p_hold interval DEFAULT '1 minute',
    p_tier text DEFAULT NULL,
    p_ip inet DEFAULT NULL,
    p_user uuid DEFAULT NULL)
RETURNS ratelimit.reservation
LANGUAGE c VOLATILE PARALLEL UNSAFE SECURITY INVOKER
AS 'MODULE_PATHNAME', 'ratelimit_reserve_policy';
