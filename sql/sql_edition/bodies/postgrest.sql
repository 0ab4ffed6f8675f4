-- The SQL edition's bodies of the request's identity in sql/install/postgrest.sql (block
-- request_identity), as src/pg/postgrest/jwt_caller.cpp and pre_request.cpp read it. Both run
-- on an app's every call (row security, declared limiters), wherever the caller's search_path
-- points: no SET, every function and operator named with its schema. No exception block either,
-- which a parallel worker could not enter.

-- jwt_subject(): the request's caller as auth.uid() finds it: a non-empty request.jwt.claim.sub
-- first, then the "sub" member of request.jwt.claims (the last one when the name repeats); NULL
-- when anonymous (no sub, or null). Claims that are not a JSON object, or a sub that is empty or
-- not a string, are an error naming the setting, never an anonymous caller. Before PostgreSQL 16
-- (which tells whether a text is JSON without raising) claims that are not JSON at all raise the
-- parser's own error (22P02); the drop-ins check them first and raise the C edition's.
-- @begin ratelimit_jwt_subject
LANGUAGE plpgsql STABLE PARALLEL SAFE
AS $$
DECLARE
    claim_sub constant text := pg_catalog.current_setting('request.jwt.claim.sub', true);
    claims text;
    shape text;
    parsed jsonb;
    sub jsonb;
    sub_text text;
BEGIN
    IF claim_sub IS NOT NULL AND claim_sub OPERATOR(pg_catalog.<>) '' THEN
        RETURN claim_sub;
    END IF;
    claims := pg_catalog.current_setting('request.jwt.claims', true);
    IF claims IS NULL OR claims OPERATOR(pg_catalog.=) '' THEN
        RETURN NULL;
    END IF;
    -- Claims nested deeper than 512 are refused before they are parsed, as the C edition
    -- refuses them. Only a text of 513 opening brackets can be: then its strings are taken out
    -- and the innermost pairs of brackets removed level by level.
    IF pg_catalog.length(claims) OPERATOR(pg_catalog.>) 1025 THEN
        shape := pg_catalog.regexp_replace(claims, '"(?:[^"\\]|\\.)*"', '', 'g');
        shape := pg_catalog.regexp_replace(shape, '[^][{}]', '', 'g');
        IF pg_catalog.length(pg_catalog.regexp_replace(shape, '[]}]', '', 'g')) OPERATOR(pg_catalog.>) 512 THEN
            FOR level IN 1 .. 512 LOOP
                EXIT WHEN shape OPERATOR(pg_catalog.=) '';
                shape := pg_catalog.regexp_replace(shape, '\{\}|\[\]', '', 'g');
            END LOOP;
            IF shape OPERATOR(pg_catalog.<>) '' THEN
                RAISE EXCEPTION 'request.jwt.claims must be a JSON object'
                    USING ERRCODE = 'invalid_parameter_value';
            END IF;
        END IF;
    END IF;
    IF pg_catalog.current_setting('server_version_num')::pg_catalog.int4 OPERATOR(pg_catalog.>=) 160000 THEN
        -- A statement of its own: it is prepared only where the function exists.
        IF NOT pg_catalog.pg_input_is_valid(claims, 'jsonb') THEN
            RAISE EXCEPTION 'request.jwt.claims must be a JSON object' USING ERRCODE = 'invalid_parameter_value';
        END IF;
    END IF;
    parsed := claims::pg_catalog.jsonb;
    IF pg_catalog.jsonb_typeof(parsed) OPERATOR(pg_catalog.<>) 'object' THEN
        RAISE EXCEPTION 'request.jwt.claims must be a JSON object' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    sub := parsed OPERATOR(pg_catalog.->) 'sub';
    IF sub IS NULL OR pg_catalog.jsonb_typeof(sub) OPERATOR(pg_catalog.=) 'null' THEN
        RETURN NULL;
    END IF;
    IF pg_catalog.jsonb_typeof(sub) OPERATOR(pg_catalog.<>) 'string' THEN
        RAISE EXCEPTION 'request.jwt.claims has a "sub" claim that is not a string or null'
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    sub_text := parsed OPERATOR(pg_catalog.->>) 'sub';
    IF sub_text OPERATOR(pg_catalog.=) '' THEN
        RAISE EXCEPTION 'request.jwt.claims has an empty "sub" claim' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    RETURN sub_text;
END
$$;
-- @end ratelimit_jwt_subject

-- client_address(): the request's client address as pre_request() keys it: the header
-- ratelimit.client_ip_header names (x-forwarded-for unless set) in request.headers, its hop
-- ratelimit.client_ip_trusted_proxies in from the right (1 unless set; 0: the first hop), an
-- IPv4 or IPv6 address as inet_pton reads it (no mask, no zone); NULL outside a request, without
-- the header, or with no address there.
-- @begin ratelimit_client_address
LANGUAGE plpgsql STABLE PARALLEL SAFE
AS $$
DECLARE
    header_name constant text := COALESCE(
        pg_catalog.current_setting('ratelimit.client_ip_header', true), 'x-forwarded-for');
    trusted_setting constant text :=
        NULLIF(pg_catalog.current_setting('ratelimit.client_ip_trusted_proxies', true), '');
    headers constant text := pg_catalog.current_setting('request.headers', true);
    parsed jsonb;
    forwarded jsonb;
    trusted integer;
    hops text[];
    hop text;
    halves text[];
    groups text[];
    group_count integer := 0;
