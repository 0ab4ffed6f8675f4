-- Reservations and leases through policies (ratelimit.reserve_policy, acquire_policy,
-- lease_decision; the test server preloads the library). reserve_policy decides as check does
-- and its reservation settles the policy's own counter for the subject; acquire_policy takes
-- a lease in the policy's own key space, under the lists, overrides and tiers; check and the
-- other rate calls refuse a concurrency policy. A transaction's and a session's end, and many
-- holders at once, are tested with real connections: test/concurrency/
-- policy_lease_concurrency_test.cpp.
--
-- The registries, the memory engine and the policy counters live in shared memory, not in this
-- transaction: every subject carries a prefix unique to this run, and counters are compared
-- before and after.
BEGIN;
CREATE EXTENSION IF NOT EXISTS pgtap;
CREATE EXTENSION ratelimit;
SET LOCAL timezone = 'UTC';

SELECT plan(69);

CREATE SCHEMA prl_test;
CREATE TABLE prl_test.run AS
SELECT 'pgtap-' || pg_backend_pid() || '-' || (extract(epoch FROM clock_timestamp()) * 1e6)::bigint
           AS prefix;
CREATE FUNCTION prl_test.key(p_name text) RETURNS text LANGUAGE sql
AS $$SELECT prefix || ':' || p_name FROM prl_test.run$$;
CREATE FUNCTION prl_test.at(p_instant text) RETURNS text LANGUAGE sql
AS $$SELECT set_config('ratelimit.test_clock', p_instant, true)$$;
SELECT prl_test.at('2100-01-01 00:00:00+00');

-- What the policy's counter has left for the subject: a check of 0 units charges nothing.
CREATE FUNCTION prl_test.left(p_policy text, p_key text, p_tier text DEFAULT NULL)
RETURNS integer LANGUAGE sql
AS $$SELECT remaining FROM ratelimit.check(p_policy, p_key, 0, p_tier)$$;

CREATE FUNCTION prl_test.allowed_count(p_policy text) RETURNS bigint LANGUAGE sql
AS $$SELECT coalesce((SELECT allowed FROM ratelimit.policy_stats() WHERE policy = p_policy), 0)$$;
CREATE FUNCTION prl_test.denied_count(p_policy text) RETURNS bigint LANGUAGE sql
AS $$SELECT coalesce((SELECT denied FROM ratelimit.policy_stats() WHERE policy = p_policy), 0)$$;

-- ---- reserve_policy ------------------------------------------------------------------------

-- One subject through reserve_policy -> settle less / equal / cancel / more, then the calls
-- that follow, under a policy of 10 per minute on one engine and algorithm.
CREATE FUNCTION prl_test.scenario(p_algorithm text, p_engine text)
RETURNS text[] LANGUAGE plpgsql AS $$
DECLARE
    p text := 'rp.' || p_algorithm || '.' || p_engine;
    k text := prl_test.key('scenario');
    r ratelimit.reservation;
    d ratelimit.decision;
    seen text[] := '{}';
