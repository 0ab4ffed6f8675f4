#!/usr/bin/env bash
# The memory engine in the WAL (ratelimit.memory_wal = on), on clusters of its own: crashes,
# checkpoints, a streaming standby and a failover. TAP output; exits non-zero if any check fails.
#  - the setting needs the library preloaded, and cannot change while the server runs;
#  - kill -9 of the postmaster once the WAL writer has flushed the last decision (by itself: the
#    time it took is printed) forgives nothing: every key on
#    every algorithm (consume, refund, consume_many, consume_all, a policy's check) as it was,
#    a block still in force, a reset key still fresh; also right after a CHECKPOINT (the
#    keys' states are then in the checkpoint file the worker wrote after its redo pointer), after
#    decisions that follow one, and again right after the restart;
#  - kill -9 under load (8 clients, a CHECKPOINT among them): the replayed count is at most what
#    the clients were answered (plus one unanswered call per client) and at least that minus one
#    second of their calls (the WAL writer flushes every wal_writer_delay, 200 ms); the number
#    forgiven is printed as a comment;
#  - the records in the WAL: pg_walinspect names the resource manager "ratelimit" and the
#    records STATES (one per decision) and SAVED (after a checkpoint); pg_waldump, which
#    cannot load the extension, shows them as custom209; the bytes per decision are printed;
#  - a CHECKPOINT with 20,000 live keys writes them to the checkpoint file, not to the WAL: its
#    WAL is a few hundred bytes; with the file unwritable, the worker removes the old file and
#    writes the keys to the WAL instead (SNAPSHOT), and kill -9 then keeps every key;
#  - the pgTAP files that use the memory engine pass with it on;
#  - a hot standby made by pg_basebackup -R replays the keys: its peeks equal the primary's,
#    also after it restarts while the primary decides, and after kill -9 of it following a
#    restartpoint (its own checkpoint file); its own decisions are not logged, and the primary's
#    next record of a key replaces them;
#  - a failover (the primary stopped with -m immediate, the standby promoted) keeps every key;
#    the promoted server logs its own decisions, which a crash of it keeps;
#  - a server that replays the records with the setting off ignores them, and logs it;
#  - the worker stays for pg_terminate_backend and pg_cancel_backend (a CHECKPOINT and kill -9
#    after them forgive nothing), memory_stats and metrics() say it runs, and kill -9 of the
#    worker alone restarts the server with every key;
#  - a checkpoint's file carries no key whose window has ended;
#  - a clean restart followed by kill -9 before the worker's first save (made slow on purpose)
#    keeps every key;
#  - with ratelimit.memory_wal_commit_wait on, the deciding transaction waits for a synchronous
#    standby before it commits; without it, it does not;
#  - a standby with a smaller store counts the replayed keys it could not hold, and logs it;
#  - a server with no worker slot for the WAL worker does not start, and its log says why.
# Run as root from the repository root, with the extension installed (test/run.sh does both).
set -euo pipefail
cd "$(dirname "$0")/../.."
source scripts/cluster.sh
source scripts/tap.sh

sql() {
    psql -X -A -t -q -F ' ' -v ON_ERROR_STOP=1 -c "$1"
}
now_ms() {
    echo $(($(date +%s%N) / 1000000))
}

# crash DATA-DIRECTORY: kills its postmaster with SIGKILL, as a crash would, and waits for its
# children to notice and exit (the next start needs the old shared memory released).
crash() {
    local postmaster children pid
    postmaster="$(head -1 "$1/postmaster.pid")"
    children="$(pgrep -P "$postmaster" || true)"
    kill -9 "$postmaster"
    for pid in $children; do
        while kill -0 "$pid" 2>/dev/null; do
            sleep 0.1
        done
    done
}
# flushed: waits (up to 60 s) until the WAL writer has flushed the WAL inserted so far, as it
# does by itself within about wal_writer_delay (a page header's bytes may follow the last record);
# prints how long that took.
flushed() {
    local target started
    target="$(sql 'SELECT pg_current_wal_insert_lsn()')"
    started="$(now_ms)"
    for _ in $(seq 1 600); do
        [ "$(sql "SELECT pg_wal_lsn_diff('$target', pg_current_wal_flush_lsn()) <= 40")" = t ] && break
        sleep 0.1
    done
    echo "# the WAL writer had flushed the last decision's record $(($(now_ms) - started)) ms later"
}
# wal_worker DATA-DIRECTORY: "running" once the server's WAL worker runs (up to 5 s).
wal_worker() {
    local postmaster
    postmaster="$(head -1 "$1/postmaster.pid")"
    for _ in $(seq 1 50); do
        if pgrep -P "$postmaster" -f 'ratelimit memory engine WAL' >/dev/null; then
            echo running
            return
        fi
        sleep 0.1
    done
    echo "not running"
}

echo "# a primary with ratelimit.memory_wal = on"
# LOG lines too: the line that says the store is rebuilt from the WAL. The WAL is kept (1 GB):
# the records' checks read WAL from before a CHECKPOINT, which would otherwise recycle it. fsync
# stays on, as on a real server: the WAL writer's flushes take what they take there.
cluster_start "shared_preload_libraries = 'ratelimit'" "ratelimit.memory_wal = on" \
    "wal_keep_size = '1GB'" \
    "log_min_messages = log"
