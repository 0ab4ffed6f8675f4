-- Policies: the policy tables, their validation and cache triggers, and check, check_all,
-- check_http and the HTTP helpers.

-- Policies: a name for a limit, read on every call, so an edited row decides the next call in
-- every session. Only administrators (the owner, superusers) write these tables.
------------------------------------------------------------------------------------------------

CREATE TABLE ratelimit.policies (
    name text COLLATE "C" PRIMARY KEY
        CONSTRAINT policies_name_check CHECK (name ~ '^[A-Za-z0-9_.:-]{1,63}$'),
    algorithm text NOT NULL DEFAULT 'fixed_window',
    "limit" integer NOT NULL,
    period interval NOT NULL,
    burst integer,
    engine text NOT NULL DEFAULT 'table',
    -- A denied call counts as an attempt: the key stays denied for a full period after it.
    count_denied boolean NOT NULL DEFAULT false,
    -- Dry run: the policy is charged when it allows, and when it would deny the call goes on
    -- and is counted as shadow_denied.
    shadow boolean NOT NULL DEFAULT false,
    -- Keys are stored as ratelimit.hash_subject(key), so no IP or e-mail is kept in clear.
    hash_key boolean NOT NULL DEFAULT false,
    -- Denials are written to ratelimit.denial_log (sampled, bounded).
    log_denials boolean NOT NULL DEFAULT false,
    description text,
    -- What the limit counts, for the qu parameter of the RateLimit-Policy header: NULL or
    -- 'requests' (not shown), 'content-bytes', 'concurrent-requests', or another token.
    quota_unit text,
    -- A calendar period's time zone (fixed_window, period '1 day', '1 week' or '1 month'): the
    -- window runs from local midnight to local midnight there. NULL: windows aligned to the
    -- epoch, or the UTC month for '1 month'.
    time_zone text,
    -- check_http (and pre_request) add a random 0 to reset_jitter to the reset their headers
    -- report, so that clients told one reset do not all come back at once; the window and the
    -- decision's waits stay exact. NULL: none.
    reset_jitter interval,
    -- Escalating penalties: a denial by the limit blocks the key for the step of its penalty
    -- level ('{1 minute,5 minutes,30 minutes,24 hours}': the first penalty 1 minute, the fourth
    -- and every one after 24 hours). Each penalty raises the level by one; it drains by one per
    -- penalty_decay. NULL: no penalties.
    penalty_blocks interval[],
    penalty_decay interval,
    -- Delay instead of deny (token_bucket and gcra): a call that would wait at most max_delay is
    -- admitted for that later instant, its slot taken now; its retry_after_ms says how long to
    -- wait before going. NULL: never delayed.
    max_delay interval,
    -- Limits and tiers from the app's data: functions (p_subject text, p_user uuid), STABLE,
    -- owned by a superuser or ratelimit's owner, asked on every call for the subject's tier
    -- (a name in ratelimit.tiers, or NULL for none; the caller's p_tier no longer applies to
    -- this policy) and its limit (NULL: the policy's). Each is kept as its signature, qualified
    -- with its schema (text: pg_upgrade refuses tables with a column of a reg* type such as
    -- regprocedure, whose OIDs it does not keep).
    tier_lookup text,
    limit_lookup text
);

COMMENT ON TABLE ratelimit.policies IS
    'ratelimit: named limits for ratelimit.check and ratelimit.check_all; edits apply to the next call';

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

-- @begin validate_policy_lookup
-- Raises 22023 naming p_column unless p_function names, with its schema, a function that can be
-- a policy's lookup: (text, uuid) returning p_returns, one row, STABLE or IMMUTABLE, owned by a
-- superuser or ratelimit's owner. Returns its signature as the policy keeps it.
CREATE OR REPLACE FUNCTION ratelimit.validate_policy_lookup(p_column text, p_function text, p_returns regtype)
RETURNS text
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    lookup_oid pg_catalog.oid;
    lookup_row pg_catalog.pg_proc%ROWTYPE;
BEGIN
    -- Read by the type's input function, never run as SQL; with search_path pinned, a name
    -- without its schema finds only pg_catalog's.
    BEGIN
        lookup_oid := pg_catalog.to_regprocedure(p_function);
    EXCEPTION WHEN OTHERS THEN
        lookup_oid := NULL;
    END;
    IF lookup_oid IS NULL THEN
        RAISE EXCEPTION '%: no function % (name it with its schema and argument types, as in my_schema.tier_of(text,uuid))',
            p_column, pg_catalog.quote_literal(pg_catalog.left(p_function, 200))
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    SELECT * INTO lookup_row FROM pg_catalog.pg_proc WHERE oid = lookup_oid;
    -- proargtypes is an oidvector, numbered from 0.
    IF lookup_row.pronargs <> 2 OR lookup_row.proargtypes[0] <> 'text'::pg_catalog.regtype
       OR lookup_row.proargtypes[1] <> 'uuid'::pg_catalog.regtype
       OR lookup_row.prorettype <> p_returns OR lookup_row.proretset OR lookup_row.prokind <> 'f' THEN
        RAISE EXCEPTION '%: % must take (p_subject text, p_user uuid) and return one %', p_column, lookup_oid::pg_catalog.regprocedure, p_returns
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF lookup_row.provolatile = 'v' THEN
        RAISE EXCEPTION '%: % must be STABLE or IMMUTABLE: a lookup reads, it never writes', p_column, lookup_oid::pg_catalog.regprocedure
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    -- ratelimit's owner: the extension's, of either edition; the SQL edition's plain install is
    -- no extension, and its owner is the schema's.
    IF NOT EXISTS (SELECT FROM pg_catalog.pg_roles r WHERE r.oid = lookup_row.proowner
                   AND (r.rolsuper OR r.oid = coalesce(
                            (SELECT e.extowner FROM pg_catalog.pg_extension e WHERE e.extname IN ('ratelimit', 'ratelimit_sql')),
                            (SELECT n.nspowner FROM pg_catalog.pg_namespace n WHERE n.nspname = 'ratelimit')))) THEN
        RAISE EXCEPTION '%: % must be owned by a superuser or ratelimit''s owner: every call runs it', p_column, lookup_oid::pg_catalog.regprocedure
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    RETURN lookup_oid::pg_catalog.regprocedure::text;
END
$$;
-- @end validate_policy_lookup

-- @begin policies_validate
CREATE OR REPLACE FUNCTION ratelimit.policies_validate()
RETURNS trigger
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    -- The name first, in words (the table's check constraint would only name itself).
    IF NEW.name IS NOT NULL AND NEW.name !~ '^[A-Za-z0-9_.:-]{1,63}$' THEN
        RAISE EXCEPTION 'name may hold only letters, digits, _ . : and - (1 to 63 of them; / is reserved): group names with dots, as in activity.create_post'
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
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
    -- A lookup is called on every call, as the caller, with the policy's subject: a function of
    -- (text, uuid) returning the tier's name or the limit, that writes nothing and that only the
    -- administrators who write the policies can change.
    IF NEW.tier_lookup IS NOT NULL THEN
        NEW.tier_lookup := ratelimit.validate_policy_lookup('tier_lookup', NEW.tier_lookup, 'text');
    END IF;
    IF NEW.limit_lookup IS NOT NULL THEN
        NEW.limit_lookup := ratelimit.validate_policy_lookup('limit_lookup', NEW.limit_lookup, 'integer');
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
-- @end policies_validate

CREATE TRIGGER policies_validate BEFORE INSERT OR UPDATE ON ratelimit.policies
    FOR EACH ROW EXECUTE FUNCTION ratelimit.policies_validate();

-- Tiers of callers: a multiplier on every policy's limit (and burst), or a bypass.
CREATE TABLE ratelimit.tiers (
    name text COLLATE "C" PRIMARY KEY
        CONSTRAINT tiers_name_check CHECK (name ~ '^[A-Za-z0-9_.:-]{1,63}$'),
    multiplier numeric NOT NULL DEFAULT 1
        CONSTRAINT tiers_multiplier_check CHECK (multiplier > 0 AND multiplier <= 1000),
    bypass boolean NOT NULL DEFAULT false,
    description text
);

-- One key's own limit under one policy: a limit, a multiplier, or a bypass. An override wins
-- over the caller's tier; one that has expired is ignored.
CREATE TABLE ratelimit.key_overrides (
    policy text COLLATE "C" NOT NULL
        REFERENCES ratelimit.policies (name) ON UPDATE CASCADE ON DELETE CASCADE,
    key text COLLATE "C" NOT NULL,
    "limit" integer CONSTRAINT key_overrides_limit_check CHECK ("limit" > 0),
    multiplier numeric
        CONSTRAINT key_overrides_multiplier_check CHECK (multiplier > 0 AND multiplier <= 1000),
    bypass boolean NOT NULL DEFAULT false,
    expires_at timestamptz,
    reason text,
    PRIMARY KEY (policy, key),
    CONSTRAINT key_overrides_one_change CHECK (num_nonnulls("limit", multiplier) <= 1)
);

-- Allow and deny lists. An entry names a user, a key or an IP range (inet/cidr, v4 or v6),
-- for one policy or for all (policy NULL), until expires_at (NULL: until removed). A matching
-- deny entry denies the call and charges nothing; a matching allow entry skips that policy.
-- Deny wins over allow.
CREATE TABLE ratelimit.access_list (
    id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    action text NOT NULL CONSTRAINT access_list_action_check CHECK (action IN ('allow', 'deny')),
    policy text COLLATE "C"
        REFERENCES ratelimit.policies (name) ON UPDATE CASCADE ON DELETE CASCADE,
    user_id uuid,
    key text COLLATE "C",
    ip cidr,
    expires_at timestamptz,
    reason text,
    created_at timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT access_list_one_subject CHECK (num_nonnulls(user_id, key, ip) = 1)
);

CREATE INDEX access_list_user_id ON ratelimit.access_list (user_id) WHERE user_id IS NOT NULL;
CREATE INDEX access_list_key ON ratelimit.access_list (key) WHERE key IS NOT NULL;
CREATE INDEX access_list_ip ON ratelimit.access_list USING gist (ip inet_ops)
    WHERE ip IS NOT NULL;

------------------------------------------------------------------------------------------------
-- The denial log: rows shaped like a security event, in a ring of ratelimit.denial_log_size
-- slots, so it never grows past that; ratelimit.denial_log_sample_rate of the denials of
-- policies with log_denials are written. Rows are written in the caller's transaction.
------------------------------------------------------------------------------------------------

CREATE TABLE ratelimit.denial_log (
    slot integer PRIMARY KEY,
    logged_at timestamptz NOT NULL,
    event_type text NOT NULL,
    severity text NOT NULL,
    source text NOT NULL,
    status text NOT NULL,
    error_message text NOT NULL,
    event_data jsonb NOT NULL
);

CREATE SEQUENCE ratelimit.denial_log_position;

------------------------------------------------------------------------------------------------
-- Deciding by policy
------------------------------------------------------------------------------------------------

-- What a policy check answers. policy is the policy the answer is about: the first (in the
-- order given) that denied, else the one with the least remaining, whose limit an HTTP
-- response should show. retry_after_ms is the wait until every denying policy would allow
-- (NULL when no wait will do: a deny-list entry without an end, or a cost above the limit).
-- reason: 'limited' (a limit denied), 'within_limits', 'deny_list', 'cost_exceeds_limit' (a
-- cost the policy could never allow: denied, nothing charged), 'allow_list' or 'bypass' (no
-- limit was checked).
-- shadow_denied lists the shadow policies that would have denied.
CREATE TYPE ratelimit.policy_decision AS (
    allowed boolean,
    policy text,
    "limit" integer,
    remaining integer,
    retry_after_ms bigint,
    reset_after_ms bigint,
    period_ms bigint,
    cost integer,
    reason text,
    shadow_denied text[],
    decided_at timestamptz,
    -- The penalty level the denial is under (reason 'penalty'); NULL otherwise.
    penalty_level integer
);

------------------------------------------------------------------------------------------------
-- The key of the partition keys (the pk parameter of the RateLimit headers): a keyed hash of
-- each subject, so a client can tell its partitions apart without learning whose they are.
-- Random per database, made here; only the owner reads it (no grant). Replacing the row
-- changes every pk from the next call on.
------------------------------------------------------------------------------------------------

CREATE TABLE ratelimit.partition_key_secret (
    only_row boolean PRIMARY KEY DEFAULT true CONSTRAINT partition_key_secret_one_row CHECK (only_row),
    secret bytea NOT NULL
        CONSTRAINT partition_key_secret_length CHECK (length(secret) >= 16)
);

-- 32 bytes from two version 4 UUIDs (the server's strong random source; 244 random bits).
INSERT INTO ratelimit.partition_key_secret (secret)
SELECT decode(replace(gen_random_uuid()::text || gen_random_uuid()::text, '-', ''), 'hex');

------------------------------------------------------------------------------------------------
-- The policy tables' cache: a statement that changes one of them invalidates every backend's
-- copy when its transaction commits (src/pg/policies/policy_cache.hpp).
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
CREATE TRIGGER partition_key_secret_changed AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE
    ON ratelimit.partition_key_secret FOR EACH STATEMENT
    EXECUTE FUNCTION ratelimit.policy_tables_changed();

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

------------------------------------------------------------------------------------------------
-- Deciding by policy, natively. They read the
-- policy tables through the cache and write counters through the engines, neither of which
-- goes through SQL, so they need neither SECURITY DEFINER nor a pinned search_path (the
-- denial log is written as its table's owner with schema-qualified statements).
------------------------------------------------------------------------------------------------

CREATE FUNCTION ratelimit.decide_policies(
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

CREATE FUNCTION ratelimit.check(
    p_policy text,
    p_key text,
    p_cost integer DEFAULT 1,
    p_tier text DEFAULT NULL,
    p_ip inet DEFAULT NULL,
    p_user uuid DEFAULT NULL)
RETURNS ratelimit.policy_decision
LANGUAGE c VOLATILE PARALLEL UNSAFE SECURITY INVOKER
AS 'MODULE_PATHNAME', 'ratelimit_check';

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

CREATE FUNCTION ratelimit.check_all(
    p_policies text[],
    p_keys text[],
    p_cost integer DEFAULT 1,
    p_tier text DEFAULT NULL,
    p_ip inet DEFAULT NULL,
    p_user uuid DEFAULT NULL)
RETURNS ratelimit.policy_decision
LANGUAGE c VOLATILE PARALLEL UNSAFE SECURITY INVOKER
AS 'MODULE_PATHNAME', 'ratelimit_check_all';

CREATE FUNCTION ratelimit.check_http(
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

CREATE FUNCTION ratelimit.http_headers(
    p_decision ratelimit.policy_decision,
    p_reset_format text DEFAULT 'iso8601')
RETURNS jsonb
LANGUAGE c IMMUTABLE PARALLEL SAFE
AS 'MODULE_PATHNAME', 'ratelimit_http_headers';

CREATE FUNCTION ratelimit.http_body(
    p_decision ratelimit.policy_decision,
    p_shape text DEFAULT 'error_message')
RETURNS jsonb
LANGUAGE c IMMUTABLE PARALLEL SAFE
AS 'MODULE_PATHNAME', 'ratelimit_http_body';

-- A period in words, for messages: "minute", "hour", "15 minutes", "90 seconds".
CREATE FUNCTION ratelimit.describe_period(p_period interval)
RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
    WITH length(ms) AS (SELECT round(extract(epoch FROM p_period) * 1000)::bigint),
         unit(name, ms) AS (VALUES ('day', 86400000::bigint), ('hour', 3600000), ('minute', 60000),
                                   ('second', 1000), ('millisecond', 1))
    SELECT CASE WHEN length.ms = unit.ms THEN unit.name
                ELSE format('%s %ss', length.ms / unit.ms, unit.name) END
      FROM length, unit
     WHERE length.ms % unit.ms = 0
     ORDER BY unit.ms DESC
     LIMIT 1
$$;

-- Rows an administrator adds to the policy tables are theirs: pg_dump keeps them. The access
-- list's identity sequence goes with them, so that an entry added after a restore gets a new id.
SELECT pg_catalog.pg_extension_config_dump('ratelimit.policies', '');
SELECT pg_catalog.pg_extension_config_dump('ratelimit.tiers', '');
SELECT pg_catalog.pg_extension_config_dump('ratelimit.key_overrides', '');
SELECT pg_catalog.pg_extension_config_dump('ratelimit.access_list', '');
SELECT pg_catalog.pg_extension_config_dump('ratelimit.access_list_id_seq', '');
