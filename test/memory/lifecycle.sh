#!/usr/bin/env bash
# The memory engine across the server's life, on clusters of its own (restarts and crashes
# would disturb the shared test cluster). TAP output; exits non-zero if any check fails.
#  - a clean restart keeps every key's state (saved at shutdown, restored at start);
#  - kill -9 of the postmaster comes back empty and working, or, with snapshots on, from the
#    last snapshot;
#  - a damaged state file is ignored: the server starts, empty;
#  - a hot standby decides on the memory engine (its own store; nothing is replicated);
#  - without shared_preload_libraries the engine is an error that says what to change, and
#    the table engines still work.
# Run as root from the repository root, with the extension installed (test/run.sh does both).
set -euo pipefail
cd "$(dirname "$0")/../.."
source scripts/cluster.sh

source scripts/tap.sh
sql() {
    psql -X -A -t -q -F ' ' -v ON_ERROR_STOP=1 -c "$1"
}
# consume KEY LIMIT: "allowed remaining" of one memory-engine call over an hour.
consume() {
    sql "SELECT allowed, remaining FROM ratelimit.consume('$1', $2, '1 hour', p_engine => 'memory')"
}
peek_remaining() {
    sql "SELECT remaining FROM ratelimit.peek('$1', $2, '1 hour', p_engine => 'memory')"
}
state_file() {
    echo "$CLUSTER_DIR/data/pg_stat/ratelimit_memory.state"
}

# Kills the postmaster with SIGKILL, as a crash would, waits for its children to notice and
# exit (the next start needs the old shared memory released), then starts the server again.
crash_and_start() {
    local postmaster children pid
    postmaster="$(head -1 "$CLUSTER_DIR/data/postmaster.pid")"
    children="$(pgrep -P "$postmaster" || true)"
    kill -9 "$postmaster"
    for pid in $children; do
        while kill -0 "$pid" 2>/dev/null; do
            sleep 0.1
        done
    done
    cluster_server_start
}

echo "# a server with the library preloaded"
cluster_start "shared_preload_libraries = 'ratelimit'" "ratelimit.memory_capacity = 10000" \
    "fsync = off"
sql "CREATE EXTENSION ratelimit"

# ---- clean restart ------------------------------------------------------------------------
for _ in 1 2 3; do consume kept 5 >/dev/null; done
for _ in 1 2 3 4 5 6 7; do consume full 5 >/dev/null; done
for i in $(seq 1 500); do echo "SELECT ratelimit.consume('many-$i', 10, '1 hour', p_engine => 'memory');"; done |
    psql -X -q -v ON_ERROR_STOP=1 >/dev/null
is "$(sql 'SELECT entries FROM ratelimit.memory_stats')" "502" "502 keys tracked before the restart"
cluster_restart fast
is "$(sql 'SELECT entries FROM ratelimit.memory_stats')" "502" "a clean restart keeps all 502 keys"
is "$(peek_remaining kept 5)" "2" "a key keeps its count across a clean restart"
is "$(consume kept 5)" "t 1" "and goes on counting from it"
is "$(consume full 5)" "f 0" "a full key is still full after the restart"
is "$(sql "SELECT remaining FROM ratelimit.peek('many-250', 10, '1 hour', p_engine => 'memory')")" "9" \
    "every restored key decides from its saved state"
is "$(test -e "$(state_file)" && echo present || echo absent)" "absent" \
    "without snapshots the file is deleted once loaded (a later crash must not resurrect it)"

# ---- kill -9 without snapshots --------------------------------------------------------------
crash_and_start
is "$(sql 'SELECT entries FROM ratelimit.memory_stats')" "0" "after kill -9 the store starts empty"
is "$(consume kept 5)" "t 4" "and works: the key starts afresh"
worker_running() {
    local postmaster
    postmaster="$(head -1 "$CLUSTER_DIR/data/postmaster.pid")"
    for _ in $(seq 1 50); do
        if pgrep -P "$postmaster" -f 'ratelimit memory engine' >/dev/null; then
            echo running
            return
        fi
        sleep 0.1
    done
    echo "not running"
}
is "$(worker_running)" "running" "the worker runs again after the crash"

