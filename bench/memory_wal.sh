#!/usr/bin/env bash
# Benchmark of the memory engine written to the WAL (ratelimit.memory_wal): the same server
# started twice, without and with the setting (it is read at start), each case right after a
# SELECT 1 floor of its own: ratelimit.consume on the memory engine on a hot key and over 100,000
# keys, consume_many of 100 keys, and, with the WAL on, the logged table engine on the hot key;
# the WAL each memory decision writes, from pg_current_wal_insert_lsn() around a measured run.
# 8 clients, one pass; with the WAL on, also the hot key with ratelimit.memory_wal_commit_wait on
# (each transaction waits for its decision's flush). Then, on a server of its own with the
# setting on: the WAL one CHECKPOINT writes, the checkpoint file the worker writes for it, and
# the CHECKPOINT's duration, with CHECKPOINT_KEYS live keys, and again once as many keys whose
# windows have ended are added; then single calls' latency (median and p99, 8 clients over
# 100,000 of the live keys) outside any checkpoint, and while CHECKPOINTs run back to back (the
# store being saved most of the time).
#
# Run as root from the repository root:  bash bench/memory_wal.sh
#   BENCH_SECONDS         measured seconds per case (default 5)
#   BENCH_WARMUP_SECONDS  warm-up seconds per case, not measured (default 2)
#   BENCH_NO_BUILD        set: measure the installed extension (bench/lib.sh)
#   CHECKPOINT_KEYS       live keys, and expired keys, of the checkpoint case (default 1000000)
# Writes bench/results/memory_wal.md; every pgbench output is kept in bench/results/memory_wal/.
set -euo pipefail
cd "$(dirname "$0")/.."
source bench/lib.sh

started_at="$(date +%s)"
load_before="$(cut -d ' ' -f 1-3 /proc/loadavg)"

bench_init memory_wal
seconds="${BENCH_SECONDS:-5}"
warmup_seconds="${BENCH_WARMUP_SECONDS:-2}"
bench_command bench/memory_wal.sh

# Every call is allowed (10^9 per 365 days), so that each case measures a call that counts.
limit=1000000000
period="365 days"
memory_capacity=200000
pg_host=127.0.0.1
jobs=2

# start_server WAL: the server with ratelimit.memory_wal = WAL (off or on).
start_server() {
    cluster_start "shared_buffers = 512MB" "max_wal_size = 4GB" \
        "shared_preload_libraries = 'ratelimit'" "ratelimit.memory_capacity = $memory_capacity" \
        "ratelimit.memory_wal = $1"
}

# measure NAME SCRIPT [pgbench -D options]: a CHECKPOINT, a warm-up and the measured run, with
# the WAL written during the measured run in wal_bytes[NAME].
declare -A wal_bytes decisions
measure() {
    local name="$1" script="$2" before after
    shift 2
    pgbench_options=(-n -M prepared -h "$pg_host" -c "$clients" -j "$jobs" "$@")
    echo "memory_wal: $name (${warmup_seconds}s warm-up, ${seconds}s measured)"
    psql -X -q -d "$database" -c "CHECKPOINT"
    pgbench_run "$name-warmup" "$script" "$warmup_seconds"
    before="$(psql -X -A -t -d "$database" -c "SELECT pg_current_wal_insert_lsn()")"
    pgbench_run "$name" "$script" "$seconds"
    after="$(psql -X -A -t -d "$database" -c "SELECT pg_current_wal_insert_lsn()")"
    tps[$name]="$run_tps"
    decisions[$name]="$run_transactions"
    wal_bytes[$name]="$(psql -X -A -t -d "$database" -c "SELECT pg_wal_lsn_diff('$after', '$before')")"
}

# populate ENGINE: the first call of every key of the 100k set on ENGINE.
populate() {
    local first allowed
    for first in 0 10000 20000 30000 40000 50000 60000 70000 80000 90000; do
        allowed="$(psql -X -A -t -d "$database" -v engine="$1" -v first="$first" \
            -v limit="$limit" -v period="$period" -f bench/memory_wal/populate.sql)"
        if [ "$allowed" -ne 10000 ]; then
            echo "memory_wal: populating $1 allowed $allowed of 10000" >&2
            exit 1
        fi
    done
}

