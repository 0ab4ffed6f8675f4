#!/usr/bin/env bash
# The memory engine across the server's life, on clusters of its own (restarts and crashes
# would disturb the shared test cluster). TAP output; exits non-zero if any check fails.
#  - a clean restart keeps every key's state (saved at shutdown, restored at start);
#  - kill -9 of the postmaster comes back empty and working, or, with snapshots on, from the
#    last snapshot; no lease survives kill -9 of its holding backend or of the postmaster;
#  - a damaged state file is ignored: the server starts, empty;
#  - a hot standby decides on the memory engine (its own store; nothing is replicated): a
#    snapshot file that came with its base backup is not loaded, and the unlogged engine's reads
#    answer there (an unlogged key is empty on a standby);
#  - without shared_preload_libraries the engine is an error that says what to change, and
#    the table engines still work;
#  - a full store (ratelimit.memory_capacity = 20000) never forgets a key that still counts: a
#    flood of 100,000 new keys leaves every spent key spent, every block and every count_denied
#    lockout in place, on every algorithm; ratelimit.memory_when_full = deny, error and evict;
#    consume_all and check_all deny as one when a new key has no room; another database's flood
#    neither evicts, reads nor resets this database's keys, and memory_database_share holds it
#    to its share; the settings refuse bad values; an older store file is refused with a LOG
#    line.
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
cluster_start "shared_preload_libraries = 'ratelimit'" "ratelimit.memory_capacity = 20000" \
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

# ---- leases: a holder killed outright, then the whole server ---------------------------------
# hold_lease KEY: a session that takes a lease of KEY and waits; returns once the lease is held.
hold_lease() {
    psql -X -q -c "SELECT ratelimit.acquire('$1', 5, p_scope => 'session')" \
        -c "SELECT pg_sleep(60)" >/dev/null 2>&1 &
    for _ in $(seq 1 100); do
        [ "$(sql "SELECT ratelimit.in_flight('$1')")" = 1 ] && return
        sleep 0.1
    done
}
# in_flight_after_restart KEY: in_flight once the server answers again (up to 10 s).
in_flight_after_restart() {
    local value=""
    for _ in $(seq 1 100); do
        value="$(sql "SELECT ratelimit.in_flight('$1')" 2>/dev/null || true)"
        [ "$value" = 0 ] && break
        sleep 0.1
    done
    echo "$value"
}
hold_lease lease-held
is "$(sql "SELECT ratelimit.in_flight('lease-held')")" "1" "a session holds a lease"
kill -9 "$(sql "SELECT pid FROM pg_stat_activity WHERE query LIKE '%pg_sleep(60)%' AND pid <> pg_backend_pid()")"
wait || true
is "$(in_flight_after_restart lease-held)" "0" \
    "kill -9 of the holding backend ends its lease (the server reinitializes shared memory)"
hold_lease lease-crash
crash_and_start
wait || true
is "$(in_flight_after_restart lease-crash)" "0" "kill -9 of the postmaster: no lease survives the crash"

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

# ---- an older file ----------------------------------------------------------------------------
consume older-file 5 >/dev/null
cluster_server_stop
# The format version is the header's second 32-bit word: a version 1 file is refused.
printf '\x01\x00\x00\x00' | dd of="$(state_file)" bs=1 seek=4 conv=notrunc status=none
cluster_server_start
is "$(sql 'SELECT entries FROM ratelimit.memory_stats')" "0" "a file of an older format is not loaded"
ok "$(grep -q 'ignoring .*ratelimit_memory.state.*format version 1, and this version of ratelimit reads version 2' \
    "$CLUSTER_DIR/server.log"; echo $?)" "and the log says which versions"

# ---- a hot standby --------------------------------------------------------------------------
# The primary saves snapshots, so its file is there when the base backup copies the data
# directory: the standby must not take that copy for its own store.
sql "ALTER SYSTEM SET ratelimit.memory_snapshot_interval = 1" >/dev/null
sql "SELECT pg_reload_conf()" >/dev/null
consume copied 2 >/dev/null
consume copied 2 >/dev/null
sql "SELECT ratelimit.consume('ul-key', 5, '1 hour', p_engine => 'unlogged')" >/dev/null
snapshot_mark="$(stat -c %Y "$(state_file)" 2>/dev/null || echo 0)"
for _ in $(seq 1 50); do
    [ "$(stat -c %Y "$(state_file)" 2>/dev/null || echo 0)" -gt "$snapshot_mark" ] && break
    sleep 0.1
