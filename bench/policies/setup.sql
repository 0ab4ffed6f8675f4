-- Benchmark database for the policy layer (bench/policies.sh): the extension, the policies the
-- cases check, and two helpers in schema bench (populating the keys, counting what they hold).
-- psql variables: limit, period, algorithm (every policy's), engines (the engines measured,
-- separated by commas). The checks below stop the benchmark early, with a clear message, when
-- the server or the installed extension cannot run it.
\set ON_ERROR_STOP on

CREATE EXTENSION ratelimit;

DO $$
BEGIN
    IF to_regprocedure('ratelimit.check_http(text[], text[], integer, text, inet, uuid, text, text)') IS NULL
       OR to_regprocedure('ratelimit.consume_all(text[], integer[], interval[], text[], text[], integer[], boolean[], integer)') IS NULL THEN
        RAISE EXCEPTION 'ratelimit % has no policies (ratelimit.check_http, ratelimit.consume_all): 0.5.0 or later needed',
            (SELECT extversion FROM pg_extension WHERE extname = 'ratelimit');
    END IF;
    -- Without the preload the memory engine has no shared memory and every call fails.
    IF NOT 'ratelimit' = ANY (string_to_array(
            replace(current_setting('shared_preload_libraries'), ' ', ''), ',')) THEN
        RAISE EXCEPTION 'the server does not preload ratelimit (shared_preload_libraries = %)',
            current_setting('shared_preload_libraries');
    END IF;
END
$$;

-- One policy per engine for check and check_http, and two more per engine (.b, .c) for the
-- three-policy check_all, all with the same limit.
INSERT INTO ratelimit.policies (name, algorithm, "limit", period, engine)
SELECT name, :'algorithm', :limit, :'period'::interval, engine
FROM unnest(string_to_array(:'engines', ',')) AS e(engine),
     LATERAL (VALUES ('bench.' || engine), ('bench.' || engine || '.b'),
                     ('bench.' || engine || '.c')) AS p(name);

CREATE SCHEMA bench;

-- Where a policy keeps its counters. Up to 0.5.0, under the native key '<policy>:<subject>';
-- from 0.6.0, in a namespace of its own: the state tables' rows are (policy, key), the key
-- being the subject. The native calls of the benchmark use keys of their own,
-- 'native:<policy>:<subject>', which no policy call touches in either version.
CREATE FUNCTION bench.namespaced() RETURNS boolean
LANGUAGE sql STABLE
RETURN EXISTS (SELECT FROM pg_attribute
               WHERE attrelid = 'ratelimit.key_state'::regclass AND attname = 'policy'
                 AND NOT attisdropped);

-- bench.populate(side, engine, prefix, subjects): the first call of every key of a subject set
-- (subjects prefix1 .. prefix<subjects>), so that the measured runs update keys that exist: the
-- steady state of a limiter that sees the same subjects again and again. Side 'native':
-- consume on the keys 'native:<policy>:<subject>' of the engine's three policies, with their
-- settings; side 'policy': check_all over the three policies. Every call must be allowed.
-- Commits every 5000 subjects, so that populating keeps its transactions short.
CREATE PROCEDURE bench.populate(p_side text, p_engine text, p_prefix text, p_subjects integer)
LANGUAGE plpgsql
AS $$
DECLARE
    v_policies text[] := ARRAY['bench.' || p_engine, 'bench.' || p_engine || '.b',
                               'bench.' || p_engine || '.c'];
    pol        ratelimit.policies;
    v_from     integer := 1;
    v_to       integer;
    v_allowed  bigint;