primary_dir="$CLUSTER_DIR/data"
sql "CREATE EXTENSION ratelimit"
is "$(sql 'SHOW ratelimit.memory_wal')" "on" "SHOW ratelimit.memory_wal: on"
error="$(psql -X -A -t -q -c "SET ratelimit.memory_wal = off" 2>&1 || true)"
ok "$(grep -q 'parameter "ratelimit.memory_wal" cannot be changed without restarting the server' \
    <<<"$error"; echo $?)" "it cannot change while the server runs"
is "$(wal_worker "$primary_dir")" "running" "the WAL worker runs on the primary"

# The keys the checks follow, each with its limit and algorithm (periods of 30 days: no window
# ends and nothing refills by a unit while the test runs), and what the tests remember of them:
# ordinary tables, so they survive the crashes and reach the standby.
algorithm_array="ARRAY['fixed_window', 'rolling_window', 'sliding_window', 'sliding_window_counter',
                       'token_bucket', 'gcra']"
sql "CREATE SCHEMA wal_test" >/dev/null
sql "CREATE TABLE wal_test.tracked (key text PRIMARY KEY, algorithm text, lim integer)"
sql "INSERT INTO wal_test.tracked
     SELECT 'part-' || a, a, 20 FROM unnest($algorithm_array) AS a
     UNION ALL SELECT 'full-' || a, a, 5 FROM unnest($algorithm_array) AS a
     UNION ALL SELECT 'many-' || g, 'gcra', 20 FROM generate_series(1, 50) AS g
     UNION ALL VALUES ('refunded', 'fixed_window', 20), ('all-a', 'sliding_window', 20),
                      ('all-b', 'token_bucket', 20), ('blocked', 'fixed_window', 20),
                      ('reset', 'rolling_window', 20)"
sql "INSERT INTO ratelimit.policies (name, \"limit\", period, engine)
     VALUES ('wal.policy', 20, '30 days', 'memory')" >/dev/null
# Every tracked key's peek, and the policy's subjects' checks with cost 0 (a read).
sql "CREATE FUNCTION wal_test.state() RETURNS TABLE (key text, allowed boolean, remaining integer)
     LANGUAGE sql AS \$\$
         SELECT t.key, d.allowed, d.remaining FROM wal_test.tracked AS t,
                LATERAL ratelimit.peek(t.key, t.lim, '30 days', 1, t.algorithm, 'memory') AS d
         UNION ALL
         SELECT 'policy:' || s, c.allowed, c.remaining FROM unnest(ARRAY['alice', 'bob']) AS s,
                LATERAL ratelimit.check('wal.policy', s, 0) AS c
     \$\$"
# remember NAME: every key's state now, in wal_test.NAME.
remember() {
    sql "CREATE TABLE wal_test.$1 AS SELECT * FROM wal_test.state()"
}
# kept NAME DESCRIPTION: checks that every key is as wal_test.NAME holds it: "0 0", none differs
# and no unit was regained (forgiven) since; lists the first keys that differ when some do.
kept() {
    local compared="FROM wal_test.$1 AS o JOIN wal_test.state() AS n USING (key)
                    WHERE (n.allowed, n.remaining) IS DISTINCT FROM (o.allowed, o.remaining)"
    is "$(sql "SELECT count(*), coalesce(sum(greatest(n.remaining - o.remaining, 0)), 0) $compared")" \
        "0 0" "$2"
    sql "SELECT '#   ' || key || ': ' || o.allowed || '/' || o.remaining || ' before, ' ||
                n.allowed || '/' || n.remaining || ' now' $compared ORDER BY key LIMIT 10"
}
# spend N CONDITION: N calls of consume on each tracked key that meets CONDITION.
spend() {
    sql "SELECT count(*) FROM wal_test.tracked AS t, generate_series(1, $1) AS g,
                LATERAL ratelimit.consume(t.key, t.lim, '30 days', 1 + 0 * g, t.algorithm, 'memory') AS d
         WHERE $2" >/dev/null
}
many_keys="(SELECT array_agg('many-' || g ORDER BY g) FROM generate_series(1, 50) AS g)"
consume_many() {
    sql "SELECT ratelimit.consume_many($many_keys, 20, '30 days', 1, 'gcra', 'memory')" >/dev/null
}
consume_all() {
    sql "SELECT ratelimit.consume_all(ARRAY['all-a', 'all-b'], ARRAY[20, 20],
                ARRAY['30 days', '30 days']::interval[], ARRAY['sliding_window', 'token_bucket'],
                ARRAY['memory', 'memory'])" >/dev/null
}
check_alice() {
    sql "SELECT ratelimit.check('wal.policy', 'alice')" >/dev/null
}
# round: one more unit of every partly spent key, by each kind of call.
round() {
    spend 1 "t.key LIKE 'part-%'"
    consume_many
    consume_all
    check_alice
}

