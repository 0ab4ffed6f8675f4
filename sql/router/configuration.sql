-- The cluster: which shards there are, how keys map onto them, and the connection settings.
--
-- A key lives on one partition, hashtext(routing key) & (partitions - 1), as PL/Proxy computes
-- it; partition p is served by shard (p % number of shards) + 1. The routing key is the key's
-- hash tag, the text between its first '{' and the first '}' after it when that is not empty
-- (as in Redis Cluster), else the whole key: 'cart:{user-7}' and 'checkout:{user-7}' share a
-- partition, so an all-or-nothing decision over both runs on one shard.

-- The one row configure() writes: the shards as given and the partition count.
CREATE TABLE ratelimit_router.cluster (
    only_row boolean PRIMARY KEY DEFAULT true CHECK (only_row),
    shards text[] NOT NULL,
    partitions integer NOT NULL,
    statement_timeout_ms integer NOT NULL,
    lock_timeout_ms integer NOT NULL,
    connect_timeout_s integer NOT NULL,
    configured_at timestamptz NOT NULL DEFAULT pg_catalog.now()
);
SELECT pg_catalog.pg_extension_config_dump('ratelimit_router.cluster', '');

-- The text a key is routed by: its hash tag when it has one, else the key (the extension's own
-- code, ratelimit/routing_key.hpp).
CREATE FUNCTION ratelimit_router.routing_key(p_key text)
RETURNS text
LANGUAGE c IMMUTABLE STRICT PARALLEL SAFE
AS '$libdir/ratelimit', 'ratelimit_router_routing_key';

-- The value PL/Proxy's RUN ON masks into a partition number: hashtext(routing_key(p_key)).
CREATE FUNCTION ratelimit_router.routing_hash(p_key text)
RETURNS integer
LANGUAGE c IMMUTABLE STRICT PARALLEL SAFE
AS '$libdir/ratelimit', 'ratelimit_router_routing_hash';

-- routing_hash of each key of a batch, in order, in one pass.
CREATE FUNCTION ratelimit_router.routing_hashes(p_keys text[])
RETURNS integer[]
LANGUAGE c IMMUTABLE STRICT PARALLEL SAFE
AS '$libdir/ratelimit', 'ratelimit_router_routing_hashes';

-- The configured cluster, or 55000 when configure() has not run.
CREATE FUNCTION ratelimit_router.configured_cluster()
RETURNS ratelimit_router.cluster
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_cluster ratelimit_router.cluster;
BEGIN
    SELECT * INTO v_cluster FROM ratelimit_router.cluster;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'ratelimit_router is not configured'
            USING ERRCODE = '55000',
                  HINT = 'Run SELECT ratelimit_router.configure(ARRAY[''host=... dbname=...'', ...], 64).';
    END IF;
    RETURN v_cluster;
END;
$$;

-- The partition that holds p_key (0 to partitions - 1).
CREATE FUNCTION ratelimit_router.partition_of(p_key text)
RETURNS integer
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF p_key IS NULL THEN
        RAISE EXCEPTION 'p_key must not be NULL' USING ERRCODE = '22004';
    END IF;
    RETURN ratelimit_router.routing_hash(p_key) & ((ratelimit_router.configured_cluster()).partitions - 1);
END;
$$;

-- The shard that holds p_key: its position (from 1) in the shards given to configure().
CREATE FUNCTION ratelimit_router.shard_of(p_key text)
RETURNS integer
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_cluster ratelimit_router.cluster := ratelimit_router.configured_cluster();
BEGIN
    IF p_key IS NULL THEN
        RAISE EXCEPTION 'p_key must not be NULL' USING ERRCODE = '22004';
    END IF;
    RETURN (ratelimit_router.routing_hash(p_key) & (v_cluster.partitions - 1))
           % pg_catalog.cardinality(v_cluster.shards) + 1;
END;
$$;

