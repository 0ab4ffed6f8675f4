-- The SQL edition's rules of the drop-in extensions (ratelimit_sql_<app>, whose bodies are in
-- sql/sql_edition/bodies/<app>.sql), as the C edition's src/pg/drop_ins/drop_in_rules.cpp keeps
-- them: the limit a call enforces (the policy of its name, the settings), who the caller is, and
-- a window's count on the unlogged engine (ratelimit.dropin_engine). Called by the drop-ins only,
-- which run as ratelimit's owner (SECURITY DEFINER) with search_path pinned: granted to nobody,
-- they pin nothing themselves (a SET clause costs every call a save and restore of the setting,
-- and a SQL function with one is planned again at each call).
--
-- The settings are the C library's. Where it is not loaded they are plain names that any role
-- can set, and are read as the library would read them: the C edition's default when unset (or
-- empty, as RESET leaves a name the library does not define), a value it would refuse an error.

-- The limit and window a drop-in call enforces, from the caller's (already checked) values and
-- the policy p_policy_name, if any (ratelimit/drop_in_limits.hpp): a policy wins, its period
-- rounded up to whole p_unit microseconds; with ratelimit.dropin_caller_limits = must_match a call
-- whose values differ is refused; without a policy, ratelimit.dropin_require_policy refuses the
-- caller's values unless the caller is trusted. p_arguments names the call's arguments: the name,
-- the limit and the window (p_rpc_name, p_max_calls, p_window_minutes).
--
-- The drop-in looks the policy up itself (its limit, period and time zone, the limit NULL when
-- there is none) and calls this only when there is one or the setting is set: the usual call,
-- with neither, enforces the caller's values and pays for no call.
CREATE FUNCTION ratelimit.drop_in_limit(p_arguments text[], p_policy_name text, p_policy_limit integer,
                                        p_policy_period interval, p_policy_time_zone text,
                                        p_unit bigint, p_caller_limit integer,
                                        p_caller_window integer,
                                        OUT enforced_limit bigint, OUT window_micros bigint)
LANGUAGE plpgsql STABLE
AS $$
DECLARE
    setting text;
    period_micros bigint;
    months integer;
    policy_window bigint;
BEGIN
    IF p_policy_limit IS NULL THEN
        setting := NULLIF(pg_catalog.current_setting('ratelimit.dropin_require_policy', true), '');
        IF setting !~* '^(t|tr|tru|true|y|ye|yes|on|1|f|fa|fal|fals|false|n|no|of|off|0)$' THEN
            RAISE EXCEPTION 'ratelimit.dropin_require_policy must be a boolean (got "%")', pg_catalog.left(setting, 64)
                USING ERRCODE = 'invalid_parameter_value';
        END IF;
        -- Nested, so that the caller is looked up only when the setting asks (an AND whose
        -- first operand is NULL evaluates the second).
        IF setting ~* '^(t|tr|tru|true|y|ye|yes|on|1)$' THEN
            IF NOT ratelimit.drop_in_trusted_caller() THEN
                RAISE EXCEPTION '% has no policy %: ratelimit.dropin_require_policy refuses limits chosen by the caller',
                    p_arguments[1], p_policy_name
                    USING ERRCODE = 'insufficient_privilege';
            END IF;
        END IF;
        enforced_limit := p_caller_limit;
        window_micros := p_caller_window::bigint * p_unit;
        RETURN;
    END IF;

    -- A calendar period counts as its usual length (a day, 7 days, 31 days), as the policy
    -- cache reads it; any other as its microseconds.
    months := pg_catalog.date_part('year', p_policy_period)::integer * 12
              + pg_catalog.date_part('month', p_policy_period)::integer;
    IF months = 0 AND p_policy_time_zone IS NULL THEN
        period_micros := (EXTRACT(epoch FROM p_policy_period) * 1000000)::bigint;
    ELSIF months = 1 THEN
        period_micros := 31 * 86400000000::bigint;
    ELSIF pg_catalog.date_part('day', p_policy_period) = 7 THEN
        period_micros := 7 * 86400000000::bigint;
    ELSE
        period_micros := 86400000000::bigint;
    END IF;
    policy_window := period_micros / p_unit + (period_micros % p_unit > 0)::integer;

    setting := pg_catalog.lower(NULLIF(pg_catalog.current_setting('ratelimit.dropin_caller_limits', true), ''));
    IF setting IS NOT NULL AND setting NOT IN ('ignore', 'must_match') THEN
        RAISE EXCEPTION 'ratelimit.dropin_caller_limits must be ignore or must_match (got "%")',
            pg_catalog.left(setting, 64)
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF setting = 'must_match' THEN
        IF p_caller_limit <> p_policy_limit THEN
            RAISE EXCEPTION '% must be %, the limit of the policy % (ratelimit.dropin_caller_limits is must_match), got %',
                p_arguments[2], p_policy_limit, p_policy_name, p_caller_limit
                USING ERRCODE = 'insufficient_privilege';
        END IF;
        IF p_caller_window <> policy_window THEN
            RAISE EXCEPTION '% must be %, the period of the policy % (ratelimit.dropin_caller_limits is must_match), got %',
                p_arguments[3], policy_window, p_policy_name, p_caller_window
                USING ERRCODE = 'insufficient_privilege';
        END IF;
    END IF;
    enforced_limit := p_policy_limit;
    window_micros := policy_window * p_unit;