# ---- a quiet crash -----------------------------------------------------------------------------
spend 3 "t.key LIKE 'part-%'"
spend 6 "t.key LIKE 'full-%'"
consume_many
consume_many
sql "SELECT ratelimit.consume('refunded', 20, '30 days', 5, 'fixed_window', 'memory')" >/dev/null
sql "SELECT ratelimit.refund('refunded', 20, '30 days', 2, 'fixed_window', 'memory')" >/dev/null
consume_all
consume_all
sql "SELECT ratelimit.block('blocked', '1 day', 'memory')" >/dev/null
spend 4 "t.key = 'reset'"
is "$(sql "SELECT ratelimit.reset('reset', 'memory')")" "t" "a spent key is reset"
for _ in 1 2 3; do check_alice; done
remember before_crash
is "$(sql "SELECT string_agg(key || '=' || left(allowed::text, 1) || '/' || remaining, ' ' ORDER BY key)
           FROM wal_test.before_crash WHERE key NOT LIKE 'many-%' OR key = 'many-1'")" \
    "all-a=t/18 all-b=t/18 blocked=f/0 full-fixed_window=f/0 full-gcra=f/0 full-rolling_window=f/0 full-sliding_window=f/0 full-sliding_window_counter=f/0 full-token_bucket=f/0 many-1=t/18 part-fixed_window=t/17 part-gcra=t/17 part-rolling_window=t/17 part-sliding_window=t/17 part-sliding_window_counter=t/17 part-token_bucket=t/17 policy:alice=t/17 policy:bob=t/20 refunded=t/17 reset=t/20" \
    "the keys before the crash: spent on every algorithm and by every kind of call, blocked, reset"
flushed
crash "$primary_dir"
cluster_server_start
kept before_crash \
    "kill -9 once the last decision is flushed: every key as it was, 0 units forgiven"
is "$(sql "SELECT allowed, retry_after_ms > 20 * 3600 * 1000
           FROM ratelimit.consume('blocked', 20, '30 days', p_engine => 'memory')")" "f t" \
    "the block is still in force, for the rest of its day"
is "$(sql "SELECT allowed, remaining FROM ratelimit.peek('reset', 20, '30 days', 1, 'rolling_window', 'memory')")" \
    "t 20" "the reset key is still fresh"
ok "$(grep -q 'the server did not stop cleanly: the memory engine is rebuilt from the WAL' \
    "$CLUSTER_DIR/server.log"; echo $?)" "the log says the memory engine is rebuilt from the WAL"

# ---- crashes right after a CHECKPOINT ------------------------------------------------------------
# Recovery starts at the checkpoint's redo pointer: the keys' own records are before it, so the
# states come from the checkpoint file the worker wrote after it.
round
remember before_checkpoint_crash
sql "CHECKPOINT"
crash "$primary_dir"
cluster_server_start
kept before_checkpoint_crash \
    "kill -9 right after CHECKPOINT: every key as it was, 0 units forgiven"
sql "CHECKPOINT"
round
spend 4 "t.key = 'reset'"
sql "SELECT ratelimit.reset('reset', 'memory')" >/dev/null
remember after_checkpoint
flushed
crash "$primary_dir"
cluster_server_start
kept after_checkpoint \
    "a CHECKPOINT, decisions and a reset after it, kill -9: every key as it was, 0 units forgiven"
crash "$primary_dir"
cluster_server_start
kept after_checkpoint "kill -9 again right after the restart: every key as it was"
is "$(wal_worker "$primary_dir")" "running" "the WAL worker runs again after the crashes"
# Every checkpoint waits for the worker, not only the first after it starts: three in a row,
# decisions between them, then kill -9 right after the last.
round
sql "CHECKPOINT"
spend 2 "t.key = 'reset'"
sql "CHECKPOINT"
round
sql "CHECKPOINT"
remember after_checkpoints
crash "$primary_dir"
cluster_server_start
kept after_checkpoints \
    "three CHECKPOINTs with decisions between them, kill -9 right after the last: every key as it was"

# ---- crashes after and under load -------------------------------------------------------------
# bench PREFIX CLIENTS SECONDS: pgbench clients consuming 1 unit a call on PREFIX1 .. PREFIX4
# (fixed_window, a limit no run reaches), in the background; the report goes to
# $CLUSTER_DIR/PREFIX.out.
bench() {
    printf '\\set k random(1, 4)\nSELECT ratelimit.consume(%s || :k, 1000000000, %s, p_engine => %s);\n' \
        "'$1'" "'30 days'" "'memory'" >"$CLUSTER_DIR/$1.sql"
    pgbench -n -c "$2" -j "$2" -T "$3" -f "$CLUSTER_DIR/$1.sql" >"$CLUSTER_DIR/$1.out" 2>&1 &
}
# answered PREFIX: the calls pgbench was answered.
answered() {
    grep -o 'actually processed: [0-9]*' "$CLUSTER_DIR/$1.out" | grep -o '[0-9]*$' || echo 0
}
# stored PREFIX: the units the memory engine holds as consumed on PREFIX1 .. PREFIX4.
stored() {
    sql "SELECT sum(1000000000 - d.remaining) FROM generate_series(1, 4) AS g,
                LATERAL ratelimit.peek('$1' || g, 1000000000, '30 days', p_engine => 'memory') AS d"
}
bench quiet- 8 2
wait $! || true
calls="$(answered quiet-)"
flushed
crash "$primary_dir"
cluster_server_start
units="$(stored quiet-)"
is "$units" "$calls" "8 clients for 2 s, then kill -9 once flushed: every call counted"
echo "# forgiven $((calls - units)) of $calls (kill -9 once the load's WAL was flushed)"

