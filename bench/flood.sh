#!/usr/bin/env bash
# Flood benchmark: one caller sends a stream of distinct keys while pgbench measures an
# unrelated hot key.
#  - memory engine (ratelimit.memory_capacity = 100,000, ratelimit.memory_when_full = deny, the
#    default): FLOOD_KEYS distinct keys (default 10,000,000), sent in server-side batches.
#    Reported: memory_stats before and after and sampled after every batch (entries never above
#    capacity, evictions, refusals, shared_bytes the same throughout: the memory is bounded);
#    the live keys kept (keys called once, and spent keys, before the flood, that must still
#    count after it); the hot key's average and p99 latency quiet, next to
#    one busy backend that makes no decision (the control) and under the flood, and their
#    ratios (target <= 2x, reported, not asserted); whether the hot key was ever evicted: its
#    remaining must fall by exactly one per call through the flood.
#  - table and unlogged engines: FLOOD_TABLE_KEYS keys (default 1,000,000: a row each, far
#    slower than a memory slot), the same hot-key latencies, the table growing, then
#    ratelimit.cleanup_key_state() with the test clock past the windows bringing the rows back
#    to the hot key's alone, VACUUM, and more floods of the same size (new keys) that reuse
#    the space: the size stays bounded.
# A benchmark, not a test: it fails only when the benchmark is broken (a pgbench or psql error,
# a failed transaction), never on a figure. Writes bench/results/flood.md; every pgbench
# output and per-transaction log, and every batch's figures, stay in bench/results/flood/.
#
# Run as root from the repository root, with the extension installed (it measures the
# installed extension; it does not build):  bash bench/flood.sh
#   FLOOD_KEYS              keys of the memory engine's flood (default 10000000)
#   FLOOD_TABLE_KEYS        keys of each table-engine flood (default 1000000)
#   FLOOD_BATCH             keys per statement on the memory engine (default 100000)
#   FLOOD_TABLE_BATCH       keys per statement on a table engine (default 1000; see below)
#   FLOOD_TABLE_ROUNDS      table-engine rounds of flood, cleanup, VACUUM (default 4)
#   FLOOD_BASELINE_SECONDS  the hot key's quiet run, and the control's length (default 15)
#   FLOOD_ENGINES           engines to flood (default "memory table unlogged")
set -euo pipefail
cd "$(dirname "$0")/.."
source bench/major.sh
source scripts/cluster.sh

started_at="$(date +%s)"
load_before="$(cut -d ' ' -f 1-3 /proc/loadavg)"

number() {
    local name="$1" value="$2"
    if ! [[ "$value" =~ ^[1-9][0-9]*$ ]]; then
        echo "flood: $name must be a positive integer (got \"$value\")" >&2
        exit 1
    fi
    echo "$value"
}
flood_keys="$(number FLOOD_KEYS "${FLOOD_KEYS:-10000000}")"
table_keys="$(number FLOOD_TABLE_KEYS "${FLOOD_TABLE_KEYS:-1000000}")"
batch="$(number FLOOD_BATCH "${FLOOD_BATCH:-100000}")"
# A table engine writes a row and an index entry per key, far slower than a memory slot: its
# batches are one transaction each, of 1,000 keys, so that a round's progress is committed as
# it goes.
table_batch="$(number FLOOD_TABLE_BATCH "${FLOOD_TABLE_BATCH:-1000}")"
table_rounds="$(number FLOOD_TABLE_ROUNDS "${FLOOD_TABLE_ROUNDS:-4}")"
baseline_seconds="$(number FLOOD_BASELINE_SECONDS "${FLOOD_BASELINE_SECONDS:-15}")"
engines=()
for engine in ${FLOOD_ENGINES:-memory table unlogged}; do
    case "$engine" in
        memory | table | unlogged) engines+=("$engine") ;;
        *)
            echo "flood: FLOOD_ENGINES: unknown engine \"$engine\" (memory, table, unlogged)" >&2
            exit 1
            ;;
    esac
done
command=""
for variable in FLOOD_KEYS FLOOD_TABLE_KEYS FLOOD_BATCH FLOOD_TABLE_BATCH FLOOD_TABLE_ROUNDS \
    FLOOD_BASELINE_SECONDS FLOOD_ENGINES; do
    if [ -n "${!variable:-}" ]; then
        command+="$variable=\"${!variable}\" "
    fi
