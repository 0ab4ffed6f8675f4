-- Hostile input to every SQL-callable function of ratelimit and of the three apps' drop-in
-- extensions (the per-RPC and endpoint limits in public, the sliding window's in the schema
-- sliding_window, where its check_rate_limit does not meet the per-RPC one). A generated matrix of
-- bad calls (NULL in each argument; empty, 1 MB and 1 GB keys; invalid UTF-8 and NUL bytes;
-- negative, zero, INT_MIN, INT_MAX and overflowing integers; absurd intervals; unknown, mis-cased
-- and padded names; empty, oversized, mismatched and multi-dimensional arrays; malformed JWT claims
-- and settings; crafted decisions; bad policy rows; a preset over edited rows) must each fail with
-- the SQLSTATE PostgreSQL or the extension gives for it, with a message naming the argument when
-- the extension raises it, and write nothing: every counter table, the policy tables, the denial
-- log and its sequence, the shared-memory policy counters and offenders, the memory engine's
-- counters and a key it holds are compared before and after each call. Then keys made of SQL,
-- quotes, $$, backslashes and escapes are stored verbatim by every surface that stores keys, and
-- never executed; an IP spelled as a network must not slip past the deny list; what the
-- shared-memory counters give back is valid UTF-8. One backend serves the whole file.
BEGIN;
CREATE EXTENSION IF NOT EXISTS pgtap;
CREATE EXTENSION ratelimit;
CREATE EXTENSION ratelimit_rpc_limits;
CREATE EXTENSION ratelimit_endpoint_limits;
CREATE SCHEMA sliding_window;
CREATE EXTENSION ratelimit_sliding_window_limits SCHEMA sliding_window;
-- The policies and tiers the calls name are the social app's. The game backend's, with one limit
-- edited and one row deleted, are a preset load_preset must refuse to write, all of it.
SELECT ratelimit.load_preset('social-activity'), ratelimit.load_preset('game-backend');
UPDATE ratelimit.policies SET "limit" = 6 WHERE name = 'rpc.auth';
-- A concurrency policy, for the policy form of the leases.
INSERT INTO ratelimit.policies (name, "limit", period, engine, quota_unit)
VALUES ('hostile.inflight', 2, '1 minute', 'memory', 'concurrent-requests');
DELETE FROM ratelimit.policies WHERE name = 'rpc.wallet';
SET LOCAL timezone = 'UTC';
-- A fixed clock far ahead of the real one: the memory engine's worker, which expires keys on the
-- real clock, never frees a key this file writes.
SET LOCAL ratelimit.test_clock = '2100-01-01 00:00:01+00';
-- The per-RPC check_rate_limit counts the JWT caller; increment_rate_limit lets it spend only its
-- own quota.
SET LOCAL request.jwt.claims = '{"sub":"a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11","role":"authenticated"}';

SELECT plan(4143);

CREATE SCHEMA hostile;

-- The memory engine and the policy counters live in shared memory, outside the transaction: the
-- names this file gives them are new on every run.
CREATE TABLE hostile.run AS
SELECT 'hostile:mem:' || left(md5(random()::text || clock_timestamp()::text), 12) AS memory_key,
       'hostile.' || left(md5(random()::text || clock_timestamp()::text), 12) AS counter_name,
       pg_backend_pid() AS pid;

------------------------------------------------------------------------------------------------
-- Everything a call could write, as one value. Shared-memory names go in as md5 and byte
-- length, so that a value that is not valid UTF-8 can still be compared and printed.
------------------------------------------------------------------------------------------------
CREATE FUNCTION hostile.snapshot() RETURNS jsonb LANGUAGE sql AS $$
    SELECT jsonb_build_object(
        'key_state', (SELECT jsonb_agg(to_jsonb(t) ORDER BY t.policy, t.key) FROM ratelimit.key_state t),
        'key_state_unlogged', (SELECT jsonb_agg(to_jsonb(t) ORDER BY t.policy, t.key) FROM ratelimit.key_state_unlogged t),
        'rpc_rate_limits', (SELECT jsonb_agg(to_jsonb(t) ORDER BY t.id) FROM public.rpc_rate_limits t),
        'rate_limits', (SELECT jsonb_agg(to_jsonb(t) ORDER BY t.id) FROM public.rate_limits t),
        'rate_limit_buckets', (SELECT jsonb_agg(to_jsonb(t) ORDER BY t.key, t.bucket_time) FROM sliding_window.rate_limit_buckets t),
        'policies', (SELECT jsonb_agg(to_jsonb(t) ORDER BY t.name) FROM ratelimit.policies t),
        'tiers', (SELECT jsonb_agg(to_jsonb(t) ORDER BY t.name) FROM ratelimit.tiers t),
        'key_overrides', (SELECT jsonb_agg(to_jsonb(t) ORDER BY t.policy, t.key) FROM ratelimit.key_overrides t),
        'access_list', (SELECT jsonb_agg(to_jsonb(t) ORDER BY t.id) FROM ratelimit.access_list t),
        'denial_log', (SELECT jsonb_agg(to_jsonb(t) ORDER BY t.slot) FROM ratelimit.denial_log t),
        'denial_log_position', (SELECT jsonb_build_array(s.last_value, s.is_called) FROM ratelimit.denial_log_position s),
        'policy_stats', (SELECT jsonb_agg(jsonb_build_array(md5(p.policy), octet_length(p.policy), p.allowed,
                                                            p.denied, p.shadow_denied) ORDER BY md5(p.policy))
                           FROM ratelimit.policy_stats() p),
        'top_offenders', (SELECT jsonb_agg(jsonb_build_array(md5(o.policy), md5(o.subject), o.denials, o.overcount,
                                                             o.first_denied_at, o.last_denied_at)
                                           ORDER BY md5(o.policy), md5(o.subject))
                            FROM ratelimit.top_offenders(1000) o),
        -- entries + expired: the worker freeing an expired key moves one to the other; a key
        -- added or reset changes the sum.
        'memory_decisions', (SELECT jsonb_build_array(m.allowed, m.denied, m.evictions, m.entries + m.expired)
                               FROM ratelimit.memory_stats() m),
        'memory_key', (SELECT to_jsonb(ratelimit.peek(r.memory_key, 3, '10 seconds', 0, 'fixed_window', 'memory'))
                         FROM hostile.run r),
        'leases', (SELECT ratelimit.in_flight(r.memory_key) FROM hostile.run r),
        'relations', (SELECT jsonb_agg(c.oid::regclass::text ORDER BY c.oid::regclass::text) FROM pg_class c
                       WHERE c.relnamespace IN ('public'::regnamespace, 'ratelimit'::regnamespace,
                                                'sliding_window'::regnamespace)))
$$;

-- The parts of a snapshot that differ.
CREATE FUNCTION hostile.changed(p_before jsonb, p_after jsonb) RETURNS text[] LANGUAGE sql AS $$
    SELECT coalesce(array_agg(k ORDER BY k), '{}')
    FROM jsonb_object_keys(p_before || p_after) AS k
    WHERE p_before -> k IS DISTINCT FROM p_after -> k
$$;

------------------------------------------------------------------------------------------------
-- A valid call of each function, every argument named (SQL text). Each bad call replaces one or
-- a few of them. nullable: NULL is a meaningful value there (a default, "none", "both"), so it is
-- not one of the bad calls.
------------------------------------------------------------------------------------------------
CREATE TABLE hostile.arguments (
    function regprocedure, call_name text, position integer, name text, valid text, nullable boolean,
    PRIMARY KEY (function, name)
);

CREATE FUNCTION hostile.decision_literal() RETURNS text LANGUAGE sql AS $$
    SELECT $d$ROW(false, 'activity.create_post', 10, 0, 1500, 1500, 60000, 1, 'limited', '{}', '2100-01-01 00:00:01+00', NULL)::ratelimit.policy_decision$d$
$$;

