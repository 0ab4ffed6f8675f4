#!/usr/bin/env bash
# The router suite: one router and two shards (and one direct server to compare with), each a
# throwaway cluster on this machine, stopped on exit, also on failure. Run as root from the
# repository root, after `make install` (it needs the major's postgresql-NN-plproxy: scripts/install-deps.sh).
#
# It proves: configure's checks (a partition count that is not a power of two refused); every
# key on the shard shard_of names, hash tags kept together; bad input refused on the router with
# the local messages; exact decisions through the router under 16 connections on every engine
# and for check; the same answers routed as direct for the same calls on the test clock;
# all-or-nothing across partitions refused (0A000) with nothing charged, and atomic on one; the
# drop-ins' JWT caller rule through the router (a foreign p_user_id refused as locally); the
# cluster-wide views; the failure cases (a stopped, a restarted, a lock-held and a frozen shard)
# within their stated times under on_shard_error; policy edits replicated to every shard and
# seen by the next call, a stopped shard catching up, and divergence found by verify().
# Ends with "router: N passed, N failed"; exits non-zero on any failure. About a minute.
set -euo pipefail
cd "$(dirname "$0")/../.."
source scripts/cluster.sh
source scripts/tap.sh
source test/router/clusters.sh

memory="shared_preload_libraries = 'ratelimit'"
router_cluster_start router "$memory" "wal_level = logical"
router_cluster_start shard1 "$memory"
router_cluster_start shard2 "$memory"
router_cluster_start direct "$memory"
echo "# router on $(router_cluster_port router), shards on $(router_cluster_port shard1) and $(router_cluster_port shard2), direct on $(router_cluster_port direct)"

q() { local name="$1"; shift; router_psql "$name" -At "$@"; }
# The roles PostgREST switches to, before the extension (which grants to the roles that exist).
# PL/Proxy connects to the shards as the calling role, so there they can log in.
for name in router shard1 shard2 direct; do
    q "$name" -c "CREATE ROLE authenticated LOGIN" -c "CREATE ROLE anon LOGIN" -c "CREATE ROLE service_role LOGIN" >/dev/null
done
# The shards and the direct server hold every app's drop-ins (the router routes them all): the
# per-RPC and endpoint limits in public, the sliding window's in the schema sliding_window (its
# check_rate_limit shares the per-RPC one's name). The router's statements reach a shard's
# drop-ins through the shard's search_path, so on the shards it names both schemas: the per-RPC
# call names its arguments and the keyed one passes four, so each finds only its own function.
for name in shard1 shard2 direct; do
    q "$name" -c "CREATE EXTENSION ratelimit" -c "SELECT ratelimit.load_preset('social-activity')" \
        -c "CREATE EXTENSION ratelimit_rpc_limits" -c "CREATE EXTENSION ratelimit_endpoint_limits" \
        -c "CREATE SCHEMA sliding_window" \
        -c "CREATE EXTENSION ratelimit_sliding_window_limits SCHEMA sliding_window" >/dev/null
done
for name in shard1 shard2; do
    q "$name" -c "ALTER DATABASE postgres SET search_path = \"\$user\", public, sliding_window" >/dev/null
done
q router -c "CREATE EXTENSION ratelimit_router CASCADE" -c "SELECT ratelimit.load_preset('social-activity')" 2>/dev/null >/dev/null
shard_conn() { echo "host=127.0.0.1 port=$(router_cluster_port "$1") dbname=postgres"; }
shards="ARRAY['$(shard_conn shard1)', '$(shard_conn shard2)']"
q router -c "SELECT count(*) FROM ratelimit_router.configure($shards, 8)" >/dev/null

# A policy the exactness test counts against, on each server (policy replication is its own test).
for name in router shard1 shard2 direct; do
    q "$name" -c "INSERT INTO ratelimit.policies (name, \"limit\", period, algorithm, engine)
                  VALUES ('router.exact', 37, '1 hour', 'fixed_window', 'table'),
                         ('router.exact_memory', 41, '1 hour', 'token_bucket', 'memory')" >/dev/null
done

# sqlstate NAME SQL: the SQLSTATE the statement fails with, or "ok".
sqlstate() {
    local name="$1" sql="$2"
    local state
    state="$(q "$name" -v VERBOSITY=verbose -c "$sql" 2>&1 >/dev/null | sed -n 's/^ERROR:  \([0-9A-Z]\{5\}\):.*/\1/p' | head -1 || true)"
    echo "${state:-ok}"
}

echo "# configure"
is "$(sqlstate router "SELECT ratelimit_router.configure($shards, 6)")" 22023 "partitions 6 (not a power of two) refused"
is "$(q router -c "SELECT ratelimit_router.configure($shards, 6)" 2>&1 | head -1)" \
    "ERROR:  partitions must be a power of two from 1 to 65536, got 6" "the error names partitions"
is "$(sqlstate router "SELECT ratelimit_router.configure(ARRAY['$(shard_conn shard1)', NULL], 8)")" 22004 "shards[2] NULL refused"
is "$(q router -c "SELECT ratelimit_router.configure(ARRAY['$(shard_conn shard1)', '$(shard_conn shard1)'], 8)" 2>&1 | head -1)" \
    "ERROR:  shards[2] repeats shards[1]" "a repeated shard refused"
is "$(sqlstate router "SELECT ratelimit_router.configure($shards, 1)")" 22023 "fewer partitions than shards refused"
is "$(q router -c "SELECT partitions FROM ratelimit_router.cluster")" 8 "a refused configure changed nothing"