done
command+="bash bench/flood.sh"

capacity=100000
hot_clients=4
hot_jobs=2
hot_limit=1000000000
warmup_seconds=3
# The hot key is measured in runs of this many seconds, one after the other, until the flood
# ends: the transactions that completed while it ran are the ones counted as "under flood".
chunk_seconds=5
# Each flood key: 10 per minute, fixed window, so every first call is allowed and the key's
# state expires at the end of its minute.
flood_limit=10
flood_period="1 minute"
database=ratelimit_flood
logs=bench/results/flood

cluster_start "shared_buffers = 512MB" "max_wal_size = 4GB" \
    "shared_preload_libraries = 'ratelimit'" "ratelimit.memory_capacity = $capacity"
rm -rf "$logs"
mkdir -p "$logs"
psql -X -q -v ON_ERROR_STOP=1 -c "CREATE DATABASE $database" >/dev/null
psql -X -q -v ON_ERROR_STOP=1 -d "$database" -f bench/flood/setup.sql >/dev/null
server_version="$(psql -X -A -t -d "$database" -c "SHOW server_version")"
extension_version="$(psql -X -A -t -d "$database" -c \
    "SELECT extversion FROM pg_extension WHERE extname = 'ratelimit'")"

q() {
    psql -X -A -t -q -F ' ' -v ON_ERROR_STOP=1 -d "$database" -c "$1"
}

# --- the hot key -----------------------------------------------------------------------------

declare -A hot_calls  # engine -> every hot call made on it so far

# hot_run NAME ENGINE SECONDS: pgbench on the hot key, 4 clients, with a per-transaction log
# (latency and completion time of every call). Sets run_transactions.
hot_run() {
    local name="$1" engine="$2" seconds="$3" log="$logs/$1.log"
    if ! pgbench -n -M prepared -c "$hot_clients" -j "$hot_jobs" -T "$seconds" -l \
        --log-prefix="$logs/$name" -D "engine=$engine" -f bench/flood/hot.sql "$database" \
        >"$log" 2>&1 || grep -q "aborted" "$log" ||
        grep -q "^number of failed transactions: [1-9]" "$log"; then
        echo "flood: pgbench run $name failed:" >&2
        cat "$log" >&2
        exit 1
    fi
    run_transactions="$(sed -n 's/^number of transactions actually processed: \([0-9]*\).*/\1/p' "$log")"
    hot_calls[$engine]=$((${hot_calls[$engine]:-0} + run_transactions))
}

# latency NAME_GLOB [FROM TO]: "transactions average_ms p99_ms max_ms tps" of the calls logged
# by the runs matching NAME_GLOB, only those that completed between FROM and TO (epoch seconds)
# when given. pgbench's log line: client transaction latency_us script epoch_s epoch_us.
latency() {
    local glob="$1" from="${2:-}" to="${3:-}"
    # shellcheck disable=SC2086
    cat $logs/$glob.[0-9]* |
        awk -v from="$from" -v to="$to" '{
            t = $5 + $6 / 1000000
            if (from == "" || (t >= from && t <= to)) {
                printf "%d %.6f\n", $3, t
            }
        }' |
        sort -n -k 1,1 |
        awk -v from="$from" -v to="$to" '{
            v[NR] = $1; sum += $1
            if (NR == 1 || $2 < first) first = $2
            if (NR == 1 || $2 > last) last = $2
        } END {
            if (NR == 0) { print "0 - - - -"; exit }
            i = int(NR * 0.99); if (i < NR * 0.99) i++; if (i < 1) i = 1
            span = (from == "") ? last - first : to - from
            printf "%d %.3f %.3f %.3f %.0f\n", NR, sum / NR / 1000, v[i] / 1000, v[NR] / 1000,
                (span > 0 ? NR / span : 0)
        }'
}

hot_remaining() {
    q "SELECT remaining FROM ratelimit.peek('hot', $hot_limit, '1 hour', 1,
                                            p_algorithm => 'rolling_window', p_engine => '$1')"
}

