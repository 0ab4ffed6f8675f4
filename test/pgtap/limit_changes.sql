-- After a limit change, token_bucket and gcra still decide alike: both keep the units still
-- available (at most the new burst), on every engine, natively and through a policy. The
-- reported sequence: 95 of 100 used in 9 seconds, then a limit of 10.
BEGIN;
CREATE EXTENSION IF NOT EXISTS pgtap;
\ir install_edition.psql
SET LOCAL ratelimit.test_clock = '2030-02-01 00:00:00+00';

SELECT plan(28);
-- The memory engine's 12, skipped on the SQL edition, which has none.
SELECT skip('the SQL edition has no memory engine', 12) WHERE NOT :memory_engine;

-- Memory-engine keys outlive this transaction: each run names its own.
CREATE TEMP TABLE run AS
SELECT 'lc' || pg_backend_pid() || '_' || (extract(epoch FROM clock_timestamp()) * 1e6)::bigint AS prefix;

-- The native calls: 95 of 100, then 10 a period.
SELECT is((SELECT remaining FROM ratelimit.consume(r.prefix || ':' || a || ':' || e, 100, '9 seconds', p_cost => 95,
                                                   p_algorithm => a, p_engine => e)),
          5, format('%s on %s: 95 of 100 leaves 5', a, e))
FROM run r, unnest(ARRAY['token_bucket', 'gcra']) AS a, unnest(ARRAY['table', 'unlogged', 'memory']) AS e
WHERE :memory_engine OR e <> 'memory';
SELECT is((SELECT (d.allowed, d."limit", d.remaining, d.retry_after_ms, d.reset_after_ms)::text
           FROM ratelimit.consume(r.prefix || ':' || a || ':' || e, 10, '9 seconds', p_algorithm => a, p_engine => e) AS d),
          '(t,10,4,0,5400)', format('%s on %s: a limit of 10 keeps the 5 units available: allowed, 4 left', a, e))
FROM run r, unnest(ARRAY['token_bucket', 'gcra']) AS a, unnest(ARRAY['table', 'unlogged', 'memory']) AS e
WHERE :memory_engine OR e <> 'memory';

-- A burst raised, then lowered below what is available: both keep what they hold, at most B.
SELECT is((SELECT (d.allowed, d.remaining)::text
           FROM ratelimit.peek(r.prefix || ':' || a || ':' || e, 10, '9 seconds', 0, a, e, 20) AS d),
          '(t,4)', format('%s on %s: a burst of 20 keeps the 4 units', a, e))
FROM run r, unnest(ARRAY['token_bucket', 'gcra']) AS a, unnest(ARRAY['table', 'memory']) AS e
WHERE :memory_engine OR e <> 'memory';
SELECT is((SELECT (d.allowed, d.remaining)::text
           FROM ratelimit.peek(r.prefix || ':' || a || ':' || e, 10, '9 seconds', 0, a, e, 2) AS d),
          '(t,2)', format('%s on %s: a burst of 2 keeps 2 of them', a, e))
FROM run r, unnest(ARRAY['token_bucket', 'gcra']) AS a, unnest(ARRAY['table', 'memory']) AS e
WHERE :memory_engine OR e <> 'memory';

-- Through a policy, its limit edited between two calls.
INSERT INTO ratelimit.policies (name, algorithm, "limit", period, engine)
SELECT r.prefix || '.' || a || '.' || e, a, 100, '9 seconds', e
FROM run r, unnest(ARRAY['token_bucket', 'gcra']) AS a, unnest(ARRAY['table', 'memory']) AS e
WHERE :memory_engine OR e <> 'memory';
SELECT is((SELECT remaining FROM ratelimit.check(r.prefix || '.' || a || '.' || e, 'subject', 95)), 5,
          format('policy %s on %s: 95 of 100 leaves 5', a, e))
FROM run r, unnest(ARRAY['token_bucket', 'gcra']) AS a, unnest(ARRAY['table', 'memory']) AS e
WHERE :memory_engine OR e <> 'memory';
UPDATE ratelimit.policies SET "limit" = 10 FROM run r WHERE name LIKE r.prefix || '.%';
SELECT is((SELECT (d.allowed, d.remaining, d.retry_after_ms)::text
           FROM ratelimit.check(r.prefix || '.' || a || '.' || e, 'subject') AS d),
          '(t,4,0)', format('policy %s on %s: after the edit to 10, allowed with 4 left', a, e))
FROM run r, unnest(ARRAY['token_bucket', 'gcra']) AS a, unnest(ARRAY['table', 'memory']) AS e
WHERE :memory_engine OR e <> 'memory';

SELECT * FROM finish();
ROLLBACK;
