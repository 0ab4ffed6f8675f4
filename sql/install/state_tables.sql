-- The table engines' state: one row per (policy, key), logged and unlogged. Columns (what
-- each algorithm keeps in them) are documented in include/ratelimit/algorithms.hpp.

CREATE TABLE ratelimit.key_state (
    key text COLLATE "C" NOT NULL,
    algorithm smallint NOT NULL,
    instant bigint NOT NULL,
    amount bigint NOT NULL,
    carry bigint NOT NULL,
    log bigint[],
    blocked_until bigint NOT NULL,
    expires_at bigint NOT NULL,
    -- The counter's namespace: the policy it belongs to, '' for the native API's keys.
    policy text COLLATE "C" NOT NULL DEFAULT '',
    CONSTRAINT key_state_pkey PRIMARY KEY (policy, key)
) WITH (fillfactor = 70);

CREATE UNLOGGED TABLE ratelimit.key_state_unlogged (
    key text COLLATE "C" NOT NULL,
    algorithm smallint NOT NULL,
    instant bigint NOT NULL,
    amount bigint NOT NULL,
    carry bigint NOT NULL,
    log bigint[],
    blocked_until bigint NOT NULL,
    expires_at bigint NOT NULL,
    policy text COLLATE "C" NOT NULL DEFAULT '',
    CONSTRAINT key_state_unlogged_pkey PRIMARY KEY (policy, key)
) WITH (fillfactor = 70);

ALTER TABLE ratelimit.key_state ENABLE ROW LEVEL SECURITY;
ALTER TABLE ratelimit.key_state_unlogged ENABLE ROW LEVEL SECURITY;
REVOKE ALL ON TABLE ratelimit.key_state, ratelimit.key_state_unlogged FROM PUBLIC;

-- Durable counters are state a restore must keep (a restore must not hand every key a fresh
-- quota or lift a block): pg_dump dumps them. The unlogged table is not (a crash empties it
-- anyway).
SELECT pg_catalog.pg_extension_config_dump('ratelimit.key_state', '');
