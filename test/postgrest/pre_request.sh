#!/usr/bin/env bash
# ratelimit.pre_request() as PostgREST runs it, on a primary and on a hot standby of its own
# (clusters of its own, the library preloaded). Each request is PostgREST's transaction, sent
# as the authenticator role:
#   BEGIN ISOLATION LEVEL READ COMMITTED READ ONLY      -- READ WRITE but for GET and HEAD
#   SELECT set_config('search_path', ..., true), set_config('role', <role>, true),
#          set_config('request.jwt.claims', ..., true), set_config('request.method', ..., true),
#          set_config('request.path', ..., true), set_config('request.headers', ..., true),
#          set_config('request.cookies', ..., true)
#   SELECT "ratelimit"."pre_request"()                  -- db-pre-request
#   <the request's query, which also reads current_setting('response.headers', true) for the
#    response's headers>
#   COMMIT
# A denial is PostgREST's custom error: SQLSTATE PGRST, the message the JSON body (code,
# message, details, hint), the detail {"status": 429, "headers": {...}}.
set -euo pipefail
cd "$(dirname "$0")/../.."
source scripts/cluster.sh

# A small denial queue, so that a transaction with more logged denials than it holds can show
# what happens to the rest.
cluster_start "shared_preload_libraries = 'ratelimit'" "fsync = off" \
    "ratelimit.denial_queue_size = 16" >/dev/null
standby_dir="$CLUSTER_DIR/standby"
standby_port=""
stop_all() {
    if [ -n "$standby_port" ]; then
        cluster_as_postgres "$CLUSTER_BINDIR/pg_ctl" -D "$standby_dir" -m fast -w stop \
            >/dev/null 2>&1 || true
    fi
    cluster_stop
}
trap stop_all EXIT

database=ratelimit_postgrest
tests=0
failures=0
is() {
    tests=$((tests + 1))
    if [ "$1" == "$2" ]; then
        echo "ok $tests - $3"
    else
        failures=$((failures + 1))
        echo "not ok $tests - $3"
        echo "#   got:      $1"
        echo "#   expected: $2"
    fi
}

psql -X -q -v ON_ERROR_STOP=1 -d postgres >/dev/null <<SQL
CREATE ROLE anon NOLOGIN;
CREATE ROLE authenticated NOLOGIN;
CREATE ROLE authenticator LOGIN NOINHERIT;
GRANT anon, authenticated TO authenticator;
CREATE DATABASE $database;
-- Every request's clock stands at the start of a minute, so windows and waits are exact.
ALTER ROLE authenticator SET ratelimit.test_clock = '2026-03-01 10:00:00+00';
SQL
psql -X -q -v ON_ERROR_STOP=1 -d "$database" >/dev/null <<'SQL'
CREATE EXTENSION ratelimit;
-- Reads (GET, HEAD) per client address on the memory engine; writes per user, or per address
-- for anonymous callers, on the table engine; every request per address on a generous policy.
INSERT INTO ratelimit.policies (name, "limit", period, engine) VALUES
    ('api.read', 3, '1 minute', 'memory'),
    ('api.write', 2, '1 minute', 'table'),
    ('api.any', 100, '1 minute', 'memory');
INSERT INTO ratelimit.request_routes (methods, path_pattern, policy, key) VALUES
    ('{GET,HEAD}', '/items*', 'api.read', 'ip'),
    ('{POST,PATCH}', '/items', 'api.write', 'user_or_ip'),
    ('{*}', '*', 'api.any', 'ip');
SQL

