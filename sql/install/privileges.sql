-- Privileges: what PUBLIC may not do, and what Supabase's API roles and service_role may.

-- Only trusted roles may name the user or run cleanup.
REVOKE EXECUTE ON FUNCTION @extschema@.check_rate_limit_for_user(uuid, text, integer, integer) FROM PUBLIC;
REVOKE EXECUTE ON FUNCTION @extschema@.cleanup_rpc_rate_limits(interval) FROM PUBLIC;

-- Supabase grants new tables and functions in public to its API roles by default privileges;
-- take back what they must not have, and give service_role the trusted calls.
DO $$
DECLARE
    api_role text;
BEGIN
    FOREACH api_role IN ARRAY ARRAY['anon', 'authenticated'] LOOP
        IF EXISTS (SELECT 1 FROM pg_catalog.pg_roles WHERE rolname = api_role) THEN
            EXECUTE pg_catalog.format('REVOKE ALL ON TABLE %I.rpc_rate_limits FROM %I',
                                      '@extschema@', api_role);
            EXECUTE pg_catalog.format(
                'REVOKE EXECUTE ON FUNCTION %I.check_rate_limit_for_user(uuid, text, integer, integer), '
                '%I.cleanup_rpc_rate_limits(interval) FROM %I',
                '@extschema@', '@extschema@', api_role);
        END IF;
    END LOOP;
    IF EXISTS (SELECT 1 FROM pg_catalog.pg_roles WHERE rolname = 'service_role') THEN
        EXECUTE pg_catalog.format(
            'GRANT EXECUTE ON FUNCTION %I.check_rate_limit_for_user(uuid, text, integer, integer), '
            '%I.cleanup_rpc_rate_limits(interval) TO service_role',
            '@extschema@', '@extschema@');
    END IF;
END
$$;

------------------------------------------------------------------------------------------------
-- Drop-in endpoint and sliding-window limits
-- An authenticated user may only spend its own endpoint quota (increment_rate_limit checks
-- p_user_id against the JWT sub); the sliding-window keys are chosen by the caller, so only
-- trusted roles may check them; cleanup and scheduling are for administrators.
------------------------------------------------------------------------------------------------

REVOKE EXECUTE ON FUNCTION
    @extschema@.increment_rate_limit(uuid, text, integer, integer, integer),
    @extschema@.check_rate_limit(text, integer, integer, integer),
    @extschema@.check_rate_limit_tiers(text, text, integer, integer, integer, integer, integer, integer),
    @extschema@.cleanup_expired_rate_limits(),
    @extschema@.cleanup_old_rate_limit_buckets(),
    ratelimit.schedule_cleanup(text),
    ratelimit.unschedule_cleanup()
FROM PUBLIC;

DO $$
DECLARE
    api_role text;
    trusted_functions constant text :=
        '@extschema@.increment_rate_limit(uuid, text, integer, integer, integer), '
        '@extschema@.check_rate_limit(text, integer, integer, integer), '
        '@extschema@.check_rate_limit_tiers(text, text, integer, integer, integer, integer, integer, integer), '
        '@extschema@.cleanup_expired_rate_limits(), '
        '@extschema@.cleanup_old_rate_limit_buckets()';
BEGIN
    FOREACH api_role IN ARRAY ARRAY['anon', 'authenticated'] LOOP
        IF EXISTS (SELECT 1 FROM pg_catalog.pg_roles WHERE rolname = api_role) THEN
            EXECUTE pg_catalog.format('REVOKE ALL ON TABLE @extschema@.rate_limits, '
                                      '@extschema@.rate_limit_buckets FROM %I', api_role);
            EXECUTE pg_catalog.format('REVOKE EXECUTE ON FUNCTION %s FROM %I',
                                      trusted_functions, api_role);
        END IF;
    END LOOP;
    IF EXISTS (SELECT 1 FROM pg_catalog.pg_roles WHERE rolname = 'authenticated') THEN
        GRANT EXECUTE ON FUNCTION
            @extschema@.increment_rate_limit(uuid, text, integer, integer, integer) TO authenticated;
    END IF;
    IF EXISTS (SELECT 1 FROM pg_catalog.pg_roles WHERE rolname = 'service_role') THEN
        EXECUTE pg_catalog.format('GRANT EXECUTE ON FUNCTION %s TO service_role', trusted_functions);
    END IF;
END
$$;

------------------------------------------------------------------------------------------------
-- The native API. Callers choose the keys, so the native API is for trusted roles: the owner and,
-- on Supabase, service_role (edge functions). Grant EXECUTE to an application role to let it
-- decide; reset, block and cleanup are administration.
------------------------------------------------------------------------------------------------

REVOKE EXECUTE ON FUNCTION
    ratelimit.consume(text, integer, interval, integer, text, text, integer),
    ratelimit.peek(text, integer, interval, integer, text, text, integer),
    ratelimit.refund(text, integer, interval, integer, text, text, integer),
    ratelimit.reset(text, text),
    ratelimit.block(text, interval, text),
    ratelimit.reset_policy_key(text, text),
    ratelimit.block_policy_key(text, text, interval),
    ratelimit.cleanup_key_state(text)
FROM PUBLIC;

DO $$
BEGIN
    IF EXISTS (SELECT 1 FROM pg_catalog.pg_roles WHERE rolname = 'service_role') THEN
        GRANT USAGE ON SCHEMA ratelimit TO service_role;
        GRANT EXECUTE ON FUNCTION
            ratelimit.consume(text, integer, interval, integer, text, text, integer),
            ratelimit.peek(text, integer, interval, integer, text, text, integer),
            ratelimit.refund(text, integer, interval, integer, text, text, integer),
            ratelimit.reset(text, text),
            ratelimit.block(text, interval, text),
            ratelimit.reset_policy_key(text, text),
            ratelimit.block_policy_key(text, text, interval)
        TO service_role;
    END IF;
END
$$;

-- Stats reveal no key (the store keeps hashes only) but are still for operators: the owner
-- and, on Supabase, service_role.
REVOKE EXECUTE ON FUNCTION ratelimit.memory_stats() FROM PUBLIC;
REVOKE ALL ON TABLE ratelimit.memory_stats FROM PUBLIC;

DO $$
BEGIN
    IF EXISTS (SELECT 1 FROM pg_catalog.pg_roles WHERE rolname = 'service_role') THEN
        GRANT EXECUTE ON FUNCTION ratelimit.memory_stats() TO service_role;
        GRANT SELECT ON TABLE ratelimit.memory_stats TO service_role;
    END IF;
END
$$;

------------------------------------------------------------------------------------------------
-- Policies. Deciding by policy is for the roles that may call the native API (service_role
-- on Supabase); the tables and counters are for administrators only.
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

REVOKE EXECUTE ON FUNCTION ratelimit.policy_tables_changed() FROM PUBLIC;

-- Presets are for administrators: they write the policy tables, which only administrators own.
REVOKE ALL ON TABLE ratelimit.preset_catalog, ratelimit.preset_policies, ratelimit.preset_tiers
    FROM PUBLIC;
REVOKE EXECUTE ON FUNCTION ratelimit.presets(), ratelimit.load_preset(text, boolean) FROM PUBLIC;
