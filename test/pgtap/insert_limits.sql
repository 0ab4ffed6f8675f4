-- limit_inserts: at most N rows per key per period in a table, enforced by a BEFORE trigger in the
-- inserting transaction: the app's SQLSTATE and message with a retry hint; a rolled-back insert
-- gives its charge back; a back-dated timestamp changes nothing; a statement over the limit
-- inserts nothing; the rows already there counted; updates counted when asked; keyed by columns
-- or by the JWT's sub; dropped cleanly. within_limit: a policy's limit inside row level security,
-- keyed by the caller's sub, or an anonymous caller's address.
BEGIN;
CREATE EXTENSION IF NOT EXISTS pgtap;
\ir install_edition.psql

SELECT plan(27);

\ir supabase_roles.psql
SET ratelimit.test_clock = '2026-03-01 10:00:00+00';

CREATE SCHEMA app;
CREATE TABLE app.posts (
    id serial PRIMARY KEY,
    user_id uuid NOT NULL,
    body text,
    created_at timestamptz NOT NULL DEFAULT '2026-03-01 10:00:00+00');

SELECT is(ratelimit.limit_inserts('app.posts', 3, '1 hour', ARRAY['column:user_id'],
                                  p_error_code => 'P0429', p_error_message => 'Too many posts'),
          'ratelimit_inserts on app.posts', 'limit_inserts: 3 rows per user per hour');
SELECT lives_ok($$INSERT INTO app.posts (user_id, body)
                  SELECT 'aaaaaaaa-0000-4000-8000-000000000001', 'post ' || g FROM generate_series(1, 3) AS g$$,
                'three rows of one user');
SELECT throws_ok($$INSERT INTO app.posts (user_id, body) VALUES ('aaaaaaaa-0000-4000-8000-000000000001', 'fourth')$$,
                 'P0429', 'Too many posts', 'the fourth: the app''s SQLSTATE and message');
CREATE FUNCTION pg_temp.hint_of(p_sql text) RETURNS text LANGUAGE plpgsql AS $$
DECLARE
    hint text;
BEGIN
    EXECUTE p_sql;
    RETURN NULL;
EXCEPTION WHEN OTHERS THEN
    GET STACKED DIAGNOSTICS hint = PG_EXCEPTION_HINT;
    RETURN hint;
END
$$;
SELECT is(pg_temp.hint_of($$INSERT INTO app.posts (user_id, body) VALUES ('aaaaaaaa-0000-4000-8000-000000000001', 'x')$$),
          'Retry after 3600 seconds.', 'and a hint with the retry time');
SELECT throws_ok($$INSERT INTO app.posts (user_id, body, created_at)
                   VALUES ('aaaaaaaa-0000-4000-8000-000000000001', 'back-dated', '2020-01-01')$$,
                 'P0429', 'Too many posts', 'a row back-dated by its writer is counted now, all the same');
SELECT is((SELECT count(*) FROM app.posts WHERE user_id = 'aaaaaaaa-0000-4000-8000-000000000001'), 3::bigint,
          'no denied row was inserted');
SELECT lives_ok($$INSERT INTO app.posts (user_id, body) VALUES ('bbbbbbbb-0000-4000-8000-000000000002', 'other user')$$,
                'another user has its own count');

-- A rolled-back insert gives its charge back.
SAVEPOINT before_rollback;
INSERT INTO app.posts (user_id, body) SELECT 'cccccccc-0000-4000-8000-000000000003', 'x' FROM generate_series(1, 3);
ROLLBACK TO SAVEPOINT before_rollback;
SELECT lives_ok($$INSERT INTO app.posts (user_id, body)
                  SELECT 'cccccccc-0000-4000-8000-000000000003', 'y' FROM generate_series(1, 3)$$,
                'three rows rolled back, then three more: all allowed');
-- A statement over the limit inserts nothing.
SELECT throws_ok($$INSERT INTO app.posts (user_id, body)
                   SELECT 'dddddddd-0000-4000-8000-000000000004', 'z' FROM generate_series(1, 5)$$,
                 'P0429', 'Too many posts', 'five rows in one statement: refused');
SELECT is((SELECT count(*) FROM app.posts WHERE user_id = 'dddddddd-0000-4000-8000-000000000004'), 0::bigint,
          'and none of them inserted');
SELECT lives_ok($$INSERT INTO app.posts (user_id, body)
                  SELECT 'dddddddd-0000-4000-8000-000000000004', 'z' FROM generate_series(1, 3)$$,
                'the refused statement charged nothing');
SELECT ok((SELECT tgtype & 16 = 0 FROM pg_trigger WHERE tgrelid = 'app.posts'::regclass AND tgname = 'ratelimit_inserts'),
          'updates are not counted unless asked');