done
ok "$(test -e "$(state_file)"; echo $?)" "the primary's snapshot file is there for the base backup to copy"
standby_dir="$CLUSTER_DIR/standby"
standby_port="$(cluster_free_port)"
cluster_as_postgres "$CLUSTER_BINDIR/pg_basebackup" -D "$standby_dir" -R -X stream \
    -h "$PGHOST" -p "$PGPORT" -U postgres
ok "$(test -e "$standby_dir/pg_stat/ratelimit_memory.state"; echo $?)" "pg_basebackup copied it"
# Reset on the primary after the copy: a standby loading the copy would keep the key spent.
sql "SELECT ratelimit.reset('copied', 'memory')" >/dev/null
sql "ALTER SYSTEM RESET ratelimit.memory_snapshot_interval" >/dev/null
sql "SELECT pg_reload_conf()" >/dev/null
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
is "$(PGPORT=$standby_port peek_remaining copied 2)" "2" \
    "a snapshot that came with the base backup is not loaded: the key reset since is not spent there"
ok "$(grep -q 'came with a base backup and is another server' "$CLUSTER_DIR/standby.log"; echo $?)" \
    "and the standby's log says why it starts empty"
is "$(PGPORT=$standby_port sql "SELECT allowed, remaining FROM ratelimit.peek('ul-key', 5, '1 hour', p_engine => 'unlogged')")" \
    "t 5" "peek on the unlogged engine answers on a standby: an unlogged key is empty there"
is "$(PGPORT=$standby_port sql "SELECT count(*) FROM unnest(ratelimit.peek_many(ARRAY['ul-key', 'other'], 5, '1 hour', p_engine => 'unlogged')) AS d WHERE d.remaining = 5")" \
    "2" "so does peek_many"

is "$(PGPORT=$standby_port consume on-standby 2)" "t 1" "a hot standby decides on the memory engine"
is "$(PGPORT=$standby_port consume on-standby 2)" "t 0" "and counts"
is "$(PGPORT=$standby_port consume on-standby 2)" "f 0" "and denies"
is "$(PGPORT=$standby_port psql -X -A -t -q -c "\\set VERBOSITY verbose" \
    -c "SELECT ratelimit.consume('on-standby', 2, '1 hour')" 2>&1 | grep -o '25006' | head -1)" \
    "25006" "the table engine, which must write, is refused there (25006)"
stop_standby
cluster_stop

echo "# a full store: ratelimit.memory_capacity = 20000"
cluster_start "shared_preload_libraries = 'ratelimit'" "ratelimit.memory_capacity = 20000" \
    "fsync = off"
sql "CREATE EXTENSION ratelimit"
sql "CREATE DATABASE other" >/dev/null
PGDATABASE=other sql "CREATE EXTENSION ratelimit"
algorithms="fixed_window rolling_window sliding_window sliding_window_counter token_bucket gcra"
# verdict KEY ALGORITHM: "allowed remaining" of a peek, as after the four calls below.
verdict() {
    sql "SELECT allowed, remaining FROM ratelimit.peek('$1', 3, '1 hour', 1, '$2', 'memory')"
}
# Spent keys on every algorithm (four calls of three: the last denied), a 30-day block, and a
# count_denied lockout (its denied call blocks the key for the policy's hour).
for algorithm in $algorithms; do
    for _ in 1 2 3 4; do
        sql "SELECT ratelimit.consume('victim-$algorithm', 3, '1 hour', 1, '$algorithm', 'memory')" \
            >/dev/null
    done
done
sql "SELECT ratelimit.block('blocked', '30 days', 'memory')" >/dev/null
sql "INSERT INTO ratelimit.policies (name, \"limit\", period, engine, count_denied)
     VALUES ('login', 1, '1 hour', 'memory', true)" >/dev/null
sql "SELECT allowed FROM ratelimit.check('login', 'locked-out')" >/dev/null
sql "SELECT allowed FROM ratelimit.check('login', 'locked-out')" >/dev/null
for algorithm in $algorithms; do
    is "$(verdict "victim-$algorithm" "$algorithm")" "f 0" "$algorithm: the victim is spent before the flood"
