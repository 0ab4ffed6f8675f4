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

------------------------------------------------------------------------------------------------
-- Presets: the limits of the apps this extension serves, loaded on purpose with
-- ratelimit.load_preset. A fresh install has no policies or tiers; an updated one keeps the
-- rows it has. The presets are data of the extension (not dumped: CREATE EXTENSION brings them).
------------------------------------------------------------------------------------------------

CREATE TABLE ratelimit.preset_catalog (
    preset text COLLATE "C" PRIMARY KEY,
    description text NOT NULL
);

-- Same columns and defaults as ratelimit.policies, so that a preset row and a loaded one compare
-- column for column.
CREATE TABLE ratelimit.preset_policies (
    preset text COLLATE "C" NOT NULL REFERENCES ratelimit.preset_catalog (preset),
    name text COLLATE "C" NOT NULL,
    algorithm text NOT NULL DEFAULT 'fixed_window',
    "limit" integer NOT NULL,
    period interval NOT NULL,
    burst integer,
    engine text NOT NULL DEFAULT 'table',
    count_denied boolean NOT NULL DEFAULT false,
    shadow boolean NOT NULL DEFAULT false,
    hash_key boolean NOT NULL DEFAULT false,
    log_denials boolean NOT NULL DEFAULT false,
    description text,
    PRIMARY KEY (preset, name)
);

CREATE TABLE ratelimit.preset_tiers (
    preset text COLLATE "C" NOT NULL REFERENCES ratelimit.preset_catalog (preset),
    name text COLLATE "C" NOT NULL,
    multiplier numeric NOT NULL DEFAULT 1,
    bypass boolean NOT NULL DEFAULT false,
    description text,
    PRIMARY KEY (preset, name)
);

INSERT INTO ratelimit.preset_catalog (preset, description) VALUES
    ('game-backend', 'The game backend''s per-user RPC limits (rolling windows)'),
    ('social-activity', 'The social app''s per-user activity limits (one-minute windows) and its tiers'),
    ('hourly-endpoints', 'Per-user endpoint limits in hour-aligned windows'),
    ('payment-flow', 'The payment flow''s global, per-IP, per-transaction and per-e-mail limits'),
    ('user-cleanup', 'The orphaned-user cleanup''s global, per-IP and per-e-mail limits (hashed keys)');

-- Table engine everywhere (it needs no preloading): switch one with
-- UPDATE ratelimit.policies SET engine = 'memory' WHERE ...
INSERT INTO ratelimit.preset_policies (preset, name, algorithm, "limit", period, description) VALUES
    -- A window opens at the first call and lasts its period.
    ('game-backend', 'rpc.auth', 'rolling_window', 5, '15 minutes', 'AUTH: login, register'),
    ('game-backend', 'rpc.wallet', 'rolling_window', 30, '1 minute', 'WALLET: reward claims, purchases'),
    ('game-backend', 'rpc.game', 'rolling_window', 100, '1 minute', 'GAME: game start, completion, rewards'),
    ('game-backend', 'rpc.social', 'rolling_window', 50, '1 minute', 'SOCIAL: friend requests, messages'),
    ('game-backend', 'rpc.admin', 'rolling_window', 1000, '1 minute', 'ADMIN: admin operations'),
    ('game-backend', 'rpc.register-with-username-pin', 'rolling_window', 5, '15 minutes', 'Prevent bot account creation'),
    ('game-backend', 'rpc.login-with-username-pin', 'rolling_window', 5, '15 minutes', 'Brute-force protection'),
    ('game-backend', 'rpc.complete-game', 'rolling_window', 20, '1 minute', 'Realistic max 1 game/3 seconds'),
    ('game-backend', 'rpc.credit-gameplay-reward', 'rolling_window', 30, '1 minute', '15 questions x 2 retries'),
    ('game-backend', 'rpc.claim-daily-gift', 'rolling_window', 10, '1 minute', 'Prevent claim spam'),
    ('game-backend', 'rpc.claim_welcome_bonus', 'rolling_window', 5, '60 minutes', 'Prevent abuse attempts'),
    ('game-backend', 'rpc.lootbox-decide', 'rolling_window', 30, '1 minute', 'Max 20 lootboxes/day'),
    ('game-backend', 'rpc.send-friend-request', 'rolling_window', 10, '5 minutes', 'Prevent spam'),
    ('game-backend', 'rpc.send-dm', 'rolling_window', 100, '1 minute', 'Realistic chat usage'),
    -- Epoch-aligned one-minute windows.
    ('social-activity', 'activity.create_post', 'fixed_window', 10, '1 minute', 'posts-guard'),
    ('social-activity', 'activity.update_post', 'fixed_window', 10, '1 minute', 'posts-guard'),
    ('social-activity', 'activity.delete_post', 'fixed_window', 10, '1 minute', 'posts-guard'),
    ('social-activity', 'activity.add_comment', 'fixed_window', 60, '1 minute', 'comments-guard'),
    ('social-activity', 'activity.update_comment', 'fixed_window', 60, '1 minute', 'comments-guard'),
    ('social-activity', 'activity.delete_comment', 'fixed_window', 60, '1 minute', 'comments-guard'),
    ('social-activity', 'activity.create_room', 'fixed_window', 10, '1 minute', 'rooms-guard'),
    ('social-activity', 'activity.update_room', 'fixed_window', 10, '1 minute', 'rooms-guard'),
    ('social-activity', 'activity.delete_room', 'fixed_window', 10, '1 minute', 'rooms-guard'),
    ('social-activity', 'activity.create_room_message', 'fixed_window', 60, '1 minute', 'room-message-guard'),
    ('social-activity', 'activity.update_room_message', 'fixed_window', 60, '1 minute', 'room-message-guard'),
    ('social-activity', 'activity.delete_room_message', 'fixed_window', 60, '1 minute', 'room-message-guard'),
    ('social-activity', 'activity.bulk_import', 'fixed_window', 5, '1 minute', 'Stricter limit for bulk imports'),
    -- Hour-aligned windows; sync-push is charged per task.
    ('hourly-endpoints', 'endpoint.ai-inference', 'fixed_window', 10, '1 hour', 'AI assessments'),
    ('hourly-endpoints', 'endpoint.sync-push', 'fixed_window', 50, '1 hour', 'Task creation (batch-aware: cost = tasks)'),
    ('hourly-endpoints', 'endpoint.create-post', 'fixed_window', 5, '1 hour', 'Post creation'),
    -- Checked global -> ip -> transaction; invoices per e-mail.
    ('payment-flow', 'lotto.transaction', 'sliding_window', 10, '1 minute', 'Per transaction id: replay spam'),
    ('payment-flow', 'lotto.ip', 'sliding_window', 100, '1 minute', 'Per client IP: DoS from one source'),
    ('payment-flow', 'lotto.global', 'sliding_window_counter', 1000, '1 minute', 'All requests: circuit breaker'),
    ('payment-flow', 'lotto.invoices', 'sliding_window', 3, '1 minute', 'New invoices per user e-mail'),
    -- Checked global -> ip -> email; IPs and e-mails hashed.
    ('user-cleanup', 'cleanup.global', 'sliding_window_counter', 1000, '60 seconds', 'All requests'),
    ('user-cleanup', 'cleanup.ip', 'sliding_window', 5, '60 seconds', 'Per hashed IP'),
    ('user-cleanup', 'cleanup.email', 'sliding_window', 3, '3600 seconds', 'Per hashed e-mail');

