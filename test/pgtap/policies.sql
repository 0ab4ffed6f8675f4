-- Policies: every preset's limit as the apps state it, tiers and key overrides, allow and deny
-- lists (IPv4, IPv6, CIDR), all-or-nothing checks over several policies on every engine, shadow
-- mode, count_denied, HTTP headers at exact boundaries, the 429 bodies, per-policy counters,
-- top offenders, the denial log's bound, and bad calls.
--
-- Shared memory (memory engine keys, policy counters) outlives this transaction: subjects carry
-- a prefix unique to this run and counters are compared as differences.
BEGIN;
CREATE EXTENSION IF NOT EXISTS pgtap;
\ir install_edition.psql
-- The apps' limits are presets: load all five.
SELECT ratelimit.load_preset(preset) FROM ratelimit.presets();
SET LOCAL timezone = 'UTC';

SELECT plan(150);

SELECT skip('the SQL edition has no memory engine', 20) WHERE NOT :memory_engine;
SELECT skip('the SQL edition keeps no per-policy counters', 3) WHERE NOT :c_edition;

CREATE SCHEMA policy_test;

CREATE TABLE policy_test.run AS
SELECT 'pgtap-' || pg_backend_pid() || '-' || (extract(epoch FROM clock_timestamp()) * 1e6)::bigint
           AS prefix;

CREATE FUNCTION policy_test.subject(p_name text) RETURNS text LANGUAGE sql
AS $$SELECT prefix || ':' || p_name FROM policy_test.run$$;

-- Far in the future, so that the memory engine's worker (real clock) never frees these keys.
CREATE FUNCTION policy_test.at(p_offset interval) RETURNS void LANGUAGE sql
AS $$SELECT set_config('ratelimit.test_clock',
                       (timestamptz '2100-01-01 00:00:00+00' + p_offset)::text, true)$$;

-- Calls check p_calls times at the current clock; returns how many were allowed.
CREATE FUNCTION policy_test.allowed_of(p_policy text, p_subject text, p_calls integer,
                                       p_tier text DEFAULT NULL, p_ip inet DEFAULT NULL,
                                       p_user uuid DEFAULT NULL)
RETURNS integer LANGUAGE plpgsql AS $$
DECLARE
    n integer := 0;
BEGIN
    FOR i IN 1..p_calls LOOP
        IF (ratelimit.check(p_policy, p_subject, 1, p_tier, p_ip, p_user)).allowed THEN
            n := n + 1;
        END IF;
    END LOOP;
    RETURN n;
END
$$;

-- What a policy's key says now, without charging it. A policy's counters are reachable only
-- through the policy: a call of cost 0 reads them, and the subtransaction it runs in is undone.
CREATE FUNCTION policy_test.remaining(p_policy text, p_subject text) RETURNS integer
LANGUAGE plpgsql AS $$
DECLARE
    d ratelimit.policy_decision;
BEGIN
    BEGIN
        d := ratelimit.check(p_policy, p_subject, 0);
        RAISE SQLSTATE 'RLT01';
    EXCEPTION WHEN SQLSTATE 'RLT01' THEN
        RETURN d.remaining;
    END;
END
$$;

-- Whether a call of one unit would be allowed now (a table-engine policy: the call is undone).
CREATE FUNCTION policy_test.would_allow(p_policy text, p_subject text) RETURNS boolean
LANGUAGE plpgsql AS $$
DECLARE
    d ratelimit.policy_decision;
BEGIN
    BEGIN
        d := ratelimit.check(p_policy, p_subject);
        RAISE SQLSTATE 'RLT01';
    EXCEPTION WHEN SQLSTATE 'RLT01' THEN
        RETURN d.allowed;
    END;
END
$$;

CREATE FUNCTION policy_test.stats(p_policy text) RETURNS bigint[] LANGUAGE sql
AS $$SELECT ARRAY[coalesce(max(allowed), 0), coalesce(max(denied), 0), coalesce(max(shadow_denied), 0)]
        FROM ratelimit.policy_stats() WHERE policy = p_policy$$;

SELECT policy_test.at('0');

------------------------------------------------------------------------------------------------
-- 1. Every shipped policy: the limit and period its app states, and exactly that many calls
--    allowed in one period.
------------------------------------------------------------------------------------------------

CREATE TABLE policy_test.expected(name text, "limit" integer, period interval) ;
INSERT INTO policy_test.expected VALUES
    ('rpc.auth', 5, '15 minutes'), ('rpc.wallet', 30, '1 minute'), ('rpc.game', 100, '1 minute'),
    ('rpc.social', 50, '1 minute'), ('rpc.admin', 1000, '1 minute'),
    ('rpc.register-with-username-pin', 5, '15 minutes'), ('rpc.login-with-username-pin', 5, '15 minutes'),
    ('rpc.complete-game', 20, '1 minute'), ('rpc.credit-gameplay-reward', 30, '1 minute'),
    ('rpc.claim-daily-gift', 10, '1 minute'), ('rpc.claim_welcome_bonus', 5, '60 minutes'),
    ('rpc.lootbox-decide', 30, '1 minute'), ('rpc.send-friend-request', 10, '5 minutes'),
    ('rpc.send-dm', 100, '1 minute'),
    ('activity.create_post', 10, '1 minute'), ('activity.update_post', 10, '1 minute'),
    ('activity.delete_post', 10, '1 minute'), ('activity.add_comment', 60, '1 minute'),
    ('activity.update_comment', 60, '1 minute'), ('activity.delete_comment', 60, '1 minute'),
    ('activity.create_room', 10, '1 minute'), ('activity.update_room', 10, '1 minute'),
    ('activity.delete_room', 10, '1 minute'), ('activity.create_room_message', 60, '1 minute'),
    ('activity.update_room_message', 60, '1 minute'), ('activity.delete_room_message', 60, '1 minute'),
    ('activity.bulk_import', 5, '1 minute'),
    ('endpoint.ai-inference', 10, '1 hour'), ('endpoint.sync-push', 50, '1 hour'),
    ('endpoint.create-post', 5, '1 hour'),
    ('lotto.transaction', 10, '1 minute'), ('lotto.ip', 100, '1 minute'),
    ('lotto.global', 1000, '1 minute'), ('lotto.invoices', 3, '1 minute'),
    ('cleanup.global', 1000, '60 seconds'), ('cleanup.ip', 5, '60 seconds'),
    ('cleanup.email', 3, '3600 seconds');

