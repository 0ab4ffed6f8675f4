-- ratelimit 0.4.0 -> 0.5.0: several limits in one all-or-nothing decision (consume_all); named
-- policies in a table, with tiers, per-key overrides, allow and deny lists and shadow mode;
-- HTTP headers and 429 bodies; per-policy counters, top offenders and a bounded denial log.
\echo Use "ALTER EXTENSION ratelimit UPDATE TO '0.5.0'" to load this file. \quit

------------------------------------------------------------------------------------------------
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
    p_burst integer DEFAULT NULL)
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

------------------------------------------------------------------------------------------------
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
    description text
);

COMMENT ON TABLE ratelimit.policies IS
    'ratelimit: named limits for ratelimit.check and ratelimit.check_all; edits apply to the next call';

CREATE FUNCTION ratelimit.policies_validate()
RETURNS trigger
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    PERFORM ratelimit.validate_limit(NEW."limit", NEW.period, NEW.algorithm, NEW.engine,
                                     NEW.burst);
    RETURN NEW;
EXCEPTION
    WHEN invalid_parameter_value OR null_value_not_allowed THEN
        RAISE EXCEPTION 'policy "%": %', NEW.name, SQLERRM USING ERRCODE = SQLSTATE;
END
$$;

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
    decided_at timestamptz
);

-- The one body behind check and check_all. p_policy_argument and p_key_argument name the
-- caller's parameters in error messages (check has scalars, check_all arrays).
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
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    n integer;
    now_at constant timestamptz := ratelimit.clock_now();
    scalar constant boolean := p_policy_argument = 'p_policy';
    policy_name text;
    key_name text;
    tier ratelimit.tiers;
    pol ratelimit.policies;
    override ratelimit.key_overrides;
    listed record;
    multiplier numeric;
    effective_limit integer;
    effective_burst integer;
    subject text;
    -- the policies that are checked, in the order given
    checked_names text[] := '{}';
    checked_subjects text[] := '{}';
    checked_keys text[] := '{}';
    checked_limits integer[] := '{}';
    checked_periods interval[] := '{}';
    checked_algorithms text[] := '{}';
    checked_engines text[] := '{}';
    checked_bursts integer[] := '{}';
    checked_enforced boolean[] := '{}';
    checked_count_denied boolean[] := '{}';
    checked_log boolean[] := '{}';
    checked_hash boolean[] := '{}';
    decisions ratelimit.decision[];
    d ratelimit.decision;
    answer ratelimit.policy_decision;
    binding integer;
    outcome_policies text[] := '{}';
    outcome_subjects text[] := '{}';
    outcomes text[] := '{}';
    has_override boolean;
    allow_listed boolean := false;
    sample_rate double precision;
    log_size integer;
    ring_slot integer;
    caller_ip inet;