UPDATE ratelimit.preset_policies SET hash_key = true WHERE name IN ('cleanup.ip', 'cleanup.email');

INSERT INTO ratelimit.preset_tiers (preset, name, multiplier, bypass, description) VALUES
    ('social-activity', 'premium', 2, false, 'Premium users: twice every limit'),
    ('social-activity', 'verified', 1.5, false, 'Verified users: one and a half times every limit'),
    ('social-activity', 'admin', 1, true, 'Administrators: no limit');

-- The presets, with how many policies and tiers each writes.
CREATE FUNCTION ratelimit.presets()
RETURNS TABLE(preset text, policies integer, tiers integer, description text)
LANGUAGE sql STABLE SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT c.preset,
           (SELECT count(*)::integer FROM ratelimit.preset_policies p WHERE p.preset = c.preset),
           (SELECT count(*)::integer FROM ratelimit.preset_tiers t WHERE t.preset = c.preset),
           c.description
    FROM ratelimit.preset_catalog c
    ORDER BY c.preset
$$;

-- Writes a preset's policies and tiers; returns how many rows it inserted or changed. A row the
-- administrator changed is theirs: it is overwritten only with p_replace, and otherwise nothing
-- is written at all, so a preset is never half loaded.
CREATE FUNCTION ratelimit.load_preset(p_preset text, p_replace boolean DEFAULT false)
RETURNS integer
LANGUAGE plpgsql VOLATILE SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    differing text;
    written integer;
    total integer := 0;
BEGIN
    IF p_preset IS NULL THEN
        RAISE EXCEPTION 'p_preset must not be NULL' USING ERRCODE = 'null_value_not_allowed';
    END IF;
    IF p_replace IS NULL THEN
        RAISE EXCEPTION 'p_replace must not be NULL' USING ERRCODE = 'null_value_not_allowed';
    END IF;
    IF NOT EXISTS (SELECT FROM ratelimit.preset_catalog c WHERE c.preset = p_preset COLLATE "C") THEN
        RAISE EXCEPTION 'p_preset: unknown preset "%"', pg_catalog.left(p_preset, 64)
            USING ERRCODE = 'invalid_parameter_value',
                  HINT = 'The presets are the rows of ratelimit.presets().';
    END IF;
    -- No concurrent edit between the comparison and the write.
    LOCK TABLE ratelimit.policies, ratelimit.tiers IN SHARE ROW EXCLUSIVE MODE;

    IF NOT p_replace THEN
        SELECT 'policy "' || p.name || '"' INTO differing
        FROM ratelimit.preset_policies s JOIN ratelimit.policies p ON p.name = s.name
        WHERE s.preset = p_preset COLLATE "C"
          AND (p.algorithm, p."limit", p.period, p.burst, p.engine, p.count_denied, p.shadow,
               p.hash_key, p.log_denials, p.description)
              IS DISTINCT FROM
              (s.algorithm, s."limit", s.period, s.burst, s.engine, s.count_denied, s.shadow,
               s.hash_key, s.log_denials, s.description)
        ORDER BY s.name LIMIT 1;
        IF differing IS NULL THEN
            SELECT 'tier "' || t.name || '"' INTO differing
            FROM ratelimit.preset_tiers s JOIN ratelimit.tiers t ON t.name = s.name
            WHERE s.preset = p_preset COLLATE "C"
              AND (t.multiplier, t.bypass, t.description)
                  IS DISTINCT FROM (s.multiplier, s.bypass, s.description)
            ORDER BY s.name LIMIT 1;
        END IF;
        IF differing IS NOT NULL THEN
            RAISE EXCEPTION 'p_replace: % differs from preset "%"; pass p_replace => true to overwrite it',
                differing, p_preset
                USING ERRCODE = 'invalid_parameter_value';
        END IF;
    END IF;

    -- Rows already as the preset has them are not written again.
    INSERT INTO ratelimit.policies AS p (name, algorithm, "limit", period, burst, engine,
                                         count_denied, shadow, hash_key, log_denials, description)
    SELECT s.name, s.algorithm, s."limit", s.period, s.burst, s.engine, s.count_denied, s.shadow,
           s.hash_key, s.log_denials, s.description
    FROM ratelimit.preset_policies s WHERE s.preset = p_preset COLLATE "C"
    ORDER BY s.name
    ON CONFLICT (name) DO UPDATE SET
        algorithm = excluded.algorithm, "limit" = excluded."limit", period = excluded.period,
        burst = excluded.burst, engine = excluded.engine, count_denied = excluded.count_denied,
        shadow = excluded.shadow, hash_key = excluded.hash_key,
        log_denials = excluded.log_denials, description = excluded.description
    WHERE (p.algorithm, p."limit", p.period, p.burst, p.engine, p.count_denied, p.shadow,
           p.hash_key, p.log_denials, p.description)
          IS DISTINCT FROM
          (excluded.algorithm, excluded."limit", excluded.period, excluded.burst, excluded.engine,
           excluded.count_denied, excluded.shadow, excluded.hash_key, excluded.log_denials,
           excluded.description);
    GET DIAGNOSTICS written = ROW_COUNT;
    total := total + written;

    INSERT INTO ratelimit.tiers AS t (name, multiplier, bypass, description)
    SELECT s.name, s.multiplier, s.bypass, s.description
    FROM ratelimit.preset_tiers s WHERE s.preset = p_preset COLLATE "C"
    ORDER BY s.name
    ON CONFLICT (name) DO UPDATE SET
        multiplier = excluded.multiplier, bypass = excluded.bypass,
        description = excluded.description
    WHERE (t.multiplier, t.bypass, t.description)
          IS DISTINCT FROM (excluded.multiplier, excluded.bypass, excluded.description);
    GET DIAGNOSTICS written = ROW_COUNT;
    RETURN total + written;
END
$$;

-- Presets are for administrators: they write the policy tables, which only administrators own.
REVOKE ALL ON TABLE ratelimit.preset_catalog, ratelimit.preset_policies, ratelimit.preset_tiers
    FROM PUBLIC;
REVOKE EXECUTE ON FUNCTION ratelimit.presets(), ratelimit.load_preset(text, boolean) FROM PUBLIC;

