-- The caller as auth.uid() sees it, from request.jwt.claims parsed by PostgreSQL's own JSON
-- parser: the top-level "sub" (escapes decoded, the last of repeated names, nested ones
-- ignored); null or no sub is anonymous; anything that is not a JSON object, or a sub that is
-- not a UUID, is an error naming the setting, never an anonymous caller.
BEGIN;
CREATE EXTENSION IF NOT EXISTS pgtap;
\ir install_edition.psql
\set drop_in rpc_limits
\ir install_drop_in.psql

SELECT plan(19);

CREATE FUNCTION pg_temp.caller_of(p_claims text) RETURNS uuid LANGUAGE plpgsql AS $$
BEGIN
    PERFORM set_config('request.jwt.claims', p_claims, true);
    DELETE FROM public.rpc_rate_limits;
    PERFORM public.check_rate_limit(p_rpc_name => 'claims-test', p_max_calls => 10, p_window_minutes => 1);
    RETURN (SELECT user_id FROM public.rpc_rate_limits);
END
$$;

SELECT is(pg_temp.caller_of('{"role":"authenticated","sub":"a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11"}'),
          'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11'::uuid, 'the sub of the claims');
SELECT is(pg_temp.caller_of('{"s\u0075b":"A0EEBC99-9C0B-4EF8-BB6D-6BB9BD380A11"}'),
          'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11'::uuid, 'an escaped member name, an upper-case UUID');
SELECT is(pg_temp.caller_of('{"app_metadata":{"sub":"00000000-0000-0000-0000-000000000001"},'
                            '"sub":"00000000-0000-0000-0000-000000000002","x":[1,{"sub":3}],'
                            '"sub":"a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11"}'),
          'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11'::uuid, 'nested subs ignored, the last top-level sub wins');
SELECT is(pg_temp.caller_of('{"sub":"a0eebc99\u002d9c0b-4ef8-bb6d-6bb9bd380a11"}'),
          'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11'::uuid, 'an escape inside the value');
SELECT is(pg_temp.caller_of('{"role":"anon"}'), NULL, 'no sub: anonymous, nothing counted');
SELECT is(pg_temp.caller_of('{"sub":null}'), NULL, 'a null sub: anonymous');
SELECT is(pg_temp.caller_of('{"a":' || repeat('[', 50) || repeat(']', 50) || ',"sub":"a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11"}'),
          'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11'::uuid, 'claims nested 50 deep are read');

SELECT throws_ok(format('SELECT pg_temp.caller_of(%L)', c), '22023', 'request.jwt.claims must be a JSON object', why)
FROM (VALUES ('[]', 'an array'), ('"sub"', 'a string'), ('{', 'an unclosed object'),
             ('{"sub":"x"} trailing', 'trailing text'), ('{"sub":"x",}', 'a trailing comma'),
             ('{sub:"x"}', 'an unquoted name'), ('{"sub":01}', 'a number with a leading zero'),
             ('{"a":' || repeat('[', 600) || repeat(']', 600) || '}', 'claims nested 600 deep')) AS v(c, why);
SELECT throws_ok(format('SELECT pg_temp.caller_of(%L)', c), '22023',
                 'request.jwt.claims has a "sub" claim that is not a UUID', why)
FROM (VALUES ('{"sub":"nope"}', 'a sub that is no UUID'),
             ('{"sub":"auth0|5f1c6d1e2a3b4c5d6e7f8091"}', 'an Auth0 sub, where a uuid is kept')) AS v(c, why);
SELECT throws_ok(format('SELECT pg_temp.caller_of(%L)', c), '22023',
                 'request.jwt.claims has a "sub" claim that is not a string or null', why)
FROM (VALUES ('{"sub":42}', 'a number'),
             ('{"sub":["a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11"]}', 'an array')) AS v(c, why);

SELECT * FROM finish();
ROLLBACK;