echo "# routing"
is "$(q router -c "SELECT ratelimit_router.routing_key('cart:{user-7}'), ratelimit_router.routing_key('a{}{b}'), ratelimit_router.routing_key('plain')")" \
    "user-7|a{}{b}|plain" "hash tags as Redis Cluster reads them"
is "$(q router -c "SELECT count(DISTINCT ratelimit_router.shard_of(k || ':{tag-9}')) FROM generate_series(1, 50) AS k")" 1 "keys sharing a tag share a shard"
is "$(q router -c "SELECT count(*) FROM generate_series(1, 2000) AS i,
                     LATERAL (VALUES ('k' || i), ('cart:{u' || i % 37 || '}'), ('café:{€' || i || '}'), ('a{}{' || i || '}')) AS v(k)
                   WHERE ratelimit_router.routing_hash(k) IS DISTINCT FROM pg_catalog.hashtext(ratelimit_router.routing_key(k))")" \
    0 "routing_hash is hashtext of the routing key (8,000 keys, tags and multibyte text among them)"
is "$(q router -c "SELECT ratelimit_router.routing_hashes(ARRAY['a', 'cart:{u1}', NULL]) = ARRAY[hashtext('a'), hashtext('u1'), NULL]")" \
    t "routing_hashes: each key's, in order"
q router -c "SELECT count(*) FROM generate_series(1, 200) AS k, ratelimit_router.consume('placed-' || k, 5, '1 hour') AS d" >/dev/null
expected_placement="$(q router -c "SELECT 'placed-' || k || '=' || ratelimit_router.shard_of('placed-' || k) FROM generate_series(1, 200) AS k ORDER BY 1")"
actual_placement="$( { q shard1 -c "SELECT key || '=1' FROM ratelimit.key_state WHERE key LIKE 'placed-%'"
                      q shard2 -c "SELECT key || '=2' FROM ratelimit.key_state WHERE key LIKE 'placed-%'"; } | sort)"
is "$actual_placement" "$expected_placement" "each of 200 keys is on its shard_of shard, and only there"
is "$(q router -c "SELECT count(DISTINCT ratelimit_router.shard_of('placed-' || k)) FROM generate_series(1, 200) AS k")" 2 "keys spread over both shards"
q router -c "SELECT count(*) FROM unnest(ratelimit_router.consume_many(ARRAY(SELECT 'batch-' || k FROM generate_series(1, 100) AS k), 5, '1 hour'))" >/dev/null
expected_placement="$(q router -c "SELECT 'batch-' || k || '=' || ratelimit_router.shard_of('batch-' || k) FROM generate_series(1, 100) AS k ORDER BY 1")"
actual_placement="$( { q shard1 -c "SELECT key || '=1' FROM ratelimit.key_state WHERE key LIKE 'batch-%'"
                      q shard2 -c "SELECT key || '=2' FROM ratelimit.key_state WHERE key LIKE 'batch-%'"; } | sort)"
is "$actual_placement" "$expected_placement" "a 100-key batch charges each key on its shard_of shard"

echo "# bad input is refused on the router"
# A shard's refusal would read "ratelimit_router.shard_...: [postgres] REMOTE ERROR: ...": these
# are the router's own, with the local messages.
is "$(q router -c "SELECT ratelimit_router.consume_many(ARRAY['a', 'b', NULL], 5, '1 minute')" 2>&1 | head -1)" \
    "ERROR:  p_keys[3] must not be NULL" "consume_many names p_keys[3]"
is "$(q router -c "SELECT ratelimit_router.consume('k', 0, '1 minute')" 2>&1 | head -1)" \
    "ERROR:  p_limit must be greater than zero, got 0" "consume names p_limit"
is "$(q router -c "SELECT ratelimit_router.check('activity.create_pots', 'u')" 2>&1 | head -1)" \
    'ERROR:  p_policy: unknown policy "activity.create_pots"' "check names p_policy"
is "$(q router -c "SELECT ratelimit_router.check_many('activity.create_post', ARRAY['a', NULL])" 2>&1 | head -1)" \
    "ERROR:  p_subjects[2] must not be NULL" "check_many names p_subjects[2]"
is "$(q router -c "SELECT ratelimit_router.check_all(ARRAY['activity.create_post'], ARRAY['a', 'b'])" 2>&1 | head -1)" \
    "$(q direct -c "SELECT ratelimit.check_all(ARRAY['activity.create_post'], ARRAY['a', 'b'])" 2>&1 | head -1)" "check_all's mismatched arrays: the local message"