BEGIN
    INSERT INTO ratelimit.policies (name, algorithm, "limit", period, engine)
    VALUES (p, p_algorithm, 10, '1 minute', p_engine);
    PERFORM prl_test.at('2100-01-01 00:00:00+00');
    r := ratelimit.reserve_policy(p, k, 4);
    seen := seen || ('reserve 4: ' || r.allowed || ' ' || r.remaining);
    d := ratelimit.settle(r.reservation_id, 1);
    seen := seen || ('settle 1: ' || d.allowed || ' ' || d.remaining);
    r := ratelimit.reserve_policy(p, k, 4);
    d := ratelimit.settle(r.reservation_id, 4);
    seen := seen || ('settle 4 of 4: ' || d.remaining);
    r := ratelimit.reserve_policy(p, k, 3);
    seen := seen || ('reserve 3: ' || r.remaining);
    d := ratelimit.cancel(r.reservation_id);
    seen := seen || ('cancel: ' || d.remaining);
    r := ratelimit.reserve_policy(p, k, 5);
    seen := seen || ('reserve 5: ' || r.allowed || ' ' || r.remaining);
    d := ratelimit.settle(r.reservation_id, 12);
    seen := seen || ('settle 12 of 5: ' || d.allowed || ' ' || d.remaining);
    seen := seen || ('check: ' || (ratelimit.check(p, k)).allowed);
    r := ratelimit.reserve_policy(p, k, 1);
    seen := seen || ('reserve: ' || r.allowed || ' ' || coalesce(r.reservation_id::text, 'no id'));
    seen := seen || ('native key: ' || (ratelimit.peek(k, 10, '1 minute', 1, p_algorithm, p_engine)).remaining);
    PERFORM prl_test.at('2100-01-01 00:01:00+00');
    seen := seen || ('a minute on: ' || prl_test.left(p, k));
    PERFORM prl_test.at('2100-01-01 00:02:00+00');
    seen := seen || ('two: ' || prl_test.left(p, k));
    PERFORM prl_test.at('2100-01-01 00:00:00+00');
    RETURN seen;
END
$$;

-- 1-12. Every engine, four algorithms: the same as reserve and settle on a native key, on the
-- policy's counter, and the native key of the same text is never touched.
SELECT is(prl_test.scenario(a, e),
          ARRAY['reserve 4: true 6', 'settle 1: true 9', 'settle 4 of 4: 5', 'reserve 3: 2',
                'cancel: 5', 'reserve 5: true 0', 'settle 12 of 5: false 0', 'check: false',
                'reserve: false no id', 'native key: 10', 'a minute on: ' || later, 'two: 10'],
          format('reserve_policy, settle less, equal, cancel, more: %s on the %s engine', a, e))
  FROM (VALUES ('fixed_window', 3), ('token_bucket', 3), ('gcra', 3), ('sliding_window', 10))
           AS algorithms(a, later),
       unnest(ARRAY['table', 'unlogged', 'memory']) AS e;

-- 13-14. The other two algorithms.
SELECT is(prl_test.scenario('rolling_window', 'table'),
          ARRAY['reserve 4: true 6', 'settle 1: true 9', 'settle 4 of 4: 5', 'reserve 3: 2',
                'cancel: 5', 'reserve 5: true 0', 'settle 12 of 5: false 0', 'check: false',
                'reserve: false no id', 'native key: 10', 'a minute on: 3', 'two: 10'],
          'rolling_window through a policy');
SELECT is(prl_test.scenario('sliding_window_counter', 'table'),
          ARRAY['reserve 4: true 6', 'settle 1: true 9', 'settle 4 of 4: 5', 'reserve 3: 2',
                'cancel: 5', 'reserve 5: true 0', 'settle 12 of 5: false 0', 'check: false',
                'reserve: false no id', 'native key: 10', 'a minute on: 0', 'two: 10'],
          'sliding_window_counter through a policy');

INSERT INTO ratelimit.policies (name, "limit", period) VALUES ('rp.plain', 10, '1 minute');
INSERT INTO ratelimit.tiers (name, multiplier) VALUES ('rp-gold', 2);
INSERT INTO ratelimit.tiers (name, bypass) VALUES ('rp-free-pass', true);

-- 15-17. A tier's multiplier: the reservation is decided and settled under the limit the call
-- had (20), not the policy's 10.
CREATE TABLE prl_test.gold AS
SELECT * FROM ratelimit.reserve_policy('rp.plain', prl_test.key('gold'), 15, p_tier => 'rp-gold');
SELECT is((SELECT ARRAY[allowed::text, "limit"::text, remaining::text] FROM prl_test.gold),
          ARRAY['true', '20', '5'], 'a gold caller reserves 15 of 20');
SELECT is((SELECT ARRAY[allowed::text, "limit"::text, remaining::text]
             FROM ratelimit.settle((SELECT reservation_id FROM prl_test.gold), 18)),
          ARRAY['true', '20', '2'], 'settled at 18 under the limit of 20');