# pass WAL: every case on a server with ratelimit.memory_wal = WAL; names end in -WAL.
pass() {
    local wal="$1" variables=(-D "limit=$limit" -D "period=$period")
    start_server "$wal"
    psql -X -q -v ON_ERROR_STOP=1 -c "CREATE DATABASE $database" >/dev/null
    psql -X -q -v ON_ERROR_STOP=1 -d "$database" -f bench/memory_wal/setup.sql >/dev/null
    server_version="$(psql -X -A -t -d "$database" -c "SHOW server_version")"
    populate memory
    measure "select1-hot-$wal" select1.sql
    measure "memory-hot-$wal" consume.sql "${variables[@]}" -D keys=1 -D engine=memory
    measure "select1-100k-$wal" select1.sql
    measure "memory-100k-$wal" consume.sql "${variables[@]}" -D keys=100000 -D engine=memory
    measure "select1-many-$wal" select1.sql
    measure "memory-many100-$wal" many.sql "${variables[@]}" -D n=100 -D engine=memory
    if [ "$wal" = on ]; then
        measure "select1-table-$wal" select1.sql
        measure "table-hot-$wal" consume.sql "${variables[@]}" -D keys=1 -D engine=table
        # Each transaction waits for its decision's flush (ratelimit.memory_wal_commit_wait).
        export PGOPTIONS="-c ratelimit.memory_wal_commit_wait=on"
        measure "memory-hot-wait-$wal" consume.sql "${variables[@]}" -D keys=1 -D engine=memory
        unset PGOPTIONS
    fi
    psql -X -q -c "DROP DATABASE $database" >/dev/null
    cluster_stop
}

# checkpoint_keys PREFIX PERIOD [CLOCK]: CHECKPOINT_KEYS keys PREFIX0 .. on the memory engine,
# with the test clock at CLOCK when given.
checkpoint_keys() {
    local first allowed
    for ((first = 0; first < checkpoint_keys_count; first += 100000)); do
        allowed="$(PGOPTIONS="${3:+-c ratelimit.test_clock=$3}" psql -X -A -t -d "$database" \
            -v prefix="$1" -v first="$first" -v period="$2" -f bench/memory_wal/checkpoint_keys.sql)"
        if [ "$allowed" -ne 100000 ]; then
            echo "memory_wal: checkpoint keys $1 allowed $allowed of 100000" >&2
            exit 1
        fi
    done
}
# checkpoint_wal: the WAL bytes one CHECKPOINT writes, the keys and bytes of the checkpoint file
# its SAVED record describes (keys in the WAL's SNAPSHOT records instead, if any), and how long
# the CHECKPOINT took in milliseconds.
checkpoint_wal() {
    local before after started
    before="$(psql -X -A -t -d "$database" -c "SELECT pg_current_wal_insert_lsn()")"
    started="$(date +%s%N)"
    psql -X -q -d "$database" -c "CHECKPOINT"
    echo "$((($(date +%s%N) - started) / 1000000))" >"$logs/checkpoint_ms"
    after="$(psql -X -A -t -d "$database" -c "SELECT pg_current_wal_flush_lsn()")"
    psql -X -A -t -F ' ' -d "$database" -c "SELECT pg_wal_lsn_diff('$after', '$before'),
        (SELECT coalesce(sum(substring(description FROM 'keys ([0-9]+)')::bigint), 0)
         FROM pg_get_wal_records_info('$before', '$after') WHERE record_type IN ('SAVED', 'SNAPSHOT')),
        (SELECT coalesce(sum(substring(description FROM 'bytes ([0-9]+)')::bigint), 0)
         FROM pg_get_wal_records_info('$before', '$after') WHERE record_type = 'SAVED'),
        $(cat "$logs/checkpoint_ms")"
}
# latency NAME: single calls, 8 clients over 100,000 of the live keys, for BENCH_SECONDS; each
# call's latency logged by pgbench; "MEDIAN P99 CALLS" in microseconds to latency_of[NAME].
declare -A latency_of
latency() {
    local name="$1"
    rm -f "$logs/$name".*
    pgbench -n -M prepared -h "$pg_host" -c "$clients" -j "$jobs" -T "$seconds" -l \
        --log-prefix="$logs/$name" -D keys=100000 -D limit=1000 -D "period=365 days" \
        -D engine=memory -f bench/memory_wal/consume_live.sql "$database" >"$logs/$name.out" 2>&1
    latency_of[$name]="$(cat "$logs/$name".[0-9]* | awk '{ print $3 }' | sort -n |
        awk '{ v[NR] = $1 } END { printf "%d %d %d", v[int(NR * 0.5) + 1], v[int(NR * 0.99) + 1], NR }')"
}
# The pass over CHECKPOINT_KEYS live keys, then with as many expired ones beside them.
checkpoint_pass() {
    checkpoint_keys_count="${CHECKPOINT_KEYS:-1000000}"
    cluster_start "shared_buffers = 512MB" "max_wal_size = 8GB" \
        "shared_preload_libraries = 'ratelimit'" \
        "ratelimit.memory_capacity = $((checkpoint_keys_count * 2 + 200000))" \
        "ratelimit.memory_wal = on"
    psql -X -q -v ON_ERROR_STOP=1 -c "CREATE DATABASE $database" >/dev/null
    psql -X -q -v ON_ERROR_STOP=1 -d "$database" -c "CREATE EXTENSION ratelimit" \
        -c "CREATE EXTENSION pg_walinspect" >/dev/null
    echo "memory_wal: a CHECKPOINT with $checkpoint_keys_count live keys"
    checkpoint_keys live- "365 days"
    read -r checkpoint_live_bytes checkpoint_live_keys checkpoint_live_file checkpoint_live_ms \
        <<<"$(checkpoint_wal)"
    echo "memory_wal: and with $checkpoint_keys_count expired keys beside them"
    checkpoint_keys expired- "1 second" "2020-01-01T00:00:00+00"
    read -r checkpoint_both_bytes checkpoint_both_keys checkpoint_both_file checkpoint_both_ms \
        <<<"$(checkpoint_wal)"
    echo "memory_wal: single calls' latency outside a checkpoint, then during back-to-back CHECKPOINTs"
    latency outside
    (
        # CHECKPOINTs back to back for the measured run; the share of it they took is kept.
        busy=0 ended=$(($(date +%s%N) + seconds * 1000000000))
        while [ "$(date +%s%N)" -lt "$ended" ]; do
            begun="$(date +%s%N)"
            psql -X -q -d "$database" -c "CHECKPOINT"
            busy=$((busy + $(date +%s%N) - begun))
        done
        # psql's own start counts in busy: the share is capped at the whole run.
        share=$((busy / (seconds * 10000000)))
        echo $((share > 100 ? 100 : share)) >"$logs/checkpoint_share"
    ) &
    checkpoints=$!
    latency during
    wait "$checkpoints"
    psql -X -q -c "DROP DATABASE $database" >/dev/null
    cluster_stop
}