------------------------------------------------------------------------------------------------
-- pg_dump. Durable counters are state a restore must keep (a restore must not hand every key a
-- fresh quota or lift a block), so key_state is dumped with the policy tables; the unlogged
-- table is not (a crash empties it anyway), nor are the drop-in tables (rpc_rate_limits may
-- reference auth.users, whose rows a restore loads in no set order before it). The access
-- list's identity sequence is dumped so that an entry added after a restore gets a new id.
------------------------------------------------------------------------------------------------

SELECT pg_catalog.pg_extension_config_dump('ratelimit.key_state', '');
SELECT pg_catalog.pg_extension_config_dump('ratelimit.access_list_id_seq', '');

------------------------------------------------------------------------------------------------
-- The drop-in surfaces' descriptions name what they are for.
------------------------------------------------------------------------------------------------

COMMENT ON TABLE @extschema@.rpc_rate_limits IS
    'ratelimit: per-RPC counters, one row per (user_id, rpc_name); written only through check_rate_limit';
COMMENT ON FUNCTION @extschema@.check_rate_limit(text, integer, integer) IS
    'ratelimit: per-RPC check for the JWT caller (auth.uid()); true = allowed; anonymous callers are allowed';
COMMENT ON FUNCTION @extschema@.check_rate_limit_for_user(uuid, text, integer, integer) IS
    'ratelimit: per-RPC check for an explicit user id (trusted callers only)';
COMMENT ON TABLE @extschema@.rate_limits IS
    'ratelimit: endpoint counters, one row per (user_id, endpoint, aligned window); written only through increment_rate_limit';
COMMENT ON FUNCTION @extschema@.increment_rate_limit(uuid, text, integer, integer, integer) IS
    'ratelimit: endpoint limit, atomic increment; returns {allowed, current, limit, retryAfter}';
COMMENT ON TABLE @extschema@.rate_limit_buckets IS
    'ratelimit: sliding-window per-second buckets; written only through check_rate_limit(p_key, ...)';
COMMENT ON FUNCTION @extschema@.check_rate_limit(text, integer, integer, integer) IS
    'ratelimit: sliding-window check of p_key; a denied call changes nothing';
COMMENT ON FUNCTION @extschema@.check_rate_limit_tiers(text, text, integer, integer, integer, integer, integer, integer) IS
    'ratelimit: global -> IP -> email tiers in one all-or-nothing call';

------------------------------------------------------------------------------------------------
-- A policy's key, for administrators: reset and block through the policy.
------------------------------------------------------------------------------------------------

-- A policy's counters for one subject, for administrators: reached through the policy only (the
-- native reset and block never touch them). p_key is the subject as callers pass it (hashed
-- here when the policy has hash_key).
CREATE FUNCTION ratelimit.reset_policy_key(p_policy text, p_key text)
RETURNS boolean
LANGUAGE c VOLATILE PARALLEL UNSAFE
AS 'MODULE_PATHNAME', 'ratelimit_reset_policy_key';

CREATE FUNCTION ratelimit.block_policy_key(p_policy text, p_key text, p_duration interval)
RETURNS timestamptz
LANGUAGE c VOLATILE PARALLEL UNSAFE
AS 'MODULE_PATHNAME', 'ratelimit_block_policy_key';

REVOKE EXECUTE ON FUNCTION ratelimit.reset_policy_key(text, text),
    ratelimit.block_policy_key(text, text, interval) FROM PUBLIC;

DO $$
BEGIN
    IF EXISTS (SELECT 1 FROM pg_catalog.pg_roles WHERE rolname = 'service_role') THEN
        GRANT EXECUTE ON FUNCTION ratelimit.reset_policy_key(text, text),
            ratelimit.block_policy_key(text, text, interval) TO service_role;
    END IF;
END
$$;

------------------------------------------------------------------------------------------------
-- Batch calls: one round trip for many keys, and allow, consume's answer as a boolean. Their
-- grants are set by the privileges block below.
------------------------------------------------------------------------------------------------

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

-- check for many subjects of one policy: element i is what check(p_policy, p_subjects[i], ...)
-- would give (counters, shadow, count_denied, lists and the denial log as for check), decided
-- in the order given. Every subject is checked before any is decided; 1 to 10,000 subjects.
CREATE FUNCTION ratelimit.check_many(
    p_policy text,
    p_subjects text[],
    p_cost integer DEFAULT 1,
    p_tier text DEFAULT NULL,
    p_ip inet DEFAULT NULL,
    p_user uuid DEFAULT NULL)
RETURNS ratelimit.policy_decision[]
LANGUAGE c VOLATILE PARALLEL UNSAFE SECURITY INVOKER
AS 'MODULE_PATHNAME', 'ratelimit_check_many';

------------------------------------------------------------------------------------------------
-- The memory engine never forgets a key that still counts: memory_stats gains the refusals,
-- full partitions and sliding_window log blocks (new columns: the function and its view are
-- made again), and memory_stats_by_database reports each database's share of the store.
------------------------------------------------------------------------------------------------

DROP VIEW ratelimit.memory_stats;
DROP FUNCTION ratelimit.memory_stats();

CREATE FUNCTION ratelimit.memory_stats(
    OUT entries bigint,
    OUT capacity bigint,
    OUT shared_bytes bigint,
    OUT evictions bigint,
    OUT expired bigint,
    OUT allowed bigint,
    OUT denied bigint,
    OUT refusals bigint,
    OUT full_partitions bigint,
    OUT log_blocks bigint,
    OUT log_blocks_used bigint)
RETURNS record
LANGUAGE c VOLATILE PARALLEL SAFE
AS 'MODULE_PATHNAME', 'ratelimit_memory_store_stats';

CREATE VIEW ratelimit.memory_stats AS
    SELECT * FROM ratelimit.memory_stats();

CREATE FUNCTION ratelimit.memory_stats_by_database(
    OUT database name,
    OUT database_oid oid,
    OUT entries bigint,
    OUT share_limit bigint,
    OUT refusals bigint,
    OUT evictions bigint)
RETURNS SETOF record
LANGUAGE c VOLATILE PARALLEL SAFE ROWS 4
AS 'MODULE_PATHNAME', 'ratelimit_memory_stats_by_database';

------------------------------------------------------------------------------------------------
-- Metrics: policy_stats gains near_limit, denials_not_logged and counted (new columns: the
-- function and its view are made again), and metrics() writes the counters in the Prometheus
-- text format.
------------------------------------------------------------------------------------------------

DROP VIEW ratelimit.policy_stats;
DROP FUNCTION ratelimit.policy_stats();

CREATE FUNCTION ratelimit.policy_stats()
RETURNS TABLE(policy text, allowed bigint, denied bigint, shadow_denied bigint, since timestamptz,
              near_limit bigint, denials_not_logged bigint, counted boolean)