SELECT is(prl_test.left('rp.plain', prl_test.key('gold'), 'rp-gold'), 2,
          'and the policy''s counter for the subject holds 18');

-- 18-19. A key's override.
INSERT INTO ratelimit.key_overrides (policy, key, "limit")
VALUES ('rp.plain', prl_test.key('override'), 3);
CREATE TABLE prl_test.override AS
SELECT * FROM ratelimit.reserve_policy('rp.plain', prl_test.key('override'), 2);
SELECT is((SELECT ARRAY["limit", remaining] FROM prl_test.override), ARRAY[3, 1],
          'an override''s limit decides the reservation');
SELECT is((SELECT ARRAY["limit", remaining]
             FROM ratelimit.settle((SELECT reservation_id FROM prl_test.override), 1)),
          ARRAY[3, 2], 'and its settle');

-- 20-22. A deny entry: denied, nothing reserved or charged; an allow entry or a bypass tier:
-- allowed with nothing to settle (no limit checked).
INSERT INTO ratelimit.access_list (action, policy, key, expires_at)
VALUES ('deny', 'rp.plain', prl_test.key('denied'), '2100-01-01 00:05:00+00');
SELECT is((SELECT ARRAY[allowed::text, coalesce(reservation_id::text, 'no id'),
                        retry_after_ms::text, coalesce(expires_at::text, 'none')]
             FROM ratelimit.reserve_policy('rp.plain', prl_test.key('denied'), 1)),
          ARRAY['false', 'no id', '300000', 'none'],
          'a deny entry denies the reservation, with the wait until the entry ends');
INSERT INTO ratelimit.access_list (action, policy, key)
VALUES ('allow', 'rp.plain', prl_test.key('allowed'));
SELECT is((SELECT ARRAY[allowed::text, coalesce(reservation_id::text, 'no id'),
                        coalesce("limit"::text, 'none')]
             FROM ratelimit.reserve_policy('rp.plain', prl_test.key('allowed'), 50)),
          ARRAY['true', 'no id', 'none'], 'an allow entry: allowed, no limit, nothing to settle');
SELECT is((SELECT ARRAY[allowed::text, coalesce(reservation_id::text, 'no id')]
             FROM ratelimit.reserve_policy('rp.plain', prl_test.key('bypass'), 50,
                                           p_tier => 'rp-free-pass')),
          ARRAY['true', 'no id'], 'a bypass tier: the same');

-- 23-24. A policy with hash_key: the counter holds the subject's hash, and the settle corrects
-- that row.
INSERT INTO ratelimit.policies (name, "limit", period, hash_key)
VALUES ('rp.hashed', 10, '1 minute', true);
CREATE TABLE prl_test.hashed AS
SELECT * FROM ratelimit.reserve_policy('rp.hashed', prl_test.key('203.0.113.7'), 6);
SELECT is((SELECT remaining FROM ratelimit.settle((SELECT reservation_id FROM prl_test.hashed), 2)),
          8, 'a hashed policy''s reservation settles');
SELECT is((SELECT array_agg(key = ratelimit.hash_subject(prl_test.key('203.0.113.7')))
             FROM ratelimit.key_state WHERE policy = 'rp.hashed'),
          ARRAY[true], 'on the row of the subject''s hash, under the policy');

-- 25. A shadow policy's would-be denial: the call goes on, charged nothing, nothing to settle.
INSERT INTO ratelimit.policies (name, "limit", period, shadow)
VALUES ('rp.shadow', 2, '1 minute', true);
SELECT ratelimit.reserve_policy('rp.shadow', prl_test.key('shadow'), 2);
SELECT is((SELECT ARRAY[allowed::text, coalesce(reservation_id::text, 'no id')]
             FROM ratelimit.reserve_policy('rp.shadow', prl_test.key('shadow'), 2)),
          ARRAY['true', 'no id'], 'a shadow policy that would deny opens no reservation');