remember before_load
bench load- 8 30
bench_pid=$!
started="$(now_ms)"
sleep 1.5
sql "CHECKPOINT"
sleep 1.5
crash "$primary_dir"
crashed="$(now_ms)"
wait "$bench_pid" || true
cluster_server_start
calls="$(answered load-)"
units="$(stored load-)"
per_second=$((calls * 1000 / (crashed - started)))
echo "# forgiven $((calls - units)) of $calls (kill -9 under load; the clients made $per_second calls a second)"
ok "$([ "$calls" -gt 0 ] && [ "$units" -le $((calls + 8)) ] && [ "$units" -ge $((calls - per_second)) ] &&
    echo 0 || echo 1)" \
    "kill -9 under load: the replayed count ($units) is at most the $calls calls answered (+ 8 unanswered), at least those of all but the last second"
kept before_load \
    "the keys the load did not touch, after a CHECKPOINT during the load: as they were"

# ---- the WAL worker stays ------------------------------------------------------------------------
# Without it no checkpoint would wait for the keys: it stops only for the server's shutdown.
worker_pid() {
    pgrep -P "$(head -1 "$1/postmaster.pid")" -f 'ratelimit memory engine WAL' || true
}
round
remember before_terminate
old_worker="$(worker_pid "$primary_dir")"
sql "SELECT pg_terminate_backend($old_worker), pg_cancel_backend($old_worker)" >/dev/null
sleep 0.5
is "$(worker_pid "$primary_dir")" "$old_worker" \
    "pg_terminate_backend and pg_cancel_backend do not stop the WAL worker"
ok "$(grep -q "the memory engine's WAL worker does not stop for pg_terminate_backend" \
    "$CLUSTER_DIR/server.log"; echo $?)" "and it logs that it stayed, and how to stop it"
sql "CHECKPOINT"
crash "$primary_dir"
cluster_server_start
kept before_terminate \
    "pg_terminate_backend on the worker, CHECKPOINT, kill -9: every key as it was, 0 units forgiven"
is "$(sql "SELECT wal_worker_running FROM ratelimit.memory_stats")" "t" "memory_stats: the WAL worker runs"
is "$(sql "SELECT m[1] FROM regexp_matches(ratelimit.metrics(), 'ratelimit_memory_wal_worker_running ([0-9]+)') AS m")" \
    "1" "metrics(): ratelimit_memory_wal_worker_running 1"
# kill -9 of the worker alone: the postmaster restarts the server as after a crash.
round
remember before_worker_killed
kill -9 "$(worker_pid "$primary_dir")"
for _ in $(seq 1 100); do
    sql "SELECT 1" >/dev/null 2>&1 && [ "$(wal_worker "$primary_dir")" = running ] && break
    sleep 0.2
done
kept before_worker_killed "kill -9 of the worker alone: the server restarts, every key as it was"
is "$(wal_worker "$primary_dir")" "running" "and the worker runs again"

# ---- a clean restart, then a crash before the worker's first save -------------------------------
# After a clean stop the keys are in no WAL after the shutdown checkpoint: the file the stop saved
# is the store recovery starts from. The worker's first save is made to wait 5 s, and the crash
# comes in it.
round
remember before_clean_restart
cluster_server_stop
echo "ratelimit.memory_wal_first_save_delay = 5000" >>"$primary_dir/postgresql.conf"
cluster_server_start
crash "$primary_dir"
sed -i '/^ratelimit.memory_wal_first_save_delay = 5000$/d' "$primary_dir/postgresql.conf"
cluster_server_start
kept before_clean_restart \
    "a clean restart, then kill -9 before the worker's first save: every key as it was, 0 forgiven"

# ---- a transaction that waits for its decisions ----------------------------------------------------
# With ratelimit.memory_wal_commit_wait on, the deciding transaction commits only once its
# decisions' WAL is flushed and on the synchronous standbys: here a standby that never comes.
sql "ALTER SYSTEM SET synchronous_standby_names = 'nobody'" >/dev/null
sql "SELECT pg_reload_conf()" >/dev/null
sleep 0.5
is "$(timeout 20 psql -X -A -t -q -c "SELECT allowed FROM ratelimit.consume('wait-off', 10, '1 hour', p_engine => 'memory')")" \
    "t" "without ratelimit.memory_wal_commit_wait, a decision does not wait for a synchronous standby"
PGOPTIONS='-c ratelimit.memory_wal_commit_wait=on' psql -X -A -t -q \
    -c "SELECT allowed FROM ratelimit.consume('wait-on', 10, '1 hour', p_engine => 'memory')" \
    >"$CLUSTER_DIR/commit_wait.out" 2>&1 &
waiter=$!
waiting=0
for _ in $(seq 1 100); do
    waiting="$(sql "SELECT count(*) FROM pg_stat_activity WHERE wait_event = 'SyncRep' AND query LIKE '%wait-on%'")"
    [ "$waiting" = 1 ] && break
    sleep 0.1
done
is "$waiting" "1" "with it on, the deciding transaction waits for the synchronous standby before it commits"
sql "SELECT pg_cancel_backend(pid) FROM pg_stat_activity WHERE wait_event = 'SyncRep'" >/dev/null
wait "$waiter" || true
ok "$(grep -q 'canceling wait for synchronous replication' "$CLUSTER_DIR/commit_wait.out"; echo $?)" \
    "and a cancel ends the wait as it ends a commit's"
