-- Cleanup scheduling against the real pg_cron (preloaded by test/run.sh, whose
-- cron.database_name is this database, postgres). Not wrapped in a transaction: the schedule
-- and the counters must be committed for pg_cron's job runners to see them. The three apps'
-- drop-ins: the per-RPC and endpoint limits in public, the sliding window's in a schema of their
-- own, whose job names that schema.
\set ON_ERROR_STOP 1
\set QUIET 1
SET client_min_messages = warning;
CREATE EXTENSION IF NOT EXISTS pgtap;
CREATE EXTENSION IF NOT EXISTS pg_cron;
DROP EXTENSION IF EXISTS ratelimit CASCADE;
DROP SCHEMA IF EXISTS sliding_window;
CREATE EXTENSION ratelimit;

SELECT plan(17);

-- Without a drop-in extension, only the native key states have a cleanup job.
SELECT is(ARRAY(SELECT job_name FROM ratelimit.cleanup_jobs()), ARRAY['ratelimit-cleanup-key-state'],
          'ratelimit alone lists the key state''s cleanup only');

CREATE EXTENSION ratelimit_rpc_limits;
CREATE EXTENSION ratelimit_endpoint_limits;
CREATE SCHEMA sliding_window;
CREATE EXTENSION ratelimit_sliding_window_limits SCHEMA sliding_window;

-- Counters whose windows ended long ago (test clock in 2020), and live ones (real clock).
\o /dev/null
SET ratelimit.test_clock = '2020-01-01 00:00:00+00';
SELECT check_rate_limit_for_user('a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11', 'old', 5, 1);
SELECT increment_rate_limit('a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11', 'old', 5, 60);
SELECT * FROM sliding_window.check_rate_limit('old', 5, 60, 1);
SELECT * FROM ratelimit.consume('old', 5, '1 minute');
SELECT * FROM ratelimit.consume('old', 5, '1 minute', p_engine => 'unlogged');
RESET ratelimit.test_clock;
SELECT check_rate_limit_for_user('a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11', 'live', 5, 1440);
SELECT increment_rate_limit('a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11', 'live', 5, 86400);
SELECT * FROM sliding_window.check_rate_limit('live', 5, 3600, 1);
SELECT * FROM ratelimit.consume('live', 5, '1 day', p_algorithm => 'sliding_window');
SELECT * FROM ratelimit.consume('live', 5, '1 day', p_engine => 'unlogged');
\o

SELECT is((SELECT count(*)::integer FROM ratelimit.schedule_cleanup('* * * * *')), 4,
          'schedule_cleanup schedules four jobs');
SELECT set_eq($$SELECT jobname, command FROM cron.job WHERE jobname LIKE 'ratelimit-%'$$,
              $$VALUES ('ratelimit-cleanup-rpc-rate-limits', 'SELECT public.cleanup_rpc_rate_limits()'),
                       ('ratelimit-cleanup-expired-rate-limits', 'SELECT public.cleanup_expired_rate_limits()'),
                       ('ratelimit-cleanup-old-rate-limit-buckets', 'SELECT sliding_window.cleanup_old_rate_limit_buckets()'),
                       ('ratelimit-cleanup-key-state', 'SELECT ratelimit.cleanup_key_state()')$$,
              'the jobs call the cleanup functions of each extension''s schema');
SELECT is((SELECT count(*)::integer FROM ratelimit.schedule_cleanup('* * * * *')), 4,
          'scheduling again updates the jobs');
SELECT is((SELECT count(*)::integer FROM cron.job WHERE jobname LIKE 'ratelimit-%'), 4,
          'and does not duplicate them');

-- pg_cron starts jobs on minute boundaries: wait (at most 150 s) until every job has run.
DO $$
DECLARE
    deadline timestamptz := clock_timestamp() + interval '150 seconds';
BEGIN
    LOOP
        EXIT WHEN (SELECT count(DISTINCT d.jobid) FROM cron.job_run_details d
                   JOIN cron.job j USING (jobid)
                   WHERE j.jobname LIKE 'ratelimit-%' AND d.status IN ('succeeded', 'failed')) = 4
               OR clock_timestamp() > deadline;
        PERFORM pg_sleep(1);
    END LOOP;
END
$$;

SELECT is((SELECT count(DISTINCT d.jobid)::integer FROM cron.job_run_details d
           JOIN cron.job j USING (jobid)
           WHERE j.jobname LIKE 'ratelimit-%' AND d.status = 'succeeded'), 4,
          'every cleanup job ran and succeeded');
SELECT is((SELECT count(*)::integer FROM rpc_rate_limits WHERE rpc_name = 'old'), 0,
          'expired rpc_rate_limits rows deleted');
SELECT is((SELECT count(*)::integer FROM rate_limits WHERE endpoint = 'old'), 0,
          'expired rate_limits windows deleted');
SELECT is((SELECT count(*)::integer FROM sliding_window.rate_limit_buckets WHERE key = 'old'), 0,
          'old buckets deleted');
SELECT is((SELECT count(*)::integer FROM ratelimit.key_state WHERE key = 'old')
          + (SELECT count(*)::integer FROM ratelimit.key_state_unlogged WHERE key = 'old'), 0,
          'idle native key states deleted from both engines');
SELECT is((SELECT count(*)::integer FROM ratelimit.key_state WHERE key = 'live')
          + (SELECT count(*)::integer FROM ratelimit.key_state_unlogged WHERE key = 'live'), 2,
          'native key states that still count are kept');
SELECT is((SELECT count(*)::integer FROM rpc_rate_limits WHERE rpc_name = 'live')
          + (SELECT count(*)::integer FROM rate_limits WHERE endpoint = 'live')
          + (SELECT count(*)::integer FROM sliding_window.rate_limit_buckets WHERE key = 'live'), 3,
          'rows that still count are kept');

-- A dropped drop-in extension's job would fail at every run: scheduling again removes it, and
-- unschedule_cleanup removes every ratelimit-cleanup-* job, one left over from such an
-- extension too.
DROP EXTENSION ratelimit_sliding_window_limits;
SELECT is(ARRAY(SELECT job_name FROM ratelimit.schedule_cleanup('* * * * *') ORDER BY 1),
          ARRAY['ratelimit-cleanup-expired-rate-limits', 'ratelimit-cleanup-key-state',
                'ratelimit-cleanup-rpc-rate-limits'],
          'after DROP EXTENSION ratelimit_sliding_window_limits, scheduling again schedules the other three');
SELECT is((SELECT count(*)::integer FROM cron.job WHERE jobname = 'ratelimit-cleanup-old-rate-limit-buckets'), 0,
          'and removes the dropped extension''s job');
SELECT cron.schedule('ratelimit-cleanup-old-rate-limit-buckets', '0 0 * * *',
                     'SELECT sliding_window.cleanup_old_rate_limit_buckets()') IS NOT NULL AS scheduled \gset
SELECT is(ratelimit.unschedule_cleanup(), 4, 'unschedule_cleanup removes the four jobs, the dropped extension''s too');
SELECT is((SELECT count(*)::integer FROM cron.job WHERE jobname LIKE 'ratelimit-%'), 0,
          'no job is left');

-- Where pg_cron is not installed the helper says so.
DROP EXTENSION pg_cron;
SELECT throws_ok('SELECT * FROM ratelimit.schedule_cleanup()', '55000',
                 'pg_cron is not installed in database postgres',
                 'schedule_cleanup explains that pg_cron is missing');

SELECT * FROM finish();
DROP EXTENSION ratelimit_rpc_limits, ratelimit_endpoint_limits, ratelimit;
DROP SCHEMA sliding_window;