LANGUAGE c VOLATILE PARALLEL SAFE
AS 'MODULE_PATHNAME', 'ratelimit_policy_stats';

CREATE VIEW ratelimit.policy_stats AS
    SELECT * FROM ratelimit.policy_stats();

CREATE FUNCTION ratelimit.metrics()
RETURNS text
LANGUAGE c VOLATILE PARALLEL SAFE
AS 'MODULE_PATHNAME', 'ratelimit_metrics';

------------------------------------------------------------------------------------------------
-- The IETF RateLimit headers in full: a policy's quota unit (qu), and the secret of the
-- partition keys (pk), random per database.
------------------------------------------------------------------------------------------------

ALTER TABLE ratelimit.policies ADD COLUMN quota_unit text;

-- Calendar periods: a policy's time zone, checked by validate_limit, which takes it too.
ALTER TABLE ratelimit.policies ADD COLUMN time_zone text;
-- A random 0 to reset_jitter added to the reset check_http's headers report.
ALTER TABLE ratelimit.policies ADD COLUMN reset_jitter interval;
-- Escalating penalties and delay instead of deny.
ALTER TABLE ratelimit.policies ADD COLUMN penalty_blocks interval[];
ALTER TABLE ratelimit.policies ADD COLUMN penalty_decay interval;
ALTER TABLE ratelimit.policies ADD COLUMN max_delay interval;
ALTER TYPE ratelimit.policy_decision ADD ATTRIBUTE penalty_level integer;

-- Raises the error a policy's penalty_blocks, penalty_decay or max_delay would meet on a call
-- (22023 naming the column), or returns nothing. Policies are checked with it when written.
CREATE FUNCTION ratelimit.validate_policy_options(
    p_algorithm text,
    p_penalty_blocks interval[],
    p_penalty_decay interval,
    p_max_delay interval)
RETURNS void
LANGUAGE c STABLE PARALLEL SAFE
AS 'MODULE_PATHNAME', 'ratelimit_validate_policy_options';


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

-- The function with one argument more replaces the old one; a grant an administrator gave on the
-- old one is given on the new one (the privileges block below sets the rest).
DO $$
DECLARE
    grantee text;
BEGIN
    FOR grantee IN
        SELECT CASE a.grantee WHEN 0 THEN 'PUBLIC' ELSE pg_catalog.quote_ident(r.rolname) END
        FROM pg_catalog.pg_proc p, pg_catalog.aclexplode(p.proacl) a
        LEFT JOIN pg_catalog.pg_roles r ON r.oid = a.grantee
        WHERE p.oid = 'ratelimit.validate_limit(integer, interval, text, text, integer)'::pg_catalog.regprocedure
          AND a.privilege_type = 'EXECUTE' AND a.grantee <> p.proowner
    LOOP
        EXECUTE pg_catalog.format('GRANT EXECUTE ON FUNCTION ratelimit.validate_limit(integer, interval, text, text, integer, text) TO %s', grantee);
    END LOOP;
END
$$;

DROP FUNCTION ratelimit.validate_limit(integer, interval, text, text, integer);

CREATE OR REPLACE FUNCTION ratelimit.policies_validate()
RETURNS trigger
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    PERFORM ratelimit.validate_limit(NEW."limit", NEW.period, NEW.algorithm, NEW.engine,
                                     NEW.burst, NEW.time_zone);
    PERFORM ratelimit.validate_policy_options(NEW.algorithm, NEW.penalty_blocks,
                                              NEW.penalty_decay, NEW.max_delay);
    IF NEW.reset_jitter IS NOT NULL
       AND (NEW.reset_jitter < interval '0' OR NEW.reset_jitter > interval '1 hour'
            OR pg_catalog.date_part('month', NEW.reset_jitter) <> 0
            OR pg_catalog.date_part('year', NEW.reset_jitter) <> 0) THEN
        RAISE EXCEPTION 'reset_jitter must be between 0 and 1 hour (got "%")', NEW.reset_jitter
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    -- An sf-token, as the header carries it.
    IF NEW.quota_unit IS NOT NULL
       AND NEW.quota_unit !~ '^[A-Za-z*][A-Za-z0-9!#$%&''*+.^_`|~:/-]{0,62}$' THEN
        RAISE EXCEPTION 'quota_unit must be requests, content-bytes, concurrent-requests or another token (a letter or *, then letters, digits or !#$&''*+-.^_`|~:/, at most 63 characters) (got "%")',
            left(NEW.quota_unit, 64)
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    -- A concurrency policy is decided by leases (acquire_policy): its limit is the units in
    -- flight at once, its period the longest a lease is held. Leases live in shared memory and
    -- nothing refills, so its engine is memory and what only a rate means is refused.
    IF NEW.quota_unit = 'concurrent-requests' THEN
        IF NEW.engine <> 'memory' THEN
            RAISE EXCEPTION 'a concurrency policy (quota_unit concurrent-requests) must have engine memory, where its leases live (got "%")',
                left(NEW.engine, 64)
                USING ERRCODE = 'invalid_parameter_value';
        END IF;
        IF NEW.algorithm <> 'fixed_window' OR NEW.burst IS NOT NULL
           OR NEW.time_zone IS NOT NULL OR NEW.count_denied OR NEW.shadow
           OR NEW.penalty_blocks IS NOT NULL OR NEW.max_delay IS NOT NULL
           OR pg_catalog.date_part('month', NEW.period) <> 0
           OR pg_catalog.date_part('year', NEW.period) <> 0 THEN
            RAISE EXCEPTION 'a concurrency policy (quota_unit concurrent-requests) takes algorithm fixed_window, no burst, time_zone, count_denied, shadow, penalty_blocks or max_delay, and a period (its longest lease) without months'
                USING ERRCODE = 'invalid_parameter_value';
        END IF;
        IF EXISTS (SELECT 1 FROM ratelimit.request_routes r WHERE r.policy = NEW.name) THEN
            RAISE EXCEPTION 'a concurrency policy (quota_unit concurrent-requests) is decided by leases, not by the routes of ratelimit.request_routes that name it'
                USING ERRCODE = 'invalid_parameter_value';
        END IF;
    END IF;
    RETURN NEW;
EXCEPTION
    WHEN invalid_parameter_value OR null_value_not_allowed THEN
        RAISE EXCEPTION 'policy "%": %', NEW.name, SQLERRM USING ERRCODE = SQLSTATE;
END
$$;

CREATE TABLE ratelimit.partition_key_secret (
    only_row boolean PRIMARY KEY DEFAULT true CONSTRAINT partition_key_secret_one_row CHECK (only_row),
    secret bytea NOT NULL
        CONSTRAINT partition_key_secret_length CHECK (length(secret) >= 16)
);

