-- The memory engine (p_engine => 'memory'; the test server preloads the library): the same
-- decisions as the table engine for the same calls, and what makes it different: it is not
-- transactional, it works in read-only transactions, sliding_window takes any limit (long logs
-- go to log blocks) and decides like the table engine, and it counts what it does, per
-- database too. (A full store is tested on clusters of its own: test/memory/lifecycle.sh.)
--
-- The store lives in shared memory for the server's lifetime, not in this transaction: every
-- key below carries a prefix unique to this run, and nothing assumes an empty store.
BEGIN;
CREATE EXTENSION IF NOT EXISTS pgtap;
CREATE EXTENSION ratelimit;
SET LOCAL timezone = 'UTC';

SELECT plan(50);

CREATE SCHEMA memory_test;

CREATE TABLE memory_test.run AS
SELECT 'pgtap-' || pg_backend_pid() || '-' || (extract(epoch FROM clock_timestamp()) * 1e6)::bigint
           AS prefix;

CREATE FUNCTION memory_test.key(p_name text) RETURNS text LANGUAGE sql
AS $$SELECT prefix || ':' || p_name FROM memory_test.run$$;

-- T0 is in the future on purpose: the engine's worker frees keys by the real clock, and must
-- not free these while the test clock says they still count.
CREATE FUNCTION memory_test.at_ms(p_ms bigint) RETURNS void LANGUAGE sql
AS $$SELECT set_config('ratelimit.test_clock',
                       (timestamptz '2100-01-01 00:00:00+00' + (p_ms || ' milliseconds')::interval)::text,
                       true)$$;

-- 240 calls on one key: time moves forward by 40 ms a step with jitter that sometimes steps
-- back, costs 0 to 3, peeks and refunds among the consumes, a block half way and a reset at
-- step 180. Returns every answer, to be compared between engines.
CREATE FUNCTION memory_test.sequence(p_algorithm text, p_engine text)
RETURNS TABLE(step integer, allowed boolean, remaining integer, retry_after_ms bigint,
              reset_after_ms bigint, other text)
LANGUAGE plpgsql AS $$
DECLARE
    k constant text := memory_test.key(p_algorithm || '-' || p_engine);
    burst constant integer := CASE WHEN p_algorithm IN ('token_bucket', 'gcra') THEN 4 END;
    d ratelimit.decision;
    cost integer;
BEGIN
    FOR i IN 1..240 LOOP
        PERFORM memory_test.at_ms(i * 40 + (i * 7919) % 97 - 48);
        cost := (i * 31) % 4;
        step := i;
        other := NULL;
        IF i = 120 THEN
            other := ratelimit.block(k, interval '300 milliseconds', p_engine)::text;
            d := NULL;
        ELSIF i = 180 THEN
            other := ratelimit.reset(k, p_engine)::text;
            d := NULL;
        ELSIF i % 11 = 3 THEN
            d := ratelimit.peek(k, 5, interval '1 second', cost, p_algorithm, p_engine, burst);
        ELSIF i % 11 = 7 THEN
            d := ratelimit.refund(k, 5, interval '1 second', cost, p_algorithm, p_engine, burst);
        ELSE
            d := ratelimit.consume(k, 5, interval '1 second', cost, p_algorithm, p_engine, burst);
        END IF;
        allowed := d.allowed;
        remaining := d.remaining;
        retry_after_ms := d.retry_after_ms;
        reset_after_ms := d.reset_after_ms;
        RETURN NEXT;
    END LOOP;
END
$$;

------------------------------------------------------------------------------------------------
-- Same decisions as the table engine, every algorithm.
------------------------------------------------------------------------------------------------
SELECT results_eq(
    format('SELECT * FROM memory_test.sequence(%L, ''memory'') ORDER BY step', algorithm),
    format('SELECT * FROM memory_test.sequence(%L, ''table'') ORDER BY step', algorithm),
    algorithm || ': 240 calls decide the same on the memory and the table engine')
FROM unnest(ARRAY['fixed_window', 'rolling_window', 'sliding_window', 'sliding_window_counter',
                  'token_bucket', 'gcra']) AS algorithm;

-- The sequences are not trivial: each algorithm both allowed and denied calls.
SELECT ok(bool_or(allowed) AND bool_or(NOT allowed), algorithm || ': the sequence allows and denies')
FROM unnest(ARRAY['fixed_window', 'rolling_window', 'sliding_window', 'sliding_window_counter',
                  'token_bucket', 'gcra']) AS algorithm,
     LATERAL memory_test.sequence(algorithm, 'memory') AS s
GROUP BY algorithm ORDER BY algorithm;

------------------------------------------------------------------------------------------------
-- sliding_window with any limit: logs longer than a slot holds go to log blocks, and the
-- decisions are the table engine's, log merges included (400 calls, 9 ms apart with jitter that
-- sometimes steps back, over a 1-second period: up to ~110 distinct instants per window).
------------------------------------------------------------------------------------------------
CREATE FUNCTION memory_test.sliding(p_limit integer, p_engine text)
RETURNS TABLE(step integer, allowed boolean, remaining integer, retry_after_ms bigint,
              reset_after_ms bigint)
