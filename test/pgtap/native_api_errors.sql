-- Every bad argument of every native function: the documented SQLSTATE (22004 for a NULL,
-- 22023 for a value out of range) with a message that names the parameter, and nothing written
-- to either engine. Values just inside the limits are accepted. The state tables are closed:
-- row level security on, no privileges for PUBLIC or any role but their owner.
BEGIN;
CREATE EXTENSION IF NOT EXISTS pgtap;
\ir install_edition.psql
SET LOCAL timezone = 'UTC';
SET LOCAL ratelimit.test_clock = '2026-01-01 00:00:01+00';

SELECT plan(444);

CREATE SCHEMA native_test;

-- Both engines' tables, whole, with their row counts: taken before and after each failing call.
CREATE FUNCTION native_test.tables() RETURNS jsonb LANGUAGE sql AS $$
    SELECT jsonb_build_object(
        'key_state rows', (SELECT count(*) FROM ratelimit.key_state),
        'key_state_unlogged rows', (SELECT count(*) FROM ratelimit.key_state_unlogged),
        'key_state', (SELECT jsonb_agg(to_jsonb(s) ORDER BY s.key) FROM ratelimit.key_state AS s),
        'key_state_unlogged', (SELECT jsonb_agg(to_jsonb(s) ORDER BY s.key) FROM ratelimit.key_state_unlogged AS s))
$$;

-- A valid call of each function with every argument named (SQL text); each case below replaces
-- one or a few of them.
CREATE TABLE native_test.arguments (
    function text, position integer, name text, valid text,
    PRIMARY KEY (function, name)
);
INSERT INTO native_test.arguments
SELECT f, a.position, a.name, a.valid
FROM unnest(ARRAY['consume', 'peek', 'refund']) AS f,
     (VALUES (1, 'p_key', '''native:err'''), (2, 'p_limit', '3'), (3, 'p_period', '''10 seconds'''),
             (4, 'p_cost', '1'), (5, 'p_algorithm', '''fixed_window'''), (6, 'p_engine', '''table'''),
             (7, 'p_burst', 'NULL')) AS a(position, name, valid)
UNION ALL
VALUES ('reset', 1, 'p_key', '''native:err'''), ('reset', 2, 'p_engine', '''table'''),
       ('block', 1, 'p_key', '''native:err'''), ('block', 2, 'p_duration', '''1 minute'''),
       ('block', 3, 'p_engine', '''table'''),
       ('cleanup_key_state', 1, 'p_engine', 'NULL');

CREATE FUNCTION native_test.call_expr(p_function text, p_changes jsonb) RETURNS text LANGUAGE sql AS $$
    SELECT format('ratelimit.%s(%s)', p_function,
                  string_agg(format('%s => %s', a.name, coalesce(p_changes ->> a.name, a.valid)), ', '
                             ORDER BY a.position))
    FROM native_test.arguments AS a
    WHERE a.function = p_function
$$;

CREATE FUNCTION native_test.changes_text(p_changes jsonb) RETURNS text LANGUAGE sql AS $$
    SELECT string_agg(format('%s => %s', key, value), ', ' ORDER BY key) FROM jsonb_each_text(p_changes)
$$;

-- The failing calls. functions: which functions take the case ('decision' = consume, peek and
-- refund, which share their arguments).
CREATE TABLE native_test.bad_calls (
    id serial,
    functions text[] NOT NULL,
    changes jsonb NOT NULL,
    sqlstate text NOT NULL,
    parameter text NOT NULL,
    why text NOT NULL
);

-- NULL in each position that has no NULL meaning (p_burst NULL = the limit; cleanup's
-- p_engine NULL = both engines).
INSERT INTO native_test.bad_calls (functions, changes, sqlstate, parameter, why)
SELECT fs, jsonb_build_object(p, 'NULL'), '22004', p, 'NULL'
FROM (VALUES ('{decision}'::text[], 'p_key'), ('{decision}', 'p_limit'), ('{decision}', 'p_period'),
             ('{decision}', 'p_cost'), ('{decision}', 'p_algorithm'), ('{decision}', 'p_engine'),
             ('{reset}', 'p_key'), ('{reset}', 'p_engine'),
             ('{block}', 'p_key'), ('{block}', 'p_duration'), ('{block}', 'p_engine')) AS v(fs, p);