# alongside NAME ENGINE COMMAND...: runs COMMAND in the background (its output in
# $logs/NAME.out) and the hot key in runs of chunk_seconds until it ends. Sets
# alongside_from/alongside_to (epoch seconds), alongside_calls (hot calls made meanwhile).
alongside() {
    local name="$1" engine="$2"
    shift 2
    (
        date +%s.%N >"$logs/$name.from"
        status=0
        "$@" >"$logs/$name.out" 2>&1 || status=$?
        date +%s.%N >"$logs/$name.to"
        exit "$status"
    ) &
    local pid=$! chunk=0 status=0
    alongside_calls=0
    while kill -0 "$pid" 2>/dev/null; do
        chunk=$((chunk + 1))
        hot_run "$name-hot-$chunk" "$engine" "$chunk_seconds"
        alongside_calls=$((alongside_calls + run_transactions))
    done
    wait "$pid" || status=$?
    if [ "$status" -ne 0 ]; then
        echo "flood: $name failed:" >&2
        cat "$logs/$name.out" >&2
        exit 1
    fi
    alongside_from="$(cat "$logs/$name.from")"
    alongside_to="$(cat "$logs/$name.to")"
}

# flood_sql ENGINE PREFIX KEYS: the statements of one flood, one batch of FLOOD_BATCH keys
# (FLOOD_TABLE_BATCH on a table engine) each, every batch followed by a probe: "probe batch epoch allowed-so-far" and, for the memory
# engine, memory_stats' entries, shared_bytes, evictions and expired; for a table engine, its
# total size. consume references g, so it is called once per row (a function in FROM that
# does not depend on the outer row would be called once).
flood_sql() {
    local engine="$1" prefix="$2" keys="$3" from to probe size="$table_batch"
    case "$engine" in
        memory)
            probe="entries, shared_bytes, evictions, expired, refusals FROM ratelimit.memory_stats"
            size="$batch"
            ;;
        table) probe="pg_total_relation_size('ratelimit.key_state')" ;;
        unlogged) probe="pg_total_relation_size('ratelimit.key_state_unlogged')" ;;
    esac
    echo "SET jit = off;"
    echo "SELECT 0 AS allowed \\gset"
    for ((from = 1; from <= keys; from += size)); do
        to=$((from + size - 1))
        if [ "$to" -gt "$keys" ]; then
            to="$keys"
        fi
        echo "SELECT :allowed + count(*) FILTER (WHERE d.allowed) AS allowed"
        echo "FROM generate_series($from, $to) AS g,"
        echo "     LATERAL ratelimit.consume('$prefix' || g, $flood_limit, '$flood_period',"
        echo "                               p_engine => '$engine') AS d \\gset"
        echo "SELECT 'probe', $to, extract(epoch FROM clock_timestamp()), :allowed, $probe;"
    done
}

# flood NAME ENGINE PREFIX KEYS [hot]: one flood; with "hot", the hot key is measured
# alongside. Sets flood_seconds, flood_allowed, and the alongside_* figures.
flood() {
    local name="$1" engine="$2" prefix="$3" keys="$4" with_hot="${5:-}"
    flood_sql "$engine" "$prefix" "$keys" >"$logs/$name.sql"
    local run=(psql -X -A -t -q -F ' ' -v ON_ERROR_STOP=1 -d "$database" -f "$logs/$name.sql")
    echo "flood: $name: $keys keys on the $engine engine, batches of" \
        "$([ "$engine" = memory ] && echo "$batch" || echo "$table_batch")$([ -n "$with_hot" ] &&
            echo " (hot key measured alongside)")"
    if [ -n "$with_hot" ]; then
        alongside "$name" "$engine" "${run[@]}"
    else
        date +%s.%N >"$logs/$name.from"
        "${run[@]}" >"$logs/$name.out" 2>&1 || {
            echo "flood: $name failed:" >&2
            cat "$logs/$name.out" >&2
            exit 1
        }
        date +%s.%N >"$logs/$name.to"
        alongside_from="$(cat "$logs/$name.from")"
        alongside_to="$(cat "$logs/$name.to")"
    fi
    flood_seconds="$(awk -v a="$alongside_from" -v b="$alongside_to" 'BEGIN { printf "%.1f", b - a }')"
    flood_allowed="$(awk '$1 == "probe" { a = $4 } END { print a + 0 }' "$logs/$name.out")"
    echo "flood: $name: ${flood_seconds}s, $flood_allowed of $keys first calls allowed"
}

