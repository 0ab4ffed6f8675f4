-- The SQL edition's policy calls: the path of ratelimit.check and its kin (CONTRIBUTING.md, "The
-- path of a policy call") in PL/pgSQL, deciding as the C edition decides, with its errors, in its
-- order:
--   policy_plan      the arguments, checked; each policy's row, its key's override, its lookups,
--                    the lists' verdicts; the plan (src/pg/policies/policy_arguments.cpp,
--                    src/core/policy.cpp plan_policies)
--   policy_decide    the checked limits decided as one (every counter through the native API's
--                    decide_tiers, key_decide_micros and key_block); the answer, the penalties, the
--                    count_denied blocks and the denial log (src/core/policy_decision.cpp); and
--                    check_http's answer (src/pg/policies/check_http.cpp)
--   policy_fast      the common call (one plain policy) in fewer steps, to the same answer
--   policy_http_*    the headers and bodies (src/core/http_fields.cpp)
-- The policy tables are read on every call with indexed queries: there is no cache to keep.
-- What the SQL edition does not have: the memory engine (a call naming a policy on it is refused,
-- 0A000), the per-policy counters and top offenders (shared memory), and the denial log's queue:
-- a denial is logged in the caller's transaction, so one that rolls back, or that a read-only
-- transaction makes, is not logged. The calls are SECURITY DEFINER (they write the counters and
-- the log), so a policy's lookups run as ratelimit's owner, with search_path pg_catalog, pg_temp,
-- where the C edition runs them as the caller. The functions here are granted to nobody and run
-- only inside those calls, which pin search_path for them: they pin nothing and lend no rights
-- themselves, since a SET clause or a SECURITY DEFINER costs every call a save and restore of the
-- settings, and a SQL function with one is planned again at each call.
--
-- Every step here is a PL/pgSQL statement whose expressions PostgreSQL prepares again in each
-- transaction: the hot path keeps them few.

-- One policy of a call: what its row, its key's override, the tier, its lookups and the lists say
-- (policy_plan), and what the decision reported for it (policy_decide, for check_http).
CREATE TYPE ratelimit.policy_request AS (
    name text,
    -- The subject as the caller gave it (lists and overrides match it), and the key its counters
    -- are kept under: the subject, or its SHA-256 when the policy hashes its keys.
    key text,
    subject text,
    engine text,
    algorithm text,
    period interval,
    time_zone text,
    -- The window's length: the period, or the calendar window holding now.
    period_us bigint,
    -- The policy's limit (its limit_lookup's when it answered), which a deny-list answer reports.
    rule_limit integer,
    -- The limit and burst decided with, after the override or the tier (burst NULL: the limit).
    "limit" integer,
    burst integer,
    max_delay interval,
    count_denied boolean,
    shadow boolean,
    hash_key boolean,
    log_denials boolean,
    -- Microseconds of each step (NULL: no penalties), and the decay.
    penalty_blocks bigint[],
    penalty_decay interval,
    quota_unit text,
    reset_jitter_us bigint,
    -- What the plan reads besides: the burst as written, the key's unexpired override, the
    -- policy's lookups and the tier its tier_lookup gave (tier_looked_up: the call's tier does
    -- not apply; multiplier NULL: no tier).
    written_burst integer,
    override_applies boolean,
    override_limit integer,
    override_multiplier numeric,
    override_bypass boolean,
    tier_lookup text,
    limit_lookup text,
    tier_looked_up boolean,
    tier_multiplier numeric,
    tier_bypass boolean,
    -- What the plan did with it: checked, skipped (allow list, bypass), deny_list or
    -- cost_exceeds_limit (it ended the call); NULL: the call ended before it.
    step text,
    -- deny_list: when the deny entries end (NULL: never).
    deny_until_us bigint,
    -- How the call ended for it (allowed, denied, shadow_denied), and the decision reported for a
    -- checked policy (after the charge when allowed, as the key stands when denied; waits in µs).
    outcome text,
    decided_limit bigint,
    decided_remaining bigint,
    decided_retry bigint,
    decided_reset bigint
);

-- A call's plan: how it ends (decide, skipped, deny_list, cost_exceeds_limit), the policy that
-- ended it, whether an allow entry skipped one, the caller's address as the lists matched it.
CREATE TYPE ratelimit.policy_plan AS (
    kind text,
    stop integer,
    allow_listed boolean,
    caller_ip inet,
    requests ratelimit.policy_request[]
);

-- A decided call: its answer, and check_http's (when asked for).
CREATE TYPE ratelimit.policy_outcome AS (
    decision ratelimit.policy_decision,
    http jsonb
);

------------------------------------------------------------------------------------------------
-- Text of the HTTP fields (src/core/http_fields.cpp)
------------------------------------------------------------------------------------------------

-- The pk parameter (src/core/partition_key.cpp): the first 12 bytes of SHA-256 over the secret,
-- the policy's name, a zero byte and the subject as given, as an sf-binary.
CREATE FUNCTION ratelimit.policy_partition_key(p_secret bytea, p_policy text, p_subject text)
RETURNS text
LANGUAGE sql STABLE STRICT PARALLEL SAFE
AS $$
SELECT ':' || pg_catalog.encode(pg_catalog.substring(pg_catalog.sha256(
           p_secret || pg_catalog.convert_to(p_policy, pg_catalog.getdatabaseencoding()) || '\x00'::bytea
           || pg_catalog.convert_to(p_subject, pg_catalog.getdatabaseencoding())), 1, 12), 'base64') || ':'
$$;

-- An sf-string (RFC 8941): " and \ escaped; every byte outside 0x20..0x7E, and % itself, as %XX.
CREATE FUNCTION ratelimit.policy_sf_string(p_text text)
RETURNS text
LANGUAGE plpgsql IMMUTABLE STRICT PARALLEL SAFE
AS $$
DECLARE
    bytes bytea;
    out text := '"';
    b integer;
BEGIN
    IF p_text COLLATE "C" !~ '[^] !#$&''()*+,./0-9:;<=>?@A-Z[^_`a-z{|}~-]' THEN
        RETURN '"' || p_text || '"';
    END IF;
    bytes := pg_catalog.convert_to(p_text, pg_catalog.getdatabaseencoding());
    FOR i IN 0 .. pg_catalog.octet_length(bytes) - 1 LOOP
        b := pg_catalog.get_byte(bytes, i);
        IF b = 34 OR b = 92 THEN
            out := out || '\' || pg_catalog.chr(b);
        ELSIF b < 32 OR b > 126 OR b = 37 THEN
            out := out || '%' || pg_catalog.upper(pg_catalog.lpad(pg_catalog.to_hex(b), 2, '0'));
        ELSE
            out := out || pg_catalog.chr(b);
        END IF;
    END LOOP;
    RETURN out || '"';
END
$$;

-- A period in milliseconds in words, for messages: "minute", "hour", "15 minutes".
CREATE FUNCTION ratelimit.policy_describe_period(p_ms bigint)
RETURNS text
LANGUAGE plpgsql IMMUTABLE STRICT PARALLEL SAFE
AS $$
BEGIN
    RETURN CASE WHEN p_ms % 86400000 = 0 THEN CASE WHEN p_ms = 86400000 THEN 'day' ELSE (p_ms / 86400000) || ' days' END
                WHEN p_ms % 3600000 = 0 THEN CASE WHEN p_ms = 3600000 THEN 'hour' ELSE (p_ms / 3600000) || ' hours' END
                WHEN p_ms % 60000 = 0 THEN CASE WHEN p_ms = 60000 THEN 'minute' ELSE (p_ms / 60000) || ' minutes' END
                WHEN p_ms % 1000 = 0 THEN CASE WHEN p_ms = 1000 THEN 'second' ELSE (p_ms / 1000) || ' seconds' END
                WHEN p_ms = 1 THEN 'millisecond'
                ELSE p_ms || ' milliseconds' END;
END
$$;

-- An instant (µs since the Unix epoch) as ISO 8601 in UTC with milliseconds, truncated:
-- "2026-03-01T10:00:00.000Z". Outside years 1970 to 9999 (a crafted decision), the civil date of
-- the proleptic Gregorian calendar, as the C edition computes it.
CREATE FUNCTION ratelimit.policy_iso8601(p_at bigint)
RETURNS text
LANGUAGE plpgsql IMMUTABLE STRICT PARALLEL SAFE
AS $$
DECLARE
    days bigint;
    in_day bigint;
    z bigint;
    era bigint;
    doe bigint;
    yoe bigint;
    year bigint;
    doy bigint;
    mp bigint;
    ms bigint;
