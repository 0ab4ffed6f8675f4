#!/usr/bin/env bash
# What the attackers of docs/operations.md ("Security") cannot do, on a cluster of its own (the
# library preloaded, a denial queue of 16 entries, so that a database's share is 8 and what its
# open transactions may hold 4):
#   - a non-superuser owner of the denial log, whose trigger on it runs as that owner when the
#     queue's writer writes a rolled-back denial, never as a superuser; a table of the same name
#     added to the extension elsewhere is never written;
#   - a database whose open transaction holds many denials, which leaves the other databases
#     their share of the queue; a key of control characters, logged shortened and marked;
#   - a database flooding the top offenders, which leaves the other's offenders in place;
#   - a login role outside the API roles, which cannot spend a user's quota through pre_request;
#   - a role with CREATE in public or on the database, which can neither pass off a view or a
#     table of other columns as a drop-in ratelimit 0.6.0 left, nor block an install without
#     the error naming it, nor make an auth.users that rpc_rate_limits would reference.
set -euo pipefail
cd "$(dirname "$0")/../.."
source scripts/cluster.sh
source scripts/tap.sh

cluster_start "shared_preload_libraries = 'ratelimit'" "fsync = off" \
    "ratelimit.denial_queue_size = 16" >/dev/null
# q DATABASE SQL: one value.
q() {
    psql -X -A -t -q -v ON_ERROR_STOP=1 -d "$1" -c "$2"
}
# error_of DATABASE SQL: the message of the error SQL raises, or "no error".
error_of() {
    local out
    if out="$(psql -X -A -t -q -v ON_ERROR_STOP=1 -d "$1" -c "$2" 2>&1)"; then
        echo "no error"
    else
        sed -n 's/^.*ERROR:  //p' <<<"$out" | head -1
    fi
}
# wait_for DATABASE SQL WANT: SQL's value once it is WANT, or after 15 s whatever it is then.
wait_for() {
    local got=""
    for _ in $(seq 1 150); do
        got="$(q "$1" "$2")"
        [ "$got" = "$3" ] && break
        sleep 0.1
    done
    echo "$got"
}

psql -X -q -v ON_ERROR_STOP=1 -d postgres >/dev/null <<'SQL'
-- Supabase's postgres role: owns what the extension made, is no superuser.
CREATE ROLE extension_owner NOLOGIN;
CREATE ROLE intruder LOGIN;
CREATE ROLE outsider LOGIN;
CREATE ROLE anon NOLOGIN;
CREATE ROLE authenticated NOLOGIN;
CREATE DATABASE security_a;
CREATE DATABASE security_b;
CREATE DATABASE security_install;
CREATE DATABASE security_auth;
GRANT CREATE ON DATABASE security_auth TO intruder;
SQL
for database in security_a security_b; do
    psql -X -q -v ON_ERROR_STOP=1 -d "$database" >/dev/null <<'SQL'
CREATE EXTENSION ratelimit;
INSERT INTO ratelimit.policies (name, "limit", period, engine, log_denials)
VALUES ('login', 1, '1 minute', 'memory', true);
SQL
done
not_logged() {
    q "$1" "SELECT coalesce(sum(denials_not_logged), 0) FROM ratelimit.policy_stats WHERE policy = 'login'"
}

echo "# the denial log's writer writes as the log's owner"
psql -X -q -v ON_ERROR_STOP=1 -d security_a >/dev/null <<'SQL'
GRANT USAGE ON SCHEMA ratelimit TO extension_owner;
GRANT CREATE ON SCHEMA public TO extension_owner;
ALTER TABLE ratelimit.denial_log OWNER TO extension_owner;
ALTER SEQUENCE ratelimit.denial_log_position OWNER TO extension_owner;
CREATE TABLE public.trigger_saw (who name, superuser boolean);
ALTER TABLE public.trigger_saw OWNER TO extension_owner;
SET ROLE extension_owner;
CREATE FUNCTION public.watch_denials() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO public.trigger_saw
    SELECT current_user, r.rolsuper FROM pg_catalog.pg_roles r WHERE r.rolname = current_user;
    RETURN NEW;
END
$$;
CREATE TRIGGER watch_denials AFTER INSERT ON ratelimit.denial_log
    FOR EACH ROW EXECUTE FUNCTION public.watch_denials();
