\echo Use "ALTER EXTENSION ratelimit_router UPDATE" to load this file. \quit

-- The source of build/ratelimit_router--0.6.0--0.7.0.sql, which scripts/build-sql.sh makes:
-- each include line stands for the current definition it names, written once there
-- (CONTRIBUTING.md, Versions).

-- policy_stats gains counted, as ratelimit's does in 0.7.0 (the functions are made again: their
-- result type changes).
DROP FUNCTION ratelimit_router.policy_stats();
DROP FUNCTION ratelimit_router.shard_policy_stats();

-- @include sql/router/cluster_views.sql shard_policy_stats

-- @include sql/router/cluster_views.sql policy_stats

-- memory_stats names the shards' columns it returns: ratelimit 0.7.0's memory_stats has more.
-- @include sql/router/cluster_views.sql memory_stats

-- A refund's cost above what one call could take is refused on the router, as refund refuses
-- it on a shard (ratelimit 0.7.0 answers a consume or peek of such a cost with a denial).
-- @include sql/router/native_calls.sql refund_arguments

-- @include sql/router/native_calls.sql routed_native_call
