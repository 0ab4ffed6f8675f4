#!/usr/bin/env bash
# pg_dump and pg_restore of a database using the extension, on a cluster of its own. TAP output;
# exits non-zero if any check fails.
#  - the source: presets loaded, a policy edited, an access-list entry, a key override,
#    counters (native consume on the table engine, policy checks), and the three drop-in
#    extensions (the per-RPC and endpoint limits in public, the sliding window's in the schema
#    sliding_window), each written through its functions;
#  - pg_dump -Fc, createdb, pg_restore -d into a fresh database: no error, no warning;
#  - the four policy tables hold the same rows and ratelimit.key_state the same counters (durable
#    counters are dumped: a restore must not hand every key a fresh quota);
#  - the restored database decides from those counters, and a new access-list entry gets an id
#    of its own (the identity sequence is dumped with the table);
#  - the drop-in extensions come back as they were (version, schema); their tables, which the
#    dump does not carry (docs/operations.md, "Backups"), start empty, and their functions work.
# Run as root from the repository root, with the extension installed.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/cluster.sh
source scripts/tap.sh

BINDIR="$CLUSTER_BINDIR"
cluster_start "shared_preload_libraries = 'ratelimit'"

sql() {
    local database="$1"
    shift
    psql -X -A -t -q -F ' ' -v ON_ERROR_STOP=1 -d "$database" -c "$1"
}

# The rows of the policy tables and the counters, one line per table, as md5 of a stable text.
table_rows() {
    local table
    for table in policies tiers key_overrides access_list key_state; do
        sql "$1" "SELECT '$table ' || count(*) || ' ' || coalesce(md5(string_agg(t::text, '|' ORDER BY t::text)), '')
                  FROM ratelimit.$table t"
    done
}

# The ratelimit extensions on one line: each one's name, version and schema.
extensions() {
    sql "$1" "SELECT string_agg(e.extname || ' ' || e.extversion || ' ' || n.nspname, ', ' ORDER BY e.extname)
              FROM pg_extension e JOIN pg_namespace n ON n.oid = e.extnamespace
              WHERE e.extname LIKE 'ratelimit%'"
}
# The drop-ins' rows, one number each: per-RPC, endpoint, sliding window.
drop_in_rows() {
    sql "$1" "SELECT (SELECT count(*) FROM public.rpc_rate_limits), (SELECT count(*) FROM public.rate_limits),
                     (SELECT count(*) FROM sliding_window.rate_limit_buckets)"
}
user_id=a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11

createdb source_db
sql source_db "CREATE EXTENSION ratelimit"
# Every app's drop-ins: the sliding window's check_rate_limit shares the per-RPC one's name, so it
# has a schema of its own.
sql source_db "CREATE EXTENSION ratelimit_rpc_limits"
sql source_db "CREATE EXTENSION ratelimit_endpoint_limits"
sql source_db "CREATE SCHEMA sliding_window"
sql source_db "CREATE EXTENSION ratelimit_sliding_window_limits SCHEMA sliding_window"
sql source_db "SELECT check_rate_limit_for_user('$user_id', 'complete-game', 20, 1)" >/dev/null
sql source_db "SELECT increment_rate_limit('$user_id', 'ai-inference', 10, 3600, 3)" >/dev/null
sql source_db "SELECT * FROM sliding_window.check_rate_limit('login:203.0.113.7', 5, 60)" >/dev/null
sql source_db "SELECT ratelimit.load_preset(preset) FROM ratelimit.presets()" >/dev/null
sql source_db "UPDATE ratelimit.policies SET \"limit\" = 7 WHERE name = 'rpc.send-friend-request'"
sql source_db "INSERT INTO ratelimit.access_list (action, ip, reason) VALUES ('deny', '203.0.113.0/24', 'abuse')"
sql source_db "INSERT INTO ratelimit.access_list (action, key, reason) VALUES ('allow', 'partner', 'trusted')"
sql source_db "INSERT INTO ratelimit.key_overrides (policy, key, \"limit\", reason) VALUES ('rpc.auth', 'vip', 50, 'support')"
sql source_db "SELECT ratelimit.consume('native-key', 10, '1 hour') FROM generate_series(1, 3)" >/dev/null
sql source_db "SELECT ratelimit.check('rpc.auth', 'user-1') FROM generate_series(1, 2)" >/dev/null
sql source_db "SELECT ratelimit.check('endpoint.ai-inference', 'user-1') FROM generate_series(1, 4)" >/dev/null