END
$$;

-- The role the session acts as: the one SET ROLE chose (PostgREST's per request), else the
-- session's, never the owner of a SECURITY DEFINER function in between.
CREATE FUNCTION ratelimit.drop_in_session_role()
RETURNS name
LANGUAGE sql STABLE
AS $$
    SELECT CASE WHEN pg_catalog.current_setting('role') = 'none' THEN pg_catalog.session_user()
                ELSE pg_catalog.current_setting('role')::name END
$$;

-- service_role, a superuser or the drop-ins' owner (current_user, under their SECURITY DEFINER),
-- judged by the session's role, so that a SECURITY DEFINER function in between lends nothing.
-- PL/pgSQL, so that its query is planned once a session.
CREATE FUNCTION ratelimit.drop_in_trusted_caller()
RETURNS boolean
LANGUAGE plpgsql STABLE
AS $$
BEGIN
    RETURN COALESCE((SELECT r.rolname = 'service_role' OR r.rolsuper OR r.rolname = pg_catalog.current_user()
                     FROM pg_catalog.pg_roles r WHERE r.rolname = ratelimit.drop_in_session_role()),
                    false);
END
$$;

-- Whether the session's role is one of the names of ratelimit.jwt_roles when it is set (a list of
-- role names, as search_path is written).
CREATE FUNCTION ratelimit.drop_in_jwt_role_listed()
RETURNS boolean
LANGUAGE plpgsql STABLE
AS $$
DECLARE
    roles constant text :=
        COALESCE(NULLIF(pg_catalog.current_setting('ratelimit.jwt_roles', true), ''), 'anon,authenticated');
    role_name constant text := ratelimit.drop_in_session_role();
    item text;
BEGIN
    -- Each name trimmed, then unquoted ("" is a quote inside quotes) or folded to lower case, as
    -- PostgreSQL reads such a list.
    FOR item IN
        SELECT pg_catalog.btrim(m[1], E' \t\n\r\f\x0b')
        FROM pg_catalog.regexp_matches(roles, '\s*("(?:[^"]|"")*"|[^,]*)', 'g') AS m
    LOOP
        IF item ~ '^"(?:[^"]|"")*"$' THEN
            item := pg_catalog.replace(pg_catalog.substr(item, 2, pg_catalog.length(item) - 2), '""', '"');
        ELSE
            item := pg_catalog.lower(item COLLATE "C");
        END IF;
        IF item = role_name THEN
            RETURN true;
        END IF;
    END LOOP;
    RETURN false;
END
$$;

-- Whether the session's role is one of ratelimit.jwt_roles (anon,authenticated by default). A
-- SQL function of one expression, which PostgreSQL inlines into the caller's statement: the
-- default list costs no call.
CREATE FUNCTION ratelimit.drop_in_jwt_role()
RETURNS boolean
LANGUAGE sql STABLE
AS $$
    SELECT CASE WHEN COALESCE(NULLIF(pg_catalog.current_setting('ratelimit.jwt_roles', true), ''), 'anon,authenticated')
                     = 'anon,authenticated'
                THEN ratelimit.drop_in_session_role() IN ('anon', 'authenticated')
                ELSE ratelimit.drop_in_jwt_role_listed() END
$$;

-- The caller's user id: the JWT's sub as ratelimit.jwt_subject() finds it, which the apps' uuid
-- columns need to be a UUID (8-4-4-4-12 or 32 hex digits, either case); NULL when anonymous.
CREATE FUNCTION ratelimit.drop_in_caller_claimed()
RETURNS uuid
LANGUAGE plpgsql STABLE
AS $$
DECLARE
    claims constant text := pg_catalog.current_setting('request.jwt.claims', true);
    sub text;