BEGIN
    WHILE v_from <= p_subjects LOOP
        v_to := least(v_from + 4999, p_subjects);
        IF p_side = 'native' THEN
            FOR i IN 1..3 LOOP
                SELECT * INTO STRICT pol FROM ratelimit.policies WHERE name = v_policies[i];
                SELECT count(*) FILTER (WHERE d.allowed) INTO v_allowed
                FROM generate_series(v_from, v_to) AS g,
                     LATERAL ratelimit.consume('native:' || pol.name || ':' || p_prefix || g,
                                               pol."limit", pol.period, 1, pol.algorithm,
                                               pol.engine) AS d;
                IF v_allowed <> v_to - v_from + 1 THEN
                    RAISE EXCEPTION 'bench.populate: % of % first calls allowed (native, %)',
                        v_allowed, v_to - v_from + 1, pol.name;
                END IF;
            END LOOP;
        ELSIF p_side = 'policy' THEN
            SELECT count(*) FILTER (WHERE d.allowed) INTO v_allowed
            FROM generate_series(v_from, v_to) AS g,
                 LATERAL ratelimit.check_all(v_policies, ARRAY[p_prefix || g, p_prefix || g,
                                                               p_prefix || g]) AS d;
            IF v_allowed <> v_to - v_from + 1 THEN
                RAISE EXCEPTION 'bench.populate: % of % first calls allowed (check_all, %)',
                    v_allowed, v_to - v_from + 1, v_policies;
            END IF;
        ELSE
            RAISE EXCEPTION 'bench.populate: unknown side %', p_side;
        END IF;
        COMMIT;
        v_from := v_to + 1;
    END LOOP;
END
$$;

-- bench.counted(side, policy, prefix, subjects): how many keys of the subject set hold calls,
-- and how many calls they hold in all, on the native side ('native:<policy>:<subject>') or
-- in the policy's counters. The table engines: their rows (fixed_window's amount is the
-- window's count). The memory engine: a peek at each key, whose remaining is the limit less
-- the calls counted (a missing key answers the full limit, so it counts no call); a policy's
-- memory counters in their own namespace (0.6.0 on) cannot be peeked at: NULL, and
-- bench/policies.sh counts them with memory_stats and policy_stats instead.
CREATE FUNCTION bench.counted(p_side text, p_policy text, p_prefix text, p_subjects integer,
                              OUT keys bigint, OUT calls numeric)
LANGUAGE plpgsql
AS $$
DECLARE
    pol    ratelimit.policies;
    prefix text;
BEGIN
    SELECT * INTO STRICT pol FROM ratelimit.policies WHERE name = p_policy;
    prefix := CASE p_side WHEN 'native' THEN 'native:' || p_policy || ':' || p_prefix
                          ELSE p_policy || ':' || p_prefix END;
    IF pol.engine = 'memory' THEN
        IF p_side = 'policy' AND bench.namespaced() THEN
            RETURN;
        END IF;
        SELECT count(*) FILTER (WHERE d.remaining < d."limit"),
               coalesce(sum(d."limit"::bigint - d.remaining), 0)
        INTO keys, calls
        FROM generate_series(1, p_subjects) AS g,
             LATERAL ratelimit.peek(prefix || g, pol."limit", pol.period, 1, pol.algorithm,
                                    pol.engine) AS d;
    ELSIF bench.namespaced() THEN
        -- Rows (policy, key): the native keys are in the namespace ''.
        EXECUTE format('SELECT count(*), coalesce(sum(amount), 0) FROM ratelimit.%I'
                       ' WHERE policy = $1 AND key >= $2 AND key < $2 || chr(255)',
                       CASE pol.engine WHEN 'unlogged' THEN 'key_state_unlogged' ELSE 'key_state' END)
        INTO keys, calls
        USING CASE p_side WHEN 'native' THEN '' ELSE p_policy END,
              CASE p_side WHEN 'native' THEN prefix ELSE p_prefix END;
    ELSE
        -- The keys with this prefix, as a range of the primary key (collation C).
        EXECUTE format('SELECT count(*), coalesce(sum(amount), 0) FROM ratelimit.%I'
                       ' WHERE key >= $1 AND key < $1 || chr(255)',
                       CASE pol.engine WHEN 'unlogged' THEN 'key_state_unlogged' ELSE 'key_state' END)
        INTO keys, calls
        USING prefix;
    END IF;
END
$$;