SELECT set_eq(
    $$SELECT name, "limit", period FROM ratelimit.policies$$,
    $$SELECT name, "limit", period FROM policy_test.expected$$,
    'the shipped policies are exactly the apps'' limits, with their periods');

SELECT is(
    (SELECT array_agg(e.name ORDER BY e.name) FROM policy_test.expected e
      WHERE policy_test.allowed_of(e.name, policy_test.subject('shipped'), e."limit" + 2) <> e."limit"),
    NULL,
    'each shipped policy allows exactly its limit in one period, then denies');

SELECT ok(
    (SELECT bool_and(policy_test.remaining(e.name, policy_test.subject('shipped')) = 0)
       FROM policy_test.expected e),
    'and each key is then empty');

SELECT policy_test.at(interval '3601 seconds');
SELECT is(
    (SELECT array_agg(e.name ORDER BY e.name) FROM policy_test.expected e
      WHERE policy_test.allowed_of(e.name, policy_test.subject('shipped'), 1) <> 1),
    NULL,
    'after the longest period every shipped policy allows again');

SELECT ok((SELECT hash_key FROM ratelimit.policies WHERE name = 'cleanup.ip')
          AND (SELECT hash_key FROM ratelimit.policies WHERE name = 'cleanup.email')
          AND NOT (SELECT hash_key FROM ratelimit.policies WHERE name = 'lotto.ip'),
          'IP and e-mail keys of the cleanup flow are hashed');
SELECT is((SELECT count(*) FROM ratelimit.key_state
            WHERE policy = 'cleanup.email' AND key = ratelimit.hash_subject(policy_test.subject('shipped'))),
          1::bigint, 'a hashed policy stores the SHA-256 of the subject');
SELECT is((SELECT count(*) FROM ratelimit.key_state
            WHERE policy = 'cleanup.email' AND key LIKE '%' || policy_test.subject('shipped') || '%'),
          0::bigint, 'and never the subject itself');
SELECT is(ratelimit.hash_subject('192.168.1.100'),
          '2a39f1eedcd9f986327b5e4da842426f4f05b8f16f0ef385639dbec0db70eaae',
          'hash_subject is the hex SHA-256 of the UTF-8 bytes');

------------------------------------------------------------------------------------------------
-- 2. Tiers and key overrides
------------------------------------------------------------------------------------------------

SELECT policy_test.at(interval '1 day');
SELECT is(policy_test.allowed_of('activity.create_post', policy_test.subject('premium'), 25, 'premium'),
          20, 'premium doubles a limit of 10');
SELECT is(policy_test.allowed_of('activity.create_post', policy_test.subject('verified'), 25, 'verified'),
          15, 'verified multiplies it by 1.5');
SELECT is(policy_test.allowed_of('activity.bulk_import', policy_test.subject('verified'), 25, 'verified'),
          7, 'verified on a limit of 5 rounds 7.5 down to 7');
SELECT is(policy_test.allowed_of('activity.create_post', policy_test.subject('admin'), 50, 'admin'),
          50, 'admin bypasses the limit');
SELECT is((ratelimit.check('activity.create_post', policy_test.subject('admin'), 1, 'admin')).reason,
          'bypass', 'and the answer says so');
SELECT is((SELECT count(*) FROM ratelimit.key_state WHERE key LIKE '%' || policy_test.subject('admin')),
          0::bigint, 'a bypass writes no counter');
SELECT is((ratelimit.check('activity.create_post', policy_test.subject('premium-hdr'), 1, 'premium'))."limit",
          20, 'the decision reports the multiplied limit');

INSERT INTO ratelimit.tiers (name, multiplier) VALUES ('tiny', 0.01);
SELECT is(policy_test.allowed_of('activity.create_post', policy_test.subject('tiny'), 5, 'tiny'),
          1, 'a multiplied limit never drops below 1');

INSERT INTO ratelimit.key_overrides (policy, key, "limit")
    VALUES ('activity.create_post', policy_test.subject('override-limit'), 3);
INSERT INTO ratelimit.key_overrides (policy, key, multiplier)
    VALUES ('activity.create_post', policy_test.subject('override-mult'), 3);
INSERT INTO ratelimit.key_overrides (policy, key, bypass)
    VALUES ('activity.create_post', policy_test.subject('override-bypass'), true);
INSERT INTO ratelimit.key_overrides (policy, key, "limit", expires_at)
    VALUES ('activity.create_post', policy_test.subject('override-expired'), 1,
            timestamptz '2100-01-01 00:00:00+00');
SELECT is(policy_test.allowed_of('activity.create_post', policy_test.subject('override-limit'), 10),
          3, 'a key override sets its own limit');
SELECT is(policy_test.allowed_of('activity.create_post', policy_test.subject('override-mult'), 40),
          30, 'a key override multiplies');
SELECT is(policy_test.allowed_of('activity.create_post', policy_test.subject('override-bypass'), 30),
          30, 'a key override bypasses');