BEGIN
    -- Before PostgreSQL 16 jwt_subject() lets the JSON parser's own error through for claims
    -- that are not JSON (it may run in a parallel worker, where no error can be caught): the
    -- drop-ins, which never run there, raise the C edition's error instead.
    IF claims <> '' AND COALESCE(pg_catalog.current_setting('request.jwt.claim.sub', true), '') = ''
       AND pg_catalog.current_setting('server_version_num')::integer < 160000 THEN
        BEGIN
            PERFORM claims::jsonb;
        EXCEPTION WHEN OTHERS THEN
            RAISE EXCEPTION 'request.jwt.claims must be a JSON object' USING ERRCODE = 'invalid_parameter_value';
        END;
    END IF;
    sub := ratelimit.jwt_subject();
    IF sub IS NULL THEN
        RETURN NULL;
    END IF;
    IF sub !~ '^([0-9A-Fa-f]{8}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{12}|[0-9A-Fa-f]{32})$' THEN
        -- jwt_subject() takes request.jwt.claim.sub first when it is set.
        IF COALESCE(pg_catalog.current_setting('request.jwt.claim.sub', true), '') <> '' THEN
            RAISE EXCEPTION 'request.jwt.claim.sub must be a UUID' USING ERRCODE = 'invalid_parameter_value';
        END IF;
        RAISE EXCEPTION 'request.jwt.claims has a "sub" claim that is not a UUID'
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    RETURN sub::uuid;
END
$$;

-- The caller's user id (drop_in_caller_claimed): NULL outside a request, where jwt_subject() has
-- nothing to read, without a call (inlined as drop_in_jwt_role is).
CREATE FUNCTION ratelimit.drop_in_caller()
RETURNS uuid
LANGUAGE sql STABLE
AS $$
    SELECT CASE WHEN COALESCE(pg_catalog.current_setting('request.jwt.claims', true), '') = ''
                     AND COALESCE(pg_catalog.current_setting('request.jwt.claim.sub', true), '') = ''
                THEN NULL
                ELSE ratelimit.drop_in_caller_claimed() END
$$;

-- Refuses p_user (as p_argument) unless the caller may act on it (ratelimit/identity.hpp): a
-- caller with a sub (p_sub) only on its own id; a JWT role without one on none; other roles
-- without a sub (service_role, server code) on any.
CREATE FUNCTION ratelimit.drop_in_require_may_act_on(p_argument text, p_user uuid, p_sub uuid,
                                                     p_jwt_role boolean)
RETURNS void
LANGUAGE plpgsql STABLE
AS $$
BEGIN
    IF p_sub IS NOT NULL THEN
        IF p_sub <> p_user THEN
            RAISE EXCEPTION '% must be the caller''s own id (the JWT sub)', p_argument
                USING ERRCODE = 'insufficient_privilege';
        END IF;
        RETURN;
    END IF;
    IF p_jwt_role THEN
        RAISE EXCEPTION '% needs a JWT sub claim: a request without one cannot act on a user''s id', p_argument
            USING ERRCODE = 'insufficient_privilege';
    END IF;
END
$$;

-- Where the drop-ins keep their counts (ratelimit.dropin_engine): NULL for the apps' own tables
-- (table, the default), or the engine. The memory engine is the C edition's only.
CREATE FUNCTION ratelimit.drop_in_engine_named(p_engine text)
RETURNS text
LANGUAGE plpgsql STABLE
AS $$
DECLARE
    engine constant text := pg_catalog.lower(p_engine);
BEGIN
    IF engine IS NULL OR engine = 'table' THEN
        RETURN NULL;
    ELSIF engine = 'unlogged' THEN
        RETURN engine;
    ELSIF engine = 'memory' THEN
        RAISE EXCEPTION 'ratelimit.dropin_engine = memory is not in the SQL edition of ratelimit'
            USING ERRCODE = 'feature_not_supported',
                  HINT = 'The C edition (CREATE EXTENSION ratelimit) has the memory engine: set ratelimit.dropin_engine to table or unlogged, or see docs/sql-edition.md.';
    END IF;
    RAISE EXCEPTION 'ratelimit.dropin_engine must be table, unlogged or memory (got "%")', pg_catalog.left(engine, 64)
        USING ERRCODE = 'invalid_parameter_value';
END
$$;