# ---- kill -9 with snapshots ----------------------------------------------------------------
sql "ALTER SYSTEM SET ratelimit.memory_snapshot_interval = 1" >/dev/null
sql "SELECT pg_reload_conf()" >/dev/null
sleep 1
for _ in 1 2; do consume snapshotted 5 >/dev/null; done
# Wait for a snapshot that contains the calls: the file is rewritten every second.
sleep 2.5
is "$(test -e "$(state_file)" && echo present || echo absent)" "present" "the worker writes snapshots"
crash_and_start
is "$(peek_remaining snapshotted 5)" "3" "after kill -9 the store comes back from the last snapshot"
is "$(test -e "$(state_file)" && echo present || echo absent)" "present" \
    "with snapshots on, the file is kept after loading"
sql "ALTER SYSTEM RESET ratelimit.memory_snapshot_interval" >/dev/null
sql "SELECT pg_reload_conf()" >/dev/null

# ---- a damaged file ----------------------------------------------------------------------
consume damaged 5 >/dev/null
cluster_server_stop
# Flip one byte in the middle of the saved entries: the CRC must catch it.
size="$(stat -c %s "$(state_file)")"
printf '\xff' | dd of="$(state_file)" bs=1 seek=$((size / 2)) conv=notrunc status=none
cluster_server_start
is "$(sql 'SELECT entries FROM ratelimit.memory_stats')" "0" "a damaged state file is ignored"
ok "$(grep -q 'ignoring .*ratelimit_memory.state.*checksum does not match' "$CLUSTER_DIR/server.log"; echo $?)" \
    "and the log says why"
is "$(consume damaged 5)" "t 4" "the engine works after ignoring it"

# ---- a hot standby --------------------------------------------------------------------------
standby_dir="$CLUSTER_DIR/standby"
standby_port="$(cluster_free_port)"
cluster_as_postgres "$CLUSTER_BINDIR/pg_basebackup" -D "$standby_dir" -R -X stream \
    -h "$PGHOST" -p "$PGPORT" -U postgres
{
    echo "port = $standby_port"
    echo "hot_standby = on"
} >>"$standby_dir/postgresql.conf"
chmod 700 "$standby_dir"
stop_standby() {
    cluster_as_postgres "$CLUSTER_BINDIR/pg_ctl" -D "$standby_dir" -m fast -w stop \
        >/dev/null 2>&1 || true
}
trap 'stop_standby; cluster_stop' EXIT
cluster_as_postgres "$CLUSTER_BINDIR/pg_ctl" -D "$standby_dir" -l "$CLUSTER_DIR/standby.log" \
    -w -t 60 start >/dev/null
is "$(PGPORT=$standby_port sql 'SELECT pg_is_in_recovery()')" "t" "the standby is in recovery"
is "$(PGPORT=$standby_port consume on-standby 2)" "t 1" "a hot standby decides on the memory engine"
is "$(PGPORT=$standby_port consume on-standby 2)" "t 0" "and counts"
is "$(PGPORT=$standby_port consume on-standby 2)" "f 0" "and denies"
is "$(PGPORT=$standby_port psql -X -A -t -q -c "\\set VERBOSITY verbose" \
    -c "SELECT ratelimit.consume('on-standby', 2, '1 hour')" 2>&1 | grep -o '25006' | head -1)" \
    "25006" "the table engine, which must write, is refused there (25006)"
stop_standby
cluster_stop

echo "# a server without the library preloaded"
cluster_start "fsync = off"
sql "CREATE EXTENSION ratelimit"
error="$(psql -X -A -t -q -c "\\set VERBOSITY verbose" \
    -c "SELECT ratelimit.consume('k', 1, '1 hour', p_engine => 'memory')" 2>&1 || true)"
ok "$(grep -q '^ERROR:  55000: p_engine "memory" is not available' <<<"$error"; echo $?)" \
    "the memory engine is an error (55000) naming p_engine"
ok "$(grep -q "HINT:  Add ratelimit to shared_preload_libraries" <<<"$error"; echo $?)" \
    "the hint says which setting to change"
error="$(psql -X -A -t -q -c "SELECT * FROM ratelimit.memory_stats" 2>&1 || true)"
ok "$(grep -q 'shared_preload_libraries' <<<"$error"; echo $?)" "so are its stats"
is "$(sql "SELECT allowed FROM ratelimit.consume('k', 1, '1 hour')")" "t" \
    "the table engine works without preloading"
cluster_stop

echo "1..$checks"
if [ "$failures" -gt 0 ]; then
    echo "# $failures of $checks checks failed"
    exit 1
fi
echo "# all $checks checks passed"
