#!/usr/bin/env bash
# pg_dump and pg_restore of a database using the extension, on a cluster of its own. TAP output;
# exits non-zero if any check fails.
#  - the source: presets loaded, a policy edited, an access-list entry, a key override, and
#    counters (native consume on the table engine, policy checks);
#  - pg_dump -Fc, createdb, pg_restore -d into a fresh database: no error, no warning;
#  - the four policy tables hold the same rows and ratelimit.key_state the same counters (durable
#    counters are dumped: a restore must not hand every key a fresh quota);
#  - the restored database decides from those counters, and a new access-list entry gets an id
#    of its own (the identity sequence is dumped with the table).
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

createdb source_db
sql source_db "CREATE EXTENSION ratelimit"
sql source_db "SELECT ratelimit.load_preset(preset) FROM ratelimit.presets()" >/dev/null
sql source_db "UPDATE ratelimit.policies SET \"limit\" = 7 WHERE name = 'rpc.send-friend-request'"
sql source_db "INSERT INTO ratelimit.access_list (action, ip, reason) VALUES ('deny', '203.0.113.0/24', 'abuse')"
sql source_db "INSERT INTO ratelimit.access_list (action, key, reason) VALUES ('allow', 'partner', 'trusted')"
sql source_db "INSERT INTO ratelimit.key_overrides (policy, key, \"limit\", reason) VALUES ('rpc.auth', 'vip', 50, 'support')"
sql source_db "SELECT ratelimit.consume('native-key', 10, '1 hour') FROM generate_series(1, 3)" >/dev/null
sql source_db "SELECT ratelimit.check('rpc.auth', 'user-1') FROM generate_series(1, 2)" >/dev/null
sql source_db "SELECT ratelimit.check('endpoint.ai-inference', 'user-1') FROM generate_series(1, 4)" >/dev/null

is "$(sql source_db "SELECT count(*) FROM ratelimit.key_state")" 3 "the source holds counters for three keys"

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

echo "1..$checks"
exit $((failures > 0))