# request PORT METHOD PATH ROLE CLAIMS HEADERS: runs the transaction and prints what the
# client would get: "200 <name>=<value> | ..." (the headers pre_request set, sorted), or
# "PGRST <status> <body code> | <name>=<value> | ..." (the 429's headers), or the other error.
request() {
    local port="$1" method="$2" path="$3" role="$4" claims="$5" headers="$6" access="READ WRITE"
    if [ "$method" = GET ] || [ "$method" = HEAD ]; then
        access="READ ONLY"
    fi
    local out
    out="$(PGPORT="$port" PGUSER=authenticator psql -X -A -t -q -d "$database" \
        -v method="$method" -v path="$path" -v role="$role" -v claims="$claims" \
        -v headers="$headers" 2>&1 <<SQL
\\set VERBOSITY verbose
\\set ON_ERROR_STOP on
BEGIN ISOLATION LEVEL READ COMMITTED $access;
SELECT set_config('search_path', '"public"', true), set_config('role', :'role', true),
       set_config('request.jwt.claims', :'claims', true), set_config('request.method', :'method', true),
       set_config('request.path', :'path', true), set_config('request.headers', :'headers', true),
       set_config('request.cookies', '{}', true) \\g /dev/null
SELECT "ratelimit"."pre_request"() \\g /dev/null
SELECT '200 ' || coalesce((SELECT string_agg(e.key || '=' || e.value, ' | ' ORDER BY e.key)
                             FROM jsonb_array_elements(nullif(current_setting('response.headers', true), '')::jsonb) AS a,
                                  jsonb_each_text(a) AS e), '');
COMMIT;
SQL
    )" || true
    if grep -q 'ERROR:  PGRST: ' <<<"$out"; then
        local message detail
        message="$(sed -n 's/^.*ERROR:  PGRST: //p' <<<"$out")"
        detail="$(sed -n 's/^DETAIL:  //p' <<<"$out")"
        psql -X -A -t -q -d "$database" -v message="$message" -v detail="$detail" <<'SQL'
SELECT 'PGRST ' || (:'detail'::jsonb ->> 'status') || ' ' || (:'message'::jsonb ->> 'code') || ' | '
       || (SELECT string_agg(e.key || '=' || e.value, ' | ' ORDER BY e.key)
             FROM jsonb_each_text(:'detail'::jsonb -> 'headers') AS e);
SQL
    elif grep -q '^200 ' <<<"$out"; then
        grep '^200 ' <<<"$out"
    else
        grep -o 'ERROR: .*' <<<"$out" | head -1
    fi
}

# header RESPONSE NAME: one header's value in a response line.
header() {
    tr '|' '\n' <<<"${1#* }" | sed -n "s/^ *$2=\(.*[^ ]\) *$/\1/p" | head -1
}

anon_claims='{"role": "anon"}'
user_claims='{"role": "authenticated", "sub": "6f1c2a8e-0d5b-4c1e-9a51-2b7e8d3c4f10"}'
# The client wrote the first hop itself; the proxy in front of PostgREST appended the address it
# was reached from, the client's (ratelimit.client_ip_trusted_proxies = 1, the default).
client='{"x-forwarded-for": "10.0.0.1, 203.0.113.7", "user-agent": "test"}'
other_client='{"x-forwarded-for": "198.51.100.9"}'

echo "# configuration is checked when it is written"
# error_of SQL TEXT: TEXT when the statement fails with an error message containing it.
error_of() {
    psql -X -A -t -q -d "$database" -c "$1" 2>&1 | sed -n 's/^.*ERROR:  //p' | grep -oF -- "$2" | head -1
}
is "$(error_of "INSERT INTO ratelimit.request_routes (methods, path_pattern, policy) VALUES ('{GET}', '/x', 'api.write')" 'policy: a route for GET or HEAD needs a memory-engine policy')" \
    'policy: a route for GET or HEAD needs a memory-engine policy' \
    "a GET route to a table-engine policy is refused"
is "$(error_of "INSERT INTO ratelimit.request_routes (path_pattern, policy) VALUES ('/x', 'api.write')" 'policy: a route for GET or HEAD needs a memory-engine policy')" \
    'policy: a route for GET or HEAD needs a memory-engine policy' \
    "so is a route for any method ('*')"
is "$(error_of "UPDATE ratelimit.policies SET engine = 'table' WHERE name = 'api.read'" 'engine: policy "api.read" is used by a route for GET or HEAD')" \
    'engine: policy "api.read" is used by a route for GET or HEAD' \
    "moving a routed read policy off the memory engine is refused"