-- 26-27. Counted as check counts; a rolled-back reserve (its savepoint) gives the estimate
-- back to the policy's counter (table engine).
SELECT prl_test.allowed_count('rp.plain') AS allowed_before \gset
SELECT ratelimit.reserve_policy('rp.plain', prl_test.key('counted'), 1);
SELECT is(prl_test.allowed_count('rp.plain') - :allowed_before, 1::bigint,
          'reserve_policy is counted in policy_stats as an allowed call');
SAVEPOINT before_reserve;
SELECT ratelimit.reserve_policy('rp.plain', prl_test.key('rolled'), 4);
ROLLBACK TO SAVEPOINT before_reserve;
SELECT is(prl_test.left('rp.plain', prl_test.key('rolled')), 10,
          'a reserve_policy rolled back charges nothing');

-- 28-31. Bad input: errors naming the argument, nothing charged.
SELECT throws_ok($$SELECT ratelimit.reserve_policy('rp.plain', 'k', -1)$$, '22023',
                 'p_estimate must not be negative (got -1)', 'a negative estimate');
SELECT throws_ok($$SELECT ratelimit.reserve_policy('rp.plain', 'k', NULL)$$, '22004',
                 'p_estimate must not be NULL', 'a NULL estimate');
SELECT throws_ok($$SELECT ratelimit.reserve_policy('rp.nowhere', 'k', 1)$$, '22023',
                 'p_policy: unknown policy "rp.nowhere"', 'an unknown policy');
SELECT throws_ok($$SELECT ratelimit.reserve_policy('rp.plain', 'k', 1, '2 days')$$, '22023',
                 'p_hold must be at most 1 day', 'a hold past a day');