done
sql "SELECT ratelimit.consume('roomy', 100, '1 hour', p_engine => 'memory')" >/dev/null
# Another database has keys of the same names: its own.
is "$(PGDATABASE=other sql "SELECT remaining FROM ratelimit.consume('victim-fixed_window', 3, '1 hour', p_engine => 'memory')")" \
    "2" "another database's key of the same name is its own"
is "$(PGDATABASE=other sql "SELECT allowed, remaining FROM ratelimit.peek('victim-gcra', 3, '1 hour', 1, 'gcra', 'memory')")" \
    "t 3" "another database does not read this database's keys"
is "$(PGDATABASE=other sql "SELECT ratelimit.reset('victim-gcra', 'memory')")" "f" "nor reset them"
# The flood: 100,000 new keys in one statement, every algorithm in turn.
flood_sql() {
    echo "SELECT count(*) FILTER (WHERE d.allowed) FROM generate_series(1, 100000) AS g,
          LATERAL ratelimit.consume('$1' || g, 10, '1 hour', 1,
              (ARRAY['fixed_window', 'rolling_window', 'sliding_window', 'sliding_window_counter',
                     'token_bucket', 'gcra'])[g % 6 + 1], 'memory') AS d"
}
allowed="$(sql "$(flood_sql flood:)" 2>/dev/null)"
ok "$([ "$allowed" -lt 20000 ] && [ "$allowed" -gt 10000 ] && echo 0 || echo 1)" \
    "the flood is allowed only while there is room ($allowed of 100000)"
is "$(sql 'SELECT entries, capacity, evictions, refusals = 100000 - '"$allowed"', full_partitions > 0
           FROM ratelimit.memory_stats')" "20000 20000 0 t t" \
    "memory_stats: full, nothing evicted, every other new key refused and counted"
for algorithm in $algorithms; do
    is "$(verdict "victim-$algorithm" "$algorithm")" "f 0" "$algorithm: the victim is still spent after the flood"
done
is "$(sql "SELECT allowed, retry_after_ms > 2500000000 FROM ratelimit.consume('blocked', 3, '1 hour', p_engine => 'memory')")" \
    "f t" "the 30-day block stays"
is "$(sql "SELECT allowed FROM ratelimit.check('login', 'locked-out')")" "f" "the count_denied lockout stays"
is "$(sql "SELECT allowed FROM ratelimit.check('login', 'newcomer-login')")" "f" \
    "a count_denied policy's new key without room is denied (its lockout cannot be stored; no error)"
is "$(sql "SELECT allowed, remaining, retry_after_ms BETWEEN 1 AND 3600000
           FROM ratelimit.consume('newcomer', 3, '1 hour', p_engine => 'memory')")" "f 0 t" \
    "deny (the default): a new key is denied, with a retry_after within the period"
is "$(sql "SELECT allowed, remaining FROM ratelimit.peek('newcomer', 3, '1 hour', p_engine => 'memory')")" \
    "t 3" "and nothing was stored for it; a peek needs no slot"
is "$(sql "SELECT ratelimit.reset('newcomer', 'memory')")" "f" "nor a reset"
refusals_before="$(sql 'SELECT refusals FROM ratelimit.memory_stats')"
is "$(sql "SELECT string_agg(allowed || '/' || remaining, ' ' ORDER BY n)
           FROM unnest(ratelimit.consume_many(
               ARRAY['batch-new-1', 'victim-fixed_window', 'batch-new-2', 'batch-new-1'],
               3, '1 hour', 1, 'fixed_window', 'memory'))
                WITH ORDINALITY AS d(allowed, lim, remaining, retry, reset, n)")" \
    "false/0 false/0 false/0 false/0" \
    "consume_many: each new key of the batch is denied for lack of room, the spent key as before"
is "$(sql 'SELECT refusals - '"$refusals_before"' FROM ratelimit.memory_stats')" "3" \
    "and each refusal is counted"
error="$(psql -X -A -t -q -c "\\set VERBOSITY verbose" -c "SET ratelimit.memory_when_full = error" \
    -c "SELECT ratelimit.consume_many(ARRAY['victim-gcra', 'batch-new-3'], 3, '1 hour', 1, 'gcra', 'memory')" \
    2>&1 || true)"
