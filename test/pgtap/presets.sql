-- Presets: a fresh install has no policies or tiers; each preset loads exactly the limits its
-- app states, once (loading it again writes nothing); a row an administrator changed is refused
-- unless p_replace, and a refusal writes nothing; bad names; who may load a preset.
BEGIN;
CREATE EXTENSION IF NOT EXISTS pgtap;

\ir supabase_roles.psql

\ir install_edition.psql

SELECT plan(44);

CREATE SCHEMA preset_test;

-- Everything a preset could write, as one value.
CREATE FUNCTION preset_test.rows() RETURNS jsonb LANGUAGE sql AS $$
    SELECT jsonb_build_array(
        (SELECT jsonb_agg(to_jsonb(p) ORDER BY p.name) FROM ratelimit.policies p),
        (SELECT jsonb_agg(to_jsonb(t) ORDER BY t.name) FROM ratelimit.tiers t))
$$;

-- A policy as "algorithm limit/period", the way the apps state their limits.
CREATE FUNCTION preset_test.limit_of(p_name text) RETURNS text LANGUAGE sql AS $$
    SELECT format('%s %s/%s', algorithm, "limit", period) FROM ratelimit.policies WHERE name = p_name
$$;

------------------------------------------------------------------------------------------------
-- A fresh install
------------------------------------------------------------------------------------------------
SELECT is((SELECT count(*) FROM ratelimit.policies), 0::bigint, 'a fresh install has no policies');
SELECT is((SELECT count(*) FROM ratelimit.tiers), 0::bigint, 'nor tiers');
SELECT results_eq(
    $$SELECT preset COLLATE "default", policies, tiers FROM ratelimit.presets()$$,
    $$VALUES ('game-backend', 14, 0), ('hourly-endpoints', 3, 0), ('payment-flow', 4, 0),
             ('social-activity', 13, 3), ('user-cleanup', 3, 0)$$,
    'presets() lists the five presets and what each writes');
SELECT ok((SELECT bool_and(description <> '') FROM ratelimit.presets()), 'each with a description');

------------------------------------------------------------------------------------------------
-- Each preset: exactly its rows, as the apps state them
------------------------------------------------------------------------------------------------
SELECT is(ratelimit.load_preset('game-backend'), 14, 'game-backend writes 14 policies');
SELECT is(ARRAY(SELECT name FROM ratelimit.policies ORDER BY name),
          ARRAY['rpc.admin', 'rpc.auth', 'rpc.claim-daily-gift', 'rpc.claim_welcome_bonus',
                'rpc.complete-game', 'rpc.credit-gameplay-reward', 'rpc.game', 'rpc.login-with-username-pin',
                'rpc.lootbox-decide', 'rpc.register-with-username-pin', 'rpc.send-dm',
                'rpc.send-friend-request', 'rpc.social', 'rpc.wallet'],
          'the per-RPC policies of the game backend, and nothing else');
SELECT is(preset_test.limit_of('rpc.auth'), 'rolling_window 5/00:15:00', 'AUTH: 5 per 15 minutes');
SELECT is(preset_test.limit_of('rpc.complete-game'), 'rolling_window 20/00:01:00', 'complete-game: 20 per minute');
SELECT is(preset_test.limit_of('rpc.claim_welcome_bonus'), 'rolling_window 5/01:00:00', 'welcome bonus: 5 per hour');
SELECT is((SELECT count(*) FROM ratelimit.tiers), 0::bigint, 'game-backend writes no tier');

SELECT is(ratelimit.load_preset('social-activity'), 16, 'social-activity writes 13 policies and 3 tiers');
SELECT is((SELECT count(*) FROM ratelimit.policies WHERE name LIKE 'activity.%'), 13::bigint, '13 activity policies');
SELECT is(preset_test.limit_of('activity.create_post'), 'fixed_window 10/00:01:00', 'posts: 10 per minute');
SELECT is(preset_test.limit_of('activity.add_comment'), 'fixed_window 60/00:01:00', 'comments: 60 per minute');
SELECT is(preset_test.limit_of('activity.bulk_import'), 'fixed_window 5/00:01:00', 'bulk imports: 5 per minute');
SELECT results_eq($$SELECT name COLLATE "default", multiplier, bypass FROM ratelimit.tiers ORDER BY name$$,
                  $$VALUES ('admin', 1::numeric, true), ('premium', 2, false), ('verified', 1.5, false)$$,
                  'the tiers: premium x2, verified x1.5, admin bypass');

SELECT is(ratelimit.load_preset('hourly-endpoints'), 3, 'hourly-endpoints writes 3 policies');
SELECT is(preset_test.limit_of('endpoint.ai-inference'), 'fixed_window 10/01:00:00', 'AI inference: 10 per hour');
SELECT is(preset_test.limit_of('endpoint.sync-push'), 'fixed_window 50/01:00:00', 'sync-push: 50 per hour');
SELECT is(preset_test.limit_of('endpoint.create-post'), 'fixed_window 5/01:00:00', 'create-post: 5 per hour');

