-- A policy's lookups: the tier and the limit come from the app's data, asked on every call for
-- the subject; the caller's p_tier does not apply to such a policy; a change to the data decides
-- the next call; a NULL answer is no tier, or the policy's limit; an unknown tier, a limit below
-- 1 and a dropped function are errors naming the policy; only STABLE functions of (text, uuid)
-- owned by a superuser or ratelimit's owner are taken.
BEGIN;
CREATE EXTENSION IF NOT EXISTS pgtap;
\ir install_edition.psql

SELECT plan(14);

SET ratelimit.test_clock = '2026-03-01 10:00:00+00';
CREATE TABLE public.profiles (id uuid PRIMARY KEY, tier text, created_at timestamptz NOT NULL);
CREATE TABLE public.token_rates (user_id uuid PRIMARY KEY, per_hour integer);
-- The SQL edition runs a policy's lookups as ratelimit's owner, not as the caller
-- (docs/sql-edition.md, "What is not in it"): the owner reads the app's tables.
SELECT format('GRANT SELECT ON public.profiles, public.token_rates TO %I', nspowner::regrole)
FROM pg_namespace WHERE nspname = 'ratelimit' AND :'sql_edition'::boolean \gexec
INSERT INTO ratelimit.tiers (name, multiplier) VALUES ('pro', 3), ('new_account', 0.5);
INSERT INTO public.profiles VALUES
    ('00000000-0000-4000-8000-000000000001', 'pro', '2020-01-01'),
    ('00000000-0000-4000-8000-000000000002', NULL, '2020-01-01'),
    ('00000000-0000-4000-8000-000000000003', NULL, '2026-03-01 09:00');
INSERT INTO public.token_rates VALUES ('00000000-0000-4000-8000-000000000001', 7);
-- The subscription tier, or for an account younger than a day a lower one.
CREATE FUNCTION public.profile_tier(p_subject text, p_user uuid) RETURNS text LANGUAGE sql STABLE AS $$
    SELECT CASE WHEN p.created_at > ratelimit.clock_now() - interval '1 day' THEN 'new_account' ELSE p.tier END
    FROM public.profiles AS p WHERE p.id = p_user
$$;
CREATE FUNCTION public.token_rate(p_subject text, p_user uuid) RETURNS integer LANGUAGE sql STABLE AS $$
    SELECT r.per_hour FROM public.token_rates AS r WHERE r.user_id::text = p_subject
$$;
INSERT INTO ratelimit.policies (name, "limit", period, tier_lookup)
VALUES ('lookups.api', 10, '1 hour', 'public.profile_tier(text,uuid)');
INSERT INTO ratelimit.policies (name, "limit", period, limit_lookup)
VALUES ('lookups.tokens', 1, '1 hour', 'public.token_rate(text,uuid)');

SELECT is((ratelimit.check('lookups.api', 'a', p_user => '00000000-0000-4000-8000-000000000001'))."limit", 30,
          'the subscription tier from profiles: pro, 3 x 10');
SELECT is((ratelimit.check('lookups.api', 'b', p_user => '00000000-0000-4000-8000-000000000002', p_tier => 'pro'))."limit", 10,
          'a caller that passes p_tier pro gets the tier its profile has: none');
SELECT is((ratelimit.check('lookups.api', 'c', p_user => '00000000-0000-4000-8000-000000000003'))."limit", 5,
          'an account younger than a day: the lower tier');
SELECT is((ratelimit.check('lookups.api', 'd'))."limit", 10, 'no user: the lookup answers NULL, no tier');
SELECT is((ratelimit.check('lookups.tokens', '00000000-0000-4000-8000-000000000001'))."limit", 7,
          'a per-user hourly rate from token_rates');
SELECT is((ratelimit.check('lookups.tokens', '00000000-0000-4000-8000-000000000009'))."limit", 1,
          'a user without a rate: the policy''s limit');
UPDATE public.token_rates SET per_hour = 9;
SELECT is((ratelimit.check('lookups.tokens', '00000000-0000-4000-8000-000000000001'))."limit", 9,
          'the rate changed: the next call decides with it');
SELECT is((ratelimit.check('lookups.tokens', '00000000-0000-4000-8000-000000000001'))."remaining", 6,
          'the counts go on under the new limit: 3 of 9 used');

UPDATE public.profiles SET tier = 'gold' WHERE id = '00000000-0000-4000-8000-000000000001';
SELECT throws_ok($$SELECT ratelimit.check('lookups.api', 'a', p_user => '00000000-0000-4000-8000-000000000001')$$,
                 '22023', 'p_policy: policy "lookups.api"''s tier_lookup gave an unknown tier "gold"', 'an unknown tier is an error');
UPDATE public.token_rates SET per_hour = 0;
SELECT throws_ok($$SELECT ratelimit.check('lookups.tokens', '00000000-0000-4000-8000-000000000001')$$,
                 '22023', 'p_policy: policy "lookups.tokens"''s limit_lookup gave a limit of 0 (at least 1)', 'a limit of 0 is an error');
DROP FUNCTION public.token_rate(text, uuid);
SELECT throws_ok($$SELECT ratelimit.check('lookups.tokens', 'x')$$,
                 '22023', 'p_policy: policy "lookups.tokens"''s limit_lookup function no longer exists', 'a dropped lookup is an error');

CREATE FUNCTION public.writes(p_subject text, p_user uuid) RETURNS text LANGUAGE sql AS 'SELECT NULL::text';
SELECT throws_ok($$UPDATE ratelimit.policies SET tier_lookup = 'public.writes(text,uuid)' WHERE name = 'lookups.api'$$,
                 '22023', 'policy "lookups.api": tier_lookup: public.writes(text,uuid) must be STABLE or IMMUTABLE: a lookup reads, it never writes',
                 'a VOLATILE lookup is refused');
SELECT throws_ok($$UPDATE ratelimit.policies SET limit_lookup = 'public.profile_tier(text,uuid)' WHERE name = 'lookups.api'$$,
                 '22023', 'policy "lookups.api": limit_lookup: public.profile_tier(text,uuid) must take (p_subject text, p_user uuid) and return one integer',
                 'a lookup of the wrong result type is refused');
SELECT is((SELECT tier_lookup FROM ratelimit.policies WHERE name = 'lookups.api'), 'public.profile_tier(text,uuid)',
          'and the policy is left as it was');

SELECT * FROM finish();
ROLLBACK;