ok "$(grep -q '^ERROR:  53200: ratelimit: the memory engine has no room for a new key' <<<"$error"; echo $?)" \
    "consume_many with error: a new key without room fails the call with 53200"
ok "$(grep -q 'WARNING:  ratelimit: the memory engine is full: [0-9]* calls refused' "$CLUSTER_DIR/server.log"; echo $?)" \
    "the server log has a WARNING about the refusals"
ok "$(grep -q 'HINT:  Raise ratelimit.memory_capacity' "$CLUSTER_DIR/server.log"; echo $?)" \
    "naming the setting to raise"
is "$(grep -c 'WARNING:  ratelimit: the memory engine is full' "$CLUSTER_DIR/server.log")" "1" \
    "once, not once per refusal"
error="$(psql -X -A -t -q -c "\\set VERBOSITY verbose" -c "SET ratelimit.memory_when_full = error" \
    -c "SELECT ratelimit.consume('newcomer', 3, '1 hour', p_engine => 'memory')" 2>&1 || true)"
ok "$(grep -q '^ERROR:  53200: ratelimit: the memory engine has no room for a new key' <<<"$error"; echo $?)" \
    "error: the call fails with 53200"
ok "$(grep -q 'HINT:  Raise ratelimit.memory_capacity' <<<"$error"; echo $?)" "with a hint naming memory_capacity"
error="$(psql -X -A -t -q -c "\\set VERBOSITY verbose" \
    -c "SELECT ratelimit.block('new-block', '1 day', 'memory')" 2>&1 || true)"
ok "$(grep -q '^ERROR:  53200: ratelimit: the memory engine has no room to block a new key' <<<"$error"; echo $?)" \
    "deny: blocking a new key is an error (an administrator's act must not be lost silently)"
is "$(sql "SELECT (ratelimit.consume_all(ARRAY['victim-fixed_window', 'all-new'],
           ARRAY[100, 100], ARRAY['1 hour', '1 hour']::interval[], NULL,
           ARRAY['table', 'memory']))[2].allowed")" "f" \
    "consume_all: a new memory key without room denies the whole call"
is "$(sql "SELECT remaining FROM ratelimit.peek('victim-fixed_window', 100, '1 hour')")" "100" \
    "and nothing was charged on the table engine"
is "$(sql "SELECT (ratelimit.consume_all(ARRAY['roomy', 'all-new'], ARRAY[100, 100],
           ARRAY['1 hour', '1 hour']::interval[], NULL, ARRAY['memory', 'memory']))[2].allowed")" "f" \
    "consume_all over two memory keys: the new one without room denies both"
is "$(sql "SELECT remaining FROM ratelimit.peek('roomy', 100, '1 hour', p_engine => 'memory')")" "99" \
    "and the other memory key was not charged"
sql "INSERT INTO ratelimit.policies (name, \"limit\", period, engine)
     VALUES ('per-key', 5, '1 hour', 'table'), ('per-key-memory', 5, '1 hour', 'memory')" >/dev/null
is "$(sql "SELECT allowed FROM ratelimit.check_all(ARRAY['per-key', 'per-key-memory'], ARRAY['someone', 'someone'])")" \
    "f" "check_all: a policy key without room on memory denies the decision"
is "$(sql "SELECT count(*) FROM ratelimit.key_state WHERE policy = 'per-key'")" "0" \
    "and its table policy was not charged"
# Another database's flood, even told to evict, takes none of this database's keys.
PGDATABASE=other sql "SET ratelimit.memory_when_full = evict; $(flood_sql other:)" >/dev/null 2>&1
is "$(PGDATABASE=other sql "SELECT count(*) FROM ratelimit.memory_stats_by_database() WHERE evictions > 0
                             AND database <> 'other'")" "0" \
    "another database's flood, told to evict, took none of this database's keys"
for algorithm in $algorithms; do
    is "$(verdict "victim-$algorithm" "$algorithm")" "f 0" "$algorithm: the victim is still spent after the other database's flood"
done
is "$(sql "SELECT database, entries FROM ratelimit.memory_stats_by_database() WHERE database = 'postgres'")" \
    "postgres 19999" "memory_stats_by_database: this database's keys, all still there"