SELECT is(policy_test.allowed_of('activity.create_post', policy_test.subject('override-expired'), 12),
          10, 'an expired override is ignored');
SELECT is(policy_test.allowed_of('activity.create_post', policy_test.subject('override-limit'), 10, 'premium', NULL, NULL),
          0, 'a key override wins over the tier (its 3 are spent)');
SELECT is(policy_test.allowed_of('activity.add_comment', policy_test.subject('override-limit'), 70),
          60, 'an override applies to its own policy only');

------------------------------------------------------------------------------------------------
-- 3. Allow and deny lists: users, keys, IPv4 and IPv6 ranges
------------------------------------------------------------------------------------------------

SELECT policy_test.at(interval '2 days');
INSERT INTO ratelimit.access_list (action, user_id) VALUES ('deny', '00000000-0000-0000-0000-00000000dead');
INSERT INTO ratelimit.access_list (action, key) VALUES ('deny', policy_test.subject('denied-key'));
INSERT INTO ratelimit.access_list (action, ip) VALUES ('deny', '203.0.113.0/24');
INSERT INTO ratelimit.access_list (action, ip) VALUES ('deny', '2001:db8:bad::/48');
INSERT INTO ratelimit.access_list (action, ip, expires_at)
    VALUES ('deny', '198.51.100.7', timestamptz '2100-01-03 00:00:30+00');
INSERT INTO ratelimit.access_list (action, ip) VALUES ('allow', '10.0.0.0/8');
INSERT INTO ratelimit.access_list (action, ip) VALUES ('allow', '2001:db8:600d::/48');
INSERT INTO ratelimit.access_list (action, user_id, policy)
    VALUES ('allow', '00000000-0000-0000-0000-00000000600d', 'activity.create_post');
INSERT INTO ratelimit.access_list (action, ip) VALUES ('allow', '203.0.113.9');
INSERT INTO ratelimit.access_list (action, key, expires_at)
    VALUES ('deny', policy_test.subject('deny-expired'), timestamptz '2100-01-01 00:00:00+00');

SELECT is((ratelimit.check('activity.create_post', policy_test.subject('u1'), 1, NULL, NULL,
                           '00000000-0000-0000-0000-00000000dead')).reason,
          'deny_list', 'a denied user is denied');
SELECT is((ratelimit.check('activity.create_post', policy_test.subject('denied-key'))).allowed,
          false, 'a denied key is denied');
SELECT is((ratelimit.check('activity.create_post', policy_test.subject('v4'), 1, NULL, '203.0.113.77')).reason,
          'deny_list', 'an IPv4 address inside a denied /24 is denied');
SELECT is((ratelimit.check('activity.create_post', policy_test.subject('v6'), 1, NULL, '2001:db8:bad:1::42')).reason,
          'deny_list', 'an IPv6 address inside a denied /48 is denied');
SELECT is((ratelimit.check('activity.create_post', policy_test.subject('v6b'), 1, NULL, '2001:db8:bae::1')).reason,
          'within_limits', 'an IPv6 address just outside it is not');
SELECT is((ratelimit.check('activity.create_post', policy_test.subject('v4b'), 1, NULL, '203.0.114.1')).reason,
          'within_limits', 'an IPv4 address just outside the /24 is not');
SELECT is((ratelimit.check('activity.create_post', policy_test.subject('v4-9'), 1, NULL, '203.0.113.9')).reason,
          'deny_list', 'deny wins over allow');
SELECT is((ratelimit.check('activity.create_post', policy_test.subject('deny-null-retry'), 1, NULL, '203.0.113.1')).retry_after_ms,
          NULL::bigint, 'a deny entry without an end gives no retry time');
SELECT is((ratelimit.check('activity.create_post', policy_test.subject('deny-timed'), 1, NULL, '198.51.100.7')).retry_after_ms,
          30000::bigint, 'a deny entry with an end gives the wait until it');
SELECT is((ratelimit.check('activity.create_post', policy_test.subject('deny-expired'))).allowed,
          true, 'an expired deny entry is ignored');
SELECT is((SELECT count(*) FROM ratelimit.key_state
            WHERE key LIKE '%' || policy_test.subject('denied-key')
               OR key LIKE '%' || policy_test.subject('v4') OR key LIKE '%' || policy_test.subject('v6')),
          0::bigint, 'a deny-listed call charges nothing');
SELECT is(policy_test.allowed_of('activity.create_post', policy_test.subject('allow-v4'), 30, NULL, '10.1.2.3'),
          30, 'an allowed IPv4 range skips the limit');
SELECT is((ratelimit.check('activity.create_post', policy_test.subject('allow-v4'), 1, NULL, '10.1.2.3')).reason,
          'allow_list', 'and the answer says so');
SELECT is(policy_test.allowed_of('activity.create_post', policy_test.subject('allow-v6'), 30, NULL, '2001:db8:600d::5'),
          30, 'an allowed IPv6 range skips the limit');
SELECT is(policy_test.allowed_of('activity.create_post', policy_test.subject('allow-user'), 30, NULL, NULL,
                                 '00000000-0000-0000-0000-00000000600d'),
          30, 'an allowed user skips the policy it is listed for');
SELECT is(policy_test.allowed_of('activity.add_comment', policy_test.subject('allow-user'), 70, NULL, NULL,
                                 '00000000-0000-0000-0000-00000000600d'),
          60, 'but not other policies');
SELECT is((ratelimit.check_all(ARRAY['activity.create_post', 'activity.add_comment'],
                               ARRAY[policy_test.subject('mixed-allow'), policy_test.subject('mixed-allow')],
                               1, NULL, NULL, '00000000-0000-0000-0000-00000000600d')).policy,
          'activity.add_comment', 'in check_all an allow entry skips its policy and the others decide');

