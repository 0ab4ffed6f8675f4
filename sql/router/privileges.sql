-- Who may call what on the router. Every call runs on the shards as the calling role (PL/Proxy
-- connects as it), so the shards' own grants decide what it may do there; these keep the
-- router's administration to administrators.
REVOKE EXECUTE ON FUNCTION ratelimit_router.configure(text[], integer, integer, integer, integer) FROM PUBLIC;
REVOKE EXECUTE ON FUNCTION ratelimit_router.publish_policies() FROM PUBLIC;
REVOKE EXECUTE ON FUNCTION ratelimit_router.cleanup_key_state(text) FROM PUBLIC;
REVOKE EXECUTE ON FUNCTION ratelimit_router.shard_cleanup_key_state(text) FROM PUBLIC;
REVOKE EXECUTE ON FUNCTION ratelimit_router.denial_log() FROM PUBLIC;
REVOKE ALL ON TABLE ratelimit_router.cluster FROM PUBLIC;
GRANT SELECT ON TABLE ratelimit_router.cluster TO PUBLIC;

-- The routed calls are for every role that may call the shards' functions.
GRANT USAGE ON SCHEMA ratelimit_router TO PUBLIC;