BEGIN
    IF p_at >= 0 AND p_at < 253402300800000000 THEN
        RETURN pg_catalog.to_char((pg_catalog.to_timestamp(p_at / 1000000)
                                   + (p_at % 1000000) * interval '1 microsecond') AT TIME ZONE 'UTC',
                                  'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"');
    END IF;
    days := p_at / 86400000000 - CASE WHEN p_at % 86400000000 < 0 THEN 1 ELSE 0 END;
    in_day := p_at - days * 86400000000;
    z := days + 719468;
    era := (CASE WHEN z >= 0 THEN z ELSE z - 146096 END) / 146097;
    doe := z - era * 146097;
    yoe := (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
    year := yoe + era * 400;
    doy := doe - (365 * yoe + yoe / 4 - yoe / 100);
    mp := (5 * doy + 2) / 153;
    IF mp >= 10 THEN
        year := year + 1;
    END IF;
    ms := in_day / 1000;
    -- As printf's %04lld: at least four characters, the sign among them.
    RETURN CASE WHEN year < 0 AND year > -100 THEN '-' || pg_catalog.lpad((-year)::text, 3, '0')
                WHEN year >= 0 AND year < 1000 THEN pg_catalog.lpad(year::text, 4, '0')
                ELSE year::text END
        || '-' || pg_catalog.lpad((CASE WHEN mp < 10 THEN mp + 3 ELSE mp - 9 END)::text, 2, '0')
        || '-' || pg_catalog.lpad((doy - (153 * mp + 2) / 5 + 1)::text, 2, '0')
        || 'T' || pg_catalog.lpad((ms / 3600000)::text, 2, '0')
        || ':' || pg_catalog.lpad((ms / 60000 % 60)::text, 2, '0')
        || ':' || pg_catalog.lpad((ms / 1000 % 60)::text, 2, '0')
        || '.' || pg_catalog.lpad((ms % 1000)::text, 3, '0') || 'Z';
END
$$;

-- The rate-limit headers of a decision (src/core/http_fields.cpp, rate_limit_headers): p_unit and
-- p_partition_key are the reported policy's qu and pk (an sf-binary); p_other_policies and
-- p_other_fields the items of the call's other enforced policies, each ", " and its item.
CREATE FUNCTION ratelimit.policy_http_headers(
    p_allowed boolean, p_policy text, p_limit bigint, p_remaining bigint, p_retry_after_ms bigint,
    p_reset_after_ms bigint, p_period_ms bigint, p_decided_at bigint, p_reason text,
    p_unit text, p_partition_key text, p_other_policies text, p_other_fields text, p_unix boolean)
RETURNS jsonb
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE
AS $$
DECLARE
    remaining constant bigint := GREATEST(coalesce(p_remaining, 0), 0);
    -- A name of the characters policies may have needs no escape.
    name constant text := CASE WHEN coalesce(p_policy, '') COLLATE "C" ~ '^[A-Za-z0-9_.:-]*$'
                               THEN '"' || coalesce(p_policy, '') || '"'
                               ELSE ratelimit.policy_sf_string(p_policy) END;
    key_parameter constant text := CASE WHEN p_partition_key IS NULL THEN '' ELSE ';pk=' || p_partition_key END;
    -- A lease decision limits units in flight: its reasons say so.
    unit constant text := CASE WHEN p_unit IS NULL AND p_reason IN ('leased', 'concurrency_limited')
                               THEN 'concurrent-requests' ELSE p_unit END;
    wait_ms constant bigint := CASE WHEN coalesce(p_allowed, false) THEN p_reset_after_ms ELSE p_retry_after_ms END;
    policy_field text;
    reset_at numeric;
    reset text;
    seconds bigint;
BEGIN
    IF p_limit IS NULL THEN
        RETURN '{}';
    END IF;
    policy_field := name || ';q=' || p_limit
        || CASE WHEN unit IS NULL OR unit IN ('', 'requests') THEN '' ELSE ';qu=' || ratelimit.policy_sf_string(unit) END
        || CASE WHEN p_period_ms IS NULL THEN ''
                ELSE ';w=' || (p_period_ms / 1000 + CASE WHEN p_period_ms % 1000 <> 0 AND p_period_ms > 0 THEN 1 ELSE 0 END) END
        || key_parameter || coalesce(p_other_policies, '');
    IF wait_ms IS NULL THEN
        RETURN pg_catalog.jsonb_build_object(
            'X-RateLimit-Limit', p_limit::text,
            'X-RateLimit-Remaining', remaining::text,
            'RateLimit-Policy', policy_field);
    END IF;
    IF p_decided_at BETWEEN 0 AND 4503599627370496 AND wait_ms BETWEEN 0 AND 4503599627370 THEN
        -- The instant shown, rounded up to the millisecond: a retry then is allowed. Its
        -- microseconds are below 2^53, so a double holds them exactly.
        reset := CASE WHEN p_unix THEN ((p_decided_at + wait_ms * 1000 + 999999) / 1000000)::text
                      ELSE pg_catalog.to_char(timestamp '1970-01-01'
                                              + ((p_decided_at + wait_ms * 1000 + 999) / 1000 * 1000) * interval '1 microsecond',
                                              'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"') END;
    ELSIF p_decided_at IS NOT NULL THEN
        reset_at := p_decided_at::numeric + wait_ms::numeric * 1000;
        IF reset_at > 9223372036854775807 THEN
            RAISE EXCEPTION 'timestamp out of range' USING ERRCODE = 'datetime_field_overflow';
        END IF;
        reset_at := pg_catalog.ceil(reset_at / 1000) * 1000;
        reset := CASE WHEN p_unix THEN pg_catalog.ceil(reset_at / 1000000)::bigint::text
                      WHEN reset_at >= 0 AND reset_at < 253402300800000000
                      THEN pg_catalog.to_char((pg_catalog.to_timestamp(pg_catalog.div(reset_at, 1000000))
                                               + (reset_at % 1000000)::bigint * interval '1 microsecond') AT TIME ZONE 'UTC',
                                              'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"')
                      ELSE ratelimit.policy_iso8601(reset_at::bigint) END;
    END IF;
    -- The reported policy's t and Retry-After are one number, at least 1 for a denial.
    seconds := wait_ms / 1000 + CASE WHEN wait_ms % 1000 <> 0 AND wait_ms > 0 THEN 1 ELSE 0 END;
    IF NOT coalesce(p_allowed, false) AND seconds < 1 THEN
        seconds := 1;
    END IF;
    -- One object built at once: a denial's has Retry-After too.
    IF NOT coalesce(p_allowed, true) THEN
        RETURN pg_catalog.jsonb_build_object(
            'X-RateLimit-Limit', p_limit::text,
            'X-RateLimit-Remaining', remaining::text,
            'RateLimit-Policy', policy_field,
            'X-RateLimit-Reset', reset,
            'RateLimit', name || ';r=' || remaining || ';t=' || seconds || key_parameter || coalesce(p_other_fields, ''),
            'Retry-After', seconds::text);
    END IF;
    RETURN pg_catalog.jsonb_build_object(
        'X-RateLimit-Limit', p_limit::text,
        'X-RateLimit-Remaining', remaining::text,
        'RateLimit-Policy', policy_field,
        'X-RateLimit-Reset', reset,
        'RateLimit', name || ';r=' || remaining || ';t=' || seconds || key_parameter || coalesce(p_other_fields, ''));
END
$$;

-- The 429 body of a denied decision (src/core/http_fields.cpp, rate_limit_body); NULL when it
-- allowed. p_violated: the policies that denied (empty: the reported one).
CREATE FUNCTION ratelimit.policy_http_body(
    p_allowed boolean, p_policy text, p_limit bigint, p_remaining bigint, p_retry_after_ms bigint,
    p_period_ms bigint, p_cost bigint, p_reason text, p_violated text[], p_shape text)
RETURNS jsonb
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE
AS $$
DECLARE
    retry_seconds bigint;
    used bigint;
    current bigint;
    message text;
BEGIN
    IF coalesce(p_allowed, false) THEN
        RETURN NULL;
    END IF;
    IF p_shape = 'error_message' THEN
        RETURN '{"error": "Rate limit exceeded", "message": "Too many requests. Please try again later."}'::jsonb;
    END IF;
    -- No wait will do (a deny entry without an end, a cost above the limit): no retryAfter, and
    -- "current" (counting the denied call) only when a limit was counted.
    IF p_retry_after_ms IS NOT NULL THEN
        retry_seconds := GREATEST(1, p_retry_after_ms / 1000
            + CASE WHEN p_retry_after_ms % 1000 <> 0 AND p_retry_after_ms > 0 THEN 1 ELSE 0 END);
    END IF;
    IF p_reason IN ('limited', 'cost_exceeds_limit') AND p_limit IS NOT NULL AND p_cost IS NOT NULL THEN
        used := p_limit - GREATEST(coalesce(p_remaining, 0), 0);
        -- As the integers the decision holds: an overflow is an error, not a wrapped count.
        IF used NOT BETWEEN -2147483648 AND 2147483647
           OR used + p_cost NOT BETWEEN -2147483648 AND 2147483647 THEN
            RAISE EXCEPTION 'integer out of range' USING ERRCODE = 'numeric_value_out_of_range';
        END IF;
        current := used + p_cost;
    END IF;
    message := 'Too many requests. Limit: ' || coalesce(p_limit::text, '')
        || CASE WHEN p_reason IN ('leased', 'concurrency_limited') THEN ' at once'
                ELSE ' per ' || coalesce(ratelimit.policy_describe_period(p_period_ms), '') END
        || '.'
        || CASE WHEN current IS NULL THEN '' ELSE ' Current: ' || current || '.' END
        || CASE WHEN retry_seconds IS NULL THEN ' Try again later.'
                WHEN retry_seconds = 1 THEN ' Try again in 1 second.'
                ELSE ' Try again in ' || retry_seconds || ' seconds.' END;
    IF p_shape = 'problem' THEN
        -- RFC 9457 with the draft's quota-exceeded type.
        RETURN pg_catalog.jsonb_build_object(
            'type', 'https://iana.org/assignments/http-problem-types#quota-exceeded',
            'title', 'Request cannot be satisfied as assigned quota has been exceeded',
            'status', 429,
            'detail', message,
            'violated-policies', pg_catalog.to_jsonb(
                CASE WHEN coalesce(pg_catalog.cardinality(p_violated), 0) = 0
                     THEN CASE WHEN p_policy IS NULL THEN '{}'::text[] ELSE ARRAY[p_policy] END
                     ELSE p_violated END));
    END IF;
    RETURN pg_catalog.jsonb_build_object(
        'error', 'Rate limit exceeded',
        'code', 'RATE_LIMIT_EXCEEDED',
        'message', message,
        'limit', p_limit,
        'current', current,
        'retryAfter', retry_seconds);
END
$$;

------------------------------------------------------------------------------------------------
-- The plan (src/pg/policies/policy_arguments.cpp, src/core/policy.cpp)
------------------------------------------------------------------------------------------------

-- A decision's instant in µs since the Unix epoch, as the C edition reads a timestamptz: the
-- infinities wrap as its 64-bit sum does (a crafted decision only).
CREATE FUNCTION ratelimit.policy_instant(p_at timestamptz)
RETURNS bigint
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$
    SELECT CASE WHEN p_at = 'infinity' THEN -9222425352054775809
                WHEN p_at = '-infinity' THEN -9222425352054775808
                ELSE (EXTRACT(epoch FROM p_at) * 1000000)::bigint END
$$;

-- p_key of the administrators' calls, as the C edition checks a key: 22004, or 22023 when empty
-- or longer than 256 bytes.
CREATE FUNCTION ratelimit.policy_key_argument(p_key text)
RETURNS void
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE
AS $$
BEGIN
    IF p_key IS NULL THEN
        RAISE EXCEPTION 'p_key must not be NULL' USING ERRCODE = 'null_value_not_allowed';
    END IF;
    IF pg_catalog.octet_length(p_key) = 0 THEN
        RAISE EXCEPTION 'p_key must not be empty' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF pg_catalog.octet_length(p_key) > 256 THEN
        RAISE EXCEPTION 'p_key must be at most 256 bytes long, got %', pg_catalog.octet_length(p_key)
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
END
$$;

-- The engines keep counters in tables, which a read-only transaction (or a hot standby) cannot
-- write: refused as the C edition refuses it, naming the call (p_function, as 'ratelimit.check()').
CREATE FUNCTION ratelimit.policy_require_writable(p_function text)
RETURNS void
LANGUAGE plpgsql STABLE PARALLEL SAFE
AS $$
BEGIN
    IF pg_catalog.current_setting('transaction_read_only') = 'on' THEN
        RAISE EXCEPTION 'cannot execute % in a read-only transaction', p_function
            USING ERRCODE = 'read_only_sql_transaction';
    END IF;
END
$$;

-- The memory engine is the C edition's: a policy on it is refused (0A000), naming p_argument.
CREATE FUNCTION ratelimit.policy_require_engine(p_argument text, p_policy text, p_engine text)
RETURNS void
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE
AS $$
BEGIN
    IF p_engine = 'memory' THEN
        RAISE EXCEPTION '%: policy "%" uses engine memory, which is not in the SQL edition of ratelimit',
            p_argument, p_policy
            USING ERRCODE = 'feature_not_supported',
                  HINT = 'Move the policy to engine table or unlogged, or use the C edition (CREATE EXTENSION ratelimit), which has the memory engine: docs/sql-edition.md lists what each edition holds.';
    END IF;
END
$$;

-- Reads and checks a policy call's arguments and plans it, as the C edition does, in its order
-- (the arrays, their sizes, the cost, the tier, then each policy and its subject; the calendar
-- windows; each policy's lookups, override and lists; the plan): raises the error it would raise,
-- or returns the plan. p_policies_argument and p_keys_argument name the arguments in errors,
-- with [i] after them unless p_scalar.
CREATE FUNCTION ratelimit.policy_plan(
    p_policies text[], p_keys text[], p_cost integer, p_tier text, p_ip inet, p_user uuid,
    p_now timestamptz, p_now_us bigint,
    p_policies_argument text, p_keys_argument text, p_scalar boolean)
RETURNS ratelimit.policy_plan
LANGUAGE plpgsql
AS $$
DECLARE
    plan ratelimit.policy_plan;
    requests ratelimit.policy_request[] := '{}';
    r ratelimit.policy_request;
    entry record;
    count integer;
    policy_base integer;
    key_base integer;
    policy_name text;
    subject_key text;
    policy_argument text;
    key_argument text;
    tier_found boolean := false;
    tier_multiplier numeric;
    tier_bypass boolean;
    lists boolean;
    penalty_blocks interval[];
    reset_jitter interval;
    denies boolean[];
    allows boolean[];
    deny_forever boolean[];
    deny_until timestamptz[];
    lookup pg_catalog.regprocedure;
    looked_up_tier text;
    looked_up_limit integer;
    calendar bigint[];
    multiplier numeric;
    base integer;
    bypass boolean;
    effective_burst bigint;
    bucket boolean;
    invalid text;
    refused text;
    max_delay_us bigint;
BEGIN
    -- The arrays (a scalar call's one element), then the cost.
    IF p_scalar THEN
        IF p_policies[1] IS NULL THEN
            RAISE EXCEPTION '% must not be NULL', p_policies_argument USING ERRCODE = 'null_value_not_allowed';
        END IF;
        IF p_keys[1] IS NULL THEN
            RAISE EXCEPTION '% must not be NULL', p_keys_argument USING ERRCODE = 'null_value_not_allowed';
        END IF;
    ELSE
        IF p_policies IS NULL THEN
            RAISE EXCEPTION '% must not be NULL', p_policies_argument USING ERRCODE = 'null_value_not_allowed';
        END IF;
        IF pg_catalog.array_ndims(p_policies) > 1 THEN
            RAISE EXCEPTION '% must be a one-dimensional array', p_policies_argument USING ERRCODE = 'invalid_parameter_value';
        END IF;
        IF p_keys IS NULL THEN
            RAISE EXCEPTION '% must not be NULL', p_keys_argument USING ERRCODE = 'null_value_not_allowed';
        END IF;
        IF pg_catalog.array_ndims(p_keys) > 1 THEN
            RAISE EXCEPTION '% must be a one-dimensional array', p_keys_argument USING ERRCODE = 'invalid_parameter_value';
        END IF;
    END IF;
    IF p_cost IS NULL THEN
        RAISE EXCEPTION 'p_cost must not be NULL' USING ERRCODE = 'null_value_not_allowed';
    END IF;
    -- The caller's address as the lists match it: one host, and an IPv4-mapped IPv6 address as
    -- the IPv4 address it carries.
    IF p_ip IS NOT NULL THEN
        plan.caller_ip := pg_catalog.host(p_ip)::inet;
        IF pg_catalog.family(plan.caller_ip) = 6 AND pg_catalog.host(plan.caller_ip) ~ '^::ffff:[0-9.]+$' THEN
            plan.caller_ip := pg_catalog.substr(pg_catalog.host(plan.caller_ip), 8)::inet;
        END IF;
    END IF;
    count := coalesce(pg_catalog.array_length(p_policies, 1), 0);
    IF count < 1 OR count > 16 THEN
        RAISE EXCEPTION '% must have 1 to 16 elements (got %)', p_policies_argument, count
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF coalesce(pg_catalog.array_length(p_keys, 1), 0) <> count THEN
        RAISE EXCEPTION '% must have as many elements as % (%, got %)', p_keys_argument, p_policies_argument,
            count, coalesce(pg_catalog.array_length(p_keys, 1), 0)
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF p_cost < 0 THEN
        RAISE EXCEPTION 'p_cost must not be negative (got %)', p_cost USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF p_tier IS NOT NULL THEN
        SELECT t.multiplier, t.bypass INTO tier_multiplier, tier_bypass FROM ratelimit.tiers t WHERE t.name = p_tier;
        IF NOT FOUND THEN
            RAISE EXCEPTION 'p_tier: unknown tier "%"', pg_catalog.left(p_tier, 64) USING ERRCODE = 'invalid_parameter_value';
        END IF;
        tier_found := true;
    END IF;

    -- Each policy and its subject: its row and its key's override, read together.
    policy_base := pg_catalog.array_lower(p_policies, 1) - 1;
    key_base := pg_catalog.array_lower(p_keys, 1) - 1;
    FOR i IN 1 .. count LOOP
        policy_name := p_policies[policy_base + i];
        subject_key := p_keys[key_base + i];
        policy_argument := CASE WHEN p_scalar THEN p_policies_argument ELSE p_policies_argument || '[' || i || ']' END;
        key_argument := CASE WHEN p_scalar THEN p_keys_argument ELSE p_keys_argument || '[' || i || ']' END;
        IF policy_name IS NULL THEN
            RAISE EXCEPTION '% must not be NULL', policy_argument USING ERRCODE = 'null_value_not_allowed';
        END IF;
        IF subject_key IS NULL THEN
            RAISE EXCEPTION '% must not be NULL', key_argument USING ERRCODE = 'null_value_not_allowed';
        END IF;
        r := NULL;
        SELECT p.name, p.engine, p.algorithm, p.period, p.time_zone, p."limit", p.max_delay,
               p.count_denied, p.shadow, p.hash_key, p.log_denials, p.penalty_blocks, p.penalty_decay,
               p.quota_unit, p.reset_jitter, p.burst,
               o.policy IS NOT NULL AND (o.expires_at IS NULL OR o.expires_at > p_now),
               o."limit", o.multiplier, o.bypass, p.tier_lookup, p.limit_lookup,
               EXISTS (SELECT FROM ratelimit.access_list)
          INTO r.name, r.engine, r.algorithm, r.period, r.time_zone, r.rule_limit, r.max_delay,
               r.count_denied, r.shadow, r.hash_key, r.log_denials, penalty_blocks, r.penalty_decay,
               r.quota_unit, reset_jitter, r.written_burst,
               r.override_applies, r.override_limit, r.override_multiplier, r.override_bypass,
               r.tier_lookup, r.limit_lookup, lists
          FROM ratelimit.policies p
          LEFT JOIN ratelimit.key_overrides o ON o.policy = p.name AND o.key = subject_key
         WHERE p.name = policy_name;
        IF r.name IS NULL THEN
            RAISE EXCEPTION '%: unknown policy "%"', policy_argument, pg_catalog.left(policy_name, 64)
                USING ERRCODE = 'invalid_parameter_value';
        END IF;
        FOR j IN 1 .. i - 1 LOOP
            IF requests[j].name = r.name THEN
                RAISE EXCEPTION '%: policy "%" is listed twice', policy_argument, r.name
                    USING ERRCODE = 'invalid_parameter_value';
            END IF;
        END LOOP;
        IF pg_catalog.octet_length(subject_key) = 0 THEN
            RAISE EXCEPTION '% must not be empty', key_argument USING ERRCODE = 'invalid_parameter_value';
        END IF;
        IF pg_catalog.octet_length(subject_key) > 256 THEN
            RAISE EXCEPTION '% must be at most 256 bytes long, got %', key_argument, pg_catalog.octet_length(subject_key)
                USING ERRCODE = 'invalid_parameter_value';
        END IF;
        -- Counted as a rate, a concurrency policy's limit would refill over its period instead
        -- of coming back when the work ends: refused, before anything is charged.
        IF r.quota_unit = 'concurrent-requests' THEN
            RAISE EXCEPTION '%: policy "%" is a concurrency policy (quota_unit concurrent-requests): it limits units in flight, not a rate',
                policy_argument, r.name
                USING ERRCODE = 'feature_not_supported',
                      HINT = 'Take a lease with ratelimit.acquire_policy() and release it (or end its transaction) when the work is done.';
        END IF;
        IF r.engine = 'memory' THEN
            PERFORM ratelimit.policy_require_engine(policy_argument, r.name, r.engine);
        END IF;
        r.key := subject_key;
        r.subject := CASE WHEN r.hash_key THEN ratelimit.hash_subject(subject_key) ELSE subject_key END;
        r.period_us := (EXTRACT(epoch FROM r.period) * 1000000)::bigint;
        r.tier_looked_up := false;
        IF penalty_blocks IS NOT NULL THEN
            r.penalty_blocks := ARRAY(SELECT (EXTRACT(epoch FROM b) * 1000000)::bigint
                                        FROM pg_catalog.unnest(penalty_blocks) AS b);
        END IF;
        IF reset_jitter IS NOT NULL THEN
            r.reset_jitter_us := (EXTRACT(epoch FROM reset_jitter) * 1000000)::bigint;
        END IF;
        requests[i] := r;
    END LOOP;

    -- A calendar period's window holding now: its length is the period the call decides with.
    FOR i IN 1 .. count LOOP
        IF requests[i].time_zone IS NOT NULL OR pg_catalog.date_part('month', requests[i].period) <> 0 THEN
            r := requests[i];
            calendar := ratelimit.calendar_window(
                CASE WHEN pg_catalog.date_part('month', r.period) <> 0 THEN 3
                     WHEN pg_catalog.date_part('day', r.period) = 7 THEN 2 ELSE 1 END::smallint,
                r.time_zone, p_now_us);
            r.period_us := calendar[2] - calendar[1];
            requests[i] := r;
        END IF;
    END LOOP;

    -- Each policy's lookups, asked for the subject as given: the tier replaces the call's for
    -- this policy (none when it answers NULL); the limit replaces the policy's.
    FOR i IN 1 .. count LOOP
        CONTINUE WHEN requests[i].tier_lookup IS NULL AND requests[i].limit_lookup IS NULL;
        r := requests[i];
        policy_argument := CASE WHEN p_scalar THEN p_policies_argument ELSE p_policies_argument || '[' || i || ']' END;
        IF r.tier_lookup IS NOT NULL THEN
            lookup := pg_catalog.to_regprocedure(r.tier_lookup);
            IF lookup IS NULL THEN
                RAISE EXCEPTION '%: policy "%"''s tier_lookup function no longer exists', policy_argument, r.name
                    USING ERRCODE = 'invalid_parameter_value';
            END IF;
            -- The function the policy names: its name as its OID gives it, its argument types.
            EXECUTE 'SELECT ' || lookup::pg_catalog.regproc::text || '($1, $2)'
               INTO looked_up_tier USING r.key, p_user;
            r.tier_looked_up := true;
            IF looked_up_tier IS NOT NULL THEN
                SELECT t.multiplier, t.bypass INTO r.tier_multiplier, r.tier_bypass
                  FROM ratelimit.tiers t WHERE t.name = looked_up_tier;
                IF NOT FOUND THEN
                    RAISE EXCEPTION '%: policy "%"''s tier_lookup gave an unknown tier "%"', policy_argument, r.name,
                        pg_catalog.left(looked_up_tier, 64)
                        USING ERRCODE = 'invalid_parameter_value';
                END IF;
            END IF;
        END IF;
        IF r.limit_lookup IS NOT NULL THEN
            lookup := pg_catalog.to_regprocedure(r.limit_lookup);
            IF lookup IS NULL THEN
                RAISE EXCEPTION '%: policy "%"''s limit_lookup function no longer exists', policy_argument, r.name
                    USING ERRCODE = 'invalid_parameter_value';
            END IF;
            EXECUTE 'SELECT ' || lookup::pg_catalog.regproc::text || '($1, $2)'
               INTO looked_up_limit USING r.key, p_user;
            IF looked_up_limit IS NOT NULL THEN
                IF looked_up_limit < 1 THEN
                    RAISE EXCEPTION '%: policy "%"''s limit_lookup gave a limit of % (at least 1)', policy_argument,
                        r.name, looked_up_limit
                        USING ERRCODE = 'invalid_parameter_value';
                END IF;
                r.rule_limit := looked_up_limit;
            END IF;
        END IF;
        requests[i] := r;
    END LOOP;

    -- The lists: a deny entry wins over an allow entry; an entry matches when it is for this
    -- policy or every policy, has not expired, and names the caller's user, the subject as
    -- given, or a range holding the caller's address.
    IF lists THEN
        denies := pg_catalog.array_fill(false, ARRAY[count]);
        allows := denies;
        deny_forever := denies;
        deny_until := pg_catalog.array_fill(NULL::timestamptz, ARRAY[count]);
        FOR entry IN
            SELECT a.action, a.policy, a.key, a.expires_at,
                   coalesce(a.user_id = p_user, false) OR coalesce(a.ip >>= plan.caller_ip, false) AS caller_matches
              FROM ratelimit.access_list a
             WHERE (a.expires_at IS NULL OR a.expires_at > p_now)
               AND (a.user_id = p_user OR a.key = ANY (p_keys) OR a.ip >>= plan.caller_ip)
        LOOP
            FOR i IN 1 .. count LOOP
                IF (entry.policy IS NULL OR entry.policy = requests[i].name)
                   AND (entry.caller_matches OR entry.key = requests[i].key) THEN
                    IF entry.action = 'allow' THEN
                        allows[i] := true;
                    ELSE
                        denies[i] := true;
                        IF entry.expires_at IS NULL OR entry.expires_at = 'infinity' THEN
                            deny_forever[i] := true;
                        ELSIF deny_until[i] IS NULL OR entry.expires_at > deny_until[i] THEN
                            deny_until[i] := entry.expires_at;
                        END IF;
                    END IF;
                END IF;
            END LOOP;
        END LOOP;
    END IF;

    -- The plan: policies in the order given; the first deny entry or impossible cost ends the
    -- call; an allow entry, an override's or tier's bypass skip a policy. A limit out of range
    -- is refused only once the call gets to decide the limits.
    plan.kind := 'skipped';
    plan.allow_listed := false;
    FOR i IN 1 .. count LOOP
        r := requests[i];
        IF lists THEN
            IF denies[i] THEN
                r.step := 'deny_list';
                IF NOT deny_forever[i] THEN
                    r.deny_until_us := (EXTRACT(epoch FROM deny_until[i]) * 1000000)::bigint;
                END IF;
                requests[i] := r;
                plan.kind := 'deny_list';
                plan.stop := i;
                plan.requests := requests;
                RETURN plan;
            END IF;
            IF allows[i] THEN
                plan.allow_listed := true;
                r.step := 'skipped';
                requests[i] := r;
                CONTINUE;
            END IF;
        END IF;
        -- The key's unexpired override wins over the tier (even when it changes nothing);
        -- multiplied limits and bursts are rounded down, within [1, 2^31 - 1].
        base := r.rule_limit;
        multiplier := NULL;
        bypass := false;
        IF r.override_applies THEN
            bypass := r.override_bypass;
            IF r.override_limit IS NOT NULL THEN
                base := r.override_limit;
            ELSE
                multiplier := r.override_multiplier;
            END IF;
        ELSIF r.tier_looked_up THEN
            IF r.tier_multiplier IS NOT NULL THEN
                bypass := r.tier_bypass;
                multiplier := r.tier_multiplier;
            END IF;
        ELSIF tier_found THEN
            bypass := tier_bypass;
            multiplier := tier_multiplier;
        END IF;
        IF multiplier IS NULL THEN
            r."limit" := base;
            r.burst := r.written_burst;
        ELSE
            r."limit" := GREATEST(1, LEAST(2147483647, pg_catalog.floor(base * multiplier)));
            r.burst := CASE WHEN r.written_burst IS NOT NULL
                            THEN GREATEST(1, LEAST(2147483647, pg_catalog.floor(r.written_burst * multiplier))) END;
        END IF;
        bucket := r.algorithm IN ('token_bucket', 'gcra');
        effective_burst := coalesce(r.burst, r."limit");
        invalid := NULL;
        IF NOT bypass THEN
            max_delay_us := coalesce((EXTRACT(epoch FROM r.max_delay) * 1000000)::bigint, 0);
            invalid := CASE
                WHEN r.period_us < 1000 THEN 'p_period must be at least 1 millisecond'
                WHEN r.period_us > 31536000000000 THEN 'p_period must be at most 365 days'
                WHEN NOT bucket AND effective_burst <> r."limit" THEN 'p_burst applies only to token_bucket and gcra'
                WHEN effective_burst > r."limit"
                     AND effective_burst::numeric * r.period_us > r."limit"::numeric * 31536000000000
                    THEN 'p_burst is too large: refilling it (p_burst * p_period / p_limit) must take at most 365 days'
                WHEN max_delay_us < 0 THEN 'p_max_wait must not be negative'
                WHEN max_delay_us > 31536000000000 THEN 'p_max_wait must be at most 365 days'
                WHEN max_delay_us > 0 AND NOT bucket THEN 'p_max_wait applies only to token_bucket and gcra (got ' || r.algorithm || ')'
                END;
            IF invalid IS NOT NULL THEN
                invalid := CASE WHEN tier_found THEN 'p_tier' ELSE p_policies_argument END
                           || ': the limit it gives is refused: ' || invalid;
                refused := coalesce(refused, invalid);
            END IF;
        END IF;
        IF bypass THEN
            r.step := 'skipped';
            requests[i] := r;
            CONTINUE;
        END IF;
        IF p_cost > (CASE WHEN bucket THEN effective_burst ELSE r."limit" END) THEN
            -- Answering needs a peek under this limit, which refuses it as well.
            IF invalid IS NOT NULL THEN
                RAISE EXCEPTION '%', invalid USING ERRCODE = 'invalid_parameter_value';
            END IF;
            r.step := 'cost_exceeds_limit';
            requests[i] := r;
            plan.kind := 'cost_exceeds_limit';
            plan.stop := i;
            plan.requests := requests;
            RETURN plan;
        END IF;
        r.step := 'checked';
        requests[i] := r;
        plan.kind := 'decide';
    END LOOP;
    IF refused IS NOT NULL THEN
        RAISE EXCEPTION '%', refused USING ERRCODE = 'invalid_parameter_value';
    END IF;
    plan.requests := requests;
    RETURN plan;
END
$$;

------------------------------------------------------------------------------------------------
-- The decision and its effects (src/core/policy_decision.cpp, src/pg/policies/policy_effects.cpp)
------------------------------------------------------------------------------------------------

-- A setting of the C edition's module, as this server holds it: a placeholder any session may
-- set, or nothing (NULL) when unset.
CREATE FUNCTION ratelimit.policy_setting(p_name text)
RETURNS text
LANGUAGE sql STABLE PARALLEL SAFE
AS $$ SELECT NULLIF(pg_catalog.btrim(pg_catalog.current_setting(p_name, true)), '') $$;

-- Logs the denial of p_request, decided under its limit with the wait p_retry_after_ms, as the C
-- edition's row (src/pg/policies/denial_log.cpp): a ring of ratelimit.denial_log_size slots,
-- ratelimit.denial_log_sample_rate of the denials logged (the C edition's defaults, 10000 and 1,
-- when the settings are not set). Written in the caller's transaction, as the log's owner; a
-- read-only transaction logs nothing.
CREATE FUNCTION ratelimit.policy_log_denial(
    p_request ratelimit.policy_request, p_retry_after_ms bigint, p_cost integer, p_user uuid,
    p_caller_ip inet, p_now timestamptz)
RETURNS void
LANGUAGE plpgsql
AS $$
DECLARE
    size_setting constant text := ratelimit.policy_setting('ratelimit.denial_log_size');
    rate_setting constant text := ratelimit.policy_setting('ratelimit.denial_log_sample_rate');
    size integer := 10000;
    rate double precision := 1;
    period_ms constant bigint := (p_request.period_us + 500) / 1000;
    thousandths constant bigint := (p_request.period_us * 1000 + 30000000) / 60000000;
    message text;
    ip_text text;
    event jsonb;
    room constant integer := 1760;
    excess integer;
    identifier bytea;
    escaped integer;
    kept integer;
    step integer;
    b integer;
BEGIN
    IF size_setting ~ '^[0-9]{1,9}$' THEN
        size := LEAST(size_setting::integer, 10000000);
    END IF;
    IF rate_setting ~ '^([0-9]+([.][0-9]*)?|[.][0-9]+)([eE][-+]?[0-9]+)?$' THEN
        rate := LEAST(rate_setting::double precision, 1);
    END IF;
    IF size <= 0 OR NOT (rate >= 1 OR pg_catalog.random() < rate) THEN
        RETURN;
    END IF;
    IF pg_catalog.current_setting('transaction_read_only') = 'on' THEN
        RETURN;
    END IF;
    message := 'Rate limit exceeded: ' || p_request."limit"
        || CASE WHEN p_request."limit" = 1 THEN ' request per ' ELSE ' requests per ' END
        || ratelimit.policy_describe_period(period_ms);
    IF p_caller_ip IS NOT NULL THEN
        ip_text := pg_catalog.host(p_caller_ip);
        -- A policy that hashes its keys keeps the caller's address hashed too.
        IF p_request.hash_key THEN
            ip_text := ratelimit.hash_subject(ip_text);
        END IF;
    END IF;
    event := pg_catalog.jsonb_build_object(
        'identifier', p_request.subject,
        'policy', p_request.name,
        'limit', p_request."limit",
        'window_minutes', ((thousandths / 1000) || '.' || pg_catalog.lpad((thousandths % 1000)::text, 3, '0'))::numeric,
        'cost', p_cost,
        'retry_after_ms', p_retry_after_ms,
        'user_id', p_user::text,
        'ip', ip_text);
    -- An identifier whose escapes make the event longer than the C edition's queue entries hold
    -- (a key of control characters takes six bytes each) is shortened and marked, as there.
    IF pg_catalog.octet_length(event::text) > room THEN
        excess := pg_catalog.octet_length(event::text) - room + 40;
        identifier := pg_catalog.convert_to(p_request.subject, pg_catalog.getdatabaseencoding());
        escaped := 0;
        FOR i IN 0 .. pg_catalog.octet_length(identifier) - 1 LOOP
            b := pg_catalog.get_byte(identifier, i);
            escaped := escaped + CASE WHEN b IN (34, 92, 8, 12, 10, 13, 9) THEN 2 WHEN b < 32 THEN 6 ELSE 1 END;
        END LOOP;
        escaped := CASE WHEN escaped > excess THEN escaped - excess ELSE 0 END;
        kept := 0;
        step := 0;
        WHILE kept < pg_catalog.octet_length(identifier) LOOP
            b := pg_catalog.get_byte(identifier, kept);
            step := step + CASE WHEN b IN (34, 92, 8, 12, 10, 13, 9) THEN 2 WHEN b < 32 THEN 6 ELSE 1 END;
            EXIT WHEN step > escaped;
            kept := kept + 1;
        END LOOP;
        -- Not within a UTF-8 character.
        WHILE kept > 0 AND kept < pg_catalog.octet_length(identifier)
              AND (pg_catalog.get_byte(identifier, kept) & 192) = 128 LOOP
            kept := kept - 1;
        END LOOP;
        event := event || pg_catalog.jsonb_build_object(
            'identifier', pg_catalog.convert_from(pg_catalog.substring(identifier, 1, kept), pg_catalog.getdatabaseencoding()),
            'identifier_truncated', true);
    END IF;
    INSERT INTO ratelimit.denial_log AS l (slot, logged_at, event_type, severity, source, status, error_message, event_data)
    VALUES ((pg_catalog.nextval('ratelimit.denial_log_position') % size)::integer, p_now, 'rate_limit_violation',
            'warning', 'ratelimit', CASE WHEN p_request.shadow THEN 'shadow' ELSE 'blocked' END, message, event)
    ON CONFLICT (slot) DO UPDATE SET logged_at = EXCLUDED.logged_at, event_type = EXCLUDED.event_type,
        severity = EXCLUDED.severity, source = EXCLUDED.source, status = EXCLUDED.status,
        error_message = EXCLUDED.error_message, event_data = EXCLUDED.event_data;
    -- A smaller ring than before: the slots past its end go.
    DELETE FROM ratelimit.denial_log WHERE slot >= size;
END
$$;

-- Decides a planned call (src/core/policy_decision.cpp, decide_planned_policy_call): the answer
-- of its kind; for a decided plan, the checked limits as one, then the penalties the answer
-- earned or is under, the count_denied blocks and the denial log, in that order. Waits are kept
-- in microseconds, as the C edition keeps them, and rounded up to milliseconds in the answer.
-- With p_reset_format, the outcome also holds check_http's answer (src/pg/policies/check_http.cpp):
-- allowed, status, the headers (with the reported policy's qu and pk, the call's other enforced
-- policies, and a random 0 to each policy's reset_jitter added to the reset they report), the 429
-- body, and the decision.
CREATE FUNCTION ratelimit.policy_decide(
    p_plan ratelimit.policy_plan, p_cost integer, p_user uuid, p_now timestamptz, p_now_us bigint,
    p_reset_format text DEFAULT NULL, p_body_shape text DEFAULT NULL)
RETURNS ratelimit.policy_outcome
LANGUAGE plpgsql
AS $$
DECLARE
    requests ratelimit.policy_request[] := p_plan.requests;
    r ratelimit.policy_request;
    d ratelimit.policy_decision;
    outcome ratelimit.policy_outcome;
    decided ratelimit.key_decision;
    decisions ratelimit.key_decision[];
    checked integer[] := '{}';
    enforced boolean[] := '{}';
    engines text[] := '{}';
    spaces text[] := '{}';
    subjects text[] := '{}';
    limits integer[] := '{}';
    periods interval[] := '{}';
    algorithms text[] := '{}';
    bursts integer[] := '{}';
    time_zones text[] := '{}';
    max_waits interval[] := '{}';
    decided_tiers record;
    tiers integer;
    allowed boolean;
    binding integer;
    delay bigint := 0;
    retry_after bigint;
    reset_after bigint;
    penalty_level integer;
    blocks integer[] := '{}';
    penalties integer[] := '{}';
    earned integer := 0;
    logged integer[] := '{}';
    logged_waits bigint[] := '{}';
    shadow_denied text[] := '{}';
    steps integer;
    level integer;
    block bigint;
    -- check_http's answer.
    reported integer;
    violated text[];
    quota_unit text;
    secret bytea;
    partition_key text;
    other_key text;
    other_policies text := '';
    other_fields text := '';
    retry_ms bigint;
    reset_ms bigint;
    wait_ms bigint;
    seconds bigint;
    headers jsonb;
    body jsonb;
BEGIN
    tiers := 0;
    IF p_plan.kind = 'skipped' THEN
        d := ROW(true, NULL, NULL, NULL, 0, 0, NULL, p_cost,
                 CASE WHEN p_plan.allow_listed THEN 'allow_list' ELSE 'bypass' END, '{}', p_now, NULL);
    ELSIF p_plan.kind = 'deny_list' THEN
        -- The limit as written: the lists come before any tier or override.
        r := requests[p_plan.stop];
        retry_after := r.deny_until_us - p_now_us;
        d := ROW(false, r.name, r.rule_limit, 0,
                 CASE WHEN retry_after <= 0 THEN 0 ELSE (retry_after + 999) / 1000 END,
                 CASE WHEN retry_after <= 0 THEN 0 ELSE (retry_after + 999) / 1000 END,
                 (r.period_us + 500) / 1000, p_cost, 'deny_list', '{}', p_now, NULL);
        r.outcome := 'denied';
        requests[p_plan.stop] := r;
    ELSIF p_plan.kind = 'cost_exceeds_limit' THEN
        -- A cost the policy could never allow: denied, nothing charged; the key as it stands,
        -- by a one-unit peek.
        r := requests[p_plan.stop];
        decided := ratelimit.key_decide_micros(r.engine, r.name, r.subject, r."limit", r.period, 1, r.algorithm,
                                               r.burst, r.time_zone, r.max_delay, 'peek', p_now_us);
        d := ROW(false, r.name, decided."limit", decided.remaining, NULL,
                 CASE WHEN decided.reset_after <= 0 THEN 0 ELSE (decided.reset_after + 999) / 1000 END,
                 (r.period_us + 500) / 1000, p_cost, 'cost_exceeds_limit', '{}', p_now, NULL);
        r.outcome := 'denied';
        requests[p_plan.stop] := r;
    ELSE
        -- The engines keep their counters in tables, which a read-only transaction cannot write.
        IF pg_catalog.current_setting('transaction_read_only') = 'on' THEN
            RAISE EXCEPTION 'cannot execute ratelimit.check() in a read-only transaction'
                USING ERRCODE = 'read_only_sql_transaction';
        END IF;
        FOR i IN 1 .. pg_catalog.array_length(requests, 1) LOOP
            IF requests[i].step = 'checked' THEN
                checked := checked || i;
                enforced := enforced || NOT requests[i].shadow;
            END IF;
        END LOOP;
        tiers := pg_catalog.array_length(checked, 1);
        -- The checked limits as one: if any enforced limit denies, none is charged. One limit
        -- alone is one decision: a denial charges nothing and reports the key as it stands.
        IF tiers = 1 THEN
            r := requests[checked[1]];
            decided := ratelimit.key_decide_micros(r.engine, r.name, r.subject, r."limit", r.period, p_cost,
                                                   r.algorithm, r.burst, r.time_zone, r.max_delay, 'consume',
                                                   p_now_us);
            decisions := ARRAY[decided];
            allowed := decided.allowed OR r.shadow;
        ELSE
            FOR k IN 1 .. tiers LOOP
                r := requests[checked[k]];
                engines := engines || r.engine;
                spaces := spaces || r.name;
                subjects := subjects || r.subject;
                limits := limits || r."limit";
                periods := periods || r.period;
                algorithms := algorithms || r.algorithm;
                bursts := bursts || r.burst;
                time_zones := time_zones || r.time_zone;
                max_waits := max_waits || r.max_delay;
            END LOOP;
            decided_tiers := ratelimit.decide_tiers(engines, spaces, subjects, limits, periods, algorithms, bursts,
                                                    time_zones, max_waits, enforced, p_cost, p_now_us);
            allowed := decided_tiers.allowed;
            decisions := decided_tiers.decisions;
        END IF;

        -- The answer (src/core/policy.cpp, answer_decided): the first denying policy in the order
        -- given, else the enforced one with the least remaining; the longest wait among the
        -- denying ones; count_denied keeps a denied key waiting a full period from now.
        FOR k IN 1 .. tiers LOOP
            r := requests[checked[k]];
            decided := decisions[k];
            r.decided_limit := decided."limit";
            r.decided_remaining := decided.remaining;
            r.decided_retry := decided.retry_after;
            r.decided_reset := decided.reset_after;
            IF NOT decided.allowed AND NOT enforced[k] THEN
                r.outcome := 'shadow_denied';
                shadow_denied := shadow_denied || r.name;
            ELSIF NOT decided.allowed THEN
                r.outcome := 'denied';
                IF binding IS NULL THEN
                    binding := k;
                END IF;
                IF r.count_denied THEN
                    blocks := blocks || checked[k];
                    decided.retry_after := GREATEST(decided.retry_after, r.period_us);
                    decided.reset_after := GREATEST(decided.reset_after, decided.retry_after);
                    decisions[k] := decided;
                END IF;
                retry_after := GREATEST(retry_after, decided.retry_after);
                IF r.penalty_blocks IS NOT NULL THEN
                    -- A denial while blocked earns nothing more: it reads the level it is under,
                    -- after every penalty earned.
                    IF decided.blocked THEN
                        penalties := penalties || checked[k];
                    ELSE
                        penalties := pg_catalog.array_cat(penalties[1:earned],
                                                          checked[k] || penalties[earned + 1:]);
                        earned := earned + 1;
                    END IF;
                END IF;
            ELSIF allowed THEN
                -- Allowed here; when the call as a whole was denied, nothing was taken. A policy
                -- with max_delay may have admitted the call for later: it goes when the last of
                -- them has come round.
                r.outcome := 'allowed';
                IF enforced[k] THEN
                    delay := GREATEST(delay, decided.retry_after);
                    IF binding IS NULL OR decided.remaining < decisions[binding].remaining THEN
                        binding := k;
                    END IF;
                END IF;
            END IF;
            IF NOT decided.allowed AND r.log_denials THEN
                logged := logged || checked[k];
                logged_waits := logged_waits || decided.retry_after;
            END IF;
            requests[checked[k]] := r;
        END LOOP;
        -- Only shadow policies were checked: the first of them is reported.
        binding := coalesce(binding, 1);
        IF allowed THEN
            retry_after := delay;
        END IF;
        reset_after := decisions[binding].reset_after;

        -- Penalties: each one earned charges the key's level (a token bucket of one unit per
        -- penalty_decay, as deep as the ladder, charged past empty) and blocks the key for the
        -- step of the level it reached; a key denied while blocked only reads its level. The
        -- answer then says 'penalty', the highest level, and waits at least until the block ends.
        FOR k IN 1 .. coalesce(pg_catalog.array_length(penalties, 1), 0) LOOP
            r := requests[penalties[k]];
            steps := pg_catalog.array_length(r.penalty_blocks, 1);
            decided := ratelimit.key_decide_micros(r.engine, r.name || '/penalty', r.subject, 1, r.penalty_decay, 1,
                                                   'token_bucket', steps, NULL, NULL,
                                                   CASE WHEN k <= earned THEN 'charge' ELSE 'peek' END, p_now_us);
            level := GREATEST(0, LEAST(steps, steps - decided.remaining));
            block := 0;
            IF k <= earned THEN
                IF level >= 1 THEN
                    block := r.penalty_blocks[LEAST(level, steps)];
                END IF;
                PERFORM ratelimit.key_block(r.engine, r.name, r.subject, p_now_us + block, p_now_us);
            END IF;
            IF level >= 1 AND NOT allowed THEN
                penalty_level := GREATEST(coalesce(penalty_level, 0), level);
                IF block > 0 THEN
                    retry_after := GREATEST(coalesce(retry_after, block), block);
                    reset_after := GREATEST(coalesce(reset_after, block), block);
                END IF;
            END IF;
        END LOOP;
        r := requests[checked[binding]];
        d := ROW(allowed, r.name, decisions[binding]."limit", decisions[binding].remaining,
                 CASE WHEN retry_after <= 0 THEN 0 ELSE (retry_after + 999) / 1000 END,
                 CASE WHEN reset_after <= 0 THEN 0 ELSE (reset_after + 999) / 1000 END,
                 (r.period_us + 500) / 1000, p_cost,
                 CASE WHEN penalty_level IS NOT NULL THEN 'penalty' WHEN NOT allowed THEN 'limited'
                      WHEN delay > 0 THEN 'delayed' ELSE 'within_limits' END,
                 shadow_denied, p_now, penalty_level);

        -- count_denied: the attempt counts, so the key is blocked for a full period from now.
        FOR k IN 1 .. coalesce(pg_catalog.array_length(blocks, 1), 0) LOOP
            r := requests[blocks[k]];
            PERFORM ratelimit.key_block(r.engine, r.name, r.subject, p_now_us + r.period_us, p_now_us);
        END LOOP;

        -- The denial log, with the limit each policy decided with and the wait it reported.
        FOR k IN 1 .. coalesce(pg_catalog.array_length(logged, 1), 0) LOOP
            PERFORM ratelimit.policy_log_denial(requests[logged[k]],
                                                CASE WHEN logged_waits[k] <= 0 THEN 0 ELSE (logged_waits[k] + 999) / 1000 END,
                                                p_cost, p_user, p_plan.caller_ip, p_now);
        END LOOP;
    END IF;
    outcome.decision := d;
    IF p_reset_format IS NULL THEN
        RETURN outcome;
    END IF;

    violated := '{}';
    FOR i IN 1 .. pg_catalog.array_length(requests, 1) LOOP
        IF requests[i].outcome = 'denied' THEN
            violated := violated || requests[i].name;
        END IF;
        IF requests[i].name = d.policy THEN
            reported := i;
        END IF;
    END LOOP;
    retry_ms := d.retry_after_ms;
    reset_ms := d.reset_after_ms;
    IF reported IS NOT NULL THEN
        r := requests[reported];
        quota_unit := r.quota_unit;
        SELECT s.secret INTO secret FROM ratelimit.partition_key_secret s LIMIT 1;
        IF pg_catalog.octet_length(secret) >= 16 THEN
            partition_key := ratelimit.policy_partition_key(secret, r.name, r.key);
        END IF;
        -- Only the reset the headers report moves: the window and the decision stay exact.
        IF r.reset_jitter_us > 0 THEN
            IF d.allowed THEN
                reset_ms := reset_ms + pg_catalog.floor(pg_catalog.random() * (r.reset_jitter_us / 1000 + 1))::bigint;
            ELSE
                retry_ms := retry_ms + pg_catalog.floor(pg_catalog.random() * (r.reset_jitter_us / 1000 + 1))::bigint;
            END IF;
        END IF;
        -- The call's other enforced policies, each as its key stands after the call (as the
        -- decision reported it), when the call got to decide its limits.
        IF r.step = 'checked' THEN
            FOR k IN 1 .. tiers LOOP
                r := requests[checked[k]];
                CONTINUE WHEN r.shadow OR checked[k] = reported;
                other_key := CASE WHEN pg_catalog.octet_length(secret) >= 16
                                  THEN ';pk=' || ratelimit.policy_partition_key(secret, r.name, r.key) ELSE '' END;
                -- Its wait (until it would allow when it denies, until it is full again
                -- otherwise) in whole seconds, rounded up, at least 1 for a denial.
                wait_ms := CASE WHEN r.outcome = 'denied' THEN r.decided_retry ELSE r.decided_reset END;
                wait_ms := CASE WHEN wait_ms <= 0 THEN 0 ELSE (wait_ms + 999) / 1000 END
                           + CASE WHEN r.reset_jitter_us > 0
                                  THEN pg_catalog.floor(pg_catalog.random() * (r.reset_jitter_us / 1000 + 1))::bigint
                                  ELSE 0 END;
                seconds := wait_ms / 1000 + CASE WHEN wait_ms % 1000 <> 0 AND wait_ms > 0 THEN 1 ELSE 0 END;
                other_policies := other_policies || ', ' || ratelimit.policy_sf_string(r.name) || ';q=' || r.decided_limit
                    || CASE WHEN r.quota_unit IS NULL OR r.quota_unit IN ('', 'requests') THEN ''
                            ELSE ';qu=' || ratelimit.policy_sf_string(r.quota_unit) END
                    || ';w=' || (((r.period_us + 500) / 1000 + 999) / 1000) || other_key;
                other_fields := other_fields || ', ' || ratelimit.policy_sf_string(r.name)
                    || ';r=' || GREATEST(r.decided_remaining, 0) || ';t='
                    || CASE WHEN r.outcome = 'denied' THEN GREATEST(seconds, 1) ELSE seconds END || other_key;
            END LOOP;
        END IF;
    END IF;
    headers := ratelimit.policy_http_headers(d.allowed, d.policy, d."limit", d.remaining, retry_ms, reset_ms,
                                             d.period_ms, p_now_us, d.reason, quota_unit, partition_key,
                                             other_policies, other_fields, p_reset_format = 'unix');
    IF NOT d.allowed THEN
        body := ratelimit.policy_http_body(d.allowed, d.policy, d."limit", d.remaining, d.retry_after_ms,
                                           d.period_ms, d.cost, d.reason, violated, p_body_shape);
        IF p_body_shape = 'problem' THEN
            headers := headers || '{"Content-Type": "application/problem+json"}'::jsonb;
        END IF;
    END IF;
    outcome.http := pg_catalog.jsonb_build_object(
        'allowed', d.allowed,
        'status', CASE WHEN d.allowed THEN 200 ELSE 429 END,
        'headers', headers,
        'body', body,
        'decision', pg_catalog.to_jsonb(d));
    RETURN outcome;
END
$$;

-- The common call, decided in fewer steps than policy_plan and policy_decide take (each step a
-- PL/pgSQL statement to prepare in every transaction): one policy, given once, no tier, a valid
-- subject and cost, on a table engine, with no deny or allow entry anywhere, no override row for
-- the subject, no lookups, no calendar period, no penalties, count_denied, shadow or denial log,
-- and a cost the limit can allow. It decides exactly as those two do for such a call; for any other
-- call it returns NULL before anything is read or written that the general path would not, and
-- the caller takes the general path.
CREATE FUNCTION ratelimit.policy_fast(
    p_policies text[], p_keys text[], p_cost integer, p_tier text, p_now timestamptz, p_now_us bigint,
    p_reset_format text DEFAULT NULL, p_body_shape text DEFAULT NULL)
RETURNS ratelimit.policy_outcome
LANGUAGE plpgsql
AS $$
DECLARE
    subject constant text := p_keys[1];
    name text;
    -- The subject, or its SHA-256 when the policy hashes its keys.
    counter_key text;
    engine text;
    algorithm text;
    period interval;
    "limit" integer;
    burst integer;
    max_delay interval;
    quota_unit text;
    reset_jitter interval;
    plain boolean;
    secret bytea;
    decided ratelimit.key_decision;
    d ratelimit.policy_decision;
    outcome ratelimit.policy_outcome;
    retry_ms bigint;
    reset_ms bigint;
    headers jsonb;
BEGIN
    IF pg_catalog.array_length(p_policies, 1) IS DISTINCT FROM 1 OR pg_catalog.array_lower(p_policies, 1) <> 1
       OR pg_catalog.array_length(p_keys, 1) IS DISTINCT FROM 1 OR pg_catalog.array_lower(p_keys, 1) <> 1
       OR p_cost IS NULL OR p_cost < 0 OR p_tier IS NOT NULL
       OR coalesce(pg_catalog.octet_length(subject) NOT BETWEEN 1 AND 256, true) THEN
        RETURN NULL;
    END IF;
    SELECT p.name, CASE WHEN p.hash_key THEN ratelimit.hash_subject(subject) ELSE subject END,
           p.engine, p.algorithm, p.period, p."limit", p.burst, p.max_delay, p.quota_unit, p.reset_jitter,
           p.engine IN ('table', 'unlogged') AND p.quota_unit IS DISTINCT FROM 'concurrent-requests'
           AND p.tier_lookup IS NULL AND p.limit_lookup IS NULL AND p.time_zone IS NULL
           AND pg_catalog.date_part('month', p.period) = 0 AND p.penalty_blocks IS NULL
           AND NOT (p.count_denied OR p.shadow OR p.log_denials)
           AND NOT EXISTS (SELECT FROM ratelimit.access_list)
           AND NOT EXISTS (SELECT FROM ratelimit.key_overrides o WHERE o.policy = p.name AND o.key = subject),
           CASE WHEN p_reset_format IS NOT NULL THEN (SELECT s.secret FROM ratelimit.partition_key_secret s LIMIT 1) END
      INTO name, counter_key, engine, algorithm, period, "limit", burst, max_delay, quota_unit, reset_jitter, plain, secret
      FROM ratelimit.policies p
     WHERE p.name = p_policies[1];
    IF NOT coalesce(plain, false)
       OR p_cost > (CASE WHEN algorithm IN ('token_bucket', 'gcra') THEN coalesce(burst, "limit") ELSE "limit" END)
       OR pg_catalog.current_setting('transaction_read_only') = 'on' THEN
        RETURN NULL;
    END IF;
    decided := ratelimit.key_decide_micros(engine, name, counter_key, "limit", period, p_cost, algorithm, burst, NULL,
                                           max_delay, 'consume', p_now_us);
    retry_ms := CASE WHEN decided.retry_after <= 0 THEN 0 ELSE (decided.retry_after + 999) / 1000 END;
    reset_ms := CASE WHEN decided.reset_after <= 0 THEN 0 ELSE (decided.reset_after + 999) / 1000 END;
    d := ROW(decided.allowed, name, decided."limit", decided.remaining, retry_ms, reset_ms,
             ((EXTRACT(epoch FROM period) * 1000000)::bigint + 500) / 1000, p_cost,
             CASE WHEN NOT decided.allowed THEN 'limited' WHEN retry_ms > 0 THEN 'delayed' ELSE 'within_limits' END,
             '{}', p_now, NULL);
    outcome.decision := d;
    IF p_reset_format IS NULL THEN
        RETURN outcome;
    END IF;
    -- check_http's answer, as policy_decide builds it for one policy.
    IF reset_jitter > interval '0' THEN
        IF d.allowed THEN
            reset_ms := reset_ms + pg_catalog.floor(pg_catalog.random() * ((EXTRACT(epoch FROM reset_jitter) * 1000000)::bigint / 1000 + 1))::bigint;
        ELSE
            retry_ms := retry_ms + pg_catalog.floor(pg_catalog.random() * ((EXTRACT(epoch FROM reset_jitter) * 1000000)::bigint / 1000 + 1))::bigint;
        END IF;
    END IF;
    headers := ratelimit.policy_http_headers(
        d.allowed, name, d."limit", d.remaining, retry_ms, reset_ms, d.period_ms, p_now_us, d.reason, quota_unit,
        CASE WHEN pg_catalog.octet_length(secret) >= 16 THEN ratelimit.policy_partition_key(secret, name, subject) END,
        '', '', p_reset_format = 'unix');
    IF NOT d.allowed AND p_body_shape = 'problem' THEN
        headers := headers || '{"Content-Type": "application/problem+json"}'::jsonb;
    END IF;
    outcome.http := pg_catalog.jsonb_build_object(
        'allowed', d.allowed,
        'status', CASE WHEN d.allowed THEN 200 ELSE 429 END,
        'headers', headers,
        'body', CASE WHEN NOT d.allowed
                     THEN ratelimit.policy_http_body(false, name, d."limit", d.remaining, d.retry_after_ms, d.period_ms,
                                                     p_cost, d.reason, ARRAY[name], p_body_shape) END,
        'decision', pg_catalog.to_jsonb(d));
    RETURN outcome;
END
$$;

-- p_claims, or NULL when they nest objects and arrays more than 512 deep: the C edition reads no
-- claim of such a JWT (src/pg/postgrest/jwt_caller.cpp). The strings are taken out, then the
-- innermost pairs of brackets removed level by level.
CREATE FUNCTION ratelimit.policy_claims_within_depth(p_claims jsonb)
RETURNS jsonb
LANGUAGE plpgsql IMMUTABLE STRICT PARALLEL SAFE
AS $$
DECLARE
    shape text := pg_catalog.regexp_replace(
        pg_catalog.regexp_replace(p_claims::text, '"(?:[^"\\]|\\.)*"', '', 'g'), '[^][{}]', '', 'g');
BEGIN
    FOR level IN 1 .. 512 LOOP
        EXIT WHEN shape = '';
        shape := pg_catalog.regexp_replace(shape, '\{\}|\[\]', '', 'g');
    END LOOP;
    RETURN CASE WHEN shape = '' THEN p_claims END;
END
$$;

-- check_many: check(p_policy, subject, ...) for each subject in turn. Every subject is read and
-- planned before the first is decided, so a refused argument charges nothing; then each is
-- decided in the order given, as check decides it.
CREATE FUNCTION ratelimit.policy_check_many(p_policy text, p_subjects text[], p_cost integer, p_tier text,
                                            p_ip inet, p_user uuid)
RETURNS ratelimit.policy_decision[]
LANGUAGE plpgsql
AS $$
DECLARE
    decided_at constant timestamptz := ratelimit.clock_now();
    now_us constant bigint := (EXTRACT(epoch FROM decided_at) * 1000000)::bigint;
    subjects text[];
    count integer;
    plans ratelimit.policy_plan[] := '{}';
    answers ratelimit.policy_decision[] := '{}';
BEGIN
    IF now_us NOT BETWEEN 0 AND 253402300800000000 THEN
        RAISE EXCEPTION 'clock must read between 1970 and the year 10000' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF p_policy IS NULL THEN
        RAISE EXCEPTION 'p_policy must not be NULL' USING ERRCODE = 'null_value_not_allowed';
    END IF;
    IF p_subjects IS NULL THEN
        RAISE EXCEPTION 'p_subjects must not be NULL' USING ERRCODE = 'null_value_not_allowed';
    END IF;
    IF pg_catalog.array_ndims(p_subjects) > 1 THEN
        RAISE EXCEPTION 'p_subjects must be a one-dimensional array' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    count := coalesce(pg_catalog.cardinality(p_subjects), 0);
    IF count < 1 OR count > 10000 THEN
        RAISE EXCEPTION 'p_subjects must have 1 to 10000 elements (got %)', count USING ERRCODE = 'invalid_parameter_value';
    END IF;
    -- Counted from 1 whatever the array's bounds, as the errors name them.
    subjects := ARRAY(SELECT u.s FROM pg_catalog.unnest(p_subjects) WITH ORDINALITY AS u(s, i) ORDER BY u.i);
    FOR i IN 1 .. count LOOP
        IF subjects[i] IS NULL THEN
            RAISE EXCEPTION 'p_subjects[%] must not be NULL', i USING ERRCODE = 'null_value_not_allowed';
        END IF;
        IF pg_catalog.octet_length(subjects[i]) = 0 THEN
            RAISE EXCEPTION 'p_subjects[%] must not be empty', i USING ERRCODE = 'invalid_parameter_value';
        END IF;
        IF pg_catalog.octet_length(subjects[i]) > 256 THEN
            RAISE EXCEPTION 'p_subjects[%] must be at most 256 bytes long, got %', i, pg_catalog.octet_length(subjects[i])
                USING ERRCODE = 'invalid_parameter_value';
        END IF;
    END LOOP;
    FOR i IN 1 .. count LOOP
        plans[i] := ratelimit.policy_plan(ARRAY[p_policy], ARRAY[subjects[i]], p_cost, p_tier, p_ip, p_user,
                                          decided_at, now_us, 'p_policy', 'p_subjects[' || i || ']', true);
    END LOOP;
    FOR i IN 1 .. count LOOP
        answers[i] := (ratelimit.policy_decide(plans[i], p_cost, p_user, decided_at, now_us)).decision;
    END LOOP;
    RETURN answers;
END
$$;

