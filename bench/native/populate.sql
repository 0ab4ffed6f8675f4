-- Gives every key of a key set its first call, on one side (the extension or the reference), so
-- the measured runs find every key's row in place: the steady state of a rate limiter, which
-- sees the same keys again and again. Every one of these calls must be allowed; each counts
-- as one call in the checks of bench/native.sh.
--
-- For token_bucket and gcra, the state right after that first call is kept in bench.populated:
-- their later calls are counted from it (bench/native.sh, check_counted), since their state
-- also moves with time.

CREATE TABLE bench.populated (
    side text NOT NULL,
    engine text NOT NULL,
    key text COLLATE "C" NOT NULL,
    instant bigint NOT NULL,
    amount bigint NOT NULL,
    carry bigint NOT NULL,
    PRIMARY KEY (side, engine, key)
);

-- Commits every 5000 keys, so that populating keeps its transactions short.
CREATE PROCEDURE bench.populate(
    p_side text,        -- extension or plpgsql
    p_algorithm text,
    p_engine text,
    p_prefix text,      -- keys p_prefix || 1 .. p_prefix || p_keys
    p_keys integer,
    p_limit integer,
    p_period interval,
    p_cost integer,
    p_burst integer)
LANGUAGE plpgsql
AS $$
DECLARE
    v_call    text;
    v_table   text;
    v_from    integer := 1;
    v_to      integer;
    v_allowed bigint;
BEGIN
    IF p_side = 'extension' THEN
        v_call := 'ratelimit.consume($1 || g, $2, $3, $9, p_algorithm => $4, p_engine => $5,'
                  ' p_burst => $6)';
        v_table := 'ratelimit.key_state';
    ELSIF p_side = 'plpgsql' THEN
        v_call := format('bench.%I($1 || g, $2, $3, $9, p_engine => $5%s)', p_algorithm,
                         CASE WHEN p_burst IS NULL THEN '' ELSE ', p_burst => $6' END);
        v_table := 'bench.key_state';
    ELSE
        RAISE EXCEPTION 'bench.populate: unknown side %', p_side;
    END IF;
    IF p_engine = 'unlogged' THEN
        v_table := v_table || '_unlogged';
    END IF;
    WHILE v_from <= p_keys LOOP
        v_to := least(v_from + 4999, p_keys);
        EXECUTE format('SELECT count(*) FILTER (WHERE d.allowed)'
                       ' FROM generate_series($7, $8) AS g, LATERAL %s AS d', v_call)
        INTO v_allowed
        USING p_prefix, p_limit, p_period, p_algorithm, p_engine, p_burst, v_from, v_to, p_cost;
        IF v_allowed <> v_to - v_from + 1 THEN
            RAISE EXCEPTION 'bench.populate: % of % first calls allowed (% %, %)',
                v_allowed, v_to - v_from + 1, p_side, p_algorithm, p_engine;
        END IF;
        COMMIT;
        v_from := v_to + 1;
    END LOOP;
    IF p_algorithm IN ('token_bucket', 'gcra') THEN
        EXECUTE format('INSERT INTO bench.populated'
                       ' SELECT $1, $2, key, instant, amount, carry FROM %s'
                       ' WHERE key >= $3 AND key < $3 || chr(255)', v_table)
        USING p_side, p_engine, p_prefix;
        COMMIT;
    END IF;
END
$$;
