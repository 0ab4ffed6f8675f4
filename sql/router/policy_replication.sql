-- The policy tables (policies, tiers, key_overrides, access_list) are edited on the router and
-- reach every shard by PostgreSQL's logical replication: the router publishes them
-- (configure() creates the publication ratelimit_router_policies), each shard subscribes with
-- what shard_setup_sql() prints, and verify() compares a digest of the four tables on every
-- shard with the router's.
--
-- Two things the shard's set-up takes care of:
-- - a shard's own rows go first: a shard upgraded from 0.5.0 holds the presets that version's
--   upgrade inserted, and the subscription's initial copy would collide with them;
-- - the extension's row triggers enabled for replication (sql/install/policies.sql) invalidate
--   every backend's cached copy of these tables for each applied change, so the next call on
--   the shard sees the edit.
-- The partition-key secret (check_http's pk) is not replicated: it is each database's own.

-- A digest of the four tables, written so that no setting (DateStyle, IntervalStyle, TimeZone,
-- collation) changes it: shard_policy_digests() runs the same statement on every shard.
-- A period's months are kept apart from its epoch, which counts '1 month' as '30 days': the
-- calendar month and 30 days decide differently.
CREATE FUNCTION ratelimit_router.policy_digest()
RETURNS text
LANGUAGE sql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT md5(coalesce(string_agg(r.line, E'\n' ORDER BY r.line COLLATE "C"), '')) FROM (
        SELECT format('policies|%L|%L|%L|%L|%L|%L|%L|%L|%L|%L|%L|%L|%L|%L', p.name, p.algorithm, p."limit",
                      extract(epoch FROM p.period), p.burst, p.engine, p.count_denied, p.shadow,
                      p.hash_key, p.log_denials, p.description, p.quota_unit,
                      extract(year FROM p.period) * 12 + extract(month FROM p.period), p.time_zone)
        FROM ratelimit.policies AS p
        UNION ALL
        SELECT format('tiers|%L|%L|%L|%L', t.name, t.multiplier, t.bypass, t.description)
        FROM ratelimit.tiers AS t
        UNION ALL
        SELECT format('key_overrides|%L|%L|%L|%L|%L|%L|%L', o.policy, o.key, o."limit", o.multiplier,
                      o.bypass, extract(epoch FROM o.expires_at), o.reason)
        FROM ratelimit.key_overrides AS o
        UNION ALL
        SELECT format('access_list|%L|%L|%L|%L|%L|%L|%L|%L|%L', a.id, a.action, a.policy, a.user_id,
                      a.key, a.ip, extract(epoch FROM a.expires_at), a.reason,
                      extract(epoch FROM a.created_at))
        FROM ratelimit.access_list AS a
    ) AS r(line)
$$;

CREATE FUNCTION ratelimit_router.shard_policy_digests()
RETURNS TABLE(shard text, digest text)
LANGUAGE plproxy
AS $$
    CLUSTER 'ratelimit_router';
    RUN ON ALL;
    SELECT pg_catalog.host(pg_catalog.inet_server_addr()) || ':' || pg_catalog.inet_server_port()
               || '/' || pg_catalog.current_database() AS shard,
           md5(coalesce(string_agg(r.line, E'\n' ORDER BY r.line COLLATE "C"), '')) AS digest FROM (
        SELECT format('policies|%L|%L|%L|%L|%L|%L|%L|%L|%L|%L|%L|%L|%L|%L', p.name, p.algorithm, p."limit",
                      extract(epoch FROM p.period), p.burst, p.engine, p.count_denied, p.shadow,
                      p.hash_key, p.log_denials, p.description, p.quota_unit,
                      extract(year FROM p.period) * 12 + extract(month FROM p.period), p.time_zone)
        FROM ratelimit.policies AS p
        UNION ALL
        SELECT format('tiers|%L|%L|%L|%L', t.name, t.multiplier, t.bypass, t.description)
        FROM ratelimit.tiers AS t
        UNION ALL
        SELECT format('key_overrides|%L|%L|%L|%L|%L|%L|%L', o.policy, o.key, o."limit", o.multiplier,
                      o.bypass, extract(epoch FROM o.expires_at), o.reason)
        FROM ratelimit.key_overrides AS o
        UNION ALL
        SELECT format('access_list|%L|%L|%L|%L|%L|%L|%L|%L|%L', a.id, a.action, a.policy, a.user_id,
                      a.key, a.ip, extract(epoch FROM a.expires_at), a.reason,
                      extract(epoch FROM a.created_at))
        FROM ratelimit.access_list AS a
    ) AS r(line);
$$;

-- Every shard's digest of the policy tables next to the router's: matches is false on a shard
-- whose rows differ (not subscribed, behind, or edited there).
CREATE FUNCTION ratelimit_router.verify()
RETURNS TABLE(shard text, digest text, matches boolean)
LANGUAGE sql
AS $$
    SELECT s.shard, s.digest, s.digest = ratelimit_router.policy_digest()
    FROM ratelimit_router.shard_policy_digests() AS s
    ORDER BY s.shard
$$;

-- The router's side: the publication of the four tables (needs wal_level = logical on the
-- router when a shard subscribes).
CREATE FUNCTION ratelimit_router.publish_policies()
RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF NOT EXISTS (SELECT FROM pg_publication WHERE pubname = 'ratelimit_router_policies') THEN
        CREATE PUBLICATION ratelimit_router_policies
            FOR TABLE ratelimit.policies, ratelimit.tiers, ratelimit.key_overrides, ratelimit.access_list;
    END IF;
END;
$$;

-- What each shard runs, as a superuser, in its database, after CREATE EXTENSION ratelimit: one
-- row per configured shard, with its own subscription and replication slot (a slot's name is
-- unique on the router). router_connection is how the shards reach the router (libpq), by
-- default this server's address, port and database as the caller is connected to them, as the
-- calling role.
CREATE FUNCTION ratelimit_router.shard_setup_sql(router_connection text DEFAULT NULL)
RETURNS TABLE(shard integer, shard_connection text, setup_sql text)
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_cluster ratelimit_router.cluster := ratelimit_router.configured_cluster();
    v_connection text := coalesce(router_connection,
        format('host=%s port=%s dbname=%s user=%s',
               coalesce(host(inet_server_addr()), 'localhost'),
               coalesce(inet_server_port()::text, current_setting('port')), current_database(),
               current_user));
    v_database oid := (SELECT d.oid FROM pg_database AS d WHERE d.datname = current_database());
BEGIN
    IF btrim(v_connection) = '' THEN
        RAISE EXCEPTION 'router_connection must not be empty' USING ERRCODE = '22023';
    END IF;
    RETURN QUERY
    SELECT s.n::integer, s.c, format($sql$-- Shard %s (%s): run as a superuser, after CREATE EXTENSION ratelimit.
-- 1. The router's policy tables replace the shard's own rows (the initial copy would collide).
BEGIN;
DELETE FROM ratelimit.access_list;
DELETE FROM ratelimit.key_overrides;
DELETE FROM ratelimit.tiers;
DELETE FROM ratelimit.policies;
COMMIT;
-- 2. The subscription: the initial copy, then every change, in commit order.
CREATE SUBSCRIPTION %I CONNECTION %L PUBLICATION ratelimit_router_policies;
$sql$, s.n, s.c, format('ratelimit_router_%s_shard_%s', v_database, s.n), v_connection)
    FROM unnest(v_cluster.shards) WITH ORDINALITY AS s(c, n);
END;
$$;
