-- The SQL edition's bodies of the C functions of sql/install/policies.sql. A policy call reads its
-- clock, then is decided by ratelimit.policy_fast when it is the common call it takes, else read
-- and planned by ratelimit.policy_plan and decided by ratelimit.policy_decide
-- (sql/sql_edition/policy_decisions.sql). They are SECURITY DEFINER: they write counters and the
-- denial log, which their callers have no right to.

-- The C edition keeps each backend's copy of the policy tables and drops it when they change;
-- the SQL edition reads the tables on every call and keeps no copy: nothing to drop.
-- @begin ratelimit_policy_tables_changed
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    RETURN NULL;
END
$$;
-- @end ratelimit_policy_tables_changed

-- The penalty and delay columns, with the C edition's rules and messages
-- (src/pg/policies/policy_administration.cpp, src/core/policy.cpp require_valid_penalties).
-- @begin ratelimit_validate_policy_options
LANGUAGE plpgsql STABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    lengths bigint[] := '{}';
    decay bigint;
    max_delay bigint;
    span interval;
    argument text;
    months integer;
    micros numeric;
BEGIN
    IF p_algorithm IS NULL THEN
        RAISE EXCEPTION 'p_algorithm must not be NULL' USING ERRCODE = 'null_value_not_allowed';
    END IF;
    IF p_algorithm NOT IN ('fixed_window', 'rolling_window', 'sliding_window', 'sliding_window_counter',
                           'token_bucket', 'gcra') THEN
        RAISE EXCEPTION 'p_algorithm must be one of fixed_window, rolling_window, sliding_window, sliding_window_counter, token_bucket, gcra (got "%")',
            pg_catalog.left(p_algorithm, 64)
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF p_penalty_blocks IS NULL AND p_penalty_decay IS NOT NULL THEN
        RAISE EXCEPTION 'penalty_decay needs penalty_blocks' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    -- Each span as a limit's: finite, no months, above 0 and at most 365 days.
    FOR k IN 1 .. 3 LOOP
        IF k = 1 THEN
            CONTINUE WHEN p_penalty_blocks IS NULL;
            IF pg_catalog.array_ndims(p_penalty_blocks) > 1 THEN
                RAISE EXCEPTION 'penalty_blocks must be a one-dimensional array' USING ERRCODE = 'invalid_parameter_value';
            END IF;
        END IF;
        FOR i IN 1 .. CASE WHEN k = 1 THEN coalesce(pg_catalog.cardinality(p_penalty_blocks), 0) ELSE 1 END LOOP
            IF k = 1 THEN
                argument := 'penalty_blocks';
                span := p_penalty_blocks[pg_catalog.array_lower(p_penalty_blocks, 1) + i - 1];
                IF span IS NULL THEN
                    RAISE EXCEPTION 'penalty_blocks must not be NULL' USING ERRCODE = 'null_value_not_allowed';
                END IF;
            ELSIF k = 2 THEN
                CONTINUE WHEN p_penalty_blocks IS NULL;
                argument := 'penalty_decay';
                span := p_penalty_decay;
                IF span IS NULL THEN
                    RAISE EXCEPTION 'penalty_decay must be given with penalty_blocks' USING ERRCODE = 'invalid_parameter_value';
                END IF;
            ELSE
                CONTINUE WHEN p_max_delay IS NULL;
                argument := 'max_delay';
                span := p_max_delay;
            END IF;
            IF span::text IN ('infinity', '-infinity') THEN
                RAISE EXCEPTION '% must be finite', argument USING ERRCODE = 'invalid_parameter_value';
            END IF;
            months := pg_catalog.date_part('year', span)::integer * 12 + pg_catalog.date_part('month', span)::integer;
            IF months <> 0 THEN
                RAISE EXCEPTION '% must not use months or years, whose length varies (use days)', argument
                    USING ERRCODE = 'invalid_parameter_value';
            END IF;
            micros := EXTRACT(epoch FROM span) * 1000000;
            IF micros > 31536000000000
               OR pg_catalog.abs(pg_catalog.date_part('day', span)::numeric * 86400000000) > 9223372036854775807 THEN
                RAISE EXCEPTION '% must be at most 365 days', argument USING ERRCODE = 'invalid_parameter_value';
            END IF;
            IF micros <= 0 THEN
                RAISE EXCEPTION '% must be greater than zero', argument USING ERRCODE = 'invalid_parameter_value';
            END IF;
            IF k = 1 THEN
                lengths := lengths || micros::bigint;
            ELSIF k = 2 THEN
                decay := micros::bigint;
            ELSE
                max_delay := micros::bigint;
            END IF;
        END LOOP;
        IF k = 2 AND p_penalty_blocks IS NOT NULL THEN
            -- The ladder: 1 to 16 steps of 1 millisecond to 365 days, and a decay that drains a
            -- full ladder within 365 days (the level's counter is a limit).
            IF coalesce(pg_catalog.cardinality(lengths), 0) NOT BETWEEN 1 AND 16 THEN
                RAISE EXCEPTION 'penalty_blocks must have 1 to 16 steps (got %)', coalesce(pg_catalog.cardinality(lengths), 0)
                    USING ERRCODE = 'invalid_parameter_value';
            END IF;
            IF EXISTS (SELECT FROM pg_catalog.unnest(lengths) AS l(micros) WHERE l.micros < 1000) THEN
                RAISE EXCEPTION 'penalty_blocks must be at least 1 millisecond' USING ERRCODE = 'invalid_parameter_value';
            END IF;
            IF decay < 1000 THEN
                RAISE EXCEPTION 'penalty_decay must be at least 1 millisecond' USING ERRCODE = 'invalid_parameter_value';
            END IF;
            IF decay > 31536000000000 / pg_catalog.cardinality(lengths) THEN
                RAISE EXCEPTION 'penalty_decay times the number of penalty_blocks (%) must be at most 365 days',
                    pg_catalog.cardinality(lengths)
                    USING ERRCODE = 'invalid_parameter_value';
            END IF;
        END IF;
    END LOOP;
    -- A window algorithm would count a delayed call in the window it was asked in.
    IF max_delay > 0 AND p_algorithm NOT IN ('token_bucket', 'gcra') THEN
        RAISE EXCEPTION 'max_delay applies only to token_bucket and gcra (got %)', p_algorithm
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
END
$$;
-- @end ratelimit_validate_policy_options

-- decide_policies(..., p_policy_argument, p_key_argument): check_all, its errors naming the
-- arguments as the caller says.
-- @begin ratelimit_decide_policies
LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    decided_at timestamptz;
    now_us bigint;
BEGIN
    IF p_policy_argument IS NULL THEN
        RAISE EXCEPTION 'p_policy_argument must not be NULL' USING ERRCODE = 'null_value_not_allowed';
    END IF;
    IF p_key_argument IS NULL THEN
        RAISE EXCEPTION 'p_key_argument must not be NULL' USING ERRCODE = 'null_value_not_allowed';
    END IF;
    decided_at := ratelimit.clock_now();
    now_us := (EXTRACT(epoch FROM decided_at) * 1000000)::bigint;
    IF now_us NOT BETWEEN 0 AND 253402300800000000 THEN
        RAISE EXCEPTION 'clock must read between 1970 and the year 10000' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    RETURN (ratelimit.policy_decide(
        ratelimit.policy_plan(p_policies, p_keys, p_cost, p_tier, p_ip, p_user, decided_at, now_us,
                              pg_catalog.left(p_policy_argument, 64), pg_catalog.left(p_key_argument, 64), false),
        p_cost, p_user, decided_at, now_us)).decision;
END
$$;
-- @end ratelimit_decide_policies

-- @begin ratelimit_check
LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    decided_at constant timestamptz := ratelimit.clock_now();
    now_us constant bigint := (EXTRACT(epoch FROM decided_at) * 1000000)::bigint;
    fast ratelimit.policy_decision;
BEGIN
    IF now_us NOT BETWEEN 0 AND 253402300800000000 THEN
        RAISE EXCEPTION 'clock must read between 1970 and the year 10000' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    fast := (ratelimit.policy_fast(ARRAY[p_policy], ARRAY[p_key], p_cost, p_tier, decided_at, now_us)).decision;
    IF fast.allowed IS NOT NULL THEN
        RETURN fast;
    END IF;
    RETURN (ratelimit.policy_decide(
        ratelimit.policy_plan(ARRAY[p_policy], ARRAY[p_key], p_cost, p_tier, p_ip, p_user, decided_at, now_us,
                              'p_policy', 'p_key', true),
        p_cost, p_user, decided_at, now_us)).decision;
END
$$;
-- @end ratelimit_check

-- @begin ratelimit_check_many
LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    RETURN ratelimit.policy_check_many(p_policy, p_subjects, p_cost, p_tier, p_ip, p_user);
END
$$;
-- @end ratelimit_check_many

-- @begin ratelimit_check_all
LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    decided_at constant timestamptz := ratelimit.clock_now();
    now_us constant bigint := (EXTRACT(epoch FROM decided_at) * 1000000)::bigint;
    fast ratelimit.policy_decision;
BEGIN
    IF now_us NOT BETWEEN 0 AND 253402300800000000 THEN
        RAISE EXCEPTION 'clock must read between 1970 and the year 10000' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    fast := (ratelimit.policy_fast(p_policies, p_keys, p_cost, p_tier, decided_at, now_us)).decision;
    IF fast.allowed IS NOT NULL THEN
        RETURN fast;
    END IF;
    RETURN (ratelimit.policy_decide(
        ratelimit.policy_plan(p_policies, p_keys, p_cost, p_tier, p_ip, p_user, decided_at, now_us,
                              'p_policies', 'p_keys', false),
        p_cost, p_user, decided_at, now_us)).decision;
END
$$;
-- @end ratelimit_check_all

-- @begin ratelimit_check_http
LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    decided_at timestamptz;
    now_us bigint;
    fast jsonb;
BEGIN
    -- The formats are checked before anything is charged.
    IF p_reset_format IS NULL THEN
        RAISE EXCEPTION 'p_reset_format must not be NULL' USING ERRCODE = 'null_value_not_allowed';
    END IF;
    IF p_reset_format NOT IN ('iso8601', 'unix') THEN
        RAISE EXCEPTION 'p_reset_format must be one of iso8601, unix (got "%")', pg_catalog.left(p_reset_format, 64)
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF p_body_shape IS NULL THEN
        RAISE EXCEPTION 'p_body_shape must not be NULL' USING ERRCODE = 'null_value_not_allowed';
    END IF;
    IF p_body_shape NOT IN ('error_message', 'detailed', 'problem') THEN
        RAISE EXCEPTION 'p_body_shape must be one of error_message, detailed, problem (got "%")', pg_catalog.left(p_body_shape, 64)
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    decided_at := ratelimit.clock_now();
    now_us := (EXTRACT(epoch FROM decided_at) * 1000000)::bigint;
    IF now_us NOT BETWEEN 0 AND 253402300800000000 THEN
        RAISE EXCEPTION 'clock must read between 1970 and the year 10000' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    fast := (ratelimit.policy_fast(p_policies, p_keys, p_cost, p_tier, decided_at, now_us, p_reset_format,
                                   p_body_shape)).http;
    IF fast IS NOT NULL THEN
        RETURN fast;
    END IF;
    RETURN (ratelimit.policy_decide(
        ratelimit.policy_plan(p_policies, p_keys, p_cost, p_tier, p_ip, p_user, decided_at, now_us,
                              'p_policies', 'p_keys', false),
        p_cost, p_user, decided_at, now_us, p_reset_format, p_body_shape)).http;
END
$$;
-- @end ratelimit_check_http

-- A policy's counters for one subject, reached through the policy only; the penalty level goes
-- with them, so that a reset key starts the ladder over.
-- @begin ratelimit_reset_policy_key
LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    rule ratelimit.policies%ROWTYPE;
    subject text;
    level_reset boolean := false;
BEGIN
    IF p_policy IS NULL THEN
        RAISE EXCEPTION 'p_policy must not be NULL' USING ERRCODE = 'null_value_not_allowed';
    END IF;
    SELECT * INTO rule FROM ratelimit.policies p WHERE p.name = p_policy;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'p_policy: unknown policy "%"', pg_catalog.left(p_policy, 64) USING ERRCODE = 'invalid_parameter_value';
    END IF;
    PERFORM ratelimit.policy_key_argument(p_key);
    subject := CASE WHEN rule.hash_key THEN ratelimit.hash_subject(p_key) ELSE p_key END;
    PERFORM ratelimit.policy_require_engine('p_policy', rule.name, rule.engine);
    PERFORM ratelimit.policy_require_writable('ratelimit.reset_policy_key()');
    IF rule.penalty_blocks IS NOT NULL THEN
        level_reset := ratelimit.key_reset(rule.engine, rule.name || '/penalty', subject);
    END IF;
    RETURN ratelimit.key_reset(rule.engine, p_policy, subject) OR level_reset;
END
$$;
-- @end ratelimit_reset_policy_key

-- Denies the subject under the policy until now + p_duration (a longer block stays); returns the
-- block's end.
-- @begin ratelimit_block_policy_key
LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    rule ratelimit.policies%ROWTYPE;
    subject text;
    months integer;
    duration numeric;
    decided_at timestamptz;
    now_us bigint;
    blocked_until bigint;
BEGIN
    IF p_policy IS NULL THEN
        RAISE EXCEPTION 'p_policy must not be NULL' USING ERRCODE = 'null_value_not_allowed';
    END IF;
    SELECT * INTO rule FROM ratelimit.policies p WHERE p.name = p_policy;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'p_policy: unknown policy "%"', pg_catalog.left(p_policy, 64) USING ERRCODE = 'invalid_parameter_value';
    END IF;
    PERFORM ratelimit.policy_key_argument(p_key);
    subject := CASE WHEN rule.hash_key THEN ratelimit.hash_subject(p_key) ELSE p_key END;
    -- A span as the C edition reads one: finite, no months, above 0, at most 365 days.
    IF p_duration IS NULL THEN
        RAISE EXCEPTION 'p_duration must not be NULL' USING ERRCODE = 'null_value_not_allowed';
    END IF;
    IF p_duration::text IN ('infinity', '-infinity') THEN
        RAISE EXCEPTION 'p_duration must be finite' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    months := pg_catalog.date_part('year', p_duration)::integer * 12 + pg_catalog.date_part('month', p_duration)::integer;
    IF months <> 0 THEN
        RAISE EXCEPTION 'p_duration must not use months or years, whose length varies (use days)'
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    duration := EXTRACT(epoch FROM p_duration) * 1000000;
    IF duration > 31536000000000
       OR pg_catalog.abs(pg_catalog.date_part('day', p_duration)::numeric * 86400000000) > 9223372036854775807 THEN
        RAISE EXCEPTION 'p_duration must be at most 365 days' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF duration <= 0 THEN
        RAISE EXCEPTION 'p_duration must be greater than zero' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    PERFORM ratelimit.policy_require_engine('p_policy', rule.name, rule.engine);
    decided_at := ratelimit.clock_now();
    now_us := (EXTRACT(epoch FROM decided_at) * 1000000)::bigint;
    IF now_us NOT BETWEEN 0 AND 253402300800000000 THEN
        RAISE EXCEPTION 'clock must read between 1970 and the year 10000' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    PERFORM ratelimit.policy_require_writable('ratelimit.block_policy_key()');
    blocked_until := ratelimit.key_block(rule.engine, p_policy, subject, now_us + duration::bigint, now_us);
    RETURN pg_catalog.to_timestamp(blocked_until / 1000000) + (blocked_until % 1000000) * interval '1 microsecond';
END
$$;
-- @end ratelimit_block_policy_key

-- @begin ratelimit_http_headers
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    -- A row whose every field is NULL counts as NULL, as IS NULL says of a row.
    IF p_decision IS NULL THEN
        RAISE EXCEPTION 'p_decision must not be NULL' USING ERRCODE = 'null_value_not_allowed';
    END IF;
    IF p_reset_format IS NULL THEN
        RAISE EXCEPTION 'p_reset_format must not be NULL' USING ERRCODE = 'null_value_not_allowed';
    END IF;
    IF p_reset_format NOT IN ('iso8601', 'unix') THEN
        RAISE EXCEPTION 'p_reset_format must be one of iso8601, unix (got "%")', pg_catalog.left(p_reset_format, 64)
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    RETURN ratelimit.policy_http_headers(
        p_decision.allowed, p_decision.policy, p_decision."limit", p_decision.remaining,
        p_decision.retry_after_ms, p_decision.reset_after_ms, p_decision.period_ms,
        ratelimit.policy_instant(p_decision.decided_at), p_decision.reason, NULL, NULL, NULL, NULL,
        p_reset_format = 'unix');
END
$$;
-- @end ratelimit_http_headers

-- @begin ratelimit_http_body
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF p_decision IS NULL THEN
        RAISE EXCEPTION 'p_decision must not be NULL' USING ERRCODE = 'null_value_not_allowed';
    END IF;
    IF p_shape IS NULL THEN
        RAISE EXCEPTION 'p_shape must not be NULL' USING ERRCODE = 'null_value_not_allowed';
    END IF;
    IF p_shape NOT IN ('error_message', 'detailed', 'problem') THEN
        RAISE EXCEPTION 'p_shape must be one of error_message, detailed, problem (got "%")', pg_catalog.left(p_shape, 64)
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    RETURN ratelimit.policy_http_body(
        p_decision.allowed, p_decision.policy, p_decision."limit", p_decision.remaining,
        p_decision.retry_after_ms, p_decision.period_ms, p_decision.cost, p_decision.reason, '{}', p_shape);
END
$$;
-- @end ratelimit_http_body