RESET ROLE;
SELECT ratelimit.check('login', 'owner-test');
BEGIN;
SELECT ratelimit.check('login', 'owner-test');
ROLLBACK;
SQL
is "$(wait_for security_a "SELECT count(*) FROM ratelimit.denial_log WHERE event_data ->> 'identifier' = 'owner-test'" 1)" \
    "1" "a denial that rolled back reaches the log through the writer"
is "$(q security_a "SELECT string_agg(who || ' ' || superuser, ',') FROM public.trigger_saw")" \
    "extension_owner false" "the owner's trigger ran as the owner, not as a superuser"
psql -X -q -v ON_ERROR_STOP=1 -d security_a >/dev/null <<'SQL'
DROP TRIGGER watch_denials ON ratelimit.denial_log;
CREATE SCHEMA decoy;
CREATE TABLE decoy.denial_log (LIKE ratelimit.denial_log INCLUDING ALL);
CREATE SEQUENCE decoy.denial_log_position;
ALTER EXTENSION ratelimit ADD TABLE decoy.denial_log;
ALTER EXTENSION ratelimit ADD SEQUENCE decoy.denial_log_position;
SELECT ratelimit.check('login', 'decoy-test');
BEGIN;
SELECT ratelimit.check('login', 'decoy-test');
ROLLBACK;
SQL
is "$(wait_for security_a "SELECT count(*) FROM ratelimit.denial_log WHERE event_data ->> 'identifier' = 'decoy-test'" 1) $(q security_a "SELECT count(*) FROM decoy.denial_log")" \
    "1 0" "another denial_log added to the extension is never written"
psql -X -q -v ON_ERROR_STOP=1 -d security_a >/dev/null <<'SQL'
ALTER EXTENSION ratelimit DROP TABLE decoy.denial_log;
ALTER EXTENSION ratelimit DROP SEQUENCE decoy.denial_log_position;
DROP SCHEMA decoy CASCADE;
SQL

echo "# each database has its share of the denial queue"
# security_a holds 20 denials in a transaction it keeps open: the queue keeps 4 of them.
psql -X -q -v ON_ERROR_STOP=1 -d security_a >/dev/null <<'SQL' &
SELECT ratelimit.check('login', 'held-' || n) FROM generate_series(1, 20) AS n;
BEGIN;
SELECT ratelimit.check('login', 'held-' || n) FROM generate_series(1, 20) AS n;
SELECT pg_sleep(6);
ROLLBACK;
SQL
holder=$!
for _ in $(seq 1 100); do
    [ "$(q security_a "SELECT count(*) FROM pg_stat_activity WHERE query LIKE 'SELECT pg_sleep(6)%' AND state = 'active'")" = 1 ] && break
    sleep 0.1
done
before_b="$(not_logged security_b)"
for n in 1 2 3; do
    psql -X -q -v ON_ERROR_STOP=1 -d security_b >/dev/null <<SQL
SELECT ratelimit.check('login', 'other-$n');
BEGIN;
SELECT ratelimit.check('login', 'other-$n');
ROLLBACK;
SQL
done
is "$(wait_for security_b "SELECT count(*) FROM ratelimit.denial_log WHERE event_data ->> 'identifier' LIKE 'other-%'" 3) $(($(not_logged security_b) - before_b))" \
    "3 0" "while another database holds 20 denials open, this one's 3 rolled-back denials are logged"
before_a="$(not_logged security_a)"
wait "$holder"
is "$(wait_for security_a "SELECT count(*) FROM ratelimit.denial_log WHERE event_data ->> 'identifier' LIKE 'held-%'" 4) $(($(not_logged security_a) - before_a))" \
    "4 16" "the open transaction's 20: the 4 its share held are logged, 16 counted as not logged"
is "$(q security_a "SHOW ratelimit.denial_log_writers") $(q security_a "SHOW ratelimit.denial_queue_database_share")" \
    "2 50" "the writers and the shares are settings"

echo "# a key of control characters is logged, shortened and marked"
psql -X -q -v ON_ERROR_STOP=1 -d security_b >/dev/null <<'SQL'
-- The longest key (256 bytes), each byte escaped to six, with a caller's user and IPv6 address,
-- under a policy of a long name.
INSERT INTO ratelimit.policies (name, "limit", period, engine, log_denials)
VALUES ('login.attempts.from.one.client.address.and.one.account.at.most', 1, '1 minute', 'memory', true);
SELECT ratelimit.check('login.attempts.from.one.client.address.and.one.account.at.most', repeat(chr(1), 256), p_ip => 'ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff',
                       p_user => 'ffffffff-ffff-ffff-ffff-ffffffffffff');