-- A shard's connection string as PL/Proxy uses it: the shard's own, plus the timeouts and
-- keepalives. The shard's statement_timeout and lock_timeout end a call that waits there (a
-- held lock, a slow disk); keepalives find a peer that vanished. PL/Proxy's connect is
-- asynchronous, so libpq's connect_timeout does not bound it, and a shard that is frozen (its
-- process stopped, its socket open) answers nothing: only a statement_timeout on the router's
-- role ends such a call (docs/scaling-out.md).
CREATE FUNCTION ratelimit_router.connection_string(p_shard text, p_statement_timeout_ms integer,
                                                   p_lock_timeout_ms integer, p_connect_timeout_s integer)
RETURNS text
LANGUAGE sql IMMUTABLE
AS $$
    SELECT p_shard
        || ' connect_timeout=' || p_connect_timeout_s
        || ' keepalives=1 keepalives_idle=5 keepalives_interval=2 keepalives_count=3'
        || ' options=''-c statement_timeout=' || p_statement_timeout_ms
        || ' -c lock_timeout=' || p_lock_timeout_ms || ''''
$$;

-- Writes the PL/Proxy cluster ratelimit_router (a SQL/MED server of the plproxy wrapper, with
-- one option pN per partition, and a user mapping for PUBLIC: each role connects to the shards
-- as itself). partitions is a power of two, at least the number of shards: keys map onto
-- partitions for good, and partitions onto shards, so a shard added later takes whole
-- partitions. Returns the number of partitions each shard serves, by shard.
CREATE FUNCTION ratelimit_router.configure(shards text[], partitions integer,
                                           statement_timeout_ms integer DEFAULT 2000,
                                           lock_timeout_ms integer DEFAULT 1000,
                                           connect_timeout_s integer DEFAULT 2)
RETURNS TABLE(shard integer, connection_string text, partitions_served integer)
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_count integer;
    v_options text := '';
    i integer;
    j integer;
BEGIN
    IF shards IS NULL THEN
        RAISE EXCEPTION 'shards must not be NULL' USING ERRCODE = '22004';
    END IF;
    IF array_ndims(shards) IS DISTINCT FROM 1 THEN
        RAISE EXCEPTION 'shards must be an array of one dimension with 1 to 256 connection strings'
            USING ERRCODE = '22023';
    END IF;
    v_count := cardinality(shards);
    IF v_count > 256 THEN
        RAISE EXCEPTION 'shards must hold 1 to 256 connection strings, got %', v_count
            USING ERRCODE = '22023';
    END IF;
    FOR i IN 1 .. v_count LOOP
        IF shards[array_lower(shards, 1) + i - 1] IS NULL THEN
            RAISE EXCEPTION 'shards[%] must not be NULL', i USING ERRCODE = '22004';
        END IF;
        IF btrim(shards[array_lower(shards, 1) + i - 1]) = '' THEN
            RAISE EXCEPTION 'shards[%] must not be empty', i USING ERRCODE = '22023';
        END IF;
        IF shards[array_lower(shards, 1) + i - 1] ~* '(^|\s)(options|user|password)\s*=' THEN
            RAISE EXCEPTION 'shards[%] must not set options, user or password', i
                USING ERRCODE = '22023',
                      HINT = 'configure() sets the options (timeouts); each role connects as itself, with its password in ~/.pgpass of the router''s server or a user mapping.';
        END IF;
        FOR j IN 1 .. i - 1 LOOP
            IF shards[array_lower(shards, 1) + j - 1] = shards[array_lower(shards, 1) + i - 1] THEN
                RAISE EXCEPTION 'shards[%] repeats shards[%]', i, j USING ERRCODE = '22023';
            END IF;
        END LOOP;
    END LOOP;
    IF partitions IS NULL THEN
        RAISE EXCEPTION 'partitions must not be NULL' USING ERRCODE = '22004';
    END IF;
    IF partitions < 1 OR partitions > 65536 OR (partitions & (partitions - 1)) <> 0 THEN
        RAISE EXCEPTION 'partitions must be a power of two from 1 to 65536, got %', partitions
            USING ERRCODE = '22023';
    END IF;
    IF partitions < v_count THEN
        RAISE EXCEPTION 'partitions must be at least the number of shards (%), got %', v_count, partitions
            USING ERRCODE = '22023';
    END IF;
    IF statement_timeout_ms IS NULL OR statement_timeout_ms < 1 THEN
        RAISE EXCEPTION 'statement_timeout_ms must be at least 1, got %', coalesce(statement_timeout_ms::text, 'NULL')
            USING ERRCODE = CASE WHEN statement_timeout_ms IS NULL THEN '22004' ELSE '22023' END;
    END IF;
    IF lock_timeout_ms IS NULL OR lock_timeout_ms < 1 THEN
        RAISE EXCEPTION 'lock_timeout_ms must be at least 1, got %', coalesce(lock_timeout_ms::text, 'NULL')
            USING ERRCODE = CASE WHEN lock_timeout_ms IS NULL THEN '22004' ELSE '22023' END;
    END IF;
    IF connect_timeout_s IS NULL OR connect_timeout_s < 2 THEN
        -- libpq treats 1 as 2 seconds; say what is used.
        RAISE EXCEPTION 'connect_timeout_s must be at least 2, got %', coalesce(connect_timeout_s::text, 'NULL')
            USING ERRCODE = CASE WHEN connect_timeout_s IS NULL THEN '22004' ELSE '22023' END;
    END IF;

    FOR i IN 0 .. partitions - 1 LOOP
        v_options := v_options || CASE WHEN i > 0 THEN ', ' ELSE '' END
            || format('p%s %L', i, ratelimit_router.connection_string(
                   shards[array_lower(shards, 1) + i % v_count], statement_timeout_ms, lock_timeout_ms,
                   connect_timeout_s));
    END LOOP;
    IF EXISTS (SELECT FROM pg_foreign_server WHERE srvname = 'ratelimit_router') THEN
        DROP SERVER ratelimit_router CASCADE;
    END IF;
    EXECUTE 'CREATE SERVER ratelimit_router FOREIGN DATA WRAPPER plproxy OPTIONS (' || v_options || ')';
    CREATE USER MAPPING FOR PUBLIC SERVER ratelimit_router;
    -- PL/Proxy checks USAGE on the server for the calling role; what a role may do on a shard
    -- is the shard's grants' to decide.
    GRANT USAGE ON FOREIGN SERVER ratelimit_router TO PUBLIC;

    PERFORM ratelimit_router.publish_policies();

    DELETE FROM ratelimit_router.cluster;
    INSERT INTO ratelimit_router.cluster (shards, partitions, statement_timeout_ms, lock_timeout_ms,
                                          connect_timeout_s)
    VALUES (shards[array_lower(shards, 1) : array_upper(shards, 1)], partitions, statement_timeout_ms,
            lock_timeout_ms, connect_timeout_s);

    RETURN QUERY
        SELECT s.n::integer, ratelimit_router.connection_string(s.c, statement_timeout_ms, lock_timeout_ms,
                                                       connect_timeout_s),
               (partitions / v_count + CASE WHEN s.n - 1 < partitions % v_count THEN 1 ELSE 0 END)::integer
        FROM unnest(shards) WITH ORDINALITY AS s(c, n);
END;
$$;

-- The failure policy of the calls whose shard cannot answer: 'error' (the default) raises the
-- shard's error; 'allow' and 'deny' answer with that decision (policy calls say reason
-- 'shard_unavailable'; native calls leave remaining and reset_after_ms NULL).
CREATE FUNCTION ratelimit_router.on_shard_error()
RETURNS text
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_value text := coalesce(nullif(current_setting('ratelimit_router.on_shard_error', true), ''), 'error');
BEGIN
    IF v_value NOT IN ('error', 'allow', 'deny') THEN
        RAISE EXCEPTION 'ratelimit_router.on_shard_error must be error, allow or deny, got "%"', v_value
            USING ERRCODE = '22023';
    END IF;
    RETURN v_value;
END;
$$;
