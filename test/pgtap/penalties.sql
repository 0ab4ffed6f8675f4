-- Escalating penalties (policies' penalty_blocks and penalty_decay), on every engine: a denial by
-- the limit blocks the key for the step of its level, which rises by one per penalty and drains
-- by one per penalty_decay; a denial while blocked reports the level and raises nothing; the
-- answer says reason 'penalty' and the level, and its waits (and the HTTP headers') last until
-- the block ends; reset_policy_key starts the ladder over; shadow policies, allow-listed keys
-- and policies that allowed while another denied earn nothing; a policy row with a bad ladder
-- is refused with 22023 naming the column and nothing written.
BEGIN;
CREATE EXTENSION IF NOT EXISTS pgtap;
\ir install_edition.psql
SET LOCAL timezone = 'UTC';

SELECT plan(117);

SELECT skip('the SQL edition has no memory engine', 28) WHERE NOT :memory_engine;

CREATE SCHEMA penalty_test;
-- The memory engine keeps its keys outside the transaction: this run's subjects are its own.
CREATE TABLE penalty_test.run AS
SELECT 'pen' || pg_backend_pid() || '_' || (extract(epoch FROM clock_timestamp()) * 1e6)::bigint AS prefix;

CREATE FUNCTION penalty_test.subject(p_name text) RETURNS text LANGUAGE sql
AS $$SELECT prefix || ':' || p_name FROM penalty_test.run$$;

-- Far in the future, so that the memory engine's worker (real clock) never frees these keys.
CREATE FUNCTION penalty_test.at(p_offset interval) RETURNS void LANGUAGE sql
AS $$SELECT set_config('ratelimit.test_clock',
                       (timestamptz '2100-01-01 00:00:00+00' + p_offset)::text, true)$$;

-- Spends the subject's 2 calls per 10 seconds, then makes the call that is denied.
CREATE FUNCTION penalty_test.offend(p_policy text, p_subject text) RETURNS ratelimit.policy_decision
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM ratelimit.check(p_policy, p_subject);
    PERFORM ratelimit.check(p_policy, p_subject);
    RETURN ratelimit.check(p_policy, p_subject);
END
$$;

------------------------------------------------------------------------------------------------
-- 1. The ladder, on every engine
------------------------------------------------------------------------------------------------

CREATE FUNCTION penalty_test.ladder(p_engine text, p_algorithm text) RETURNS SETOF text
LANGUAGE plpgsql AS $$
DECLARE
    policy_name text := 'pen.' || p_engine || '.' || p_algorithm;
    subject text := penalty_test.subject(policy_name);
    label text := p_algorithm || ' on ' || p_engine || ': ';
    d ratelimit.policy_decision;
    headers jsonb;
BEGIN
    PERFORM penalty_test.at('0');
    INSERT INTO ratelimit.policies (name, algorithm, "limit", period, engine, penalty_blocks,
                                    penalty_decay)
    VALUES (policy_name, p_algorithm, 2, '10 seconds', p_engine,
            '{1 minute,5 minutes,30 minutes}', '1 hour');

    d := ratelimit.check(policy_name, subject);
    RETURN NEXT is(ARRAY[d.allowed::text, d.reason, coalesce(d.penalty_level::text, 'null')],
                   ARRAY['true', 'within_limits', 'null'],
                   label || 'an allowed call reports no level');
    PERFORM ratelimit.check(policy_name, subject);
    d := ratelimit.check(policy_name, subject);
    RETURN NEXT is(ARRAY[d.allowed::text, d.reason, d.penalty_level::text, d.retry_after_ms::text],
                   ARRAY['false', 'penalty', '1', '60000'],
                   label || 'the first denial by the limit is penalty level 1, blocked 1 minute');

    PERFORM penalty_test.at('30 seconds');
    d := ratelimit.check(policy_name, subject);
    RETURN NEXT is(ARRAY[d.allowed::text, d.reason, d.penalty_level::text, d.retry_after_ms::text],
                   ARRAY['false', 'penalty', '1', '30000'],
                   label || 'a call during the block is denied at the same level, for the block''s rest');
    headers := ratelimit.http_headers(d, 'unix');
    RETURN NEXT is(headers ->> 'Retry-After', '30',
                   label || 'the headers'' Retry-After is the block''s rest');

    PERFORM penalty_test.at('61 seconds');
    d := penalty_test.offend(policy_name, subject);
    RETURN NEXT is(ARRAY[d.allowed::text, d.reason, d.penalty_level::text, d.retry_after_ms::text],
                   ARRAY['false', 'penalty', '2', '300000'],
                   label || 'after the block, the limit''s next denial is level 2: 5 minutes');

    PERFORM penalty_test.at('6 minutes 2 seconds');
    d := penalty_test.offend(policy_name, subject);
    RETURN NEXT is(ARRAY[d.penalty_level, d.retry_after_ms::integer], ARRAY[3, 1800000],
                   label || 'level 3: 30 minutes');

    PERFORM penalty_test.at('36 minutes 3 seconds');
    d := penalty_test.offend(policy_name, subject);
    RETURN NEXT is(ARRAY[d.penalty_level, d.retry_after_ms::integer], ARRAY[3, 1800000],
                   label || 'past the last step, the last step again (the cap)');

    -- The level drains by one per hour without a penalty; the offences at the cap kept it full,
    -- so an hour after the last one it stands at 2, and the next penalty is level 3 again.
    PERFORM penalty_test.at('1 hour 36 minutes 4 seconds');
    d := penalty_test.offend(policy_name, subject);
    RETURN NEXT is(d.penalty_level, 3,
                   label || 'an hour after the last penalty the level has drained by one (2 + 1)');
    PERFORM penalty_test.at('5 hours 6 minutes 5 seconds');
    d := penalty_test.offend(policy_name, subject);
    RETURN NEXT is(ARRAY[d.penalty_level, d.retry_after_ms::integer], ARRAY[1, 60000],
                   label || 'after hours of good behaviour the ladder starts over');

    -- reset_policy_key forgets the level with the counter.
    PERFORM penalty_test.at('5 hours 8 minutes');
    d := penalty_test.offend(policy_name, subject);
    RETURN NEXT is(d.penalty_level, 2, label || 'a second penalty soon after: level 2');
    RETURN NEXT ok(ratelimit.reset_policy_key(policy_name, subject),
                   label || 'reset_policy_key says it forgot something');
    d := ratelimit.check(policy_name, subject);
    RETURN NEXT is(ARRAY[d.allowed::text, coalesce(d.penalty_level::text, 'null')],
                   ARRAY['true', 'null'], label || 'after reset_policy_key the key is allowed');
    PERFORM ratelimit.check(policy_name, subject);
    d := ratelimit.check(policy_name, subject);
    RETURN NEXT is(ARRAY[d.penalty_level, d.retry_after_ms::integer], ARRAY[1, 60000],
                   label || 'and its next penalty is level 1 again');

    -- Another subject has a ladder of its own.
    d := penalty_test.offend(policy_name, subject || ':other');
    RETURN NEXT is(d.penalty_level, 1, label || 'another subject starts at level 1');
END
$$;

SELECT * FROM penalty_test.ladder('table', 'fixed_window');
SELECT * FROM penalty_test.ladder('unlogged', 'fixed_window');
SELECT * FROM penalty_test.ladder('memory', 'fixed_window') WHERE :memory_engine;
SELECT * FROM penalty_test.ladder('table', 'token_bucket');
SELECT * FROM penalty_test.ladder('memory', 'sliding_window') WHERE :memory_engine;

-- The table engine keeps a key's level in a namespace of the policy's own, beside its counter.
SELECT is((SELECT count(*) FROM ratelimit.key_state
            WHERE policy = 'pen.table.fixed_window/penalty'
              AND key = penalty_test.subject('pen.table.fixed_window')),
          1::bigint, 'the level lives under (policy || ''/penalty'', subject)');
-- A native key spelled like it is another key.
SELECT penalty_test.at('0');
SELECT is((ratelimit.consume(penalty_test.subject('pen.table.fixed_window'), 1, '1 hour')).allowed,
          true, 'a native key of the same text is its own');

------------------------------------------------------------------------------------------------
-- 2. What earns nothing
------------------------------------------------------------------------------------------------

-- On the memory engine; the SQL edition's are unlogged.
SELECT CASE WHEN :memory_engine THEN 'memory' ELSE 'unlogged' END AS engine \gset
INSERT INTO ratelimit.policies (name, "limit", period, engine, penalty_blocks, penalty_decay, shadow)
VALUES ('pen.shadow', 1, '10 seconds', :'engine', '{1 hour}', '1 hour', true),
       ('pen.strict', 1, '10 seconds', :'engine', '{1 hour}', '1 hour', false),
       ('pen.other', 1, '1 hour', :'engine', NULL, NULL, false);

SELECT penalty_test.at('2 days');
SELECT ratelimit.check('pen.shadow', penalty_test.subject('s'));
SELECT is(ARRAY[(r).allowed::text, (r).reason, coalesce((r).penalty_level::text, 'null')],
          ARRAY['true', 'within_limits', 'null'],
          'a shadow policy''s denial earns no penalty and blocks nothing')
FROM (SELECT ratelimit.check('pen.shadow', penalty_test.subject('s')) AS r) q;
SELECT penalty_test.at('2 days 11 seconds');
SELECT is((ratelimit.check('pen.shadow', penalty_test.subject('s'))).allowed, true,
          'and the shadow policy''s key is not blocked afterwards');

-- All or nothing: pen.other denies, pen.strict would allow: pen.strict earns nothing.
SELECT ratelimit.check('pen.other', penalty_test.subject('a'));
SELECT is(ARRAY[(r).allowed::text, (r).policy, (r).reason],
          ARRAY['false', 'pen.other', 'limited'],
          'a call denied by a policy without penalties is limited')
FROM (SELECT ratelimit.check_all(ARRAY['pen.strict', 'pen.other'],
                                 ARRAY[penalty_test.subject('a'), penalty_test.subject('a')]) AS r) q;
SELECT is((ratelimit.check('pen.strict', penalty_test.subject('a'))).allowed, true,
          'and the policy with penalties that would have allowed was neither charged nor blocked');
SELECT is(ARRAY[(r).allowed::text, (r).policy, (r).reason, (r).penalty_level::text],
          ARRAY['false', 'pen.strict', 'penalty', '1'],
          'check_all reports the penalty of the policy that denied')
FROM (SELECT ratelimit.check_all(ARRAY['pen.other', 'pen.strict'],
                                 ARRAY[penalty_test.subject('b'), penalty_test.subject('a')]) AS r) q;

-- An allow-listed key is never denied, so never penalized.
INSERT INTO ratelimit.access_list (action, policy, key) VALUES ('allow', 'pen.strict', penalty_test.subject('vip'));
SELECT ratelimit.check('pen.strict', penalty_test.subject('vip')) FROM generate_series(1, 3);
SELECT is((ratelimit.check('pen.strict', penalty_test.subject('vip'))).reason, 'allow_list',
          'an allow-listed key is allowed however often it calls');

-- A block set by block_policy_key is reported as a penalty only when the key has a level.
SELECT ratelimit.block_policy_key('pen.strict', penalty_test.subject('blocked'), '10 minutes');
SELECT is(ARRAY[(r).allowed::text, (r).reason, coalesce((r).penalty_level::text, 'null')],
          ARRAY['false', 'limited', 'null'],
          'an administrator''s block without a penalty is limited, level none')
FROM (SELECT ratelimit.check('pen.strict', penalty_test.subject('blocked')) AS r) q;

-- check_http and check_many carry the same answer.
SELECT penalty_test.at('3 days');
SELECT ratelimit.check('pen.strict', penalty_test.subject('http'));
SELECT is(ARRAY[(r -> 'headers' ->> 'Retry-After'), (r ->> 'status')],
          ARRAY['3600', '429'], 'check_http: a penalized call is a 429 with the block''s Retry-After')
FROM (SELECT ratelimit.check_http(ARRAY['pen.strict'], ARRAY[penalty_test.subject('http')],
                                  p_reset_format => 'unix') AS r) q;
SELECT is((SELECT array_agg(u.penalty_level ORDER BY u.ordinality)
             FROM unnest(ratelimit.check_many('pen.strict',
                         ARRAY[penalty_test.subject('http'), penalty_test.subject('m1'),
                               penalty_test.subject('m1')])) WITH ORDINALITY AS u),
          ARRAY[1, NULL, 1],
          'check_many: the blocked subject reports its level, a new one earns level 1 on its denial');

------------------------------------------------------------------------------------------------
-- 3. Bad ladders are refused, naming the column, and nothing is written
------------------------------------------------------------------------------------------------

CREATE FUNCTION penalty_test.refused(p_blocks text, p_decay text, p_state text, p_column text,
                                     p_label text) RETURNS SETOF text LANGUAGE plpgsql AS $$
DECLARE
    before bigint := (SELECT count(*) FROM ratelimit.policies);
BEGIN
    RETURN NEXT throws_like(
        format($q$INSERT INTO ratelimit.policies (name, "limit", period, penalty_blocks, penalty_decay)
                  VALUES ('pen.bad', 1, '1 minute', %s, %s)$q$, p_blocks, p_decay),
        '%' || p_column || '%', p_label || ': the error names ' || p_column);
    BEGIN
        EXECUTE format($q$INSERT INTO ratelimit.policies (name, "limit", period, penalty_blocks, penalty_decay)
                          VALUES ('pen.bad', 1, '1 minute', %s, %s)$q$, p_blocks, p_decay);
        RETURN NEXT fail(p_label || ': accepted');
    EXCEPTION WHEN OTHERS THEN
        RETURN NEXT is(SQLSTATE, p_state, p_label || ': SQLSTATE ' || p_state);
    END;
    RETURN NEXT is((SELECT count(*) FROM ratelimit.policies), before, p_label || ': nothing written');
END
$$;

SELECT * FROM penalty_test.refused($$'{}'$$, $$'1 hour'$$, '22023', 'penalty_blocks', 'an empty ladder');
SELECT * FROM penalty_test.refused($$'{0}'$$, $$'1 hour'$$, '22023', 'penalty_blocks', 'a step of 0');
SELECT * FROM penalty_test.refused($$'{-1 minute}'$$, $$'1 hour'$$, '22023', 'penalty_blocks', 'a negative step');
SELECT * FROM penalty_test.refused($$'{1 month}'$$, $$'1 hour'$$, '22023', 'penalty_blocks', 'a step in months');
SELECT * FROM penalty_test.refused($$'{366 days}'$$, $$'1 hour'$$, '22023', 'penalty_blocks', 'a step over 365 days');
SELECT * FROM penalty_test.refused($$'{1 minute,NULL}'$$, $$'1 hour'$$, '22004', 'penalty_blocks', 'a NULL step');
SELECT * FROM penalty_test.refused($$array_fill('1 minute'::interval, ARRAY[17])$$, $$'1 hour'$$, '22023', 'penalty_blocks', '17 steps');
SELECT * FROM penalty_test.refused($$'{{1 minute},{2 minutes}}'$$, $$'1 hour'$$, '22023', 'penalty_blocks', 'a two-dimensional ladder');
SELECT * FROM penalty_test.refused($$'{1 minute}'$$, 'NULL', '22023', 'penalty_decay', 'a ladder without a decay');
SELECT * FROM penalty_test.refused('NULL', $$'1 hour'$$, '22023', 'penalty_decay', 'a decay without a ladder');
SELECT * FROM penalty_test.refused($$'{1 minute}'$$, $$'0'$$, '22023', 'penalty_decay', 'a decay of 0');
SELECT * FROM penalty_test.refused($$'{1 minute,2 minutes}'$$, $$'200 days'$$, '22023', 'penalty_decay', 'steps x decay over 365 days');

SELECT * FROM finish();
ROLLBACK;