BEGIN;
SELECT ratelimit.check('login.attempts.from.one.client.address.and.one.account.at.most', repeat(chr(1), 256), p_ip => 'ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff',
                       p_user => 'ffffffff-ffff-ffff-ffff-ffffffffffff');
ROLLBACK;
SQL
is "$(wait_for security_b "SELECT count(*) FROM ratelimit.denial_log WHERE event_data ->> 'identifier_truncated' = 'true'" 1)" \
    "1" "its denial is in the log, marked identifier_truncated"
is "$(q security_b "SELECT length(event_data ->> 'identifier') BETWEEN 100 AND 255 AND event_data ->> 'identifier' = repeat(chr(1), length(event_data ->> 'identifier')) FROM ratelimit.denial_log WHERE event_data ->> 'identifier_truncated' = 'true'")" \
    "t" "its identifier is the key's beginning"

echo "# each database has its share of the top offenders"
psql -X -q -v ON_ERROR_STOP=1 -d security_b >/dev/null <<'SQL'
SELECT ratelimit.reset_policy_stats();
SELECT ratelimit.check('login', 'victim-' || n) FROM generate_series(1, 3) AS n, generate_series(1, 2);
SQL
psql -X -q -v ON_ERROR_STOP=1 -d security_a >/dev/null <<'SQL'
SELECT ratelimit.check('login', 'flood-' || n) FROM generate_series(1, 400) AS n, generate_series(1, 2);
SQL
is "$(q security_b "SELECT string_agg(subject || '=' || denials, ' ' ORDER BY subject) FROM ratelimit.top_offenders(100) WHERE subject LIKE 'victim-%'")" \
    "victim-1=1 victim-2=1 victim-3=1" "another database's flood of 400 new offenders leaves this one's"
is "$(q security_a "SELECT count(*) FROM ratelimit.top_offenders(1000)")" "64" \
    "the flooding database holds its share of the 128 entries"

echo "# pre_request outside PostgREST"
psql -X -q -v ON_ERROR_STOP=1 -d security_a >/dev/null <<'SQL'
INSERT INTO ratelimit.policies (name, "limit", period) VALUES ('api.write', 2, '1 minute');
INSERT INTO ratelimit.request_routes (methods, path_pattern, policy, key) VALUES ('{POST}', '/items', 'api.write', 'user');
SQL
is "$(PGUSER=outsider error_of security_a "SELECT set_config('request.method', 'POST', false), set_config('request.path', '/items', false), set_config('request.jwt.claims', '{\"role\": \"authenticated\", \"sub\": \"6f1c2a8e-0d5b-4c1e-9a51-2b7e8d3c4f10\"}', false), ratelimit.pre_request()")" \
    "permission denied for schema ratelimit" "a login role outside the API roles cannot run it with a user's claims"
is "$(q security_a "SELECT (ratelimit.check('api.write', 'user:6f1c2a8e-0d5b-4c1e-9a51-2b7e8d3c4f10', 0)).remaining")" \
    "2" "and the user's quota is untouched"

echo "# installing the drop-ins over what ratelimit 0.6.0 left, and what others left"
marker="ratelimit 0.6.0 drop-in, kept in place: CREATE EXTENSION ratelimit_rpc_limits makes it that extension''s, rows kept"
leftover_table="CREATE TABLE public.rpc_rate_limits (
    id uuid PRIMARY KEY DEFAULT gen_random_uuid(), user_id uuid NOT NULL, rpc_name text NOT NULL,
    call_count integer NOT NULL DEFAULT 1, window_start timestamptz NOT NULL DEFAULT now(),
    ip_address text, window_expires_at timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT rpc_rate_limits_user_id_rpc_name_key UNIQUE (user_id, rpc_name));