# quiet NAME ENGINE: a warm-up, then the hot key alone for FLOOD_BASELINE_SECONDS.
quiet() {
    echo "flood: $1: the hot key alone (${warmup_seconds}s warm-up, ${baseline_seconds}s measured)"
    hot_run "$1-warmup" "$2" "$warmup_seconds"
    rm -f "$logs/$1-warmup".[0-9]*
    hot_run "$1" "$2" "$baseline_seconds"
}

ms() {
    awk -v v="$1" 'BEGIN { if (v == "-") print "—"; else printf "%.3f", v }'
}
times() {
    awk -v a="$1" -v b="$2" 'BEGIN { if (a == "-" || b == "-" || b == 0) print "—"; else printf "%.2f×", a / b }'
}
mib() {
    awk -v b="$1" 'BEGIN { printf "%.1f MiB", b / 1048576 }'
}
thousands() {
    sed ':a; s/\B[0-9]\{3\}\>/,&/; ta' <<<"$1"
}

# latency_row LABEL STATS QUIET_STATS: a row of the latency table.
latency_row() {
    local label="$1" n avg p99 max tps qn qavg qp99
    read -r n avg p99 max tps <<<"$2"
    read -r qn qavg qp99 _ <<<"$3"
    printf '| %s | %s | %s | %s | %s | %s | %s | %s |\n' "$label" "$(thousands "$n")" \
        "$(thousands "$tps")" "$(ms "$avg")" \
        "$(ms "$p99")" "$(ms "$max")" "$(times "$avg" "$qavg")" "$(times "$p99" "$qp99")"
}
# reference QUIET_STATS...: the lowest average and the lowest p99 of the quiet runs, as a
# stats line for latency_row: the ratios are to the hot key's best quiet figures, so other work
# on the machine during one quiet run does not flatter the flood.
reference() {
    printf '%s\n' "$@" | awk '$2 != "-" {
            if (a == "" || $2 < a) a = $2
            if (p == "" || $3 < p) p = $3
        } END { print "0", (a == "" ? "-" : a), (p == "" ? "-" : p), "-", "-" }'
}
latency_header() {
    echo "| hot key ($hot_clients clients) | calls | calls/s | average ms | p99 ms | max ms | average / quiet | p99 / quiet |"
    echo "|---|---:|---:|---:|---:|---:|---:|---:|"
}

# --- memory engine ---------------------------------------------------------------------------