sql "ALTER SYSTEM RESET synchronous_standby_names" >/dev/null
sql "SELECT pg_reload_conf()" >/dev/null

# ---- keys that have expired are not carried ----------------------------------------------------
# A checkpoint's file holds the keys whose state differs from a fresh key's: 2,000 keys whose
# one-second windows have ended add nothing to it.
sql "CREATE EXTENSION IF NOT EXISTS pg_walinspect"
# carried [TYPE]: the keys the records of TYPE (SAVED: the checkpoint file) of one CHECKPOINT
# hold; the CHECKPOINT's WAL in bytes goes to $CLUSTER_DIR/checkpoint_wal.
carried() {
    local from to
    from="$(sql 'SELECT pg_current_wal_insert_lsn()')"
    sql "CHECKPOINT"
    to="$(sql 'SELECT pg_current_wal_insert_lsn()')"
    sql "SELECT pg_wal_lsn_diff('$to', '$from')" >"$CLUSTER_DIR/checkpoint_wal"
    sql "SELECT coalesce(sum(substring(description FROM 'keys ([0-9]+)')::integer), 0)
         FROM pg_get_wal_records_info('$from', '$to') WHERE record_type = '${1:-SAVED}'"
}
# A first CHECKPOINT waits for any pass already under way (the restart's): the next is the baseline.
carried >/dev/null
carried_before="$(carried)"
sql "SELECT count(*) FROM generate_series(1, 2000) AS g,
            LATERAL ratelimit.consume('short-' || g, 5, '1 second', p_engine => 'memory') AS d" >/dev/null
sleep 1.5
carried_after="$(carried)"
is "$carried_after" "$carried_before" \
    "a checkpoint's file carries the same $carried_before live keys, not the 2000 whose windows ended"

# ---- live keys cost the WAL nothing at a checkpoint ---------------------------------------------
sql "SELECT count(*) FROM generate_series(1, 20000) AS g,
            LATERAL ratelimit.consume('idle-' || g, 5, '30 days', p_engine => 'memory') AS d" >/dev/null
carried >/dev/null
idle_carried="$(carried)"
idle_wal="$(cat "$CLUSTER_DIR/checkpoint_wal")"
ok "$([ "$idle_carried" -ge 20000 ] && [ "$idle_wal" -lt 4096 ] && echo 0 || echo 1)" \
    "a CHECKPOINT with $idle_carried live keys: in the checkpoint file, and $idle_wal bytes of WAL (under 4 kB)"
is "$(carried SNAPSHOT)" "0" "and no key in the WAL's SNAPSHOT records"

# The file cannot be written (a directory in the temp file's place): the old file goes, and the
# keys go to the WAL after the redo pointer instead.
mkdir "$primary_dir/pg_stat/ratelimit_memory.checkpoint.tmp"
round
remember before_unwritable
fallback_keys="$(carried SNAPSHOT)"
ok "$([ "$fallback_keys" -ge 20000 ] && echo 0 || echo 1)" \
    "the file unwritable: a CHECKPOINT writes the $fallback_keys live keys to the WAL (SNAPSHOT)"
ok "$([ ! -e "$primary_dir/pg_stat/ratelimit_memory.checkpoint" ] && echo 0 || echo 1)" \
    "and the older checkpoint file is removed"
crash "$primary_dir"
rmdir "$primary_dir/pg_stat/ratelimit_memory.checkpoint.tmp"
cluster_server_start
kept before_unwritable "kill -9 after that CHECKPOINT: every key as it was, 0 units forgiven"
ok "$([ -e "$primary_dir/pg_stat/ratelimit_memory.checkpoint" ] && echo 0 || echo 1)" \
    "once it can be written again, the worker writes the checkpoint file"

# ---- the records in the WAL -----------------------------------------------------------------------
start_lsn="$(sql 'SELECT pg_current_wal_insert_lsn()')"
for i in $(seq 1 100); do
    echo "SELECT ratelimit.consume('record-$((i % 10))', 1000, '30 days', p_engine => 'memory');"
done | psql -X -q -v ON_ERROR_STOP=1 >/dev/null
decided_lsn="$(sql 'SELECT pg_current_wal_insert_lsn()')"
sql "CHECKPOINT"
end_lsn="$(sql 'SELECT pg_current_wal_flush_lsn()')"
records="SELECT * FROM pg_get_wal_records_info('$start_lsn', '$end_lsn')"
is "$(sql "SELECT record_type, count(*) FROM ($records) AS r WHERE resource_manager = 'ratelimit'
           AND record_type = 'STATES' GROUP BY 1")" "STATES 100" \
    "pg_walinspect: resource manager ratelimit, one STATES record per decision"
is "$(sql "SELECT string_agg(record_type, ' ') FROM ($records) AS r
           WHERE resource_manager = 'ratelimit' AND record_type <> 'STATES'")" "SAVED" \
    "and one SAVED record after the CHECKPOINT"
