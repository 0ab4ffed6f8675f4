-- Batch calls: consume_many and peek_many decide each key as a single consume or peek of it
-- would, in the order given; check_many answers each subject as a single check would; allow is
-- consume's answer as a boolean. Each is compared with a replay of single calls on other keys
-- (or an identical policy) at the same instants. Bad elements are named and charge nothing.
--
-- The memory engine and the policy counters live in shared memory, outside the transaction:
-- every key and policy name carries a prefix unique to this run.
BEGIN;
CREATE EXTENSION IF NOT EXISTS pgtap;
\ir install_edition.psql
SET LOCAL timezone = 'UTC';

SELECT plan(55);
-- The memory engine's 17, skipped on the SQL edition, which has none.
SELECT skip('the SQL edition has no memory engine', 17) WHERE NOT :memory_engine;

CREATE SCHEMA batch_test;

CREATE TABLE batch_test.run AS
SELECT 'batch-' || pg_backend_pid() || '-' || (extract(epoch FROM clock_timestamp()) * 1e6)::bigint
           AS prefix;

CREATE FUNCTION batch_test.key(p_name text) RETURNS text LANGUAGE sql
AS $$SELECT prefix || ':' || p_name FROM batch_test.run$$;

-- In the future on purpose: the memory engine's worker frees keys by the real clock.
CREATE FUNCTION batch_test.at_ms(p_ms bigint) RETURNS void LANGUAGE sql
AS $$SELECT set_config('ratelimit.test_clock',
                       (timestamptz '2100-01-01 00:00:00+00' + (p_ms || ' milliseconds')::interval)::text,
                       true)$$;

SELECT batch_test.at_ms(0);

------------------------------------------------------------------------------------------------
-- 1. consume_many = the same consumes one by one, on every engine and algorithm: three batches
--    over keys that repeat, at three instants, against single consumes of other keys.
------------------------------------------------------------------------------------------------
CREATE FUNCTION batch_test.keys(p_side text, p_algorithm text, p_engine text) RETURNS text[]
LANGUAGE sql AS $$
    SELECT array_agg(batch_test.key(concat_ws(':', p_side, p_algorithm, p_engine, n)) ORDER BY i)
    FROM unnest(ARRAY[1, 2, 1, 3, 1, 2, 1, 1]) WITH ORDINALITY AS u(n, i)
$$;

CREATE FUNCTION batch_test.burst(p_algorithm text) RETURNS integer LANGUAGE sql
AS $$SELECT CASE WHEN p_algorithm IN ('token_bucket', 'gcra') THEN 3 END$$;

CREATE FUNCTION batch_test.batched(p_algorithm text, p_engine text) RETURNS ratelimit.decision[]
LANGUAGE plpgsql AS $$
DECLARE
    result ratelimit.decision[] := '{}';
    step bigint;
BEGIN
    FOREACH step IN ARRAY ARRAY[0, 1500, 4000]::bigint[] LOOP
        PERFORM batch_test.at_ms(step);
        result := result || ratelimit.consume_many(batch_test.keys('many', p_algorithm, p_engine), 3, '10 seconds',
                                                   1, p_algorithm, p_engine, batch_test.burst(p_algorithm));
    END LOOP;
    RETURN result;
END
$$;

CREATE FUNCTION batch_test.single(p_algorithm text, p_engine text) RETURNS ratelimit.decision[]
LANGUAGE plpgsql AS $$
DECLARE
    result ratelimit.decision[] := '{}';
    step bigint;
    k text;
BEGIN
    FOREACH step IN ARRAY ARRAY[0, 1500, 4000]::bigint[] LOOP
        PERFORM batch_test.at_ms(step);
        FOREACH k IN ARRAY batch_test.keys('one', p_algorithm, p_engine) LOOP
            result := result || ratelimit.consume(k, 3, '10 seconds', 1, p_algorithm, p_engine,
                                                  batch_test.burst(p_algorithm));
        END LOOP;
    END LOOP;
    RETURN result;
END
$$;

SELECT is(batch_test.batched(a, e), batch_test.single(a, e),
          format('consume_many on %s, %s: the decisions of the same consumes one by one', e, a))