------------------------------------------------------------------------------------------------
-- 4. All-or-nothing over several policies, on every engine
------------------------------------------------------------------------------------------------

SELECT policy_test.at(interval '3 days');

CREATE FUNCTION policy_test.all_or_nothing(p_engines text[]) RETURNS SETOF text
LANGUAGE plpgsql AS $$
DECLARE
    txn constant text := policy_test.subject('txn-' || array_to_string(p_engines, '-'));
    ip constant text := policy_test.subject('ip-' || array_to_string(p_engines, '-'));
    d ratelimit.policy_decision;
    before_global integer;
    before_ip integer;
BEGIN
    UPDATE ratelimit.policies SET engine = p_engines[1] WHERE name = 'lotto.global';
    UPDATE ratelimit.policies SET engine = p_engines[2], algorithm = 'sliding_window_counter'
     WHERE name = 'lotto.ip';
    UPDATE ratelimit.policies SET engine = p_engines[3], algorithm = 'fixed_window'
     WHERE name = 'lotto.transaction';
    PERFORM ratelimit.reset('lotto.global:global', p_engines[1]);
    FOR i IN 1..10 LOOP
        d := ratelimit.check_all(ARRAY['lotto.global', 'lotto.ip', 'lotto.transaction'],
                                 ARRAY['global', ip, txn]);
    END LOOP;
    RETURN NEXT is(d.allowed, true, format('%s: ten calls allowed', p_engines));
    RETURN NEXT is(d.policy, 'lotto.transaction',
                   format('%s: an allowed answer names the policy with the least remaining', p_engines));
    before_global := policy_test.remaining('lotto.global', 'global');
    before_ip := policy_test.remaining('lotto.ip', ip);
    d := ratelimit.check_all(ARRAY['lotto.global', 'lotto.ip', 'lotto.transaction'],
                             ARRAY['global', ip, txn]);
    RETURN NEXT is(d.allowed, false, format('%s: the eleventh is denied', p_engines));
    RETURN NEXT is(d.policy, 'lotto.transaction', format('%s: by the transaction policy', p_engines));
    RETURN NEXT is(d.retry_after_ms, 60000::bigint, format('%s: with its retry time', p_engines));
    RETURN NEXT is(ARRAY[policy_test.remaining('lotto.global', 'global'), policy_test.remaining('lotto.ip', ip)],
                   ARRAY[before_global, before_ip],
                   format('%s: and the global and IP policies were not charged', p_engines));
END
$$;

SELECT * FROM policy_test.all_or_nothing(ARRAY['table', 'table', 'table']);
SELECT * FROM policy_test.all_or_nothing(ARRAY['unlogged', 'unlogged', 'unlogged']);
SELECT * FROM policy_test.all_or_nothing(ARRAY['memory', 'memory', 'memory']) WHERE :memory_engine;
SELECT * FROM policy_test.all_or_nothing(ARRAY['memory', 'table', 'unlogged']) WHERE :memory_engine;
SELECT * FROM policy_test.all_or_nothing(ARRAY['table', 'memory', 'memory']) WHERE :memory_engine;

-- The first denying policy in the order given is named; the wait is the longest.
UPDATE ratelimit.policies SET engine = 'table' WHERE name LIKE 'lotto.%';
INSERT INTO ratelimit.policies (name, algorithm, "limit", period) VALUES
    ('test.short', 'fixed_window', 1, '10 seconds'),
    ('test.long', 'fixed_window', 1, '1 hour');
SELECT ratelimit.check_all(ARRAY['test.short', 'test.long'], ARRAY[policy_test.subject('two'), policy_test.subject('two')]);
SELECT is((ratelimit.check_all(ARRAY['test.short', 'test.long'],
                               ARRAY[policy_test.subject('two'), policy_test.subject('two')])).policy,
          'test.short', 'when several deny, the first in the order given is named');
SELECT is((ratelimit.check_all(ARRAY['test.short', 'test.long'],
                               ARRAY[policy_test.subject('two'), policy_test.subject('two')])).retry_after_ms,
          3600000::bigint, 'and the wait is the longest among them');
SELECT is((ratelimit.check_all(ARRAY['test.long', 'test.short'],
                               ARRAY[policy_test.subject('two'), policy_test.subject('two')])).policy,
          'test.long', 'the order given decides which is named');

-- Costs: a cost one policy can take and another cannot charges neither.
INSERT INTO ratelimit.policies (name, algorithm, "limit", period) VALUES
    ('test.five', 'token_bucket', 5, '1 minute'), ('test.four', 'gcra', 4, '1 minute');
SELECT is((ratelimit.check('test.four', policy_test.subject('cost'), 2)).remaining, 2,
          'two of four gcra units taken');
SELECT is((ratelimit.check_all(ARRAY['test.five', 'test.four'],
                               ARRAY[policy_test.subject('cost'), policy_test.subject('cost')], 3)).allowed,
          false, 'a cost of 3 against 5 and 2 left is denied');
SELECT is(ARRAY[policy_test.remaining('test.five', policy_test.subject('cost')),
                policy_test.remaining('test.four', policy_test.subject('cost'))],
          ARRAY[5, 2], 'and neither lost a unit');
SELECT is((ratelimit.check_all(ARRAY['test.five', 'test.four'],
                               ARRAY[policy_test.subject('cost'), policy_test.subject('cost')], 2)).remaining,
          0, 'a cost of 2 is allowed and the answer shows the emptier one');

------------------------------------------------------------------------------------------------
-- 5. Shadow mode and count_denied
------------------------------------------------------------------------------------------------