INSERT INTO hostile.arguments (function, call_name, position, name, valid, nullable)
SELECT v.function::regprocedure, v.call_name, v.position, v.name, v.valid, v.nullable
FROM hostile.run AS r, LATERAL (VALUES
    ('public.check_rate_limit(text,integer,integer)', 'public.check_rate_limit', 1, 'p_rpc_name', '''hostile-rpc''', false),
    ('public.check_rate_limit(text,integer,integer)', 'public.check_rate_limit', 2, 'p_max_calls', '10', false),
    ('public.check_rate_limit(text,integer,integer)', 'public.check_rate_limit', 3, 'p_window_minutes', '1', false),
    ('public.check_rate_limit_for_user(uuid,text,integer,integer)', 'public.check_rate_limit_for_user', 1, 'p_user_id', '''a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11''::uuid', false),
    ('public.check_rate_limit_for_user(uuid,text,integer,integer)', 'public.check_rate_limit_for_user', 2, 'p_rpc_name', '''hostile-rpc''', false),
    ('public.check_rate_limit_for_user(uuid,text,integer,integer)', 'public.check_rate_limit_for_user', 3, 'p_max_calls', '10', false),
    ('public.check_rate_limit_for_user(uuid,text,integer,integer)', 'public.check_rate_limit_for_user', 4, 'p_window_minutes', '1', false),
    ('public.cleanup_rpc_rate_limits(interval)', 'public.cleanup_rpc_rate_limits', 1, 'p_older_than', '''48 hours''::interval', false),
    ('public.increment_rate_limit(uuid,text,integer,integer,integer)', 'public.increment_rate_limit', 1, 'p_user_id', '''a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11''::uuid', false),
    ('public.increment_rate_limit(uuid,text,integer,integer,integer)', 'public.increment_rate_limit', 2, 'p_endpoint', '''hostile-endpoint''', false),
    ('public.increment_rate_limit(uuid,text,integer,integer,integer)', 'public.increment_rate_limit', 3, 'p_limit', '10', false),
    ('public.increment_rate_limit(uuid,text,integer,integer,integer)', 'public.increment_rate_limit', 4, 'p_window_seconds', '60', false),
    ('public.increment_rate_limit(uuid,text,integer,integer,integer)', 'public.increment_rate_limit', 5, 'p_increment', '1', false),
    ('sliding_window.check_rate_limit(text,integer,integer,integer)', 'sliding_window.check_rate_limit', 1, 'p_key', '''hostile-bucket''', false),
    ('sliding_window.check_rate_limit(text,integer,integer,integer)', 'sliding_window.check_rate_limit', 2, 'p_limit', '10', false),
    ('sliding_window.check_rate_limit(text,integer,integer,integer)', 'sliding_window.check_rate_limit', 3, 'p_window_seconds', '60', false),
    ('sliding_window.check_rate_limit(text,integer,integer,integer)', 'sliding_window.check_rate_limit', 4, 'p_cost', '1', false),
    ('sliding_window.check_rate_limit_tiers(text,text,integer,integer,integer,integer,integer,integer)', 'sliding_window.check_rate_limit_tiers', 1, 'p_ip', '''198.51.100.7''', false),
    ('sliding_window.check_rate_limit_tiers(text,text,integer,integer,integer,integer,integer,integer)', 'sliding_window.check_rate_limit_tiers', 2, 'p_email', '''hostile@example.com''', false),
    ('sliding_window.check_rate_limit_tiers(text,text,integer,integer,integer,integer,integer,integer)', 'sliding_window.check_rate_limit_tiers', 3, 'p_global_limit', '1000', false),
    ('sliding_window.check_rate_limit_tiers(text,text,integer,integer,integer,integer,integer,integer)', 'sliding_window.check_rate_limit_tiers', 4, 'p_global_window_seconds', '60', false),
    ('sliding_window.check_rate_limit_tiers(text,text,integer,integer,integer,integer,integer,integer)', 'sliding_window.check_rate_limit_tiers', 5, 'p_ip_limit', '5', false),
    ('sliding_window.check_rate_limit_tiers(text,text,integer,integer,integer,integer,integer,integer)', 'sliding_window.check_rate_limit_tiers', 6, 'p_ip_window_seconds', '60', false),
    ('sliding_window.check_rate_limit_tiers(text,text,integer,integer,integer,integer,integer,integer)', 'sliding_window.check_rate_limit_tiers', 7, 'p_email_limit', '3', false),
    ('sliding_window.check_rate_limit_tiers(text,text,integer,integer,integer,integer,integer,integer)', 'sliding_window.check_rate_limit_tiers', 8, 'p_email_window_seconds', '3600', false),
    ('ratelimit.reset(text,text)', 'ratelimit.reset', 1, 'p_key', quote_literal(r.memory_key), false),
    ('ratelimit.reset(text,text)', 'ratelimit.reset', 2, 'p_engine', '''memory''', false),
    ('ratelimit.block(text,interval,text)', 'ratelimit.block', 1, 'p_key', quote_literal(r.memory_key), false),
    ('ratelimit.block(text,interval,text)', 'ratelimit.block', 2, 'p_duration', '''1 minute''::interval', false),
    ('ratelimit.block(text,interval,text)', 'ratelimit.block', 3, 'p_engine', '''memory''', false),
    ('ratelimit.cleanup_key_state(text)', 'ratelimit.cleanup_key_state', 1, 'p_engine', 'NULL', true),
    ('ratelimit.consume_all(text[],integer[],interval[],text[],text[],integer[],boolean[],integer)', 'ratelimit.consume_all', 1, 'p_keys', format('ARRAY[''hostile:k'', %L]', r.memory_key), false),
    ('ratelimit.consume_all(text[],integer[],interval[],text[],text[],integer[],boolean[],integer)', 'ratelimit.consume_all', 2, 'p_limits', 'ARRAY[3, 3]', false),
    ('ratelimit.consume_all(text[],integer[],interval[],text[],text[],integer[],boolean[],integer)', 'ratelimit.consume_all', 3, 'p_periods', 'ARRAY[''10 seconds'', ''10 seconds'']::interval[]', false),
    ('ratelimit.consume_all(text[],integer[],interval[],text[],text[],integer[],boolean[],integer)', 'ratelimit.consume_all', 4, 'p_algorithms', 'ARRAY[''fixed_window'', ''fixed_window'']', true),
    ('ratelimit.consume_all(text[],integer[],interval[],text[],text[],integer[],boolean[],integer)', 'ratelimit.consume_all', 5, 'p_engines', 'ARRAY[''table'', ''memory'']', true),
    ('ratelimit.consume_all(text[],integer[],interval[],text[],text[],integer[],boolean[],integer)', 'ratelimit.consume_all', 6, 'p_bursts', 'ARRAY[NULL, NULL]::integer[]', true),
    ('ratelimit.consume_all(text[],integer[],interval[],text[],text[],integer[],boolean[],integer)', 'ratelimit.consume_all', 7, 'p_enforced', 'ARRAY[true, true]', true),
    ('ratelimit.consume_all(text[],integer[],interval[],text[],text[],integer[],boolean[],integer)', 'ratelimit.consume_all', 8, 'p_cost', '1', false),
    ('ratelimit.validate_limit(integer,interval,text,text,integer,text)', 'ratelimit.validate_limit', 1, 'p_limit', '3', false),
    ('ratelimit.validate_limit(integer,interval,text,text,integer,text)', 'ratelimit.validate_limit', 2, 'p_period', '''10 seconds''::interval', false),
    ('ratelimit.validate_limit(integer,interval,text,text,integer,text)', 'ratelimit.validate_limit', 3, 'p_algorithm', '''fixed_window''', false),
    ('ratelimit.validate_limit(integer,interval,text,text,integer,text)', 'ratelimit.validate_limit', 4, 'p_engine', '''table''', false),
    ('ratelimit.validate_limit(integer,interval,text,text,integer,text)', 'ratelimit.validate_limit', 5, 'p_burst', 'NULL', true),
    ('ratelimit.validate_limit(integer,interval,text,text,integer,text)', 'ratelimit.validate_limit', 6, 'p_time_zone', 'NULL', true),
    ('ratelimit.hash_subject(text)', 'ratelimit.hash_subject', 1, 'p_value', '''x''', true),
    ('ratelimit.describe_period(interval)', 'ratelimit.describe_period', 1, 'p_period', '''1 minute''::interval', true),
    ('ratelimit.check(text,text,integer,text,inet,uuid)', 'ratelimit.check', 1, 'p_policy', '''activity.create_post''', false),
    ('ratelimit.check(text,text,integer,text,inet,uuid)', 'ratelimit.check', 2, 'p_key', '''hostile-subject''', false),
    ('ratelimit.check(text,text,integer,text,inet,uuid)', 'ratelimit.check', 3, 'p_cost', '1', false),
    ('ratelimit.check(text,text,integer,text,inet,uuid)', 'ratelimit.check', 4, 'p_tier', 'NULL', true),
    ('ratelimit.check(text,text,integer,text,inet,uuid)', 'ratelimit.check', 5, 'p_ip', 'NULL', true),
    ('ratelimit.check(text,text,integer,text,inet,uuid)', 'ratelimit.check', 6, 'p_user', 'NULL', true),
    ('ratelimit.check_all(text[],text[],integer,text,inet,uuid)', 'ratelimit.check_all', 1, 'p_policies', 'ARRAY[''activity.create_post'', ''activity.update_post'']', false),
    ('ratelimit.check_all(text[],text[],integer,text,inet,uuid)', 'ratelimit.check_all', 2, 'p_keys', 'ARRAY[''hostile-subject'', ''hostile-subject'']', false),
    ('ratelimit.check_all(text[],text[],integer,text,inet,uuid)', 'ratelimit.check_all', 3, 'p_cost', '1', false),
    ('ratelimit.check_all(text[],text[],integer,text,inet,uuid)', 'ratelimit.check_all', 4, 'p_tier', 'NULL', true),
    ('ratelimit.check_all(text[],text[],integer,text,inet,uuid)', 'ratelimit.check_all', 5, 'p_ip', 'NULL', true),
    ('ratelimit.check_all(text[],text[],integer,text,inet,uuid)', 'ratelimit.check_all', 6, 'p_user', 'NULL', true),
    ('ratelimit.check_http(text[],text[],integer,text,inet,uuid,text,text)', 'ratelimit.check_http', 1, 'p_policies', 'ARRAY[''activity.create_post'']', false),
    ('ratelimit.check_http(text[],text[],integer,text,inet,uuid,text,text)', 'ratelimit.check_http', 2, 'p_keys', 'ARRAY[''hostile-subject'']', false),
    ('ratelimit.check_http(text[],text[],integer,text,inet,uuid,text,text)', 'ratelimit.check_http', 3, 'p_cost', '1', false),
    ('ratelimit.check_http(text[],text[],integer,text,inet,uuid,text,text)', 'ratelimit.check_http', 4, 'p_tier', 'NULL', true),
    ('ratelimit.check_http(text[],text[],integer,text,inet,uuid,text,text)', 'ratelimit.check_http', 5, 'p_ip', 'NULL', true),
    ('ratelimit.check_http(text[],text[],integer,text,inet,uuid,text,text)', 'ratelimit.check_http', 6, 'p_user', 'NULL', true),
    ('ratelimit.check_http(text[],text[],integer,text,inet,uuid,text,text)', 'ratelimit.check_http', 7, 'p_reset_format', '''iso8601''', false),
    ('ratelimit.check_http(text[],text[],integer,text,inet,uuid,text,text)', 'ratelimit.check_http', 8, 'p_body_shape', '''error_message''', false),
    ('ratelimit.decide_policies(text[],text[],integer,text,inet,uuid,text,text)', 'ratelimit.decide_policies', 1, 'p_policies', 'ARRAY[''activity.create_post'']', false),
    ('ratelimit.decide_policies(text[],text[],integer,text,inet,uuid,text,text)', 'ratelimit.decide_policies', 2, 'p_keys', 'ARRAY[''hostile-subject'']', false),
    ('ratelimit.decide_policies(text[],text[],integer,text,inet,uuid,text,text)', 'ratelimit.decide_policies', 3, 'p_cost', '1', false),
    ('ratelimit.decide_policies(text[],text[],integer,text,inet,uuid,text,text)', 'ratelimit.decide_policies', 4, 'p_tier', 'NULL', true),
    ('ratelimit.decide_policies(text[],text[],integer,text,inet,uuid,text,text)', 'ratelimit.decide_policies', 5, 'p_ip', 'NULL', true),
    ('ratelimit.decide_policies(text[],text[],integer,text,inet,uuid,text,text)', 'ratelimit.decide_policies', 6, 'p_user', 'NULL', true),
    ('ratelimit.decide_policies(text[],text[],integer,text,inet,uuid,text,text)', 'ratelimit.decide_policies', 7, 'p_policy_argument', '''p_policies''', true),
    ('ratelimit.decide_policies(text[],text[],integer,text,inet,uuid,text,text)', 'ratelimit.decide_policies', 8, 'p_key_argument', '''p_keys''', true),
    ('ratelimit.http_headers(ratelimit.policy_decision,text)', 'ratelimit.http_headers', 1, 'p_decision', hostile.decision_literal(), false),
    ('ratelimit.http_headers(ratelimit.policy_decision,text)', 'ratelimit.http_headers', 2, 'p_reset_format', '''iso8601''', false),
    ('ratelimit.http_body(ratelimit.policy_decision,text)', 'ratelimit.http_body', 1, 'p_decision', hostile.decision_literal(), false),
    ('ratelimit.http_body(ratelimit.policy_decision,text)', 'ratelimit.http_body', 2, 'p_shape', '''detailed''', false),
    ('ratelimit.record_outcomes(text[],text[],text[])', 'ratelimit.record_outcomes', 1, 'p_policies', format('ARRAY[%L]', r.counter_name), true),
    ('ratelimit.record_outcomes(text[],text[],text[])', 'ratelimit.record_outcomes', 2, 'p_subjects', 'ARRAY[''hostile-subject'']', true),
    ('ratelimit.record_outcomes(text[],text[],text[])', 'ratelimit.record_outcomes', 3, 'p_outcomes', 'ARRAY[''allowed'']', true),
    ('ratelimit.top_offenders(integer)', 'ratelimit.top_offenders', 1, 'p_limit', '10', false),
    ('ratelimit.schedule_cleanup(text)', 'ratelimit.schedule_cleanup', 1, 'p_schedule', 'NULL', true),
    ('ratelimit.load_preset(text,boolean)', 'ratelimit.load_preset', 1, 'p_preset', '''social-activity''', false),
    ('ratelimit.load_preset(text,boolean)', 'ratelimit.load_preset', 2, 'p_replace', 'false', false),
    ('ratelimit.reset_policy_key(text,text)', 'ratelimit.reset_policy_key', 1, 'p_policy', '''activity.create_post''', false),
    ('ratelimit.reset_policy_key(text,text)', 'ratelimit.reset_policy_key', 2, 'p_key', '''hostile-subject''', false),
    ('ratelimit.block_policy_key(text,text,interval)', 'ratelimit.block_policy_key', 1, 'p_policy', '''activity.create_post''', false),
    ('ratelimit.block_policy_key(text,text,interval)', 'ratelimit.block_policy_key', 2, 'p_key', '''hostile-subject''', false),
    ('ratelimit.block_policy_key(text,text,interval)', 'ratelimit.block_policy_key', 3, 'p_duration', '''1 minute''::interval', false),
    ('ratelimit.acquire(text,integer,integer,text,interval)', 'ratelimit.acquire', 1, 'p_key', quote_literal(r.memory_key), false),
    ('ratelimit.acquire(text,integer,integer,text,interval)', 'ratelimit.acquire', 2, 'p_limit', '3', false),
    ('ratelimit.acquire(text,integer,integer,text,interval)', 'ratelimit.acquire', 3, 'p_cost', '1', false),
    ('ratelimit.acquire(text,integer,integer,text,interval)', 'ratelimit.acquire', 4, 'p_scope', '''transaction''', false),
    ('ratelimit.acquire(text,integer,integer,text,interval)', 'ratelimit.acquire', 5, 'p_max_hold', 'NULL', true),
    ('ratelimit.release(bigint)', 'ratelimit.release', 1, 'p_lease', '1', false),
    ('ratelimit.in_flight(text)', 'ratelimit.in_flight', 1, 'p_key', quote_literal(r.memory_key), false),
    ('ratelimit.reserve(text,integer,interval,integer,text,text,integer,interval)', 'ratelimit.reserve', 1, 'p_key', quote_literal(r.memory_key), false),
    ('ratelimit.reserve(text,integer,interval,integer,text,text,integer,interval)', 'ratelimit.reserve', 2, 'p_limit', '3', false),
    ('ratelimit.reserve(text,integer,interval,integer,text,text,integer,interval)', 'ratelimit.reserve', 3, 'p_period', '''10 seconds''::interval', false),
    ('ratelimit.reserve(text,integer,interval,integer,text,text,integer,interval)', 'ratelimit.reserve', 4, 'p_estimate', '1', false),
    ('ratelimit.reserve(text,integer,interval,integer,text,text,integer,interval)', 'ratelimit.reserve', 5, 'p_algorithm', '''fixed_window''', false),
    ('ratelimit.reserve(text,integer,interval,integer,text,text,integer,interval)', 'ratelimit.reserve', 6, 'p_engine', '''memory''', false),
    ('ratelimit.reserve(text,integer,interval,integer,text,text,integer,interval)', 'ratelimit.reserve', 7, 'p_burst', 'NULL', true),
    ('ratelimit.reserve(text,integer,interval,integer,text,text,integer,interval)', 'ratelimit.reserve', 8, 'p_hold', '''1 minute''::interval', false),
    ('ratelimit.settle(bigint,integer)', 'ratelimit.settle', 1, 'p_reservation', '1', false),
    ('ratelimit.settle(bigint,integer)', 'ratelimit.settle', 2, 'p_actual', '1', false),
    ('ratelimit.cancel(bigint)', 'ratelimit.cancel', 1, 'p_reservation', '1', false)
) AS v(function, call_name, position, name, valid, nullable);

-- consume, peek, refund and allow share their arguments; the bad calls run on the memory engine
-- (the table engines' bad calls are in native_api_errors.sql).
INSERT INTO hostile.arguments (function, call_name, position, name, valid, nullable)
SELECT format('ratelimit.%s(text,integer,interval,integer,text,text,integer,text%s)', f,
              CASE WHEN f = 'consume' THEN ',interval' ELSE '' END)::regprocedure, 'ratelimit.' || f,
       a.position, a.name, a.valid, a.nullable
FROM hostile.run AS r, unnest(ARRAY['consume', 'peek', 'refund', 'allow']) AS f,
     LATERAL (VALUES (1, 'p_key', quote_literal(r.memory_key), false), (2, 'p_limit', '3', false),
                     (3, 'p_period', '''10 seconds''::interval', false), (4, 'p_cost', '1', false),
                     (5, 'p_algorithm', '''fixed_window''', false), (6, 'p_engine', '''memory''', false),
                     (7, 'p_burst', 'NULL', true), (8, 'p_time_zone', 'NULL', true),
                     (9, 'p_max_wait', 'NULL', true)) AS a(position, name, valid, nullable)
WHERE a.position < 9 OR f = 'consume';

-- consume_many and peek_many: the same, with an array of keys.
INSERT INTO hostile.arguments (function, call_name, position, name, valid, nullable)
SELECT format('ratelimit.%s(text[],integer,interval,integer,text,text,integer,text)', f)::regprocedure, 'ratelimit.' || f,
       a.position, a.name, a.valid, a.nullable
FROM hostile.run AS r, unnest(ARRAY['consume_many', 'peek_many']) AS f,
     LATERAL (VALUES (1, 'p_keys', format('ARRAY[''hostile:k'', %L]', r.memory_key), false), (2, 'p_limit', '3', false),
                     (3, 'p_period', '''10 seconds''::interval', false), (4, 'p_cost', '1', false),
                     (5, 'p_algorithm', '''fixed_window''', false), (6, 'p_engine', '''memory''', false),
                     (7, 'p_burst', 'NULL', true), (8, 'p_time_zone', 'NULL', true)) AS a(position, name, valid, nullable);

INSERT INTO hostile.arguments (function, call_name, position, name, valid, nullable) VALUES
    ('ratelimit.check_many(text,text[],integer,text,inet,uuid)', 'ratelimit.check_many', 1, 'p_policy', '''activity.create_post''', false),
    ('ratelimit.check_many(text,text[],integer,text,inet,uuid)', 'ratelimit.check_many', 2, 'p_subjects', 'ARRAY[''hostile-subject'', ''hostile-subject-2'']', false),
    ('ratelimit.check_many(text,text[],integer,text,inet,uuid)', 'ratelimit.check_many', 3, 'p_cost', '1', false),
    ('ratelimit.check_many(text,text[],integer,text,inet,uuid)', 'ratelimit.check_many', 4, 'p_tier', 'NULL', true),
    ('ratelimit.check_many(text,text[],integer,text,inet,uuid)', 'ratelimit.check_many', 5, 'p_ip', 'NULL', true),
    ('ratelimit.check_many(text,text[],integer,text,inet,uuid)', 'ratelimit.check_many', 6, 'p_user', 'NULL', true);

-- The policy forms of reserve and acquire, the lease's decision, and the check of a policy's
-- penalty and delay columns.
INSERT INTO hostile.arguments (function, call_name, position, name, valid, nullable) VALUES
    ('ratelimit.reserve_policy(text,text,integer,interval,text,inet,uuid)', 'ratelimit.reserve_policy', 1, 'p_policy', '''activity.create_post''', false),
    ('ratelimit.reserve_policy(text,text,integer,interval,text,inet,uuid)', 'ratelimit.reserve_policy', 2, 'p_key', '''hostile-subject''', false),
    ('ratelimit.reserve_policy(text,text,integer,interval,text,inet,uuid)', 'ratelimit.reserve_policy', 3, 'p_estimate', '1', false),
    ('ratelimit.reserve_policy(text,text,integer,interval,text,inet,uuid)', 'ratelimit.reserve_policy', 4, 'p_hold', '''1 minute''::interval', false),
    ('ratelimit.reserve_policy(text,text,integer,interval,text,inet,uuid)', 'ratelimit.reserve_policy', 5, 'p_tier', 'NULL', true),
    ('ratelimit.reserve_policy(text,text,integer,interval,text,inet,uuid)', 'ratelimit.reserve_policy', 6, 'p_ip', 'NULL', true),
    ('ratelimit.reserve_policy(text,text,integer,interval,text,inet,uuid)', 'ratelimit.reserve_policy', 7, 'p_user', 'NULL', true),
    ('ratelimit.acquire_policy(text,text,integer,text,text,inet,uuid)', 'ratelimit.acquire_policy', 1, 'p_policy', '''hostile.inflight''', false),
    ('ratelimit.acquire_policy(text,text,integer,text,text,inet,uuid)', 'ratelimit.acquire_policy', 2, 'p_key', '''hostile-subject''', false),
    ('ratelimit.acquire_policy(text,text,integer,text,text,inet,uuid)', 'ratelimit.acquire_policy', 3, 'p_cost', '1', false),
    ('ratelimit.acquire_policy(text,text,integer,text,text,inet,uuid)', 'ratelimit.acquire_policy', 4, 'p_scope', '''transaction''', false),
    ('ratelimit.acquire_policy(text,text,integer,text,text,inet,uuid)', 'ratelimit.acquire_policy', 5, 'p_tier', 'NULL', true),
    ('ratelimit.acquire_policy(text,text,integer,text,text,inet,uuid)', 'ratelimit.acquire_policy', 6, 'p_ip', 'NULL', true),
    ('ratelimit.acquire_policy(text,text,integer,text,text,inet,uuid)', 'ratelimit.acquire_policy', 7, 'p_user', 'NULL', true),
    ('ratelimit.lease_decision(text,ratelimit.lease)', 'ratelimit.lease_decision', 1, 'p_policy', '''hostile.inflight''', false),
    ('ratelimit.lease_decision(text,ratelimit.lease)', 'ratelimit.lease_decision', 2, 'p_lease', 'ROW(1, true, 2, 1, NULL)::ratelimit.lease', false),
    ('ratelimit.validate_policy_options(text,interval[],interval,interval)', 'ratelimit.validate_policy_options', 1, 'p_algorithm', '''gcra''', false),
    ('ratelimit.validate_policy_options(text,interval[],interval,interval)', 'ratelimit.validate_policy_options', 2, 'p_penalty_blocks', '''{1 minute,5 minutes}''::interval[]', true),
    ('ratelimit.validate_policy_options(text,interval[],interval,interval)', 'ratelimit.validate_policy_options', 3, 'p_penalty_decay', '''1 hour''::interval', true),
    ('ratelimit.validate_policy_options(text,interval[],interval,interval)', 'ratelimit.validate_policy_options', 4, 'p_max_delay', '''1 second''::interval', true);

-- The statement calling p_function with p_changes (argument name -> SQL text) in place of the
-- valid values.
CREATE FUNCTION hostile.call(p_function regprocedure, p_changes jsonb DEFAULT '{}') RETURNS text
LANGUAGE plpgsql AS $$
DECLARE
    unknown text;
    statement text;
BEGIN
    SELECT string_agg(k, ', ') INTO unknown FROM jsonb_object_keys(p_changes) AS k
    WHERE NOT EXISTS (SELECT 1 FROM hostile.arguments a WHERE a.function = p_function AND a.name = k);
    IF unknown IS NOT NULL THEN
        RAISE EXCEPTION 'hostile.call: % has no argument %', p_function, unknown;
    END IF;
    SELECT format('SELECT %s(%s)', min(a.call_name),
                  string_agg(format('%s => %s', a.name, coalesce(p_changes ->> a.name, a.valid)), ', '
                             ORDER BY a.position))
      INTO statement
      FROM hostile.arguments a WHERE a.function = p_function;
    RETURN statement;
END
$$;

-- Runs p_statement with a setting changed for the rest of the statement's subtransaction (a
-- failing call takes the change back with it).
CREATE FUNCTION hostile.with_setting(p_name text, p_value text, p_statement text) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM set_config(p_name, p_value, true);
    EXECUTE p_statement;
END
$$;

------------------------------------------------------------------------------------------------
-- The matrix. message is a LIKE pattern in which '_' stands for itself.
------------------------------------------------------------------------------------------------
CREATE TABLE hostile.matrix (
    id serial PRIMARY KEY,
    function regprocedure NOT NULL,
    call text NOT NULL,
    sqlstate text NOT NULL,
    message text NOT NULL,
    why text NOT NULL,
    todo text
);

-- 1. NULL in each argument that gives NULL no meaning: 22004 naming it.
INSERT INTO hostile.matrix (function, call, sqlstate, message, why)
SELECT a.function, hostile.call(a.function, jsonb_build_object(a.name, 'NULL')), '22004',
       a.name || ' must not be NULL', 'NULL ' || a.name
FROM hostile.arguments a WHERE NOT a.nullable
ORDER BY a.function::text, a.position;

-- NULL elements of the arrays: 22004 naming the element.
INSERT INTO hostile.matrix (function, call, sqlstate, message, why)
SELECT 'ratelimit.consume_all(text[],integer[],interval[],text[],text[],integer[],boolean[],integer)',
       hostile.call('ratelimit.consume_all(text[],integer[],interval[],text[],text[],integer[],boolean[],integer)',
                    jsonb_build_object(v.name, v.value)),
       '22004', v.name || '[2] must not be NULL', 'a NULL element of ' || v.name
FROM (VALUES (1, 'p_keys', 'ARRAY[''hostile:k'', NULL]'), (2, 'p_limits', 'ARRAY[3, NULL]'),
             (3, 'p_periods', 'ARRAY[''10 seconds'', NULL]::interval[]'),
             (4, 'p_algorithms', 'ARRAY[''fixed_window'', NULL]'), (5, 'p_engines', 'ARRAY[''table'', NULL]'),
             (6, 'p_enforced', 'ARRAY[true, NULL]')) AS v(n, name, value)
ORDER BY v.n;
INSERT INTO hostile.matrix (function, call, sqlstate, message, why)
SELECT f::regprocedure, hostile.call(f::regprocedure, jsonb_build_object(v.name, v.value)), '22004',
       v.name || '[' || v.element || '] must not be NULL', 'a NULL element of ' || v.name
FROM (VALUES (1, 'ratelimit.check_all(text[],text[],integer,text,inet,uuid)', 'p_policies', 'ARRAY[''activity.create_post'', NULL]', 2),
             (2, 'ratelimit.check_all(text[],text[],integer,text,inet,uuid)', 'p_keys', 'ARRAY[''hostile-subject'', NULL]', 2),
             (3, 'ratelimit.check_http(text[],text[],integer,text,inet,uuid,text,text)', 'p_policies', 'ARRAY[NULL]::text[]', 1),
             (4, 'ratelimit.check_http(text[],text[],integer,text,inet,uuid,text,text)', 'p_keys', 'ARRAY[NULL]::text[]', 1),
             (5, 'ratelimit.decide_policies(text[],text[],integer,text,inet,uuid,text,text)', 'p_keys', 'ARRAY[NULL]::text[]', 1),
             (6, 'ratelimit.consume_many(text[],integer,interval,integer,text,text,integer,text)', 'p_keys', 'ARRAY[''hostile:k'', NULL]', 2),
             (7, 'ratelimit.peek_many(text[],integer,interval,integer,text,text,integer,text)', 'p_keys', 'ARRAY[NULL]::text[]', 1),
             (8, 'ratelimit.check_many(text,text[],integer,text,inet,uuid)', 'p_subjects', 'ARRAY[''hostile-subject'', ''hostile-subject-2'', NULL]', 3))
     AS v(n, f, name, value, element)
ORDER BY v.n;

-- 2. Keys: empty, 1 MB, not UTF-8, for every argument that is a key (or an element of one).
CREATE TABLE hostile.key_arguments (n serial, function regprocedure, name text, template text, label text);
INSERT INTO hostile.key_arguments (function, name, template, label)
SELECT v.f::regprocedure, v.name, v.template, v.label
FROM hostile.run AS r, LATERAL (VALUES
    ('public.check_rate_limit(text,integer,integer)', 'p_rpc_name', '%s', 'p_rpc_name'),
    ('public.check_rate_limit_for_user(uuid,text,integer,integer)', 'p_rpc_name', '%s', 'p_rpc_name'),
    ('public.increment_rate_limit(uuid,text,integer,integer,integer)', 'p_endpoint', '%s', 'p_endpoint'),
    ('sliding_window.check_rate_limit(text,integer,integer,integer)', 'p_key', '%s', 'p_key'),
    ('sliding_window.check_rate_limit_tiers(text,text,integer,integer,integer,integer,integer,integer)', 'p_ip', '%s', 'p_ip'),
    ('sliding_window.check_rate_limit_tiers(text,text,integer,integer,integer,integer,integer,integer)', 'p_email', '%s', 'p_email'),
    ('ratelimit.consume(text,integer,interval,integer,text,text,integer,text,interval)', 'p_key', '%s', 'p_key'),
    ('ratelimit.peek(text,integer,interval,integer,text,text,integer,text)', 'p_key', '%s', 'p_key'),
    ('ratelimit.refund(text,integer,interval,integer,text,text,integer,text)', 'p_key', '%s', 'p_key'),
    ('ratelimit.reset(text,text)', 'p_key', '%s', 'p_key'),
    ('ratelimit.block(text,interval,text)', 'p_key', '%s', 'p_key'),
    ('ratelimit.reset_policy_key(text,text)', 'p_key', '%s', 'p_key'),
    ('ratelimit.block_policy_key(text,text,interval)', 'p_key', '%s', 'p_key'),
    ('ratelimit.consume_all(text[],integer[],interval[],text[],text[],integer[],boolean[],integer)', 'p_keys',
     'ARRAY[''hostile:k'', %s]', 'p_keys[2]'),
    ('ratelimit.check(text,text,integer,text,inet,uuid)', 'p_key', '%s', 'p_key'),
    ('ratelimit.check_all(text[],text[],integer,text,inet,uuid)', 'p_keys', 'ARRAY[''hostile-subject'', %s]', 'p_keys[2]'),
    ('ratelimit.check_http(text[],text[],integer,text,inet,uuid,text,text)', 'p_keys', 'ARRAY[%s]', 'p_keys[1]'),
    ('ratelimit.decide_policies(text[],text[],integer,text,inet,uuid,text,text)', 'p_keys', 'ARRAY[%s]', 'p_keys[1]'),
    ('ratelimit.allow(text,integer,interval,integer,text,text,integer,text)', 'p_key', '%s', 'p_key'),
    ('ratelimit.consume_many(text[],integer,interval,integer,text,text,integer,text)', 'p_keys', 'ARRAY[''hostile:k'', %s]', 'p_keys[2]'),
    ('ratelimit.peek_many(text[],integer,interval,integer,text,text,integer,text)', 'p_keys', 'ARRAY[%s]', 'p_keys[1]'),
    ('ratelimit.check_many(text,text[],integer,text,inet,uuid)', 'p_subjects', 'ARRAY[''hostile-subject'', %s]', 'p_subjects[2]'),
    ('ratelimit.acquire(text,integer,integer,text,interval)', 'p_key', '%s', 'p_key'),
    ('ratelimit.in_flight(text)', 'p_key', '%s', 'p_key'),
    ('ratelimit.reserve(text,integer,interval,integer,text,text,integer,interval)', 'p_key', '%s', 'p_key'),
    ('ratelimit.reserve_policy(text,text,integer,interval,text,inet,uuid)', 'p_key', '%s', 'p_key'),
    ('ratelimit.acquire_policy(text,text,integer,text,text,inet,uuid)', 'p_key', '%s', 'p_key')
) AS v(f, name, template, label);

INSERT INTO hostile.matrix (function, call, sqlstate, message, why)
SELECT k.function, hostile.call(k.function, jsonb_build_object(k.name, format(k.template, v.value))),
       v.sqlstate, format(v.message, k.label), format(v.why, k.label)
FROM hostile.key_arguments k,
     (VALUES (1, '''''', '22023', '%s must not be empty', 'empty %s'),
             (2, 'repeat(''k'', 1048576)', '22023', '%s must be at most %% bytes%%', '1 MB %s'),
             (3, 'convert_from(''\xff''::bytea, ''UTF8'')', '22021', 'invalid byte sequence for encoding "UTF8": 0xff',
              '%s not UTF-8: refused before the function runs')) AS v(n, value, sqlstate, message, why)
ORDER BY k.n, v.n;

-- Bytes PostgreSQL itself refuses in text, whatever the function: NUL, broken sequences, a
-- value past the 1 GB limit.
INSERT INTO hostile.matrix (function, call, sqlstate, message, why)
SELECT k.function, hostile.call(k.function, jsonb_build_object(k.name, format(k.template, v.value))),
       v.sqlstate, v.message, format(v.why, k.label)
FROM hostile.key_arguments k,
     (VALUES (1, 'E''k\x00''', '22021', 'invalid byte sequence for encoding "UTF8": 0x00', 'a NUL byte in %s'),
             (2, 'chr(0)', '54000', 'null character not permitted', 'chr(0) as %s'),
             (3, 'E''\xc3\x28''', '22021', 'invalid byte sequence for encoding "UTF8": 0xc3 0x28', 'a broken UTF-8 sequence in %s'),
             (4, 'U&''k\0000''', '42601', 'invalid Unicode escape value', 'a \0000 escape in %s'),
             (5, 'repeat(''k'', 1073741824)', '54000', 'requested length too large', 'a 1 GB %s')) AS v(n, value, sqlstate, message, why)
WHERE k.n IN (1, 4, 5, 7, 13, 14)
ORDER BY k.n, v.n;

-- Key lengths are counted in bytes: 129 two-byte characters are 258 bytes. A policy key leaves
-- room for the policy's name.
INSERT INTO hostile.matrix (function, call, sqlstate, message, why) VALUES
    ('public.check_rate_limit(text,integer,integer)',
     hostile.call('public.check_rate_limit(text,integer,integer)', '{"p_rpc_name": "repeat(''é'', 129)"}'),
     '22023', 'p_rpc_name must be at most 256 bytes long, got 258', '129 characters, 258 bytes'),
    ('public.increment_rate_limit(uuid,text,integer,integer,integer)',
     hostile.call('public.increment_rate_limit(uuid,text,integer,integer,integer)', '{"p_endpoint": "repeat(''€'', 86)"}'),
     '22023', 'p_endpoint must be at most 256 bytes long, got 258', '86 characters, 258 bytes'),
    ('sliding_window.check_rate_limit(text,integer,integer,integer)',
     hostile.call('sliding_window.check_rate_limit(text,integer,integer,integer)', '{"p_key": "repeat(''🔥'', 65)"}'),
     '22023', 'p_key must be at most 256 bytes long, got 260', '65 four-byte characters'),
    ('ratelimit.check(text,text,integer,text,inet,uuid)',
     hostile.call('ratelimit.check(text,text,integer,text,inet,uuid)', '{"p_key": "repeat(''x'', 257)"}'),
     '22023', 'p_key must be at most 256 bytes long, got 257',
     'one byte more than a policy''s subject may hold');

-- Whitespace only: trimmed, it is the empty subject every such caller would share.
INSERT INTO hostile.matrix (function, call, sqlstate, message, why)
SELECT 'sliding_window.check_rate_limit_tiers(text,text,integer,integer,integer,integer,integer,integer)',
       hostile.call('sliding_window.check_rate_limit_tiers(text,text,integer,integer,integer,integer,integer,integer)',
                    jsonb_build_object(v.name, '''    ''')),
       '22023', v.name || ' must not be empty', 'only spaces in ' || v.name
FROM (VALUES (1, 'p_ip'), (2, 'p_email')) AS v(n, name)
ORDER BY v.n;

-- 3. Integers. The type refuses what does not fit (22003, or no such function for a bigint); the
-- extension refuses what is out of its range (22023 naming the argument).
CREATE TABLE hostile.integer_arguments (n serial, function regprocedure, name text, zero_ok boolean, max_ok boolean);
INSERT INTO hostile.integer_arguments (function, name, zero_ok, max_ok)
SELECT a.function, a.name,
       a.name IN ('p_cost', 'p_estimate', 'p_actual'),
       a.name IN ('p_max_calls', 'p_limit', 'p_increment', 'p_global_limit', 'p_ip_limit', 'p_email_limit', 'p_actual')
FROM hostile.arguments a
WHERE a.function::text NOT LIKE '%describe_period%'
  AND (SELECT t.typname FROM pg_proc p, pg_type t
        WHERE p.oid = a.function AND t.oid = p.proargtypes[a.position - 1]) = 'int4'
ORDER BY a.function::text, a.position;

INSERT INTO hostile.matrix (function, call, sqlstate, message, why)
SELECT i.function, hostile.call(i.function, jsonb_build_object(i.name, v.value)), v.sqlstate,
       format(v.message, i.name), format(v.why, i.name)
FROM hostile.integer_arguments i,
     (VALUES (1, '''2147483648''', '22003', 'value "2147483648" is out of range for type integer', '%s = 2^31'),
             (2, '-2147483648', '22023', '%s %%', '%s = INT_MIN')) AS v(n, value, sqlstate, message, why)
ORDER BY i.n, v.n;

INSERT INTO hostile.matrix (function, call, sqlstate, message, why)
SELECT i.function, hostile.call(i.function, jsonb_build_object(i.name, '0')), '22023', i.name || ' %',
       i.name || ' = 0'
FROM hostile.integer_arguments i WHERE NOT i.zero_ok
ORDER BY i.n;

-- INT_MAX where it is out of range (a cost above the limit is a denial, not an error, for the
-- policies and the native decisions; a refund's, a lease's and a drop-in's are errors).
INSERT INTO hostile.matrix (function, call, sqlstate, message, why)
SELECT i.function, hostile.call(i.function, jsonb_build_object(i.name, '2147483647')), '22023', i.name || ' %',
       i.name || ' = INT_MAX'
FROM hostile.integer_arguments i
WHERE NOT i.max_ok AND i.name <> 'p_burst'
  AND NOT (i.name IN ('p_cost', 'p_estimate')
           AND i.function::text ~ '^ratelimit\.("check"|check_many|check_all|check_http|decide_policies|reserve_policy|acquire_policy|consume|consume_many|consume_all|peek|peek_many|allow|reserve)\(')
ORDER BY i.n;

INSERT INTO hostile.matrix (function, call, sqlstate, message, why)
SELECT i.function, hostile.call(i.function, jsonb_build_object(i.name, v.value)), v.sqlstate, v.message,
       format(v.why, i.name)
FROM hostile.integer_arguments i,
     (VALUES (1, '''-2147483649''', '22003', 'value "-2147483649" is out of range for type integer', '%s = -2^31 - 1'),
             (2, '''99999999999999999999''', '22003', 'value "99999999999999999999" is out of range for type integer', '%s = 10^20'),
             (3, '2147483648', '42883', 'function % does not exist', '%s = 2^31 as a bigint: no such function'),
             (4, '''1.5''', '22P02', 'invalid input syntax for type integer: "1.5"', '%s = 1.5'),
             (5, '''NaN''', '22P02', 'invalid input syntax for type integer: "NaN"', '%s = NaN'))
     AS v(n, value, sqlstate, message, why)
WHERE i.function::text LIKE ANY (ARRAY['check_rate_limit(text,integer,integer)', 'sliding_window.check_rate_limit_tiers%',
                                       'ratelimit.consume(%', 'ratelimit."check"(%', 'ratelimit.top_offenders%'])
  AND i.name IN ('p_max_calls', 'p_email_window_seconds', 'p_limit', 'p_cost')
ORDER BY i.n, v.n;

-- Integers inside the arrays, and a bucket's burst.
INSERT INTO hostile.matrix (function, call, sqlstate, message, why)
SELECT f::regprocedure, hostile.call(f::regprocedure, v.changes::jsonb), v.sqlstate, v.message, v.why
FROM (VALUES
    (1, 'ratelimit.consume_all(text[],integer[],interval[],text[],text[],integer[],boolean[],integer)',
     '{"p_limits": "''{3,2147483648}''::integer[]"}', '22003', 'value "2147483648" is out of range for type integer', 'p_limits[2] = 2^31'),
    (2, 'ratelimit.consume_all(text[],integer[],interval[],text[],text[],integer[],boolean[],integer)',
     '{"p_limits": "ARRAY[3, 0]"}', '22023', 'p_limits[2] must be greater than zero, got 0', 'p_limits[2] = 0'),
    (3, 'ratelimit.consume_all(text[],integer[],interval[],text[],text[],integer[],boolean[],integer)',
     '{"p_limits": "ARRAY[3, -2147483648]"}', '22023', 'p_limits[2] must be greater than zero, got -2147483648', 'p_limits[2] = INT_MIN'),
    (4, 'ratelimit.consume_all(text[],integer[],interval[],text[],text[],integer[],boolean[],integer)',
     '{"p_bursts": "ARRAY[NULL, 2]"}', '22023', 'p_bursts[2] applies only to token_bucket and gcra', 'a burst for fixed_window'),
    (5, 'ratelimit.consume_all(text[],integer[],interval[],text[],text[],integer[],boolean[],integer)',
     '{"p_bursts": "ARRAY[NULL, 0]", "p_algorithms": "ARRAY[''fixed_window'', ''gcra'']"}', '22023',
     'p_bursts[2] must be greater than zero, got 0', 'gcra burst 0'),
    (6, 'ratelimit.consume_all(text[],integer[],interval[],text[],text[],integer[],boolean[],integer)',
     '{"p_bursts": "ARRAY[NULL, 2147483647]", "p_algorithms": "ARRAY[''fixed_window'', ''token_bucket'']"}', '22023',
     'p_bursts[2] is too large: %', 'token_bucket burst INT_MAX for 3 per 10 seconds'),
    (8, 'ratelimit.consume(text,integer,interval,integer,text,text,integer,text,interval)',
     '{"p_algorithm": "''gcra''", "p_burst": "-2147483648"}', '22023', 'p_burst must be greater than zero, got -2147483648', 'gcra burst INT_MIN'),
    (9, 'ratelimit.consume(text,integer,interval,integer,text,text,integer,text,interval)',
     '{"p_algorithm": "''token_bucket''", "p_burst": "2147483647"}', '22023', 'p_burst is too large: %', 'token_bucket burst INT_MAX'),
    (10, 'ratelimit.validate_limit(integer,interval,text,text,integer,text)',
     '{"p_algorithm": "''gcra''", "p_burst": "0"}', '22023', 'p_burst must be greater than zero, got 0', 'gcra burst 0'),
    (11, 'ratelimit.validate_limit(integer,interval,text,text,integer,text)',
     '{"p_algorithm": "''sliding_window''", "p_engine": "''memory''", "p_limit": "0"}', '22023',
     'p_limit must be greater than zero, got 0', 'sliding_window 0 on the memory engine'),
    (12, 'ratelimit.consume(text,integer,interval,integer,text,text,integer,text,interval)',
     '{"p_algorithm": "''sliding_window''", "p_limit": "2147483647", "p_cost": "-1"}', '22023',
     'p_cost must not be negative (got -1)', 'a negative cost on sliding_window INT_MAX on the memory engine'),
    (13, 'ratelimit.acquire(text,integer,integer,text,interval)', '{"p_cost": "0"}', '22023',
     'p_cost must be between 1 and p_limit (3), got 0', 'a lease of no units'),
    (14, 'ratelimit.acquire(text,integer,integer,text,interval)', '{"p_cost": "4"}', '22023',
     'p_cost must be between 1 and p_limit (3), got 4', 'a lease larger than its limit'),
    (15, 'ratelimit.release(bigint)', '{"p_lease": "12345"}', '22023',
     'p_lease is not a lease held now (12345): %', 'an identifier that was never a lease'),
    (16, 'ratelimit.release(bigint)', '{"p_lease": "0"}', '22023', 'p_lease is not a lease held now (0): %',
     'lease 0'),
    (17, 'ratelimit.release(bigint)', '{"p_lease": "-9223372036854775808"}', '22023',
     'p_lease is not a lease held now (-9223372036854775808): %', 'lease INT64_MIN'),
    (18, 'ratelimit.release(bigint)', '{"p_lease": "''9223372036854775808''"}', '22003',
     'value "9223372036854775808" is out of range for type bigint', 'lease 2^63'),
    (19, 'ratelimit.settle(bigint,integer)', '{"p_reservation": "12345"}', '22023',
     'p_reservation is not an open reservation (12345): %', 'an identifier that was never a reservation'),
    (20, 'ratelimit.settle(bigint,integer)', '{"p_reservation": "0"}', '22023',
     'p_reservation is not an open reservation (0): %', 'reservation 0'),
    (21, 'ratelimit.settle(bigint,integer)', '{"p_reservation": "-9223372036854775808"}', '22023',
     'p_reservation is not an open reservation (-9223372036854775808): %', 'reservation INT64_MIN'),
    (22, 'ratelimit.settle(bigint,integer)', '{"p_reservation": "''9223372036854775808''"}', '22003',
     'value "9223372036854775808" is out of range for type bigint', 'reservation 2^63'),
    (23, 'ratelimit.cancel(bigint)', '{"p_reservation": "9223372036854775807"}', '22023',
     'p_reservation is not an open reservation (9223372036854775807): %', 'reservation INT64_MAX'),
    (24, 'ratelimit.reserve(text,integer,interval,integer,text,text,integer,interval)', '{"p_hold": "''25 hours''::interval"}',
     '22023', 'p_hold must be at most 1 day', 'a hold over a day'),
    (25, 'ratelimit.refund(text,integer,interval,integer,text,text,integer,text)', '{"p_cost": "4"}',
     '22023', 'p_cost exceeds p_limit (3): a refund gives back at most what one call could take', 'a refund above the limit')
) AS v(n, f, changes, sqlstate, message, why)
ORDER BY v.n;

-- 'infinity' and '-infinity' are intervals from PostgreSQL 17 on (in 15 the literal is
-- refused): there the functions refuse them themselves.
CREATE FUNCTION hostile.infinite_intervals() RETURNS boolean
LANGUAGE sql AS $$SELECT current_setting('server_version_num')::integer >= 170000$$;

-- Delay instead of deny (consume's p_max_wait): negative, months, past 365 days, on a window
-- algorithm, and what PostgreSQL refuses itself. '0' is no delay, and no minimum applies.
INSERT INTO hostile.matrix (function, call, sqlstate, message, why)
SELECT 'ratelimit.consume(text,integer,interval,integer,text,text,integer,text,interval)',
       hostile.call('ratelimit.consume(text,integer,interval,integer,text,text,integer,text,interval)',
                    jsonb_build_object('p_max_wait', quote_literal(v.value) || '::interval') || v.extra::jsonb),
       v.sqlstate, v.message, format('p_max_wait = ''%s''%s', v.value, v.also)
FROM (VALUES
    (1, '-1 second', '{}', '22023', 'p_max_wait must not be negative (NULL or ''0'' for no delay)', ''),
    (2, '1 day -86401 seconds', '{}', '22023', 'p_max_wait must not be negative (NULL or ''0'' for no delay)', ''),
    (3, '-2147483648 days', '{}', '22023', 'p_max_wait must not be negative (NULL or ''0'' for no delay)', ''),
    (4, '1 month', '{"p_algorithm": "''gcra''"}', '22023', 'p_max_wait must not use months or years, whose length varies (use days)', ' on gcra'),
    (5, '-1 month', '{"p_algorithm": "''gcra''"}', '22023', 'p_max_wait must not use months or years, whose length varies (use days)', ' on gcra'),
    (6, 'P1Y2M', '{"p_algorithm": "''gcra''"}', '22023', 'p_max_wait must not use months or years, whose length varies (use days)', ' on gcra'),
    (7, '366 days', '{"p_algorithm": "''gcra''"}', '22023', 'p_max_wait must be at most 365 days', ' on gcra'),
    (8, '365 days 00:00:00.000001', '{"p_algorithm": "''token_bucket''"}', '22023', 'p_max_wait must be at most 365 days', ' on token_bucket'),
    (9, '2147483647 days 2562047788:00:54.775807', '{"p_algorithm": "''gcra''"}', '22023', 'p_max_wait must be at most 365 days', ' on gcra'),
    (10, '1 second', '{}', '22023', 'p_max_wait applies only to token_bucket and gcra (got fixed_window)', ' on fixed_window'),
    (11, '1 second', '{"p_algorithm": "''sliding_window''"}', '22023', 'p_max_wait applies only to token_bucket and gcra (got sliding_window)', ' on sliding_window'),
    (12, '999 microseconds', '{"p_algorithm": "''rolling_window''"}', '22023', 'p_max_wait applies only to token_bucket and gcra (got rolling_window)', ' on rolling_window'),
    (13, 'infinity', '{}', CASE WHEN hostile.infinite_intervals() THEN '22023' ELSE '22007' END,
     CASE WHEN hostile.infinite_intervals() THEN 'p_max_wait must be finite'
          ELSE 'invalid input syntax for type interval: "infinity"' END, ''),
    (14, '1000000000 years', '{}', '22008', 'interval out of range', ''),
    (15, '1 hour', '{"p_algorithm": "''gcra''", "p_burst": "0"}', '22023', 'p_burst must be greater than zero, got 0', ' on gcra with a burst of 0')
) AS v(n, value, extra, sqlstate, message, also)
ORDER BY v.n;

-- The policy forms of reserve and acquire, a lease's decision, and a policy's penalty and delay
-- columns.
INSERT INTO hostile.matrix (function, call, sqlstate, message, why)
SELECT f::regprocedure, hostile.call(f::regprocedure, v.changes::jsonb), v.sqlstate, v.message, v.why
FROM (VALUES
    (1, 'ratelimit.reserve_policy(text,text,integer,interval,text,inet,uuid)', '{"p_estimate": "-1"}', '22023',
     'p_estimate must not be negative (got -1)', 'a negative estimate'),
    (2, 'ratelimit.reserve_policy(text,text,integer,interval,text,inet,uuid)', '{"p_hold": "''2 days''::interval"}', '22023',
     'p_hold must be at most 1 day', 'a hold over a day'),
    (3, 'ratelimit.reserve_policy(text,text,integer,interval,text,inet,uuid)', '{"p_key": "repeat(''x'', 257)"}', '22023',
     'p_key must be at most 256 bytes long, got 257', 'one byte more than a policy''s subject may hold'),
    (4, 'ratelimit.reserve_policy(text,text,integer,interval,text,inet,uuid)', '{"p_policy": "''hostile.inflight''"}', '0A000',
     '%concurrency%', 'a concurrency policy: nothing to reserve'),
    (5, 'ratelimit.acquire_policy(text,text,integer,text,text,inet,uuid)', '{"p_cost": "0"}', '22023',
     'p_cost must be at least 1 (got 0)', 'a lease of no units'),
    (6, 'ratelimit.acquire_policy(text,text,integer,text,text,inet,uuid)', '{"p_policy": "''activity.create_post''"}', '22023',
     'p_policy: policy "activity.create_post" is not a concurrency policy (its quota_unit is not concurrent-requests)',
     'a rate policy: nothing to lease'),
    (7, 'ratelimit.acquire_policy(text,text,integer,text,text,inet,uuid)', '{"p_key": "repeat(''x'', 257)"}', '22023',
     'p_key must be at most 256 bytes long, got 257', 'one byte more than a policy''s subject may hold'),
    (8, 'ratelimit.lease_decision(text,ratelimit.lease)', '{"p_lease": "ROW(NULL, NULL, NULL, NULL, NULL)::ratelimit.lease"}', '22004',
     'p_lease must not be NULL', 'a lease whose every field is NULL'),
    (9, 'ratelimit.lease_decision(text,ratelimit.lease)', '{"p_lease": "ROW(1, NULL, 2, 1, NULL)::ratelimit.lease"}', '22023',
     'p_lease has no answer (allowed is NULL)', 'a lease without its answer'),
    (10, 'ratelimit.lease_decision(text,ratelimit.lease)', '{"p_policy": "''activity.create_post''"}', '22023',
     'p_policy: policy "activity.create_post" is not a concurrency policy (its quota_unit is not concurrent-requests)',
     'a rate policy''s decision for a lease'),
    (11, 'ratelimit.validate_policy_options(text,interval[],interval,interval)', '{"p_penalty_blocks": "''{}''::interval[]"}', '22023',
     'penalty_blocks must have 1 to 16 steps (got 0)', 'an empty ladder'),
    (12, 'ratelimit.validate_policy_options(text,interval[],interval,interval)', '{"p_penalty_blocks": "array_fill(''1 minute''::interval, ARRAY[17])"}', '22023',
     'penalty_blocks must have 1 to 16 steps (got 17)', 'a ladder of 17 steps'),
    (13, 'ratelimit.validate_policy_options(text,interval[],interval,interval)', '{"p_penalty_blocks": "''{1 minute,NULL}''::interval[]"}', '22004',
     'penalty_blocks must not be NULL', 'a NULL step'),
    (14, 'ratelimit.validate_policy_options(text,interval[],interval,interval)', '{"p_penalty_blocks": "''{0}''::interval[]"}', '22023',
     'penalty_blocks must be greater than zero', 'a step of 0'),
    (15, 'ratelimit.validate_policy_options(text,interval[],interval,interval)', '{"p_penalty_blocks": "''{1 month}''::interval[]"}', '22023',
     'penalty_blocks must not use months or years, whose length varies (use days)', 'a step of a month'),
    (16, 'ratelimit.validate_policy_options(text,interval[],interval,interval)', '{"p_penalty_blocks": "''{366 days}''::interval[]"}', '22023',
     'penalty_blocks must be at most 365 days', 'a step over 365 days'),
    (17, 'ratelimit.validate_policy_options(text,interval[],interval,interval)', '{"p_penalty_blocks": "''{{1 minute},{2 minutes}}''::interval[]"}', '22023',
     'penalty_blocks must be a one-dimensional array', 'a ladder of two dimensions'),
    (18, 'ratelimit.validate_policy_options(text,interval[],interval,interval)', '{"p_penalty_decay": "NULL"}', '22023',
     'penalty_decay must be given with penalty_blocks', 'a ladder without a decay'),
    (19, 'ratelimit.validate_policy_options(text,interval[],interval,interval)', '{"p_penalty_blocks": "NULL"}', '22023',
     'penalty_decay needs penalty_blocks', 'a decay without a ladder'),
    (20, 'ratelimit.validate_policy_options(text,interval[],interval,interval)', '{"p_penalty_decay": "''200 days''::interval"}', '22023',
     'penalty_decay times the number of penalty_blocks (2) must be at most 365 days', 'a ladder that drains in 400 days'),
    (21, 'ratelimit.validate_policy_options(text,interval[],interval,interval)', '{"p_algorithm": "''fixed_window''"}', '22023',
     'max_delay applies only to token_bucket and gcra (got fixed_window)', 'a delay on a fixed window')
) AS v(n, f, changes, sqlstate, message, why)
ORDER BY v.n;

-- 4. Intervals: negative, zero, months and years, past 365 days, below a millisecond, and
-- literals PostgreSQL refuses itself (infinite ones from 17 on: hostile.infinite_intervals).

-- The intervals that may be a calendar period ('1 month' without p_time_zone): p_period of the
-- calls that take p_time_zone, and of reserve, which reads its limit as consume does.
CREATE FUNCTION hostile.calendar_period(p_function regprocedure, p_name text) RETURNS boolean
LANGUAGE sql
AS $$SELECT p_name = 'p_period'
            AND EXISTS (SELECT 1 FROM hostile.arguments a
                        WHERE a.function = p_function
                          AND (a.name = 'p_time_zone' OR a.call_name = 'ratelimit.reserve'))$$;

CREATE TABLE hostile.interval_arguments (n serial, function regprocedure, name text, template text, label text);
INSERT INTO hostile.interval_arguments (function, name, template, label) VALUES
    ('ratelimit.consume(text,integer,interval,integer,text,text,integer,text,interval)', 'p_period', '%s::interval', 'p_period'),
    ('ratelimit.peek(text,integer,interval,integer,text,text,integer,text)', 'p_period', '%s::interval', 'p_period'),
    ('ratelimit.refund(text,integer,interval,integer,text,text,integer,text)', 'p_period', '%s::interval', 'p_period'),
    ('ratelimit.block(text,interval,text)', 'p_duration', '%s::interval', 'p_duration'),
    ('ratelimit.block_policy_key(text,text,interval)', 'p_duration', '%s::interval', 'p_duration'),
    ('ratelimit.acquire(text,integer,integer,text,interval)', 'p_max_hold', '%s::interval', 'p_max_hold'),
    ('ratelimit.validate_limit(integer,interval,text,text,integer,text)', 'p_period', '%s::interval', 'p_period'),
    ('ratelimit.consume_all(text[],integer[],interval[],text[],text[],integer[],boolean[],integer)', 'p_periods',
     'ARRAY[''10 seconds''::interval, %s::interval]', 'p_periods[2]'),
    ('ratelimit.allow(text,integer,interval,integer,text,text,integer,text)', 'p_period', '%s::interval', 'p_period'),
    ('ratelimit.consume_many(text[],integer,interval,integer,text,text,integer,text)', 'p_period', '%s::interval', 'p_period'),
    ('ratelimit.peek_many(text[],integer,interval,integer,text,text,integer,text)', 'p_period', '%s::interval', 'p_period'),
    ('ratelimit.reserve(text,integer,interval,integer,text,text,integer,interval)', 'p_period', '%s::interval', 'p_period'),
    ('ratelimit.reserve(text,integer,interval,integer,text,text,integer,interval)', 'p_hold', '%s::interval', 'p_hold'),
    ('ratelimit.reserve_policy(text,text,integer,interval,text,inet,uuid)', 'p_hold', '%s::interval', 'p_hold'),
    ('ratelimit.validate_policy_options(text,interval[],interval,interval)', 'p_penalty_decay', '%s::interval', 'penalty_decay'),
    ('ratelimit.validate_policy_options(text,interval[],interval,interval)', 'p_max_delay', '%s::interval', 'max_delay');

INSERT INTO hostile.matrix (function, call, sqlstate, message, why)
SELECT i.function, hostile.call(i.function, jsonb_build_object(i.name, format(i.template, quote_literal(v.value)))),
       v.sqlstate, format(v.message, i.label), format('%s = ''%s''', i.label, v.value)
FROM hostile.interval_arguments i,
     (VALUES (1, '-1 second', '22023', '%s must be greater than zero'),
             (2, '0', '22023', '%s must be greater than zero'),
             (3, '1 month', '22023', '%s must not use months or years, whose length varies (use days)'),
             (4, '1000 years', '22023', '%s must not use months or years, whose length varies (use days)'),
             (5, 'P1Y2M', '22023', '%s must not use months or years, whose length varies (use days)'),
             -- The calls that take p_time_zone: '1 month' is the UTC calendar month, no error.
             (103, '1000 years', '22023', '%s may use months only as ''1 month'' (the calendar month, in UTC unless p_time_zone is given)'),
             (104, 'P1Y2M', '22023', '%s may use months only as ''1 month'' (the calendar month, in UTC unless p_time_zone is given)'),
             (105, '2 months', '22023', '%s may use months only as ''1 month'' (the calendar month, in UTC unless p_time_zone is given)'),
             (106, '1 month 1 day', '22023', '%s may use months only as ''1 month'' (the calendar month, in UTC unless p_time_zone is given)'),
             (6, '366 days', '22023', '%s must be at most 365 days'),
             (7, '2147483647 days 2562047788:00:54.775807', '22023', '%s must be at most 365 days'),
             (8, '-2147483648 days', '22023', '%s must be at most 365 days'),
             (9, 'infinity', CASE WHEN hostile.infinite_intervals() THEN '22023' ELSE '22007' END,
              CASE WHEN hostile.infinite_intervals() THEN '%s must be finite'
                   ELSE 'invalid input syntax for type interval: "infinity"' END),
             (10, '-infinity', CASE WHEN hostile.infinite_intervals() THEN '22023' ELSE '22007' END,
              CASE WHEN hostile.infinite_intervals() THEN '%s must be finite'
                   ELSE 'invalid input syntax for type interval: "-infinity"' END),
             (11, '1000000000 years', '22008', 'interval out of range'),
             (12, '9999999999999 hours', '22015', 'interval field value out of range: "9999999999999 hours"'),
             (13, '1 fortnight', '22007', 'invalid input syntax for type interval: "1 fortnight"'))
     AS v(n, value, sqlstate, message)
WHERE CASE WHEN v.n BETWEEN 3 AND 5 THEN NOT hostile.calendar_period(i.function, i.name)
           WHEN v.n >= 100 THEN hostile.calendar_period(i.function, i.name)
           ELSE true END
ORDER BY i.n, v.n;

INSERT INTO hostile.matrix (function, call, sqlstate, message, why)
SELECT i.function, hostile.call(i.function, jsonb_build_object(i.name, format(i.template, '''999 microseconds'''))),
       '22023', i.label || ' must be at least 1 millisecond', i.label || ' = 999 microseconds'
FROM hostile.interval_arguments i WHERE i.name NOT IN ('p_duration', 'p_max_delay')
ORDER BY i.n;

INSERT INTO hostile.matrix (function, call, sqlstate, message, why)
SELECT f::regprocedure, hostile.call(f::regprocedure, jsonb_build_object(v.name, quote_literal(v.value) || '::interval')),
       v.sqlstate, v.message, format('%s = ''%s''', v.name, v.value)
FROM (VALUES
    (1, 'public.cleanup_rpc_rate_limits(interval)', 'p_older_than', '-1 second', '22023', 'p_older_than must not be negative, got -00:00:01'),
    (2, 'public.cleanup_rpc_rate_limits(interval)', 'p_older_than', '-1 month 29 days', '22023', 'p_older_than must not be negative, got %'),
    (3, 'public.cleanup_rpc_rate_limits(interval)', 'p_older_than', '-178000000 years', '22023', 'p_older_than must not be negative, got %'),
    -- From 17, 'infinity' deletes what ended more than forever ago: nothing, no error.
    (4, 'public.cleanup_rpc_rate_limits(interval)', 'p_older_than', 'infinity', '22007', 'invalid input syntax for type interval: "infinity"'),
    (104, 'public.cleanup_rpc_rate_limits(interval)', 'p_older_than', '-infinity', '22023', 'p_older_than must not be negative, got -infinity'),
    (5, 'public.cleanup_rpc_rate_limits(interval)', 'p_older_than', '1000000000 years', '22008', 'interval out of range'),
    (6, 'ratelimit.describe_period(interval)', 'p_period', 'infinity', '22007', 'invalid input syntax for type interval: "infinity"'),
    (106, 'ratelimit.describe_period(interval)', 'p_period', 'infinity', '0A000', 'cannot convert infinity to bigint'),
    (7, 'ratelimit.describe_period(interval)', 'p_period', '1000000000 years', '22008', 'interval out of range')
) AS v(n, f, name, value, sqlstate, message)
WHERE CASE WHEN v.n IN (4, 6) THEN NOT hostile.infinite_intervals()
           WHEN v.n > 100 THEN hostile.infinite_intervals()
           ELSE true END
ORDER BY v.n % 100, v.n;

-- 5. Names: unknown, differently cased, padded, SQL, 1 MB long (the message quotes 64 bytes of
-- it), not UTF-8.
CREATE TABLE hostile.name_arguments (n serial, function regprocedure, name text, template text, message text);
INSERT INTO hostile.name_arguments (function, name, template, message) VALUES
    ('ratelimit.consume(text,integer,interval,integer,text,text,integer,text,interval)', 'p_algorithm', '%s',
     'p_algorithm must be one of fixed_window, rolling_window, sliding_window, sliding_window_counter, token_bucket, gcra (got "%s")'),
    ('ratelimit.peek(text,integer,interval,integer,text,text,integer,text)', 'p_algorithm', '%s',
     'p_algorithm must be one of fixed_window, rolling_window, sliding_window, sliding_window_counter, token_bucket, gcra (got "%s")'),
    ('ratelimit.refund(text,integer,interval,integer,text,text,integer,text)', 'p_algorithm', '%s',
     'p_algorithm must be one of fixed_window, rolling_window, sliding_window, sliding_window_counter, token_bucket, gcra (got "%s")'),
    ('ratelimit.validate_limit(integer,interval,text,text,integer,text)', 'p_algorithm', '%s',
     'p_algorithm must be one of fixed_window, rolling_window, sliding_window, sliding_window_counter, token_bucket, gcra (got "%s")'),
    ('ratelimit.consume_all(text[],integer[],interval[],text[],text[],integer[],boolean[],integer)', 'p_algorithms',
     'ARRAY[''fixed_window'', %s]',
     'p_algorithms[2] must be one of fixed_window, rolling_window, sliding_window, sliding_window_counter, token_bucket, gcra (got "%s")'),
    ('ratelimit.consume(text,integer,interval,integer,text,text,integer,text,interval)', 'p_engine', '%s',
     'p_engine must be one of table, unlogged, memory (got "%s")'),
    ('ratelimit.reset(text,text)', 'p_engine', '%s', 'p_engine must be one of table, unlogged, memory (got "%s")'),
    ('ratelimit.block(text,interval,text)', 'p_engine', '%s', 'p_engine must be one of table, unlogged, memory (got "%s")'),
    ('ratelimit.validate_limit(integer,interval,text,text,integer,text)', 'p_engine', '%s',
     'p_engine must be one of table, unlogged, memory (got "%s")'),
    ('ratelimit.cleanup_key_state(text)', 'p_engine', '%s', 'p_engine must be one of table, unlogged (got "%s")'),
    ('ratelimit.consume_all(text[],integer[],interval[],text[],text[],integer[],boolean[],integer)', 'p_engines',
     'ARRAY[''table'', %s]', 'p_engines[2] must be one of table, unlogged, memory (got "%s")'),
    ('ratelimit.check(text,text,integer,text,inet,uuid)', 'p_policy', '%s', 'p_policy: unknown policy "%s"'),
    ('ratelimit.check_all(text[],text[],integer,text,inet,uuid)', 'p_policies', 'ARRAY[''activity.create_post'', %s]',
     'p_policies[2]: unknown policy "%s"'),
    ('ratelimit.check_http(text[],text[],integer,text,inet,uuid,text,text)', 'p_policies', 'ARRAY[%s]',
     'p_policies[1]: unknown policy "%s"'),
    ('ratelimit.decide_policies(text[],text[],integer,text,inet,uuid,text,text)', 'p_policies', 'ARRAY[%s]',
     'p_policies[1]: unknown policy "%s"'),
    ('ratelimit.check(text,text,integer,text,inet,uuid)', 'p_tier', '%s', 'p_tier: unknown tier "%s"'),
    ('ratelimit.check_all(text[],text[],integer,text,inet,uuid)', 'p_tier', '%s', 'p_tier: unknown tier "%s"'),
    ('ratelimit.check_http(text[],text[],integer,text,inet,uuid,text,text)', 'p_tier', '%s', 'p_tier: unknown tier "%s"'),
    ('ratelimit.http_headers(ratelimit.policy_decision,text)', 'p_reset_format', '%s',
     'p_reset_format must be one of iso8601, unix (got "%s")'),
    ('ratelimit.check_http(text[],text[],integer,text,inet,uuid,text,text)', 'p_reset_format', '%s',
     'p_reset_format must be one of iso8601, unix (got "%s")'),
    ('ratelimit.http_body(ratelimit.policy_decision,text)', 'p_shape', '%s',
     'p_shape must be one of error_message, detailed, problem (got "%s")'),
    ('ratelimit.check_http(text[],text[],integer,text,inet,uuid,text,text)', 'p_body_shape', '%s',
     'p_body_shape must be one of error_message, detailed, problem (got "%s")'),
    ('ratelimit.load_preset(text,boolean)', 'p_preset', '%s', 'p_preset: unknown preset "%s"'),
    ('ratelimit.reset_policy_key(text,text)', 'p_policy', '%s', 'p_policy: unknown policy "%s"'),
    ('ratelimit.block_policy_key(text,text,interval)', 'p_policy', '%s', 'p_policy: unknown policy "%s"'),
    ('ratelimit.allow(text,integer,interval,integer,text,text,integer,text)', 'p_algorithm', '%s',
     'p_algorithm must be one of fixed_window, rolling_window, sliding_window, sliding_window_counter, token_bucket, gcra (got "%s")'),
    ('ratelimit.consume_many(text[],integer,interval,integer,text,text,integer,text)', 'p_algorithm', '%s',
     'p_algorithm must be one of fixed_window, rolling_window, sliding_window, sliding_window_counter, token_bucket, gcra (got "%s")'),
    ('ratelimit.peek_many(text[],integer,interval,integer,text,text,integer,text)', 'p_engine', '%s', 'p_engine must be one of table, unlogged, memory (got "%s")'),
    ('ratelimit.check_many(text,text[],integer,text,inet,uuid)', 'p_policy', '%s', 'p_policy: unknown policy "%s"'),
    ('ratelimit.check_many(text,text[],integer,text,inet,uuid)', 'p_tier', '%s', 'p_tier: unknown tier "%s"'),
    ('ratelimit.acquire(text,integer,integer,text,interval)', 'p_scope', '%s', 'p_scope must be transaction or session (got "%s")'),
    ('ratelimit.reserve(text,integer,interval,integer,text,text,integer,interval)', 'p_algorithm', '%s',
     'p_algorithm must be one of fixed_window, rolling_window, sliding_window, sliding_window_counter, token_bucket, gcra (got "%s")'),
    ('ratelimit.reserve(text,integer,interval,integer,text,text,integer,interval)', 'p_engine', '%s',
     'p_engine must be one of table, unlogged, memory (got "%s")'),
    ('ratelimit.reserve_policy(text,text,integer,interval,text,inet,uuid)', 'p_policy', '%s', 'p_policy: unknown policy "%s"'),
    ('ratelimit.reserve_policy(text,text,integer,interval,text,inet,uuid)', 'p_tier', '%s', 'p_tier: unknown tier "%s"'),
    ('ratelimit.acquire_policy(text,text,integer,text,text,inet,uuid)', 'p_policy', '%s', 'p_policy: unknown policy "%s"'),
    ('ratelimit.acquire_policy(text,text,integer,text,text,inet,uuid)', 'p_tier', '%s', 'p_tier: unknown tier "%s"'),
    ('ratelimit.acquire_policy(text,text,integer,text,text,inet,uuid)', 'p_scope', '%s', 'p_scope must be transaction or session (got "%s")'),
    ('ratelimit.lease_decision(text,ratelimit.lease)', 'p_policy', '%s', 'p_policy: unknown policy "%s"'),
    ('ratelimit.validate_policy_options(text,interval[],interval,interval)', 'p_algorithm', '%s',
     'p_algorithm must be one of fixed_window, rolling_window, sliding_window, sliding_window_counter, token_bucket, gcra (got "%s")');

-- For each name: something unknown, its known value in capitals, the known value padded, SQL.
CREATE TABLE hostile.known_names (name text PRIMARY KEY, unknown text, known text);
INSERT INTO hostile.known_names VALUES
    ('p_algorithm', 'leaky_bucket', 'fixed_window'), ('p_algorithms', 'leaky_bucket', 'fixed_window'),
    ('p_engine', 'redis', 'table'), ('p_engines', 'redis', 'table'),
    ('p_policy', 'no.such.policy', 'activity.create_post'), ('p_policies', 'no.such.policy', 'activity.update_post'),
    ('p_tier', 'gold', 'premium'), ('p_reset_format', 'rfc1123', 'iso8601'),
    ('p_shape', 'xml', 'detailed'), ('p_body_shape', 'xml', 'problem'),
    ('p_preset', 'no-such-preset', 'social-activity'), ('p_scope', 'forever', 'transaction');

INSERT INTO hostile.matrix (function, call, sqlstate, message, why)
SELECT a.function, hostile.call(a.function, jsonb_build_object(a.name, format(a.template, quote_literal(v.value)))),
       '22023', replace(a.message, '%s', v.value), format('%s = %s', a.name, v.label)
FROM hostile.name_arguments a JOIN hostile.known_names k ON k.name = a.name,
     LATERAL (VALUES (1, k.unknown, 'an unknown name'),
                     (2, upper(k.known), 'the known name in capitals'),
                     (3, ' ' || k.known || ' ', 'the known name padded with spaces'),
                     (4, k.known || '''; DROP TABLE ratelimit.policies; --', 'the known name followed by SQL')) AS v(n, value, label)
ORDER BY a.n, v.n;

INSERT INTO hostile.matrix (function, call, sqlstate, message, why)
SELECT a.function, hostile.call(a.function, jsonb_build_object(a.name, format(a.template, v.value))),
       v.sqlstate, CASE WHEN v.sqlstate = '22023' THEN replace(a.message, '%s', v.quoted) ELSE v.message END,
       format('%s = %s', a.name, v.label)
FROM hostile.name_arguments a,
     (VALUES (1, 'repeat(''x'', 1048576)', '22023', repeat('x', 64), NULL, '1 MB of x (the message quotes 64 bytes)'),
             (2, '''''', '22023', '', NULL, 'empty'),
             (3, 'convert_from(''\xff''::bytea, ''UTF8'')', '22021', NULL,
              'invalid byte sequence for encoding "UTF8": 0xff', 'not UTF-8')) AS v(n, value, sqlstate, quoted, message, label)
ORDER BY a.n, v.n;

-- Time zones (p_time_zone): unknown, padded, SQL, 1 MB long, not UTF-8, and the calendar
-- periods they allow only with fixed_window.
INSERT INTO hostile.matrix (function, call, sqlstate, message, why)
SELECT a.function, hostile.call(a.function, v.changes::jsonb), v.sqlstate, v.message, v.why
FROM hostile.arguments a,
     (VALUES (1, '{"p_period": "''1 day''::interval", "p_time_zone": "''Mars/Olympus_Mons''"}', '22023',
              'p_time_zone must name a time zone PostgreSQL knows, such as Europe/Berlin or UTC (got "Mars/Olympus_Mons")',
              'an unknown time zone'),
             (2, '{"p_period": "''1 day''::interval", "p_time_zone": "''''"}', '22023',
              'p_time_zone must name a time zone PostgreSQL knows, such as Europe/Berlin or UTC (got "")',
              'an empty time zone'),
             (3, '{"p_period": "''1 day''::interval", "p_time_zone": "'' UTC ''"}', '22023',
              'p_time_zone must name a time zone PostgreSQL knows, such as Europe/Berlin or UTC (got " UTC ")',
              'a time zone padded with spaces'),
             (4, '{"p_period": "''1 day''::interval", "p_time_zone": "''UTC''''; DROP TABLE ratelimit.policies; --''"}', '22023',
              'p_time_zone must name a time zone PostgreSQL knows, such as Europe/Berlin or UTC (got "UTC''; DROP TABLE ratelimit.policies; --")',
              'a time zone followed by SQL'),
             (5, '{"p_period": "''1 day''::interval", "p_time_zone": "repeat(''x'', 1048576)"}', '22023',
              'p_time_zone must name a time zone PostgreSQL knows, such as Europe/Berlin or UTC (got "' || repeat('x', 64) || '")',
              '1 MB of x as a time zone (the message quotes 64 bytes)'),
             (6, '{"p_period": "''1 day''::interval", "p_time_zone": "convert_from(''\\xff''::bytea, ''UTF8'')"}', '22021',
              'invalid byte sequence for encoding "UTF8": 0xff', 'a time zone not in UTF-8'),
             (7, '{"p_time_zone": "''UTC''"}', '22023',
              'p_period must be ''1 day'', ''1 week'' or ''1 month'' with p_time_zone (a calendar window from local midnight)',
              'a time zone with a period of 10 seconds'),
             (8, '{"p_period": "''24 hours''::interval", "p_time_zone": "''UTC''"}', '22023',
              'p_period must be ''1 day'', ''1 week'' or ''1 month'' with p_time_zone (a calendar window from local midnight)',
              'a time zone with 24 hours (not a calendar day)'),
             (9, '{"p_period": "''1 day''::interval", "p_time_zone": "''Europe/Berlin''", "p_algorithm": "''token_bucket''"}', '22023',
              'p_algorithm must be fixed_window for a calendar period: calendar windows need fixed_window (got token_bucket)',
              'a calendar day with token_bucket'),
             (10, '{"p_period": "''1 month''::interval", "p_algorithm": "''sliding_window''"}', '22023',
              'p_algorithm must be fixed_window for a calendar period: calendar windows need fixed_window (got sliding_window)',
              'the UTC month with sliding_window')) AS v(n, changes, sqlstate, message, why)
WHERE a.name = 'p_time_zone'
ORDER BY a.function::text, v.n;

-- 6. Arrays: empty, too many, mismatched lengths, more than one dimension, repeated entries.
INSERT INTO hostile.matrix (function, call, sqlstate, message, why, todo)
SELECT f::regprocedure, hostile.call(f::regprocedure, v.changes::jsonb), v.sqlstate, v.message, v.why, v.todo
FROM (VALUES
    (1, 'ratelimit.consume_all(text[],integer[],interval[],text[],text[],integer[],boolean[],integer)',
     '{"p_keys": "''{}''::text[]", "p_limits": "''{}''::integer[]", "p_periods": "''{}''::interval[]", "p_algorithms": "NULL", "p_engines": "NULL", "p_bursts": "NULL", "p_enforced": "NULL"}',
     '22023', 'p_keys must have 1 to 16 elements (got 0)', 'no keys', NULL),
    (2, 'ratelimit.consume_all(text[],integer[],interval[],text[],text[],integer[],boolean[],integer)',
     '{"p_keys": "(SELECT array_agg(''k'' || i) FROM generate_series(1, 17) i)", "p_limits": "array_fill(3, ARRAY[17])", "p_periods": "array_fill(''10 seconds''::interval, ARRAY[17])", "p_algorithms": "NULL", "p_engines": "NULL", "p_bursts": "NULL", "p_enforced": "NULL"}',
     '22023', 'p_keys must have 1 to 16 elements (got 17)', '17 keys', NULL),
    (3, 'ratelimit.consume_all(text[],integer[],interval[],text[],text[],integer[],boolean[],integer)',
     '{"p_limits": "array_fill(3, ARRAY[200000000])"}', '54000', 'array size exceeds the maximum allowed (134217727)',
     '200 million limits: PostgreSQL refuses the array', NULL),
    (4, 'ratelimit.consume_all(text[],integer[],interval[],text[],text[],integer[],boolean[],integer)',
     '{"p_limits": "ARRAY[3]"}', '22023', 'p_limits must have as many elements as p_keys (2, got 1)', 'one limit for two keys', NULL),
    (5, 'ratelimit.consume_all(text[],integer[],interval[],text[],text[],integer[],boolean[],integer)',
     '{"p_periods": "ARRAY[''1 second'', ''1 second'', ''1 second'']::interval[]"}', '22023',
     'p_periods must have as many elements as p_keys (2, got 3)', 'three periods for two keys', NULL),
    (6, 'ratelimit.consume_all(text[],integer[],interval[],text[],text[],integer[],boolean[],integer)',
     '{"p_algorithms": "''{}''::text[]"}', '22023', 'p_algorithms must have as many elements as p_keys (2, got 0)', 'no algorithms for two keys', NULL),
    (7, 'ratelimit.consume_all(text[],integer[],interval[],text[],text[],integer[],boolean[],integer)',
     '{"p_engines": "ARRAY[''table'']"}', '22023', 'p_engines must have as many elements as p_keys (2, got 1)', 'one engine for two keys', NULL),
    (8, 'ratelimit.consume_all(text[],integer[],interval[],text[],text[],integer[],boolean[],integer)',
     '{"p_bursts": "ARRAY[1, 1, 1]"}', '22023', 'p_bursts must have as many elements as p_keys (2, got 3)', 'three bursts for two keys', NULL),
    (9, 'ratelimit.consume_all(text[],integer[],interval[],text[],text[],integer[],boolean[],integer)',
     '{"p_enforced": "ARRAY[true]"}', '22023', 'p_enforced must have as many elements as p_keys (2, got 1)', 'one flag for two keys', NULL),
    (10, 'ratelimit.consume_all(text[],integer[],interval[],text[],text[],integer[],boolean[],integer)',
     '{"p_keys": "''{{hostile:k,hostile:j}}''::text[]"}', '22023', 'p_keys must be a one-dimensional array', 'a 1x2 key array', NULL),
    (11, 'ratelimit.consume_all(text[],integer[],interval[],text[],text[],integer[],boolean[],integer)',
     '{"p_limits": "''{{3},{3}}''::integer[]"}', '22023', 'p_limits must be a one-dimensional array', 'a 2x1 limit array', NULL),
    (12, 'ratelimit.consume_all(text[],integer[],interval[],text[],text[],integer[],boolean[],integer)',
     '{"p_periods": "''{{1 second,1 second}}''::interval[]"}', '22023', 'p_periods must be a one-dimensional array', 'a 1x2 period array', NULL),
    (13, 'ratelimit.consume_all(text[],integer[],interval[],text[],text[],integer[],boolean[],integer)',
     '{"p_algorithms": "''{{fixed_window},{fixed_window}}''::text[]"}', '22023', 'p_algorithms must be a one-dimensional array', 'a 2x1 algorithm array', NULL),
    (14, 'ratelimit.consume_all(text[],integer[],interval[],text[],text[],integer[],boolean[],integer)',
     '{"p_engines": "''{{table,memory}}''::text[]"}', '22023', 'p_engines must be a one-dimensional array', 'a 1x2 engine array', NULL),
    (15, 'ratelimit.consume_all(text[],integer[],interval[],text[],text[],integer[],boolean[],integer)',
     '{"p_bursts": "''{{NULL},{NULL}}''::integer[]"}', '22023', 'p_bursts must be a one-dimensional array', 'a 2x1 burst array', NULL),
    (16, 'ratelimit.consume_all(text[],integer[],interval[],text[],text[],integer[],boolean[],integer)',
     '{"p_enforced": "''{{true,true}}''::boolean[]"}', '22023', 'p_enforced must be a one-dimensional array', 'a 1x2 flag array', NULL),
    (17, 'ratelimit.consume_all(text[],integer[],interval[],text[],text[],integer[],boolean[],integer)',
     '{"p_keys": "ARRAY[''hostile:k'', ''hostile:k'']", "p_engines": "ARRAY[''table'', ''table'']"}', '22023',
     'p_keys[2] repeats p_keys[1] on the same engine: each key may appear once', 'one key twice on one engine', NULL),
    (18, 'ratelimit.check_all(text[],text[],integer,text,inet,uuid)',
     '{"p_policies": "''{}''::text[]", "p_keys": "''{}''::text[]"}', '22023', 'p_policies must have 1 to 16 elements (got 0)', 'no policies', NULL),
    (19, 'ratelimit.check_all(text[],text[],integer,text,inet,uuid)',
     '{"p_policies": "array_fill(''activity.create_post''::text, ARRAY[17])", "p_keys": "array_fill(''k''::text, ARRAY[17])"}',
     '22023', 'p_policies must have 1 to 16 elements (got 17)', '17 policies', NULL),
    (20, 'ratelimit.check_all(text[],text[],integer,text,inet,uuid)',
     '{"p_keys": "ARRAY[''hostile-subject'']"}', '22023', 'p_keys must have as many elements as p_policies (2, got 1)', 'one key for two policies', NULL),
    (21, 'ratelimit.check_all(text[],text[],integer,text,inet,uuid)',
     '{"p_policies": "ARRAY[''activity.create_post'', ''activity.create_post'']"}', '22023',
     'p_policies[2]: policy "activity.create_post" is listed twice', 'one policy twice', NULL),
    (22, 'ratelimit.check_all(text[],text[],integer,text,inet,uuid)',
     '{"p_policies": "''{{activity.create_post,activity.update_post}}''::text[]"}', '22023', 'p_policies %dimension%',
     'a 1x2 policy array: the same refusal as consume_all''s (22023 naming the argument), not a NULL element', NULL),
    (23, 'ratelimit.check_all(text[],text[],integer,text,inet,uuid)',
     '{"p_keys": "''{{hostile-subject},{hostile-subject}}''::text[]"}', '22023', 'p_keys %dimension%',
     'a 2x1 key array: the same refusal as consume_all''s (22023 naming the argument), not a NULL element', NULL),
    (24, 'ratelimit.check_http(text[],text[],integer,text,inet,uuid,text,text)',
     '{"p_policies": "ARRAY[''activity.create_post'', ''activity.update_post'']"}', '22023',
     'p_keys must have as many elements as p_policies (2, got 1)', 'two policies, one key', NULL),
    (25, 'ratelimit.check_http(text[],text[],integer,text,inet,uuid,text,text)',
     '{"p_policies": "''{{activity.create_post}}''::text[]", "p_keys": "''{{hostile-subject}}''::text[]"}', '22023', 'p_policies %dimension%',
     'a 1x1 policy array: the same refusal as consume_all''s (22023 naming the argument), not a NULL element', NULL),
    (26, 'ratelimit.decide_policies(text[],text[],integer,text,inet,uuid,text,text)',
     '{"p_keys": "ARRAY[''a'', ''b'']"}', '22023', 'p_keys must have as many elements as p_policies (1, got 2)', 'two keys, one policy', NULL),
    (27, 'ratelimit.record_outcomes(text[],text[],text[])',
     '{"p_subjects": "ARRAY[''a'', ''b'']"}', '22023', 'p_outcomes must have as many elements as p_policies', 'two subjects, one policy', NULL),
    (28, 'ratelimit.record_outcomes(text[],text[],text[])',
     '{"p_outcomes": "''{}''::text[]"}', '22023', 'p_outcomes must have as many elements as p_policies', 'no outcome, one policy', NULL),
    (29, 'ratelimit.record_outcomes(text[],text[],text[])',
     '{"p_policies": "NULL"}', '22023', 'p_outcomes must have as many elements as p_policies', 'no policies, one subject and outcome', NULL),
    (30, 'ratelimit.consume_many(text[],integer,interval,integer,text,text,integer,text)', '{"p_keys": "''{}''::text[]"}', '22023', 'p_keys must have 1 to 10000 elements (got 0)', 'no keys', NULL),
    (31, 'ratelimit.consume_many(text[],integer,interval,integer,text,text,integer,text)', '{"p_keys": "(SELECT array_agg(''hostile:k'' || i) FROM generate_series(1, 10001) i)"}', '22023',
     'p_keys must have 1 to 10000 elements (got 10001)', '10,001 keys', NULL),
    (32, 'ratelimit.consume_many(text[],integer,interval,integer,text,text,integer,text)', '{"p_keys": "''{{hostile:k},{hostile:j}}''::text[]"}', '22023', 'p_keys must be a one-dimensional array', 'a 2x1 key array', NULL),
    (33, 'ratelimit.peek_many(text[],integer,interval,integer,text,text,integer,text)', '{"p_keys": "''{}''::text[]"}', '22023', 'p_keys must have 1 to 10000 elements (got 0)', 'no keys', NULL),
    (34, 'ratelimit.peek_many(text[],integer,interval,integer,text,text,integer,text)', '{"p_keys": "''{{hostile:k,hostile:j}}''::text[]"}', '22023', 'p_keys must be a one-dimensional array', 'a 1x2 key array', NULL),
    (35, 'ratelimit.check_many(text,text[],integer,text,inet,uuid)', '{"p_subjects": "''{}''::text[]"}', '22023', 'p_subjects must have 1 to 10000 elements (got 0)', 'no subjects', NULL),
    (36, 'ratelimit.check_many(text,text[],integer,text,inet,uuid)', '{"p_subjects": "array_fill(''s''::text, ARRAY[10001])"}', '22023',
     'p_subjects must have 1 to 10000 elements (got 10001)', '10,001 subjects', NULL),
    (37, 'ratelimit.check_many(text,text[],integer,text,inet,uuid)', '{"p_subjects": "''{{hostile-subject},{hostile-subject}}''::text[]"}', '22023',
     'p_subjects must be a one-dimensional array', 'a 2x1 subject array', NULL)
) AS v(n, f, changes, sqlstate, message, why, todo)
ORDER BY v.n;

-- An outcome that is none of the three: refused, and nothing counted, not even the elements
-- before it.
INSERT INTO hostile.matrix (function, call, sqlstate, message, why)
SELECT 'ratelimit.record_outcomes(text[],text[],text[])',
       hostile.call('ratelimit.record_outcomes(text[],text[],text[])', v.changes), '22023',
       'p_outcomes must hold allowed, denied or shadow_denied', v.why
FROM hostile.run AS r, LATERAL (VALUES
    (1, jsonb_build_object('p_policies', format('ARRAY[%L]', r.counter_name || '.new'), 'p_outcomes', 'ARRAY[''bogus'']'),
     'an unknown outcome for a policy not counted yet'),
    (2, jsonb_build_object('p_policies', format('ARRAY[%L, %L]', r.counter_name, r.counter_name || '.2'),
                           'p_subjects', 'ARRAY[''s1'', ''s2'']', 'p_outcomes', 'ARRAY[''denied'', ''bogus'']'),
     'a denial, then an unknown outcome'),
    (3, jsonb_build_object('p_outcomes', 'ARRAY[''ALLOWED'']'), 'an outcome in capitals for a policy already counted')) AS v(n, changes, why)
ORDER BY v.n;

-- 7. The caller's identity (the per-RPC limits count it, the endpoint limits spend only its
-- quota): malformed claims are refused (22023 naming the setting), never taken as anonymous.
INSERT INTO hostile.matrix (function, call, sqlstate, message, why)
SELECT f::regprocedure,
       format('SELECT hostile.with_setting(%L, %s, %L)', v.setting, v.value, hostile.call(f::regprocedure)),
       v.sqlstate, v.message, v.why
FROM (VALUES ('public.check_rate_limit(text,integer,integer)'),
             ('public.increment_rate_limit(uuid,text,integer,integer,integer)')) AS fs(f),
     (VALUES
        (1, 'request.jwt.claims', '''[1]''', '22023', 'request.jwt.claims must be a JSON object', 'claims that are an array'),
        (2, 'request.jwt.claims', '''not json''', '22023', 'request.jwt.claims must be a JSON object', 'claims that are not JSON'),
        (3, 'request.jwt.claims', '''{"sub":"a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11"} trailing''', '22023',
         'request.jwt.claims must be a JSON object', 'a valid object followed by garbage'),
        (4, 'request.jwt.claims', '''{"sub":"a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11\u0000"}''', '22023',
         'request.jwt.claims must be a JSON object', 'a \u0000 escape in the sub'),
        (5, 'request.jwt.claims', '''{"a":'' || repeat(''['', 100000) || repeat('']'', 100000) || '',"sub":"a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11"}''',
         '22023', 'request.jwt.claims must be a JSON object', 'claims nested 100000 deep'),
        (6, 'request.jwt.claims', '$c${"sub":"''; DROP TABLE ratelimit.policies; --"}$c$', '22023',
         'request.jwt.claims has a "sub" claim that is not a UUID', 'SQL as the sub'),
        (7, 'request.jwt.claims', '''{"sub":12345}''', '22023', 'request.jwt.claims has a "sub" claim that is not a string or null', 'a number as the sub'),
        (8, 'request.jwt.claims', '''{"sub":"a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11","sub":"nobody"}''', '22023',
         'request.jwt.claims has a "sub" claim that is not a UUID', 'a second sub that is not a UUID (the last one counts)'),
        (9, 'request.jwt.claims', '''{"sub":"{a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11}"}''', '22023',
         'request.jwt.claims has a "sub" claim that is not a UUID', 'a UUID in braces'),
        (10, 'request.jwt.claims', '''{"sub":"a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11 "}''', '22023',
         'request.jwt.claims has a "sub" claim that is not a UUID', 'a UUID with a trailing space'),
        (11, 'request.jwt.claims', '''{"sub":'' || repeat(''"x'', 1) || repeat(''x'', 1048576) || ''"}''', '22023',
         'request.jwt.claims has a "sub" claim that is not a UUID', 'a 1 MB sub'),
        (12, 'request.jwt.claim.sub', $s$'''; DROP TABLE ratelimit.policies; --'$s$, '22023', 'request.jwt.claim.sub must be a UUID',
         'SQL as request.jwt.claim.sub'))
     AS v(n, setting, value, sqlstate, message, why)
ORDER BY fs.f, v.n;

INSERT INTO hostile.matrix (function, call, sqlstate, message, why) VALUES
    ('public.increment_rate_limit(uuid,text,integer,integer,integer)',
     hostile.call('public.increment_rate_limit(uuid,text,integer,integer,integer)',
                  '{"p_user_id": "''b1ffcd00-0000-4000-8000-000000000002''::uuid"}'),
     '42501', 'p_user_id must be the caller''s own id (the JWT sub)', 'another user''s quota'),
    ('public.check_rate_limit_for_user(uuid,text,integer,integer)',
     hostile.call('public.check_rate_limit_for_user(uuid,text,integer,integer)', '{"p_user_id": "''nobody''::uuid"}'),
     '22P02', 'invalid input syntax for type uuid: "nobody"', 'a user id that is not a UUID'),
    ('ratelimit.check(text,text,integer,text,inet,uuid)',
     hostile.call('ratelimit.check(text,text,integer,text,inet,uuid)', '{"p_user": "''''''; DROP TABLE ratelimit.policies; --''::uuid"}'),
     '22P02', 'invalid input syntax for type uuid: %', 'SQL as p_user'),
    ('ratelimit.check(text,text,integer,text,inet,uuid)',
     hostile.call('ratelimit.check(text,text,integer,text,inet,uuid)', '{"p_ip": "''not-an-ip''::inet"}'),
     '22P02', 'invalid input syntax for type inet: "not-an-ip"', 'p_ip that is not an address'),
    ('ratelimit.check_all(text[],text[],integer,text,inet,uuid)',
     hostile.call('ratelimit.check_all(text[],text[],integer,text,inet,uuid)', '{"p_ip": "''203.0.113.7/33''::inet"}'),
     '22P02', 'invalid input syntax for type inet: "203.0.113.7/33"', 'p_ip with a 33-bit mask'),
    ('ratelimit.check_http(text[],text[],integer,text,inet,uuid,text,text)',
     hostile.call('ratelimit.check_http(text[],text[],integer,text,inet,uuid,text,text)', '{"p_ip": "''999.0.0.1''::inet"}'),
     '22P02', 'invalid input syntax for type inet: "999.0.0.1"', 'p_ip with an octet above 255');

-- 8. Settings the extension reads: refused when set, so no call ever sees them.
INSERT INTO hostile.matrix (function, call, sqlstate, message, why)
SELECT v.f::regprocedure, format('SELECT set_config(%L, %L, true), %s', v.setting, v.value, v.tail), '22023', v.message, v.why
FROM (VALUES
    (1, 'ratelimit.clock_now()', 'ratelimit.test_clock', 'infinity', 'ratelimit.clock_now()',
     'invalid value for parameter "ratelimit.test_clock": "infinity"', 'a test clock at infinity'),
    (2, 'ratelimit.clock_now()', 'ratelimit.test_clock', '10000-01-01 00:00:00+00', 'ratelimit.clock_now()',
     'invalid value for parameter "ratelimit.test_clock": %', 'a test clock in the year 10000'),
    (3, 'ratelimit.clock_now()', 'ratelimit.test_clock', '1969-12-31 23:59:59+00', 'ratelimit.clock_now()',
     'invalid value for parameter "ratelimit.test_clock": %', 'a test clock before 1970'),
    (4, 'ratelimit.clock_now()', 'ratelimit.test_clock', '''; DROP TABLE ratelimit.policies; --', 'ratelimit.clock_now()',
     'invalid value for parameter "ratelimit.test_clock": %', 'SQL as the test clock'),
    (5, 'ratelimit.check(text,text,integer,text,inet,uuid)', 'ratelimit.denial_log_size', '-1',
     'ratelimit.check(''activity.create_post'', ''hostile-subject'')', '-1 is outside the valid range for parameter "ratelimit.denial_log_size"%',
     'a negative denial log size'),
    (6, 'ratelimit.check(text,text,integer,text,inet,uuid)', 'ratelimit.denial_log_sample_rate', 'NaN',
     'ratelimit.check(''activity.create_post'', ''hostile-subject'')', 'invalid value for parameter "ratelimit.denial_log_sample_rate": "NaN"',
     'a denial sample rate of NaN'),
    (7, 'ratelimit.check(text,text,integer,text,inet,uuid)', 'ratelimit.denial_log_sample_rate', '2',
     'ratelimit.check(''activity.create_post'', ''hostile-subject'')', '2 is outside the valid range for parameter "ratelimit.denial_log_sample_rate"%',
     'a denial sample rate of 2'),
    (8, 'public.check_rate_limit(text,integer,integer)', 'ratelimit.dropin_engine', 'redis',
     'public.check_rate_limit(p_rpc_name => ''hostile-rpc'', p_max_calls => 10, p_window_minutes => 1)',
     'invalid value for parameter "ratelimit.dropin_engine": "redis"',
     'a drop-in engine that does not exist'),
    (9, 'public.increment_rate_limit(uuid,text,integer,integer,integer)', 'ratelimit.dropin_engine', '',
     'public.increment_rate_limit(''a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11'', ''hostile-endpoint'', 10, 60, 1)',
     'invalid value for parameter "ratelimit.dropin_engine": ""', 'an empty drop-in engine'),
    (10, 'sliding_window.check_rate_limit(text,integer,integer,integer)', 'ratelimit.dropin_engine', ' memory',
     'sliding_window.check_rate_limit(''hostile-bucket'', 10, 60, 1)', 'invalid value for parameter "ratelimit.dropin_engine": " memory"',
     'a padded drop-in engine'),
    (11, 'sliding_window.check_rate_limit_tiers(text,text,integer,integer,integer,integer,integer,integer)', 'ratelimit.dropin_engine',
     '''; DROP TABLE public.rpc_rate_limits; --', 'sliding_window.check_rate_limit_tiers(''198.51.100.7'', ''hostile@example.com'')',
     'invalid value for parameter "ratelimit.dropin_engine": %', 'SQL as the drop-in engine'),
    (12, 'ratelimit.consume(text,integer,interval,integer,text,text,integer,text,interval)', 'ratelimit.memory_when_full', 'forget',
     'ratelimit.consume(''hostile-when-full'', 3, ''10 seconds'', p_engine => ''memory'')',
     'invalid value for parameter "ratelimit.memory_when_full": "forget"', 'a memory engine that forgets when full'),
    (13, 'ratelimit.pre_request()', 'ratelimit.client_ip_header', 'X-Forwarded-For',
     'ratelimit.pre_request()', 'invalid value for parameter "ratelimit.client_ip_header": "X-Forwarded-For"',
     'a client address header not in lower case'),
    (14, 'ratelimit.pre_request()', 'ratelimit.client_ip_header', 'x-forwarded-for; DROP TABLE ratelimit.request_routes',
     'ratelimit.pre_request()', 'invalid value for parameter "ratelimit.client_ip_header": %',
     'SQL as the client address header'),
    (15, 'ratelimit.check(text,text,integer,text,inet,uuid)', 'ratelimit.near_limit_ratio', '1.5',
     'ratelimit.check(''activity.create_post'', ''hostile-subject'')', '1.5 is outside the valid range for parameter "ratelimit.near_limit_ratio"%',
     'a near-limit ratio above 1'),
    (16, 'ratelimit.pre_request()', 'ratelimit.client_ip_trusted_proxies', '-1',
     'ratelimit.pre_request()', '-1 is outside the valid range for parameter "ratelimit.client_ip_trusted_proxies"%',
     'a negative number of trusted proxies'),
    (17, 'ratelimit.pre_request()', 'ratelimit.client_ip_trusted_proxies', '33',
     'ratelimit.pre_request()', '33 is outside the valid range for parameter "ratelimit.client_ip_trusted_proxies"%',
     'more trusted proxies than a header can name'),
    (18, 'ratelimit.pre_request()', 'ratelimit.client_ip_trusted_proxies', '1; DROP TABLE ratelimit.request_routes',
     'ratelimit.pre_request()', 'invalid value for parameter "ratelimit.client_ip_trusted_proxies": %',
     'SQL as the number of trusted proxies')
) AS v(n, f, setting, value, tail, message, why)
ORDER BY v.n;

-- 9. Functions without arguments, called with one; functions that need what is not there.
INSERT INTO hostile.matrix (function, call, sqlstate, message, why)
SELECT v.f::regprocedure, v.call, v.sqlstate, v.message, v.why
FROM (VALUES
    (1, 'ratelimit.clock_now()', 'SELECT ratelimit.clock_now(''2100-01-01'')', '42883', 'function % does not exist', 'an argument'),
    (2, 'ratelimit.cleanup_jobs()', $q$SELECT ratelimit.cleanup_jobs('; DROP TABLE ratelimit.policies; --')$q$, '42883', 'function % does not exist', 'SQL as an argument'),
    (3, 'ratelimit.memory_stats()', 'SELECT ratelimit.memory_stats(1)', '42883', 'function % does not exist', 'an argument'),
    (4, 'ratelimit.policy_stats()', 'SELECT ratelimit.policy_stats(NULL::text)', '42883', 'function % does not exist', 'a NULL argument'),
    (5, 'ratelimit.reset_policy_stats()', 'SELECT ratelimit.reset_policy_stats(true)', '42883', 'function % does not exist', 'an argument'),
    (6, 'public.cleanup_expired_rate_limits()', 'SELECT public.cleanup_expired_rate_limits(''1 hour''::interval)', '42883', 'function % does not exist', 'an argument'),
    (7, 'sliding_window.cleanup_old_rate_limit_buckets()', 'SELECT sliding_window.cleanup_old_rate_limit_buckets(0)', '42883', 'function % does not exist', 'an argument'),
    (8, 'ratelimit.unschedule_cleanup()', 'SELECT ratelimit.unschedule_cleanup()', '55000', 'pg_cron is not installed in database %', 'no pg_cron here'),
    (9, 'ratelimit.schedule_cleanup(text)', $q$SELECT ratelimit.schedule_cleanup(p_schedule => '* * * * *''); DROP TABLE ratelimit.policies; --')$q$,
     '55000', 'pg_cron is not installed in database %', 'SQL as the schedule, no pg_cron here'),
    (10, 'ratelimit.policies_validate()', 'SELECT ratelimit.policies_validate()', '0A000', 'trigger functions can only be called as triggers', 'called directly'),
    (11, 'ratelimit.hash_subject(text)', hostile.call('ratelimit.hash_subject(text)', '{"p_value": "convert_from(''\\xff''::bytea, ''UTF8'')"}'),
     '22021', 'invalid byte sequence for encoding "UTF8": 0xff', 'not UTF-8'),
    (12, 'ratelimit.hash_subject(text)', hostile.call('ratelimit.hash_subject(text)', '{"p_value": "repeat(''k'', 1073741824)"}'),
     '54000', 'requested length too large', 'a 1 GB value'),
    (13, 'ratelimit.top_offenders(integer)', hostile.call('ratelimit.top_offenders(integer)', '{"p_limit": "-1"}'),
     '22023', 'p_limit must be at least 1 (got -1)', 'p_limit = -1'),
    (14, 'public.cleanup_rpc_rate_limits(interval)', 'SELECT public.cleanup_rpc_rate_limits(''1 hour'', ''2 hours'')', '42883',
     'function % does not exist', 'two arguments'),
    (15, 'ratelimit.policy_tables_changed()', 'SELECT ratelimit.policy_tables_changed()', '0A000', 'trigger functions can only be called as triggers', 'called directly'),
    (16, 'ratelimit.presets()', $q$SELECT ratelimit.presets('game-backend')$q$, '42883', 'function % does not exist', 'an argument'),
    (17, 'ratelimit.load_preset(text,boolean)', hostile.call('ratelimit.load_preset(text,boolean)', '{"p_preset": "''game-backend''"}'),
     '22023', 'p_replace: policy "rpc.auth" differs from preset "game-backend"; pass p_replace => true to overwrite it',
     'a preset whose rows were edited, without p_replace'),
    (18, 'ratelimit.memory_stats_by_database()', 'SELECT ratelimit.memory_stats_by_database(''postgres'')', '42883',
     'function % does not exist', 'a database name as an argument'),
    (19, 'ratelimit.metrics()', $q$SELECT ratelimit.metrics('ratelimit_policy_decisions_total')$q$, '42883',
     'function % does not exist', 'a metric name as an argument'),
    (20, 'ratelimit.pre_request()', $q$SELECT ratelimit.pre_request('GET')$q$, '42883',
     'function % does not exist', 'a method as an argument'),
    (21, 'ratelimit.request_routes_validate()', 'SELECT ratelimit.request_routes_validate()', '0A000',
     'trigger functions can only be called as triggers', 'called directly'),
    (22, 'ratelimit.policies_routes_check()', 'SELECT ratelimit.policies_routes_check()', '0A000',
     'trigger functions can only be called as triggers', 'called directly')
) AS v(n, f, call, sqlstate, message, why)
ORDER BY v.n;

-- 10. Crafted decisions for the HTTP helpers: all NULL is no decision; waits and counts past
-- what a timestamp or an integer holds are refused by PostgreSQL's own arithmetic.
INSERT INTO hostile.matrix (function, call, sqlstate, message, why)
SELECT v.f::regprocedure, hostile.call(v.f::regprocedure, jsonb_build_object('p_decision', v.decision)), v.sqlstate, v.message, v.why
FROM (VALUES
    (1, 'ratelimit.http_headers(ratelimit.policy_decision,text)',
     'ROW(NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL)::ratelimit.policy_decision', '22004',
     'p_decision must not be NULL', 'a decision whose every field is NULL'),
    (2, 'ratelimit.http_body(ratelimit.policy_decision,text)',
     'ROW(NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL)::ratelimit.policy_decision', '22004',
     'p_decision must not be NULL', 'a decision whose every field is NULL'),
    (3, 'ratelimit.http_headers(ratelimit.policy_decision,text)',
     $d$ROW(false, 'p', 5, 0, 9223372036854775807, 0, 60000, 1, 'limited', '{}', '2100-01-01', NULL)::ratelimit.policy_decision$d$, '22008',
     'timestamp out of range', 'a wait of 2^63 - 1 ms'),
    (4, 'ratelimit.http_body(ratelimit.policy_decision,text)',
     $d$ROW(false, 'p', 5, 0, 1000, 1000, 60000, 2147483647, 'limited', '{}', '2100-01-01', NULL)::ratelimit.policy_decision$d$, '22003',
     'integer out of range', 'a cost of INT_MAX on top of the limit')
) AS v(n, f, decision, sqlstate, message, why)
ORDER BY v.n;

-- 11. Policy rows, checked by the policies_validate trigger and the tables' constraints.
-- A lookup that may write, and one owned by a role that is neither a superuser nor
-- ratelimit's owner.
CREATE FUNCTION hostile.volatile_lookup(p_subject text, p_user uuid) RETURNS integer LANGUAGE sql AS 'SELECT 1';
CREATE ROLE hostile_lookup_owner NOLOGIN;
GRANT USAGE, CREATE ON SCHEMA hostile TO hostile_lookup_owner;
CREATE FUNCTION hostile.foreign_lookup(p_subject text, p_user uuid) RETURNS integer LANGUAGE sql STABLE AS 'SELECT 1';
ALTER FUNCTION hostile.foreign_lookup(text, uuid) OWNER TO hostile_lookup_owner;
INSERT INTO hostile.matrix (function, call, sqlstate, message, why)
SELECT 'ratelimit.policies_validate()', v.call, v.sqlstate, v.message, v.why
FROM (VALUES
    (1, $q$INSERT INTO ratelimit.policies (name, "limit", period) VALUES ('hostile.p', 5, '1000 years')$q$, '22023',
     'policy "hostile.p": p_period may use months only as ''1 month'' (the calendar month, in UTC unless p_time_zone is given)', 'a policy of 5 per 1000 years'),
    (101, $q$INSERT INTO ratelimit.policies (name, "limit", period, time_zone) VALUES ('hostile.p', 5, '1 day', 'Europe/Nowhere')$q$, '22023',
     'policy "hostile.p": p_time_zone must name a time zone PostgreSQL knows, such as Europe/Berlin or UTC (got "Europe/Nowhere")',
     'a policy in an unknown time zone'),
    (102, $q$INSERT INTO ratelimit.policies (name, "limit", period, algorithm, time_zone) VALUES ('hostile.p', 5, '1 day', 'gcra', 'UTC')$q$, '22023',
     'policy "hostile.p": p_algorithm must be fixed_window for a calendar period: calendar windows need fixed_window (got gcra)',
     'a calendar policy with gcra'),
    (103, $q$UPDATE ratelimit.policies SET time_zone = 'UTC' WHERE name = 'activity.create_post'$q$, '22023',
     'policy "activity.create_post": p_period must be ''1 day'', ''1 week'' or ''1 month'' with p_time_zone (a calendar window from local midnight)',
     'a time zone on a policy of another period'),
    (104, $q$UPDATE ratelimit.policies SET reset_jitter = '-1 second' WHERE name = 'activity.create_post'$q$, '22023',
     'policy "activity.create_post": reset_jitter must be between 0 and 1 hour (got "-00:00:01")', 'a negative reset jitter'),
    (105, $q$INSERT INTO ratelimit.policies (name, "limit", period, reset_jitter) VALUES ('hostile.p', 5, '1 minute', '1000 years')$q$, '22023',
     'policy "hostile.p": reset_jitter must be between 0 and 1 hour (got "1000 years")', 'a reset jitter of 1000 years'),
    (106, $q$INSERT INTO ratelimit.policies (name, "limit", period, penalty_blocks, penalty_decay) VALUES ('hostile.p', 5, '1 minute', '{1 minute}', NULL)$q$, '22023',
     'policy "hostile.p": penalty_decay must be given with penalty_blocks', 'a penalty ladder without a decay'),
    (107, $q$UPDATE ratelimit.policies SET penalty_blocks = '{-1 minute}', penalty_decay = '1 hour' WHERE name = 'activity.create_post'$q$, '22023',
     'policy "activity.create_post": penalty_blocks must be greater than zero', 'a negative penalty step'),
    (108, $q$UPDATE ratelimit.policies SET max_delay = '1 second' WHERE name = 'activity.create_post'$q$, '22023',
     'policy "activity.create_post": max_delay applies only to token_bucket and gcra (got fixed_window)', 'a delay on a fixed-window policy'),
    (109, $q$INSERT INTO ratelimit.policies (name, algorithm, "limit", period, max_delay) VALUES ('hostile.p', 'gcra', 5, '1 minute', '1 month')$q$, '22023',
     'policy "hostile.p": max_delay must not use months or years, whose length varies (use days)', 'a delay of a month'),
    (110, $q$UPDATE ratelimit.policies SET tier_lookup = 'pg_catalog.now()' WHERE name = 'activity.create_post'$q$, '22023',
     'policy "activity.create_post": tier_lookup: now() must take (p_subject text, p_user uuid) and return one text', 'a lookup of another signature'),
    (111, $q$UPDATE ratelimit.policies SET limit_lookup = 'hostile.volatile_lookup(text,uuid)' WHERE name = 'activity.create_post'$q$, '22023',
     'policy "activity.create_post": limit_lookup: hostile.volatile_lookup(text,uuid) must be STABLE or IMMUTABLE: a lookup reads, it never writes', 'a lookup that may write'),
    (112, $q$UPDATE ratelimit.policies SET limit_lookup = 'hostile.foreign_lookup(text,uuid)' WHERE name = 'activity.create_post'$q$, '22023',
     'policy "activity.create_post": limit_lookup: hostile.foreign_lookup(text,uuid) must be owned by a superuser or ratelimit''s owner: every call runs it', 'a lookup another role owns and could replace'),
    (113, $q$UPDATE ratelimit.policies SET tier_lookup = 'hostile.nowhere(text,uuid)' WHERE name = 'activity.create_post'$q$, '22023',
     'policy "activity.create_post": tier_lookup: no function ''hostile.nowhere(text,uuid)'' (%)', 'a lookup that is not there'),
    (114, $q$UPDATE ratelimit.policies SET tier_lookup = 'hostile.foreign_lookup(text,uuid)); DROP TABLE ratelimit.policies; --' WHERE name = 'activity.create_post'$q$, '22023',
     'policy "activity.create_post": tier_lookup: no function % (%)', 'SQL as the lookup'),
    (115, $q$UPDATE ratelimit.policies SET limit_lookup = 'volatile_lookup(text,uuid)' WHERE name = 'activity.create_post'$q$, '22023',
     'policy "activity.create_post": limit_lookup: no function ''volatile_lookup(text,uuid)'' (name it with its schema and argument types, as in my_schema.tier_of(text,uuid))', 'a lookup without its schema'),
    (2, $q$INSERT INTO ratelimit.policies (name, "limit", period) VALUES ('hostile.p', '2147483648', '1 minute')$q$, '22003',
     'value "2147483648" is out of range for type integer', 'a policy limit of 2^31'),
    (3, $q$INSERT INTO ratelimit.policies (name, "limit", period) VALUES ('hostile.p', 0, '1 minute')$q$, '22023',
     'policy "hostile.p": p_limit must be greater than zero, got 0', 'a policy limit of 0'),
    (4, $q$INSERT INTO ratelimit.policies (name, "limit", period, algorithm) VALUES ('hostile.p', 5, '1 minute', 'leaky''; DROP TABLE ratelimit.policies; --')$q$,
     '22023', 'policy "hostile.p": p_algorithm must be one of %', 'SQL as a policy''s algorithm'),
    (5, $q$INSERT INTO ratelimit.policies (name, "limit", period) VALUES ('x''; DROP TABLE ratelimit.policies; --', 5, '1 minute')$q$,
     '22023', 'policy "x''; DROP TABLE ratelimit.policies; --": name may hold only letters, digits, _ . : and - (1 to 63 of them; / is reserved): group names with dots, as in activity.create_post', 'SQL as a policy''s name'),
    (6, $q$INSERT INTO ratelimit.policies (name, "limit", period) VALUES (repeat('p', 64), 5, '1 minute')$q$,
     '22023', 'policy "' || repeat('p', 64) || '": name may hold only letters, digits, _ . : and - (1 to 63 of them; / is reserved): group names with dots, as in activity.create_post', 'a 64-byte policy name'),
    (7, $q$UPDATE ratelimit.policies SET engine = 'memory', algorithm = 'sliding_window', "limit" = 0 WHERE name = 'activity.create_post'$q$,
     '22023', 'policy "activity.create_post": p_limit must be greater than zero, got 0',
     'sliding_window 0 moved to the memory engine'),
    (8, $q$UPDATE ratelimit.policies SET period = '-1 second' WHERE name = 'activity.create_post'$q$, '22023',
     'policy "activity.create_post": p_period must be greater than zero', 'a negative period'),
    (9, $q$INSERT INTO ratelimit.tiers (name, multiplier) VALUES ('hostile', 'NaN')$q$, '23514',
     'new row for relation "tiers" violates check constraint "tiers_multiplier_check"', 'a tier multiplier of NaN'),
    (10, $q$INSERT INTO ratelimit.key_overrides (policy, key, "limit") VALUES ('activity.create_post', 'k', 0)$q$, '23514',
     'new row for relation "key_overrides" violates check constraint "key_overrides_limit_check"', 'an override limit of 0'),
    (11, $q$INSERT INTO ratelimit.access_list (action, ip) VALUES ('deny', '10.0.0.1/8')$q$, '22P02',
     'invalid cidr value: "10.0.0.1/8"', 'a network with host bits set'),
    (12, $q$INSERT INTO ratelimit.access_list (action, key) VALUES ('allow''; --', 'k')$q$, '23514',
     'new row for relation "access_list" violates check constraint "access_list_action_check"', 'SQL as an action'),
    (13, $q$UPDATE ratelimit.policies SET quota_unit = 'content bytes' WHERE name = 'activity.create_post'$q$, '22023',
     'policy "activity.create_post": quota_unit must be requests, content-bytes, concurrent-requests or another token % (got "content bytes")',
     'a quota unit with a space'),
    (14, $q$INSERT INTO ratelimit.policies (name, "limit", period, quota_unit) VALUES ('hostile.p', 5, '1 minute', 'bytes";r=9999')$q$, '22023',
     'policy "hostile.p": quota_unit must be requests, content-bytes, concurrent-requests or another token % (got "bytes";r=9999")',
     'a quota unit that would end the sf-string'),
    (15, $q$UPDATE ratelimit.policies SET quota_unit = '' WHERE name = 'activity.create_post'$q$, '22023',
     'policy "activity.create_post": quota_unit must be requests, content-bytes, concurrent-requests or another token % (got "")',
     'an empty quota unit')
) AS v(n, call, sqlstate, message, why)
ORDER BY v.n;

-- 12. The steps the drop-in extensions' scripts run (granted to nobody; a superuser may call
-- them): an install over objects of the same names is refused, naming them (42710); every argument
-- is checked before anything changes, and a grant list is read as names, never run as SQL.
INSERT INTO hostile.matrix (function, call, sqlstate, message, why)
SELECT v.f::regprocedure, v.call, v.sqlstate, v.message, v.why
FROM (VALUES
    (1, 'ratelimit.drop_in_install_begin(text,text,text[],text[])',
     $q$SELECT ratelimit.drop_in_install_begin(p_extension => 'ratelimit_rpc_limits', p_schema => 'public', p_tables => ARRAY['rpc_rate_limits'], p_functions => ARRAY['check_rate_limit', 'check_rate_limit_for_user', 'cleanup_rpc_rate_limits'])$q$,
     '42710', 'ratelimit_rpc_limits cannot be installed in schema public: table public.rpc_rate_limits (owned by %), function public.check_rate_limit(%) (owned by %), function public.check_rate_limit_for_user(%) (owned by %), function public.cleanup_rpc_rate_limits(%) (owned by %) already there',
     'the per-RPC limits over their own install'),
    (2, 'ratelimit.drop_in_install_begin(text,text,text[],text[])',
     $q$SELECT ratelimit.drop_in_install_begin(p_extension => 'ratelimit_sliding_window_limits', p_schema => 'public', p_tables => ARRAY['rate_limit_buckets'], p_functions => ARRAY['check_rate_limit', 'check_rate_limit_tiers', 'cleanup_old_rate_limit_buckets'])$q$,
     '42710', 'ratelimit_sliding_window_limits cannot be installed in schema public: function public.check_rate_limit(p_rpc_name text, p_max_calls integer, p_window_minutes integer) (owned by %) already there',
     'the sliding window beside the per-RPC check_rate_limit'),
    (3, 'ratelimit.drop_in_install_begin(text,text,text[],text[])',
     $q$SELECT ratelimit.drop_in_install_begin(p_extension => 'ratelimit_sliding_window_limits', p_schema => 'sliding_window', p_tables => ARRAY['rate_limit_buckets'], p_functions => ARRAY['check_rate_limit', 'check_rate_limit_tiers', 'cleanup_old_rate_limit_buckets'])$q$,
     '42710', 'ratelimit_sliding_window_limits cannot be installed in schema sliding_window: table sliding_window.rate_limit_buckets (owned by %), function sliding_window.check_rate_limit(%) already there',
     'the sliding window over its own install'),
    (4, 'ratelimit.drop_in_install_begin(text,text,text[],text[])',
     $q$SELECT ratelimit.drop_in_install_begin(p_extension => 'ratelimit_rpc_limits', p_schema => 'hostile_nowhere', p_tables => ARRAY['rpc_rate_limits'], p_functions => ARRAY['check_rate_limit'])$q$,
     '3F000', 'p_schema: no schema is named ''hostile_nowhere'' (as an SQL identifier, quoted where it needs to be)', 'a schema that is not there'),
    (5, 'ratelimit.drop_in_install_begin(text,text,text[],text[])',
     $q$SELECT ratelimit.drop_in_install_begin(p_extension => 'ratelimit_rpc_limits', p_schema => 'public; DROP TABLE ratelimit.policies; --', p_tables => ARRAY['rpc_rate_limits'], p_functions => ARRAY['check_rate_limit'])$q$,
     '3F000', 'p_schema: no schema is named ''public; DROP TABLE ratelimit.policies; --'' (%)', 'SQL as the schema'),
    (6, 'ratelimit.drop_in_install_end(text,text[])',
     $q$SELECT ratelimit.drop_in_install_end(p_schema => 'public', p_tables => NULL)$q$,
     '22004', 'p_tables must be an array of table names without NULLs', 'NULL p_tables'),
    (7, 'ratelimit.drop_in_install_end(text,text[])',
     $q$SELECT ratelimit.drop_in_install_end(p_schema => NULL, p_tables => ARRAY['rate_limits'])$q$,
     '22004', 'p_schema must not be NULL', 'NULL p_schema'),
    (8, 'ratelimit.set_member_privileges(text,boolean,text[])',
     $q$SELECT ratelimit.set_member_privileges(p_extension => 'hostile-none', p_reset_every_role => true, p_grants => ARRAY[ARRAY['EXECUTE', 'FUNCTION', 'ratelimit.clock_now()', 'PUBLIC']])$q$,
     '42704', 'p_extension: extension "hostile-none" does not exist', 'an extension that is not there'),
    (9, 'ratelimit.set_member_privileges(text,boolean,text[])',
     $q$SELECT ratelimit.set_member_privileges(p_extension => 'ratelimit', p_reset_every_role => true, p_grants => ARRAY[ARRAY['BOGUS', 'FUNCTION', 'ratelimit.clock_now()', 'PUBLIC']])$q$,
     '22023', 'p_grants[1]: ''BOGUS'' on a ''FUNCTION'' is not a grant of the extensions'' lists (%)', 'a privilege that does not exist'),
    (10, 'ratelimit.set_member_privileges(text,boolean,text[])',
     $q$SELECT ratelimit.set_member_privileges(p_extension => 'ratelimit', p_reset_every_role => true, p_grants => ARRAY[ARRAY['EXECUTE', 'TABLE', 'ratelimit.policies', 'PUBLIC']])$q$,
     '22023', 'p_grants[1]: ''EXECUTE'' on a ''TABLE'' is not a grant of the extensions'' lists (%)', 'EXECUTE on a table'),
    (11, 'ratelimit.left_by_ratelimit(oid,name,text)',
     $q$SELECT ratelimit.left_by_ratelimit(p_object => 'public.rpc_rate_limits', p_catalog => 'pg_class', p_extension => NULL)$q$,
     '22P02', 'invalid input syntax for type oid: "public.rpc_rate_limits"', 'a relation''s name as p_object'),
    (12, 'ratelimit.left_by_ratelimit(oid,name,text)',
     $q$SELECT ratelimit.left_by_ratelimit(p_object => '4294967296', p_catalog => 'pg_class', p_extension => NULL)$q$,
     '22003', 'value "4294967296" is out of range for type oid', 'p_object = 2^32'),
    (13, 'ratelimit.left_by_ratelimit(oid,name,text)',
     $q$SELECT ratelimit.left_by_ratelimit(p_object => 0, p_catalog => convert_from('\xff'::bytea, 'UTF8'), p_extension => NULL)$q$,
     '22021', 'invalid byte sequence for encoding "UTF8": 0xff', 'p_catalog not UTF-8'),
    (14, 'ratelimit.left_by_ratelimit(oid,name,text)',
     $q$SELECT ratelimit.left_by_ratelimit(p_object => NULL, p_catalog => 'pg_class', p_extension => NULL)$q$,
     '22004', 'p_object must not be NULL', 'NULL p_object'),
    (15, 'ratelimit.left_by_ratelimit(oid,name,text)',
     $q$SELECT ratelimit.left_by_ratelimit(p_object => 0, p_catalog => 'pg_type', p_extension => NULL)$q$,
     '22023', 'p_catalog must be pg_class or pg_proc (got ''pg_type'')', 'a catalog the drop-ins have no objects in'),
    (16, 'ratelimit.set_member_privileges(text,boolean,text[])',
     $q$SELECT ratelimit.set_member_privileges(p_extension => 'ratelimit', p_reset_every_role => true, p_grants => '{}')$q$,
     '22023', 'p_grants must be a list of (privilege, kind, object, grantee) rows without NULLs, at least one', 'an empty list, which would strip every grant'),
    (17, 'ratelimit.set_member_privileges(text,boolean,text[])',
     $q$SELECT ratelimit.set_member_privileges(p_extension => 'ratelimit', p_reset_every_role => NULL, p_grants => ARRAY[ARRAY['EXECUTE', 'FUNCTION', 'ratelimit.clock_now()', 'PUBLIC']])$q$,
     '22004', 'p_reset_every_role must not be NULL', 'NULL p_reset_every_role'),
    (18, 'ratelimit.set_member_privileges(text,boolean,text[])',
     $q$SELECT ratelimit.set_member_privileges(p_extension => 'ratelimit', p_reset_every_role => true, p_grants => ARRAY[ARRAY['EXECUTE', 'FUNCTION', 'ratelimit.clock_now() TO PUBLIC; DROP TABLE ratelimit.policies; --', 'PUBLIC']])$q$,
     '22023', 'p_grants[1]: function ''ratelimit.clock_now() TO PUBLIC; DROP TABLE ratelimit.policies; --'' is not a member of extension ratelimit', 'SQL as the object'),
    (19, 'ratelimit.set_member_privileges(text,boolean,text[])',
     $q$SELECT ratelimit.set_member_privileges(p_extension => 'ratelimit', p_reset_every_role => true, p_grants => ARRAY[ARRAY['EXECUTE', 'FUNCTION', 'pg_catalog.now()', 'PUBLIC']])$q$,
     '22023', 'p_grants[1]: function ''pg_catalog.now()'' is not a member of extension ratelimit', 'a function of another extension'),
    (20, 'ratelimit.set_member_privileges(text,boolean,text[])',
     $q$SELECT ratelimit.set_member_privileges(p_extension => 'ratelimit', p_reset_every_role => true, p_grants => ARRAY[ARRAY['EXECUTE', 'FUNCTION', NULL, 'PUBLIC']])$q$,
     '22023', 'p_grants must be a list of (privilege, kind, object, grantee) rows without NULLs, at least one', 'a NULL in the list'),
    (21, 'ratelimit.drop_in_install_begin(text,text,text[],text[])',
     $q$SELECT ratelimit.drop_in_install_begin(p_extension => 'ratelimit', p_schema => 'public', p_tables => ARRAY['rpc_rate_limits'], p_functions => ARRAY['check_rate_limit'])$q$,
     '22023', 'p_extension must be ratelimit_rpc_limits, ratelimit_endpoint_limits or ratelimit_sliding_window_limits (got ''ratelimit'')', 'an extension that is not a drop-in'),
    (22, 'ratelimit.drop_in_install_begin(text,text,text[],text[])',
     $q$SELECT ratelimit.drop_in_install_begin(p_extension => 'ratelimit_rpc_limits', p_schema => 'public', p_tables => ARRAY['rpc_rate_limits'], p_functions => ARRAY[NULL])$q$,
     '22004', 'p_functions must be an array of function names without NULLs', 'a NULL function name'),
    (23, 'ratelimit.drop_in_install_check(text,text,text[],text[])',
     $q$SELECT ratelimit.drop_in_install_check(p_extension => NULL, p_schema => 'public', p_tables => ARRAY['rpc_rate_limits'], p_functions => ARRAY['check_rate_limit'])$q$,
     '22023', 'p_extension must be ratelimit_rpc_limits, ratelimit_endpoint_limits or ratelimit_sliding_window_limits (got NULL)', 'NULL p_extension'),
    (24, 'ratelimit.drop_in_install_check(text,text,text[],text[])',
     $q$SELECT ratelimit.drop_in_install_check(p_extension => 'ratelimit_rpc_limits', p_schema => '"a"."b"', p_tables => ARRAY['rpc_rate_limits'], p_functions => ARRAY['check_rate_limit'])$q$,
     '3F000', 'p_schema: no schema is named ''"a"."b"'' (%)', 'a qualified name as the schema'),
    (25, 'ratelimit.drop_in_install_check(text,text,text[],text[])',
     $q$SELECT ratelimit.drop_in_install_check(p_extension => 'ratelimit_rpc_limits', p_schema => 'public', p_tables => ARRAY[NULL], p_functions => ARRAY['check_rate_limit'])$q$,
     '22004', 'p_tables must be an array of table names without NULLs', 'a NULL table name')
) AS v(n, f, call, sqlstate, message, why)
ORDER BY v.n;

-- 12b. Moving between the editions (granted to nobody): a schema export_state would make must be
-- new, and import_state reads only a schema export_state made; SQL in a name stays a name.
INSERT INTO hostile.matrix (function, call, sqlstate, message, why)
SELECT v.f::regprocedure, v.call, v.sqlstate, v.message, v.why
FROM (VALUES
    (1, 'ratelimit.export_state(text)', $q$SELECT ratelimit.export_state(NULL)$q$,
     '22023', 'p_schema must name a schema to create', 'NULL p_schema'),
    (2, 'ratelimit.export_state(text)', $q$SELECT ratelimit.export_state('')$q$,
     '22023', 'p_schema must name a schema to create', 'an empty p_schema'),
    (3, 'ratelimit.export_state(text)', $q$SELECT ratelimit.export_state('ratelimit')$q$,
     '42P06', 'p_schema: schema ratelimit already exists', 'the extension''s own schema'),
    (4, 'ratelimit.import_state(text)', $q$SELECT ratelimit.import_state(NULL)$q$,
     '22023', 'p_schema: NULL holds no state exported by ratelimit.export_state', 'NULL p_schema'),
    (5, 'ratelimit.import_state(text)', $q$SELECT ratelimit.import_state('public')$q$,
     '22023', 'p_schema: public holds no state exported by ratelimit.export_state', 'a schema export_state did not make'),
    (6, 'ratelimit.import_state(text)', $q$SELECT ratelimit.import_state('x; DROP TABLE ratelimit.policies; --')$q$,
     '22023', 'p_schema: "x; DROP TABLE ratelimit.policies; --" holds no state exported by ratelimit.export_state', 'SQL as the schema'),
    (7, 'ratelimit.moving_tables()', $q$SELECT ratelimit.moving_tables('policies')$q$,
     '42883', 'function % does not exist', 'an argument'),
    (8, 'ratelimit.moving_sequences()', $q$SELECT ratelimit.moving_sequences('denial_log_position')$q$,
     '42883', 'function % does not exist', 'an argument'),
    (9, 'ratelimit.extension_members(text)', $q$SELECT ratelimit.extension_members('ratelimit', 'ratelimit')$q$,
     '42883', 'function % does not exist', 'a second argument')
) AS v(n, f, call, sqlstate, message, why)
ORDER BY v.n;

-- 13. Declared limiters: every argument of declare_limiter checked before anything is made (22023
-- naming the argument, or 22004 for a NULL; 42723 for an app's own function in the way); names,
-- types and defaults read by PostgreSQL's own parsers and written back quoted, so SQL in any of
-- them is refused, never run; drop_limiter drops only what declare_limiter made; the request's
-- identity helpers refuse malformed settings; the generated functions' checks name the argument.
CREATE FUNCTION hostile.declare(p_changes text) RETURNS text LANGUAGE sql AS $$
    SELECT format('SELECT ratelimit.declare_limiter(%s)',
                  concat_ws(', ', p_changes,
                            CASE WHEN p_changes NOT LIKE '%p_function =>%' THEN 'p_function => ''hostile_declared''' END,
                            CASE WHEN p_changes NOT LIKE '%p_arguments =>%' THEN 'p_arguments => ARRAY[''p_user uuid'', ''p_max integer DEFAULT 5'']' END,
                            CASE WHEN p_changes NOT LIKE '%p_key =>%' THEN 'p_key => ARRAY[''arg:p_user'']' END,
                            CASE WHEN p_changes NOT LIKE '%p_limit =>%' AND p_changes NOT LIKE '%p_policy =>%' THEN 'p_limit => 3' END,
                            CASE WHEN p_changes NOT LIKE '%p_period =>%' AND p_changes NOT LIKE '%p_policy =>%' THEN 'p_period => ''1 minute''' END))
$$;
INSERT INTO hostile.matrix (function, call, sqlstate, message, why)
SELECT 'ratelimit.declare_limiter(text,text[],text,text[],text[],text,integer,interval,text,text,text,text,interval,text,text,text[],boolean)',
       hostile.declare(v.changes), v.sqlstate, v.message, v.why
FROM (VALUES
    (1, 'p_function => NULL', '22004', 'p_function must not be NULL', 'NULL p_function'),
    (2, 'p_arguments => NULL', '22004', 'p_arguments must not be NULL', 'NULL p_arguments'),
    (3, 'p_returns => NULL', '22004', 'p_returns must not be NULL', 'NULL p_returns'),
    (4, 'p_key => NULL', '22004', 'p_key must not be NULL', 'NULL p_key'),
    (5, 'p_roles => NULL', '22004', 'p_roles must not be NULL', 'NULL p_roles'),
    (6, 'p_replace => NULL', '22004', 'p_replace must not be NULL', 'NULL p_replace'),
    (7, 'p_function => ''a.b.c''', '22023', 'p_function: ''a.b.c'' is not a function name (name or schema.name)', 'three names'),
    (8, $c$p_function => 'f(); DROP TABLE ratelimit.policies; --'$c$, '22023', 'p_function: % is not a function name (name or schema.name)', 'SQL as the name'),
    (9, 'p_function => ''ratelimit.consume''', '22023', 'p_function: schema ratelimit is reserved', 'the extension''s own schema'),
    (10, 'p_function => ''pg_catalog.now''', '22023', 'p_function: schema pg_catalog is reserved', 'the catalog'),
    (11, 'p_function => ''hostile_nowhere.f''', '22023', 'p_function: schema hostile_nowhere does not exist', 'a schema that is not there'),
    (12, 'p_function => ''''', '22023', 'p_function: '''' is not a function name (name or schema.name)', 'an empty name'),
    (13, $c$p_arguments => ARRAY['p_user integer); DROP TABLE ratelimit.policies; --']$c$, '22023', 'p_arguments[1]: type % does not exist', 'SQL as a type'),
    (14, $c$p_arguments => ARRAY['p_user uuid DEFAULT ''x''''); DROP TABLE ratelimit.policies; --''']$c$, '22023', 'p_arguments[1]: % is not a value of type uuid', 'SQL as a default'),
    (15, $c$p_arguments => ARRAY['ratelimit_key text']$c$, '22023', 'p_arguments[1]: the names ratelimit_* are reserved for the function''s own variables', 'a reserved name'),
    (16, $c$p_arguments => ARRAY['p_user uuid', 'P_USER text']$c$, '22023', 'p_arguments[2]: p_user is named twice', 'a name twice, differently cased'),
    (17, $c$p_arguments => ARRAY['p_user uuid DEFAULT NULL', 'p_max integer']$c$, '22023', 'p_arguments[2]: p_max follows an argument with a default, so it needs one too', 'a default, then none'),
    (18, $c$p_arguments => ARRAY['1user uuid']$c$, '22023', 'p_arguments[1]: ''1user uuid'' is not ''name type'' or ''name type DEFAULT value''', 'not a name'),
    (19, $c$p_arguments => ARRAY[NULL]::text[]$c$, '22023', 'p_arguments[1]: ''NULL'' is not ''name type'' or ''name type DEFAULT value''', 'a NULL argument'),
    (20, $c$p_arguments => ARRAY['p_user hostile_no_type']$c$, '22023', 'p_arguments[1]: type ''hostile_no_type'' does not exist', 'a type that is not there'),
    (21, 'p_returns => ''boolean; DROP TABLE ratelimit.policies''', '22023', 'p_returns: % is not ''boolean'', ''limited'', ''row'' or ''jsonb''', 'SQL as the result'),
    (22, 'p_returns => ''row''', '22023', 'p_columns: a ''row'' result needs its columns, each ''name field'' or ''name field type''', 'a row without columns'),
    (23, $c$p_returns => 'row', p_columns => ARRAY['ok bogus']$c$, '22023', 'p_columns[1]: ''bogus'' is not a field (%)', 'a field that is not there'),
    (24, $c$p_returns => 'jsonb', p_columns => ARRAY['ok allowed integer); DROP TABLE ratelimit.policies; --']$c$, '22023', 'p_columns[1]: type % does not exist', 'SQL as a column''s type'),
    (25, $c$p_returns => 'row', p_columns => ARRAY['p_user allowed']$c$, '22023', 'p_columns[1]: the name p_user is reserved, taken by another column or by an argument', 'a column named as an argument'),
    (26, $c$p_returns => 'boolean', p_columns => ARRAY['ok allowed']$c$, '22023', 'p_columns: only a ''row'' or ''jsonb'' result has columns', 'columns for a boolean'),
    (27, 'p_key => ''{}''', '22023', 'p_key: at least one part (%)', 'no key'),
    (28, $c$p_key => ARRAY['arg:p_nobody']$c$, '22023', 'p_key[1]: ''arg:p_nobody'' names no argument of the function', 'an argument that is not there'),
    (29, $c$p_key => ARRAY['sql:1); DROP TABLE ratelimit.policies; --']$c$, '22023', 'p_key[1]: % is not ''user'', ''ip'', ''arg:<name>'', ''hash:<name>'' or ''text:<value>''', 'SQL as a key part'),
    (30, 'p_policy => ''hostile.nowhere''', '22023', 'p_policy: no policy ''hostile.nowhere''', 'a policy that is not there'),
    (31, 'p_policy => ''activity.create_post'', p_limit => 3', '22023', 'p_policy: a declared limiter decides over a policy or over p_limit and p_period, not both', 'a policy and a limit'),
    (32, 'p_limit => NULL', '22023', 'p_limit: a declared limiter needs p_policy, or p_limit or p_limit_argument', 'no limit'),
    (33, 'p_period => NULL', '22023', 'p_period: a declared limiter needs p_policy, or p_period or p_period_argument', 'no period'),
    (34, 'p_algorithm => ''bogus''', '22023', '%bogus%', 'an algorithm that is not there'),
    (35, 'p_limit_argument => ''p_user''', '22023', 'p_limit_argument: ''p_user'' is no integer argument of the function', 'a uuid as the limit'),
    (36, 'p_period_argument => ''p_nobody''', '22023', 'p_period_argument: ''p_nobody'' is no number or interval argument of the function', 'an argument that is not there'),
    (37, 'p_cost_argument => ''p_user''', '22023', 'p_cost_argument: ''p_user'' is no integer argument of the function', 'a uuid as the cost'),
    (38, 'p_anonymous => ''maybe''', '22023', 'p_anonymous: ''maybe'' is not ''refuse'', ''allow'' or ''ip''', 'an unknown rule'),
    (39, $c$p_roles => ARRAY['hostile_nobody']$c$, '22023', 'p_roles: role hostile_nobody does not exist', 'a role that is not there'),
    (40, $c$p_roles => ARRAY['anon; DROP TABLE ratelimit.policies']$c$, '22023', 'p_roles: role % does not exist', 'SQL as a role'),
    (41, $c$p_function => 'public.cleanup_expired_rate_limits', p_arguments => '{}', p_key => ARRAY['text:x'], p_roles => ARRAY['PUBLIC']$c$, '42723',
     'p_function: function public.cleanup_expired_rate_limits() exists already, owned by %', 'an app''s function in the way')
) AS v(n, changes, sqlstate, message, why)
ORDER BY v.n;

INSERT INTO hostile.matrix (function, call, sqlstate, message, why)
SELECT v.f::regprocedure, v.call, v.sqlstate, v.message, v.why
FROM (VALUES
    (1, 'ratelimit.drop_limiter(regprocedure)', 'SELECT ratelimit.drop_limiter(NULL)', '22004', 'p_function must not be NULL', 'NULL p_function'),
    (2, 'ratelimit.drop_limiter(regprocedure)', $q$SELECT ratelimit.drop_limiter('public.cleanup_expired_rate_limits()')$q$, '22023',
     'p_function: public.cleanup_expired_rate_limits() is not a declared limiter', 'a function declare_limiter did not make'),
    (3, 'ratelimit.drop_limiter(regprocedure)', $q$SELECT ratelimit.drop_limiter('hostile_nowhere()')$q$, '42883',
     'function "hostile_nowhere()" does not exist', 'a function that is not there'),
    (4, 'ratelimit.drop_limiter(regprocedure)', $q$SELECT ratelimit.drop_limiter('f(); DROP TABLE ratelimit.policies; --')$q$, '22P02',
     'expected a right parenthesis', 'SQL as the function'),
    (5, 'ratelimit.jwt_subject()', $q$SELECT hostile.with_setting('request.jwt.claims', '{"sub": 5}', 'SELECT ratelimit.jwt_subject()')$q$, '22023',
     '%request.jwt.claims%', 'a sub that is not a string'),
    (6, 'ratelimit.jwt_subject()', 'SELECT ratelimit.jwt_subject(1)', '42883', 'function % does not exist', 'an argument'),
    (7, 'ratelimit.client_address()', $q$SELECT hostile.with_setting('request.headers', '[1]', 'SELECT ratelimit.client_address()')$q$, '22023',
     'request.headers must be a JSON object', 'headers that are not an object'),
    (8, 'ratelimit.client_address()', 'SELECT ratelimit.client_address(''198.51.100.7'')', '42883', 'function % does not exist', 'an argument'),
    (14, 'ratelimit.declared_limiter_check(text,text,integer,integer,interval)',
     'SELECT ratelimit.declared_limiter_check(''hostile.nowhere'', ''k'', 1, NULL, NULL)', '22023', '%hostile.nowhere%', 'a policy that is not there'),
    (15, 'ratelimit.declared_limiter_check(text,text,integer,integer,interval)',
     $q$SELECT hostile.with_setting('ratelimit.dropin_caller_limits', 'must_match', 'SELECT ratelimit.declared_limiter_check(''activity.create_post'', ''hostile-subject'', 1, 999, NULL)')$q$,
     '42501', 'the caller''s limit or period differs from policy activity.create_post''s (ratelimit.dropin_caller_limits = must_match)', 'a caller''s limit that differs, with must_match'),
    (16, 'ratelimit.declared_limiter_fields()', 'SELECT ratelimit.declared_limiter_fields(''allowed'')', '42883', 'function % does not exist', 'an argument')
) AS v(n, f, call, sqlstate, message, why)
ORDER BY v.n;

-- 14. Insert limits and row security: every argument checked before a trigger is made; names of
-- tables and columns read from the catalog, SQL in them refused; only the table engines, whose
-- counts roll back with the insert; within_limit charges only the caller's own key.
CREATE TABLE hostile.inserts (id serial, owner uuid, created_at timestamptz);
CREATE FUNCTION hostile.limit_inserts(p_changes text) RETURNS text LANGUAGE sql AS $$
    SELECT format('SELECT ratelimit.limit_inserts(%s)',
                  concat_ws(', ', p_changes,
                            CASE WHEN p_changes NOT LIKE '%p_table =>%' THEN 'p_table => ''hostile.inserts''' END,
                            CASE WHEN p_changes NOT LIKE '%p_limit =>%' THEN 'p_limit => 3' END,
                            CASE WHEN p_changes NOT LIKE '%p_period =>%' THEN 'p_period => ''1 hour''' END,
                            CASE WHEN p_changes NOT LIKE '%p_key =>%' THEN 'p_key => ARRAY[''column:owner'']' END))
$$;
INSERT INTO hostile.matrix (function, call, sqlstate, message, why)
SELECT 'ratelimit.limit_inserts(regclass,integer,interval,text[],text,text,text,text,text,text,boolean,text)',
       hostile.limit_inserts(v.changes), v.sqlstate, v.message, v.why
FROM (VALUES
    (1, 'p_table => NULL', '22004', 'p_table must not be NULL', 'NULL p_table'),
    (2, 'p_limit => NULL', '22004', 'p_limit must not be NULL', 'NULL p_limit'),
    (3, 'p_period => NULL', '22004', 'p_period must not be NULL', 'NULL p_period'),
    (4, 'p_key => NULL', '22004', 'p_key must not be NULL', 'NULL p_key'),
    (5, 'p_error_code => NULL', '22004', 'p_error_code must not be NULL', 'NULL p_error_code'),
    (6, $c$p_table => 'hostile.nowhere'$c$, '42P01', 'relation "hostile.nowhere" does not exist', 'a table that is not there'),
    (7, $c$p_table => 'hostile.inserts; DROP TABLE ratelimit.policies'$c$, '42602', 'invalid name syntax', 'SQL as the table'),
    (8, $c$p_table => 'ratelimit.policies'$c$, '22023', 'p_table: ratelimit.policies is in a reserved schema', 'the extension''s own table'),
    (9, $c$p_table => 'hostile.inserts_id_seq'$c$, '22023', 'p_table: hostile.inserts_id_seq is not a table', 'a sequence'),
    (10, 'p_limit => 0', '22023', '%p_limit%', 'a limit of 0'),
    (11, $c$p_period => '-1 hour'$c$, '22023', '%p_period%', 'a negative period'),
    (12, $c$p_key => ARRAY['column:nobody']$c$, '22023', 'p_key[1]: hostile.inserts has no column nobody', 'a column that is not there'),
    (13, $c$p_key => ARRAY['column:owner); DROP TABLE ratelimit.policies; --']$c$, '22023', 'p_key[1]: hostile.inserts has no column %', 'SQL as a column'),
    (14, $c$p_key => ARRAY['expr:1']$c$, '22023', 'p_key[1]: ''expr:1'' is not ''column:<name>'', ''user'', ''ip'' or ''text:<value>''', 'an unknown part'),
    (15, 'p_key => ''{}''', '22023', 'p_key: at least one part (%)', 'no key'),
    (16, $c$p_name => 'x; DROP TABLE ratelimit.policies'$c$, '22023', 'p_name: % is not a name of lower-case letters, digits and _ (%)', 'SQL as the name'),
    (17, $c$p_engine => 'memory'$c$, '22023', 'p_engine: ''memory'' is not ''table'' or ''unlogged'' (an insert limit''s count must roll back with the insert)', 'the memory engine'),
    (18, $c$p_error_code => '00000'$c$, '22023', 'p_error_code: ''00000'' is not an error SQLSTATE (%)', 'success as the error'),
    (19, $c$p_error_code => 'P0001'', MESSAGE = ''x'$c$, '22023', 'p_error_code: % is not an error SQLSTATE (%)', 'SQL as the code'),
    (20, $c$p_count_existing => 'owner'$c$, '22023', 'p_count_existing: hostile.inserts has no timestamp column owner', 'not a timestamp'),
    (21, $c$p_count_existing => 'created_at', p_key => ARRAY['user']$c$, '22023', 'p_count_existing: the rows already there can be counted only for a key made of their columns (%)', 'the caller as the key'),
    (22, $c$p_anonymous => 'allow'$c$, '22023', 'p_anonymous: ''allow'' is not ''refuse'' or ''ip''', 'anonymous inserts uncounted'),
    (23, $c$p_algorithm => 'bogus'$c$, '22023', '%bogus%', 'an unknown algorithm')
) AS v(n, changes, sqlstate, message, why)
ORDER BY v.n;
INSERT INTO hostile.matrix (function, call, sqlstate, message, why)
SELECT v.f::regprocedure, v.call, v.sqlstate, v.message, v.why
FROM (VALUES
    (1, 'ratelimit.drop_insert_limit(regclass,text)', 'SELECT ratelimit.drop_insert_limit(NULL)', '22004', 'p_table must not be NULL', 'NULL p_table'),
    (2, 'ratelimit.drop_insert_limit(regclass,text)', $q$SELECT ratelimit.drop_insert_limit('hostile.inserts')$q$, '22023',
     'p_name: hostile.inserts has no insert limit ''inserts''', 'a table without one'),
    (3, 'ratelimit.drop_insert_limit(regclass,text)', $q$SELECT ratelimit.drop_insert_limit('hostile.inserts', 'x''; DROP TABLE ratelimit.policies; --')$q$, '22023',
     'p_name: hostile.inserts has no insert limit %', 'SQL as the name'),
    (4, 'ratelimit.within_limit(text,integer)', 'SELECT ratelimit.within_limit(NULL)', '22004', 'p_policy must not be NULL', 'NULL p_policy'),
    (5, 'ratelimit.within_limit(text,integer)', $q$SELECT ratelimit.within_limit('activity.create_post', NULL)$q$, '22004', 'p_cost must not be NULL', 'NULL p_cost'),
    (6, 'ratelimit.within_limit(text,integer)', $q$SELECT ratelimit.within_limit('hostile.nowhere')$q$, '22023', '%hostile.nowhere%', 'a policy that is not there'),
    (7, 'ratelimit.within_limit(text,integer)', $q$SELECT ratelimit.within_limit('activity.create_post', -1)$q$, '22023', '%p_cost%', 'a negative cost')
) AS v(n, f, call, sqlstate, message, why)
ORDER BY v.n;

INSERT INTO hostile.matrix (function, call, sqlstate, message, why)
SELECT v.f::regprocedure, v.call, v.sqlstate, v.message, v.why
FROM (VALUES
    (1, 'ratelimit.validate_policy_lookup(text,text,regtype)',
     $q$SELECT ratelimit.validate_policy_lookup('tier_lookup', 'pg_catalog.now()', 'text')$q$, '22023',
     'tier_lookup: now() must take (p_subject text, p_user uuid) and return one text', 'another signature'),
    (2, 'ratelimit.validate_policy_lookup(text,text,regtype)',
     $q$SELECT ratelimit.validate_policy_lookup('limit_lookup', 'hostile.foreign_lookup(text,uuid)', 'integer')$q$, '22023',
     'limit_lookup: hostile.foreign_lookup(text,uuid) must be owned by a superuser or ratelimit''s owner: every call runs it', 'another owner'),
    (3, 'ratelimit.validate_policy_lookup(text,text,regtype)',
     $q$SELECT ratelimit.validate_policy_lookup('limit_lookup', 'hostile.volatile_lookup(text,uuid)', 'text')$q$, '22023',
     'limit_lookup: hostile.volatile_lookup(text,uuid) must take (p_subject text, p_user uuid) and return one text', 'another result type')
) AS v(n, f, call, sqlstate, message, why)
ORDER BY v.n;

------------------------------------------------------------------------------------------------
-- Existing state under every key the bad calls name, so an error must leave rows as they were,
-- not only add none.
------------------------------------------------------------------------------------------------
SELECT lives_ok(format('SELECT %s', string_agg(s, ', ')), 'a valid call of each surface writes the state the bad calls must leave alone')
FROM (VALUES
    ('public.check_rate_limit(p_rpc_name => ''hostile-rpc'', p_max_calls => 10, p_window_minutes => 1)'),
    ('public.increment_rate_limit(''a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11'', ''hostile-endpoint'', 10, 60)'),
    ('sliding_window.check_rate_limit(''hostile-bucket'', 10, 60, 1)'),
    ('sliding_window.check_rate_limit_tiers(''198.51.100.7'', ''hostile@example.com'')'),
    ('ratelimit.consume(''hostile:k'', 3, ''10 seconds'')'),
    ('ratelimit.consume(''hostile:k'', 3, ''10 seconds'', p_engine => ''unlogged'')'),
    (format('ratelimit.consume(%L, 3, ''10 seconds'', p_engine => ''memory'')', (SELECT memory_key FROM hostile.run))),
    (format('ratelimit.acquire(%L, 3, p_scope => ''session'')', (SELECT memory_key FROM hostile.run))),
    ('ratelimit.check(''activity.create_post'', ''hostile-subject'')'),
    ('ratelimit.check(''activity.update_post'', ''hostile-subject'')'),
    (format('ratelimit.record_outcomes(ARRAY[%L], ARRAY[''hostile-subject''], ARRAY[''denied''])', (SELECT counter_name FROM hostile.run)))
) AS v(s);

-- A lease of the same key held by another role, which the test's roles may not release: an
-- identifier is not a capability (42501, and the lease stays held).
CREATE ROLE hostile_holder NOLOGIN;
CREATE ROLE hostile_other NOLOGIN;
GRANT USAGE ON SCHEMA ratelimit, hostile TO hostile_holder, hostile_other;
GRANT SELECT ON hostile.run TO hostile_holder;
GRANT EXECUTE ON FUNCTION ratelimit.acquire(text, integer, integer, text, interval), ratelimit.release(bigint)
    TO hostile_holder, hostile_other;
SET LOCAL ROLE hostile_holder;
CREATE TEMP TABLE foreign_lease AS SELECT lease_id FROM ratelimit.acquire((SELECT memory_key FROM hostile.run), 3);
RESET ROLE;
INSERT INTO hostile.matrix (function, call, sqlstate, message, why)
SELECT 'ratelimit.release(bigint)',
       format('SELECT hostile.with_setting(''role'', ''hostile_other'', %L)', format('SELECT ratelimit.release(%s)', lease_id)),
       '42501', 'p_lease names a lease taken by another role or in another database: %', 'another role''s lease'
FROM foreign_lease;

------------------------------------------------------------------------------------------------
-- Every function of the extensions is in the matrix, and the matrix is as large as planned.
------------------------------------------------------------------------------------------------
SELECT is(ARRAY(SELECT p.oid::regprocedure::text FROM pg_depend d JOIN pg_proc p ON p.oid = d.objid
                 WHERE d.refobjid IN (SELECT oid FROM pg_extension
                                      WHERE extname IN ('ratelimit', 'ratelimit_rpc_limits', 'ratelimit_endpoint_limits',
                                                        'ratelimit_sliding_window_limits'))
                   AND d.deptype = 'e' AND d.classid = 'pg_proc'::regclass
                EXCEPT SELECT function::text FROM hostile.matrix ORDER BY 1),
          '{}'::text[], 'every SQL-callable function of the extensions has bad calls in the matrix');
SELECT is((SELECT count(DISTINCT function) FROM hostile.matrix), 78::bigint, 'the matrix covers the 78 functions');
SELECT is((SELECT count(*) FROM hostile.matrix), 1346::bigint, 'the matrix holds 1346 bad calls');
SELECT is((SELECT count(DISTINCT call) FROM hostile.matrix), (SELECT count(*) FROM hostile.matrix),
          'no bad call is listed twice');

------------------------------------------------------------------------------------------------
-- The matrix, one row at a time: the SQLSTATE, the message, and nothing written anywhere.
------------------------------------------------------------------------------------------------
CREATE FUNCTION hostile.check(p_id integer) RETURNS SETOF text LANGUAGE plpgsql AS $$
DECLARE
    m hostile.matrix;
    before jsonb;
    label text;
BEGIN
    SELECT * INTO m FROM hostile.matrix WHERE id = p_id;
    label := format('bad call %s, %s: %s', m.id, split_part(m.function::text, '(', 1), m.why);
    IF m.todo IS NOT NULL THEN
        PERFORM todo(m.todo, 3);
    END IF;
    before := hostile.snapshot();
    RETURN NEXT throws_ok(m.call, m.sqlstate, NULL, format('%s: SQLSTATE %s', label, m.sqlstate));
    RETURN NEXT throws_like(m.call, replace(replace(m.message, '\', '\\'), '_', '\_'),
                            format('%s: the message is "%s"', label, m.message));
    RETURN NEXT is(hostile.changed(before, hostile.snapshot()), '{}'::text[], label || ': nothing written');
END
$$;

SELECT hostile.check(id) FROM hostile.matrix ORDER BY id;

------------------------------------------------------------------------------------------------
-- NULL where the function is STRICT or NULL means nothing: an answer of NULL, nothing written.
------------------------------------------------------------------------------------------------
CREATE TABLE hostile.before_nulls AS SELECT hostile.snapshot() AS s;
SELECT is(ratelimit.hash_subject(NULL), NULL, 'hash_subject(NULL) is NULL (STRICT)');
SELECT is(ratelimit.describe_period(NULL), NULL, 'describe_period(NULL) is NULL');
SELECT is(ratelimit.record_outcomes(NULL, NULL, NULL), true, 'record_outcomes of no arrays counts nothing');
SELECT is(hostile.changed((SELECT s FROM hostile.before_nulls), hostile.snapshot()), '{}'::text[],
          'the NULL calls wrote nothing');

------------------------------------------------------------------------------------------------
-- Keys are data. Each hostile key, used once by every surface that stores keys, is stored
-- byte for byte as the key (or as the policy's "name:key", or hashed for the tiers) and is
-- never run: the tables its SQL would drop or empty are all still there.
------------------------------------------------------------------------------------------------
CREATE TABLE hostile.keys (n integer PRIMARY KEY, key text, label text);
INSERT INTO hostile.keys VALUES
    (1, $k$'; DROP TABLE ratelimit.policies; --$k$, 'a quote, then DROP TABLE'),
    (2, $k$x'); DELETE FROM ratelimit.key_state; DELETE FROM public.rpc_rate_limits; --$k$, 'a quote and parenthesis, then DELETE'),
    (3, $k$$$; DROP TABLE ratelimit.tiers; $$ LANGUAGE sql; --$k$, 'dollar quotes'),
    (4, E'back\\slash \\\\ \\x00 \\0 \\u0000 \\'' %s %I %L %%', 'backslashes, escape sequences and format specifiers as text'),
    (5, E'quote''s "double" `back` ;; -- /* comment */ \t tab \n newline \r return', 'quotes, comments, control characters'),
    (6, U&'rtl \202E zero\200Bwidth caf\00E9 cafe\0301 \+01F525', 'invisible and combining Unicode'),
    (7, repeat('''', 200), '200 single quotes'),
    (8, ' NULL ', 'the word NULL between spaces');

CREATE TABLE hostile.relations_before AS
SELECT hostile.snapshot() -> 'relations' AS relations, (SELECT count(*) FROM ratelimit.policies) AS policies,
       (SELECT count(*) FROM ratelimit.tiers) AS tiers;

CREATE FUNCTION hostile.key_is_data(p_key text, p_label text) RETURNS SETOF text LANGUAGE plpgsql AS $$
DECLARE
    d ratelimit.decision;
    before_peek ratelimit.decision;
    label text := 'key with ' || p_label;
    uid constant uuid := 'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11';
BEGIN
    d := ratelimit.consume(p_key, 3, '10 seconds');
    PERFORM ratelimit.consume_all(ARRAY[p_key], ARRAY[3], ARRAY['10 seconds'::interval]);
    RETURN NEXT is((SELECT array_agg(s.amount) FROM ratelimit.key_state s WHERE s.key = p_key), ARRAY[2::bigint],
                   label || ': consume and consume_all count in one table row under exactly that key');
    PERFORM ratelimit.block(p_key, '1 minute', 'unlogged');
    RETURN NEXT ok((SELECT s.blocked_until > 0 FROM ratelimit.key_state_unlogged s WHERE s.key = p_key),
                   label || ': block writes the unlogged row of exactly that key');
    PERFORM ratelimit.reset(p_key, 'memory');
    before_peek := ratelimit.peek(p_key, 3, '10 seconds', p_engine => 'memory');
    d := ratelimit.consume(p_key, 3, '10 seconds', p_engine => 'memory');
    RETURN NEXT is(ARRAY[before_peek.remaining, (ratelimit.peek(p_key, 3, '10 seconds', p_engine => 'memory')).remaining,
                         (ratelimit.peek(p_key || ' ', 3, '10 seconds', p_engine => 'memory')).remaining],
                   ARRAY[3, 2, 3], label || ': the memory engine counts exactly that key, not one a byte longer');
    PERFORM public.check_rate_limit(p_rpc_name => p_key, p_max_calls => 10, p_window_minutes => 1);
    RETURN NEXT is((SELECT array_agg(r.call_count) FROM public.rpc_rate_limits r WHERE r.rpc_name = p_key AND r.user_id = uid),
                   ARRAY[1], label || ': the per-RPC limits store it as the rpc_name');
    PERFORM public.increment_rate_limit(uid, p_key, 10, 60);
    RETURN NEXT is((SELECT array_agg(r.counter) FROM public.rate_limits r WHERE r.endpoint = p_key), ARRAY[1],
                   label || ': the endpoint limits store it as the endpoint');
    PERFORM sliding_window.check_rate_limit(p_key => p_key, p_limit => 10, p_window_seconds => 60);
    RETURN NEXT is((SELECT array_agg(b.count) FROM sliding_window.rate_limit_buckets b WHERE b.key = p_key), ARRAY[1],
                   label || ': the sliding-window limits store it as the bucket key');
    PERFORM sliding_window.check_rate_limit_tiers(p_key, p_key);
    RETURN NEXT is((SELECT count(*) FROM sliding_window.rate_limit_buckets b
                     WHERE b.key IN ('ip:' || encode(sha256(convert_to(btrim(p_key), 'UTF8')), 'hex'),
                                     'email:' || encode(sha256(convert_to(lower(btrim(p_key)), 'UTF8')), 'hex'))),
                   2::bigint, label || ': the tiers store its SHA-256 as the ip and email keys');
    PERFORM ratelimit.check('activity.create_post', p_key);
    RETURN NEXT is((SELECT array_agg(s.amount) FROM ratelimit.key_state s
                     WHERE s.policy = 'activity.create_post' AND s.key = p_key),
                   ARRAY[1::bigint], label || ': a policy stores it under the policy''s name');
    RETURN NEXT is(ratelimit.reset(p_key), true, label || ': reset finds exactly that key');
    RETURN NEXT is((SELECT count(*) FROM ratelimit.key_state s WHERE s.policy = '' AND s.key = p_key), 0::bigint,
                   label || ': and deletes its row (not the policy''s)');
END
$$;

SELECT hostile.key_is_data(k.key, k.label) FROM hostile.keys k ORDER BY k.n;

SELECT is(hostile.snapshot() -> 'relations', (SELECT relations FROM hostile.relations_before),
          'after the hostile keys: every table and view is still there');
SELECT is((SELECT count(*) FROM ratelimit.policies), (SELECT policies FROM hostile.relations_before),
          'after the hostile keys: every policy is still there');
SELECT is((SELECT count(*) FROM ratelimit.tiers), (SELECT tiers FROM hostile.relations_before),
          'after the hostile keys: every tier is still there');
SELECT is((SELECT count(*) FROM ratelimit.key_state s, hostile.keys k
            WHERE s.policy = 'activity.create_post' AND s.key = k.key),
          8::bigint, 'after the hostile keys: their policy rows are all there (nothing ran DELETE)');

------------------------------------------------------------------------------------------------
-- An address spelled as a network, or as IPv4-mapped IPv6, must not slip past a deny entry for
-- it: it is denied (or refused, 22023 naming p_ip), never decided as allowed.
------------------------------------------------------------------------------------------------
INSERT INTO ratelimit.access_list (action, ip, reason) VALUES ('deny', '203.0.113.0/24', 'hostile input test');

CREATE FUNCTION hostile.outcome(p_ip inet) RETURNS text LANGUAGE plpgsql AS $$
BEGIN
    RETURN (ratelimit.check('activity.create_post', 'deny-list:' || p_ip::text, p_ip => p_ip)).reason;
EXCEPTION WHEN OTHERS THEN
    RETURN format('error %s: %s', SQLSTATE, SQLERRM);
END
$$;

SELECT is(hostile.outcome('203.0.113.7'), 'deny_list', 'a denied address is denied');
SELECT is(hostile.outcome('203.0.113.7/32'), 'deny_list', 'a denied address with its /32 is denied');
SELECT matches(hostile.outcome('203.0.113.7/0'), '^(deny_list|error 22023: p_ip)',
               'a denied address with a /0 mask is denied or refused, not decided as allowed');
SELECT matches(hostile.outcome('203.0.113.7/8'), '^(deny_list|error 22023: p_ip)',
               'a denied address with a /8 mask is denied or refused, not decided as allowed');
SELECT matches(hostile.outcome('::ffff:203.0.113.7'), '^(deny_list|error 22023: p_ip)',
               'a denied address written as IPv4-mapped IPv6 is denied or refused');
SELECT matches(hostile.outcome('::ffff:203.0.113.7/96'), '^(deny_list|error 22023: p_ip)',
               'a denied address written as IPv4-mapped IPv6 with a /96 mask is denied or refused');

------------------------------------------------------------------------------------------------
-- What the shared-memory counters give back is text PostgreSQL can use: names and subjects past
-- their stored length are cut, and the cut must not split a character.
------------------------------------------------------------------------------------------------
SELECT lives_ok(format('SELECT ratelimit.record_outcomes(ARRAY[%L], ARRAY[%L], ARRAY[''denied''])',
                       (SELECT counter_name FROM hostile.run) || '.utf8', 'x' || repeat('é', 200)),
                'record_outcomes takes a 401-byte subject of two-byte characters');
SELECT lives_ok($$SELECT count(convert_to(o.subject, 'UTF8')) FROM ratelimit.top_offenders(1000) o$$,
                'top_offenders returns only valid UTF-8 subjects');
SELECT lives_ok(format('SELECT ratelimit.record_outcomes(ARRAY[%L], ARRAY[''s''], ARRAY[''allowed''])',
                       (SELECT counter_name FROM hostile.run) || repeat('é', 40)),
                'record_outcomes takes a policy name of 100 bytes ending in two-byte characters');
SELECT lives_ok($$SELECT count(convert_to(p.policy, 'UTF8')) FROM ratelimit.policy_stats() p$$,
                'policy_stats returns only valid UTF-8 policy names');

------------------------------------------------------------------------------------------------
-- One backend took every call.
------------------------------------------------------------------------------------------------
SELECT is(pg_backend_pid(), (SELECT pid FROM hostile.run), 'the backend that started the file answered every call');
SELECT is((SELECT 1), 1, 'SELECT 1 after every hostile call');

SELECT * FROM finish();
ROLLBACK;