LANGUAGE plpgsql AS $$
DECLARE
    k constant text := memory_test.key('sliding-' || p_limit || '-' || p_engine);
    unit constant integer := greatest(1, p_limit / 40);
    d ratelimit.decision;
    cost integer;
BEGIN
    FOR i IN 1..400 LOOP
        PERFORM memory_test.at_ms(300000 + i * 9 + (i * 7919) % 23 - 11);
        cost := unit * ((i * 31) % 4);
        step := i;
        IF i % 13 = 5 THEN
            d := ratelimit.refund(k, p_limit, interval '1 second', cost, 'sliding_window', p_engine);
        ELSIF i % 13 = 9 THEN
            d := ratelimit.peek(k, p_limit, interval '1 second', cost, 'sliding_window', p_engine);
        ELSE
            d := ratelimit.consume(k, p_limit, interval '1 second', cost, 'sliding_window', p_engine);
        END IF;
        allowed := d.allowed;
        remaining := d.remaining;
        retry_after_ms := d.retry_after_ms;
        reset_after_ms := d.reset_after_ms;
        RETURN NEXT;
    END LOOP;
END
$$;

CREATE TEMP TABLE blocks_before AS SELECT log_blocks_used FROM ratelimit.memory_stats;
SELECT results_eq(
    format('SELECT * FROM memory_test.sliding(%s, ''memory'') ORDER BY step', n),
    format('SELECT * FROM memory_test.sliding(%s, ''table'') ORDER BY step', n),
    'sliding_window, limit ' || n || ': 400 calls decide the same on the memory and the table engine')
FROM unnest(ARRAY[10, 1000, 100000]) AS n;
SELECT ok(bool_or(allowed) AND bool_or(NOT allowed),
          'sliding_window, limit ' || n || ': the sequence allows and denies')
FROM unnest(ARRAY[10, 1000, 100000]) AS n, LATERAL memory_test.sliding(n, 'memory') AS s
GROUP BY n ORDER BY n;
SELECT cmp_ok((SELECT log_blocks_used FROM ratelimit.memory_stats), '>=',
              (SELECT log_blocks_used + 2 FROM blocks_before),
              'the long logs live in log blocks');
SELECT is(ratelimit.reset(memory_test.key('sliding-100000-memory'), 'memory'), true,
          'reset forgets a key with a log block');
SELECT lives_ok($$SELECT ratelimit.validate_limit(100000, '1 minute', 'sliding_window', 'memory')$$,
                'validate_limit accepts sliding_window of any limit on memory');

------------------------------------------------------------------------------------------------
-- Not transactional: a rolled-back decision stays made; the table engine's does not.
------------------------------------------------------------------------------------------------
SELECT memory_test.at_ms(100000);
SAVEPOINT before_calls;
SELECT ratelimit.consume(memory_test.key('rollback'), 3, '1 minute', p_engine => 'memory');
SELECT ratelimit.consume(memory_test.key('rollback'), 3, '1 minute', p_engine => 'table');
ROLLBACK TO SAVEPOINT before_calls;
SELECT memory_test.at_ms(100000);
SELECT is((ratelimit.peek(memory_test.key('rollback'), 3, '1 minute', p_engine => 'memory')).remaining,
          2, 'memory: a decision survives the rollback of its transaction');
SELECT is((ratelimit.peek(memory_test.key('rollback'), 3, '1 minute', p_engine => 'table')).remaining,
          3, 'table: the same decision is rolled back');

------------------------------------------------------------------------------------------------
-- Read-only transactions: the memory engine decides, the table engines refuse to write.
------------------------------------------------------------------------------------------------
SAVEPOINT read_only;
SET LOCAL transaction_read_only = on;
SELECT is((ratelimit.consume(memory_test.key('read-only'), 3, '1 minute', p_engine => 'memory')).remaining,
          2, 'memory: consume works in a read-only transaction');
SELECT is((ratelimit.consume(memory_test.key('read-only'), 3, '1 minute', p_engine => 'memory')).remaining,
          1, 'memory: and counts there');
SELECT throws_ok(format('SELECT ratelimit.consume(%L, 3, ''1 minute'', p_engine => ''table'')',
                        memory_test.key('read-only')),
                 '25006', NULL, 'table: consume is refused in a read-only transaction');
ROLLBACK TO SAVEPOINT read_only;

------------------------------------------------------------------------------------------------
-- Block and reset.
------------------------------------------------------------------------------------------------
SELECT memory_test.at_ms(200000);
SELECT is(ratelimit.block(memory_test.key('blocked'), '2 seconds', 'memory'),
          timestamptz '2100-01-01 00:03:22+00', 'block returns the end of the block');
SELECT is(ratelimit.block(memory_test.key('blocked'), '1 second', 'memory'),
          timestamptz '2100-01-01 00:03:22+00', 'a shorter block leaves the longer one');