INSERT INTO native_test.bad_calls (functions, changes, sqlstate, parameter, why) VALUES
    -- keys are 1..256 bytes (not characters)
    ('{decision,reset,block}', '{"p_key": "''''"}', '22023', 'p_key', 'empty key'),
    ('{decision,reset,block}', '{"p_key": "repeat(''k'', 257)"}', '22023', 'p_key', '257 bytes'),
    ('{decision}', '{"p_key": "repeat(''é'', 129)"}', '22023', 'p_key', '129 characters, 258 bytes'),
    ('{decision}', '{"p_key": "repeat(''€'', 86)"}', '22023', 'p_key', '86 characters, 258 bytes'),
    -- limits are 1..2147483647
    ('{decision}', '{"p_limit": "0"}', '22023', 'p_limit', 'limit 0'),
    ('{decision}', '{"p_limit": "-1"}', '22023', 'p_limit', 'negative limit'),
    ('{decision}', '{"p_limit": "-2147483648"}', '22023', 'p_limit', 'smallest integer'),
    -- periods are 1 ms .. 365 days, with no months (a month has no fixed length) but '1 month',
    -- the calendar month (calendar_periods.sql)
    ('{decision}', '{"p_period": "''0 seconds''"}', '22023', 'p_period', 'zero period'),
    ('{decision}', '{"p_period": "''-10 seconds''"}', '22023', 'p_period', 'negative period'),
    ('{decision}', '{"p_period": "''999 microseconds''"}', '22023', 'p_period', 'below 1 ms'),
    ('{decision}', '{"p_period": "''2 months''"}', '22023', 'p_period', 'two months'),
    ('{decision}', '{"p_period": "''1 year''"}', '22023', 'p_period', 'a year is 12 months'),
    ('{decision}', '{"p_period": "''1 month -30 days''"}', '22023', 'p_period', 'months even when the days cancel them out'),
    ('{decision}', '{"p_period": "''366 days''"}', '22023', 'p_period', 'above 365 days'),
    ('{decision}', '{"p_period": "''365 days 00:00:00.000001''"}', '22023', 'p_period', '365 days and 1 microsecond'),
    ('{decision}', '{"p_period": "''8761 hours''"}', '22023', 'p_period', '365 days and 1 hour, in hours'),
    -- costs are 0 or more; a refund's at most N (B for the buckets), a consume's or peek's above
    -- that is a denial (below)
    ('{decision}', '{"p_cost": "-1"}', '22023', 'p_cost', 'negative cost'),
    ('{decision}', '{"p_cost": "-2147483648"}', '22023', 'p_cost', 'smallest integer'),
    ('{refund}', '{"p_cost": "4", "p_algorithm": "''fixed_window''"}', '22023', 'p_cost', 'cost above the limit can never be allowed'),
    ('{refund}', '{"p_cost": "4", "p_algorithm": "''rolling_window''"}', '22023', 'p_cost', 'cost above the limit can never be allowed'),
    ('{refund}', '{"p_cost": "4", "p_algorithm": "''sliding_window''"}', '22023', 'p_cost', 'cost above the limit can never be allowed'),
    ('{refund}', '{"p_cost": "4", "p_algorithm": "''sliding_window_counter''"}', '22023', 'p_cost', 'cost above the limit can never be allowed'),
    ('{refund}', '{"p_cost": "4", "p_algorithm": "''token_bucket''"}', '22023', 'p_cost', 'cost above the burst (= limit) can never be allowed'),
    ('{refund}', '{"p_cost": "4", "p_algorithm": "''gcra''"}', '22023', 'p_cost', 'cost above the burst (= limit) can never be allowed'),
    ('{refund}', '{"p_limit": "10", "p_burst": "2", "p_cost": "3", "p_algorithm": "''token_bucket''"}', '22023', 'p_cost', 'cost above the burst, below the limit'),
    ('{refund}', '{"p_limit": "10", "p_burst": "2", "p_cost": "3", "p_algorithm": "''gcra''"}', '22023', 'p_cost', 'cost above the burst, below the limit'),
    -- algorithms and engines by exact name
    ('{decision}', '{"p_algorithm": "''leaky_bucket''"}', '22023', 'p_algorithm', 'unknown algorithm'),
    ('{decision}', '{"p_algorithm": "''''"}', '22023', 'p_algorithm', 'empty algorithm'),
    ('{decision,reset,block,cleanup_key_state}', '{"p_engine": "''redis''"}', '22023', 'p_engine', 'unknown engine'),
    ('{decision,reset,block,cleanup_key_state}', '{"p_engine": "''''"}', '22023', 'p_engine', 'empty engine'),
    -- a burst belongs to the bucket algorithms only, and is at least 1
    ('{decision}', '{"p_burst": "3", "p_algorithm": "''fixed_window''"}', '22023', 'p_burst', 'burst with a window algorithm'),
    ('{decision}', '{"p_burst": "3", "p_algorithm": "''rolling_window''"}', '22023', 'p_burst', 'burst with a window algorithm'),
    ('{decision}', '{"p_burst": "3", "p_algorithm": "''sliding_window''"}', '22023', 'p_burst', 'burst with a window algorithm'),
    ('{decision}', '{"p_burst": "3", "p_algorithm": "''sliding_window_counter''"}', '22023', 'p_burst', 'burst with a window algorithm'),
    ('{decision}', '{"p_burst": "0", "p_algorithm": "''token_bucket''"}', '22023', 'p_burst', 'burst 0'),
    ('{decision}', '{"p_burst": "-1", "p_algorithm": "''gcra''"}', '22023', 'p_burst', 'negative burst'),
    -- a block lasts a positive time, in fixed units, at most 365 days (as a period)
    ('{block}', '{"p_duration": "''0 seconds''"}', '22023', 'p_duration', 'zero duration'),
    ('{block}', '{"p_duration": "''-1 second''"}', '22023', 'p_duration', 'negative duration'),
    ('{block}', '{"p_duration": "''1 month''"}', '22023', 'p_duration', 'a month'),
    ('{block}', '{"p_duration": "''366 days''"}', '22023', 'p_duration', 'above 365 days');

-- The key of every failing call already has state on both engines, so an error must leave an
-- existing row as it was, not only add none.
DO $$
BEGIN
    PERFORM ratelimit.consume('native:err', 3, '10 seconds', p_engine => e) FROM unnest(ARRAY['table', 'unlogged']) AS e;
END
$$;

CREATE FUNCTION native_test.check(p_function text, p_changes jsonb, p_sqlstate text, p_parameter text,
                                  p_why text) RETURNS SETOF text LANGUAGE plpgsql AS $$
DECLARE
    statement text := 'SELECT ' || native_test.call_expr(p_function, p_changes);
    before jsonb := native_test.tables();
    label text := format('%s(%s) (%s)', p_function, native_test.changes_text(p_changes), p_why);
BEGIN
    IF p_sqlstate = '22004' THEN
        RETURN NEXT throws_ok(statement, '22004', p_parameter || ' must not be NULL',
                              format('%s: 22004 "%s must not be NULL"', label, p_parameter));
    ELSE
        RETURN NEXT throws_ok(statement, p_sqlstate, NULL, format('%s: SQLSTATE %s', label, p_sqlstate));
        RETURN NEXT throws_like(statement, replace(p_parameter, '_', '\_') || '%',
                                format('%s: the message starts with %s', label, p_parameter));
    END IF;
    RETURN NEXT is(native_test.tables(), before, label || ': both engines'' tables unchanged (rows and counts)');
END
$$;

SELECT native_test.check(f, b.changes, b.sqlstate, b.parameter, b.why)
FROM native_test.bad_calls AS b
CROSS JOIN LATERAL unnest(CASE WHEN 'decision' = ANY (b.functions)
                               THEN array_remove(b.functions, 'decision') || ARRAY['consume', 'peek', 'refund']
                               ELSE b.functions END) AS f
ORDER BY b.id, f;

SELECT is(native_test.tables() -> 'key_state rows', '1'::jsonb, 'after all the errors: one row on the table engine');
SELECT is(native_test.tables() -> 'key_state_unlogged rows', '1'::jsonb, 'after all the errors: one row on the unlogged engine');

------------------------------------------------------------------------------------------------
-- Values just inside the limits are accepted: each call, on a new key, is allowed.
------------------------------------------------------------------------------------------------
CREATE FUNCTION native_test.accepts(p_changes jsonb, p_why text) RETURNS SETOF text LANGUAGE plpgsql AS $$
DECLARE
    allowed boolean;
BEGIN
    EXECUTE format('SELECT (%s).allowed', native_test.call_expr('consume', p_changes)) INTO allowed;
    RETURN NEXT is(allowed, true, format('consume(%s) (%s): accepted and allowed',
                                         native_test.changes_text(p_changes), p_why));
END
$$;

SELECT native_test.accepts(v.changes, v.why)
FROM (VALUES
    (1, '{"p_key": "repeat(''k'', 256)"}'::jsonb, 'a 256-byte key'),
    (2, '{"p_key": "repeat(''é'', 128)"}', '128 characters, 256 bytes'),
    (3, '{"p_key": "repeat(''€'', 85)"}', '85 characters, 255 bytes'),
    (4, '{"p_key": "''x''"}', 'a 1-byte key'),
    (5, '{"p_key": "''native:ok:limit''", "p_limit": "2147483647"}', 'the largest limit'),
    (6, '{"p_key": "''native:ok:1ms''", "p_period": "''1 millisecond''"}', 'the shortest period'),
    (7, '{"p_key": "''native:ok:1000us''", "p_period": "''1000 microseconds''"}', 'the shortest period, in microseconds'),
    (8, '{"p_key": "''native:ok:365d''", "p_period": "''365 days''"}', 'the longest period'),
    (9, '{"p_key": "''native:ok:8760h''", "p_period": "''8760 hours''"}', 'the longest period, in hours'),
    (10, '{"p_key": "''native:ok:cost''", "p_cost": "3"}', 'cost = limit'),
    (11, '{"p_key": "''native:ok:cost0''", "p_cost": "0"}', 'cost 0'),
    (12, '{"p_key": "''native:ok:burst1''", "p_burst": "1", "p_algorithm": "''token_bucket''"}', 'burst 1'),
    (13, '{"p_key": "''native:ok:burst''", "p_limit": "1", "p_burst": "5", "p_cost": "5", "p_algorithm": "''gcra''"}', 'cost = burst above the limit')
) AS v(id, changes, why)
ORDER BY v.id;

SELECT lives_ok($$SELECT ratelimit.block('native:ok:block', '1 second')$$, 'block for 1 second is accepted');
SELECT lives_ok($$SELECT ratelimit.block('native:ok:block365', '365 days')$$, 'block for 365 days is accepted');
SELECT lives_ok($$SELECT ratelimit.cleanup_key_state(NULL)$$, 'cleanup_key_state(NULL) means both engines, not an error');

-- The largest limit and cost over the longest period: products of up to 2^31 * 3.2e13 us, well
-- past 64 bits, still give the exact answers. T0+1 s is 14 days and 1 s into the 365-day window
-- that started at 2025-12-18 00:00:00 UTC.
SELECT is(ratelimit.consume('native:ok:huge:' || a, 2147483647, '365 days', 2147483647, a, e), first::ratelimit.decision,
          format('%s, %s engine, limit 2147483647 per 365 days, cost 2147483647 on a new key: allowed', a, e))
FROM (VALUES
    (1, 'fixed_window', '(t,2147483647,0,0,30326399000)'),
    (2, 'rolling_window', '(t,2147483647,0,0,31536000000)'),
    (3, 'sliding_window', '(t,2147483647,0,0,31536000000)'),
    (4, 'sliding_window_counter', '(t,2147483647,0,0,61862399000)'),
    (5, 'token_bucket', '(t,2147483647,0,0,31536000000)'),
    (6, 'gcra', '(t,2147483647,0,0,31536000000)')
) AS v(id, a, first), unnest(ARRAY['table', 'unlogged']) AS e
ORDER BY e, v.id;

-- One more unit: the windows wait for their end (the counter: until the full window weighs
-- 2147483646, 14.686 us into the next one), the buckets for one unit's refill, 365 days / 2^31.
SELECT is(ratelimit.consume('native:ok:huge:' || a, 2147483647, '365 days', 1, a, e), second::ratelimit.decision,
          format('%s, %s engine, limit 2147483647 per 365 days, all spent, cost 1: denied', a, e))
FROM (VALUES
    (1, 'fixed_window', '(f,2147483647,0,30326399000,30326399000)'),
    (2, 'rolling_window', '(f,2147483647,0,31536000000,31536000000)'),
    (3, 'sliding_window', '(f,2147483647,0,31536000000,31536000000)'),
    (4, 'sliding_window_counter', '(f,2147483647,0,30326399015,61862399000)'),
    (5, 'token_bucket', '(f,2147483647,0,15,31536000000)'),
    (6, 'gcra', '(f,2147483647,0,15,31536000000)')
) AS v(id, a, second), unnest(ARRAY['table', 'unlogged']) AS e
ORDER BY e, v.id;

-- A burst far above the rate (1 unit per 365 days): refilling 300000 or 2147483647 units takes
-- longer than any timestamp can hold. Such a call may be refused (22023 naming p_burst); if it
-- is decided, the emptied bucket must deny the next unit for a whole period and must not claim
-- to be full, whatever the waits are clamped to.
CREATE FUNCTION native_test.emptied_bucket(p_algorithm text, p_engine text, p_burst integer)
RETURNS text LANGUAGE plpgsql AS $$
DECLARE
    k text := format('native:ok:burst:%s:%s', p_algorithm, p_burst);
    first ratelimit.decision;
    second ratelimit.decision;
BEGIN
    BEGIN
        first := ratelimit.consume(k, 1, '365 days', p_burst, p_algorithm, p_engine, p_burst);
    EXCEPTION WHEN invalid_parameter_value THEN
        IF SQLERRM LIKE 'p\_burst%' THEN
            RETURN 'refused: p_burst';
        END IF;
        RAISE;
    END;
    second := ratelimit.consume(k, 1, '365 days', 1, p_algorithm, p_engine, p_burst);
    IF first.allowed AND first.remaining = 0 AND first.reset_after_ms > 0
       AND NOT second.allowed AND second.remaining = 0 AND second.retry_after_ms = 31536000000
       AND second.reset_after_ms > 0 THEN
        RETURN 'the next unit is denied';
    END IF;
    RETURN format('first %s, then %s', first, second);
END
$$;

SELECT matches(native_test.emptied_bucket(a, e, b), '^(refused: p_burst|the next unit is denied)$',
               format('%s, %s engine, 1 per 365 days, burst %s, all of it consumed: the next unit is denied for 365 days (or the burst is refused)', a, e, b))
FROM unnest(ARRAY['token_bucket', 'gcra']) AS a, unnest(ARRAY['table', 'unlogged']) AS e,
     unnest(ARRAY[300000, 2147483647]) AS b
ORDER BY a, e, b;

------------------------------------------------------------------------------------------------
-- The state tables: row level security with no policy, no privileges for PUBLIC or anyone but
-- the owner, so only the extension's functions (and superusers) reach the rows.
------------------------------------------------------------------------------------------------
SELECT ok((SELECT relrowsecurity FROM pg_class WHERE oid = t::regclass), t || ' has row level security enabled')
FROM unnest(ARRAY['ratelimit.key_state', 'ratelimit.key_state_unlogged']) AS t ORDER BY t;
SELECT is((SELECT count(*) FROM pg_policy WHERE polrelid = t::regclass), 0::bigint, t || ' has no policy')
FROM unnest(ARRAY['ratelimit.key_state', 'ratelimit.key_state_unlogged']) AS t ORDER BY t;
SELECT is((SELECT array_agg(p.privilege_type ORDER BY p.privilege_type)
           FROM pg_class c, aclexplode(coalesce(c.relacl, acldefault('r', c.relowner))) AS p
           WHERE c.oid = t::regclass AND p.grantee = 0),
          NULL, t || ': no privilege for PUBLIC')
FROM unnest(ARRAY['ratelimit.key_state', 'ratelimit.key_state_unlogged']) AS t ORDER BY t;
SELECT is((SELECT array_agg(p.grantee::regrole::text || ' ' || p.privilege_type ORDER BY 1)
           FROM pg_class c, aclexplode(coalesce(c.relacl, acldefault('r', c.relowner))) AS p
           WHERE c.oid = t::regclass AND p.grantee <> c.relowner),
          NULL, t || ': no privilege for any role but the owner')
FROM unnest(ARRAY['ratelimit.key_state', 'ratelimit.key_state_unlogged']) AS t ORDER BY t;
SELECT is((SELECT relpersistence::text FROM pg_class WHERE oid = t::regclass), p,
          format('%s is %s', t, CASE p WHEN 'p' THEN 'logged' ELSE 'unlogged' END))
FROM (VALUES ('ratelimit.key_state', 'p'), ('ratelimit.key_state_unlogged', 'u')) AS v(t, p) ORDER BY t;

-- A role with nothing granted, even given the schema, can neither read nor write the rows.
CREATE ROLE native_probe NOLOGIN;
GRANT USAGE ON SCHEMA ratelimit TO native_probe;
SET LOCAL ROLE native_probe;
SELECT throws_ok(format('SELECT * FROM %s', t), '42501', NULL, t || ': a role without grants cannot read it')
FROM unnest(ARRAY['ratelimit.key_state', 'ratelimit.key_state_unlogged']) AS t ORDER BY t;
SELECT throws_ok(format('DELETE FROM %s', t), '42501', NULL, t || ': a role without grants cannot delete from it')
FROM unnest(ARRAY['ratelimit.key_state', 'ratelimit.key_state_unlogged']) AS t ORDER BY t;
RESET ROLE;
SELECT is(array_agg(f ORDER BY f), NULL,
          'no native function is executable by a role without grants (EXECUTE is not granted to PUBLIC)')
FROM unnest(ARRAY['ratelimit.consume(text, integer, interval, integer, text, text, integer, text, interval)',
                  'ratelimit.peek(text, integer, interval, integer, text, text, integer, text)',
                  'ratelimit.refund(text, integer, interval, integer, text, text, integer, text)',
                  'ratelimit.reset(text, text)', 'ratelimit.block(text, interval, text)',
                  'ratelimit.cleanup_key_state(text)']) AS f
WHERE has_function_privilege('native_probe', f, 'EXECUTE');

-- A consume or peek of more than the key could ever allow (N, B for the buckets) is a denial
-- for good, as the policies and the other limiters answer it: no wait (retry_after_ms NULL),
-- nothing written.
SELECT is((SELECT (d.allowed, d."limit", d.remaining, d.retry_after_ms)::text
           FROM ratelimit.consume('native:never:' || a || ':' || e, 3, '10 seconds', 4, a, e) AS d),
          '(f,3,3,)', format('consume of 4 under 3 on %s, %s: denied, with no retry time', a, e))
FROM unnest(ARRAY['fixed_window', 'rolling_window', 'sliding_window', 'sliding_window_counter',
                  'token_bucket', 'gcra']) AS a, unnest(ARRAY['table', 'unlogged']) AS e;
SELECT is((SELECT (d.allowed, d."limit", d.remaining, d.retry_after_ms)::text
           FROM ratelimit.peek('native:never:' || a, 10, '10 seconds', 3, a, 'table', 2) AS d),
          '(f,2,2,)', format('peek of 3 above a burst of 2 on %s: denied, with no retry time', a))
FROM unnest(ARRAY['token_bucket', 'gcra']) AS a;
SELECT is((SELECT count(*) FROM ratelimit.key_state WHERE key LIKE 'native:never:%')
          + (SELECT count(*) FROM ratelimit.key_state_unlogged WHERE key LIKE 'native:never:%'), 0::bigint,
          'and none of them wrote a row');

SELECT * FROM finish();
ROLLBACK;