-- 32. A calendar policy's reservation settled after its window ended: the overage is charged
-- in the window holding the settle (Berlin's next day).
INSERT INTO ratelimit.policies (name, "limit", period, time_zone)
VALUES ('rp.daily', 10, '1 day', 'Europe/Berlin');
SELECT prl_test.at('2100-01-01 22:59:50+00');
CREATE TABLE prl_test.daily AS
SELECT * FROM ratelimit.reserve_policy('rp.daily', prl_test.key('daily'), 8);
SELECT prl_test.at('2100-01-01 23:00:10+00');
SELECT is((SELECT ARRAY[remaining::text, reset_after_ms::text]
             FROM ratelimit.settle((SELECT reservation_id FROM prl_test.daily), 12)),
          ARRAY['6', '86390000'], 'the 4 past the estimate are charged to the new day');
SELECT prl_test.at('2100-01-01 00:00:00+00');

-- ---- acquire_policy --------------------------------------------------------------------------

INSERT INTO ratelimit.policies (name, "limit", period, engine, quota_unit)
VALUES ('cp.exports', 2, '10 minutes', 'memory', 'concurrent-requests'),
       ('cp.other', 2, '10 minutes', 'memory', 'concurrent-requests');

-- 33-37. At most the limit in flight; a denial waits for the first lease's maximum hold (the
-- policy's period).
CREATE TABLE prl_test.first AS
SELECT * FROM ratelimit.acquire_policy('cp.exports', prl_test.key('acme'));
CREATE TABLE prl_test.second AS
SELECT * FROM ratelimit.acquire_policy('cp.exports', prl_test.key('acme'));
CREATE TABLE prl_test.third AS
SELECT * FROM ratelimit.acquire_policy('cp.exports', prl_test.key('acme'));
SELECT is((SELECT ARRAY[allowed::text, "limit"::text, in_flight::text, (lease_id > 0)::text]
             FROM prl_test.first),
          ARRAY['true', '2', '1', 'true'], 'the first lease: 1 of 2 in flight');
SELECT is((SELECT in_flight FROM prl_test.second), 2, 'the second: 2 of 2');
SELECT is((SELECT ARRAY[allowed::text, in_flight::text, retry_after_ms::text,
                        coalesce(lease_id::text, 'none')] FROM prl_test.third),
          ARRAY['false', '2', '600000', 'none'],
          'the third is denied, to wait for the first lease''s maximum hold (the period)');
SELECT ok(ratelimit.release((SELECT lease_id FROM prl_test.first)), 'a policy lease is released');
SELECT is((SELECT in_flight FROM ratelimit.acquire_policy('cp.exports', prl_test.key('acme'))), 2,
          'and its slot taken again');

-- 38-40. Key spaces of its own: the same text under another policy, or as a native key.
SELECT is((SELECT ARRAY[allowed::text, in_flight::text]
             FROM ratelimit.acquire_policy('cp.other', prl_test.key('acme'))),
          ARRAY['true', '1'], 'another policy''s leases of the same subject are apart');
SELECT is(ratelimit.in_flight(prl_test.key('acme')), 0, 'a native key of the same text holds none');
SELECT is((SELECT allowed FROM ratelimit.acquire(prl_test.key('acme'), 1)), true,
          'and a native acquire of it is not limited by the policy');

-- 41-42. A transaction lease ends with its transaction (here the savepoint it was taken
-- under); a session lease does not.
SAVEPOINT before_leases;
SELECT ratelimit.acquire_policy('cp.exports', prl_test.key('sp'), 2);
CREATE TABLE prl_test.session_lease AS
SELECT * FROM ratelimit.acquire_policy('cp.other', prl_test.key('sp'), 1, 'session');
ROLLBACK TO SAVEPOINT before_leases;
SELECT is((SELECT in_flight FROM ratelimit.acquire_policy('cp.exports', prl_test.key('sp'), 2)), 2,
          'the transaction lease ended with its savepoint: 2 units free again');
SELECT is((SELECT ARRAY[allowed::text, in_flight::text]
             FROM ratelimit.acquire_policy('cp.other', prl_test.key('sp'), 2)),
          ARRAY['false', '1'], 'the session lease is still held');

-- 43-44. The maximum hold is the policy's period.
SELECT prl_test.at('2100-01-01 00:09:59+00');
SELECT is((SELECT ARRAY[allowed::text, retry_after_ms::text]
             FROM ratelimit.acquire_policy('cp.exports', prl_test.key('acme'))),
          ARRAY['false', '1000'], 'a second before the period ends, still full');
SELECT prl_test.at('2100-01-01 00:10:00+00');
SELECT is((SELECT ARRAY[allowed::text, in_flight::text]
             FROM ratelimit.acquire_policy('cp.exports', prl_test.key('acme'))),
          ARRAY['true', '1'], 'at the period, every lease taken at the start has ended');
SELECT prl_test.at('2100-01-01 00:00:00+00');

-- 45-49. Tiers, overrides and lists.
SELECT is((SELECT "limit" FROM ratelimit.acquire_policy('cp.exports', prl_test.key('gold'),
                                                      p_tier => 'rp-gold')),
          4, 'a tier multiplies the units in flight');
INSERT INTO ratelimit.key_overrides (policy, key, "limit")
VALUES ('cp.exports', prl_test.key('small'), 1);
SELECT is((SELECT ARRAY[a.allowed, b.allowed]
             FROM ratelimit.acquire_policy('cp.exports', prl_test.key('small')) AS a,
                  ratelimit.acquire_policy('cp.exports', prl_test.key('small')) AS b),
          ARRAY[true, false], 'an override of 1: one at a time');
INSERT INTO ratelimit.access_list (action, policy, key)
VALUES ('deny', 'cp.exports', prl_test.key('banned')),
       ('allow', 'cp.exports', prl_test.key('trusted'));
SELECT is((SELECT ARRAY[allowed::text, coalesce(lease_id::text, 'none'),
                        coalesce(in_flight::text, 'none'), coalesce(retry_after_ms::text, 'none')]
             FROM ratelimit.acquire_policy('cp.exports', prl_test.key('banned'))),
          ARRAY['false', 'none', 'none', 'none'], 'a deny entry: denied, nothing held');
SELECT is((SELECT ARRAY[allowed::text, coalesce(lease_id::text, 'none'), "limit"::text,
                        coalesce(in_flight::text, 'none')]
             FROM ratelimit.acquire_policy('cp.exports', prl_test.key('trusted'), 2)),
          ARRAY['true', 'none', '2', 'none'], 'an allow entry: allowed, no lease to release');
SELECT is((SELECT ARRAY[allowed::text, coalesce(lease_id::text, 'none'),
                        coalesce("limit"::text, 'none')]
             FROM ratelimit.acquire_policy('cp.exports', prl_test.key('free'),
                                           p_tier => 'rp-free-pass')),
          ARRAY['true', 'none', 'none'], 'a bypass: allowed, no limit, no lease');

-- 50-51. Counted in policy_stats as check counts.
SELECT prl_test.allowed_count('cp.exports') AS lease_allowed,
       prl_test.denied_count('cp.exports') AS lease_denied \gset
SELECT ratelimit.acquire_policy('cp.exports', prl_test.key('counted'));
SELECT ratelimit.acquire_policy('cp.exports', prl_test.key('counted'), 2);
SELECT is(ARRAY[prl_test.allowed_count('cp.exports') - :lease_allowed,
                prl_test.denied_count('cp.exports') - :lease_denied],
          ARRAY[1, 1]::bigint[], 'one allowed and one denied lease counted');
SELECT is((SELECT allowed FROM ratelimit.acquire_policy('cp.exports', prl_test.key('counted'), 3)),
          false, 'a cost above the limit is denied (cost_exceeds_limit), not an error');

-- 52-56. lease_decision and the HTTP fields, counted in concurrent requests.
SELECT is((SELECT ARRAY[allowed::text, policy, "limit"::text, remaining::text,
                        retry_after_ms::text, reason]
             FROM ratelimit.lease_decision('cp.exports',
                                           ratelimit.acquire_policy('cp.exports', prl_test.key('http')))),
          ARRAY['true', 'cp.exports', '2', '1', '0', 'leased'],
          'an allowed lease as a decision: remaining is the limit less the units in flight');
SELECT is(ratelimit.http_headers(ratelimit.lease_decision('cp.exports',
              ratelimit.acquire_policy('cp.exports', prl_test.key('http')))),
          jsonb_build_object('RateLimit', '"cp.exports";r=0;t=600',
                             'RateLimit-Policy', '"cp.exports";q=2;qu="concurrent-requests";w=600',
                             'X-RateLimit-Limit', '2', 'X-RateLimit-Remaining', '0',
                             'X-RateLimit-Reset', '2100-01-01T00:10:00.000Z'),
          'its headers: qu="concurrent-requests", remaining = limit - in flight');
CREATE TABLE prl_test.full AS
SELECT ratelimit.acquire_policy('cp.exports', prl_test.key('http')) AS lease;
SELECT is(ratelimit.http_headers(ratelimit.lease_decision('cp.exports', f.lease)),
          jsonb_build_object('RateLimit', '"cp.exports";r=0;t=600', 'Retry-After', '600',
                             'RateLimit-Policy', '"cp.exports";q=2;qu="concurrent-requests";w=600',
                             'X-RateLimit-Limit', '2', 'X-RateLimit-Remaining', '0',
                             'X-RateLimit-Reset', '2100-01-01T00:10:00.000Z'),
          'a denial''s Retry-After is the earliest expected release')
  FROM prl_test.full AS f;
SELECT is(ratelimit.http_body(ratelimit.lease_decision('cp.exports', f.lease), 'detailed') ->> 'message',
          'Too many requests. Limit: 2 at once. Try again in 600 seconds.',
          'and its 429 body counts at once, not per period')
  FROM prl_test.full AS f;
SELECT is((SELECT ARRAY[reason, coalesce("limit"::text, 'none'),
                        ratelimit.http_headers(d)::text]
             FROM ratelimit.lease_decision('cp.exports',
                      ratelimit.acquire_policy('cp.exports', prl_test.key('x'),
                                               p_tier => 'rp-free-pass')) AS d),
          ARRAY['bypass', 'none', '{}'], 'a bypass checked no limit: no headers');

-- 57-63. check and the other rate calls refuse a concurrency policy, charging nothing.
SELECT prl_test.allowed_count('cp.exports') AS refused_allowed,
       prl_test.denied_count('cp.exports') AS refused_denied \gset
SELECT throws_ok($$SELECT ratelimit.check('cp.exports', 'k')$$, '0A000',
                 'p_policy: policy "cp.exports" is a concurrency policy (quota_unit concurrent-requests): it limits units in flight, not a rate',
                 'check refuses a concurrency policy');
SELECT throws_ok($$SELECT ratelimit.check_all('{rp.plain,cp.exports}', '{k,k}')$$, '0A000',
                 'p_policies[2]: policy "cp.exports" is a concurrency policy (quota_unit concurrent-requests): it limits units in flight, not a rate',
                 'check_all names the element');
SELECT is(prl_test.left('rp.plain', 'k'), 10, 'and charged none of the call''s other policies');
SELECT throws_ok($$SELECT ratelimit.check_many('cp.exports', '{a,b}')$$, '0A000', NULL,
                 'check_many refuses it');
SELECT throws_ok($$SELECT ratelimit.check_http('{cp.exports}', '{a}')$$, '0A000', NULL,
                 'check_http refuses it');
SELECT throws_ok($$SELECT ratelimit.reserve_policy('cp.exports', 'k', 1)$$, '0A000', NULL,
                 'reserve_policy refuses it');
SELECT is(ARRAY[prl_test.allowed_count('cp.exports') - :refused_allowed,
                prl_test.denied_count('cp.exports') - :refused_denied],
          ARRAY[0, 0]::bigint[], 'the refused calls counted nothing');

-- 64-69. A concurrency policy's columns and routes, and acquire_policy's own arguments.
SELECT throws_ok($$INSERT INTO ratelimit.policies (name, "limit", period, quota_unit)
                   VALUES ('cp.table', 2, '1 minute', 'concurrent-requests')$$, '22023',
                 'policy "cp.table": a concurrency policy (quota_unit concurrent-requests) must have engine memory, where its leases live (got "table")',
                 'a concurrency policy must be on the memory engine');
SELECT throws_ok($$INSERT INTO ratelimit.policies (name, "limit", period, engine, quota_unit, shadow)
                   VALUES ('cp.shadow', 2, '1 minute', 'memory', 'concurrent-requests', true)$$,
                 '22023', NULL, 'and is never a shadow policy');
SELECT throws_ok($$INSERT INTO ratelimit.request_routes (methods, path_pattern, policy)
                   VALUES ('{POST}', '/rpc/export', 'cp.exports')$$, '22023',
                 'policy: "cp.exports" is a concurrency policy (quota_unit concurrent-requests), decided by leases (ratelimit.acquire_policy), not by a route',
                 'no PostgREST route decides a concurrency policy');
INSERT INTO ratelimit.request_routes (methods, path_pattern, policy)
VALUES ('{POST}', '/rpc/plain', 'rp.plain');
SELECT throws_ok($$UPDATE ratelimit.policies SET engine = 'memory', quota_unit = 'concurrent-requests'
                    WHERE name = 'rp.plain'$$, '22023', NULL,
                 'nor does a routed policy become one');
SELECT throws_ok($$SELECT ratelimit.acquire_policy('rp.plain', 'k')$$, '22023',
                 'p_policy: policy "rp.plain" is not a concurrency policy (its quota_unit is not concurrent-requests)',
                 'acquire_policy takes only a concurrency policy');
SELECT throws_ok($$SELECT ratelimit.acquire_policy('cp.exports', 'k', 0)$$, '22023',
                 'p_cost must be at least 1 (got 0)', 'a lease takes at least one unit');

SELECT * FROM finish();
ROLLBACK;