SELECT policy_test.at(interval '4 days');
INSERT INTO ratelimit.policies (name, "limit", period, shadow) VALUES ('test.shadow', 2, '1 minute', true);
CREATE TABLE policy_test.stats_before AS
SELECT CASE WHEN :c_edition THEN policy_test.stats('test.shadow') END AS s;
SELECT is(policy_test.allowed_of('test.shadow', policy_test.subject('shadow'), 5), 5,
          'a shadow policy never denies');
SELECT is((ratelimit.check('test.shadow', policy_test.subject('shadow'))).shadow_denied,
          ARRAY['test.shadow'], 'but says it would have');
SELECT is((SELECT ARRAY[a[1] - b[1], a[2] - b[2], a[3] - b[3]]
             FROM (SELECT policy_test.stats('test.shadow') AS a, s AS b FROM policy_test.stats_before) x),
          ARRAY[2::bigint, 0, 4], 'and counts 2 allowed and 4 shadow-denied calls')
WHERE :c_edition;
SELECT is((ratelimit.check_all(ARRAY['test.shadow', 'activity.create_post'],
                               ARRAY[policy_test.subject('shadow'), policy_test.subject('shadow')])).allowed,
          true, 'a shadow denial does not deny the other policies of a check_all');
SELECT is(policy_test.remaining('activity.create_post', policy_test.subject('shadow')), 9,
          'which are charged as usual');

INSERT INTO ratelimit.policies (name, algorithm, "limit", period, count_denied)
    VALUES ('test.counted', 'fixed_window', 2, '1 minute', true);
SELECT policy_test.at(interval '4 days 50 seconds');
SELECT is(policy_test.allowed_of('test.counted', policy_test.subject('counted'), 2), 2,
          'count_denied: two allowed at 0:50');
SELECT is((ratelimit.check('test.counted', policy_test.subject('counted'))).retry_after_ms, 60000::bigint,
          'count_denied: the third is denied, and its wait is the full period its attempt costs');
SELECT policy_test.at(interval '4 days 1 minute 10 seconds');
SELECT is(policy_test.would_allow('test.counted', policy_test.subject('counted')), false,
          'count_denied: the window has turned, but the denied attempt keeps the key denied');
SELECT policy_test.at(interval '4 days 1 minute 50 seconds');
SELECT is(policy_test.allowed_of('test.counted', policy_test.subject('counted'), 3), 2,
          'count_denied: a full period after the denied attempt, it is allowed again');
SELECT policy_test.at(interval '4 days 2 minutes 40 seconds');
SELECT is((ratelimit.check('test.counted', policy_test.subject('counted'))).allowed, false,
          'count_denied: each denied attempt starts the wait again (1:50 + 1 minute)');
SELECT policy_test.at(interval '4 days 2 minutes 50 seconds');
SELECT is((ratelimit.check('test.counted', policy_test.subject('counted'))).allowed, false,
          'count_denied: so a caller that keeps trying stays out');
INSERT INTO ratelimit.policies (name, algorithm, "limit", period)
    VALUES ('test.uncounted', 'fixed_window', 2, '1 minute');
SELECT policy_test.at(interval '4 days 50 seconds');
SELECT is(policy_test.allowed_of('test.uncounted', policy_test.subject('counted'), 3), 2,
          'without count_denied: two allowed at 0:50');
SELECT policy_test.at(interval '4 days 1 minute 10 seconds');
SELECT is((ratelimit.check('test.uncounted', policy_test.subject('counted'))).allowed, true,
          'without count_denied: the next window allows');

------------------------------------------------------------------------------------------------
-- 6. HTTP headers at exact boundaries, and the 429 bodies
------------------------------------------------------------------------------------------------

-- A rolling window opened at 0.000400 s: its retry instant has microseconds, which the headers
-- round up (to the millisecond for ISO 8601, to the second for Unix time and Retry-After).
INSERT INTO ratelimit.policies (name, algorithm, "limit", period)
    VALUES ('test.headers', 'rolling_window', 2, '90 seconds');
SELECT set_config('ratelimit.test_clock', '2100-01-06 00:00:00.0004+00', true);
CREATE TABLE policy_test.first AS SELECT ratelimit.check('test.headers', policy_test.subject('h')) AS d;
SELECT is(ratelimit.http_headers((SELECT d FROM policy_test.first)),
          jsonb_build_object('X-RateLimit-Limit', '2', 'X-RateLimit-Remaining', '1',
                             'X-RateLimit-Reset', '2100-01-06T00:01:30.001Z',
                             'RateLimit', '"test.headers";r=1;t=90',
                             'RateLimit-Policy', '"test.headers";q=2;w=90'),
          'allowed: limit, remaining, the reset instant rounded up to the millisecond, IETF fields');
SELECT is(ratelimit.http_headers((SELECT d FROM policy_test.first), 'unix') ->> 'X-RateLimit-Reset',
          (extract(epoch FROM timestamptz '2100-01-06 00:01:31+00'))::bigint::text,
          'allowed, Unix form: the reset second rounded up');
SELECT set_config('ratelimit.test_clock', '2100-01-06 00:00:10.25+00', true);
SELECT ratelimit.check('test.headers', policy_test.subject('h'));
CREATE TABLE policy_test.denied AS SELECT ratelimit.check('test.headers', policy_test.subject('h')) AS d;
SELECT is((SELECT (d).retry_after_ms FROM policy_test.denied), 79751::bigint,
          'denied at 10.25 s: the decision waits 79.7504 s, 79751 ms rounded up');
SELECT is(ratelimit.http_headers((SELECT d FROM policy_test.denied)),
          jsonb_build_object('X-RateLimit-Limit', '2', 'X-RateLimit-Remaining', '0',
                             'X-RateLimit-Reset', '2100-01-06T00:01:30.001Z',
                             'Retry-After', '80',
                             'RateLimit', '"test.headers";r=0;t=80',
                             'RateLimit-Policy', '"test.headers";q=2;w=90'),
          'denied: Retry-After in whole seconds rounded up, Reset at the retry instant');