echo "# WAL per decision: $(sql "SELECT round(avg(record_length)) || ' bytes a STATES record of one key (' ||
       min(description) || '); ' || round(pg_wal_lsn_diff('$decided_lsn', '$start_lsn') / 100) ||
       ' bytes of WAL per decision in all'
       FROM ($records) AS r WHERE record_type = 'STATES'")"
echo "# SAVED: $(sql "SELECT record_length || ' bytes of WAL for a checkpoint file of ' || description
       FROM ($records) AS r WHERE record_type = 'SAVED'")"
ratelimit_records="$(sql "SELECT count(*) FROM ($records) AS r WHERE resource_manager = 'ratelimit'")"
# The first segment is named: found by itself, pg_waldump takes the segment size from whichever
# file the directory lists first, and a segment made ahead of use (none is recycled while the WAL
# is kept) has no header yet.
start_segment="$(sql "SELECT pg_walfile_name('$start_lsn')")"
waldump="$(cluster_as_postgres "$CLUSTER_BINDIR/pg_waldump" -p "$primary_dir/pg_wal" \
    -s "$start_lsn" -e "$end_lsn" "$start_segment" 2>&1 || true)"
first_record="$(grep -m1 'rmgr: custom209' <<<"$waldump" || true)"
echo "# pg_waldump: ${first_record:-no custom209 record; it ended with:}"
[ -n "$first_record" ] || tail -3 <<<"$waldump" | sed 's/^/#   /'
is "$(grep -c 'rmgr: custom209 ' <<<"$waldump" || true)" "$ratelimit_records" \
    "pg_waldump shows the same records as custom209 (it cannot load the extension)"
filtered="$(cluster_as_postgres "$CLUSTER_BINDIR/pg_waldump" --rmgr=custom209 -p "$primary_dir/pg_wal" \
    -s "$start_lsn" -e "$end_lsn" "$start_segment" 2>&1 || true)"
is "$(grep -c '^rmgr: custom209 ' <<<"$filtered" || true)" "$ratelimit_records" \
    "pg_waldump --rmgr=custom209 selects them"

# ---- a hot standby ------------------------------------------------------------------------------
standby_dir="$CLUSTER_DIR/standby"
stop_standby() {
    if [ -f "$standby_dir/postmaster.pid" ]; then
        cluster_as_postgres "$CLUSTER_BINDIR/pg_ctl" -D "$standby_dir" -m fast -w stop \
            >/dev/null 2>&1 || true
    fi
}
trap 'stop_standby; cluster_stop' EXIT
cluster_as_postgres "$CLUSTER_BINDIR/pg_basebackup" -D "$standby_dir" -R -X stream -c fast \
    -h "$PGHOST" -p "$PGPORT" -U postgres
chmod 700 "$standby_dir"
standby_server_start() {
    cluster_as_postgres "$CLUSTER_BINDIR/pg_ctl" -D "$standby_dir" -l "$CLUSTER_DIR/standby.log" \
        -w -t 60 start >/dev/null
}
# A port free when looked at can be taken before the standby binds it: then the next is tried.
for attempt in 1 2 3 4 5; do
    standby_port="$(cluster_free_port)"
    echo "port = $standby_port" >>"$standby_dir/postgresql.conf"
    if standby_server_start; then
        break
    fi
    if [ "$attempt" -eq 5 ] || ! grep -q 'could not bind\|could not create any TCP/IP sockets' \
        "$CLUSTER_DIR/standby.log"; then
        cat "$CLUSTER_DIR/standby.log" >&2
        exit 1
    fi
    sleep 1
done
standby_sql() {
    PGPORT=$standby_port sql "$1"
}
# replayed: waits (up to 60 s) until the standby has replayed all the WAL the primary has
# written so far; prints how many milliseconds that took.
replayed() {
    local target started
    target="$(sql 'SELECT pg_current_wal_insert_lsn()')"
    started="$(now_ms)"
    for _ in $(seq 1 1200); do
        if [ "$(standby_sql "SELECT pg_last_wal_replay_lsn() >= '$target'" 2>/dev/null)" = t ]; then
            echo $(($(now_ms) - started))
            return
        fi
        sleep 0.05
    done
    echo "not replayed after 60 s"
}
is "$(standby_sql 'SELECT pg_is_in_recovery()')" "t" "the standby is in recovery"
is "$(standby_sql 'SHOW ratelimit.memory_wal')" "on" "with ratelimit.memory_wal on"
remember before_standby
replayed >/dev/null
PGPORT=$standby_port kept before_standby \
    "the standby's peeks equal the primary's: every key from the base backup (its checkpoint file and WAL)"
round
remember standby_follows
replayed >/dev/null
PGPORT=$standby_port kept standby_follows "and follow the primary's decisions"
is "$(wal_worker "$standby_dir")" "not running" "no WAL worker on a standby"

# A standby's own decisions count there, are not logged, and the primary's next record of the
# key replaces them.
sql "SELECT ratelimit.consume('standby-own', 20, '30 days', 3, 'fixed_window', 'memory')" >/dev/null
replayed >/dev/null
is "$(standby_sql "SELECT remaining FROM ratelimit.peek('standby-own', 20, '30 days', p_engine => 'memory')")" \
    "17" "a key spent on the primary reads as spent on the standby"
is "$(standby_sql "SELECT allowed, remaining FROM ratelimit.consume('standby-own', 20, '30 days', 4, 'fixed_window', 'memory')")" \
    "t 13" "a consume on the standby is decided there, from the replayed count"