memory_section=""
if [[ " ${engines[*]} " == *" memory "* ]]; then
    stats_header="| | entries | capacity | shared_bytes | evictions | expired | allowed | denied | refusals | full partitions |"
    stats_query="SELECT entries, capacity, shared_bytes, evictions, expired, allowed, denied,
                        refusals, full_partitions
                 FROM ratelimit.memory_stats"
    stats_row() {
        local label="$1" e c s ev ex a d r f
        read -r e c s ev ex a d r f <<<"$2"
        echo "| $label | $(thousands "$e") | $(thousands "$c") | $(thousands "$s") |" \
            "$(thousands "$ev") | $(thousands "$ex") | $(thousands "$a") | $(thousands "$d") |" \
            "$(thousands "$r") | $f |"
    }
    stats_before="$(q "$stats_query")"

    quiet memory-quiet memory
    quiet_stats="$(latency memory-quiet)"
    # Idle keys: called once before the flood (rolling window of an hour, so only an eviction
    # can make them forget the call), looked at after it.
    idle_keys=1000
    idle_allowed="$(q "SELECT count(*) FROM generate_series(1, $idle_keys) AS g,
        LATERAL ratelimit.consume('idle:' || g, 10, '1 hour', 1, p_algorithm => 'rolling_window',
                                  p_engine => 'memory') AS d WHERE d.allowed")"
    # Spent keys: three calls of three, then a fourth, denied; each must stay denied.
    spent_keys=1000
    spent_denied="$(q "SELECT count(*) FILTER (WHERE NOT (d).allowed) FROM generate_series(1, $spent_keys) AS g,
        LATERAL (SELECT ratelimit.consume('spent:' || g, 3, '1 hour', 1, 'rolling_window', 'memory') AS d
                 FROM generate_series(1, 4)) AS c")"

    echo "flood: memory-busy: the control, one backend busy for ${baseline_seconds}s without decisions"
    alongside memory-busy memory psql -X -q -v ON_ERROR_STOP=1 -d "$database" \
        -v seconds="$baseline_seconds" -f bench/flood/busy.sql
    busy_stats="$(latency 'memory-busy-hot-*' "$alongside_from" "$alongside_to")"

    remaining_before="$(hot_remaining memory)"
    flood memory-flood memory "flood:" "$flood_keys" hot
    memory_flood_calls="$alongside_calls"
    remaining_after="$(hot_remaining memory)"
    calls_at_flood_end="${hot_calls[memory]}"
    idle_kept="$(q "SELECT count(*) FROM generate_series(1, $idle_keys) AS g,
        LATERAL ratelimit.peek('idle:' || g, 10, '1 hour', 1, p_algorithm => 'rolling_window',
                               p_engine => 'memory') AS p WHERE p.remaining = 9")"
    spent_kept="$(q "SELECT count(*) FROM generate_series(1, $spent_keys) AS g,
        LATERAL ratelimit.peek('spent:' || g, 3, '1 hour', 1, 'rolling_window', 'memory') AS p
        WHERE NOT p.allowed")"
    live_kept=$((idle_kept + spent_kept))
    live_keys=$((idle_keys + spent_keys))
    echo "flood: live keys kept: $live_kept of $live_keys ($idle_kept of $idle_keys called once, $spent_kept of $spent_keys spent)"
    flood_stats="$(latency 'memory-flood-hot-*' "$alongside_from" "$alongside_to")"
    memory_flood_seconds="$flood_seconds"
    memory_flood_allowed="$flood_allowed"
    stats_after="$(q "$stats_query")"
    quiet memory-quiet-after memory
    quiet_after_stats="$(latency memory-quiet-after)"
    quiet_reference="$(reference "$quiet_stats" "$quiet_after_stats")"

    # The probes after every batch: the most entries ever seen, and every shared_bytes value.
    read -r max_entries shared_values <<<"$(awk '$1 == "probe" {
            if ($5 > max) max = $5
            if (!($6 in seen)) { seen[$6] = 1; values = values (values == "" ? "" : ",") $6 }
        } END { print max + 0, values }' "$logs/memory-flood.out")"
    read -r _ _ _ _ _ _ _ refusals_before _ <<<"$stats_before"
    read -r _ _ _ evictions_after _ _ _ refusals_after _ <<<"$stats_after"
    flood_refusals=$((refusals_after - refusals_before))
    echo "flood: refusals during the flood: $flood_refusals; live evictions: $evictions_after"
    probes="$(grep -c '^probe' "$logs/memory-flood.out")"
    shared_list=""
    IFS=',' read -ra shared_array <<<"$shared_values"
    for value in "${shared_array[@]}"; do
        shared_list+="${shared_list:+; }$(thousands "$value")"
    done

    decrease=$((remaining_before - remaining_after))
    if [ "$decrease" -eq "$memory_flood_calls" ] &&
        [ "$remaining_after" -eq $((hot_limit - calls_at_flood_end)) ]; then
        evicted="no: its remaining fell by exactly one per call through the flood ($(thousands "$remaining_before") before, $(thousands "$remaining_after") after: $(thousands "$decrease") for $(thousands "$memory_flood_calls") calls) and was the limit minus all $(thousands "$calls_at_flood_end") calls made on it until then"
    else
        evicted="**YES, or miscounted**: remaining $remaining_before before the flood, $remaining_after after ($decrease) for $memory_flood_calls calls; $((hot_limit - calls_at_flood_end)) expected after all $calls_at_flood_end calls"
    fi
    read -r _ favg fp99 _ <<<"$flood_stats"
    read -r _ qavg qp99 _ <<<"$quiet_reference"
    target="$(awk -v f="$favg" -v q="$qavg" -v f9="$fp99" -v q9="$qp99" 'BEGIN {
        if (f == "-") { print "not measured (the flood ended before a hot run)"; exit }
        a = f / q; p = f9 / q9
        printf "average %.2f× (%s), p99 %.2f× (%s)", a, (a <= 2 ? "met" : "**missed**"), p, (p <= 2 ? "met" : "**missed**")
    }')"
    flood_rate="$(awk -v k="$flood_keys" -v s="$memory_flood_seconds" 'BEGIN { printf "%.0f", k / s }')"

    memory_section="## Memory engine: $(thousands "$flood_keys") distinct keys into a store of $(thousands "$capacity")