# evict: the new key takes the least recently used key of its own database.
before="$(sql 'SELECT evictions FROM ratelimit.memory_stats')"
is "$(sql "SET ratelimit.memory_when_full = evict; SELECT allowed FROM ratelimit.consume('evicting', 3, '1 hour', p_engine => 'memory')" | tail -1)" \
    "t" "evict: a new key is allowed"
is "$(sql 'SELECT evictions - '"$before"' FROM ratelimit.memory_stats')" "1" "and one live key was evicted, and counted"
# The settings: a share of the store per database, and values refused.
sql "ALTER SYSTEM SET ratelimit.memory_database_share = 60" >/dev/null
sql "SELECT pg_reload_conf()" >/dev/null
sleep 0.5
is "$(sql "SELECT share_limit FROM ratelimit.memory_stats_by_database() WHERE database = 'postgres'")" "12000" \
    "memory_database_share = 60: a database may hold 12000 of the 20000 keys"
error="$(psql -X -A -t -q -c "ALTER SYSTEM SET ratelimit.memory_database_share = 0" 2>&1 || true)"
ok "$(grep -q '0 is outside the valid range for parameter "ratelimit.memory_database_share" (1 .. 100)' <<<"$error"; echo $?)" \
    "a share of 0 is refused"
error="$(psql -X -A -t -q -c "SET ratelimit.memory_when_full = forget" 2>&1 || true)"
ok "$(grep -q 'invalid value for parameter "ratelimit.memory_when_full": "forget"' <<<"$error" &&
      grep -q 'Available values: deny, error, evict' <<<"$error"; echo $?)" \
    "an unknown memory_when_full is refused, listing the choices"
sql "CREATE ROLE app LOGIN" >/dev/null
error="$(psql -X -A -t -q -U app -c "SET ratelimit.memory_when_full = evict" 2>&1 || true)"
ok "$(grep -q 'permission denied to set parameter "ratelimit.memory_when_full"' <<<"$error"; echo $?)" \
    "a caller cannot choose memory_when_full for itself"
sql "ALTER ROLE app SET ratelimit.memory_when_full = error" >/dev/null
is "$(psql -X -A -t -q -U app -c "SHOW ratelimit.memory_when_full")" "error" \
    "an administrator can choose it per role (ALTER ROLE ... SET)"
cluster_server_stop
cluster_server_start
is "$(sql "SELECT count(*) FROM ratelimit.memory_stats_by_database() WHERE database IN ('postgres', 'other')")" "2" \
    "a restart brings every database's keys back, each to its database"
for algorithm in $algorithms; do
    is "$(verdict "victim-$algorithm" "$algorithm")" "f 0" "$algorithm: the victim is still spent after a restart"
done
cluster_stop

echo "# a server without the library preloaded"
cluster_start "fsync = off"
sql "CREATE EXTENSION ratelimit"
# The sliding window's drop-ins, for the drop-in call on the memory engine below.
sql "CREATE EXTENSION ratelimit_sliding_window_limits"
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
# Each way to choose the memory engine names itself in the error.
warning="$(psql -X -A -t -q -c "INSERT INTO ratelimit.policies (name, \"limit\", period, engine) VALUES ('mem.policy', 5, '1 minute', 'memory')" 2>&1 || true)"
ok "$(grep -q 'WARNING:  p_engine "memory" is not available on this server' <<<"$warning"; echo $?)" \
    "a memory policy written here is kept, with a WARNING that its calls will fail"
error="$(psql -X -A -t -q -c "SELECT ratelimit.check('mem.policy', 'k')" 2>&1 || true)"
ok "$(grep -q 'ERROR:  policy "mem.policy" (engine memory) is not available: ratelimit is not in shared_preload_libraries' <<<"$error"; echo $?)" \
    "a call of it names the policy, not p_engine"
error="$(psql -X -A -t -q -c "SET ratelimit.dropin_engine = memory" \
    -c "SELECT * FROM check_rate_limit(p_key => 'k', p_limit => 5, p_window_seconds => 60)" 2>&1 || true)"
ok "$(grep -q 'ERROR:  ratelimit.dropin_engine = memory is not available' <<<"$error"; echo $?)" \
    "a drop-in on the memory engine names ratelimit.dropin_engine"
cluster_stop

echo "1..$checks"
if [ "$failures" -gt 0 ]; then
    echo "# $failures of $checks checks failed"
    exit 1
fi
echo "# all $checks checks passed"