is "$(error_of "INSERT INTO ratelimit.request_routes (methods, path_pattern, policy) VALUES ('{get}', '/x', 'api.any')" 'methods must hold GET, HEAD, POST, PUT, PATCH, DELETE, OPTIONS')" \
    'methods must hold GET, HEAD, POST, PUT, PATCH, DELETE, OPTIONS' "methods are upper case"
is "$(error_of "INSERT INTO ratelimit.request_routes (path_pattern, policy, key) VALUES ('/x', 'api.any', 'email')" 'key must be user, ip, user_or_ip or global (got "e')" \
    'key must be user, ip, user_or_ip or global (got "e' "keys are checked"
is "$(error_of "INSERT INTO ratelimit.request_routes (path_pattern, policy) VALUES ('items', 'api.any')" 'path_pattern must start with / or * and ')" \
    'path_pattern must start with / or * and ' "paths start with / or *"

check_reads() {  # check_reads PORT WHERE
    local port="$1" where="$2" out
    for remaining in 2 1 0; do
        out="$(request "$port" GET /items anon "$anon_claims" "$client")"
        is "$(header "$out" X-RateLimit-Remaining) $(header "$out" X-RateLimit-Limit)" "$remaining 3" \
            "$where: GET /items allowed, api.read has $remaining of 3 left"
        is "$(header "$out" RateLimit | grep -o '"api.read";r=[0-9]*;t=[0-9]*')" "\"api.read\";r=$remaining;t=60" \
            "$where: its RateLimit field says so, with the reset in 60 s"
    done
    out="$(request "$port" HEAD /items/7 anon "$anon_claims" "$client")"
    is "${out%% *} $(header "$out" Retry-After) $(header "$out" X-RateLimit-Remaining)" "PGRST 60 0" \
        "$where: the fourth read (HEAD /items/7, the same route) gets PostgREST's error with Retry-After 60"
    is "$(cut -d' ' -f2,3 <<<"$out")" "429 RATE_LIMITED" "$where: status 429, body code RATE_LIMITED"
    is "$(header "$out" RateLimit | grep -o '"api.read";r=0;t=60')" '"api.read";r=0;t=60' \
        "$where: the 429 carries the RateLimit field, t equal to Retry-After"
    out="$(request "$port" GET /items anon "$anon_claims" "$other_client")"
    is "$(header "$out" X-RateLimit-Remaining)" "2" "$where: another client address has its own count"
    out="$(request "$port" GET /health anon "$anon_claims" "$client")"
    is "${out%% *} $(header "$out" X-RateLimit-Limit)" "200 100" \
        "$where: a path only the catch-all route matches is counted by api.any alone"
}

echo "# the primary"
check_reads "$PGPORT" primary
out="$(request "$PGPORT" POST /items authenticated "$user_claims" "$client")"
is "${out%% *} $(header "$out" X-RateLimit-Remaining)" "200 1" "POST /items by a user: allowed (table engine), 1 of 2 left"
out="$(request "$PGPORT" POST /items authenticated "$user_claims" "$client")"
out="$(request "$PGPORT" POST /items authenticated "$user_claims" "$other_client")"
is "${out%% *} $(cut -d' ' -f2 <<<"$out")" "PGRST 429" "the user's third write is refused, whatever address it comes from"
out="$(request "$PGPORT" POST /items anon "$anon_claims" "$other_client")"
is "${out%% *} $(header "$out" X-RateLimit-Remaining)" "200 1" "an anonymous write counts by its address"
is "$(psql -X -A -t -q -d "$database" -c "SELECT key || '=' || amount FROM ratelimit.key_state WHERE policy = 'api.write' ORDER BY key" | tr '\n' ' ')" \
    "ip:198.51.100.9=1 user:6f1c2a8e-0d5b-4c1e-9a51-2b7e8d3c4f10=2 " \
    "the table engine holds exactly the committed writes (the refused one charged nothing)"
out="$(request "$PGPORT" GET /items anon "$anon_claims" '{"x-forwarded-for": "not an address"}')"
is "${out%% *} $(header "$out" X-RateLimit-Remaining)" "200 2" "an unreadable address counts as ip:unknown"
out="$(psql -X -A -t -q -d "$database" -c 'SELECT "ratelimit"."pre_request"()' 2>&1)"
is "$out" "" "outside a PostgREST request (request.method unset) pre_request does nothing"

is "$(psql -X -A -t -q -d "$database" -c "SELECT policy || ':' || allowed || '/' || denied FROM ratelimit.policy_stats ORDER BY policy" | tr '\n' ' ')" \
    "api.any:9/0 api.read:5/1 api.write:3/1 " \
    "the policy counters saw every request (a call denied by one policy charges none of the others)"

echo "# the client address is the hop the trusted proxies added"
psql -X -q -v ON_ERROR_STOP=1 -d "$database" >/dev/null <<'SQL'
INSERT INTO ratelimit.policies (name, "limit", period, engine) VALUES ('api.signup', 1, '1 minute', 'table');
INSERT INTO ratelimit.request_routes (methods, path_pattern, policy, key) VALUES ('{POST}', '/signup', 'api.signup', 'ip');
SQL
out="$(request "$PGPORT" POST /signup anon "$anon_claims" '{"x-forwarded-for": "198.51.100.1, 203.0.113.50"}')"
is "${out%% *}" "200" "the first signup from 203.0.113.50 is allowed"
out="$(request "$PGPORT" POST /signup anon "$anon_claims" '{"x-forwarded-for": "198.51.100.2, 203.0.113.50"}')"
is "${out%% *} $(cut -d' ' -f2 <<<"$out")" "PGRST 429" \
    "a second with another first hop, which the client chose, before the same proxy-added hop is refused"
signup_keys() {
    psql -X -A -t -q -d "$database" -c "SELECT string_agg(key, ' ' ORDER BY key) FROM ratelimit.key_state WHERE policy = 'api.signup'"
}
psql -X -q -v ON_ERROR_STOP=1 -d "$database" -c "ALTER ROLE authenticator SET ratelimit.client_ip_trusted_proxies = 2" >/dev/null
request "$PGPORT" POST /signup anon "$anon_claims" '{"x-forwarded-for": "198.51.100.3, 203.0.113.60, 10.0.0.9"}' >/dev/null
request "$PGPORT" POST /signup anon "$anon_claims" '{"x-forwarded-for": "203.0.113.61"}' >/dev/null
is "$(signup_keys)" "ip:203.0.113.50 ip:203.0.113.60 ip:unknown" \
    "two trusted proxies: the second hop from the right; a request that passed fewer has no address"
psql -X -q -v ON_ERROR_STOP=1 -d "$database" -c "ALTER ROLE authenticator SET ratelimit.client_ip_trusted_proxies = 0" >/dev/null
request "$PGPORT" POST /signup anon "$anon_claims" '{"x-forwarded-for": "203.0.113.70, 10.0.0.9"}' >/dev/null
is "$(signup_keys)" "ip:203.0.113.50 ip:203.0.113.60 ip:203.0.113.70 ip:unknown" \
    "0, chosen explicitly: the first hop, as the client wrote it"
psql -X -q -v ON_ERROR_STOP=1 -d "$database" -c "ALTER ROLE authenticator RESET ratelimit.client_ip_trusted_proxies" >/dev/null

echo "# JWT subjects of every identity provider"
# Routes keyed by user take the sub as text, whatever its form; a malformed identity refuses a
# request only where a matching route counts by user.
psql -X -q -v ON_ERROR_STOP=1 -d "$database" >/dev/null <<'SQL'
INSERT INTO ratelimit.policies (name, "limit", period, engine) VALUES ('api.profile', 2, '1 minute', 'table');
INSERT INTO ratelimit.request_routes (methods, path_pattern, policy, key) VALUES
    ('{PATCH}', '/profile', 'api.profile', 'user');
SQL
for sub in 'auth0|5f1c6d1e2a3b4c5d6e7f8091' 'user_2NNEqL2nrIRdJ194ndJqAHwEfxC' \
    'kD9c7xYz2bQeRtUv4WpLmN8sHjA1' '6f1c2a8e-0d5b-4c1e-9a51-2b7e8d3c4f10'; do
    claims="{\"role\": \"authenticated\", \"sub\": \"$sub\"}"
    out="$(request "$PGPORT" PATCH /profile authenticated "$claims" "$client")"
    is "${out%% *} $(header "$out" X-RateLimit-Remaining)" "200 1" "PATCH /profile by sub $sub: allowed, counted by user"
done
is "$(psql -X -A -t -q -d "$database" -c "SELECT string_agg(key || '=' || amount, ' ' ORDER BY key) FROM ratelimit.key_state WHERE policy = 'api.profile'")" \
    "user:6f1c2a8e-0d5b-4c1e-9a51-2b7e8d3c4f10=1 user:auth0|5f1c6d1e2a3b4c5d6e7f8091=1 user:kD9c7xYz2bQeRtUv4WpLmN8sHjA1=1 user:user_2NNEqL2nrIRdJ194ndJqAHwEfxC=1" \
    "each subject (Supabase, Auth0, Firebase, Clerk) has its own counter, keyed by its text"
for claims in '[1, 2]' '{"role": "anon", "sub": 42}'; do
    out="$(request "$PGPORT" GET /health anon "$claims" "$client")"
    is "${out%% *} $(header "$out" X-RateLimit-Limit)" "200 100" \
        "malformed claims ($claims): a request no user-keyed route matches passes"
    out="$(request "$PGPORT" PATCH /profile authenticated "$claims" "$client")"
    is "$(grep -o '22023' <<<"$out")" "22023" \
        "malformed claims ($claims): a user-keyed route refuses the request with 22023"
done

echo "# a tier from the verified JWT's claims (tier_claim)"
psql -X -q -v ON_ERROR_STOP=1 -d "$database" >/dev/null <<'SQL'
INSERT INTO ratelimit.policies (name, "limit", period, engine) VALUES ('api.post', 10, '1 minute', 'table');
INSERT INTO ratelimit.tiers (name, multiplier, bypass) VALUES ('premium', 2, false), ('admin', 1, true);
INSERT INTO ratelimit.request_routes (methods, path_pattern, policy, key, tier_claim) VALUES
    ('{POST}', '/posts', 'api.post', 'user', 'app_metadata.tier');
SQL
tiered() {  # tiered CLAIMS: the X-RateLimit-Limit of a POST /posts with these claims
    header "$(request "$PGPORT" POST /posts authenticated "$1" "$client")" X-RateLimit-Limit
}
is "$(tiered '{"role": "authenticated", "sub": "u-free"}')" "10" "no tier claim: the policy's limit"
is "$(tiered '{"role": "authenticated", "sub": "u-premium", "app_metadata": {"tier": "premium"}}')" "20" \
    "app_metadata.tier = premium: the premium tier's multiplier (x2)"
is "$(request "$PGPORT" POST /posts authenticated '{"role": "authenticated", "sub": "u-admin", "app_metadata": {"tier": "admin"}}' "$client" | cut -c1-3)" "200" \
    "app_metadata.tier = admin: the admin tier's bypass lets it through"
is "$(tiered '{"role": "authenticated", "sub": "u-self", "user_metadata": {"tier": "premium"}}')" "10" \
    "a tier the user can write (user_metadata) is not the route's claim: no tier"
is "$(tiered '{"role": "authenticated", "sub": "u-gold", "app_metadata": {"tier": "gold"}}')" "10" \
    "a claim naming no tier of ratelimit.tiers: no tier"
is "$(error_of "UPDATE ratelimit.request_routes SET tier_claim = 'app_metadata..tier' WHERE policy = 'api.post'" 'tier_claim must be 1 to 8 JSON member names')" \
    'tier_claim must be 1 to 8 JSON member names' "a malformed tier_claim is refused when written"
is "$(error_of "UPDATE ratelimit.request_routes SET tier_claim = 'user_metadata.tier' WHERE policy = 'api.post'" 'tier_claim: "user_metadata.tier" is under user_metadata, which every user can write')" \
    'tier_claim: "user_metadata.tier" is under user_metadata, which every user can write' \
    "a tier_claim under user_metadata is refused when written"
psql -X -q -v ON_ERROR_STOP=1 -d "$database" -c "UPDATE ratelimit.request_routes SET tier_claim = 'user_metadata.tier', tier_claim_user_writable = true WHERE policy = 'api.post'" >/dev/null
is "$(tiered '{"role": "authenticated", "sub": "u-chooser", "user_metadata": {"tier": "premium"}}')" "20" \
    "unless the route says the administrator means it (tier_claim_user_writable)"
psql -X -q -v ON_ERROR_STOP=1 -d "$database" -c "UPDATE ratelimit.request_routes SET tier_claim = 'app_metadata.tier', tier_claim_user_writable = false WHERE policy = 'api.post'" >/dev/null

echo "# every denial in the denial log, or counted as not logged, after the request rolled back"
# One policy per engine and method that logs its denials, 1 a minute per client, and the
# reported case: a global write limit.
psql -X -q -v ON_ERROR_STOP=1 -d "$database" >/dev/null <<'SQL'
INSERT INTO ratelimit.policies (name, "limit", period, engine, log_denials)
SELECT 'log.' || lower(m) || '.' || e, 1, '1 minute', e, true
FROM unnest(ARRAY['GET', 'POST', 'PATCH']) AS m, unnest(ARRAY['memory', 'table', 'unlogged']) AS e
WHERE m <> 'GET' OR e = 'memory';
INSERT INTO ratelimit.request_routes (methods, path_pattern, policy, key)
SELECT ARRAY[upper(split_part(name, '.', 2))], '/logged/' || split_part(name, '.', 3), name, 'user_or_ip'
FROM ratelimit.policies WHERE name LIKE 'log.%';
INSERT INTO ratelimit.policies (name, "limit", period, log_denials) VALUES ('w', 1, '1 minute', true);
INSERT INTO ratelimit.request_routes (methods, path_pattern, policy, key) VALUES ('{POST}', '/o', 'w', 'global');
SQL
# logged_rows POLICY: rows of the denial log for the policy, waiting up to 15 s for WANT.
logged_rows() {
    local policy="$1" want="$2" got=""
    for _ in $(seq 1 150); do
        got="$(psql -X -A -t -q -d "$database" -c "SELECT count(*) FROM ratelimit.denial_log WHERE event_data ->> 'policy' = '$policy'")"
        [ "$got" = "$want" ] && break
        sleep 0.1
    done
    echo "$got"
}
not_logged() {
    psql -X -A -t -q -d "$database" -c "SELECT coalesce(sum(denials_not_logged), 0) FROM ratelimit.policy_stats WHERE policy = '$1'"
}
out="$(request "$PGPORT" POST /o authenticated "$user_claims" "$client")"
out="$(request "$PGPORT" POST /o anon "$anon_claims" "$other_client")"
is "${out%% *} $(cut -d' ' -f2 <<<"$out")" "PGRST 429" "the reported case: the second POST /o is refused and its transaction rolls back"
is "$(logged_rows w 1) $(not_logged w)" "1 0" "the reported case: its denial is in the denial log"
for path in /logged/memory /logged/table /logged/unlogged; do
    for method in GET POST PATCH; do
        policy="log.$(tr 'A-Z' 'a-z' <<<"$method").${path##*/}"
        [ "$method" = GET ] && [ "$path" != /logged/memory ] && continue
        for who in anon authenticated; do
            if [ "$who" = anon ]; then claims="$anon_claims"; else claims="$user_claims"; fi
            request "$PGPORT" "$method" "$path" "$who" "$claims" "$client" >/dev/null
            out="$(request "$PGPORT" "$method" "$path" "$who" "$claims" "$client")"
            is "${out%% *} $(cut -d' ' -f2 <<<"$out")" "PGRST 429" "$method $path as $who: the second request is refused"
        done
        is "$(logged_rows "$policy" 2) $(not_logged "$policy")" "2 0" \
            "$method $path: both denials (anon's, the user's) are in the log after their transactions rolled back"
    done
done
is "$(psql -X -A -t -q -d "$database" -c "SELECT string_agg(DISTINCT status || '/' || (event_data ->> 'identifier'), ' ' ORDER BY status || '/' || (event_data ->> 'identifier')) FROM ratelimit.denial_log WHERE event_data ->> 'policy' = 'log.post.table'")" \
    "blocked/ip:203.0.113.7 blocked/user:6f1c2a8e-0d5b-4c1e-9a51-2b7e8d3c4f10" \
    "the rows say who was denied, as the transaction that rolled back would have written them"
# queued: what the queue holds now (metrics()), waiting up to 15 s for it to be empty.
queue_empty() {
    local queued=""
    for _ in $(seq 1 150); do
        queued="$(psql -X -A -t -q -d "$database" -c "SELECT m[1] FROM regexp_matches(ratelimit.metrics(), 'ratelimit_denial_queue_queued ([0-9]+)') AS m")"
        [ "$queued" = 0 ] && break
        sleep 0.1
    done
    echo "$queued"
}
is "$(queue_empty)" "0" "the queue is empty once the writers are done"
# A transaction that writes more logged denials than the queue lets it hold (a database's share
# is half the 16 entries, and what its open transactions hold half of that), then rolls back:
# what the queue held reaches the log, the rest is counted as not logged. None is lost.
psql -X -q -v ON_ERROR_STOP=1 -d "$database" >/dev/null <<'SQL'
BEGIN;
SELECT ratelimit.check('log.post.table', 'flood') FROM generate_series(1, 41);
ROLLBACK;
SQL
flood_logged="$(psql -X -A -t -q -d "$database" -c "SELECT count(*) FROM ratelimit.denial_log WHERE event_data ->> 'identifier' = 'flood'")"
for _ in $(seq 1 150); do
    [ "$flood_logged" = 4 ] && break
    sleep 0.1
    flood_logged="$(psql -X -A -t -q -d "$database" -c "SELECT count(*) FROM ratelimit.denial_log WHERE event_data ->> 'identifier' = 'flood'")"
done
is "$flood_logged $(not_logged log.post.table)" "4 36" \
    "40 denials rolled back: the 4 the queue held are logged, the other 36 counted as not logged"
is "$(psql -X -A -t -q -d "$database" -c "SELECT (m[1]::bigint > 0)::text FROM regexp_matches(ratelimit.metrics(), 'ratelimit_denial_queue_full_total ([0-9]+)') AS m")" \
    "true" "metrics() counts the denials the queue could not hold"

echo "# a hot standby: GET and HEAD decide on its own memory engine"
cluster_as_postgres "$CLUSTER_BINDIR/pg_basebackup" -D "$standby_dir" -R -X stream \
    -h "$PGHOST" -p "$PGPORT" -U postgres
chmod 700 "$standby_dir"
# A free port can be taken by another server between the look and the start: try again.
for attempt in 1 2 3 4 5; do
    standby_port="$(cluster_free_port)"
    echo "port = $standby_port" >>"$standby_dir/postgresql.conf"
    if cluster_as_postgres "$CLUSTER_BINDIR/pg_ctl" -D "$standby_dir" \
        -l "$CLUSTER_DIR/standby.log" -w -t 60 start >/dev/null; then
        break
    fi
    if [ "$attempt" -eq 5 ]; then
        cat "$CLUSTER_DIR/standby.log" >&2
        exit 1
    fi
    sleep 1
done
is "$(PGPORT=$standby_port psql -X -A -t -q -d "$database" -c 'SELECT pg_is_in_recovery()')" "t" \
    "the standby is in recovery"
check_reads "$standby_port" standby
# A standby cannot write the log: its denials are counted as not logged.
request "$standby_port" GET /logged/memory anon "$anon_claims" "$other_client" >/dev/null
out="$(request "$standby_port" GET /logged/memory anon "$anon_claims" "$other_client")"
is "${out%% *} $(PGPORT=$standby_port not_logged log.get.memory)" "PGRST 1" \
    "standby: a logged GET denial is counted in denials_not_logged"

echo "1..$tests"
if [ "$failures" -gt 0 ]; then
    echo "postgrest: $failures of $tests failed"
    exit 1
fi
echo "postgrest: all $tests passed"