BEGIN
    IF p_policies IS NULL THEN
        RAISE EXCEPTION '% must not be NULL', p_policy_argument USING ERRCODE = 'null_value_not_allowed';
    END IF;
    IF p_keys IS NULL THEN
        RAISE EXCEPTION '% must not be NULL', p_key_argument USING ERRCODE = 'null_value_not_allowed';
    END IF;
    IF p_cost IS NULL THEN
        RAISE EXCEPTION 'p_cost must not be NULL' USING ERRCODE = 'null_value_not_allowed';
    END IF;
    IF array_ndims(p_policies) > 1 THEN
        RAISE EXCEPTION '% must be a one-dimensional array', p_policy_argument
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF array_ndims(p_keys) > 1 THEN
        RAISE EXCEPTION '% must be a one-dimensional array', p_key_argument
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    -- The caller's address as one host: a netmask on it must not widen what it matches, and an
    -- IPv4-mapped IPv6 address (::ffff:a.b.c.d) is the IPv4 address it carries.
    IF p_ip IS NOT NULL THEN
        caller_ip := set_masklen(p_ip, CASE family(p_ip) WHEN 4 THEN 32 ELSE 128 END);
        IF family(caller_ip) = 6 AND caller_ip <<= inet '::ffff:0.0.0.0/96' THEN
            caller_ip := inet '0.0.0.0' + (caller_ip - inet '::ffff:0.0.0.0');
        END IF;
    END IF;
    n := coalesce(cardinality(p_policies), 0);
    IF n < 1 OR n > 16 THEN
        RAISE EXCEPTION '% must have 1 to 16 elements (got %)', p_policy_argument, n
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF coalesce(cardinality(p_keys), 0) <> n THEN
        RAISE EXCEPTION '% must have as many elements as % (%, got %)', p_key_argument,
            p_policy_argument, n, coalesce(cardinality(p_keys), 0)
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF p_cost < 0 THEN
        RAISE EXCEPTION 'p_cost must be at least 0 (got %)', p_cost
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF p_tier IS NOT NULL THEN
        SELECT * INTO tier FROM ratelimit.tiers WHERE name = p_tier COLLATE "C";
        IF NOT FOUND THEN
            RAISE EXCEPTION 'p_tier: unknown tier "%"', left(p_tier, 64)
                USING ERRCODE = 'invalid_parameter_value',
                      HINT = 'The tiers are the rows of ratelimit.tiers.';
        END IF;
    END IF;

    answer.cost := p_cost;
    answer.decided_at := now_at;
    answer.shadow_denied := '{}';

    FOR i IN 1..n LOOP
        policy_name := CASE WHEN scalar THEN p_policy_argument ELSE format('%s[%s]', p_policy_argument, i) END;
        key_name := CASE WHEN scalar THEN p_key_argument ELSE format('%s[%s]', p_key_argument, i) END;
        IF p_policies[i] IS NULL THEN
            RAISE EXCEPTION '% must not be NULL', policy_name USING ERRCODE = 'null_value_not_allowed';
        END IF;
        IF p_keys[i] IS NULL THEN
            RAISE EXCEPTION '% must not be NULL', key_name USING ERRCODE = 'null_value_not_allowed';
        END IF;
        SELECT * INTO pol FROM ratelimit.policies WHERE name = p_policies[i] COLLATE "C";
        IF NOT FOUND THEN
            RAISE EXCEPTION '%: unknown policy "%"', policy_name, left(p_policies[i], 64)
                USING ERRCODE = 'invalid_parameter_value',
                      HINT = 'The policies are the rows of ratelimit.policies.';
        END IF;
        IF pol.name::text = ANY (checked_names) OR pol.name::text = ANY (outcome_policies) THEN
            RAISE EXCEPTION '%: policy "%" is listed twice', policy_name, pol.name
                USING ERRCODE = 'invalid_parameter_value';
        END IF;
        IF octet_length(p_keys[i]) = 0 THEN
            RAISE EXCEPTION '% must not be empty', key_name USING ERRCODE = 'invalid_parameter_value';
        END IF;
        subject := CASE WHEN pol.hash_key THEN ratelimit.hash_subject(p_keys[i]) ELSE p_keys[i] END;
        IF octet_length(subject) > 254 - octet_length(pol.name) THEN
            RAISE EXCEPTION '% must be at most % bytes under policy "%" (got %)', key_name,
                254 - octet_length(pol.name), pol.name, octet_length(subject)
                USING ERRCODE = 'invalid_parameter_value';
        END IF;

        -- Lists: deny wins, then allow.
        SELECT bool_or(a.action = 'deny') AS deny,
               bool_or(a.action = 'allow') AS allow,
               -- a deny entry without an end denies for good: no retry time
               CASE WHEN bool_or(a.action = 'deny' AND a.expires_at IS NULL) THEN NULL
                    ELSE max(a.expires_at) FILTER (WHERE a.action = 'deny') END AS deny_until
          INTO listed
          FROM ratelimit.access_list a
         WHERE (a.policy IS NULL OR a.policy = pol.name)
           AND (a.expires_at IS NULL OR a.expires_at > now_at)
           AND (a.user_id = p_user OR a.key = p_keys[i] COLLATE "C" OR caller_ip <<= a.ip);
        IF listed.deny THEN
            answer.allowed := false;
            answer.policy := pol.name;
            answer."limit" := pol."limit";
            answer.remaining := 0;
            answer.period_ms := (extract(epoch FROM pol.period) * 1000)::bigint;
            answer.retry_after_ms := CASE WHEN listed.deny_until IS NULL THEN NULL
                ELSE ceil(extract(epoch FROM listed.deny_until - now_at) * 1000)::bigint END;
            answer.reset_after_ms := answer.retry_after_ms;
            answer.reason := 'deny_list';
            -- Policies skipped by an allow entry earlier in this call count as allowed.
            PERFORM ratelimit.record_outcomes(outcome_policies || pol.name::text,
                                              outcome_subjects || subject, outcomes || 'denied'::text);
            RETURN answer;
        END IF;
        -- Skipped by an allow entry, or bypassed by the key's override (which wins over the
        -- tier) or by the tier: counted as allowed, nothing charged.
        SELECT * INTO override FROM ratelimit.key_overrides o
         WHERE o.policy = pol.name AND o.key = p_keys[i] COLLATE "C"
           AND (o.expires_at IS NULL OR o.expires_at > now_at);
        has_override := FOUND;
        IF listed.allow OR (CASE WHEN has_override THEN override.bypass ELSE tier.bypass END) THEN
            allow_listed := allow_listed OR coalesce(listed.allow, false);
            outcome_policies := outcome_policies || pol.name;
            outcome_subjects := outcome_subjects || subject;
            outcomes := outcomes || 'allowed'::text;
            CONTINUE;
        END IF;
        multiplier := coalesce(CASE WHEN has_override THEN override.multiplier ELSE tier.multiplier END, 1);
        effective_limit := CASE WHEN has_override THEN coalesce(override."limit", pol."limit")
                                ELSE pol."limit" END;
        -- Multiplied limits are rounded down (a limit never grows by rounding) but stay >= 1.
        effective_limit := greatest(1, least(2147483647, floor(effective_limit * multiplier)))::integer;
        effective_burst := CASE WHEN pol.burst IS NULL THEN NULL
            ELSE greatest(1, least(2147483647, floor(pol.burst * multiplier)))::integer END;

        -- A cost this policy could never allow is a denial, not an error: a caller that fails
        -- open on errors must not get an unlimited batch through.
        IF p_cost > (CASE WHEN pol.algorithm IN ('token_bucket', 'gcra')
                          THEN coalesce(effective_burst, effective_limit) ELSE effective_limit END) THEN
            d := ratelimit.peek(format('%s:%s', pol.name, subject), effective_limit, pol.period, 1,
                                pol.algorithm, pol.engine, effective_burst);
            answer.allowed := false;
            answer.policy := pol.name;
            answer."limit" := d."limit";
            answer.remaining := d.remaining;
            answer.period_ms := (extract(epoch FROM pol.period) * 1000)::bigint;
            answer.retry_after_ms := NULL;
            answer.reset_after_ms := d.reset_after_ms;
            answer.reason := 'cost_exceeds_limit';
            PERFORM ratelimit.record_outcomes(ARRAY[pol.name], ARRAY[subject], ARRAY['denied']);
            RETURN answer;
        END IF;

        checked_names := checked_names || pol.name;
        checked_subjects := checked_subjects || subject;
        checked_keys := checked_keys || format('%s:%s', pol.name, subject);
        checked_limits := checked_limits || effective_limit;
        checked_periods := checked_periods || pol.period;
        checked_algorithms := checked_algorithms || pol.algorithm;
        checked_engines := checked_engines || pol.engine;
        checked_bursts := checked_bursts || effective_burst;
        checked_enforced := checked_enforced || NOT pol.shadow;
        checked_count_denied := checked_count_denied || pol.count_denied;
        checked_log := checked_log || pol.log_denials;
        checked_hash := checked_hash || pol.hash_key;
    END LOOP;

    IF cardinality(checked_names) = 0 THEN
        answer.allowed := true;
        answer.reason := CASE WHEN allow_listed THEN 'allow_list' ELSE 'bypass' END;
        answer.retry_after_ms := 0;
        answer.reset_after_ms := 0;
        PERFORM ratelimit.record_outcomes(outcome_policies, outcome_subjects, outcomes);
        RETURN answer;
    END IF;

    decisions := ratelimit.consume_all(checked_keys, checked_limits, checked_periods,
                                       checked_algorithms, checked_engines, checked_bursts,
                                       checked_enforced, p_cost);

    answer.allowed := true;
    FOR j IN 1..cardinality(checked_names) LOOP
        IF checked_enforced[j] AND NOT decisions[j].allowed THEN
            answer.allowed := false;
        END IF;
    END LOOP;

    FOR j IN 1..cardinality(checked_names) LOOP
        d := decisions[j];
        outcome_policies := outcome_policies || checked_names[j];
        outcome_subjects := outcome_subjects || checked_subjects[j];
        IF NOT d.allowed AND NOT checked_enforced[j] THEN
            outcomes := outcomes || 'shadow_denied'::text;
            answer.shadow_denied := answer.shadow_denied || checked_names[j];
        ELSIF NOT d.allowed THEN
            outcomes := outcomes || 'denied'::text;
            IF binding IS NULL OR decisions[binding].allowed THEN
                binding := j;  -- the first denying policy
            END IF;
            IF checked_count_denied[j] THEN
                -- The attempt counts: the key stays denied a full period from now, and the
                -- answer's waits say so.
                PERFORM ratelimit.block(checked_keys[j], checked_periods[j], checked_engines[j]);
                d.retry_after_ms := greatest(d.retry_after_ms,
                                             (extract(epoch FROM checked_periods[j]) * 1000)::bigint);
                d.reset_after_ms := greatest(d.reset_after_ms, d.retry_after_ms);
                decisions[j] := d;
            END IF;
            answer.retry_after_ms := greatest(answer.retry_after_ms, d.retry_after_ms);
        ELSE
            -- Allowed here; when the call as a whole was denied, nothing was taken.
            outcomes := outcomes || CASE WHEN answer.allowed THEN 'allowed' ELSE NULL END;
            IF answer.allowed AND checked_enforced[j]
               AND (binding IS NULL OR d.remaining < decisions[binding].remaining) THEN
                binding := j;  -- the enforced policy with the least remaining
            END IF;
        END IF;
        IF NOT d.allowed AND checked_log[j] THEN
            sample_rate := coalesce(nullif(current_setting('ratelimit.denial_log_sample_rate', true), ''), '1')::double precision;
            log_size := coalesce(nullif(current_setting('ratelimit.denial_log_size', true), ''), '10000')::integer;
            IF log_size > 0 AND random() < sample_rate THEN
                ring_slot := (nextval('ratelimit.denial_log_position') % log_size)::integer;
                INSERT INTO ratelimit.denial_log AS l (slot, logged_at, event_type, severity,
                                                       source, status, error_message, event_data)
                VALUES (ring_slot, now_at, 'rate_limit_violation', 'warning', 'ratelimit',
                        CASE WHEN checked_enforced[j] THEN 'blocked' ELSE 'shadow' END,
                        format('Rate limit exceeded: %s requests per %s', checked_limits[j],
                               ratelimit.describe_period(checked_periods[j])),
                        jsonb_build_object(
                            'identifier', checked_subjects[j],
                            'policy', checked_names[j],
                            'limit', checked_limits[j],
                            'window_minutes', round(extract(epoch FROM checked_periods[j]) / 60, 3),
                            'cost', p_cost,
                            'retry_after_ms', d.retry_after_ms,
                            'user_id', p_user,
                            -- a policy that hashes its keys keeps the caller's IP hashed too
                            'ip', CASE WHEN checked_hash[j] THEN ratelimit.hash_subject(host(caller_ip))
                                       ELSE host(caller_ip) END))
                ON CONFLICT (slot) DO UPDATE
                    SET logged_at = EXCLUDED.logged_at, event_type = EXCLUDED.event_type,
                        severity = EXCLUDED.severity, source = EXCLUDED.source,
                        status = EXCLUDED.status, error_message = EXCLUDED.error_message,
                        event_data = EXCLUDED.event_data;
                -- A smaller ring than before: the slots past its end go.
                DELETE FROM ratelimit.denial_log WHERE ratelimit.denial_log.slot >= log_size;
            END IF;
        END IF;
    END LOOP;

    -- Only shadow policies were checked: report the first of them.
    binding := coalesce(binding, 1);
    d := decisions[binding];
    answer.policy := checked_names[binding];
    answer."limit" := d."limit";
    answer.remaining := d.remaining;
    answer.reset_after_ms := d.reset_after_ms;
    answer.period_ms := (extract(epoch FROM checked_periods[binding]) * 1000)::bigint;
    IF answer.allowed THEN
        answer.retry_after_ms := 0;
        answer.reason := 'within_limits';
    ELSE
        answer.reason := 'limited';
    END IF;
    PERFORM ratelimit.record_outcomes(outcome_policies, outcome_subjects, outcomes);
    RETURN answer;