FROM unnest(ARRAY['table', 'unlogged', 'memory']) WITH ORDINALITY AS es(e, ei),
     unnest(ARRAY['fixed_window', 'rolling_window', 'sliding_window', 'sliding_window_counter',
                  'token_bucket', 'gcra']) WITH ORDINALITY AS al(a, ai)
WHERE :memory_engine OR e <> 'memory'
ORDER BY ei, ai;

SELECT batch_test.at_ms(0);

-- A key given four times is decided four times, in order.
SELECT is(ARRAY(SELECT (d.allowed, d.remaining)::text
                FROM unnest(ratelimit.consume_many(array_fill(batch_test.key('repeat'), ARRAY[4]), 3, '1 minute')) d),
          ARRAY['(t,2)', '(t,1)', '(t,0)', '(f,0)'], 'a key given four times is decided four times, in order');
SELECT is(ARRAY(SELECT (d.allowed, d.remaining)::text
                FROM unnest(ratelimit.consume_many(ARRAY[batch_test.key('mem-repeat'), batch_test.key('mem-repeat')],
                                                   1, '1 minute', p_engine => 'memory')) d),
          ARRAY['(t,0)', '(f,0)'], 'on the memory engine too')
WHERE :memory_engine;

------------------------------------------------------------------------------------------------
-- 2. peek_many: the single peeks' answers, and nothing written.
------------------------------------------------------------------------------------------------
SELECT ratelimit.consume(batch_test.key('peeked'), 5, '1 minute', 2);
SELECT ratelimit.consume(batch_test.key('peeked'), 5, '1 minute', 2, p_engine => 'memory') WHERE :memory_engine;
CREATE TABLE batch_test.before_peek AS
SELECT (SELECT jsonb_agg(to_jsonb(s) ORDER BY s.policy, s.key) FROM ratelimit.key_state s) AS rows,
       (SELECT m.allowed + m.denied FROM ratelimit.memory_stats() m WHERE :memory_engine) AS memory_decisions;
SELECT is(ratelimit.peek_many(ARRAY[batch_test.key('peeked'), batch_test.key('unseen'), batch_test.key('peeked')],
                              5, '1 minute', 3),
          ARRAY[ratelimit.peek(batch_test.key('peeked'), 5, '1 minute', 3),
                ratelimit.peek(batch_test.key('unseen'), 5, '1 minute', 3),
                ratelimit.peek(batch_test.key('peeked'), 5, '1 minute', 3)],
          'peek_many on the table engine: the single peeks'' answers');
SELECT is(ratelimit.peek_many(ARRAY[batch_test.key('peeked'), batch_test.key('unseen')], 5, '1 minute', 3,
                              p_engine => 'memory'),
          ARRAY[ratelimit.peek(batch_test.key('peeked'), 5, '1 minute', 3, p_engine => 'memory'),
                ratelimit.peek(batch_test.key('unseen'), 5, '1 minute', 3, p_engine => 'memory')],
          'peek_many on the memory engine: the single peeks'' answers')
WHERE :memory_engine;
SELECT is((SELECT jsonb_agg(to_jsonb(s) ORDER BY s.policy, s.key) FROM ratelimit.key_state s),
          (SELECT rows FROM batch_test.before_peek), 'peek_many wrote no table row');
SELECT is((SELECT (ratelimit.peek(batch_test.key('peeked'), 5, '1 minute', p_engine => 'memory')).remaining),
          3, 'peek_many took nothing from a memory key')
WHERE :memory_engine;

------------------------------------------------------------------------------------------------
-- 3. 10,000 keys per call: on the memory engine, and on table keys that exist (made 1,000 new
--    keys per call).
------------------------------------------------------------------------------------------------
CREATE TABLE batch_test.many AS
SELECT array_agg(batch_test.key('k' || i) ORDER BY i) AS keys FROM generate_series(1, 10000) i;

SELECT is((SELECT count(*) FILTER (WHERE d.allowed AND d.remaining = 1)
             FROM unnest(ratelimit.consume_many((SELECT keys FROM batch_test.many), 2, '1 minute',
                                                p_engine => 'memory')) d),
          10000::bigint, 'memory: 10,000 keys in one call, each allowed once')