SELECT is(ratelimit.http_headers((SELECT d FROM policy_test.denied), 'unix') ->> 'X-RateLimit-Reset',
          (extract(epoch FROM timestamptz '2100-01-06 00:01:31+00'))::bigint::text,
          'denied, Unix form');
SELECT set_config('ratelimit.test_clock', '2100-01-06 00:01:30.0003+00', true);
SELECT is(policy_test.would_allow('test.headers', policy_test.subject('h')),
          false, 'just before the exact retry instant the call is still denied');
SELECT set_config('ratelimit.test_clock', '2100-01-06 00:01:30.001+00', true);
SELECT is(policy_test.would_allow('test.headers', policy_test.subject('h')),
          true, 'at the ISO 8601 reset instant it is allowed');
SELECT set_config('ratelimit.test_clock', '2100-01-06 00:01:30.25+00', true);
SELECT is(policy_test.would_allow('test.headers', policy_test.subject('h')),
          true, 'Retry-After seconds after the denial it is allowed');
SELECT set_config('ratelimit.test_clock', '2100-01-06 00:01:29.25+00', true);
SELECT is(policy_test.would_allow('test.headers', policy_test.subject('h')),
          false, 'one second less than Retry-After it is denied');

SELECT is(ratelimit.http_body((SELECT d FROM policy_test.denied)),
          '{"error": "Rate limit exceeded", "message": "Too many requests. Please try again later."}'::jsonb,
          'the error/message body');
SELECT is(ratelimit.http_body((SELECT d FROM policy_test.denied), 'detailed'),
          jsonb_build_object('error', 'Rate limit exceeded', 'code', 'RATE_LIMIT_EXCEEDED',
                             'message', 'Too many requests. Limit: 2 per 90 seconds. Current: 3. Try again in 80 seconds.',
                             'limit', 2, 'current', 3, 'retryAfter', 80),
          'the detailed body: current counts the denied call');
SELECT is(ratelimit.http_body((SELECT d FROM policy_test.first)), NULL, 'no body when allowed');

SELECT policy_test.at(interval '7 days 30 minutes');
INSERT INTO ratelimit.policies (name, algorithm, "limit", period) VALUES ('test.hourly', 'fixed_window', 10, '1 hour');
SELECT policy_test.allowed_of('test.hourly', policy_test.subject('hourly'), 10);
SELECT is(ratelimit.http_body(ratelimit.check('test.hourly', policy_test.subject('hourly')), 'detailed')
              ->> 'message',
          'Too many requests. Limit: 10 per hour. Current: 11. Try again in 1800 seconds.',
          'the detailed message reads "per hour" for an hour');
-- pk is keyed with the database's random secret: compared apart.
SELECT is(regexp_replace((ratelimit.check_http(ARRAY['test.hourly'], ARRAY[policy_test.subject('hourly')]) - 'decision')::text,
                         ';pk=:[A-Za-z0-9+/]{16}:', '', 'g')::jsonb,
          jsonb_build_object('allowed', false, 'status', 429,
                             'headers', jsonb_build_object(
                                 'X-RateLimit-Limit', '10', 'X-RateLimit-Remaining', '0',
                                 'X-RateLimit-Reset', '2100-01-08T01:00:00.000Z', 'Retry-After', '1800',
                                 'RateLimit', '"test.hourly";r=0;t=1800',
                                 'RateLimit-Policy', '"test.hourly";q=10;w=3600'),
                             'body', '{"error": "Rate limit exceeded", "message": "Too many requests. Please try again later."}'::jsonb),
          'check_http: status, headers and body in one answer');
SELECT is((SELECT count(DISTINCT m[1]) FROM regexp_matches(
               (SELECT string_agg(r -> 'headers' ->> 'RateLimit', ', ')
                  FROM unnest(ARRAY['hourly', 'hourly', 'other']) AS s,
                       ratelimit.check_http(ARRAY['test.hourly'], ARRAY[policy_test.subject(s)]) AS r),
               ';pk=:([A-Za-z0-9+/]{16}):', 'g') AS m),
          2::bigint, 'check_http: one pk per subject, another for another subject');
SELECT is((SELECT count(*) FROM pg_class c, aclexplode(c.relacl) a
            WHERE c.oid = 'ratelimit.partition_key_secret'::regclass AND a.grantee <> c.relowner),
          0::bigint, 'the partition key secret is the owner''s only');
SELECT is(ratelimit.http_headers(ratelimit.check('activity.create_post', policy_test.subject('admin-h'), 1, 'admin')),
          '{}'::jsonb, 'a bypassed call has no rate-limit headers');

------------------------------------------------------------------------------------------------
-- 7. Counters, top offenders, the denial log
------------------------------------------------------------------------------------------------

SELECT policy_test.at(interval '8 days');
INSERT INTO ratelimit.policies (name, "limit", period, log_denials)
    VALUES ('test.logged', 3, '1 minute', true);
CREATE TABLE policy_test.logged_before AS
SELECT CASE WHEN :c_edition THEN policy_test.stats('test.logged') END AS s;
SELECT is(policy_test.allowed_of('test.logged', policy_test.subject('offender'), 13), 3,
          'three allowed, ten denied');
SELECT is((SELECT ARRAY[a[1] - b[1], a[2] - b[2], a[3] - b[3]]
             FROM (SELECT policy_test.stats('test.logged') AS a, s AS b FROM policy_test.logged_before) x),
          ARRAY[3::bigint, 10, 0], 'policy_stats counts them')