END
$$;

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

-- Decides one call of p_cost under the policy p_policy for the subject p_key (a user id, an
-- IP, an e-mail, a transaction id: whatever the policy limits). p_tier applies a tier's
-- multiplier or bypass; p_ip and p_user are matched against the allow and deny lists.
CREATE FUNCTION ratelimit.check(
    p_policy text,
    p_key text,
    p_cost integer DEFAULT 1,
    p_tier text DEFAULT NULL,
    p_ip inet DEFAULT NULL,
    p_user uuid DEFAULT NULL)
RETURNS ratelimit.policy_decision
LANGUAGE sql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT ratelimit.decide_policies(ARRAY[p_policy], ARRAY[p_key], p_cost, p_tier, p_ip, p_user,
                                     'p_policy', 'p_key')
$$;

-- Several policies as one decision: p_keys[i] is the subject under p_policies[i]. If any policy
-- denies, none is charged; the answer names the first that denied (in the order given).
CREATE FUNCTION ratelimit.check_all(
    p_policies text[],
    p_keys text[],
    p_cost integer DEFAULT 1,
    p_tier text DEFAULT NULL,
    p_ip inet DEFAULT NULL,
    p_user uuid DEFAULT NULL)
RETURNS ratelimit.policy_decision
LANGUAGE sql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT ratelimit.decide_policies(p_policies, p_keys, p_cost, p_tier, p_ip, p_user,
                                     'p_policies', 'p_keys')