BEGIN
    IF headers IS NULL OR headers OPERATOR(pg_catalog.=) '' OR header_name OPERATOR(pg_catalog.=) '' THEN
        RETURN NULL;
    END IF;
    parsed := headers::pg_catalog.jsonb;
    IF pg_catalog.jsonb_typeof(parsed) OPERATOR(pg_catalog.<>) 'object' THEN
        RAISE EXCEPTION 'request.headers must be a JSON object' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    forwarded := parsed OPERATOR(pg_catalog.->) header_name;
    IF forwarded IS NULL OR pg_catalog.jsonb_typeof(forwarded) OPERATOR(pg_catalog.<>) 'string' THEN
        RETURN NULL;
    END IF;
    trusted := COALESCE(trusted_setting::pg_catalog.int4, 1);
    IF trusted_setting IS NOT NULL
       AND (trusted OPERATOR(pg_catalog.<) 0 OR trusted OPERATOR(pg_catalog.>) 32) THEN
        RAISE EXCEPTION 'ratelimit.client_ip_trusted_proxies must be 0 to 32 (got %)', trusted
            USING ERRCODE = 'invalid_parameter_value';
    END IF;

    -- The hop: the first with 0 trusted proxies, else the trusted-th from the right; none when
    -- the header has fewer hops.
    hop := parsed OPERATOR(pg_catalog.->>) header_name;
    IF trusted OPERATOR(pg_catalog.=) 0 THEN
        hop := pg_catalog.split_part(hop, ',', 1);
    ELSE
        hops := pg_catalog.string_to_array(hop, ',');
        IF pg_catalog.cardinality(hops) OPERATOR(pg_catalog.<) trusted THEN
            -- string_to_array gives no element for an empty text, which is one blank hop.
            RETURN NULL;
        END IF;
        hop := hops[pg_catalog.cardinality(hops) OPERATOR(pg_catalog.-) trusted OPERATOR(pg_catalog.+) 1];
    END IF;
    hop := pg_catalog.btrim(hop, E' \t');
    IF hop OPERATOR(pg_catalog.=) '' OR pg_catalog.octet_length(hop) OPERATOR(pg_catalog.>) 64 THEN
        RETURN NULL;
    END IF;

    -- IPv4: four decimal parts of 0 to 255 without leading zeros.
    IF hop OPERATOR(pg_catalog.~) '^((25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])\.){3}(25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])$' THEN
        RETURN hop::pg_catalog.inet;
    END IF;
    -- IPv6: groups of 1 to 4 hex digits, the last two of which may be an IPv4 address; eight of
    -- them, or fewer around one "::" that stands for at least one group of zeros.
    IF hop OPERATOR(pg_catalog.!~) '^[0-9A-Fa-f:.]+$' THEN
        RETURN NULL;
    END IF;
    halves := pg_catalog.string_to_array(hop, '::');
    IF pg_catalog.cardinality(halves) OPERATOR(pg_catalog.>) 2 THEN
        RETURN NULL;
    END IF;
    FOR half IN 1 .. pg_catalog.cardinality(halves) LOOP
        CONTINUE WHEN halves[half] OPERATOR(pg_catalog.=) '';
        groups := pg_catalog.string_to_array(halves[half], ':');
        FOR g IN 1 .. pg_catalog.cardinality(groups) LOOP
            IF groups[g] OPERATOR(pg_catalog.~) '^[0-9A-Fa-f]{1,4}$' THEN
                group_count := group_count OPERATOR(pg_catalog.+) 1;
            ELSIF half OPERATOR(pg_catalog.=) pg_catalog.cardinality(halves)
                  AND g OPERATOR(pg_catalog.=) pg_catalog.cardinality(groups)
                  AND groups[g] OPERATOR(pg_catalog.~) '^((25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])\.){3}(25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])$' THEN
                group_count := group_count OPERATOR(pg_catalog.+) 2;
            ELSE
                RETURN NULL;
            END IF;
        END LOOP;
    END LOOP;
    IF pg_catalog.cardinality(halves) OPERATOR(pg_catalog.=) 2
       AND group_count OPERATOR(pg_catalog.<=) 7
       OR pg_catalog.cardinality(halves) OPERATOR(pg_catalog.=) 1
       AND group_count OPERATOR(pg_catalog.=) 8 THEN
        RETURN hop::pg_catalog.inet;
    END IF;
    RETURN NULL;
END
$$;
-- @end ratelimit_client_address