WHERE :memory_engine;
SELECT is((SELECT count(*) FILTER (WHERE d.allowed AND d.remaining = 0)
             FROM unnest(ratelimit.consume_many((SELECT keys FROM batch_test.many), 2, '1 minute',
                                                p_engine => 'memory')) d),
          10000::bigint, 'memory: the second call of each of 10,000 keys is allowed, with none left')
WHERE :memory_engine;
SELECT is((SELECT count(*) FILTER (WHERE NOT d.allowed)
             FROM unnest(ratelimit.consume_many((SELECT keys FROM batch_test.many), 2, '1 minute',
                                                p_engine => 'memory')) d),
          10000::bigint, 'memory: the third call of each of 10,000 keys is denied')
WHERE :memory_engine;

SELECT is((SELECT sum(cardinality(ratelimit.consume_many(m.keys[b.first:b.first + 999], 3, '1 minute')))
             FROM batch_test.many m, generate_series(1, 10000, 1000) AS b(first)),
          10000::bigint, 'table: 10,000 new keys, 1,000 per call');
SELECT is((SELECT count(*) FILTER (WHERE d.allowed AND d.remaining = 1)
             FROM unnest(ratelimit.consume_many((SELECT keys FROM batch_test.many), 3, '1 minute')) d),
          10000::bigint, 'table: 10,000 existing keys in one call, each charged once more');
SELECT is((SELECT count(*) FROM ratelimit.key_state s, batch_test.many m
            WHERE s.policy = '' AND s.key = ANY (m.keys) AND s.amount = 2),
          10000::bigint, 'table: each of the 10,000 rows counts two');

------------------------------------------------------------------------------------------------
-- 4. allow = consume(...).allowed.
------------------------------------------------------------------------------------------------
CREATE FUNCTION batch_test.allow_vs_consume(p_engine text, p_algorithm text,
                                            OUT allowed boolean[], OUT consumed boolean[])
LANGUAGE plpgsql AS $$
DECLARE
    i integer;
BEGIN
    allowed := '{}';
    consumed := '{}';
    FOR i IN 1 .. 8 LOOP
        PERFORM batch_test.at_ms(i * 700);
        allowed := allowed || ratelimit.allow(batch_test.key('allow:' || p_engine || p_algorithm), 4, '3 seconds',
                                              i % 3, p_algorithm, p_engine, batch_test.burst(p_algorithm));
        consumed := consumed || (ratelimit.consume(batch_test.key('consume:' || p_engine || p_algorithm), 4, '3 seconds',
                                                   i % 3, p_algorithm, p_engine, batch_test.burst(p_algorithm))).allowed;
    END LOOP;
END
$$;

SELECT is(r.allowed, r.consumed, format('allow on %s, %s: consume''s answers', v.e, v.a))
FROM (VALUES (1, 'table', 'fixed_window'), (2, 'memory', 'gcra'), (3, 'unlogged', 'sliding_window')) AS v(n, e, a),
     LATERAL batch_test.allow_vs_consume(v.e, v.a) r
WHERE :memory_engine OR v.e <> 'memory'
ORDER BY v.n;
SELECT is(ARRAY[ratelimit.allow(batch_test.key('yes-no'), 2, '1 minute'), ratelimit.allow(batch_test.key('yes-no'), 2, '1 minute'),
                ratelimit.allow(batch_test.key('yes-no'), 2, '1 minute')],
          ARRAY[true, true, false], 'allow says yes twice, then no, for 2 a minute');

SELECT batch_test.at_ms(0);

------------------------------------------------------------------------------------------------
-- 5. check_many = the same checks one by one: two identical policies (enforced with
--    count_denied and the denial log; shadow), one checked in batches, one subject at a time.
------------------------------------------------------------------------------------------------
CREATE FUNCTION batch_test.policy(p_kind text, p_side text) RETURNS text LANGUAGE sql
AS $$SELECT 'bt.' || substr(md5(prefix), 1, 12) || '.' || p_kind || '.' || p_side FROM batch_test.run$$;