COMMENT ON TABLE public.rpc_rate_limits IS '$marker';"
psql -X -q -v ON_ERROR_STOP=1 -d security_install >/dev/null <<SQL
CREATE EXTENSION ratelimit;
GRANT CREATE ON SCHEMA public TO intruder;
CREATE TABLE public.copied (n int);
CREATE FUNCTION public.copy_counts() RETURNS SETOF uuid LANGUAGE sql AS 'INSERT INTO public.copied VALUES (1) RETURNING NULL::uuid';
CREATE VIEW public.rpc_rate_limits AS SELECT id, gen_random_uuid() AS user_id, 'x'::text AS rpc_name,
    1 AS call_count, now() AS window_start, NULL::text AS ip_address, now() AS window_expires_at
    FROM public.copy_counts() AS id;
COMMENT ON VIEW public.rpc_rate_limits IS '$marker';
SQL
is "$(error_of security_install "CREATE EXTENSION ratelimit_rpc_limits")" \
    "ratelimit_rpc_limits cannot be installed in schema public: view public.rpc_rate_limits (owned by postgres) already there" \
    "a view with the marker comment is not adopted: the install stops and names it"
q security_install "DROP VIEW public.rpc_rate_limits" >/dev/null
psql -X -q -v ON_ERROR_STOP=1 -d security_install >/dev/null <<<"$leftover_table"
q security_install "SET ROLE intruder; CREATE TABLE public.rpc_rate_limits_0_6_0 (x int); CREATE FUNCTION public.cleanup_rpc_rate_limits(integer) RETURNS integer LANGUAGE sql AS 'SELECT 0'" >/dev/null
is "$(error_of security_install "CREATE EXTENSION ratelimit_rpc_limits")" \
    "ratelimit_rpc_limits cannot be installed in schema public: function public.cleanup_rpc_rate_limits(integer) (owned by intruder), table public.rpc_rate_limits_0_6_0 (owned by intruder) already there" \
    "what another role made in the way is named, with its owner"
q security_install "DROP TABLE public.rpc_rate_limits_0_6_0; DROP FUNCTION public.cleanup_rpc_rate_limits(integer); ALTER TABLE public.rpc_rate_limits ALTER COLUMN call_count TYPE bigint" >/dev/null
is "$(error_of security_install "CREATE EXTENSION ratelimit_rpc_limits")" \
    "table public.rpc_rate_limits_0_6_0 (owned by postgres) is not the drop-in table ratelimit 0.6.0 made: its columns differ from public.rpc_rate_limits's" \
    "a table of other columns is not adopted"
q security_install "ALTER TABLE public.rpc_rate_limits ALTER COLUMN call_count TYPE integer; INSERT INTO public.rpc_rate_limits (user_id, rpc_name, call_count) VALUES (gen_random_uuid(), 'kept', 3)" >/dev/null
is "$(error_of security_install "CREATE EXTENSION ratelimit_rpc_limits")" "no error" \
    "the table ratelimit 0.6.0 left is adopted"
is "$(q security_install "SELECT call_count FROM public.rpc_rate_limits WHERE rpc_name = 'kept'") $(q security_install "SELECT count(*) FROM public.copied")" \
    "3 0" "with its rows, and no function of another role ran"

echo "# rpc_rate_limits references only the real auth.users"
psql -X -q -v ON_ERROR_STOP=1 -d security_auth >/dev/null <<'SQL'
CREATE EXTENSION ratelimit;
SET ROLE intruder;
CREATE SCHEMA auth;
CREATE TABLE auth.users (id uuid PRIMARY KEY);
RESET ROLE;
CREATE EXTENSION ratelimit_rpc_limits;
SQL
is "$(q security_auth "SELECT count(*) FROM pg_constraint WHERE conname = 'rpc_rate_limits_user_id_fkey'")" "0" \
    "an auth.users in a schema another role made gets no foreign key"
psql -X -q -v ON_ERROR_STOP=1 -d security_auth >/dev/null <<'SQL'
DROP EXTENSION ratelimit_rpc_limits;
ALTER SCHEMA auth OWNER TO postgres;
CREATE EXTENSION ratelimit_rpc_limits;
SQL
is "$(q security_auth "SELECT count(*) FROM pg_constraint WHERE conname = 'rpc_rate_limits_user_id_fkey'")" "1" \
    "Supabase's (a schema auth a superuser owns) does"

echo "1..$checks"
if [ "$failures" -gt 0 ]; then
    echo "security: $failures of $checks failed"
    exit 1
fi
echo "security: all $checks passed"