INSERT INTO ratelimit.partition_key_secret (secret)
SELECT decode(replace(gen_random_uuid()::text || gen_random_uuid()::text, '-', ''), 'hex');

CREATE TRIGGER partition_key_secret_changed AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE
    ON ratelimit.partition_key_secret FOR EACH STATEMENT
    EXECUTE FUNCTION ratelimit.policy_tables_changed();

------------------------------------------------------------------------------------------------
-- PostgREST: ratelimit.pre_request(), the db-pre-request hook, and the routes it reads.
------------------------------------------------------------------------------------------------

-- Which requests pre_request() checks, against which policy, counted under which key. Every
-- route that matches a request applies (all-or-nothing, in id order); a policy named by several
-- matching routes is checked once, under the first. Only administrators write this table.
CREATE TABLE ratelimit.request_routes (
    id bigint GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,
    -- HTTP methods in upper case, or '*' for any.
    methods text[] NOT NULL DEFAULT '{*}',
    -- The request path as PostgREST gives it ('/items', '/rpc/login'); '*' matches any run of
    -- characters, '/' included: '/items*', '/rpc/*', '*'.
    path_pattern text NOT NULL,
    -- The role PostgREST switched to (anon, authenticated, ...); NULL for any.
    roles name[],
    policy text NOT NULL REFERENCES ratelimit.policies (name) ON UPDATE CASCADE ON DELETE CASCADE,
    -- user (the JWT's sub), ip (the client address), user_or_ip, or global.
    key text NOT NULL DEFAULT 'user_or_ip',
    description text
);

COMMENT ON TABLE ratelimit.request_routes IS
    'ratelimit: the requests ratelimit.pre_request() limits, by method, path and role';

-- Checked when a route is written, so that a request never meets a route it cannot decide:
-- PostgREST runs GET and HEAD in read-only transactions (and may send them to a read replica),
-- where only the memory engine can count.
CREATE FUNCTION ratelimit.request_routes_validate()
RETURNS trigger
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    engine text;
BEGIN
    IF pg_catalog.cardinality(NEW.methods) = 0 OR pg_catalog.array_position(NEW.methods, NULL) IS NOT NULL
       OR EXISTS (SELECT 1 FROM pg_catalog.unnest(NEW.methods) AS m(method)
                  WHERE m.method NOT IN ('*', 'GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS')) THEN
        RAISE EXCEPTION 'methods must hold GET, HEAD, POST, PUT, PATCH, DELETE, OPTIONS or *, in upper case (got %)', NEW.methods
            USING ERRCODE = '22023';
    END IF;
    IF NEW.path_pattern !~ '^[/*]' OR pg_catalog.octet_length(NEW.path_pattern) > 1000 THEN
        RAISE EXCEPTION 'path_pattern must start with / or * and be at most 1000 bytes (got "%")',
            pg_catalog.left(NEW.path_pattern, 64)
            USING ERRCODE = '22023';
    END IF;
    IF NEW.roles IS NOT NULL AND pg_catalog.array_position(NEW.roles, NULL) IS NOT NULL THEN
        RAISE EXCEPTION 'roles must not hold NULL (NULL instead of the array means any role)'
            USING ERRCODE = '22004';
    END IF;
    IF NEW.key NOT IN ('user', 'ip', 'user_or_ip', 'global') THEN
        RAISE EXCEPTION 'key must be user, ip, user_or_ip or global (got "%")', pg_catalog.left(NEW.key, 64)
            USING ERRCODE = '22023';
    END IF;
    SELECT p.engine INTO engine FROM ratelimit.policies p WHERE p.name = NEW.policy;
    -- A concurrency policy is decided by leases, which a request's check cannot take.
    IF EXISTS (SELECT 1 FROM ratelimit.policies p
               WHERE p.name = NEW.policy AND p.quota_unit = 'concurrent-requests') THEN
        RAISE EXCEPTION 'policy: "%" is a concurrency policy (quota_unit concurrent-requests), decided by leases (ratelimit.acquire_policy), not by a route', NEW.policy
            USING ERRCODE = '22023';
    END IF;
    IF engine IS DISTINCT FROM 'memory' AND NEW.methods && ARRAY['*', 'GET', 'HEAD'] THEN
        RAISE EXCEPTION 'policy: a route for GET or HEAD needs a memory-engine policy, and "%" uses the % engine', NEW.policy, engine
            USING ERRCODE = '22023',
                  HINT = 'PostgREST runs GET and HEAD in read-only transactions, also on read replicas, where only the memory engine counts. Give the route other methods, or the policy engine = ''memory''.';
    END IF;
    RETURN NEW;
END
$$;

CREATE TRIGGER request_routes_validate BEFORE INSERT OR UPDATE ON ratelimit.request_routes
    FOR EACH ROW EXECUTE FUNCTION ratelimit.request_routes_validate();

-- The same rule from the other side: a policy that routes for GET or HEAD use stays on memory.
CREATE FUNCTION ratelimit.policies_routes_check()
RETURNS trigger
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF NEW.engine IS DISTINCT FROM 'memory' AND EXISTS (
           SELECT 1 FROM ratelimit.request_routes r
           WHERE r.policy = NEW.name AND r.methods && ARRAY['*', 'GET', 'HEAD']) THEN
        RAISE EXCEPTION 'engine: policy "%" is used by a route for GET or HEAD, which needs the memory engine', NEW.name
            USING ERRCODE = '22023',
                  HINT = 'Change the routes of ratelimit.request_routes that name it first.';
    END IF;
    RETURN NEW;
END
$$;

CREATE TRIGGER policies_routes_check AFTER UPDATE OF engine ON ratelimit.policies
    FOR EACH ROW EXECUTE FUNCTION ratelimit.policies_routes_check();

-- PostgREST's db-pre-request hook: checks the request against the policies of its matching
-- routes, sets response.headers with the RateLimit fields, and on denial raises PostgREST's
-- custom error (SQLSTATE PGRST) so that the client gets a 429. Outside a PostgREST request
-- (request.method unset) it does nothing.
CREATE FUNCTION ratelimit.pre_request()
RETURNS void
LANGUAGE c VOLATILE PARALLEL UNSAFE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS 'MODULE_PATHNAME', 'ratelimit_pre_request';

SELECT pg_catalog.pg_extension_config_dump('ratelimit.request_routes', '');
SELECT pg_catalog.pg_extension_config_dump('ratelimit.request_routes_id_seq', '');

ALTER TABLE ratelimit.request_routes ENABLE ROW LEVEL SECURITY;

-- PostgreSQL's logical replication applies rows without firing statement triggers, so a
-- subscriber (a shard of ratelimit_router, docs/scaling-out.md) would keep deciding with the
-- copy it cached. These row triggers fire only where changes are applied by replication
-- (session_replication_role = replica); the statement triggers above serve every other write.
CREATE TRIGGER policies_replicated AFTER INSERT OR UPDATE OR DELETE
    ON ratelimit.policies FOR EACH ROW EXECUTE FUNCTION ratelimit.policy_tables_changed();
CREATE TRIGGER tiers_replicated AFTER INSERT OR UPDATE OR DELETE
    ON ratelimit.tiers FOR EACH ROW EXECUTE FUNCTION ratelimit.policy_tables_changed();
CREATE TRIGGER key_overrides_replicated AFTER INSERT OR UPDATE OR DELETE
    ON ratelimit.key_overrides FOR EACH ROW EXECUTE FUNCTION ratelimit.policy_tables_changed();
CREATE TRIGGER access_list_replicated AFTER INSERT OR UPDATE OR DELETE
    ON ratelimit.access_list FOR EACH ROW EXECUTE FUNCTION ratelimit.policy_tables_changed();
CREATE TRIGGER policies_replicated_truncate AFTER TRUNCATE
    ON ratelimit.policies FOR EACH STATEMENT EXECUTE FUNCTION ratelimit.policy_tables_changed();
CREATE TRIGGER tiers_replicated_truncate AFTER TRUNCATE
    ON ratelimit.tiers FOR EACH STATEMENT EXECUTE FUNCTION ratelimit.policy_tables_changed();
CREATE TRIGGER key_overrides_replicated_truncate AFTER TRUNCATE
    ON ratelimit.key_overrides FOR EACH STATEMENT EXECUTE FUNCTION ratelimit.policy_tables_changed();
CREATE TRIGGER access_list_replicated_truncate AFTER TRUNCATE
    ON ratelimit.access_list FOR EACH STATEMENT EXECUTE FUNCTION ratelimit.policy_tables_changed();
ALTER TABLE ratelimit.policies ENABLE REPLICA TRIGGER policies_replicated;
ALTER TABLE ratelimit.tiers ENABLE REPLICA TRIGGER tiers_replicated;
ALTER TABLE ratelimit.key_overrides ENABLE REPLICA TRIGGER key_overrides_replicated;
ALTER TABLE ratelimit.access_list ENABLE REPLICA TRIGGER access_list_replicated;
ALTER TABLE ratelimit.policies ENABLE REPLICA TRIGGER policies_replicated_truncate;
ALTER TABLE ratelimit.tiers ENABLE REPLICA TRIGGER tiers_replicated_truncate;
ALTER TABLE ratelimit.key_overrides ENABLE REPLICA TRIGGER key_overrides_replicated_truncate;
ALTER TABLE ratelimit.access_list ENABLE REPLICA TRIGGER access_list_replicated_truncate;

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

-- What acquire_policy answered for p_policy, as a policy decision for http_headers and
-- http_body: remaining is the limit less the units in flight, a denial waits for the first
-- lease to reach its maximum hold, and the reasons 'leased' and 'concurrency_limited' make the
-- headers count the limit in concurrent requests.
CREATE FUNCTION ratelimit.lease_decision(p_policy text, p_lease ratelimit.lease)
RETURNS ratelimit.policy_decision
LANGUAGE c STABLE PARALLEL UNSAFE SECURITY INVOKER
AS 'MODULE_PATHNAME', 'ratelimit_lease_decision';

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

------------------------------------------------------------------------------------------------
-- Calendar periods: consume, peek and refund take p_time_zone, and consume p_max_wait (delay
-- instead of deny). Nothing in the extension calls them: the functions with more arguments
-- replace them, and a grant an administrator gave on an old one is given on its replacement
-- (the privileges block below sets the rest).
------------------------------------------------------------------------------------------------

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

DO $$
DECLARE
    name text;
    added text;
    grantee text;
BEGIN
    FOREACH name IN ARRAY ARRAY['consume', 'peek', 'refund'] LOOP
        -- The arguments the replacement takes after p_burst.
        added := CASE name WHEN 'consume' THEN 'text, interval' ELSE 'text' END;
        FOR grantee IN
            SELECT CASE a.grantee WHEN 0 THEN 'PUBLIC' ELSE pg_catalog.quote_ident(r.rolname) END
            FROM pg_catalog.pg_proc p, pg_catalog.aclexplode(p.proacl) a
            LEFT JOIN pg_catalog.pg_roles r ON r.oid = a.grantee
            WHERE p.oid = pg_catalog.to_regprocedure(pg_catalog.format(
                      'ratelimit.%s(text, integer, interval, integer, text, text, integer)', name))
              AND a.privilege_type = 'EXECUTE' AND a.grantee <> p.proowner
        LOOP
            EXECUTE pg_catalog.format('GRANT EXECUTE ON FUNCTION ratelimit.%s(text, integer, interval, integer, text, text, integer, %s) TO %s',
                                      name, added, grantee);
        END LOOP;
        EXECUTE pg_catalog.format('DROP FUNCTION ratelimit.%s(text, integer, interval, integer, text, text, integer)', name);
    END LOOP;
END
$$;

------------------------------------------------------------------------------------------------
-- Privileges by construction. Default privileges (ALTER DEFAULT PRIVILEGES, database-wide or
-- IN SCHEMA) hand new tables, views, sequences, functions, types and schemas to whichever roles
-- they name, TRUNCATE (which ignores row level security) and EXECUTE on reset and block
-- included. So every member of the extension loses every grant but its owner's, PUBLIC's
-- included, and then gets exactly the grants listed below: the list of docs/operations.md,
-- "Who may call what". Keep this block last.
------------------------------------------------------------------------------------------------

DO $$
DECLARE
    -- At an update, grants to other roles may be an administrator's own: they stay.
    reset_every_role constant boolean := false;
    -- The roles the list speaks for; an update takes back from them whatever it does not give.
    api_roles constant text[] := ARRAY['anon', 'authenticated'];
    member record;
    grantees text;
    wanted record;
BEGIN
    FOR member IN
        WITH members AS (
            SELECT d.classid, d.objid
            FROM pg_catalog.pg_depend d
            JOIN pg_catalog.pg_extension e ON e.oid = d.refobjid
            WHERE d.refclassid = 'pg_catalog.pg_extension'::pg_catalog.regclass
              AND d.deptype = 'e' AND e.extname = 'ratelimit')
        SELECT CASE c.relkind WHEN 'S' THEN 'SEQUENCE' ELSE 'TABLE' END AS kind,
               pg_catalog.format('%I.%I', n.nspname, c.relname) AS name, c.relowner AS owner,
               ARRAY(SELECT a.grantee FROM pg_catalog.aclexplode(c.relacl) a
                     UNION
                     SELECT a.grantee FROM pg_catalog.pg_attribute att,
                                           pg_catalog.aclexplode(att.attacl) a
                     WHERE att.attrelid = c.oid) AS grantees
        FROM members m
        JOIN pg_catalog.pg_class c ON m.classid = 'pg_catalog.pg_class'::pg_catalog.regclass
                                  AND c.oid = m.objid
        JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
        WHERE c.relkind IN ('r', 'p', 'v', 'm', 'f', 'S')
        UNION ALL
        SELECT 'ROUTINE',
               pg_catalog.format('%I.%I(%s)', n.nspname, p.proname,
                                 pg_catalog.pg_get_function_identity_arguments(p.oid)),
               p.proowner, ARRAY(SELECT a.grantee FROM pg_catalog.aclexplode(p.proacl) a)
        FROM members m
        JOIN pg_catalog.pg_proc p ON m.classid = 'pg_catalog.pg_proc'::pg_catalog.regclass
                                 AND p.oid = m.objid
        JOIN pg_catalog.pg_namespace n ON n.oid = p.pronamespace
        UNION ALL
        SELECT 'TYPE', pg_catalog.format('%I.%I', n.nspname, t.typname), t.typowner,
               ARRAY(SELECT a.grantee FROM pg_catalog.aclexplode(t.typacl) a)
        FROM members m
        JOIN pg_catalog.pg_type t ON m.classid = 'pg_catalog.pg_type'::pg_catalog.regclass
                                 AND t.oid = m.objid
        JOIN pg_catalog.pg_namespace n ON n.oid = t.typnamespace
        -- From 17 the row types of the tables and all array types are members too. A row type
        -- goes with its table and an array type's privileges are its element type's (GRANT
        -- refuses it): the types CREATE TYPE made are listed, as on 15.
        WHERE t.typsubscript <> 'pg_catalog.array_subscript_handler'::pg_catalog.regproc
          AND NOT EXISTS (SELECT FROM pg_catalog.pg_class c WHERE c.oid = t.typrelid AND c.relkind <> 'c')
        UNION ALL
        SELECT 'SCHEMA', pg_catalog.quote_ident(n.nspname), n.nspowner,
               ARRAY(SELECT a.grantee FROM pg_catalog.aclexplode(n.nspacl) a)
        FROM members m
        JOIN pg_catalog.pg_namespace n ON m.classid = 'pg_catalog.pg_namespace'::pg_catalog.regclass
                                      AND n.oid = m.objid
    LOOP
        SELECT pg_catalog.string_agg(pg_catalog.quote_ident(r.rolname), ', ' ORDER BY r.rolname)
        INTO grantees
        FROM pg_catalog.pg_roles r
        WHERE r.oid = ANY (member.grantees) AND r.oid <> member.owner
          AND (reset_every_role OR r.rolname = ANY (api_roles));
        EXECUTE pg_catalog.format('REVOKE ALL ON %s %s FROM %s CASCADE', member.kind, member.name,
                                  pg_catalog.concat_ws(', ', 'PUBLIC', grantees));
        -- Nobody but the owner creates objects in the extension's schema.
        IF member.kind = 'SCHEMA' AND NOT reset_every_role THEN
            SELECT pg_catalog.string_agg(pg_catalog.quote_ident(r.rolname), ', ' ORDER BY r.rolname)
            INTO grantees
            FROM pg_catalog.pg_roles r
            WHERE r.oid = ANY (member.grantees) AND r.oid <> member.owner;
            IF grantees IS NOT NULL THEN
                EXECUTE pg_catalog.format('REVOKE CREATE ON SCHEMA %s FROM %s CASCADE',
                                          member.name, grantees);
            END IF;
        END IF;
    END LOOP;

    FOR wanted IN
        SELECT g.privilege, g.kind, g.name, g.grantee
        FROM (VALUES
            -- Everyone: the game backend's check counts only the caller; the rest compute from
            -- their arguments only. A type reveals nothing.
            ('EXECUTE', 'FUNCTION', '@extschema@.check_rate_limit(text, integer, integer)'::pg_catalog.regprocedure::text, 'PUBLIC'),
            ('EXECUTE', 'FUNCTION', 'ratelimit.http_headers(ratelimit.policy_decision, text)'::pg_catalog.regprocedure::text, 'PUBLIC'),
            ('EXECUTE', 'FUNCTION', 'ratelimit.http_body(ratelimit.policy_decision, text)'::pg_catalog.regprocedure::text, 'PUBLIC'),
            ('EXECUTE', 'FUNCTION', 'ratelimit.validate_limit(integer, interval, text, text, integer, text)'::pg_catalog.regprocedure::text, 'PUBLIC'),
            ('EXECUTE', 'FUNCTION', 'ratelimit.validate_policy_options(text, interval[], interval, interval)'::pg_catalog.regprocedure::text, 'PUBLIC'),
            ('EXECUTE', 'FUNCTION', 'ratelimit.hash_subject(text)'::pg_catalog.regprocedure::text, 'PUBLIC'),
            ('EXECUTE', 'FUNCTION', 'ratelimit.describe_period(interval)'::pg_catalog.regprocedure::text, 'PUBLIC'),
            ('EXECUTE', 'FUNCTION', 'ratelimit.clock_now()'::pg_catalog.regprocedure::text, 'PUBLIC'),
            ('EXECUTE', 'FUNCTION', 'ratelimit.cleanup_jobs()'::pg_catalog.regprocedure::text, 'PUBLIC'),
            -- PostgREST calls its db-pre-request hook as the request's role, whatever it is;
            -- its API roles need the schema to reach it (and reach nothing else there that
            -- PUBLIC does not).
            ('EXECUTE', 'FUNCTION', 'ratelimit.pre_request()'::pg_catalog.regprocedure::text, 'PUBLIC'),
            ('USAGE', 'SCHEMA', 'ratelimit', 'anon'),
            ('USAGE', 'SCHEMA', 'ratelimit', 'authenticated'),
            ('USAGE', 'TYPE', 'ratelimit.decision'::pg_catalog.regtype::text, 'PUBLIC'),
            ('USAGE', 'TYPE', 'ratelimit.policy_decision'::pg_catalog.regtype::text, 'PUBLIC'),
            -- An authenticated user spends only its own endpoint quota (checked against the JWT).
            ('EXECUTE', 'FUNCTION', '@extschema@.increment_rate_limit(uuid, text, integer, integer, integer)'::pg_catalog.regprocedure::text, 'authenticated'),
            -- service_role (Supabase's trusted server code): deciding, the counters, and the
            -- drop-ins' calls that name a user or a key; never the policy tables.
            ('USAGE', 'SCHEMA', 'ratelimit', 'service_role'),
            ('EXECUTE', 'FUNCTION', 'ratelimit.check(text, text, integer, text, inet, uuid)'::pg_catalog.regprocedure::text, 'service_role'),
            ('EXECUTE', 'FUNCTION', 'ratelimit.check_many(text, text[], integer, text, inet, uuid)'::pg_catalog.regprocedure::text, 'service_role'),
            ('EXECUTE', 'FUNCTION', 'ratelimit.check_all(text[], text[], integer, text, inet, uuid)'::pg_catalog.regprocedure::text, 'service_role'),
            ('EXECUTE', 'FUNCTION', 'ratelimit.check_http(text[], text[], integer, text, inet, uuid, text, text)'::pg_catalog.regprocedure::text, 'service_role'),
            ('EXECUTE', 'FUNCTION', 'ratelimit.consume(text, integer, interval, integer, text, text, integer, text, interval)'::pg_catalog.regprocedure::text, 'service_role'),
            ('EXECUTE', 'FUNCTION', 'ratelimit.peek(text, integer, interval, integer, text, text, integer, text)'::pg_catalog.regprocedure::text, 'service_role'),
            ('EXECUTE', 'FUNCTION', 'ratelimit.refund(text, integer, interval, integer, text, text, integer, text)'::pg_catalog.regprocedure::text, 'service_role'),
            ('EXECUTE', 'FUNCTION', 'ratelimit.allow(text, integer, interval, integer, text, text, integer, text)'::pg_catalog.regprocedure::text, 'service_role'),
            ('EXECUTE', 'FUNCTION', 'ratelimit.consume_many(text[], integer, interval, integer, text, text, integer, text)'::pg_catalog.regprocedure::text, 'service_role'),
            ('EXECUTE', 'FUNCTION', 'ratelimit.peek_many(text[], integer, interval, integer, text, text, integer, text)'::pg_catalog.regprocedure::text, 'service_role'),
            ('EXECUTE', 'FUNCTION', 'ratelimit.acquire(text, integer, integer, text, interval)'::pg_catalog.regprocedure::text, 'service_role'),
            ('EXECUTE', 'FUNCTION', 'ratelimit.release(bigint)'::pg_catalog.regprocedure::text, 'service_role'),
            ('EXECUTE', 'FUNCTION', 'ratelimit.in_flight(text)'::pg_catalog.regprocedure::text, 'service_role'),
            ('EXECUTE', 'FUNCTION', 'ratelimit.acquire_policy(text, text, integer, text, text, inet, uuid)'::pg_catalog.regprocedure::text, 'service_role'),
            ('EXECUTE', 'FUNCTION', 'ratelimit.lease_decision(text, ratelimit.lease)'::pg_catalog.regprocedure::text, 'service_role'),
            ('EXECUTE', 'FUNCTION', 'ratelimit.reserve(text, integer, interval, integer, text, text, integer, interval)'::pg_catalog.regprocedure::text, 'service_role'),
            ('EXECUTE', 'FUNCTION', 'ratelimit.settle(bigint, integer)'::pg_catalog.regprocedure::text, 'service_role'),
            ('EXECUTE', 'FUNCTION', 'ratelimit.cancel(bigint)'::pg_catalog.regprocedure::text, 'service_role'),
            ('EXECUTE', 'FUNCTION', 'ratelimit.reserve_policy(text, text, integer, interval, text, inet, uuid)'::pg_catalog.regprocedure::text, 'service_role'),
            ('EXECUTE', 'FUNCTION', 'ratelimit.reset(text, text)'::pg_catalog.regprocedure::text, 'service_role'),
            ('EXECUTE', 'FUNCTION', 'ratelimit.block(text, interval, text)'::pg_catalog.regprocedure::text, 'service_role'),
            ('EXECUTE', 'FUNCTION', 'ratelimit.consume_all(text[], integer[], interval[], text[], text[], integer[], boolean[], integer)'::pg_catalog.regprocedure::text, 'service_role'),
            ('EXECUTE', 'FUNCTION', 'ratelimit.reset_policy_key(text, text)'::pg_catalog.regprocedure::text, 'service_role'),
            ('EXECUTE', 'FUNCTION', 'ratelimit.block_policy_key(text, text, interval)'::pg_catalog.regprocedure::text, 'service_role'),
            ('EXECUTE', 'FUNCTION', 'ratelimit.policy_stats()'::pg_catalog.regprocedure::text, 'service_role'),
            ('SELECT', 'TABLE', 'ratelimit.policy_stats'::pg_catalog.regclass::text, 'service_role'),
            ('EXECUTE', 'FUNCTION', 'ratelimit.top_offenders(integer)'::pg_catalog.regprocedure::text, 'service_role'),
            ('EXECUTE', 'FUNCTION', 'ratelimit.metrics()'::pg_catalog.regprocedure::text, 'service_role'),
            ('EXECUTE', 'FUNCTION', 'ratelimit.memory_stats()'::pg_catalog.regprocedure::text, 'service_role'),
            ('SELECT', 'TABLE', 'ratelimit.memory_stats'::pg_catalog.regclass::text, 'service_role'),
            ('EXECUTE', 'FUNCTION', 'ratelimit.memory_stats_by_database()'::pg_catalog.regprocedure::text, 'service_role'),
            ('EXECUTE', 'FUNCTION', '@extschema@.check_rate_limit_for_user(uuid, text, integer, integer)'::pg_catalog.regprocedure::text, 'service_role'),
            ('EXECUTE', 'FUNCTION', '@extschema@.cleanup_rpc_rate_limits(interval)'::pg_catalog.regprocedure::text, 'service_role'),
            ('EXECUTE', 'FUNCTION', '@extschema@.increment_rate_limit(uuid, text, integer, integer, integer)'::pg_catalog.regprocedure::text, 'service_role'),
            ('EXECUTE', 'FUNCTION', '@extschema@.check_rate_limit(text, integer, integer, integer)'::pg_catalog.regprocedure::text, 'service_role'),
            ('EXECUTE', 'FUNCTION', '@extschema@.check_rate_limit_tiers(text, text, integer, integer, integer, integer, integer, integer)'::pg_catalog.regprocedure::text, 'service_role'),
            ('EXECUTE', 'FUNCTION', '@extschema@.cleanup_expired_rate_limits()'::pg_catalog.regprocedure::text, 'service_role'),
            ('EXECUTE', 'FUNCTION', '@extschema@.cleanup_old_rate_limit_buckets()'::pg_catalog.regprocedure::text, 'service_role')
        ) AS g(privilege, kind, name, grantee)
        WHERE g.grantee = 'PUBLIC'
           OR EXISTS (SELECT 1 FROM pg_catalog.pg_roles r WHERE r.rolname = g.grantee)
    LOOP
        EXECUTE pg_catalog.format('GRANT %s ON %s %s TO %s', wanted.privilege, wanted.kind, wanted.name,
                                  CASE wanted.grantee WHEN 'PUBLIC' THEN 'PUBLIC'
                                  ELSE pg_catalog.quote_ident(wanted.grantee) END);
    END LOOP;
END
$$;