INSERT INTO ratelimit.policies (name, "limit", period, count_denied, log_denials, shadow)
SELECT batch_test.policy(k, s), 2, '1 minute', k = 'enforced', k = 'enforced', k = 'shadow'
FROM unnest(ARRAY['enforced', 'shadow']) k, unnest(ARRAY['many', 'one']) s;

CREATE FUNCTION batch_test.stats(p_policy text) RETURNS bigint[] LANGUAGE sql
AS $$SELECT ARRAY[coalesce(max(allowed), 0), coalesce(max(denied), 0), coalesce(max(shadow_denied), 0)]
        FROM ratelimit.policy_stats() WHERE policy = p_policy$$;

-- The answers without the policy's name (which differs between the two sides).
CREATE FUNCTION batch_test.answers(p_decisions ratelimit.policy_decision[]) RETURNS text[] LANGUAGE sql
AS $$SELECT array_agg((d.allowed, d."limit", d.remaining, d.retry_after_ms, d.reset_after_ms, d.period_ms, d.cost,
                       d.reason, cardinality(d.shadow_denied), d.decided_at)::text ORDER BY n)
        FROM unnest(p_decisions) WITH ORDINALITY
             AS d(allowed, policy, "limit", remaining, retry_after_ms, reset_after_ms, period_ms, cost, reason,
                  shadow_denied, decided_at, n)$$;

CREATE FUNCTION batch_test.check_side(p_kind text, p_side text) RETURNS ratelimit.policy_decision[]
LANGUAGE plpgsql AS $$
DECLARE
    subjects constant text[] := ARRAY['s1', 's2', 's1', 's1', 's3', 's2', 's2'];
    result ratelimit.policy_decision[] := '{}';
    step bigint;
    s text;
BEGIN
    FOREACH step IN ARRAY ARRAY[0, 30000, 75000]::bigint[] LOOP
        PERFORM batch_test.at_ms(step);
        IF p_side = 'many' THEN
            result := result || ratelimit.check_many(batch_test.policy(p_kind, p_side), subjects);
        ELSE
            FOREACH s IN ARRAY subjects LOOP
                result := result || ratelimit.check(batch_test.policy(p_kind, p_side), s);
            END LOOP;
        END IF;
    END LOOP;
    RETURN result;
END
$$;

CREATE TABLE batch_test.checks AS
SELECT k, batch_test.check_side(k, 'many') AS many, batch_test.check_side(k, 'one') AS one
FROM unnest(ARRAY['enforced', 'shadow']) k;

SELECT is(batch_test.answers(many), batch_test.answers(one),
          format('check_many, %s policy: the answers of the same checks one by one', k))
FROM batch_test.checks ORDER BY k;
SELECT ok((SELECT bool_or(NOT d.allowed) FROM batch_test.checks c, unnest(c.many) d WHERE c.k = 'enforced'),
          'check_many denied some subjects of the enforced policy');
SELECT ok((SELECT bool_and(d.allowed) AND bool_or(cardinality(d.shadow_denied) = 1)
             FROM batch_test.checks c, unnest(c.many) d WHERE c.k = 'shadow'),
          'the shadow policy allowed every subject and said which it would have denied');
SELECT is(batch_test.stats(batch_test.policy(k, 'many')), batch_test.stats(batch_test.policy(k, 'one')),
          format('check_many, %s policy: the counters of the same checks one by one', k))
FROM unnest(ARRAY['enforced', 'shadow']) k WHERE :c_edition ORDER BY k;
SELECT skip('the SQL edition keeps no per-policy counters', 2) WHERE NOT :c_edition;
SELECT is((SELECT count(*) FROM ratelimit.denial_log l WHERE l.event_data ->> 'policy' = batch_test.policy('enforced', 'many')),
          (SELECT count(*) FROM ratelimit.denial_log l WHERE l.event_data ->> 'policy' = batch_test.policy('enforced', 'one')),
          'check_many logged as many denials as the single checks');
