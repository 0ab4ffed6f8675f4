-- The SQL edition's bodies of the C functions of sql/drop_ins/sliding_window_limits.sql (the
-- extension ratelimit_sql_sliding_window_limits), deciding as
-- src/pg/drop_ins/sliding_window_limits.cpp does: per-second buckets in rate_limit_buckets, a
-- bucket starting at s counting at now while s > now - window, only allowed calls recorded, the
-- keys of a call all or nothing.
--
-- Exactness, as in the C edition: a key's buckets are read and written under a
-- transaction-scoped advisory lock on the key (the same lock: class "RLBK", the key's hashtext),
-- so concurrent callers of one key take turns and each sees every call committed before it (READ
-- COMMITTED takes a new snapshot per statement); keys are locked in the order of their hash,
-- unsigned, so multi-key calls cannot deadlock each other; REPEATABLE READ and SERIALIZABLE,
-- whose snapshot is older than the lock, are refused.
--
-- With ratelimit.dropin_engine = unlogged each key is a sliding_window log in the unlogged
-- engine's namespace drop-in/rate_limit_buckets, decided at the start of the current second, the
-- keys through the engines' all-or-nothing decision.

-- check_rate_limit(p_key, p_limit, p_window_seconds, p_cost DEFAULT 1)
--   RETURNS TABLE(allowed boolean, current_count integer, retry_after integer)
-- @begin ratelimit_sliding_window_limits_check_rate_limit
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    now_at timestamptz;
    counted bigint;
    first_fit timestamptz;
    wait_micros bigint;
BEGIN
    -- Arguments of usual values pass one test; any others meet every check in the C edition's
    -- order (ratelimit.drop_in_window_arguments).
    IF (octet_length(p_key) BETWEEN 1 AND 256 AND p_limit > 0 AND p_window_seconds BETWEEN 1 AND 31536000
        AND p_cost BETWEEN 0 AND p_limit) IS NOT TRUE THEN
        PERFORM ratelimit.drop_in_window_arguments('p_key', p_key, 'p_limit', p_limit,
                                                   'p_window_seconds', p_window_seconds, 31536000,
                                                   'p_cost', p_cost IS NULL);
        IF p_cost < 0 THEN
            RAISE EXCEPTION 'p_cost must not be negative (got %)', p_cost
                USING ERRCODE = 'invalid_parameter_value';
        END IF;
        IF p_cost > p_limit THEN
            RAISE EXCEPTION 'p_cost must not exceed p_limit (%), got %', p_limit, p_cost
                USING ERRCODE = 'invalid_parameter_value';
        END IF;
    END IF;

    IF ratelimit.drop_in_engine() IS NOT NULL THEN
        SELECT d.fits[1], d.counts[1], d.retries[1] INTO allowed, current_count, retry_after
        FROM ratelimit.drop_in_buckets_on_engine('check_rate_limit', ratelimit.drop_in_engine(), ARRAY[p_key],
                                                 ARRAY[p_limit], ARRAY[p_window_seconds], p_cost) AS d;
        RETURN NEXT;
        RETURN;
    END IF;

    now_at := ratelimit.clock_now();
    IF current_setting('transaction_isolation') IN ('repeatable read', 'serializable') THEN
        RAISE EXCEPTION 'sliding-window rate limits need READ COMMITTED isolation'
            USING ERRCODE = 'feature_not_supported',
                  DETAIL = 'Under REPEATABLE READ or SERIALIZABLE a concurrent call''s buckets may be invisible, which would allow more than the limit.',
                  HINT = 'Call it in a READ COMMITTED transaction (PostgREST''s default).';
    END IF;
    PERFORM pg_advisory_xact_lock(1380729419, hashtext(p_key));
    -- The buckets that count at now. A call they do not let fit reads them again with the oldest
    -- whose leaving would let it, in one statement: its answer is that one snapshot's.
    SELECT coalesce(sum(b.count), 0) INTO counted FROM @extschema@.rate_limit_buckets AS b
    WHERE b.key = p_key AND b.bucket_time > now_at - p_window_seconds * interval '1 second';
    IF counted + p_cost > p_limit THEN
        WITH counted_buckets AS (
            SELECT b.bucket_time, b.count FROM @extschema@.rate_limit_buckets AS b
            WHERE b.key = p_key AND b.bucket_time > now_at - p_window_seconds * interval '1 second'),
        total AS (SELECT coalesce(sum(c.count), 0) AS n FROM counted_buckets AS c)
        SELECT t.n,
               (SELECT w.bucket_time
                FROM (SELECT c.bucket_time, sum(c.count) OVER (ORDER BY c.bucket_time) AS through
                      FROM counted_buckets AS c) AS w
                WHERE t.n - w.through + p_cost <= p_limit
                ORDER BY w.bucket_time LIMIT 1)
        INTO counted, first_fit
        FROM total AS t;
    END IF;

    allowed := counted + p_cost <= p_limit;
    IF allowed THEN
        INSERT INTO @extschema@.rate_limit_buckets AS b (key, bucket_time, count, window_seconds)
        VALUES (p_key, date_trunc('second', now_at), p_cost, p_window_seconds)
        ON CONFLICT (key, bucket_time) DO UPDATE SET count = b.count + EXCLUDED.count,
            window_seconds = GREATEST(b.window_seconds, EXCLUDED.window_seconds);
        current_count := counted + p_cost;
        retry_after := 0;
    ELSE
        -- A count past 2^31 - 1 (buckets summed under a longer window than they were counted
        -- in) stops there, as the other apps' counts do.
        current_count := LEAST(counted, 2147483647);
        -- Until the bucket that lets the call fit has left the window, in whole seconds rounded
        -- up, at least 1.
        wait_micros := (EXTRACT(epoch FROM first_fit) * 1000000)::bigint
                       + p_window_seconds * 1000000::bigint - (EXTRACT(epoch FROM now_at) * 1000000)::bigint;
        retry_after := CASE WHEN first_fit IS NULL THEN p_window_seconds
                            ELSE greatest((wait_micros + 999999) / 1000000, 1) END;
    END IF;
    RETURN NEXT;
END
$$;
-- @end ratelimit_sliding_window_limits_check_rate_limit

-- check_rate_limit_tiers(p_ip, p_email, <limits and windows of each tier>)
--   RETURNS TABLE(allowed, denied_tier, retry_after, global_count, ip_count, email_count)
-- The cleanup's global -> IP -> email evaluation as one all-or-nothing decision; IP and email
-- are trimmed (the email also lower-cased) and kept only as SHA-256 digests.
-- @begin ratelimit_sliding_window_limits_check_rate_limit_tiers
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    tier_names constant text[] := ARRAY['global', 'ip', 'email'];
    normalized_ip text;
    normalized_email text;
    keys text[];
    limits integer[];
    windows integer[];
    counts bigint[] := '{}';
    fits boolean[] := '{}';
    retries bigint[] := '{}';
    engine text;
    now_at timestamptz;
    now_micros bigint;
    bucket_at timestamptz;
    lock_hash integer;
    counted bigint;
    first_fit timestamptz;
    wait_micros bigint;
    i integer;
BEGIN
    IF p_ip IS NULL THEN
        RAISE EXCEPTION 'p_ip must not be NULL' USING ERRCODE = 'null_value_not_allowed';
    END IF;
    IF octet_length(p_ip) = 0 THEN
        RAISE EXCEPTION 'p_ip must not be empty' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF octet_length(p_ip) > 256 THEN
        RAISE EXCEPTION 'p_ip must be at most 256 bytes long, got %', octet_length(p_ip)
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF p_email IS NULL THEN
        RAISE EXCEPTION 'p_email must not be NULL' USING ERRCODE = 'null_value_not_allowed';
    END IF;
    IF octet_length(p_email) = 0 THEN
        RAISE EXCEPTION 'p_email must not be empty' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF octet_length(p_email) > 256 THEN
        RAISE EXCEPTION 'p_email must be at most 256 bytes long, got %', octet_length(p_email)
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    limits := ARRAY[p_global_limit, p_ip_limit, p_email_limit];
    windows := ARRAY[p_global_window_seconds, p_ip_window_seconds, p_email_window_seconds];
    FOR i IN 1 .. 3 LOOP
        IF limits[i] IS NULL THEN
            RAISE EXCEPTION 'p_%_limit must not be NULL', tier_names[i] USING ERRCODE = 'null_value_not_allowed';
        END IF;
        IF windows[i] IS NULL THEN
            RAISE EXCEPTION 'p_%_window_seconds must not be NULL', tier_names[i] USING ERRCODE = 'null_value_not_allowed';
        END IF;
    END LOOP;
    normalized_ip := btrim(p_ip);
    normalized_email := lower(btrim(p_email));
    -- Only spaces would trim to the one empty subject every such caller shares.
    IF octet_length(normalized_ip) = 0 THEN
        RAISE EXCEPTION 'p_ip must not be empty' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF octet_length(normalized_email) = 0 THEN
        RAISE EXCEPTION 'p_email must not be empty' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    FOR i IN 1 .. 3 LOOP
        IF limits[i] <= 0 THEN
            RAISE EXCEPTION 'p_%_limit must be greater than zero, got %', tier_names[i], limits[i]
                USING ERRCODE = 'invalid_parameter_value';
        END IF;
        IF windows[i] <= 0 THEN
            RAISE EXCEPTION 'p_%_window_seconds must be greater than zero, got %', tier_names[i], windows[i]
                USING ERRCODE = 'invalid_parameter_value';
        END IF;
        IF windows[i] > 31536000 THEN
            RAISE EXCEPTION 'p_%_window_seconds must be at most 31536000 (365 days), got %', tier_names[i], windows[i]
                USING ERRCODE = 'invalid_parameter_value';
        END IF;
    END LOOP;
    keys := ARRAY['global',
                  'ip:' || encode(sha256(convert_to(normalized_ip, getdatabaseencoding())), 'hex'),
                  'email:' || encode(sha256(convert_to(normalized_email, getdatabaseencoding())), 'hex')];

    engine := ratelimit.drop_in_engine();
    IF engine IS NOT NULL THEN
        SELECT d.counts, d.fits, d.retries INTO counts, fits, retries
        FROM ratelimit.drop_in_buckets_on_engine('check_rate_limit_tiers', engine, keys, limits, windows, 1) AS d;
    ELSE
        now_at := ratelimit.clock_now();
        now_micros := (EXTRACT(epoch FROM now_at) * 1000000)::bigint;
        IF current_setting('transaction_isolation') IN ('repeatable read', 'serializable') THEN
            RAISE EXCEPTION 'sliding-window rate limits need READ COMMITTED isolation'
                USING ERRCODE = 'feature_not_supported',
                      DETAIL = 'Under REPEATABLE READ or SERIALIZABLE a concurrent call''s buckets may be invisible, which would allow more than the limit.',
                      HINT = 'Call it in a READ COMMITTED transaction (PostgREST''s default).';
        END IF;
        FOR lock_hash IN
            SELECT h.value FROM unnest(keys) AS k(key), LATERAL (SELECT hashtext(k.key) AS value) AS h
            ORDER BY (h.value::bigint + 4294967296) % 4294967296
        LOOP
            PERFORM pg_advisory_xact_lock(1380729419, lock_hash);
        END LOOP;
        FOR i IN 1 .. 3 LOOP
            -- As check_rate_limit reads a key's buckets.
            SELECT coalesce(sum(b.count), 0) INTO counted FROM @extschema@.rate_limit_buckets AS b
            WHERE b.key = keys[i] AND b.bucket_time > now_at - windows[i] * interval '1 second';
            IF counted + 1 > limits[i] THEN
                WITH counted_buckets AS (
                    SELECT b.bucket_time, b.count FROM @extschema@.rate_limit_buckets AS b
                    WHERE b.key = keys[i] AND b.bucket_time > now_at - windows[i] * interval '1 second'),
                total AS (SELECT coalesce(sum(c.count), 0) AS n FROM counted_buckets AS c)
                SELECT t.n,
                       (SELECT w.bucket_time
                        FROM (SELECT c.bucket_time, sum(c.count) OVER (ORDER BY c.bucket_time) AS through
                              FROM counted_buckets AS c) AS w
                        WHERE t.n - w.through + 1 <= limits[i]
                        ORDER BY w.bucket_time LIMIT 1)
                INTO counted, first_fit
                FROM total AS t;
            END IF;
            fits[i] := counted + 1 <= limits[i];
            IF fits[i] THEN
                counts[i] := counted + 1;
                retries[i] := 0;
            ELSE
                counts[i] := counted;
                wait_micros := (EXTRACT(epoch FROM first_fit) * 1000000)::bigint
                               + windows[i] * 1000000::bigint - now_micros;
                retries[i] := CASE WHEN first_fit IS NULL THEN windows[i]
                                   ELSE greatest((wait_micros + 999999) / 1000000, 1) END;
            END IF;
        END LOOP;
        IF fits[1] AND fits[2] AND fits[3] THEN
            bucket_at := date_trunc('second', now_at);
            FOR i IN 1 .. 3 LOOP
                INSERT INTO @extschema@.rate_limit_buckets AS b (key, bucket_time, count, window_seconds)
                VALUES (keys[i], bucket_at, 1, windows[i])
                ON CONFLICT (key, bucket_time) DO UPDATE SET count = b.count + EXCLUDED.count,
                    window_seconds = GREATEST(b.window_seconds, EXCLUDED.window_seconds);
            END LOOP;
        END IF;
    END IF;

    allowed := fits[1] AND fits[2] AND fits[3];
    denied_tier := NULL;
    retry_after := 0;
    FOR i IN 1 .. 3 LOOP
        IF NOT fits[i] THEN
            denied_tier := coalesce(denied_tier, tier_names[i]);
            retry_after := greatest(retry_after, retries[i]);
        ELSIF NOT allowed THEN
            -- Nothing was charged: a key that would have allowed reports its count without
            -- this call.
            counts[i] := counts[i] - 1;
        END IF;
    END LOOP;
    global_count := LEAST(counts[1], 2147483647);
    ip_count := LEAST(counts[2], 2147483647);
    email_count := LEAST(counts[3], 2147483647);
    RETURN NEXT;
END
$$;
-- @end ratelimit_sliding_window_limits_check_rate_limit_tiers