is "$(sql "SELECT remaining FROM ratelimit.peek('standby-own', 20, '30 days', p_engine => 'memory')")" \
    "17" "and is not logged: the primary does not see it"
sql "SELECT ratelimit.consume('standby-own', 20, '30 days', 1, 'fixed_window', 'memory')" >/dev/null
replayed >/dev/null
is "$(standby_sql "SELECT remaining FROM ratelimit.peek('standby-own', 20, '30 days', p_engine => 'memory')")" \
    "16" "the primary's next decision on the key replaces the standby's own count (16, not 12)"

# The standby restarts while the primary decides, and catches up.
sql "INSERT INTO wal_test.tracked SELECT 'during-restart-' || g, 'fixed_window', 1000000000
     FROM generate_series(1, 4) AS g"
bench during-restart- 2 4
bench_pid=$!
sleep 1
cluster_as_postgres "$CLUSTER_BINDIR/pg_ctl" -D "$standby_dir" -l "$CLUSTER_DIR/standby.log" \
    -m fast -w -t 60 restart >/dev/null
round
wait "$bench_pid" || true
remember after_standby_restart
replayed >/dev/null
PGPORT=$standby_port kept after_standby_restart \
    "a standby restarted while the primary decides catches up: its peeks equal the primary's"

# The standby's restartpoint moves its redo pointer past the keys' records: kill -9 of it then
# rebuilds its store from its own checkpoint file, written when it replayed the primary's SAVED.
remember before_restartpoint
sql "CHECKPOINT"
replayed >/dev/null
standby_sql "CHECKPOINT"
crash "$standby_dir"
standby_server_start
replayed >/dev/null
PGPORT=$standby_port kept before_restartpoint \
    "a CHECKPOINT, the standby's restartpoint, kill -9 of the standby: its peeks equal the primary's"

# A standby with a smaller store than the primary's says so, and counts the keys it cannot hold.
small_dir="$CLUSTER_DIR/small_standby"
cluster_as_postgres "$CLUSTER_BINDIR/pg_basebackup" -D "$small_dir" -R -X stream -c fast \
    -h "$PGHOST" -p "$PGPORT" -U postgres
chmod 700 "$small_dir"
echo "ratelimit.memory_capacity = 4096" >>"$small_dir/postgresql.conf"
for attempt in 1 2 3 4 5; do
    small_port="$(cluster_free_port)"
    echo "port = $small_port" >>"$small_dir/postgresql.conf"
    if cluster_as_postgres "$CLUSTER_BINDIR/pg_ctl" -D "$small_dir" -l "$CLUSTER_DIR/small.log" \
        -w -t 60 start >/dev/null; then
        break
    fi
    [ "$attempt" -lt 5 ] || { cat "$CLUSTER_DIR/small.log" >&2; exit 1; }
    sleep 1
done
trap 'cluster_as_postgres "$CLUSTER_BINDIR/pg_ctl" -D "$small_dir" -m fast -w stop >/dev/null 2>&1 || true; stop_standby; cluster_stop' EXIT
sql "SELECT count(*) FROM generate_series(1, 6000) AS g,
            LATERAL ratelimit.consume('wide-' || g, 5, '30 days', p_engine => 'memory') AS d" >/dev/null
target="$(sql 'SELECT pg_current_wal_insert_lsn()')"
for _ in $(seq 1 600); do
    [ "$(PGPORT=$small_port sql "SELECT pg_last_wal_replay_lsn() >= '$target'")" = t ] && break
    sleep 0.1
done
ok "$([ "$(PGPORT=$small_port sql 'SELECT replay_unplaced FROM ratelimit.memory_stats')" -gt 0 ] &&
    echo 0 || echo 1)" "a standby of 4,096 keys replaying 6,000: memory_stats counts the keys it could not hold"
ok "$(grep -q "the memory engine's store has no room for a replayed key" "$CLUSTER_DIR/small.log"; echo $?)" \
    "and its log says its store is smaller than the primary's"
is "$(PGPORT=$small_port sql 'SELECT wal_worker_running IS NOT NULL FROM ratelimit.memory_stats')" "t" \
    "memory_stats on a standby: the setting is on"
cluster_as_postgres "$CLUSTER_BINDIR/pg_ctl" -D "$small_dir" -m fast -w stop >/dev/null
trap 'stop_standby; cluster_stop' EXIT
is "$(sql 'SELECT replay_unplaced FROM ratelimit.memory_stats')" "0" "the primary replays nothing: 0"

# The pgTAP files that use the memory engine, with the standby replaying them.
sql "CREATE DATABASE ratelimit_pgtap" >/dev/null
for file in memory_engine batch_calls penalties drop_ins_on_engines; do
    ok "$(PGDATABASE=ratelimit_pgtap pg_prove -Q "test/pgtap/$file.sql" >"$CLUSTER_DIR/pgtap.out" 2>&1
        echo $?)" "test/pgtap/$file.sql passes with memory_wal on"
    grep -v '^All tests successful\|^Files=\|^Result: PASS' "$CLUSTER_DIR/pgtap.out" | sed 's/^/#   /' || true