SELECT is((SELECT array_agg((s.key, s.amount, s.blocked_until)::text ORDER BY s.key) FROM ratelimit.key_state s
            WHERE s.policy = batch_test.policy('enforced', 'many')),
          (SELECT array_agg((s.key, s.amount, s.blocked_until)::text ORDER BY s.key) FROM ratelimit.key_state s
            WHERE s.policy = batch_test.policy('enforced', 'one')),
          'check_many left the counters (and count_denied''s blocks) of the single checks');

------------------------------------------------------------------------------------------------
-- 6. Bad elements: named, 22004 or 22023, and nothing charged, not even the elements before.
------------------------------------------------------------------------------------------------
CREATE TABLE batch_test.before_errors AS
SELECT (SELECT jsonb_agg(to_jsonb(s) ORDER BY s.policy, s.key) FROM ratelimit.key_state s) AS rows,
       CASE WHEN :c_edition THEN batch_test.stats(batch_test.policy('enforced', 'many')) END AS stats;

SELECT throws_ok(format('SELECT ratelimit.consume_many(%s, 3, ''1 minute'', p_engine => %L)', v.keys, v.engine),
                 v.sqlstate, v.message, format('consume_many on %s, %s: %s', v.engine, v.why, v.message))
FROM (VALUES
    (1, 'ARRAY[''bad:a'', ''bad:b'', ''bad:c'', ''bad:d'', ''bad:e'', ''bad:f'', NULL]', 'table', '22004', 'p_keys[7] must not be NULL', 'a NULL seventh key'),
    (2, 'ARRAY[''bad:a'', '''']', 'memory', '22023', 'p_keys[2] must not be empty', 'an empty key'),
    (3, 'ARRAY[''bad:a'', repeat(''x'', 257)]', 'table', '22023', 'p_keys[2] must be at most 256 bytes long, got 257', 'a key too long'),
    (4, '''{{bad:a},{bad:b}}''::text[]', 'table', '22023', 'p_keys must be a one-dimensional array', 'a 2-D array'),
    (5, '''{}''::text[]', 'memory', '22023', 'p_keys must have 1 to 10000 elements (got 0)', 'no keys'),
    (6, 'array_fill(''bad:a''::text, ARRAY[10001])', 'memory', '22023', 'p_keys must have 1 to 10000 elements (got 10001)', '10,001 keys'),
    (7, 'NULL', 'table', '22004', 'p_keys must not be NULL', 'a NULL array')
) AS v(n, keys, engine, sqlstate, message, why)
WHERE :memory_engine OR v.engine <> 'memory'
ORDER BY v.n;
SELECT throws_ok($$SELECT ratelimit.peek_many(ARRAY['bad:a', NULL], 3, '1 minute')$$, '22004', 'p_keys[2] must not be NULL',
                 'peek_many names the NULL element');
SELECT throws_ok(format('SELECT ratelimit.check_many(%L, ARRAY[''bad-s1'', ''bad-s2'', NULL])', batch_test.policy('enforced', 'many')),
                 '22004', 'p_subjects[3] must not be NULL', 'check_many names the NULL subject');
SELECT throws_ok(format('SELECT ratelimit.check_many(%L, ARRAY[''bad-s1'', repeat(''y'', 300)])', batch_test.policy('enforced', 'many')),
                 '22023', 'p_subjects[2] must be at most 256 bytes long, got 300', 'check_many names the long subject');
SELECT is((SELECT jsonb_agg(to_jsonb(s) ORDER BY s.policy, s.key) FROM ratelimit.key_state s),
          (SELECT rows FROM batch_test.before_errors), 'the refused calls wrote no row');
SELECT is(batch_test.stats(batch_test.policy('enforced', 'many')), (SELECT stats FROM batch_test.before_errors),
          'the refused check_many counted nothing')
WHERE :c_edition;
SELECT skip('the SQL edition keeps no per-policy counters', 1) WHERE NOT :c_edition;
SELECT is((ratelimit.peek('bad:a', 3, '1 minute', p_engine => 'memory')).remaining, 3,
          'the refused calls took nothing from a memory key before the bad one')
WHERE :memory_engine;

SELECT * FROM finish();
ROLLBACK;
