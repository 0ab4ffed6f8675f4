-- The native API: consume, peek, refund, allow, consume_many, peek_many, reset, block, consume_all, and the helpers policies use.

-- What every decision returns. "limit" is what a full key allows at once (the burst for
-- token_bucket and gcra); remaining is what a call could take now; the waits are in
-- milliseconds, rounded up, so that calling again exactly retry_after_ms later is allowed.
CREATE TYPE ratelimit.decision AS (
    allowed boolean,
    "limit" integer,
    remaining integer,
    retry_after_ms bigint,
    reset_after_ms bigint
);

-- Consumes p_cost units of p_key's allowance of p_limit per p_period. A denied call consumes
-- nothing; a cost larger than what remains is denied whole. Windows are aligned to the Unix
-- epoch, except calendar periods (fixed_window only): with p_time_zone, p_period '1 day',
-- '1 week' (ISO, from Monday) or '1 month' is that calendar unit from local midnight in the
-- zone; '1 month' without p_time_zone is the calendar month in UTC.
-- p_max_wait (token_bucket and gcra only; NULL or '0': never) delays instead of denying: a call
-- that would wait at most p_max_wait for its turn is allowed, its units taken now, and may go
-- retry_after_ms from now; the calls after it wait behind it, and the calls' go instants keep
-- the limit as if each had arrived then. For an allowed call retry_after_ms is that delay, 0
-- when it may go at once; for a denied one, the wait until it would be allowed.
CREATE FUNCTION ratelimit.consume(
    p_key text,
    p_limit integer,
    p_period interval,
    p_cost integer DEFAULT 1,
    p_algorithm text DEFAULT 'fixed_window',
    p_engine text DEFAULT 'table',
    p_burst integer DEFAULT NULL,
    p_time_zone text DEFAULT NULL,
    p_max_wait interval DEFAULT NULL)
RETURNS ratelimit.decision
LANGUAGE c VOLATILE PARALLEL UNSAFE
AS 'MODULE_PATHNAME', 'ratelimit_consume';

-- What consume would decide now, without consuming (nothing is written).
CREATE FUNCTION ratelimit.peek(
    p_key text,
    p_limit integer,
    p_period interval,
    p_cost integer DEFAULT 1,
    p_algorithm text DEFAULT 'fixed_window',
    p_engine text DEFAULT 'table',
    p_burst integer DEFAULT NULL,
    p_time_zone text DEFAULT NULL)
RETURNS ratelimit.decision
LANGUAGE c VOLATILE PARALLEL UNSAFE
AS 'MODULE_PATHNAME', 'ratelimit_peek';

-- Gives back up to p_cost units consumed earlier (e.g. when the guarded work did not happen);
-- returns what a one-unit peek says afterwards.
CREATE FUNCTION ratelimit.refund(
    p_key text,
    p_limit integer,
    p_period interval,
    p_cost integer DEFAULT 1,
    p_algorithm text DEFAULT 'fixed_window',
    p_engine text DEFAULT 'table',
    p_burst integer DEFAULT NULL,
    p_time_zone text DEFAULT NULL)
RETURNS ratelimit.decision
LANGUAGE c VOLATILE PARALLEL UNSAFE
AS 'MODULE_PATHNAME', 'ratelimit_refund';

-- consume for callers that need only the answer: the same decision, as a boolean.
CREATE FUNCTION ratelimit.allow(
    p_key text,
    p_limit integer,
    p_period interval,
    p_cost integer DEFAULT 1,
    p_algorithm text DEFAULT 'fixed_window',
    p_engine text DEFAULT 'table',
    p_burst integer DEFAULT NULL,
    p_time_zone text DEFAULT NULL)
RETURNS boolean
LANGUAGE c VOLATILE PARALLEL UNSAFE
AS 'MODULE_PATHNAME', 'ratelimit_allow';