SELECT is(ratelimit.load_preset('payment-flow'), 4, 'payment-flow writes 4 policies');
SELECT is(preset_test.limit_of('lotto.global'), 'sliding_window_counter 1000/00:01:00', 'global: 1000 per minute');
SELECT is(preset_test.limit_of('lotto.ip'), 'sliding_window 100/00:01:00', 'per IP: 100 per minute');
SELECT is(preset_test.limit_of('lotto.invoices'), 'sliding_window 3/00:01:00', 'invoices: 3 per minute');

SELECT is(ratelimit.load_preset('user-cleanup'), 3, 'user-cleanup writes 3 policies');
SELECT is(preset_test.limit_of('cleanup.email'), 'sliding_window 3/01:00:00', 'per e-mail: 3 per hour');
SELECT is(ARRAY(SELECT name FROM ratelimit.policies WHERE hash_key ORDER BY name), ARRAY['cleanup.email', 'cleanup.ip'],
          'IPs and e-mails are hashed, nothing else');

SELECT is((SELECT count(*) FROM ratelimit.policies), 37::bigint, 'the five presets are the 37 policies of 0.5.0');
SELECT is((SELECT count(*) FROM ratelimit.policies
            WHERE engine = 'table' AND burst IS NULL AND NOT count_denied AND NOT shadow AND NOT log_denials),
          37::bigint, 'all on the table engine, enforced, without burst, count_denied or denial logging');
SELECT is((ratelimit.check('rpc.auth', 'preset-user')).remaining, 4, 'a loaded preset decides the next call');

------------------------------------------------------------------------------------------------
-- Loading again, edited rows, p_replace
------------------------------------------------------------------------------------------------
CREATE TABLE preset_test.before AS SELECT preset_test.rows() AS r;
SELECT is((SELECT sum(ratelimit.load_preset(preset)) FROM ratelimit.presets()), 0::bigint,
          'loading every preset again writes nothing');
SELECT is(preset_test.rows(), (SELECT r FROM preset_test.before), 'and changes nothing');

UPDATE ratelimit.policies SET "limit" = 6 WHERE name = 'rpc.auth';
DELETE FROM ratelimit.policies WHERE name = 'rpc.wallet';
TRUNCATE preset_test.before;
INSERT INTO preset_test.before SELECT preset_test.rows();
SELECT throws_ok($$SELECT ratelimit.load_preset('game-backend')$$, '22023',
                 'p_replace: policy "rpc.auth" differs from preset "game-backend"; pass p_replace => true to overwrite it',
                 'an edited limit is refused, naming the row');
SELECT is(preset_test.rows(), (SELECT r FROM preset_test.before),
          'and nothing is written, not even the missing row');

UPDATE ratelimit.tiers SET multiplier = 3 WHERE name = 'premium';
SELECT throws_ok($$SELECT ratelimit.load_preset('social-activity', false)$$, '22023',
                 'p_replace: tier "premium" differs from preset "social-activity"; pass p_replace => true to overwrite it',
                 'an edited tier is refused too');

SELECT is(ratelimit.load_preset('game-backend', p_replace => true), 2, 'p_replace overwrites the edit and adds the missing row');
SELECT is(preset_test.limit_of('rpc.auth'), 'rolling_window 5/00:15:00', 'rpc.auth is the preset''s again');
SELECT is(ratelimit.load_preset('social-activity', true), 1, 'p_replace restores the tier');
SELECT is(ratelimit.load_preset('game-backend', true), 0, 'p_replace writes nothing when nothing differs');

------------------------------------------------------------------------------------------------
-- Bad names
------------------------------------------------------------------------------------------------
SELECT throws_ok($$SELECT ratelimit.load_preset('gaming')$$, '22023', 'p_preset: unknown preset "gaming"',
                 'an unknown preset');
SELECT throws_ok($$SELECT ratelimit.load_preset(NULL)$$, '22004', 'p_preset must not be NULL', 'a NULL preset');
SELECT throws_ok($$SELECT ratelimit.load_preset('game-backend', NULL)$$, '22004', 'p_replace must not be NULL',
                 'a NULL p_replace');

------------------------------------------------------------------------------------------------
-- Privileges: presets are for administrators
------------------------------------------------------------------------------------------------
SELECT ok(NOT has_function_privilege('anon', 'ratelimit.load_preset(text, boolean)', 'EXECUTE')
          AND NOT has_function_privilege('authenticated', 'ratelimit.load_preset(text, boolean)', 'EXECUTE')
          AND NOT has_function_privilege('service_role', 'ratelimit.load_preset(text, boolean)', 'EXECUTE')
          AND NOT has_function_privilege('service_role', 'ratelimit.presets()', 'EXECUTE'),
          'no API role lists or loads presets');
SET LOCAL ROLE service_role;
SELECT throws_ok($$SELECT ratelimit.load_preset('game-backend', true)$$, '42501', NULL,
                 'service_role cannot load a preset');
RESET ROLE;

SELECT * FROM finish();
ROLLBACK;