$$;

------------------------------------------------------------------------------------------------
-- HTTP
------------------------------------------------------------------------------------------------

-- The response headers for a decision, as a jsonb object of strings an edge function copies
-- into its Response. X-RateLimit-Reset is the instant the call would be allowed (denied) or the
-- allowance is full again (allowed), rounded up: as ISO 8601 with milliseconds
-- (p_reset_format 'iso8601') or Unix seconds ('unix'). Retry-After (denied only) is that wait
-- in whole seconds, rounded up, at least 1. RateLimit and RateLimit-Policy are the IETF
-- fields: "policy";r=<remaining>;t=<seconds> and "policy";q=<limit>;w=<window seconds>.
-- A decision that checked no limit (allow list, bypass) has no headers: '{}'.
CREATE FUNCTION ratelimit.http_headers(
    p_decision ratelimit.policy_decision,
    p_reset_format text DEFAULT 'iso8601')
RETURNS jsonb
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    wait_ms bigint;
    reset_at timestamptz;
    wait_seconds bigint;
    headers jsonb;
BEGIN
    IF p_decision IS NULL THEN
        RAISE EXCEPTION 'p_decision must not be NULL' USING ERRCODE = 'null_value_not_allowed';
    END IF;
    IF p_reset_format IS NULL THEN
        RAISE EXCEPTION 'p_reset_format must not be NULL' USING ERRCODE = 'null_value_not_allowed';
    END IF;
    IF p_reset_format NOT IN ('iso8601', 'unix') THEN
        RAISE EXCEPTION 'p_reset_format must be one of iso8601, unix (got "%")', left(p_reset_format, 64)
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF p_decision."limit" IS NULL THEN
        RETURN '{}'::jsonb;
    END IF;
    headers := jsonb_build_object(
        'X-RateLimit-Limit', p_decision."limit"::text,
        'X-RateLimit-Remaining', greatest(p_decision.remaining, 0)::text,
        'RateLimit-Policy', format('"%s";q=%s;w=%s', p_decision.policy, p_decision."limit",
                                   ceil(p_decision.period_ms / 1000.0)::bigint));
    wait_ms := CASE WHEN p_decision.allowed THEN p_decision.reset_after_ms
                    ELSE p_decision.retry_after_ms END;
    IF wait_ms IS NULL THEN
        -- denied for good (a deny-list entry without an end): no time to give
        RETURN headers;
    END IF;
    -- Rounded up to the millisecond / second: at the instant shown the call is allowed.
    reset_at := date_trunc('milliseconds', p_decision.decided_at) + make_interval(secs => wait_ms / 1000.0);
    IF reset_at < p_decision.decided_at + make_interval(secs => wait_ms / 1000.0) THEN
        reset_at := reset_at + interval '1 millisecond';
    END IF;
    wait_seconds := ceil(wait_ms / 1000.0)::bigint;
    headers := headers || jsonb_build_object(
        'X-RateLimit-Reset',
        CASE p_reset_format
            WHEN 'unix' THEN ceil(extract(epoch FROM reset_at))::bigint::text
            ELSE to_char(reset_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"') END,
        'RateLimit', format('"%s";r=%s;t=%s', p_decision.policy, greatest(p_decision.remaining, 0),
                            CASE WHEN p_decision.allowed THEN wait_seconds
                                 ELSE greatest(wait_seconds, 1) END));
    IF NOT p_decision.allowed THEN
        headers := headers || jsonb_build_object('Retry-After', greatest(wait_seconds, 1)::text);
    END IF;
    RETURN headers;
END
$$;

-- The JSON body of a 429 response, in the shapes the apps return: 'error_message'
-- {"error", "message"}, or 'detailed' {"error", "code": "RATE_LIMIT_EXCEEDED", "message",
-- "limit", "current", "retryAfter"}, where current counts the denied call. NULL when allowed.
CREATE FUNCTION ratelimit.http_body(
    p_decision ratelimit.policy_decision,
    p_shape text DEFAULT 'error_message')
RETURNS jsonb
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    retry_seconds bigint;
    current_count bigint;
BEGIN
    IF p_decision IS NULL THEN
        RAISE EXCEPTION 'p_decision must not be NULL' USING ERRCODE = 'null_value_not_allowed';
    END IF;
    IF p_shape IS NULL THEN
        RAISE EXCEPTION 'p_shape must not be NULL' USING ERRCODE = 'null_value_not_allowed';
    END IF;
    IF p_shape NOT IN ('error_message', 'detailed') THEN
        RAISE EXCEPTION 'p_shape must be one of error_message, detailed (got "%")', left(p_shape, 64)
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF p_decision.allowed THEN
        RETURN NULL;
    END IF;
    IF p_shape = 'error_message' THEN
        RETURN jsonb_build_object('error', 'Rate limit exceeded',
                                  'message', 'Too many requests. Please try again later.');
    END IF;
    -- No wait will do (a deny-list entry without an end, a cost above the limit): no
    -- retryAfter, and "current" only when a limit was counted.
    retry_seconds := CASE WHEN p_decision.retry_after_ms IS NOT NULL
        THEN greatest(1, ceil(p_decision.retry_after_ms / 1000.0))::bigint END;
    current_count := CASE WHEN p_decision.reason IN ('limited', 'cost_exceeds_limit')
        THEN p_decision."limit" - greatest(p_decision.remaining, 0) + p_decision.cost END;
    RETURN jsonb_build_object(
        'error', 'Rate limit exceeded',
        'code', 'RATE_LIMIT_EXCEEDED',
        'message', format('Too many requests. Limit: %s per %s.%s %s',
                          p_decision."limit",
                          ratelimit.describe_period(make_interval(secs => p_decision.period_ms / 1000.0)),
                          CASE WHEN current_count IS NULL THEN '' ELSE format(' Current: %s.', current_count) END,
                          CASE WHEN retry_seconds IS NULL THEN 'Try again later.'
                               WHEN retry_seconds = 1 THEN 'Try again in 1 second.'
                               ELSE format('Try again in %s seconds.', retry_seconds) END),
        'limit', p_decision."limit",
        'current', current_count,
        'retryAfter', retry_seconds);
END
$$;

-- One round trip for an edge function: decides p_policies for p_keys (as check_all) and returns
-- {"allowed", "status": 200 or 429, "headers": http_headers(...), "body": http_body(...) or
-- null, "decision": the policy_decision as an object}.
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
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    answer ratelimit.policy_decision;
    headers jsonb;
    body jsonb;
BEGIN
    -- The formats are checked before anything is charged.
    IF p_reset_format IS NULL THEN
        RAISE EXCEPTION 'p_reset_format must not be NULL' USING ERRCODE = 'null_value_not_allowed';
    END IF;
    IF p_reset_format NOT IN ('iso8601', 'unix') THEN
        RAISE EXCEPTION 'p_reset_format must be one of iso8601, unix (got "%")', left(p_reset_format, 64)
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF p_body_shape IS NULL THEN
        RAISE EXCEPTION 'p_body_shape must not be NULL' USING ERRCODE = 'null_value_not_allowed';
    END IF;
    IF p_body_shape NOT IN ('error_message', 'detailed') THEN
        RAISE EXCEPTION 'p_body_shape must be one of error_message, detailed (got "%")', left(p_body_shape, 64)
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    answer := ratelimit.decide_policies(p_policies, p_keys, p_cost, p_tier, p_ip, p_user,
                                        'p_policies', 'p_keys');
    headers := ratelimit.http_headers(answer, p_reset_format);
    body := ratelimit.http_body(answer, p_body_shape);
    RETURN jsonb_build_object('allowed', answer.allowed,
                              'status', CASE WHEN answer.allowed THEN 200 ELSE 429 END,
                              'headers', headers,
                              'body', body,
                              'decision', to_jsonb(answer));
END
$$;

------------------------------------------------------------------------------------------------
-- Observability (shared memory: needs shared_preload_libraries = 'ratelimit')
------------------------------------------------------------------------------------------------

-- Counts one call's outcome per policy; called by decide_policies only.
CREATE FUNCTION ratelimit.record_outcomes(p_policies text[], p_subjects text[], p_outcomes text[])
RETURNS boolean
LANGUAGE c VOLATILE PARALLEL UNSAFE
AS 'MODULE_PATHNAME', 'ratelimit_record_outcomes';

-- Calls each policy allowed, denied and shadow-denied since the server started (or since
-- reset_policy_stats). A call that skipped a policy (allow list, bypass) counts as allowed.
CREATE FUNCTION ratelimit.policy_stats()
RETURNS TABLE(policy text, allowed bigint, denied bigint, shadow_denied bigint, since timestamptz)
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

------------------------------------------------------------------------------------------------
-- The limits of the apps this extension serves, as policies. Table engine everywhere (it needs
-- no preloading): switch one with UPDATE ratelimit.policies SET engine = 'memory' WHERE ...
------------------------------------------------------------------------------------------------

INSERT INTO ratelimit.policies (name, algorithm, "limit", period, description) VALUES
    -- Per-user RPC limits: a window opens at the first call and lasts its period.
    ('rpc.auth', 'rolling_window', 5, '15 minutes', 'AUTH: login, register'),
    ('rpc.wallet', 'rolling_window', 30, '1 minute', 'WALLET: reward claims, purchases'),
    ('rpc.game', 'rolling_window', 100, '1 minute', 'GAME: game start, completion, rewards'),
    ('rpc.social', 'rolling_window', 50, '1 minute', 'SOCIAL: friend requests, messages'),
    ('rpc.admin', 'rolling_window', 1000, '1 minute', 'ADMIN: admin operations'),
    ('rpc.register-with-username-pin', 'rolling_window', 5, '15 minutes', 'Prevent bot account creation'),
    ('rpc.login-with-username-pin', 'rolling_window', 5, '15 minutes', 'Brute-force protection'),
    ('rpc.complete-game', 'rolling_window', 20, '1 minute', 'Realistic max 1 game/3 seconds'),
    ('rpc.credit-gameplay-reward', 'rolling_window', 30, '1 minute', '15 questions x 2 retries'),
    ('rpc.claim-daily-gift', 'rolling_window', 10, '1 minute', 'Prevent claim spam'),
    ('rpc.claim_welcome_bonus', 'rolling_window', 5, '60 minutes', 'Prevent abuse attempts'),
    ('rpc.lootbox-decide', 'rolling_window', 30, '1 minute', 'Max 20 lootboxes/day'),
    ('rpc.send-friend-request', 'rolling_window', 10, '5 minutes', 'Prevent spam'),
    ('rpc.send-dm', 'rolling_window', 100, '1 minute', 'Realistic chat usage'),
    -- Per-user activity limits in epoch-aligned one-minute windows.
    ('activity.create_post', 'fixed_window', 10, '1 minute', 'posts-guard'),
    ('activity.update_post', 'fixed_window', 10, '1 minute', 'posts-guard'),
    ('activity.delete_post', 'fixed_window', 10, '1 minute', 'posts-guard'),
    ('activity.add_comment', 'fixed_window', 60, '1 minute', 'comments-guard'),
    ('activity.update_comment', 'fixed_window', 60, '1 minute', 'comments-guard'),
    ('activity.delete_comment', 'fixed_window', 60, '1 minute', 'comments-guard'),
    ('activity.create_room', 'fixed_window', 10, '1 minute', 'rooms-guard'),
    ('activity.update_room', 'fixed_window', 10, '1 minute', 'rooms-guard'),
    ('activity.delete_room', 'fixed_window', 10, '1 minute', 'rooms-guard'),
    ('activity.create_room_message', 'fixed_window', 60, '1 minute', 'room-message-guard'),
    ('activity.update_room_message', 'fixed_window', 60, '1 minute', 'room-message-guard'),
    ('activity.delete_room_message', 'fixed_window', 60, '1 minute', 'room-message-guard'),
    ('activity.bulk_import', 'fixed_window', 5, '1 minute', 'Stricter limit for bulk imports'),
    -- Per-user endpoint limits in hour-aligned windows; sync-push is charged per task.
    ('endpoint.ai-inference', 'fixed_window', 10, '1 hour', 'AI assessments'),
    ('endpoint.sync-push', 'fixed_window', 50, '1 hour', 'Task creation (batch-aware: cost = tasks)'),
    ('endpoint.create-post', 'fixed_window', 5, '1 hour', 'Post creation'),
    -- Payment flow, checked global -> ip -> transaction; invoices per e-mail.
    ('lotto.transaction', 'sliding_window', 10, '1 minute', 'Per transaction id: replay spam'),
    ('lotto.ip', 'sliding_window', 100, '1 minute', 'Per client IP: DoS from one source'),
    ('lotto.global', 'sliding_window_counter', 1000, '1 minute', 'All requests: circuit breaker'),
    ('lotto.invoices', 'sliding_window', 3, '1 minute', 'New invoices per user e-mail'),
    -- Orphaned-user cleanup, checked global -> ip -> email; IPs and e-mails hashed.
    ('cleanup.global', 'sliding_window_counter', 1000, '60 seconds', 'All requests'),
    ('cleanup.ip', 'sliding_window', 5, '60 seconds', 'Per hashed IP'),
    ('cleanup.email', 'sliding_window', 3, '3600 seconds', 'Per hashed e-mail');

UPDATE ratelimit.policies SET hash_key = true WHERE name IN ('cleanup.ip', 'cleanup.email');

INSERT INTO ratelimit.tiers (name, multiplier, bypass, description) VALUES
    ('premium', 2, false, 'Premium users: twice every limit'),
    ('verified', 1.5, false, 'Verified users: one and a half times every limit'),
    ('admin', 1, true, 'Administrators: no limit');

-- Rows an administrator adds to the shipped tables are theirs: pg_dump keeps them.
SELECT pg_catalog.pg_extension_config_dump('ratelimit.policies', '');
SELECT pg_catalog.pg_extension_config_dump('ratelimit.tiers', '');
SELECT pg_catalog.pg_extension_config_dump('ratelimit.key_overrides', '');
SELECT pg_catalog.pg_extension_config_dump('ratelimit.access_list', '');

------------------------------------------------------------------------------------------------
-- Privileges. Deciding by policy is for the roles that may call the native API (service_role
-- on Supabase); the tables and counters are for administrators only. check and check_all are
-- SECURITY DEFINER: they read the policy tables and write the counters on the caller's behalf.
------------------------------------------------------------------------------------------------

ALTER TABLE ratelimit.policies ENABLE ROW LEVEL SECURITY;
ALTER TABLE ratelimit.tiers ENABLE ROW LEVEL SECURITY;
ALTER TABLE ratelimit.key_overrides ENABLE ROW LEVEL SECURITY;
ALTER TABLE ratelimit.access_list ENABLE ROW LEVEL SECURITY;
ALTER TABLE ratelimit.denial_log ENABLE ROW LEVEL SECURITY;
REVOKE ALL ON TABLE ratelimit.policies, ratelimit.tiers, ratelimit.key_overrides,
    ratelimit.access_list, ratelimit.denial_log, ratelimit.policy_stats FROM PUBLIC;
REVOKE ALL ON SEQUENCE ratelimit.denial_log_position FROM PUBLIC;

REVOKE EXECUTE ON FUNCTION
    ratelimit.consume_all(text[], integer[], interval[], text[], text[], integer[], boolean[], integer),
    ratelimit.decide_policies(text[], text[], integer, text, inet, uuid, text, text),
    ratelimit.check(text, text, integer, text, inet, uuid),
    ratelimit.check_all(text[], text[], integer, text, inet, uuid),
    ratelimit.check_http(text[], text[], integer, text, inet, uuid, text, text),
    ratelimit.record_outcomes(text[], text[], text[]),
    ratelimit.policy_stats(),
    ratelimit.top_offenders(integer),
    ratelimit.reset_policy_stats(),
    ratelimit.policies_validate()
FROM PUBLIC;

DO $$
BEGIN
    IF EXISTS (SELECT 1 FROM pg_catalog.pg_roles WHERE rolname = 'service_role') THEN
        GRANT EXECUTE ON FUNCTION
            ratelimit.consume_all(text[], integer[], interval[], text[], text[], integer[], boolean[], integer),
            ratelimit.check(text, text, integer, text, inet, uuid),
            ratelimit.check_all(text[], text[], integer, text, inet, uuid),
            ratelimit.check_http(text[], text[], integer, text, inet, uuid, text, text),
            ratelimit.policy_stats(),
            ratelimit.top_offenders(integer)
        TO service_role;
        GRANT SELECT ON TABLE ratelimit.policy_stats TO service_role;
    END IF;
END
$$;