-- consume_many and peek_many: one round trip for many keys. Element i of the result is what
-- consume (peek) of p_keys[i] alone would give, decided in the order given; each key on its own
-- (not all-or-nothing), so a key given twice is decided twice. Every key is checked before any
-- is decided: an error names the element (p_keys[7]) and charges nothing. 1 to 10,000 keys.
CREATE FUNCTION ratelimit.consume_many(
    p_keys text[],
    p_limit integer,
    p_period interval,
    p_cost integer DEFAULT 1,
    p_algorithm text DEFAULT 'fixed_window',
    p_engine text DEFAULT 'table',
    p_burst integer DEFAULT NULL,
    p_time_zone text DEFAULT NULL)
RETURNS ratelimit.decision[]
LANGUAGE c VOLATILE PARALLEL UNSAFE
AS 'MODULE_PATHNAME', 'ratelimit_consume_many';

CREATE FUNCTION ratelimit.peek_many(
    p_keys text[],
    p_limit integer,
    p_period interval,
    p_cost integer DEFAULT 1,
    p_algorithm text DEFAULT 'fixed_window',
    p_engine text DEFAULT 'table',
    p_burst integer DEFAULT NULL,
    p_time_zone text DEFAULT NULL)
RETURNS ratelimit.decision[]
LANGUAGE c VOLATILE PARALLEL UNSAFE
AS 'MODULE_PATHNAME', 'ratelimit_peek_many';

-- Forgets everything about p_key (counts and block); true if there was anything.
CREATE FUNCTION ratelimit.reset(p_key text, p_engine text DEFAULT 'table')
RETURNS boolean
LANGUAGE c VOLATILE PARALLEL UNSAFE
AS 'MODULE_PATHNAME', 'ratelimit_reset';

-- Denies every call on p_key for p_duration (an existing longer block stays); returns the end.
CREATE FUNCTION ratelimit.block(p_key text, p_duration interval, p_engine text DEFAULT 'table')
RETURNS timestamptz
LANGUAGE c VOLATILE PARALLEL UNSAFE
AS 'MODULE_PATHNAME', 'ratelimit_block';

-- consume_all: element i of each array describes limit i (p_algorithms, p_engines, p_bursts
-- and p_enforced may be NULL: fixed_window, table, no burst, enforced). If every enforced limit
-- allows p_cost, each limit that allows is charged; if any enforced limit denies, nothing is
-- charged anywhere. Element i of the result is limit i's decision: after the charge when the
-- call was allowed, as the key stands (nothing taken) when it was denied. Limits with
-- p_enforced false (shadow) are charged when they allow and only reported when they deny.
-- Table rows are written in a subtransaction that is undone on a denial; memory keys are
-- decided under all their partition locks at once, after the table keys.
------------------------------------------------------------------------------------------------

CREATE FUNCTION ratelimit.consume_all(
    p_keys text[],
    p_limits integer[],
    p_periods interval[],
    p_algorithms text[] DEFAULT NULL,
    p_engines text[] DEFAULT NULL,
    p_bursts integer[] DEFAULT NULL,
    p_enforced boolean[] DEFAULT NULL,
    p_cost integer DEFAULT 1)
RETURNS ratelimit.decision[]
LANGUAGE c VOLATILE PARALLEL UNSAFE
AS 'MODULE_PATHNAME', 'ratelimit_consume_all';

-- Raises the error consume would raise for these settings (22023/22004 naming the argument),
-- or returns nothing. Policies are checked with it when they are written.
CREATE FUNCTION ratelimit.validate_limit(
    p_limit integer,
    p_period interval,
    p_algorithm text,
    p_engine text,
    p_burst integer DEFAULT NULL,
    p_time_zone text DEFAULT NULL)
RETURNS void
LANGUAGE c STABLE PARALLEL SAFE
AS 'MODULE_PATHNAME', 'ratelimit_validate_limit';

-- SHA-256 of a subject (an IP address, an e-mail) as 64 lowercase hex digits: the same digest
-- as crypto.subtle.digest('SHA-256', new TextEncoder().encode(value)) in an edge function.
CREATE FUNCTION ratelimit.hash_subject(p_value text)
RETURNS text
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$ SELECT encode(sha256(convert_to(p_value, 'UTF8')), 'hex') $$;

--