WHERE :c_edition;
-- A new subject may take the entry of the least denied one and inherit its count (overcount).
SELECT is((SELECT denials - overcount FROM ratelimit.top_offenders(1000)
            WHERE policy = 'test.logged' AND subject = policy_test.subject('offender')),
          10::bigint, 'top_offenders counts the subject''s ten denials')
WHERE :c_edition;
SELECT is((SELECT count(*) FROM ratelimit.denial_log WHERE event_data ->> 'identifier' = policy_test.subject('offender')),
          10::bigint, 'each denial is in the log');
SELECT is((SELECT ARRAY[event_type, severity, source, status, error_message]
             FROM ratelimit.denial_log WHERE event_data ->> 'identifier' = policy_test.subject('offender') LIMIT 1),
          ARRAY['rate_limit_violation', 'warning', 'ratelimit', 'blocked', 'Rate limit exceeded: 3 requests per minute'],
          'shaped like a security event');
SELECT is((SELECT (event_data ->> 'limit')::int || '/' || (event_data ->> 'window_minutes')
             FROM ratelimit.denial_log WHERE event_data ->> 'identifier' = policy_test.subject('offender') LIMIT 1),
          '3/1.000', 'its event_data has the limit and window');
SET LOCAL ratelimit.denial_log_size = 5;
SELECT policy_test.allowed_of('test.logged', policy_test.subject('offender'), 12);
SELECT is((SELECT count(*) FROM ratelimit.denial_log), 5::bigint,
          'the log never holds more than ratelimit.denial_log_size rows');
SET LOCAL ratelimit.denial_log_sample_rate = 0;
DELETE FROM ratelimit.denial_log;
SELECT policy_test.allowed_of('test.logged', policy_test.subject('offender'), 5);
SELECT is((SELECT count(*) FROM ratelimit.denial_log), 0::bigint, 'a sample rate of 0 logs nothing');
RESET ratelimit.denial_log_sample_rate;
SELECT policy_test.allowed_of('activity.create_post', policy_test.subject('unlogged-policy'), 12);
SELECT is((SELECT count(*) FROM ratelimit.denial_log), 0::bigint, 'policies without log_denials are not logged');

------------------------------------------------------------------------------------------------
-- 8. Editing a policy applies to the next call
------------------------------------------------------------------------------------------------

SELECT policy_test.at(interval '9 days');
SELECT is(policy_test.allowed_of('activity.create_room', policy_test.subject('edit'), 4), 4, 'four of ten');
UPDATE ratelimit.policies SET "limit" = 5 WHERE name = 'activity.create_room';
SELECT is(policy_test.allowed_of('activity.create_room', policy_test.subject('edit'), 4), 1,
          'after lowering the limit to 5, one more');
UPDATE ratelimit.policies SET "limit" = 8 WHERE name = 'activity.create_room';
SELECT is(policy_test.allowed_of('activity.create_room', policy_test.subject('edit'), 4), 3,
          'after raising it to 8, three more');
UPDATE ratelimit.policies SET engine = 'memory' WHERE name = 'activity.create_room' AND :memory_engine;
SELECT is(policy_test.allowed_of('activity.create_room', policy_test.subject('edit'), 10), 8,
          'after moving it to the memory engine, a fresh count there')
WHERE :memory_engine;

------------------------------------------------------------------------------------------------
-- 9. Bad calls: the right SQLSTATE, the argument named, nothing written
------------------------------------------------------------------------------------------------

-- A cost no limit could allow is a denial (tested here: the premium call below writes).
SELECT is((SELECT ARRAY[(d).allowed::text, (d).reason, coalesce((d).retry_after_ms::text, 'none'), (d).remaining::text]
             FROM (SELECT ratelimit.check('rpc.auth', policy_test.subject('big-cost'), 6) AS d) x),
          ARRAY['false', 'cost_exceeds_limit', 'none', '5'],
          'a cost above the limit is denied for good, charging nothing (not an error a caller could fail open on)');
SELECT is((ratelimit.check('rpc.auth', policy_test.subject('big-cost'), 10, 'premium')).allowed, true,
          'a premium caller''s cost is measured against its doubled limit');
SELECT is(ratelimit.http_body(ratelimit.check('rpc.auth', policy_test.subject('big-cost2'), 6), 'detailed'),
          jsonb_build_object('error', 'Rate limit exceeded', 'code', 'RATE_LIMIT_EXCEEDED',
                             'message', 'Too many requests. Limit: 5 per 15 minutes. Current: 6. Try again later.',
                             'limit', 5, 'current', 6, 'retryAfter', NULL),
          'its detailed body gives no retry time');
SELECT is(ratelimit.http_body(ratelimit.check('activity.create_post', policy_test.subject('deny-body'), 1, NULL, '203.0.113.5'), 'detailed'),
          jsonb_build_object('error', 'Rate limit exceeded', 'code', 'RATE_LIMIT_EXCEEDED',
                             'message', 'Too many requests. Limit: 10 per minute. Try again later.',
                             'limit', 10, 'current', NULL, 'retryAfter', NULL),
          'a permanent deny-list entry: no count and no retry time in the body');

CREATE TABLE policy_test.rows_before AS
SELECT (SELECT count(*) FROM ratelimit.key_state) AS logged, (SELECT count(*) FROM ratelimit.key_state_unlogged) AS unlogged;