done
case "$(replayed)" in
*[!0-9]*) ok 1 "the standby replays the pgTAP files' records" ;;
*) ok 0 "the standby replays the pgTAP files' records" ;;
esac

# ---- a failover ---------------------------------------------------------------------------------
sql "INSERT INTO wal_test.tracked SELECT 'failover-' || g, 'fixed_window', 1000000000
     FROM generate_series(1, 4) AS g"
bench failover- 4 2
bench_pid=$!
round
wait "$bench_pid" || true
echo "# replication lag: $(replayed) ms from the primary's last decision to its replay on the standby"
remember before_failover
replayed >/dev/null
cluster_server_stop immediate
cluster_as_postgres "$CLUSTER_BINDIR/pg_ctl" -D "$standby_dir" -w -t 60 promote >/dev/null
is "$(standby_sql 'SELECT pg_is_in_recovery()')" "f" "the standby is promoted (the primary stopped with -m immediate)"
PGPORT=$standby_port kept before_failover \
    "every key the primary spent is still spent on the promoted server"
is "$(wal_worker "$standby_dir")" "running" "the promoted server runs the WAL worker"
crash "$standby_dir"
standby_server_start
PGPORT=$standby_port kept before_failover "kill -9 of the promoted server right after: every key as it was"
PGPORT=$standby_port round
PGPORT=$standby_port remember after_promotion
PGPORT=$standby_port flushed
crash "$standby_dir"
standby_server_start
PGPORT=$standby_port kept after_promotion \
    "the promoted server logs its own decisions: kill -9 of it keeps them"

# A server that replays the records with the setting off ignores them, and says so.
PGPORT=$standby_port sql "SELECT ratelimit.consume('replayed-off', 20, '30 days', 5, 'fixed_window', 'memory')" >/dev/null
PGPORT=$standby_port flushed
crash "$standby_dir"
echo "ratelimit.memory_wal = off" >>"$standby_dir/postgresql.conf"
standby_server_start
is "$(PGPORT=$standby_port sql 'SHOW ratelimit.memory_wal')" "off" "restarted after a crash with ratelimit.memory_wal off"
warned="$(grep -q "the memory engine's WAL records are ignored: ratelimit.memory_wal is off" \
    "$CLUSTER_DIR/standby.log"; echo $?)"
ok "$warned" "its recovery logs that the memory engine's records are ignored"
[ "$warned" = 0 ] || tail -20 "$CLUSTER_DIR/standby.log" | sed 's/^/#   /'
is "$(PGPORT=$standby_port sql "SELECT remaining FROM ratelimit.peek('replayed-off', 20, '30 days', p_engine => 'memory')")" \
    "20" "and its memory engine starts empty, as without the setting"
is "$(grep -c 'PANIC' "$CLUSTER_DIR/server.log" "$CLUSTER_DIR/standby.log" | awk -F: '{ n += $2 } END { print n }')" \
    "0" "no PANIC in the servers' logs"
grep -h -B3 -A3 'PANIC' "$CLUSTER_DIR/server.log" "$CLUSTER_DIR/standby.log" | sed 's/^/#   /' || true
stop_standby
cluster_stop
trap cluster_stop EXIT

echo "# a server with no worker slot for the WAL worker"
cluster_start "shared_preload_libraries = 'ratelimit'" "ratelimit.memory_wal = on" "fsync = off"
cluster_server_stop
echo "max_worker_processes = 0" >>"$CLUSTER_DIR/data/postgresql.conf"
started="$(cluster_as_postgres "$CLUSTER_BINDIR/pg_ctl" -D "$CLUSTER_DIR/data" -l "$CLUSTER_DIR/noslot.log" \
    -w -t 30 start >/dev/null 2>&1; echo $?)"
ok "$([ "$started" != 0 ] && echo 0 || echo 1)" "the server does not start"
ok "$(grep -q 'ratelimit.memory_wal = on needs a background worker, and max_worker_processes (0) has no slot left for it' \
    "$CLUSTER_DIR/noslot.log"; echo $?)" "its log names ratelimit.memory_wal and max_worker_processes"
sed -i '/^max_worker_processes = 0$/d' "$CLUSTER_DIR/data/postgresql.conf"
cluster_server_start
cluster_stop

echo "# a server without the library preloaded"
cluster_start "ratelimit.memory_wal = on" "fsync = off"
# Loading the library removes the placeholder with a WARNING, which is not what this checks.
sql "SET client_min_messages = error; CREATE EXTENSION ratelimit"
error="$(psql -X -A -t -q -c "LOAD 'ratelimit'" -c "SHOW ratelimit.memory_wal" 2>&1 || true)"
ok "$(grep -q 'unrecognized configuration parameter "ratelimit.memory_wal"' <<<"$error"; echo $?)" \
    "ratelimit.memory_wal needs the library preloaded: loaded later, it is no setting"
error="$(psql -X -A -t -q -c "SELECT ratelimit.consume('k', 1, '1 hour', p_engine => 'memory')" 2>&1 || true)"
ok "$(grep -q 'p_engine "memory" is not available' <<<"$error"; echo $?)" \
    "and the memory engine is not available"
cluster_stop

echo "1..$checks"
if [ "$failures" -gt 0 ]; then
    echo "# $failures of $checks checks failed"
    exit 1
fi
echo "# all $checks checks passed"