bench_build
rm -rf "$logs"
mkdir -p "$logs"
pass off
pass on
checkpoint_pass

# of NAME FLOOR: the case's TPS as a ratio to its own floor.
of() {
    ratio "${tps[$1]}" "${tps[$2]}" 3
}
# decisions_of NAME FLOOR: a batch case's decisions per second (100 a call) against its floor.
decisions_of() {
    awk -v t="${tps[$1]}" -v f="${tps[$2]}" 'BEGIN { printf "%.2f", t * 100 / f }'
}
per_decision() {
    local name="$1" per_call="${2:-1}"
    awk -v b="${wal_bytes[$name]}" -v n="${decisions[$name]}" -v k="$per_call" \
        'BEGIN { printf "%.0f", b / (n * k) }'
}
table="$(
    echo "| case | WAL off: TPS (ratio to its SELECT 1) | WAL on: TPS (ratio to its SELECT 1) | on / off | WAL bytes per decision (on) |"
    echo "|---|---:|---:|---:|---:|"
    for c in hot 100k; do
        printf '| memory consume, %s | %.0f (%s) | %.0f (%s) | %s | %s |\n' "$c" \
            "${tps[memory-$c-off]}" "$(of "memory-$c-off" "select1-$c-off")" \
            "${tps[memory-$c-on]}" "$(of "memory-$c-on" "select1-$c-on")" \
            "$(ratio "$(of "memory-$c-on" "select1-$c-on")" "$(of "memory-$c-off" "select1-$c-off")" 3)" \
            "$(per_decision "memory-$c-on")"
    done
    printf '| memory consume_many of 100 keys (decisions/s) | %.0f (%s) | %.0f (%s) | %s | %s |\n' \
        "$(awk -v t="${tps[memory-many100-off]}" 'BEGIN { print t * 100 }')" \
        "$(decisions_of memory-many100-off select1-many-off)" \
        "$(awk -v t="${tps[memory-many100-on]}" 'BEGIN { print t * 100 }')" \
        "$(decisions_of memory-many100-on select1-many-on)" \
        "$(ratio "$(of memory-many100-on select1-many-on)" "$(of memory-many100-off select1-many-off)" 3)" \
        "$(per_decision memory-many100-on 100)"
    printf '| table consume, hot (WAL on server) | — | %.0f (%s) | memory on / table: %s | %s |\n' \
        "${tps[table-hot-on]}" "$(of table-hot-on select1-table-on)" \
        "$(ratio "${tps[memory-hot-on]}" "${tps[table-hot-on]}" 1)" "$(per_decision table-hot-on)"
    printf '| memory consume, hot, memory_wal_commit_wait on | — | %.0f (%s) | / table: %s | %s |\n' \
        "${tps[memory-hot-wait-on]}" "$(of memory-hot-wait-on select1-table-on)" \
        "$(ratio "${tps[memory-hot-wait-on]}" "${tps[table-hot-on]}" 2)" "$(per_decision memory-hot-wait-on)"
)"
checkpoint_table="$(
    echo "| store | WAL one CHECKPOINT wrote | keys in the checkpoint file | the file | bytes per key | the CHECKPOINT took |"
    echo "|---|---:|---:|---:|---:|---:|"
    for c in live both; do
        bytes_var="checkpoint_${c}_bytes" keys_var="checkpoint_${c}_keys"
        file_var="checkpoint_${c}_file" ms_var="checkpoint_${c}_ms"
        printf '| %s | %s bytes | %s | %s MB | %s | %s ms |\n' \
            "$([ "$c" = live ] && echo "$checkpoint_keys_count live keys" ||
                echo "$checkpoint_keys_count live + $checkpoint_keys_count expired keys")" \
            "${!bytes_var}" "${!keys_var}" \
            "$(awk -v b="${!file_var}" 'BEGIN { printf "%.1f", b / 1048576 }')" \
            "$(awk -v b="${!file_var}" -v k="${!keys_var}" 'BEGIN { printf "%.0f", (k > 0 ? b / k : 0) }')" \
            "${!ms_var}"
    done
)"
latency_table="$(
    echo "| single calls (8 clients, 100,000 live keys) | calls | median | p99 |"
    echo "|---|---:|---:|---:|"
    for c in outside during; do
        read -r median p99 calls <<<"${latency_of[$c]}"
        printf '| %s | %s | %s µs | %s µs |\n' \
            "$([ "$c" = outside ] && echo "outside any checkpoint" ||
                echo "CHECKPOINTs back to back (running $(cat "$logs/checkpoint_share")% of the time)")" \
            "$calls" "$median" "$p99"
    done
)"
echo
echo "$table"
echo
echo "$checkpoint_table"
echo
echo "$latency_table"
mkdir -p bench/results
{
    echo "# Memory engine with and without ratelimit.memory_wal"
    echo
    echo "- Date: $(date -u '+%Y-%m-%d %H:%M:%S UTC'); load before the pass: $load_before;" \
        "pass took $(($(date +%s) - started_at)) s"
    echo "- PostgreSQL: $server_version; nproc: $(nproc) (pgbench and the server share these CPUs)"
    echo "- Command: \`$command\`"
    echo "- Each case: \`pgbench -n -M prepared -h 127.0.0.1 -c $clients -j $jobs -T $seconds\`" \
        "after a ${warmup_seconds}s warm-up and a CHECKPOINT, right after a SELECT 1 floor of its own"
    echo "- Server: shared_buffers = 512MB, max_wal_size = 4GB, fsync and synchronous_commit on," \
        "ratelimit.memory_capacity = $memory_capacity; the same server started with" \
        "ratelimit.memory_wal off, then on; the 100k keys populated first"
    echo "- WAL bytes per decision: pg_current_wal_insert_lsn() before and after the measured run," \
        "over its decisions (the record's header and the key's 80-byte state, plus the WAL's page" \
        "headers and anything else the server wrote meanwhile)"
    echo
    echo "$table"
    echo
    echo "One CHECKPOINT, on a server of its own (ratelimit.memory_wal = on,"
    echo "memory_capacity = $((checkpoint_keys_count * 2 + 200000))): the WAL between"
    echo "pg_current_wal_insert_lsn() before it and pg_current_wal_flush_lsn() after it, the keys and"
    echo "bytes of the checkpoint file its SAVED record describes (pg_walinspect), and the time the"
    echo "CHECKPOINT command took. The expired keys were made under a test clock in 2020, with"
    echo "one-second windows."
    echo
    echo "$checkpoint_table"
    echo
    echo "Single calls on that server (2M keys in the store), each call's latency from pgbench -l:"
    echo "${seconds}s with no checkpoint, then ${seconds}s while CHECKPOINTs run back to back."
    echo
    echo "$latency_table"
} >bench/results/memory_wal.md
echo "memory_wal: written to bench/results/memory_wal.md"
