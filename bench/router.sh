#!/usr/bin/env bash
# Benchmark of the router (ratelimit_router): the same calls sent direct to one shard and through
# a router with two shards, single calls and 100-key batches, on each engine, as ratios in one
# run. One machine: the router and both shards share its cores, so the ratios are what the extra
# hop costs here, not what separate machines would give (docs/scaling-out.md has that model).
#
# Then the CPU each side spends on one routed call: a run of serial calls in one router session,
# with the CPU time of that router backend and of its connections' backends on the shards read
# from /proc before and after (the model in docs/scaling-out.md starts from these).
#
# Run as root from the repository root, after make install:  bash bench/router.sh
#   BENCH_SECONDS         measured seconds per case (default 5)
#   BENCH_WARMUP_SECONDS  warm-up seconds per case, not measured (default 1)
# Every pgbench output is kept in bench/results/router/.
set -euo pipefail
cd "$(dirname "$0")/.."
source bench/major.sh
source scripts/cluster.sh
source test/router/clusters.sh

seconds="${BENCH_SECONDS:-5}"
warmup_seconds="${BENCH_WARMUP_SECONDS:-1}"
clients=8
logs=bench/results/router
mkdir -p "$logs"

scripts/install-deps.sh
memory="shared_preload_libraries = 'ratelimit'"
router_cluster_start router "$memory" "wal_level = logical"
router_cluster_start shard1 "$memory"
router_cluster_start shard2 "$memory"
for name in shard1 shard2; do
    router_psql "$name" -c "CREATE EXTENSION ratelimit" >/dev/null
done
router_psql router -c "CREATE EXTENSION ratelimit_router CASCADE" >/dev/null 2>&1
router_psql router -c "SELECT count(*) FROM ratelimit_router.configure(ARRAY[
    'host=127.0.0.1 port=$(router_cluster_port shard1) dbname=postgres',
    'host=127.0.0.1 port=$(router_cluster_port shard2) dbname=postgres'], 64)" >/dev/null

# run_case NAME SERVER SCRIPT: TPS of pgbench running bench/router/SCRIPT against SERVER.
declare -A tps
run_case() {
    local name="$1" server="$2" script="$3" engine="$4"
    local args=(-n -M prepared -c "$clients" -j "$clients" -D "engine=$engine"
        -h "$(router_cluster_dir "$server")/socket" -p "$(router_cluster_port "$server")" -U postgres postgres
        -f "bench/router/$script")
    pgbench "${args[@]}" -T "$warmup_seconds" >"$logs/$name.warmup.log" 2>&1
    pgbench "${args[@]}" -T "$seconds" >"$logs/$name.log" 2>&1
    if grep -q "number of failed transactions: [1-9]" "$logs/$name.log"; then
        echo "router bench: $name had failed transactions" >&2
        exit 1
    fi
    tps[$name]="$(sed -n 's/^tps = \([0-9.]*\) .*/\1/p' "$logs/$name.log" | head -1)"
}

echo "| engine | call | direct to one shard (calls/s) | through the router (calls/s) | routed / direct |"
echo "|---|---|---:|---:|---:|"
for engine in table unlogged memory; do
    for kind in single batch100; do
        run_case "direct-$engine-$kind" shard1 "direct_$kind.sql" "$engine"
        run_case "routed-$engine-$kind" router "routed_$kind.sql" "$engine"
        d="${tps[direct-$engine-$kind]}"
        r="${tps[routed-$engine-$kind]}"
        echo "| $engine | $kind | $d | $r | $(awk -v d="$d" -v r="$r" 'BEGIN {printf "%.2f", r / d}') |"
    done
done
# The PL/Proxy function alone (no check of the arguments, no failure policy): what the router's
# own SQL adds to a single call.
run_case "plproxy-only-table-single" router "plproxy_only_single.sql" table
d="${tps[direct-table-single]}"
r="${tps[plproxy-only-table-single]}"
echo "| table | single, PL/Proxy function alone | $d | $r | $(awk -v d="$d" -v r="$r" 'BEGIN {printf "%.2f", r / d}') |"
echo
echo "($clients clients, ${seconds} s per case after ${warmup_seconds} s of warm-up; 100k keys per engine; $(nproc) cores shared by the router and both shards; batch rows are calls of 100 keys)"