-- The rows already there: a limiter that counted rows keeps its counts.
CREATE TABLE app.comments (id serial, author uuid, created_at timestamptz NOT NULL);
INSERT INTO app.comments (author, created_at) VALUES
    ('eeeeeeee-0000-4000-8000-000000000005', '2026-03-01 09:30:00+00'),
    ('eeeeeeee-0000-4000-8000-000000000005', '2026-03-01 09:50:00+00'),
    ('eeeeeeee-0000-4000-8000-000000000005', '2026-03-01 08:00:00+00');
SELECT is(ratelimit.limit_inserts('app.comments', 3, '1 hour', ARRAY['column:author'], p_count_existing => 'created_at',
                                  p_on_update => true),
          'ratelimit_inserts on app.comments, 2 existing rows counted', 'the two rows of the last hour counted');
SELECT lives_ok($$INSERT INTO app.comments (author, created_at) VALUES ('eeeeeeee-0000-4000-8000-000000000005', '2026-03-01 10:00:00+00')$$,
                'one more is allowed');
SELECT throws_ok($$INSERT INTO app.comments (author, created_at) VALUES ('eeeeeeee-0000-4000-8000-000000000005', '2026-03-01 10:00:00+00')$$,
                 'P0001', 'rate limit exceeded: at most 3 rows per 01:00:00 in app.comments', 'the next is not (the default error)');
SELECT throws_ok($$UPDATE app.comments SET created_at = created_at WHERE created_at = '2026-03-01 08:00:00+00'$$,
                 'P0001', NULL, 'p_on_update: an update is counted too');

-- Keyed by the caller: the JWT's sub, never a column the client writes.
CREATE TABLE app.messages (id serial, sender uuid, body text);
GRANT USAGE ON SCHEMA app TO authenticated;
GRANT INSERT ON app.messages TO authenticated;
GRANT USAGE ON SEQUENCE app.messages_id_seq TO authenticated;
SELECT lives_ok($$SELECT ratelimit.limit_inserts('app.messages', 2, '1 minute')$$, 'keyed by the caller (the default)');
SET ROLE authenticated;
SET request.jwt.claims = '{"sub": "ffffffff-0000-4000-8000-000000000006", "role": "authenticated"}';
SELECT lives_ok($$INSERT INTO app.messages (sender, body) VALUES ('11111111-0000-4000-8000-000000000000', 'a'), ('22222222-0000-4000-8000-000000000000', 'b')$$,
                'two messages, whatever sender they claim');
SELECT throws_ok($$INSERT INTO app.messages (sender, body) VALUES ('33333333-0000-4000-8000-000000000000', 'c')$$,
                 'P0001', NULL, 'the third is refused: the caller is counted, not the column');
SET request.jwt.claims = '{"role": "anon"}';
SELECT throws_ok($$INSERT INTO app.messages (body) VALUES ('d')$$, '42501',
                 'inserting into app.messages needs a signed-in caller (a JWT sub claim)', 'no sub: refused');
RESET ROLE;
RESET request.jwt.claims;

-- Dropped.
SELECT lives_ok($$SELECT ratelimit.drop_insert_limit('app.posts')$$, 'drop_insert_limit');
SELECT lives_ok($$INSERT INTO app.posts (user_id, body) VALUES ('aaaaaaaa-0000-4000-8000-000000000001', 'unlimited')$$,
                'the table takes rows again without a limit');
SELECT ok(to_regprocedure('app.posts_ratelimit_inserts()') IS NULL, 'the trigger function is gone');

-- within_limit in a row level security policy.
INSERT INTO ratelimit.policies (name, "limit", period) VALUES ('app.reactions', 2, '1 minute');
CREATE TABLE app.reactions (id serial, post integer);
ALTER TABLE app.reactions ENABLE ROW LEVEL SECURITY;
CREATE POLICY reactions_rate ON app.reactions FOR INSERT TO authenticated, anon
    WITH CHECK (ratelimit.within_limit('app.reactions'));
GRANT USAGE ON SCHEMA app TO anon;
GRANT INSERT ON app.reactions TO authenticated, anon;
GRANT USAGE ON SEQUENCE app.reactions_id_seq TO authenticated, anon;
SET ROLE authenticated;
SET request.jwt.claims = '{"sub": "77777777-0000-4000-8000-000000000007", "role": "authenticated"}';
SELECT lives_ok($$INSERT INTO app.reactions (post) VALUES (1), (2)$$, 'within_limit: two rows, one count each');
SELECT throws_ok($$INSERT INTO app.reactions (post) VALUES (3)$$, '42501', NULL,
                 'the third violates the row security policy');
SET ROLE anon;
SET request.jwt.claims = '{"role": "anon"}';
SET request.headers = '{"x-forwarded-for": "203.0.113.9"}';
SELECT lives_ok($$INSERT INTO app.reactions (post) VALUES (4), (5)$$, 'anon: counted by its address');
SELECT throws_ok($$INSERT INTO app.reactions (post) VALUES (6)$$, '42501', NULL, 'and limited by it');
RESET ROLE;
RESET request.jwt.claims;
RESET request.headers;

SELECT * FROM finish();
ROLLBACK;