The flood: \`SELECT count(*) FILTER (WHERE d.allowed) FROM generate_series(a, b) g, LATERAL
ratelimit.consume('flood:' || g, $flood_limit, '$flood_period', p_engine => 'memory') d\`, one
statement per $(thousands "$batch") keys, from one connection: $(thousands "$flood_keys") keys in
${memory_flood_seconds}s ($(thousands "$flood_rate") keys/s while the hot key ran alongside),
$(thousands "$memory_flood_allowed") first calls allowed.

$stats_header
|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|
$(stats_row "before the pass" "$stats_before")
$(stats_row "after the flood" "$stats_after")

- **Bounded**: after each of the $(thousands "$probes") batches, memory_stats was read: at most
  $(thousands "$max_entries") entries ever (capacity $(thousands "$capacity")), and shared_bytes
  was $shared_list every time (the store is one fixed shared-memory segment sized at start).
- **Hot key evicted?** $evicted.
- **Live keys kept**: $(thousands "$live_kept") of $(thousands "$live_keys"): $(thousands "$idle_kept") of the
  $(thousands "$idle_allowed") keys called once just before the flood (rolling window of an hour, so only an
  eviction could forget the call) still tracked after it, and $(thousands "$spent_kept") of the
  $(thousands "$spent_denied") keys spent before it (three calls of three, a fourth denied) still denied.
  Nothing that counts is forgotten: once the store is full, new keys are refused
  (\`ratelimit.memory_when_full = deny\`, the default) until keys expire.
- **Refusals**: $(thousands "$flood_refusals") new keys refused for lack of room during the flood, $(thousands "$evictions_after") live
  keys evicted (memory_stats).
- **Latency target** (flood / quiet <= 2×, reported, not asserted): $target. Ratios are to the
  lower of the two quiet runs (before the control and after the flood), metric by metric. On
  a shared 2-core VM the p99 of two quiet runs can differ several-fold (compare the two quiet
  rows), and the flood's backend takes one of the two CPUs, as the control's does.

$(latency_header)
$(latency_row "quiet (alone, ${baseline_seconds}s)" "$quiet_stats" "$quiet_reference")
$(latency_row "control: one busy backend, no decisions (${baseline_seconds}s)" "$busy_stats" "$quiet_reference")
$(latency_row "under the flood (${memory_flood_seconds}s)" "$flood_stats" "$quiet_reference")
$(latency_row "quiet again, after the flood (${baseline_seconds}s)" "$quiet_after_stats" "$quiet_reference")"
    echo
    echo "$memory_section"
fi

# --- table engines -----------------------------------------------------------------------------

table_tables=""
table_latency=""
table_notes=""
for engine in table unlogged; do
    if [[ " ${engines[*]} " != *" $engine "* ]]; then
        continue
    fi
    relation=ratelimit.key_state
    [ "$engine" = unlogged ] && relation=ratelimit.key_state_unlogged
    # size: "heap index total" in bytes (total: pg_total_relation_size, with TOAST and maps).
    size() {
        q "SELECT pg_relation_size('$relation'), pg_indexes_size('$relation'),
                  pg_total_relation_size('$relation')"
    }
    size_cell() {
        local heap index total
        read -r heap index total <<<"$1"
        echo "$(mib "$total") ($(mib "$heap") + $(mib "$index"))"
    }
    rows() {
        q "SELECT count(*) FROM $relation"
    }
    seconds_since() {
        awk -v a="$1" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }'
    }
    rounds_table="| round | flood | rows after it | size after it (heap + index) | cleanup_key_state deleted | rows after cleanup | size after VACUUM (heap + index) |
|---|---:|---:|---:|---:|---:|---:|
| before | — | $(rows) | $(size_cell "$(size)") | — | — | — |"
    quiet "$engine-quiet" "$engine"
    quiet_stats="$(latency "$engine-quiet")"

    for round in $(seq "$table_rounds"); do
        if [ "$round" = 1 ]; then
            flood "$engine-flood-$round" "$engine" "flood:$round:" "$table_keys" hot
            flood_stats="$(latency "$engine-flood-1-hot-*" "$alongside_from" "$alongside_to")"
            flood1_seconds="$flood_seconds"
            flood1_calls="$alongside_calls"
            size_flooded="$(size)"
            rows_flooded="$(rows)"
            quiet "$engine-quiet-after" "$engine"
            quiet_after_stats="$(latency "$engine-quiet-after")"
            quiet_reference="$(reference "$quiet_stats" "$quiet_after_stats")"
        else
            flood "$engine-flood-$round" "$engine" "flood:$round:" "$table_keys"
        fi
        allowed_note="$flood_allowed allowed"
        [ "$flood_allowed" = "$table_keys" ] && allowed_note="all allowed"
        flood_cell="$(thousands "$table_keys") keys in ${flood_seconds}s, $allowed_note"
        if [ "$round" != 1 ]; then
            size_flooded="$(size)"
            rows_flooded="$(rows)"
        fi

        # The windows are one minute long: ten minutes on, every flood key decides like no
        # key, and the hot key's hour still runs. The test clock is per session, superuser only.
        started="$(date +%s.%N)"
        deleted="$(psql -X -A -t -q -v ON_ERROR_STOP=1 -d "$database" \
            -c "SELECT set_config('ratelimit.test_clock', (ratelimit.clock_now() + interval '10 minutes')::text, false)" \
            -c "SELECT ratelimit.cleanup_key_state('$engine')" | tail -n 1)"
        cleanup_seconds="$(seconds_since "$started")"
        rows_clean="$(rows)"
        started="$(date +%s.%N)"
        q "VACUUM $relation" >/dev/null
        vacuum_seconds="$(seconds_since "$started")"
        rounds_table+="
| $round | $flood_cell | $(thousands "$rows_flooded") | $(size_cell "$size_flooded") | $(thousands "$deleted") in ${cleanup_seconds}s | $(thousands "$rows_clean") | $(size_cell "$(size)") (VACUUM ${vacuum_seconds}s) |"
    done
    remaining="$(hot_remaining "$engine")"
    if [ "$remaining" -eq $((hot_limit - ${hot_calls[$engine]})) ]; then
        hot_check="kept: its remaining is the limit minus the $(thousands "${hot_calls[$engine]}") calls made on it"
    else
        hot_check="**not kept: remaining $remaining, expected $((hot_limit - ${hot_calls[$engine]})) after ${hot_calls[$engine]} calls**"
    fi

    table_tables+="### \`$engine\` (\`$relation\`)

$rounds_table

"
    table_latency+="$(latency_row "$engine: quiet (alone, ${baseline_seconds}s)" "$quiet_stats" "$quiet_reference")"$'\n'
    table_latency+="$(latency_row "$engine: under flood 1 (${flood1_seconds}s)" "$flood_stats" "$quiet_reference")"$'\n'
    table_latency+="$(latency_row "$engine: quiet again, after flood 1 (${baseline_seconds}s)" "$quiet_after_stats" "$quiet_reference")"$'\n'
    table_notes+="- $engine: the hot key made $(thousands "$flood1_calls") calls during flood 1 and was $hot_check."$'\n'
done

table_section=""
if [ -n "$table_tables" ]; then
    table_section="## Table engines: $(thousands "$table_keys") distinct keys, $table_rounds rounds

A smaller flood than the memory engine's (\`FLOOD_TABLE_KEYS\`, default 1,000,000 against
10,000,000): every key is a row and an index entry written through the heap, far slower than a
memory slot. The same statements with \`p_engine => 'table'\` or \`'unlogged'\`, keys
\`flood:<round>:<n>\` (new keys every round), but $(thousands "$table_batch") keys per statement
(\`FLOOD_TABLE_BATCH\`), each its own transaction. Each round: the flood,
then \`ratelimit.cleanup_key_state(engine)\` in a session whose \`ratelimit.test_clock\` is ten
minutes ahead (past every flood key's one-minute window, not past the hot key's hour), then
a plain \`VACUUM\`. The hot key runs alongside the first flood only (and alone again right
after it). Sizes: total is
\`pg_total_relation_size\` (heap, index, TOAST, maps), heap is \`pg_relation_size\`, index
\`pg_indexes_size\`.

A plain VACUUM gives the heap's space back for reuse (and truncates the empty pages at its end),
but the B-tree pages it empties only become reusable at the next VACUUM (PostgreSQL recycles a
deleted index page once no transaction can still need it), so the index can grow to about
twice one flood's before it stops (autovacuum also runs during the floods, so where that
happens moves by a round): the tables below show whether the rounds level off.

${table_tables%$'\n\n'}

$(latency_header)
${table_latency%$'\n'}

${table_notes%$'\n'}"
    echo
    echo "$table_section"
fi

finished_at="$(date +%s)"
run_time="$(((finished_at - started_at) / 60)) min $(((finished_at - started_at) % 60)) s"
load_after="$(cut -d ' ' -f 1-3 /proc/loadavg)"

{
    echo "# Flood: a stream of distinct keys against a hot key"
    echo
    echo "- Date: $(date -u '+%Y-%m-%d %H:%M:%S UTC')"
    echo "- PostgreSQL: $server_version; ratelimit $extension_version (the installed build)"
    echo "- nproc: $(nproc): the flood's backend, the hot key's 4 backends and pgbench share them"
    echo "- Command: \`$command\` (total run time $run_time)"
    echo "- Server: shared_preload_libraries = 'ratelimit', ratelimit.memory_capacity =" \
        "$capacity (ratelimit.memory_when_full = deny, the default), shared_buffers = 512MB," \
        "max_wal_size = 4GB, fsync and synchronous_commit" \
        "on (their defaults); the flood's session sets jit = off"
    echo "- Hot key: \`pgbench -n -M prepared -c $hot_clients -j $hot_jobs -T <s> -l" \
        "-D engine=<engine> -f bench/flood/hot.sql\` over the Unix socket:" \
        "\`ratelimit.consume('hot', $hot_limit, '1 hour', 1, p_algorithm => 'rolling_window'," \
        "p_engine => <engine>)\`, always allowed. The rolling window opens at the key's first" \
        "call, so no window boundary resets its count during the pass (a fixed window would" \
        "at the top of the hour) and its remaining falls by one per call while it is kept." \
        "Quiet: ${warmup_seconds}s warm-up (not counted), then ${baseline_seconds}s alone," \
        "before and again right after the (first) flood; ratios are to the lower of the two." \
        "Under a flood or the control: runs of ${chunk_seconds}s one after the other until it" \
        "ends; only calls that completed between its start and end count. Latencies are" \
        "pgbench's per-transaction times (client side, round trip included); p99 is the" \
        "99th percentile of those calls"
    echo "- Control: \`bench/flood/busy.sql\`, one backend running the flood's loop" \
        "(generate_series, the key's concatenation, a function call per row) with no decision" \
        "for ${baseline_seconds}s: what any busy backend costs the hot key on 2 CPUs, apart" \
        "from the engine"
    echo "- Flood keys: \`$flood_limit\` per \`$flood_period\`, fixed window: each key's first" \
        "call is allowed while there is room, and its state expires at the end of its minute" \
        "(the memory engine then reclaims its slot; until then a full store refuses new keys)"
    echo "- **Noisy machine**: other work may run on this 2-core VM (load average" \
        "$load_before before the pass, $load_after after, the pass's own load included):" \
        "latencies move by tens of percent between runs; compare the rows of one run"
    echo "- Raw outputs: bench/results/flood/ (pgbench logs, per-transaction logs, every" \
        "batch's probe line)"
    echo
    if [ -n "$memory_section" ]; then
        echo "$memory_section"
        echo
    fi
    if [ -n "$table_section" ]; then
        echo "$table_section"
        echo
    fi
} >bench/results/flood.md
echo
echo "flood: written to bench/results/flood.md (total run time $run_time)"