SELECT is((SELECT row(allowed, retry_after_ms)::text
           FROM ratelimit.consume(memory_test.key('blocked'), 3, '1 minute', p_engine => 'memory')),
          '(f,2000)', 'a blocked key is denied until the block ends');
SELECT is(ratelimit.reset(memory_test.key('blocked'), 'memory'), true, 'reset forgets a key');
SELECT is(ratelimit.reset(memory_test.key('blocked'), 'memory'), false, 'reset of an unknown key says so');
SELECT is((ratelimit.consume(memory_test.key('blocked'), 3, '1 minute', p_engine => 'memory')).remaining,
          2, 'after a reset the key starts afresh');

------------------------------------------------------------------------------------------------
-- Stats.
------------------------------------------------------------------------------------------------
CREATE TEMP TABLE stats_before AS SELECT * FROM ratelimit.memory_stats;
SELECT ratelimit.consume(memory_test.key('stats'), 2, '1 minute', p_engine => 'memory')
FROM generate_series(1, 5);
SELECT ratelimit.peek(memory_test.key('stats'), 2, '1 minute', p_engine => 'memory');
SELECT is((SELECT a.allowed - b.allowed FROM ratelimit.memory_stats a, stats_before b), 2::bigint,
          'stats count the allowed consume calls');
SELECT is((SELECT a.denied - b.denied FROM ratelimit.memory_stats a, stats_before b), 3::bigint,
          'stats count the denied consume calls (a peek is not a decision)');
SELECT is((SELECT a.entries - b.entries FROM ratelimit.memory_stats a, stats_before b), 1::bigint,
          'one more key is tracked');
SELECT is(capacity, 100000::bigint, 'capacity is ratelimit.memory_capacity') FROM ratelimit.memory_stats;
SELECT is(log_blocks, 3125::bigint, 'log blocks: one per 32 keys by default') FROM ratelimit.memory_stats;
SELECT cmp_ok((shared_bytes - log_blocks * 1024)::numeric / capacity, '<=', 128::numeric,
              'at most 128 bytes of shared memory per key, all overhead included, plus 1 kB per log block')
FROM ratelimit.memory_stats;
SELECT ok(entries <= capacity, 'entries never exceed capacity') FROM ratelimit.memory_stats;
SELECT ok(evictions = 0 AND refusals = 0 AND full_partitions = 0,
          'nothing evicted or refused while the store has room') FROM ratelimit.memory_stats;

------------------------------------------------------------------------------------------------
-- Per database, and its settings.
------------------------------------------------------------------------------------------------
SELECT is((SELECT entries > 0 AND share_limit = 100000 AND database_oid = (SELECT oid FROM pg_database
                                                                           WHERE datname = current_database())
           FROM ratelimit.memory_stats_by_database() WHERE database = current_database()), true,
          'memory_stats_by_database: this database''s keys, and its share (all of the store by default)');
SELECT is((SELECT sum(entries)::bigint FROM ratelimit.memory_stats_by_database()),
          (SELECT entries FROM ratelimit.memory_stats), 'the databases'' keys add up to the store''s');
CREATE ROLE memory_test_reader;
GRANT USAGE ON SCHEMA ratelimit TO memory_test_reader;
GRANT EXECUTE ON FUNCTION ratelimit.memory_stats_by_database() TO memory_test_reader;
SET LOCAL ROLE memory_test_reader;
SELECT is((SELECT array_agg(database) FROM ratelimit.memory_stats_by_database()),
          ARRAY[current_database()::name], 'without pg_read_all_stats, a caller sees its own database only');
SELECT throws_ok('SET ratelimit.memory_when_full = evict', '42501',
                 'permission denied to set parameter "ratelimit.memory_when_full"',
                 'a caller cannot choose what a full store does to its own calls');
RESET ROLE;
SELECT is(current_setting('ratelimit.memory_when_full'), 'deny', 'a full store denies by default');
SELECT throws_ok('SET ratelimit.memory_database_share = 50', '55P02', NULL,
                 'memory_database_share is set for the whole server (reload)');

------------------------------------------------------------------------------------------------
-- Bad calls change nothing and say what is wrong.
------------------------------------------------------------------------------------------------
SELECT throws_ok(format('SELECT ratelimit.consume(%L, 5, ''1 minute'', p_engine => ''Memory'')',
                        memory_test.key('bad')),
                 '22023', 'p_engine must be one of table, unlogged, memory (got "Memory")',
                 'engine names are exact');
SELECT throws_ok('SELECT ratelimit.consume(NULL, 5, ''1 minute'', p_engine => ''memory'')',
                 '22004', 'p_key must not be NULL', 'a NULL key is refused');
SELECT is((SELECT (d.allowed, d.retry_after_ms)::text
           FROM ratelimit.consume(memory_test.key('bad'), 5, '1 minute', 6, p_engine => 'memory') AS d),
          '(f,)', 'a cost above the limit is denied for good (no retry time)');
SELECT is((ratelimit.peek(memory_test.key('bad'), 5, '1 minute', p_engine => 'memory')).remaining,
          5, 'the bad calls left no state behind');

SELECT * FROM finish();
ROLLBACK;