-- The default (unset, empty) answered inline, without a call (as drop_in_jwt_role is).
CREATE FUNCTION ratelimit.drop_in_engine()
RETURNS text
LANGUAGE sql STABLE
AS $$
    SELECT CASE WHEN COALESCE(pg_catalog.current_setting('ratelimit.dropin_engine', true), '') = '' THEN NULL
                ELSE ratelimit.drop_in_engine_named(pg_catalog.current_setting('ratelimit.dropin_engine', true)) END
$$;

-- The engines' tables are written by every call that decides on them: refused, as the C edition
-- refuses it, in a read-only transaction (a hot standby's included).
CREATE FUNCTION ratelimit.drop_in_require_writable(p_function text)
RETURNS void
LANGUAGE plpgsql STABLE
AS $$
BEGIN
    IF pg_catalog.current_setting('transaction_read_only') = 'on' THEN
        RAISE EXCEPTION 'cannot execute % in a read-only transaction', p_function
            USING ERRCODE = 'read_only_sql_transaction';
    END IF;
END
$$;

-- A count kept in the window open for p_key (in the drop-in's namespace p_space) on p_engine, as
-- the apps' tables keep it (drop_in_rules.hpp, count_in_window): every call adds p_increment,
-- allowed or not; a window ends where it ended when it opened; when none is open at p_now, one
-- opens that ends at p_new_window_end, open at that instant itself when p_end_inclusive. The
-- count saturates at 2^31 - 1. All instants in Unix microseconds. p_function names the call in
-- the error of a read-only transaction.
CREATE FUNCTION ratelimit.drop_in_count_in_window(p_function text, p_engine text, p_space text,
                                                  p_key text, p_now bigint, p_new_window_end bigint,
                                                  p_end_inclusive boolean, p_increment integer,
                                                  OUT counted bigint, OUT window_end bigint)
LANGUAGE plpgsql VOLATILE
AS $$
DECLARE
    ceiling constant integer := 2147483647;
    -- A rolling window whose instant is the end of the open window, decided at the clock moved
    -- forward to p_new_window_end with this period: it keeps counting exactly while the open
    -- window lasts, and restarts at p_new_window_end after. The ceiling as the limit counts
    -- every call; the caller compares the count with its own limit.
    period constant interval :=
        (p_new_window_end - p_now + p_end_inclusive::integer) * interval '1 microsecond';
    d ratelimit.key_decision;
BEGIN
    PERFORM ratelimit.drop_in_require_writable(p_function);
    d := ratelimit.key_decide_micros(p_engine, p_space, p_key, ceiling, period, p_increment,
                                     'rolling_window', NULL, NULL, NULL, 'consume', p_new_window_end);
    IF NOT d.allowed AND d.remaining > 0 THEN
        -- Past the ceiling the count stays there: the key is filled to it.
        d := ratelimit.key_decide_micros(p_engine, p_space, p_key, ceiling, period, d.remaining::integer,
                                         'rolling_window', NULL, NULL, NULL, 'consume', p_new_window_end);
    END IF;
    counted := CASE WHEN d.allowed THEN ceiling - d.remaining ELSE ceiling END;
    -- The wait until the key is fresh again is the rest of the open window.
    window_end := p_now + d.reset_after - p_end_inclusive::integer;
END
$$;

-- The sliding-window drop-in's keys on p_engine (sliding_window_limits.cpp,
-- decide_keys_on_engine): each key a sliding_window log of its limit over its window in the
-- namespace drop-in/rate_limit_buckets, decided at the start of the current second, so that an
-- entry counts exactly while its bucket would and the waits come out in whole seconds; the keys
-- all or nothing (ratelimit.decide_tiers). For each key: whether it allowed, its count (after the
-- call when it allowed, before it otherwise) and its wait in whole seconds (0 when it allowed).
-- p_function names the call in the error of a read-only transaction.
CREATE FUNCTION ratelimit.drop_in_buckets_on_engine(p_function text, p_engine text, p_keys text[],
                                                    p_limits integer[], p_windows integer[],
                                                    p_cost integer, OUT fits boolean[],
                                                    OUT counts bigint[], OUT retries bigint[])
LANGUAGE plpgsql VOLATILE
AS $$
DECLARE
    space constant text := 'drop-in/rate_limit_buckets';
    ceiling constant integer := 2147483647;
    tiers constant integer := pg_catalog.cardinality(p_keys);
    clock_micros constant bigint := (EXTRACT(epoch FROM ratelimit.clock_now()) * 1000000)::bigint;
    now_micros constant bigint := clock_micros - (clock_micros % 1000000 + 1000000) % 1000000;
    periods interval[];
    outcome record;
    d ratelimit.key_decision;
    peek ratelimit.key_decision;
    counted bigint;
BEGIN
    PERFORM ratelimit.drop_in_require_writable(p_function);
    periods := ARRAY(SELECT w.seconds * interval '1 second'
                     FROM pg_catalog.unnest(p_windows) WITH ORDINALITY AS w(seconds, n) ORDER BY w.n);
    SELECT t.allowed, t.decisions INTO outcome
    FROM ratelimit.decide_tiers(pg_catalog.array_fill(p_engine, ARRAY[tiers]),
                                pg_catalog.array_fill(space, ARRAY[tiers]), p_keys, p_limits, periods,
                                pg_catalog.array_fill('sliding_window'::text, ARRAY[tiers]),
                                pg_catalog.array_fill(NULL::integer, ARRAY[tiers]),
                                pg_catalog.array_fill(NULL::text, ARRAY[tiers]),
                                pg_catalog.array_fill(NULL::interval, ARRAY[tiers]),
                                NULL, p_cost, now_micros) AS t;
    fits := '{}';
    counts := '{}';
    retries := '{}';
    FOR i IN 1 .. tiers LOOP
        -- Each key after its charge when the call was allowed, as it stood otherwise.
        d := outcome.decisions[i];
        IF outcome.allowed THEN
            counted := p_limits[i] - d.remaining - p_cost;
        ELSE
            counted := p_limits[i] - d.remaining;
            IF d.remaining = 0 THEN
                -- At or over the limit (a key counted under a higher limit earlier): the count
                -- itself, from a look under the ceiling.
                peek := ratelimit.key_decide_micros(p_engine, space, p_keys[i], ceiling, periods[i],
                                                    p_cost, 'sliding_window', NULL, NULL, NULL,
                                                    'peek', now_micros);
                counted := ceiling - peek.remaining;
            END IF;
        END IF;
        fits[i] := d.allowed;
        counts[i] := CASE WHEN d.allowed THEN counted + p_cost ELSE counted END;
        retries[i] := CASE WHEN d.allowed THEN 0 ELSE (d.retry_after + 999999) / 1000000 END;
    END LOOP;
END
$$;

-- The arguments the three apps' drop-ins share, checked in the C edition's order, with its
-- errors: a name (p_name_argument: not NULL, 1 to 256 bytes), a limit, a window (not NULL, then
-- greater than zero, then at most p_window_max, 365 days in its unit), and between the two, the
-- NULL check of a third argument (p_third_argument, NULL for none) whose other rules the caller
-- checks after. The drop-ins' calls come here only when their arguments fail the one test usual
-- values pass.
CREATE FUNCTION ratelimit.drop_in_window_arguments(p_name_argument text, p_name text,
                                                   p_limit_argument text, p_limit integer,
                                                   p_window_argument text, p_window integer,
                                                   p_window_max integer,
                                                   p_third_argument text, p_third_is_null boolean)
RETURNS void
LANGUAGE plpgsql STABLE
AS $$
BEGIN
    IF p_name IS NULL THEN
        RAISE EXCEPTION '% must not be NULL', p_name_argument USING ERRCODE = 'null_value_not_allowed';
    END IF;
    IF pg_catalog.octet_length(p_name) = 0 THEN
        RAISE EXCEPTION '% must not be empty', p_name_argument USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF pg_catalog.octet_length(p_name) > 256 THEN
        RAISE EXCEPTION '% must be at most 256 bytes long, got %', p_name_argument, pg_catalog.octet_length(p_name)
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF p_limit IS NULL THEN
        RAISE EXCEPTION '% must not be NULL', p_limit_argument USING ERRCODE = 'null_value_not_allowed';
    END IF;
    IF p_window IS NULL THEN
        RAISE EXCEPTION '% must not be NULL', p_window_argument USING ERRCODE = 'null_value_not_allowed';
    END IF;
    IF p_third_is_null THEN
        RAISE EXCEPTION '% must not be NULL', p_third_argument USING ERRCODE = 'null_value_not_allowed';
    END IF;
    IF p_limit <= 0 THEN
        RAISE EXCEPTION '% must be greater than zero, got %', p_limit_argument, p_limit
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF p_window <= 0 THEN
        RAISE EXCEPTION '% must be greater than zero, got %', p_window_argument, p_window
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF p_window > p_window_max THEN
        RAISE EXCEPTION '% must be at most % (365 days), got %', p_window_argument, p_window_max, p_window
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
END
$$;