echo "# hostile input: every argument of every routed call"
# Each routed call with valid arguments, written KIND:VALUE and separated by ';'. Each argument in
# turn is replaced by its kind's bad values (NULL among them unless NULL is valid there; a
# policy's cost above its limit is a denial, not an error, and so is a native consume's or peek's,
# checked apart below; a refund's stays an error): the
# router must refuse the call with the first line the server's own function gives, and nothing
# may reach a shard's state.
declare -A bad_values=(
    [key]="NULL|''|repeat('k', 300)"
    [limit]="NULL|0|-1"
    [cost]="NULL|-1|100000"
    [native_cost]="NULL|-1"
    [refund_cost]="NULL|-1|100000"
    [policy_cost]="NULL|-1"
    [period]="NULL|'0 seconds'|'-1 minute'"
    [algorithm]="NULL|'bogus'"
    [engine]="NULL|'bogus'"
    [burst]="0|-1"
    [keys]="NULL|ARRAY[NULL]::text[]|ARRAY['hostile-a', NULL]|ARRAY['hostile-a', '']"
    [duration]="NULL|'-1 minute'"
    [policy]="NULL|'no.such.policy'"
    [policies]="NULL|ARRAY['no.such.policy']|ARRAY[NULL]::text[]"
    [subject]="NULL|''"
    [subjects]="NULL|ARRAY[NULL]::text[]|ARRAY['hostile-s', '']"
    [window]="NULL|0|-1"
    [format]="NULL|'bogus'"
    [shape]="NULL|'bogus'"
    [zone]="'Mars/Olympus'|''"
    [rpc]="NULL|''|repeat('r', 300)"
    [user_id]="NULL"
    [minutes]="NULL|0|-1"
    [increment]="NULL|0|-1"
)
# The drop-ins for users run for a JWT caller, the one their p_user_id names.
hostile_user=c0eebc99-9c0b-4ef8-bb6d-6bb9bd380a13
as_hostile="SET ROLE authenticated; SET request.jwt.claims = '{\"sub\": \"$hostile_user\", \"role\": \"authenticated\"}';"
native="key:'hostile-k';limit:5;period:'1 minute';native_cost:1;algorithm:'fixed_window';engine:'table';burst:NULL;zone:NULL"
batch="keys:ARRAY['hostile-a', 'hostile-b'];limit:5;period:'1 minute';native_cost:1;algorithm:'fixed_window';engine:'table';burst:NULL;zone:NULL"
calendar="key:'hostile-k';limit:5;period:'1 day';native_cost:1;algorithm:'fixed_window';engine:'table';burst:NULL;zone:'Europe/Berlin'"
routed_calls=(
    "consume|ratelimit.consume|$native"
    "peek|ratelimit.peek|$native"
    "refund|ratelimit.refund|${native/native_cost:1/refund_cost:1}"
    "allow|ratelimit.allow|$native"
    "consume|ratelimit.consume|$calendar"
    "consume|ratelimit.consume|${native/engine:\'table\'/engine:\'memory\'}"
    "consume_many|ratelimit.consume_many|$batch"
    "peek_many|ratelimit.peek_many|$batch"
    "reset|ratelimit.reset|key:'hostile-k';engine:'table'"
    "block|ratelimit.block|key:'hostile-k';duration:'1 minute';engine:'table'"
    "check|ratelimit.check|policy:'activity.create_post';subject:'hostile-s';policy_cost:1"
    "check_all|ratelimit.check_all|policies:ARRAY['activity.create_post'];subjects:ARRAY['hostile-s'];policy_cost:1"
    "check_many|ratelimit.check_many|policy:'activity.create_post';subjects:ARRAY['hostile-s', 'hostile-t'];policy_cost:1"
    "check_http|ratelimit.check_http|policies:ARRAY['activity.create_post'];subjects:ARRAY['hostile-s'];policy_cost:1;tier:NULL;ip:NULL;user:NULL;format:'iso8601';shape:'error_message'"
    "check_rate_limit|sliding_window.check_rate_limit|key:'hostile-k';limit:5;window:60;cost:1"
    "check_rate_limit|public.check_rate_limit|rpc:p_rpc_name => 'hostile-rpc';limit:p_max_calls => 2;minutes:p_window_minutes => 1|$as_hostile"
    "check_rate_limit_for_user|public.check_rate_limit_for_user|user_id:'$hostile_user'::uuid;rpc:'hostile-rpc';limit:2;minutes:1|SET ROLE service_role;"
    "increment_rate_limit|public.increment_rate_limit|user_id:'$hostile_user'::uuid;rpc:'hostile-endpoint';limit:3;window:3600;increment:1|$as_hostile"
)
shard_state="SELECT (SELECT count(*) FROM ratelimit.key_state), (SELECT count(*) FROM ratelimit.key_state_unlogged),
                     (SELECT entries FROM ratelimit.memory_stats), (SELECT count(*) FROM public.rpc_rate_limits),
                     (SELECT count(*) FROM public.rate_limits), (SELECT count(*) FROM sliding_window.rate_limit_buckets)"
