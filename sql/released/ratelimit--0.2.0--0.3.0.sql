-- ratelimit 0.3.0: the native API in schema ratelimit. Six algorithms decided in the C++ core,
-- on two table engines (logged and unlogged) that share one state-table design.
\echo Use "ALTER EXTENSION ratelimit UPDATE TO '0.3.0'" to load this file. \quit

------------------------------------------------------------------------------------------------
-- State tables: one row per key. Only the primary key is indexed, and pages keep free room
-- (fillfactor), so the update each decision makes is HOT: no index entry, no new page. The C
-- functions read and write these rows directly under the row lock; nothing else may write them.
-- Columns (what each algorithm keeps in them is documented in include/ratelimit/algorithms.hpp):
--   algorithm      which algorithm the state belongs to (0: none, the key is only blocked)
--   instant        microseconds since the Unix epoch (window start, last refill, arrival time)
--   amount, carry  the algorithm's counts
--   log            sliding_window only: (instant, units) pairs, oldest first
--   blocked_until  microseconds since the Unix epoch; 0 when never blocked
--   expires_at     microseconds since the Unix epoch from which the row decides like no row
------------------------------------------------------------------------------------------------

CREATE TABLE ratelimit.key_state (
    key text COLLATE "C" NOT NULL,
    algorithm smallint NOT NULL,
    instant bigint NOT NULL,
    amount bigint NOT NULL,
    carry bigint NOT NULL,
    log bigint[],
    blocked_until bigint NOT NULL,
    expires_at bigint NOT NULL,
    CONSTRAINT key_state_pkey PRIMARY KEY (key)
) WITH (fillfactor = 70);

CREATE UNLOGGED TABLE ratelimit.key_state_unlogged (
    key text COLLATE "C" NOT NULL,
    algorithm smallint NOT NULL,
    instant bigint NOT NULL,
    amount bigint NOT NULL,
    carry bigint NOT NULL,
    log bigint[],
    blocked_until bigint NOT NULL,
    expires_at bigint NOT NULL,
    CONSTRAINT key_state_unlogged_pkey PRIMARY KEY (key)
) WITH (fillfactor = 70);

ALTER TABLE ratelimit.key_state ENABLE ROW LEVEL SECURITY;
ALTER TABLE ratelimit.key_state_unlogged ENABLE ROW LEVEL SECURITY;
REVOKE ALL ON TABLE ratelimit.key_state, ratelimit.key_state_unlogged FROM PUBLIC;

------------------------------------------------------------------------------------------------
-- Decisions
------------------------------------------------------------------------------------------------

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
-- nothing; a cost larger than what remains is denied whole.
CREATE FUNCTION ratelimit.consume(
    p_key text,
    p_limit integer,
    p_period interval,
    p_cost integer DEFAULT 1,
    p_algorithm text DEFAULT 'fixed_window',
    p_engine text DEFAULT 'table',
    p_burst integer DEFAULT NULL)
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
    p_burst integer DEFAULT NULL)
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
    p_burst integer DEFAULT NULL)
RETURNS ratelimit.decision
LANGUAGE c VOLATILE PARALLEL UNSAFE
AS 'MODULE_PATHNAME', 'ratelimit_refund';

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

-- Deletes the rows that decide exactly like no row (expired windows, full buckets, ended
-- blocks) from one engine's table, or both when p_engine is NULL; returns how many.
CREATE FUNCTION ratelimit.cleanup_key_state(p_engine text DEFAULT NULL)
RETURNS bigint
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    now_micros constant bigint :=
        (extract(epoch FROM ratelimit.clock_now()) * 1000000)::bigint;
    deleted bigint := 0;
    n bigint;
BEGIN
    IF p_engine IS NOT NULL AND p_engine NOT IN ('table', 'unlogged') THEN
        RAISE EXCEPTION 'p_engine must be one of table, unlogged (got "%")', left(p_engine, 64)
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF p_engine IS NULL OR p_engine = 'table' THEN
        DELETE FROM ratelimit.key_state WHERE expires_at <= now_micros;
        GET DIAGNOSTICS n = ROW_COUNT;
        deleted := deleted + n;
    END IF;
    IF p_engine IS NULL OR p_engine = 'unlogged' THEN
        DELETE FROM ratelimit.key_state_unlogged WHERE expires_at <= now_micros;
        GET DIAGNOSTICS n = ROW_COUNT;
        deleted := deleted + n;
    END IF;
    RETURN deleted;
END
$$;

-- The pg_cron jobs now include the state tables' cleanup.
CREATE OR REPLACE FUNCTION ratelimit.cleanup_jobs()
RETURNS TABLE(job_name text, schedule text, command text)
LANGUAGE sql IMMUTABLE
SET search_path = pg_catalog, pg_temp
AS $$
    VALUES
        ('ratelimit-cleanup-rpc-rate-limits', '17 3 * * *',
         'SELECT @extschema@.cleanup_rpc_rate_limits()'),
        ('ratelimit-cleanup-expired-rate-limits', '0 * * * *',
         'SELECT @extschema@.cleanup_expired_rate_limits()'),
        ('ratelimit-cleanup-old-rate-limit-buckets', '*/10 * * * *',
         'SELECT @extschema@.cleanup_old_rate_limit_buckets()'),
        ('ratelimit-cleanup-key-state', '*/5 * * * *',
         'SELECT ratelimit.cleanup_key_state()')
$$;

------------------------------------------------------------------------------------------------
-- Privileges. Callers choose the keys, so the native API is for trusted roles: the owner and,
-- on Supabase, service_role (edge functions). Grant EXECUTE to an application role to let it
-- decide; reset, block and cleanup are administration.
------------------------------------------------------------------------------------------------

REVOKE EXECUTE ON FUNCTION
    ratelimit.consume(text, integer, interval, integer, text, text, integer),
    ratelimit.peek(text, integer, interval, integer, text, text, integer),
    ratelimit.refund(text, integer, interval, integer, text, text, integer),
    ratelimit.reset(text, text),
    ratelimit.block(text, interval, text),
    ratelimit.cleanup_key_state(text)
FROM PUBLIC;

DO $$
BEGIN
    IF EXISTS (SELECT 1 FROM pg_catalog.pg_roles WHERE rolname = 'service_role') THEN
        GRANT USAGE ON SCHEMA ratelimit TO service_role;
        GRANT EXECUTE ON FUNCTION
            ratelimit.consume(text, integer, interval, integer, text, text, integer),
            ratelimit.peek(text, integer, interval, integer, text, text, integer),
            ratelimit.refund(text, integer, interval, integer, text, text, integer),
            ratelimit.reset(text, text),
            ratelimit.block(text, interval, text)
        TO service_role;
    END IF;
END
$$;