SELECT throws_ok($$SELECT ratelimit.check(NULL, 'k')$$, '22004', 'p_policy must not be NULL', 'NULL policy');
SELECT throws_ok($$SELECT ratelimit.check('rpc.auth', NULL)$$, '22004', 'p_key must not be NULL', 'NULL key');
SELECT throws_ok($$SELECT ratelimit.check('rpc.auth', 'k', NULL)$$, '22004', 'p_cost must not be NULL', 'NULL cost');
SELECT throws_ok($$SELECT ratelimit.check('no.such', 'k')$$, '22023', 'p_policy: unknown policy "no.such"', 'unknown policy');
SELECT throws_ok($$SELECT ratelimit.check('rpc.auth', 'k', 1, 'gold')$$, '22023', 'p_tier: unknown tier "gold"', 'unknown tier');
SELECT throws_ok($$SELECT ratelimit.check('rpc.auth', '')$$, '22023', 'p_key must not be empty', 'empty key');
SELECT throws_ok($$SELECT ratelimit.check('rpc.auth', repeat('k', 300))$$, '22023',
                 'p_key must be at most 256 bytes long, got 300', 'key too long');
SELECT throws_ok($$SELECT ratelimit.check('rpc.auth', 'k', -1)$$, '22023', 'p_cost must not be negative (got -1)', 'negative cost');
SELECT throws_ok($$SELECT ratelimit.check_all('{}', '{}')$$, '22023', 'p_policies must have 1 to 16 elements (got 0)', 'no policies');
SELECT throws_ok($$SELECT ratelimit.check_all(ARRAY['rpc.auth', 'rpc.game'], ARRAY['k'])$$, '22023',
                 'p_keys must have as many elements as p_policies (2, got 1)', 'arrays of different lengths');
SELECT throws_ok($$SELECT ratelimit.check_all(ARRAY['rpc.auth', NULL], ARRAY['k', 'k'])$$, '22004',
                 'p_policies[2] must not be NULL', 'a NULL policy element');
SELECT throws_ok($$SELECT ratelimit.check_all(ARRAY['rpc.auth', 'rpc.auth'], ARRAY['k', 'j'])$$, '22023',
                 'p_policies[2]: policy "rpc.auth" is listed twice', 'a policy listed twice');
SELECT throws_ok($$SELECT ratelimit.check_all(ARRAY['rpc.auth', 'rpc.nope'], ARRAY['k', 'j'])$$, '22023',
                 'p_policies[2]: unknown policy "rpc.nope"', 'an unknown policy element');
SELECT throws_ok($$SELECT ratelimit.http_headers(ratelimit.check('rpc.auth', 'hdr'), 'rfc1123')$$, '22023',
                 'p_reset_format must be one of iso8601, unix (got "rfc1123")', 'unknown reset format');
SELECT throws_ok($$SELECT ratelimit.http_body(ratelimit.check('rpc.auth', 'hdr'), 'xml')$$, '22023',
                 'p_shape must be one of error_message, detailed, problem (got "xml")', 'unknown body shape');
SELECT throws_ok($$SELECT ratelimit.check_http(ARRAY['rpc.auth'], ARRAY['hdr2'], p_reset_format => 'x')$$, '22023',
                 'p_reset_format must be one of iso8601, unix (got "x")', 'check_http checks its formats first');
SELECT is((SELECT ARRAY[count(*) FILTER (WHERE policy = 'rpc.auth' AND key = 'hdr2')] FROM ratelimit.key_state), ARRAY[0::bigint],
          'check_http with a bad format charged nothing');

SELECT throws_ok($$INSERT INTO ratelimit.policies (name, "limit", period) VALUES ('bad', 0, '1 minute')$$,
                 '22023', 'policy "bad": p_limit must be greater than zero, got 0', 'a policy with limit 0');
SELECT throws_ok($$INSERT INTO ratelimit.policies (name, "limit", period) VALUES ('bad', 5, '2 months')$$,
                 '22023', NULL, 'a policy with a period in months other than the calendar month');
SELECT throws_ok($$INSERT INTO ratelimit.policies (name, "limit", period, algorithm) VALUES ('bad', 5, '1 minute', 'leaky')$$,
                 '22023', NULL, 'a policy with an unknown algorithm');
SELECT throws_ok($$INSERT INTO ratelimit.policies (name, "limit", period, engine) VALUES ('bad', 5, '1 minute', 'redis')$$,
                 '22023', NULL, 'a policy with an unknown engine');
SELECT lives_ok($$INSERT INTO ratelimit.policies (name, "limit", period, algorithm, engine) VALUES ('memory-sliding', 1000, '1 minute', 'sliding_window', 'memory')$$,
                'a memory sliding_window policy of any limit')
WHERE :memory_engine;
SELECT throws_ok($$UPDATE ratelimit.policies SET period = '0 seconds' WHERE name = 'rpc.auth'$$,
                 '22023', NULL, 'an edit to a zero period');
SELECT throws_ok($$INSERT INTO ratelimit.policies (name, "limit", period) VALUES ('bad name!', 5, '1 minute')$$,
                 '22023', 'policy "bad name!": name may hold only letters, digits, _ . : and - (1 to 63 of them; / is reserved): group names with dots, as in activity.create_post',
                 'a policy name outside [A-Za-z0-9_.:-], refused in words');
SELECT throws_ok($$INSERT INTO ratelimit.access_list (action, key, ip) VALUES ('deny', 'k', '1.2.3.4')$$,
                 '23514', NULL, 'an access-list entry with two subjects');
SELECT throws_ok($$INSERT INTO ratelimit.tiers (name, multiplier) VALUES ('neg', -1)$$,
                 '23514', NULL, 'a tier with a negative multiplier');

SELECT is((SELECT ARRAY[(SELECT count(*) FROM ratelimit.key_state), (SELECT count(*) FROM ratelimit.key_state_unlogged)]),
          (SELECT ARRAY[logged, unlogged] FROM policy_test.rows_before),
          'no bad call wrote a counter');

SELECT * FROM finish();
ROLLBACK;