is "$(sql source_db "SELECT count(*) FROM ratelimit.key_state")" 3 "the source holds counters for three keys"
is "$(drop_in_rows source_db)" "1 1 1" "and a row in each drop-in's table"

dump="$CLUSTER_DIR/source.dump"
ok "$("$BINDIR/pg_dump" -Fc -f "$dump" source_db 2>"$CLUSTER_DIR/dump.err"; echo $?)" "pg_dump -Fc succeeds"
is "$(cat "$CLUSTER_DIR/dump.err")" "" "with nothing on stderr"

createdb restored_db
ok "$("$BINDIR/pg_restore" -d restored_db "$dump" 2>"$CLUSTER_DIR/restore.err"; echo $?)" \
    "pg_restore -d into a fresh database succeeds"
is "$(cat "$CLUSTER_DIR/restore.err")" "" "with no error or warning"

is "$(sql restored_db "SELECT extversion FROM pg_extension WHERE extname = 'ratelimit'")" \
    "$(sql source_db "SELECT extversion FROM pg_extension WHERE extname = 'ratelimit'")" "the same version of the extension"
source_rows="$(table_rows source_db)"
restored_rows="$(table_rows restored_db)"
while read -r table count digest; do
    is "$(grep "^$table " <<<"$restored_rows")" "$table $count $digest" "ratelimit.$table: the same $count rows"
done <<<"$source_rows"
is "$(sql restored_db "SELECT \"limit\" FROM ratelimit.policies WHERE name = 'rpc.send-friend-request'")" 7 \
    "the edited policy keeps its edit"
is "$(sql restored_db "SELECT count(*) FROM ratelimit.preset_policies")" 37 "the presets are there, once"
is "$(sql restored_db "SELECT ratelimit.load_preset('payment-flow')")" 0 "and loading one again writes nothing"

# The counters decide: rpc.auth allows 5 per 15 minutes and user-1 has used 2.
is "$(sql restored_db "SELECT remaining FROM ratelimit.check('rpc.auth', 'user-1')")" 2 \
    "a policy's counter goes on from where it was"
is "$(sql restored_db "SELECT remaining FROM ratelimit.consume('native-key', 10, '1 hour')")" 6 \
    "so does a native key's"
is "$(sql restored_db "SELECT remaining FROM ratelimit.check('rpc.auth', 'vip')")" 49 "the key override applies"
is "$(sql restored_db "SELECT reason FROM ratelimit.check('rpc.auth', 'user-2', p_ip => '203.0.113.9')")" deny_list \
    "the deny-list entry applies"

ok "$(sql restored_db "INSERT INTO ratelimit.access_list (action, key) VALUES ('deny', 'new-after-restore')" >/dev/null 2>&1; echo $?)" \
    "a new access-list entry can be added after the restore"
is "$(sql restored_db "SELECT count(DISTINCT id) FROM ratelimit.access_list")" 3 "with an id of its own"

# The drop-in extensions.
is "$(extensions restored_db)" "$(extensions source_db)" \
    "the drop-in extensions come back, each at its version and in its schema"
is "$(drop_in_rows restored_db)" "0 0 0" "their tables are not carried by the dump: they start empty"
is "$(sql restored_db "SELECT check_rate_limit_for_user('$user_id', 'complete-game', 1, 1)")" t \
    "the per-RPC check works (and counts afresh)"
is "$(sql restored_db "SELECT increment_rate_limit('$user_id', 'ai-inference', 10, 3600, 3) ->> 'current'")" 3 \
    "so does increment_rate_limit"
is "$(sql restored_db "SELECT allowed || ' ' || current_count FROM sliding_window.check_rate_limit('login:203.0.113.7', 5, 60)")" \
    "true 1" "and the sliding window's check_rate_limit, in its schema"
is "$(drop_in_rows restored_db)" "1 1 1" "each writing its own table"

echo "1..$checks"
exit $((failures > 0))
