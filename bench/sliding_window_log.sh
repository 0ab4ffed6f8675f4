#!/usr/bin/env bash
# Benchmark of the sliding_window log on the table engines: the time of one call of
# ratelimit.consume(key, limit, '1 minute', 1, 'sliding_window', engine) on a hot key whose log
# has first been filled by many calls at distinct instants, at limits 10, 1,000, 100,000 and
# 1,000,000, on the 'table' and 'unlogged' engines. The log keeps at most kMaxSlidingLog (64)
# entries whatever the limit (include/ratelimit/algorithms.hpp), so the time per call should not
# grow with the limit; the table shows it next to the size of the log each case left.
#
# Run as root from the repository root:  bash bench/sliding_window_log.sh
#   QUICK                 set: 3 s measured and 1 s warm-up per case, 2,000 filling calls
#                         (about a minute in all)
#   BENCH_SECONDS         measured seconds per case (default 10)
#   BENCH_WARMUP_SECONDS  warm-up seconds per case, not measured (default 2)
#   BENCH_FILL            calls that fill each key's log before its case (default 10000)
#   BENCH_NO_BUILD        set: measure the installed extension (bench/lib.sh)
# One client: a hot key's calls run one at a time anyway (each holds the row until its commit),
# and one client gives the time of a call as 1 / TPS. Writes bench/results/sliding_window_log.md;
# every pgbench output is kept in bench/results/sliding_window_log/. The cluster is stopped on
# exit (scripts/cluster.sh), also on failure.
set -euo pipefail
cd "$(dirname "$0")/.."
source bench/lib.sh

bench_init sliding_window_log
if [ -n "${QUICK:-}" ]; then
    seconds="${BENCH_SECONDS:-3}"
    warmup_seconds="${BENCH_WARMUP_SECONDS:-1}"
    fill="${BENCH_FILL:-2000}"
else
    seconds="${BENCH_SECONDS:-10}"
    warmup_seconds="${BENCH_WARMUP_SECONDS:-2}"
    fill="${BENCH_FILL:-10000}"
fi
bench_command bench/sliding_window_log.sh QUICK BENCH_FILL
pgbench_options=(-n -M prepared -c 1 -j 1)

limits=(10 1000 100000 1000000)
engines=(table unlogged)

bench_start

declare -A per_call entries bytes counted_units

# state_table ENGINE
state_table() {
    if [ "$1" = unlogged ]; then echo ratelimit.key_state_unlogged; else echo ratelimit.key_state; fi
}

# One case: fill the key's log, then a warm-up and a measured run on it, and what the log holds
# after. Every call of a run is its own transaction, so every call reads the clock anew: at
# thousands of calls a second, each allowed call is at its own microsecond.
run_case() {
    local engine="$1" limit="$2" name="$1-$2" key="swl:$1:$2"
    local defines=(-D "key=$key" -D "lim=$limit" -D "engine=$engine")
    echo "sliding_window_log: $engine, limit $limit ($fill filling calls," \
        "${warmup_seconds}s warm-up, ${seconds}s measured)"
    local fill_log="$logs/$name-fill.log"
    if ! pgbench "${pgbench_options[@]}" "${defines[@]}" -t "$fill" \
        -f "bench/$bench_name/consume.sql" "$database" >"$fill_log" 2>&1; then
        echo "sliding_window_log: filling $key failed:" >&2
        cat "$fill_log" >&2
        exit 1
    fi
    psql -X -q -d "$database" -c "CHECKPOINT"
    local saved=("${pgbench_options[@]}")
    pgbench_options+=("${defines[@]}")
    pgbench_run "$name-warmup" consume.sql "$warmup_seconds"
    pgbench_run "$name" consume.sql "$seconds"
    pgbench_options=("${saved[@]}")
    per_call[$name]="$(awk -v t="$run_tps" 'BEGIN { printf "%.0f", 1000000 / t }')"
    local result
    result="$(psql -X -A -t -F ' ' -d "$database" -c "
        SELECT coalesce(array_length(s.log, 1), 0) / 2, coalesce(pg_column_size(s.log), 0),
               coalesce((SELECT sum(e.v) FROM unnest(s.log) WITH ORDINALITY AS e(v, i)
                         WHERE e.i % 2 = 0), 0)
        FROM $(state_table "$engine") AS s
        WHERE s.policy = '' AND s.key = '$key'")"
    if [ -z "$result" ]; then
        echo "sliding_window_log: no state row for $key" >&2
        exit 1
    fi
    read -r "entries[$name]" "bytes[$name]" "counted_units[$name]" <<<"$result"
    if [ "${counted_units[$name]}" -gt "$limit" ]; then
        echo "sliding_window_log: $key counts ${counted_units[$name]} units over its limit $limit" >&2
        exit 1
    fi
}

for engine in "${engines[@]}"; do
    for limit in "${limits[@]}"; do
        run_case "$engine" "$limit"
    done
done
echo "sliding_window_log: floor (SELECT 1, ${warmup_seconds}s warm-up, ${seconds}s measured)"
pgbench_run select1-warmup select1.sql "$warmup_seconds"
pgbench_run select1 select1.sql "$seconds"
floor_us="$(awk -v t="$run_tps" 'BEGIN { printf "%.0f", 1000000 / t }')"

table="$(
    echo "| engine | limit | µs per call | log entries after | log bytes | units in the log |"
    echo "|---|---:|---:|---:|---:|---:|"
    for engine in "${engines[@]}"; do
        for limit in "${limits[@]}"; do
            name="$engine-$limit"
            printf '| %s | %s | %s | %s | %s | %s |\n' "$engine" "$limit" "${per_call[$name]}" \
                "${entries[$name]}" "${bytes[$name]}" "${counted_units[$name]}"
        done
    done
    echo "| floor: \`SELECT 1\` | | $floor_us | | | |"
)"

notes() {
    echo "- Calls: \`ratelimit.consume(key, limit, '1 minute', 1, 'sliding_window', engine)\`," \
        "one hot key per case, filled by $fill calls (pgbench -t, one client) just before its" \
        "warm-up; µs per call = 10^6 / TPS of the measured run (one client, so calls run one at a" \
        "time; on 'table' each includes the WAL flush of its commit)"
    echo "- Log entries, bytes (pg_column_size of the log column) and units are read from the" \
        "key's row after the case. At limit 10 the window is full after 10 calls, so most calls" \
        "are denied and write nothing; at the larger limits every call is allowed and written"
}

bench_finish "sliding_window log: time per call across limits" "; one client" notes \
    "Per-case counts are in the table (units in the log = allowed units still in the window)." \
    "$table"