state_before="$(for name in shard1 shard2; do q "$name" -c "$shard_state"; done)"
hostile_checks=0
hostile_mismatches=()
for spec in "${routed_calls[@]}"; do
    IFS='|' read -r routed local args setup <<<"$spec"
    IFS=';' read -r -a arguments <<<"$args"
    for ((i = 0; i < ${#arguments[@]}; i++)); do
        kind="${arguments[$i]%%:*}"
        [ -n "${bad_values[$kind]:-}" ] || continue
        IFS='|' read -r -a values <<<"${bad_values[$kind]}"
        for value in "${values[@]}"; do
            list=""
            for ((j = 0; j < ${#arguments[@]}; j++)); do
                item="${arguments[$j]#*:}"
                if [ "$j" -eq "$i" ]; then
                    # A named argument keeps its name.
                    if [[ "$item" == *" => "* ]]; then item="${item%%=> *}=> $value"; else item="$value"; fi
                fi
                list="${list:+$list, }$item"
            done
            routed_answer="$(q router -c "${setup:-} SELECT ratelimit_router.$routed($list)" 2>&1 | head -1 || true)"
            local_answer="$(q direct -c "${setup:-} SELECT $local($list)" 2>&1 | head -1 || true)"
            hostile_checks=$((hostile_checks + 1))
            if [[ "$routed_answer" != ERROR:* || "$routed_answer" != "$local_answer" ]]; then
                hostile_mismatches+=("$routed($list): router \"$routed_answer\", locally \"$local_answer\"")
            fi
        done
    done
done
is "$(printf '%s\n' "${hostile_mismatches[@]}" | grep -c . || true)" 0 "$hostile_checks bad calls refused on the router with the local message"
printf '#   %s\n' "${hostile_mismatches[@]}" | grep -v '^#   $' || true
# A native consume or peek of more than the limit is denied for good, not refused: through the
# router as locally, nothing charged (the shards' state is compared below).
over_calls="SELECT * FROM %s.consume('hostile-over', 5, '1 minute', 6);
SELECT * FROM %s.peek('hostile-over', 5, '1 minute', 6, 'sliding_window', 'memory');
SELECT (%s.allow('hostile-over', 5, '1 minute', 6))::text;
SELECT * FROM unnest(%s.consume_many(ARRAY['hostile-over', 'hostile-over-b'], 5, '1 minute', 6));
SELECT * FROM unnest(%s.peek_many(ARRAY['hostile-over', 'hostile-over-b'], 5, '1 minute', 6));"
over_routed="$(printf "$over_calls" ratelimit_router ratelimit_router ratelimit_router ratelimit_router ratelimit_router | q router 2>&1 | paste -sd' ')"
is "$over_routed" "$(printf "$over_calls" ratelimit ratelimit ratelimit ratelimit ratelimit | q direct 2>&1 | paste -sd' ')" \
    "a native cost above the limit: the router answers as locally"
is "$over_routed" "f|5|5||0 f|5|5||0 false f|5|5||0 f|5|5||0 f|5|5||0 f|5|5||0" "denied, with no retry time"
is "$(for name in shard1 shard2; do q "$name" -c "$shard_state"; done)" \
    "$state_before" "and none of them reached a shard's state"

is "$(q router -c "SELECT string_agg(ratelimit_router.allow('allow-key', 2, '1 hour')::text, ',') FROM generate_series(1, 3)")" \
    "true,true,false" "allow through the router: 2 of 3"
is "$(q "shard$(q router -c "SELECT ratelimit_router.shard_of('allow-key')")" -c "SELECT amount FROM ratelimit.key_state WHERE key = 'allow-key'")" \
    2 "counted on its shard"

echo "# exactness under 16 connections through the router"
# Each client decides every key 8 times; 16 clients, 6 keys: 128 attempts a key, against limits
# of 37 and 41. Exact means each key allowed exactly its limit.
exact_run() {
    local sql="$1" clients=16 i
    local dir; dir="$(mktemp -d)"
    for i in $(seq 1 "$clients"); do
        q router -c "$sql" >"$dir/$i" 2>&1 &
    done
    wait
    cat "$dir"/* | awk -F'|' '/\|/ {sum[$1] += $2} !/\|/ {print "unexpected: " $0} END {for (k in sum) print k "=" sum[k]}' | sort
    rm -rf "$dir"
}
for engine in table unlogged memory; do
    for algorithm in fixed_window sliding_window token_bucket; do
        got="$(exact_run "SELECT k, count(*) FILTER (WHERE (ratelimit_router.consume('exact-$engine-$algorithm-' || k, 37, '1 hour', 1, '$algorithm', '$engine')).allowed)
                          FROM generate_series(1, 6) AS k, generate_series(1, 8) AS attempt GROUP BY k")"
        is "$got" "$(printf '%s=37\n' 1 2 3 4 5 6)" "consume on $engine, $algorithm: each key allowed exactly 37 of 128"
    done
    got="$(exact_run "SELECT k, count(*) FILTER (WHERE d.allowed)
                      FROM generate_series(1, 8) AS attempt,
                           LATERAL unnest(ratelimit_router.consume_many(ARRAY['many-$engine-1', 'many-$engine-2', 'many-$engine-3', 'many-$engine-4', 'many-$engine-5', 'many-$engine-6'], 37 + attempt * 0, '1 hour', 1, 'fixed_window', '$engine')) WITH ORDINALITY AS d(allowed, \"limit\", remaining, retry_after_ms, reset_after_ms, k)
                      GROUP BY k")"
    is "$got" "$(printf '%s=37\n' 1 2 3 4 5 6)" "consume_many on $engine: each key allowed exactly 37 of 128"
done
for policy in router.exact:37 router.exact_memory:41; do
    got="$(exact_run "SELECT k, count(*) FILTER (WHERE (ratelimit_router.check('${policy%%:*}', 'subject-' || k)).allowed)
                      FROM generate_series(1, 6) AS k, generate_series(1, 8) AS attempt GROUP BY k")"
    is "$got" "$(printf "%s=${policy##*:}\n" 1 2 3 4 5 6)" "check of ${policy%%:*}: each subject allowed exactly ${policy##*:} of 128"
done

echo "# the same answers routed as direct, on the test clock"
set_clock() {
    local name
    for name in shard1 shard2 direct; do
        q "$name" -c "ALTER SYSTEM SET ratelimit.test_clock = '$1'" -c "SELECT pg_reload_conf()" >/dev/null
    done
    sleep 0.3
}
# The same calls as text, once with ratelimit. and once with ratelimit_router.
sequence_sql() {
    local s="$1"
    cat <<SQL
SELECT * FROM $s.consume('cmp:a', 3, '1 minute');
SELECT * FROM $s.consume('cmp:b', 3, '1 minute', 2, 'sliding_window');
SELECT * FROM unnest($s.consume_many(ARRAY['cmp:a', 'cmp:c', 'cmp:a', 'cmp:a', 'cmp:{t}1', 'cmp:{t}2'], 3, '1 minute'));
SELECT * FROM unnest($s.peek_many(ARRAY['cmp:a', 'cmp:b', 'cmp:c'], 3, '1 minute'));
SELECT * FROM $s.refund('cmp:a', 3, '1 minute');
SELECT * FROM $s.peek('cmp:a', 3, '1 minute', 1, 'fixed_window', 'memory');
SELECT * FROM $s.consume('cmp:m', 5, '10 seconds', 2, 'gcra', 'memory', 6);
SELECT * FROM $s.check('activity.create_post', 'cmp-user');
SELECT * FROM unnest($s.check_many('activity.create_post', ARRAY['cmp-user', 'cmp-other', 'cmp-user'], 4));
SELECT * FROM $s.check_all(ARRAY['activity.create_post', 'router.exact'], ARRAY['cmp-user', 'cmp-user']);
SELECT $s.check_http(ARRAY['activity.create_post'], ARRAY['cmp-user'], 1, NULL, NULL, NULL, 'unix', 'detailed') - 'headers';
SELECT $s.block('cmp:c', '30 seconds');
SELECT * FROM $s.consume('cmp:c', 3, '1 minute');
SELECT * FROM $s.consume('cmp:day', 2, '1 day', 1, 'fixed_window', 'memory', NULL, 'Pacific/Auckland');
SELECT * FROM unnest($s.consume_many(ARRAY['cmp:day', 'cmp:month'], 2, '1 month', p_time_zone => 'America/New_York'));
SQL
}
routed=""
direct=""
for clock in '2026-03-01 10:00:00+00' '2026-03-01 10:00:20+00' '2026-03-01 10:00:59.5+00' '2026-03-01 10:01:30+00'; do
    set_clock "$clock"
    routed+="$(sequence_sql ratelimit_router | q router 2>&1)"$'\n'
    direct+="$(sequence_sql ratelimit | q direct 2>&1)"$'\n'
done
is "$routed" "$direct" "15 calls at 4 instants (calendar windows among them): routed answers equal direct ones"
echo "$routed" | grep -q "t|3|2|0|" && ok 0 "the comparison saw allowed decisions" || ok 1 "the comparison saw allowed decisions"
echo "$routed" | grep -q "^f|" && ok 0 "and denied ones" || ok 1 "and denied ones"
for name in shard1 shard2 direct; do
    q "$name" -c "ALTER SYSTEM RESET ratelimit.test_clock" -c "SELECT pg_reload_conf()" >/dev/null
done
sleep 0.3

echo "# all or nothing across partitions"
tagged_a="$(q router -c "SELECT k FROM (SELECT 'aon-' || i AS k FROM generate_series(1, 100) AS i) AS s WHERE ratelimit_router.shard_of(k) = 1 LIMIT 1")"
tagged_b="$(q router -c "SELECT k FROM (SELECT 'aon-' || i AS k FROM generate_series(1, 100) AS i) AS s WHERE ratelimit_router.shard_of(k) = 2 LIMIT 1")"
is "$(sqlstate router "SELECT ratelimit_router.check_all(ARRAY['activity.create_post', 'router.exact'], ARRAY['$tagged_a', '$tagged_b'])")" \
    0A000 "check_all over two shards refused with 0A000"
refusal="$(q router -c "SELECT ratelimit_router.check_http(ARRAY['activity.create_post', 'router.exact'], ARRAY['$tagged_a', '$tagged_b'])" 2>&1 || true)"
grep -q "^HINT:  Give keys decided together the same hash tag" <<<"$refusal" && ok 0 "the refusal's hint tells of hash tags" || ok 1 "the refusal's hint tells of hash tags"
is "$( { q shard1 -c "SELECT count(*) FROM ratelimit.key_state WHERE key LIKE 'aon-%'"; q shard2 -c "SELECT count(*) FROM ratelimit.key_state WHERE key LIKE 'aon-%'"; } | awk "{s += \$1} END {print s}")" 0 "nothing charged on either shard"
is "$(q router -c "SELECT allowed, policy, remaining FROM ratelimit_router.check_all(ARRAY['activity.create_post', 'router.exact'], ARRAY['post:{u-5}', 'exact:{u-5}'])")" \
    "t|activity.create_post|9" "tagged keys: check_all runs on their one shard"
is "$(q router -c "SELECT (ratelimit_router.check_all(ARRAY['activity.create_post', 'router.exact'], ARRAY['post:{u-6}', 'exact:{u-6}'], 10)).allowed" \
              -c "SELECT (ratelimit_router.check_all(ARRAY['activity.create_post', 'router.exact'], ARRAY['post:{u-6}', 'exact:{u-6}'])).allowed" \
              -c "SELECT (ratelimit_router.check('router.exact', 'exact:{u-6}')).remaining" | paste -sd'|')" "t|f|26" \
    "a denied check_all on one shard charged nothing (27 left after the first, 26 after one more)"

echo "# drop-ins: the JWT caller resolved on the router"
user_a=a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11
user_b=b0eebc99-9c0b-4ef8-bb6d-6bb9bd380a12
as_user_a="SET ROLE authenticated; SET request.jwt.claims = '{\"sub\": \"$user_a\", \"role\": \"authenticated\"}';"
routed_refusal="$(q router -c "$as_user_a SELECT ratelimit_router.increment_rate_limit('$user_b', 'export', 3, 3600)" 2>&1 || true)"
direct_refusal="$(q direct -c "$as_user_a SELECT increment_rate_limit('$user_b', 'export', 3, 3600)" 2>&1 || true)"
is "$(head -1 <<<"$routed_refusal")" "$(head -1 <<<"$direct_refusal")" "a foreign p_user_id is refused through the router as locally"
is "$(sqlstate router "$as_user_a SELECT ratelimit_router.increment_rate_limit('$user_b', 'export', 3, 3600)")" 42501 "with 42501"
is "$(q router -c "$as_user_a SELECT string_agg((ratelimit_router.increment_rate_limit('$user_a', 'export', 3, 3600) ->> 'allowed'), ',') FROM generate_series(1, 4)")" \
    "true,true,true,false" "the caller's own id: 3 of 4 allowed"
owner_shard="$(q router -c "SELECT ratelimit_router.shard_of('$user_a')")"
is "$(q "shard$owner_shard" -c "SELECT count(*) FROM public.rate_limits WHERE user_id = '$user_a'")" 1 "counted on the caller's shard (shard $owner_shard)"
is "$(q router -c "$as_user_a SELECT string_agg(ratelimit_router.check_rate_limit(p_rpc_name => 'complete-game', p_max_calls => 2, p_window_minutes => 1)::text, ',') FROM generate_series(1, 3)")" \
    "true,true,false" "check_rate_limit for the JWT caller: 2 of 3 allowed"
is "$(q "shard$owner_shard" -c "SELECT count(*) FROM public.rpc_rate_limits WHERE user_id = '$user_a'")" 1 "its row is the caller's, on the caller's shard"
is "$(q router -c "SET ROLE authenticated; SELECT string_agg(ratelimit_router.check_rate_limit(p_rpc_name => 'complete-game', p_max_calls => 1, p_window_minutes => 1)::text, ',') FROM generate_series(1, 3)")" \
    "true,true,true" "no JWT caller: allowed and not counted, as locally"
is "$(sqlstate router "$as_user_a SELECT ratelimit_router.check_rate_limit_for_user('$user_b', 'complete-game', 2, 1)")" \
    "$(sqlstate direct "$as_user_a SELECT check_rate_limit_for_user('$user_b', 'complete-game', 2, 1)")" "check_rate_limit_for_user refused for a JWT role through the router as locally"
is "$(q router -c "SET request.jwt.claims = '{\"sub\": \"nope\"}'; SELECT ratelimit_router.check_rate_limit('x')" 2>&1 | head -1)" \
    "$(q direct -c "SET request.jwt.claims = '{\"sub\": \"nope\"}'; SELECT check_rate_limit('x')" 2>&1 | head -1)" "a malformed sub is refused on the router with the local message"
is "$(q router -c "SELECT string_agg(allowed::text, ',') FROM generate_series(1, 3), LATERAL ratelimit_router.check_rate_limit(p_key => 'signup:203.0.113.7', p_limit => 2, p_window_seconds => 60 + generate_series * 0) AS c")" \
    "true,true,false" "check_rate_limit by key: 2 of 3 allowed"

echo "# cluster-wide views"
is "$(q router -c "SELECT allowed >= 6 * 37 AND denied >= 6 * (128 - 37) FROM ratelimit_router.policy_stats() WHERE policy = 'router.exact'")" \
    t "policy_stats counts the exactness test's decisions on both shards"
is "$( { q shard1 -c "SELECT allowed, denied FROM ratelimit.policy_stats() WHERE policy = 'router.exact'"; q shard2 -c "SELECT allowed, denied FROM ratelimit.policy_stats() WHERE policy = 'router.exact'"; } | awk -F'|' '{a += $1; d += $2} END {print a "|" d}')" \
    "$(q router -c "SELECT allowed, denied FROM ratelimit_router.policy_stats() WHERE policy = 'router.exact'")" "which are the shards' own, summed"
is "$(q router -c "SELECT count(*), count(DISTINCT shard), sum(capacity) FROM ratelimit_router.memory_stats()")" "2|2|200000" "memory_stats: one row per shard"
is "$(q router -c "SELECT count(*) FROM ratelimit_router.top_offenders(5)")" 5 "top_offenders over all shards, p_limit rows"
is "$(sqlstate router "SELECT ratelimit_router.top_offenders(0)")" 22023 "top_offenders refuses p_limit 0 on the router"
is "$(q router -c "SELECT count(*) >= 0 FROM ratelimit_router.denial_log()")" t "the denial log reads every shard"

echo "# failures"
elapsed_ms() { echo $(( ($(date +%s%N) - $1) / 1000000 )); }
victim="$tagged_b"   # on shard2
healthy="$tagged_a"  # on shard1
also_healthy="$(q router -c "SELECT k FROM (SELECT 'other-' || i AS k FROM generate_series(1, 100) AS i) AS s WHERE ratelimit_router.shard_of(k) = 1 LIMIT 1")"
q router -c "ALTER ROLE postgres SET statement_timeout = '3s'" >/dev/null

router_cluster_stop shard2
start=$(date +%s%N)
state="$(sqlstate router "SELECT ratelimit_router.consume('$victim', 5, '1 hour')")"
took=$(elapsed_ms "$start")
# PL/Proxy reports a refused connection as XX000 with libpq's message.
case "$state" in 08* | XX000) ok 0 "stopped shard, on_shard_error=error: connection error ($state)" ;; *) ok 1 "stopped shard: connection error (got $state)" ;; esac
[ "$took" -lt 4000 ] && ok 0 "stopped shard: answered in $took ms (bound 4000)" || ok 1 "stopped shard: answered in $took ms (bound 4000)"
is "$(q router -c "SET ratelimit_router.on_shard_error = allow" -c "SELECT allowed, remaining IS NULL FROM ratelimit_router.consume('$victim', 5, '1 hour')")" "t|t" "stopped shard, allow: allowed, remaining unknown"
is "$(q router -c "SET ratelimit_router.on_shard_error = deny" -c "SELECT allowed, reason FROM ratelimit_router.check('router.exact', '$victim')")" "f|shard_unavailable" "stopped shard, deny: check denied with reason shard_unavailable"
is "$(q router -c "SET ratelimit_router.on_shard_error = allow" -c "SELECT allowed, reason FROM ratelimit_router.check('router.exact', '$victim')")" "t|shard_unavailable" "stopped shard, allow: check allowed with reason shard_unavailable"
is "$(q router -c "SELECT allowed, remaining FROM ratelimit_router.consume('$healthy', 5, '1 hour')")" "t|4" "a key on the healthy shard is decided as usual"
batch="ARRAY['$healthy', '$victim', '$also_healthy']"
is "$(q router -c "SET ratelimit_router.on_shard_error = deny" -c "SELECT string_agg(allowed || ':' || coalesce(remaining::text, 'unknown'), ',' ORDER BY n) FROM unnest(ratelimit_router.consume_many($batch, 5, '1 hour')) WITH ORDINALITY AS u(allowed, l, remaining, r, s, n)")" \
    "true:3,false:unknown,true:4" "batch under deny: the healthy shard's keys decided, the stopped shard's reported unknown"
is "$(q shard1 -c "SELECT amount FROM ratelimit.key_state WHERE key = '$healthy' AND policy = ''")" 2 "the healthy key was charged once per call, not again for the failed shard"
is "$(q router -c "SET ratelimit_router.on_shard_error = deny" -c "SELECT r ->> 'status', r -> 'decision' ->> 'reason' FROM ratelimit_router.check_http(ARRAY['router.exact'], ARRAY['$victim']) AS r")" \
    "503|shard_unavailable" "stopped shard, deny: check_http answers 503, shard_unavailable"
is "$(q router -c "SET ratelimit_router.on_shard_error = allow" -c "SELECT string_agg(allowed || ':' || coalesce(remaining::text, 'unknown'), ',' ORDER BY n) FROM unnest(ratelimit_router.peek_many($batch, 5, '1 hour')) WITH ORDINALITY AS u(allowed, l, remaining, r, s, n)")" \
    "true:3,true:unknown,true:4" "peek_many under allow: the stopped shard's key allowed, unknown"
is "$(q router -c "SET ratelimit_router.on_shard_error = deny" -c "SELECT string_agg(d.allowed || ':' || d.reason, ',' ORDER BY n) FROM unnest(ratelimit_router.check_many('router.exact', ARRAY['$victim', '$healthy'])) WITH ORDINALITY AS d(allowed, policy, l, remaining, r, s, p, c, reason, sd, at, n)")" \
    "false:shard_unavailable,true:within_limits" "check_many under deny: per-shard answers"
is "$(sqlstate router "SET ratelimit_router.on_shard_error = sometimes; SELECT ratelimit_router.consume('$victim', 5, '1 hour')")" 22023 "an unknown on_shard_error is refused (22023)"
router_cluster_resume shard2
is "$(q router -c "SELECT allowed, remaining FROM ratelimit_router.consume('$victim', 5, '1 hour')")" "t|4" "after the shard is back, its key is decided (nothing was charged while it was down)"

# A restart: the router's cached connection to shard2 is closed under it.
router_cluster_stop shard2
router_cluster_resume shard2
is "$(q router -c "SELECT 1 FROM ratelimit_router.consume('$victim', 5, '1 hour')" -c "SELECT allowed, remaining FROM ratelimit_router.consume('$victim', 5, '1 hour')" 2>&1 | tail -1)" \
    "t|2" "the first call after a restart is sent again and succeeds, on_shard_error=error"
is "$(q router -c "SELECT 1 FROM ratelimit_router.consume('$victim', 5, '1 hour')" -c "SELECT string_agg(coalesce(remaining::text, 'x'), ',') FROM unnest(ratelimit_router.consume_many(ARRAY['$victim'], 5, '1 hour'))" 2>&1 | tail -1)" \
    "0" "a batch after the sequence charges once (remaining 0 of 5)"

# A held lock on shard1: the shard's lock_timeout (1 s) ends the call.
lock_key="$healthy"
q shard1 -c "BEGIN" -c "SELECT 1 FROM ratelimit.key_state WHERE key = '$lock_key' AND policy = '' FOR UPDATE" -c "SELECT pg_sleep(8)" -c "COMMIT" >/dev/null &
holder=$!
sleep 1
start=$(date +%s%N)
state="$(sqlstate router "SELECT ratelimit_router.consume('$lock_key', 5, '1 hour')")"
took=$(elapsed_ms "$start")
is "$state" 55P03 "lock held on the shard: lock_not_available from the shard"
[ "$took" -lt 3000 ] && ok 0 "lock held: answered in $took ms (lock_timeout 1 s + 2 s)" || ok 1 "lock held: answered in $took ms (bound 3000)"
is "$(q router -c "SET ratelimit_router.on_shard_error = deny" -c "SELECT allowed, remaining IS NULL FROM ratelimit_router.consume('$lock_key', 5, '1 hour')")" "f|t" "lock held, deny: denied"
wait "$holder"

# A frozen shard (SIGSTOP): nothing answers; the router's statement_timeout (3 s) ends the call.
frozen_pids="$(pgrep -P "$(router_cluster_pid shard2)") $(router_cluster_pid shard2)"
kill -STOP $frozen_pids
start=$(date +%s%N)
state="$(sqlstate router "SELECT ratelimit_router.consume('$victim', 5, '1 hour')")"
took=$(elapsed_ms "$start")
is "$state" 57014 "frozen shard, on_shard_error=error: the router's statement_timeout cancels the call"
[ "$took" -lt 5000 ] && ok 0 "frozen shard: answered in $took ms (statement_timeout 3 s + 2 s)" || ok 1 "frozen shard: answered in $took ms (bound 5000)"
start=$(date +%s%N)
is "$(q router -c "SET ratelimit_router.on_shard_error = allow" -c "SELECT allowed, reason FROM ratelimit_router.check('router.exact', '$victim')")" "t|shard_unavailable" "frozen shard, allow: allowed, shard_unavailable"
took=$(elapsed_ms "$start")
[ "$took" -lt 5000 ] && ok 0 "frozen shard, allow: answered in $took ms (bound 5000)" || ok 1 "frozen shard, allow: answered in $took ms (bound 5000)"
is "$(q router -c "SELECT allowed, remaining FROM ratelimit_router.consume('$also_healthy', 5, '1 hour')")" "t|3" "the healthy shard answers while the other is frozen"
kill -CONT $frozen_pids
q router -c "ALTER ROLE postgres RESET statement_timeout" >/dev/null

echo "# policy replication"
# wait_for NAME SQL EXPECTED SECONDS: polls until SQL prints EXPECTED on NAME; prints what it saw.
wait_for() {
    local name="$1" sql="$2" expected="$3" seconds="$4" got="" i
    for i in $(seq 1 $((seconds * 10))); do
        got="$(q "$name" -c "$sql" 2>/dev/null || true)"
        [ "$got" = "$expected" ] && break
        sleep 0.1
    done
    echo "$got"
}
router_conn="host=127.0.0.1 port=$(router_cluster_port router) dbname=postgres user=postgres"
for shard in 1 2; do
    q router -c "SELECT setup_sql FROM ratelimit_router.shard_setup_sql('$router_conn') WHERE shard = $shard" |
        q "shard$shard" >/dev/null 2>&1
done
digest="$(q router -c "SELECT ratelimit_router.policy_digest()")"
for name in shard1 shard2; do
    is "$(wait_for router "SELECT matches FROM ratelimit_router.verify() WHERE shard LIKE '%:$(router_cluster_port "$name")/%'" t 15)" t \
        "$name subscribed: its initial copy matches the router's policy tables"
done
is "$(q router -c "SELECT count(*) FROM ratelimit_router.verify()")" 2 "verify() reports every shard"
q router -c "INSERT INTO ratelimit.policies (name, \"limit\", period) VALUES ('replicated.edit', 3, '1 hour')" >/dev/null
for name in shard1 shard2; do
    is "$(wait_for "$name" "SELECT \"limit\" FROM ratelimit.policies WHERE name = 'replicated.edit'" 3 10)" 3 "a new policy reaches $name"
done
is "$(q router -c "SELECT (ratelimit_router.check('replicated.edit', '$healthy')).limit, (ratelimit_router.check('replicated.edit', '$victim')).limit" )" "3|3" \
    "routed checks on both shards use it"
q router -c "UPDATE ratelimit.policies SET \"limit\" = 5 WHERE name = 'replicated.edit'" >/dev/null
for name in shard1 shard2; do
    wait_for "$name" "SELECT \"limit\" FROM ratelimit.policies WHERE name = 'replicated.edit'" 5 10 >/dev/null
done
is "$(q router -c "SELECT (ratelimit_router.check('replicated.edit', '$healthy')).limit, (ratelimit_router.check('replicated.edit', '$victim')).limit" )" "5|5" \
    "an edit is seen by the next routed call (the shards' cached copies were invalidated)"
router_cluster_stop shard2
q router -c "UPDATE ratelimit.policies SET \"limit\" = 7 WHERE name = 'replicated.edit'" \
         -c "INSERT INTO ratelimit.tiers (name, multiplier) VALUES ('replicated.tier', 2)" >/dev/null
router_cluster_resume shard2
is "$(wait_for shard2 "SELECT (SELECT \"limit\" FROM ratelimit.policies WHERE name = 'replicated.edit') || '/' || (SELECT count(*) FROM ratelimit.tiers WHERE name = 'replicated.tier')" "7/1" 20)" "7/1" \
    "a shard stopped during edits catches up after its restart"
is "$(wait_for router "SELECT string_agg(matches::text, ',') FROM ratelimit_router.verify()" "true,true" 10)" "true,true" "verify(): every shard matches again"
q shard1 -c "UPDATE ratelimit.policies SET \"limit\" = 99 WHERE name = 'replicated.edit'" >/dev/null
is "$(q router -c "SELECT string_agg(shard, ',') FROM ratelimit_router.verify() WHERE NOT matches")" \
    "127.0.0.1:$(router_cluster_port shard1)/postgres" "verify() names the shard whose rows were edited there, and only it"
q shard1 -c "UPDATE ratelimit.policies SET \"limit\" = 7 WHERE name = 'replicated.edit'" >/dev/null
is "$(q router -c "SELECT bool_and(matches) FROM ratelimit_router.verify()")" t "and matches once the rows are the router's again"

echo "1..$checks"
if [ "$failures" -eq 0 ]; then
    echo "router: $checks passed, 0 failed"
else
    echo "router: $((checks - failures)) passed, $failures failed"
fi
exit $((failures > 0))