# cpu_ticks SERVER PID: user + system CPU time of a backend, in clock ticks.
cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
ticks_per_second="$(getconf CLK_TCK)"

# per_call_cost LABEL CALLS SQL: SQL runs CALLS decisions in one router statement.
per_call_cost() {
    local label="$1" decisions="$2" sql="$3"
    local session="$logs/cost-$label.sql"
    rm -f "$logs/cost-$label.done"
    local router_socket shard_pids
    router_socket="$(router_cluster_dir router)/socket"
    # One session: warm the connections, report the pids, wait for the before-reading, measure.
    {
        echo "SELECT count(*) FROM generate_series(1, 200) AS i, ratelimit_router.consume('warm:' || i, 1000000, '1 hour') AS d;"
        echo "SELECT pg_backend_pid() AS router_pid \gset"
        echo "\o $logs/cost-$label.pids"
        echo "\qecho router :router_pid"
        echo "\o"
        echo "\! sleep 1"
        echo "\timing on"
        echo "$sql"
        echo "\! echo done > $logs/cost-$label.done"
        echo "\! sleep 1"
    } >"$session"
    sleep 1  # the previous sessions' shard connections close
    psql -X -q -h "$router_socket" -p "$(router_cluster_port router)" -U postgres -f "$session" >"$logs/cost-$label.log" 2>&1 &
    local session_pid=$!
    sleep 0.6
    local router_pid before_router before_shards=0 after_router after_shards=0 pid
    router_pid="$(awk '{print $2}' "$logs/cost-$label.pids")"
    shard_pids=""
    for name in shard1 shard2; do
        shard_pids+=" $(router_psql "$name" -At -c "SELECT pid FROM pg_stat_activity WHERE client_addr IS NOT NULL AND backend_type = 'client backend'")"
    done
    before_router="$(cpu_ticks "$router_pid")"
    for pid in $shard_pids; do before_shards=$((before_shards + $(cpu_ticks "$pid" 2>/dev/null || echo 0))); done
    # Read the shards' backends before the session ends: its end closes them.
    while [ ! -s "$logs/cost-$label.done" ] && kill -0 "$session_pid" 2>/dev/null; do sleep 0.05; done
    after_router="$(cpu_ticks "$router_pid")"
    for pid in $shard_pids; do after_shards=$((after_shards + $(cpu_ticks "$pid" 2>/dev/null || echo 0))); done
    wait "$session_pid"
    local wall_ms
    wall_ms="$(sed -n 's/^Time: \([0-9.]*\) ms.*/\1/p' "$logs/cost-$label.log" | tail -1)"
    awk -v l="$label" -v n="$decisions" -v r=$((after_router - before_router)) -v s=$((after_shards - before_shards)) \
        -v hz="$ticks_per_second" -v w="$wall_ms" 'BEGIN {
        printf "| %s | %d | %.1f | %.1f | %.1f |\n", l, n, r * 1e6 / hz / n, s * 1e6 / hz / n, w * 1000 / n }'
}

echo
echo "CPU per decision, serial calls through the router (µs; one router session, both shards' backends added):"
echo
echo "| call | decisions | router CPU | shards' CPU | wall time |"
echo "|---|---:|---:|---:|---:|"
per_call_cost single-table 5000 "SELECT count(*) FROM generate_series(1, 5000) AS i, ratelimit_router.consume('cost:' || i, 1000000, '1 hour') AS d;"
per_call_cost single-memory 5000 "SELECT count(*) FROM generate_series(1, 5000) AS i, ratelimit_router.consume('cost:' || i, 1000000, '1 hour', 1, 'fixed_window', 'memory') AS d;"
per_call_cost batch100-table 50000 "SELECT count(*) FROM generate_series(1, 500) AS b, LATERAL unnest(ratelimit_router.consume_many(ARRAY(SELECT 'cost:' || (b * 100 + i) FROM generate_series(1, 100) AS i), 1000000, '1 hour')) AS d;"
per_call_cost batch100-memory 50000 "SELECT count(*) FROM generate_series(1, 500) AS b, LATERAL unnest(ratelimit_router.consume_many(ARRAY(SELECT 'cost:' || (b * 100 + i) FROM generate_series(1, 100) AS i), 1000000, '1 hour', 1, 'fixed_window', 'memory')) AS d;"
