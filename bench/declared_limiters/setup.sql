-- Benchmark database for declared limiters and insert limits: a function declared over consume
-- (keyed by its argument, boolean result) on the table and memory engines, the native consume it
-- stands for, and two tables of posts alike but for an insert limit on one.
\set ON_ERROR_STOP on

CREATE EXTENSION ratelimit;
SELECT ratelimit.declare_limiter('public.bench_declared', ARRAY['p_key text'], 'boolean',
    p_key => ARRAY['arg:p_key'], p_limit => 1000000000, p_period => '365 days',
    p_roles => ARRAY['PUBLIC']);
SELECT ratelimit.declare_limiter('public.bench_declared_memory', ARRAY['p_key text'], 'boolean',
    p_key => ARRAY['arg:p_key'], p_limit => 1000000000, p_period => '365 days',
    p_engine => 'memory', p_roles => ARRAY['PUBLIC'])
WHERE current_setting('shared_preload_libraries') LIKE '%ratelimit%';

CREATE TABLE bench_posts (id bigserial PRIMARY KEY, user_id integer NOT NULL, body text);
CREATE TABLE bench_limited_posts (id bigserial PRIMARY KEY, user_id integer NOT NULL, body text);
SELECT ratelimit.limit_inserts('bench_limited_posts', 1000000000, '365 days', ARRAY['column:user_id']);
