-- Benchmark database for the native API (bench/native.sh): the extension, and plpgsql
-- references of its six algorithms (bench/native/reference/*.sql) on tables of the same kind as
-- the extension's, so that the two sides differ only in how a call is decided and recorded.
\set ON_ERROR_STOP on

CREATE EXTENSION ratelimit;

CREATE SCHEMA bench;

-- The same composite as ratelimit.decision, so both sides return the same row.
CREATE TYPE bench.decision AS (
    allowed boolean,
    "limit" integer,
    remaining integer,
    retry_after_ms bigint,
    reset_after_ms bigint
);

-- Same columns, collation, constraints, fillfactor, row level security and logging as
-- ratelimit.key_state and ratelimit.key_state_unlogged (checked below), and the same meaning
-- of each column (include/ratelimit/algorithms.hpp), so a row of either side reads the same.
CREATE TABLE bench.key_state (
    key text COLLATE "C" NOT NULL,
    algorithm smallint NOT NULL,
    instant bigint NOT NULL,
    amount bigint NOT NULL,
    carry bigint NOT NULL,
    log bigint[],
    blocked_until bigint NOT NULL,
    expires_at bigint NOT NULL,
    CONSTRAINT key_state_pkey PRIMARY KEY (key)
) WITH (fillfactor = 70);

CREATE UNLOGGED TABLE bench.key_state_unlogged (
    key text COLLATE "C" NOT NULL,
    algorithm smallint NOT NULL,
    instant bigint NOT NULL,
    amount bigint NOT NULL,
    carry bigint NOT NULL,
    log bigint[],
    blocked_until bigint NOT NULL,
    expires_at bigint NOT NULL,
    CONSTRAINT key_state_unlogged_pkey PRIMARY KEY (key)
) WITH (fillfactor = 70);

ALTER TABLE bench.key_state ENABLE ROW LEVEL SECURITY;
ALTER TABLE bench.key_state_unlogged ENABLE ROW LEVEL SECURITY;
REVOKE ALL ON TABLE bench.key_state, bench.key_state_unlogged FROM PUBLIC;

-- If the extension's tables ever change shape (a column, an index, the fillfactor, the
-- logging, row level security), the comparison would no longer be like for like: stop here.
CREATE FUNCTION pg_temp.table_shape(p_table regclass) RETURNS text[]
LANGUAGE sql STABLE
RETURN ARRAY(
    SELECT format('column %s %s %s collate %s not null %s', a.attnum, a.attname,
                  format_type(a.atttypid, a.atttypmod), a.attcollation, a.attnotnull)
    FROM pg_attribute a
    WHERE a.attrelid = p_table AND a.attnum > 0 AND NOT a.attisdropped
    UNION ALL
    SELECT format('persistence %s, row security %s, options %s',
                  c.relpersistence, c.relrowsecurity, c.reloptions)
    FROM pg_class c WHERE c.oid = p_table
    UNION ALL
    SELECT format('index %s', regexp_replace(pg_get_indexdef(i.indexrelid), ' ON \S+ ', ' ON t '))
    FROM pg_index i WHERE i.indrelid = p_table
    ORDER BY 1);

DO $$
BEGIN
    IF pg_temp.table_shape('ratelimit.key_state') <> pg_temp.table_shape('bench.key_state') OR
       pg_temp.table_shape('ratelimit.key_state_unlogged') <>
           pg_temp.table_shape('bench.key_state_unlogged') THEN
        RAISE EXCEPTION 'bench.key_state* no longer match ratelimit.key_state*: update bench/native/setup.sql';
    END IF;
END
$$;

-- Microseconds rounded up to whole milliseconds, as the extension reports waits. An SQL
-- function, so the planner inlines it into the references' expressions.
CREATE FUNCTION bench.ms(p_micros bigint) RETURNS bigint
LANGUAGE sql IMMUTABLE PARALLEL SAFE
RETURN CASE WHEN p_micros <= 0 THEN 0 ELSE (p_micros + 999) / 1000 END;

\ir reference/fixed_window.sql
\ir reference/rolling_window.sql
\ir reference/sliding_window.sql
\ir reference/sliding_window_counter.sql
\ir reference/token_bucket.sql
\ir reference/gcra.sql
\ir populate.sql
