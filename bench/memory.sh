#!/usr/bin/env bash
# Benchmark of the memory engine: transactions per second of ratelimit.consume(...,
# p_engine => 'memory') on a hot key and over 100,000 keys, at 1, 8 and 32 clients, next to the
# SELECT 1 floor, and next to Redis doing the usual fixed-window limiter (a Lua script: INCR,
# EXPIRE when the count becomes 1) with its own PING floor; then the in-server cost of one
# decision, from one query that makes a million of them. One PostgreSQL server, one Redis
# server, one pass: every figure from the same machine state.
#
# Run as root from the repository root:  bash bench/memory.sh
#   BENCH_SECONDS         measured seconds per case (default 5; about 5 minutes in all)
#   BENCH_WARMUP_SECONDS  warm-up seconds per case, not measured (default 2)
#   BENCH_ALGORITHMS      algorithms of the memory engine's cases (default
#                         "fixed_window token_bucket gcra"; also rolling_window and
#                         sliding_window_counter, about a minute more each; not sliding_window)
#   BENCH_KEYS            hot, 100k or both (default)
#   BENCH_CLIENTS         client counts (default "1 8 32")
#   BENCH_NO_BUILD        set: measure the installed extension (bench/lib.sh)
# Writes bench/results/memory.md (settings, the table, the in-server figures, every count
# check); every pgbench, redis-benchmark and timed query output is kept in
# bench/results/memory/.
set -euo pipefail
cd "$(dirname "$0")/.."
source bench/lib.sh

started_at="$(date +%s)"
# Anything else running on the machine shows in the figures: the load before the pass is
# reported with them (after it, the load is mostly the pass's own).
load_before="$(cut -d ' ' -f 1-3 /proc/loadavg)"

# Default algorithms: fixed_window, the one Redis is compared with, and the two buckets, the
# usual choice for APIs; the window variants cost about what fixed_window does. All five would
# add about 2 minutes to the default pass. sliding_window cannot be measured here: the memory
# engine keeps its log in a fixed slot of 6 entries, so its limit is at most 6 per period of at
# least 1 ms, and a hot key called tens of thousands of times a second would be mostly denied,
# while these cases measure allowed calls.
all_algorithms=(fixed_window rolling_window sliding_window_counter token_bucket gcra)
algorithms=() keysets=() clients_list=()
choose algorithms BENCH_ALGORITHMS "${BENCH_ALGORITHMS:-fixed_window token_bucket gcra}" \
    "${all_algorithms[@]}"
choose keysets BENCH_KEYS "${BENCH_KEYS:-hot 100k}" hot 100k
choose clients_list BENCH_CLIENTS "${BENCH_CLIENTS:-1 8 32}" $(seq 1 256)

bench_init memory
seconds="${BENCH_SECONDS:-5}"
warmup_seconds="${BENCH_WARMUP_SECONDS:-2}"
bench_command bench/memory.sh BENCH_ALGORITHMS BENCH_KEYS BENCH_CLIENTS

# The engine's shared memory is sized at server start: room for 200,000 entries, twice the
# 100k key set, so that no case runs into a full table (evictions are reported per case).
memory_capacity=200000
bench_cluster_start() {
    cluster_start "shared_buffers = 512MB" "max_wal_size = 4GB" \
        "shared_preload_libraries = 'ratelimit'" "ratelimit.memory_capacity = $memory_capacity"
}

# Every call must be allowed, so that every case measures a call that counts (a denied call
# changes nothing) and the counts can be checked: 10^9 per 365 days. The aligned windows do not
# end during a run; the rolling window opens at the key's first call and outlasts the pass.
# Redis gets the same limit and window.
limit=1000000000
period="365 days"
period_seconds=31536000

# first_cost ALGORITHM: the cost of a key's first call. The buckets (burst = limit) refill at
# 10^9 per 365 days, about 32 units a second: a bucket that took one unit is full again, so
# idle and free to be reclaimed, within a second, and over 100k keys most calls would find
# their key gone and insert it anew. A first call taking half the burst keeps every bucket
# (token_bucket) and arrival time (gcra) months from full, so every later call updates a live
# entry, as on the windows; and half the burst is left, so every call is allowed.
first_cost() {
    case "$1" in
        token_bucket | gcra) echo $((limit / 2)) ;;
        *) echo 1 ;;
    esac
}

# The in-server queries: a million decisions each, each run three times.
in_server_calls=1000000
in_server_repeats=3

key_count() {
    if [ "$1" = hot ]; then echo 1; else echo 100000; fi
}

# One TCP connection to 127.0.0.1 per client, for PostgreSQL (pgbench -h) as for Redis
# (redis-benchmark's default): both pay the same kind of round trip, the one an application
# on another host would pay at best. Unix sockets would be faster for both.
pg_host=127.0.0.1

# --- Redis: a throwaway server in a temporary directory, stopped on exit --------------------

redis_dir="" redis_port="" redis_version=""

# No persistence (--save '', --appendonly no): the counters live in memory only, like the
# memory engine's, and no fork or disk write disturbs a run. As root it runs as the redis user
# of the Debian package, like the packaged service, never as root.
redis_start() {
    redis_dir="$(mktemp -d /tmp/ratelimit-redis.XXXXXX)"
    redis_port="$(cluster_free_port)"
    local run_as=()
    if [ "$(id -u)" -eq 0 ]; then
        chown redis:redis "$redis_dir"
        run_as=(runuser -u redis --)
    fi
    "${run_as[@]}" redis-server --bind 127.0.0.1 --port "$redis_port" --save '' \
        --appendonly no --dir "$redis_dir" --daemonize yes --pidfile "$redis_dir/redis.pid" \
        --logfile "$redis_dir/redis.log"
    for _ in $(seq 100); do
        if [ "$(redis_cli PING 2>/dev/null)" = PONG ]; then
            redis_version="$(redis_cli INFO server | sed -n 's/^redis_version:\([^\r]*\).*/\1/p')"
            echo "memory: Redis $redis_version running in $redis_dir on port $redis_port"
            return 0
        fi
        sleep 0.1
    done
    echo "memory: Redis did not start:" >&2
    cat "$redis_dir/redis.log" >&2 || true
    return 1
}

redis_stop() {
    if [ -z "$redis_dir" ]; then
        return 0
    fi
    local pid=""
    if [ -f "$redis_dir/redis.pid" ]; then
        pid="$(cat "$redis_dir/redis.pid")"
    fi
    redis_cli SHUTDOWN NOSAVE >/dev/null 2>&1 || true
    for _ in $(seq 50); do
        if [ -z "$pid" ] || ! kill -0 "$pid" 2>/dev/null; then
            break
        fi
        sleep 0.1
    done
    if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then
        kill "$pid" || true
    fi
    rm -rf "$redis_dir"
    redis_dir=""
    echo "memory: Redis stopped"
}

redis_cli() {
    redis-cli -h 127.0.0.1 -p "$redis_port" "$@"
}

# lua FILE: a script of bench/memory/ without its comment lines, which EVAL would otherwise
# send on every call.
lua() {
    grep -v '^--' "bench/memory/$1"
}

# --- Measuring ---------------------------------------------------------------------------

case_count=$(((${#algorithms[@]} + 1) * ${#keysets[@]} * ${#clients_list[@]}))
floor_count=$((4 * ${#clients_list[@]}))
in_server_count=$((${#algorithms[@]} * ${#keysets[@]} * in_server_repeats * 2))
echo "memory: $case_count cases and $floor_count floors of ${warmup_seconds}s + ${seconds}s," \
    "$in_server_count timed queries (about" \
    "$((((case_count + floor_count) * (seconds + warmup_seconds + 1) + in_server_count * 2) / 60 + 1))" \
    "minutes)"

bench_start
# cluster_start's EXIT trap stops the server; this one stops Redis too, also on failure.
trap 'redis_stop; cluster_stop' EXIT
redis_start
extension_version="$(psql -X -A -t -d "$database" -c \
    "SELECT extversion FROM pg_extension WHERE extname = 'ratelimit'")"

declare -A made  # key set -> calls made on it so far (populating, warm-ups, measured runs)
case_number=0

progress() {
    case_number=$((case_number + 1))
    echo "memory: [$case_number/$((case_count + floor_count))] $1" \
        "(${warmup_seconds}s warm-up, ${seconds}s measured)"
}

# measure NAME SCRIPT CLIENTS [pgbench -D options]: a CHECKPOINT, a warm-up and the measured
# run; sets tps[NAME] and run_calls (calls of both runs).
measure() {
    local name="$1" script="$2" clients="$3" jobs=2
    shift 3
    if [ "$clients" -lt "$jobs" ]; then
        jobs="$clients"
    fi
    # -P 1: a progress line per second in the log, to see whether a run was steady.
    pgbench_options=(-n -M prepared -h "$pg_host" -c "$clients" -j "$jobs" -P 1 "$@")
    progress "${name//\// }"
    psql -X -q -d "$database" -c "CHECKPOINT"
    pgbench_run "${name//\//-}-warmup" "$script" "$warmup_seconds"
    run_calls="$run_transactions"
    pgbench_run "${name//\//-}" "$script" "$seconds"
    run_calls=$((run_calls + run_transactions))
    tps[$name]="$run_tps"
}

# memory_stats: the engine's counters as "allowed denied evictions expired entries".
memory_stats() {
    psql -X -A -t -F ' ' -d "$database" -c \
        "SELECT allowed, denied, evictions, expired, entries FROM ratelimit.memory_stats"
}

# check_stats NAME CALLS BEFORE: every call since BEFORE (a memory_stats line) must show in
# the engine's allowed counter, and none in its denied one: a call that was not counted, or
# was denied, would mean the case measured something else.
check_stats() {
    local name="$1" calls="$2" before="$3" after
    after="$(memory_stats)"
    local a0 d0 e0 x0 a1 d1 e1 x1 n1
    read -r a0 d0 e0 x0 _ <<<"$before"
    read -r a1 d1 e1 x1 n1 <<<"$after"
    if [ $((a1 - a0)) -ne "$calls" ] || [ $((d1 - d0)) -ne 0 ]; then
        echo "memory: $name: $calls calls made, but memory_stats counted $((a1 - a0)) allowed" \
            "and $((d1 - d0)) denied" >&2
        exit 1
    fi
    counted[$name]="$calls calls, memory_stats: allowed +$((a1 - a0)), denied +$((d1 - d0)), evictions +$((e1 - e0)), expired +$((x1 - x0)), entries $n1"
    counted_names+=("$name")
}

# populate ALGORITHM KEYS: the first call of every key of the set with ALGORITHM. The key sets
# (hot:1, 100k:1 .. 100k:100000) are shared by the algorithms, so the engine never holds more
# than about 100,000 entries; a key last called with another algorithm starts afresh.
populate() {
    local algorithm="$1" keys="$2" before allowed
    before="$(memory_stats)"
    allowed="$(psql -X -q -A -t -v ON_ERROR_STOP=1 -d "$database" -v prefix="$keys:" \
        -v keys="$(key_count "$keys")" -v limit="$limit" -v period="$period" \
        -v algorithm="$algorithm" -v cost="$(first_cost "$algorithm")" \
        -f bench/memory/populate.sql)"
    if [ "$allowed" -ne "$(key_count "$keys")" ]; then
        echo "memory: populating $keys with $algorithm: $allowed of $(key_count "$keys") allowed" >&2
        exit 1
    fi
    check_stats "$algorithm/$keys/first calls" "$(key_count "$keys")" "$before"
}

# redis_benchmark LOG CLIENTS REQUESTS ARGS...: one redis-benchmark run; sets run_rps.
# redis-benchmark runs a number of requests, not a duration. Pipelining stays at its default
# of 1 (one request per round trip, like pgbench's one call per transaction); two threads from
# 2 clients on, like pgbench's -j 2. An error reply is printed and the run goes on, so the log
# is searched for one.
redis_benchmark() {
    local log="$logs/$1.log" clients="$2" requests="$3" threads=2
    shift 3
    if [ "$clients" -lt "$threads" ]; then
        threads="$clients"
    fi
    if ! redis-benchmark -h 127.0.0.1 -p "$redis_port" -c "$clients" -n "$requests" \
        --threads "$threads" --csv "$@" >"$log" 2>&1 || grep -qi "error" "$log"; then
        echo "memory: redis-benchmark run $1 failed:" >&2
        cat "$log" >&2
        exit 1
    fi
    # The last CSV line: "test","rps",... with the test (the command) possibly holding commas;
    # rps is the 7th field from the end.
    run_rps="$(tail -n 1 "$log" | awk -F, '{ gsub(/"/, "", $(NF - 6)); print $(NF - 6) }')"
    if ! awk -v r="$run_rps" 'BEGIN { exit !(r + 0 > 0) }'; then
        echo "memory: cannot read the requests per second of redis-benchmark run $1:" >&2
        cat "$log" >&2
        exit 1
    fi
}

# redis_measure NAME CLIENTS ARGS...: a short probe sizes the warm-up, the warm-up sizes the
# measured run, so that each lasts about its seconds; sets tps[NAME] and run_calls.
redis_measure() {
    local name="$1" clients="$2"
    shift 2
    progress "${name//\// }"
    redis_benchmark "${name//\//-}-probe" "$clients" 5000 "$@"
    run_calls=5000
    local requests
    requests="$(awk -v r="$run_rps" -v s="$warmup_seconds" 'BEGIN { printf "%d", r * s + 1000 }')"
    redis_benchmark "${name//\//-}-warmup" "$clients" "$requests" "$@"
    run_calls=$((run_calls + requests))
    requests="$(awk -v r="$run_rps" -v s="$seconds" 'BEGIN { printf "%d", r * s + 1000 }')"
    redis_benchmark "${name//\//-}" "$clients" "$requests" "$@"
    run_calls=$((run_calls + requests))
    tps[$name]="$run_rps"
}

# redis_check NAME KEYS: the key set's counts must add up to every call made on it.
redis_check() {
    local name="$1" keys="$2" result
    result="$(redis_cli EVAL "$(lua count.lua)" 0 "redis:$keys:*" | tr '\n' ' ')"
    local rows sum persistent
    read -r rows sum persistent <<<"$result"
    if [ "$rows" -ne "$(key_count "$keys")" ] || [ "$sum" -ne "${made[redis/$keys]}" ] ||
        [ "$persistent" -ne 0 ]; then
        echo "memory: $name: Redis holds $rows keys counting $sum calls ($persistent without" \
            "expiry) for $(key_count "$keys") keys and ${made[redis/$keys]} calls made" >&2
        exit 1
    fi
    counted[$name]="${made[redis/$keys]} calls, $sum counted in $rows keys, each with an expiry"
    counted_names+=("$name")
}

# The floors are measured at the start and again at the end, and the higher kept: the best
# round trip each server gives, so that one disturbed run does not skew every ratio to it.
floors() {
    local when="$1" clients
    for clients in "${clients_list[@]}"; do
        measure "floor/$clients/$when" select1.sql "$clients"
        redis_measure "ping/$clients/$when" "$clients" PING
    done
}

floors start

# Redis: INCR + EXPIRE in one script per call, the hot key and 100k keys. redis-benchmark
# writes __rand_int__ as a 12-digit number below -r: with -r 1 every call is on one key.
for keys in "${keysets[@]}"; do
    populated="$(redis_cli EVAL "$(lua populate.lua)" 0 "redis:$keys:" "$(key_count "$keys")" \
        "$period_seconds")"
    if [ "$populated" -ne "$(key_count "$keys")" ]; then
        echo "memory: populating Redis $keys created $populated keys" >&2
        exit 1
    fi
    made[redis/$keys]="$(key_count "$keys")"
    for clients in "${clients_list[@]}"; do
        name="redis/$keys/$clients"
        redis_measure "$name" "$clients" -r "$(key_count "$keys")" \
            EVAL "$(lua fixed_window.lua)" 1 "redis:$keys:__rand_int__" "$limit" "$period_seconds"
        made[redis/$keys]=$((${made[redis/$keys]} + run_calls))
        redis_check "$name" "$keys"
    done
done

declare -A in_server  # "algorithm/keys/decision|baseline" -> the runs' µs per call, one a line

# in_server_run ALGORITHM KEYS KIND RUN: one timed query (bench/memory/in_server.sql); appends its
# µs per call to in_server[ALGORITHM/KEYS/KIND].
in_server_run() {
    local algorithm="$1" keys="$2" kind="$3" run="$4" baseline=false before output answered elapsed
    local log="$logs/in-server-$algorithm-$keys-$kind.log"
    if [ "$kind" = baseline ]; then
        baseline=true
    fi
    before="$(memory_stats)"
    output="$(psql -X -q -A -t -F ' ' -v ON_ERROR_STOP=1 -d "$database" -v prefix="$keys:" \
        -v keys="$(key_count "$keys")" -v calls="$in_server_calls" -v limit="$limit" \
        -v period="$period" -v algorithm="$algorithm" -v baseline="$baseline" \
        -f bench/memory/in_server.sql 2>&1)" || {
        echo "memory: in-server query $algorithm $keys $kind failed:" >&2
        echo "$output" >&2
        exit 1
    }
    echo "$output" >>"$log"
    read -r answered elapsed <<<"$output"
    if [ "$answered" != "$in_server_calls" ]; then
        echo "memory: in-server query $algorithm $keys $kind: $answered of $in_server_calls rows answered" >&2
        exit 1
    fi
    if [ "$kind" = decision ]; then
        check_stats "$algorithm/$keys/in-server run $run" "$in_server_calls" "$before"
    fi
    in_server[$algorithm/$keys/$kind]+="$(awk -v e="$elapsed" -v n="$in_server_calls" \
        'BEGIN { printf "%.4f", e / n }')"$'\n'
}

# The memory engine: per algorithm, the first call of every key, then each key set at each
# client count, then the in-server queries on the same keys.
for algorithm in "${algorithms[@]}"; do
    echo "memory: first call of every key, $algorithm"
    for keys in "${keysets[@]}"; do
        populate "$algorithm" "$keys"
    done
    for keys in "${keysets[@]}"; do
        for clients in "${clients_list[@]}"; do
            name="$algorithm/$keys/$clients"
            before="$(memory_stats)"
            measure "$name" consume.sql "$clients" -D "prefix=$keys:" \
                -D "keys=$(key_count "$keys")" -D "limit=$limit" -D "period=$period" \
                -D "algorithm=$algorithm"
            check_stats "$name" "$run_calls" "$before"
        done
    done
    # The baseline alternates with the decisions, so both see the same state of the machine.
    echo "memory: in-server cost, $algorithm ($in_server_repeats x ${#keysets[@]} x 2 queries" \
        "of $in_server_calls rows)"
    for repeat in $(seq "$in_server_repeats"); do
        for keys in "${keysets[@]}"; do
            in_server_run "$algorithm" "$keys" baseline "$repeat"
            in_server_run "$algorithm" "$keys" decision "$repeat"
        done
    done
done

floors end
for clients in "${clients_list[@]}"; do
    for floor in floor ping; do
        tps[$floor/$clients]="$(awk -v a="${tps[$floor/$clients/start]}" \
            -v b="${tps[$floor/$clients/end]}" 'BEGIN { print (a > b ? a : b) }')"
    done
done

# --- The results ----------------------------------------------------------------------

keys_label() {
    if [ "$1" = hot ]; then echo "hot key"; else echo "100k keys"; fi
}

# row CASE KEYS CLIENTS TPS [REDIS_TPS]
row() {
    local versus="—"
    if [ -n "${5:-}" ]; then
        versus="$(ratio "$4" "$5")"
    fi
    printf '| %s | %s | %s | %.0f | %s | %s | %s |\n' "$1" "$2" "$3" "$4" \
        "$(ratio "$4" "${tps[floor/$3]}" 3)" "$versus" "$(ratio "$4" "${tps[ping/$3]}" 3)"
}

table="$(
    echo "| case | keys | clients | TPS | ratio to SELECT 1 floor | ratio to Redis INCR+EXPIRE |" \
        "ratio to Redis PING |"
    echo "|---|---|---:|---:|---:|---:|---:|"
    for clients in "${clients_list[@]}"; do
        row "\`SELECT 1\` (PostgreSQL floor)" — "$clients" "${tps[floor/$clients]}"
        row "Redis \`PING\` (Redis floor)" — "$clients" "${tps[ping/$clients]}"
        for keys in "${keysets[@]}"; do
            row "Redis INCR+EXPIRE (EVAL)" "$(keys_label "$keys")" "$clients" \
                "${tps[redis/$keys/$clients]}"
            for algorithm in "${algorithms[@]}"; do
                row "memory engine, $algorithm" "$(keys_label "$keys")" "$clients" \
                    "${tps[$algorithm/$keys/$clients]}" "${tps[redis/$keys/$clients]}"
            done
        done
    done
)"

# The target: the memory engine at 0.85 x the SELECT 1 floor or more, at 8 clients.
summary="$(
    for keys in "${keysets[@]}"; do
        for clients in "${clients_list[@]}"; do
            if [ "$clients" != 8 ]; then
                continue
            fi
            line="- **$(keys_label "$keys"), 8 clients**: memory engine / SELECT 1 floor"
            separator=" "
            for algorithm in "${algorithms[@]}"; do
                share="$(ratio "${tps[$algorithm/$keys/8]}" "${tps[floor/8]}" 3)"
                met=met
                if awk -v r="$share" 'BEGIN { exit !(r < 0.85) }'; then
                    met="**missed**"
                fi
                line+="$separator$algorithm $share ($met)"
                separator="; "
            done
            echo "$line; target >= 0.85"
        done
    done
)"

# within VALUE BOUND: "met" when VALUE <= BOUND.
within() {
    if awk -v v="$1" -v b="$2" 'BEGIN { exit !(v <= b) }'; then echo met; else echo "**missed**"; fi
}

# median_of / best_of: of the lines of a list of numbers.
median_of() {
    awk 'NF' | sort -g | awk '{ v[NR] = $1 } END { printf "%.3f", NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
}
best_of() {
    awk 'NF' | sort -g | awk 'NR == 1 { printf "%.3f", $1 }'
}

in_server_table="$(
    echo "| algorithm | keys | decision, µs each (best / median) | baseline, µs each (best / median) |" \
        "decision − baseline, µs (best / median) | target <= 1 µs (medians) |"
    echo "|---|---|---:|---:|---:|---|"
    for algorithm in "${algorithms[@]}"; do
        for keys in "${keysets[@]}"; do
            decision="${in_server[$algorithm/$keys/decision]}"
            baseline="${in_server[$algorithm/$keys/baseline]}"
            d_best="$(best_of <<<"$decision")" d_median="$(median_of <<<"$decision")"
            b_best="$(best_of <<<"$baseline")" b_median="$(median_of <<<"$baseline")"
            n_best="$(awk -v a="$d_best" -v b="$b_best" 'BEGIN { printf "%.3f", a - b }')"
            n_median="$(awk -v a="$d_median" -v b="$b_median" 'BEGIN { printf "%.3f", a - b }')"
            # Against the medians: the decision as measured, and net of the baseline.
            met="raw $(within "$d_median" 1), net $(within "$n_median" 1)"
            printf '| %s | %s | %s / %s | %s / %s | %s / %s | %s |\n' "$algorithm" \
                "$(keys_label "$keys")" "$d_best" "$d_median" "$b_best" "$b_median" \
                "$n_best" "$n_median" "$met"
        done
    done
)"

read -r _ _ _ _ final_entries <<<"$(memory_stats)"
shared_bytes="$(psql -X -A -t -d "$database" -c "SELECT shared_bytes FROM ratelimit.memory_stats")"
capacity="$(psql -X -A -t -d "$database" -c "SELECT capacity FROM ratelimit.memory_stats")"

finished_at="$(date +%s)"
run_time="$(((finished_at - started_at) / 60)) min $(((finished_at - started_at) % 60)) s"
if [ -n "$summary" ]; then
    table="$table

$summary"
fi
table="$table

### In-server cost of one decision

One query makes $in_server_calls memory-engine decisions (\`bench/memory/in_server.sql\`); its
time over the calls is a decision's cost inside the server, with no round trip. The baseline is
the same query with \`octet_length(key)\` in place of the decision (generate_series, the key's
concatenation, one function call and the count); decision − baseline is what the decision
itself adds. $in_server_repeats runs of each, alternating.

$in_server_table"

notes() {
    echo "- Extension: ratelimit $extension_version, \`ratelimit.consume(key, limit, period, 1," \
        "p_algorithm => ..., p_engine => 'memory')\` (bench/memory/consume.sql)"
    echo "- Memory engine: shared_preload_libraries = 'ratelimit', ratelimit.memory_capacity =" \
        "$memory_capacity (memory_stats: capacity $capacity entries, $shared_bytes bytes of" \
        "shared memory; $final_entries entries at the end)"
    echo "- Redis: $redis_version, a throwaway \`redis-server\` with no persistence (--save ''," \
        "--appendonly no), the Lua script bench/memory/fixed_window.lua run with EVAL (sent" \
        "without its comment lines): INCR the key, EXPIRE it for $period_seconds s when the" \
        "count becomes 1, allowed while the count is within the limit. \`redis-benchmark -c" \
        "<clients> --threads <2, 1 for one client> -n <requests> [-r 100000] EVAL ... 1" \
        "redis:<keys>:__rand_int__ $limit $period_seconds\`, pipeline 1 (one request per" \
        "round trip); a 5,000-request probe then a warm-up sized to ${warmup_seconds}s, then" \
        "a run sized to ${seconds}s. Redis's own floor: \`PING\` the same way"
    echo "- Transport: TCP to 127.0.0.1 for both (pgbench -h 127.0.0.1, redis-benchmark -h" \
        "127.0.0.1), one connection per client; the load generators run on the same CPUs"
    echo "- Keys: hot = one key for every call; 100k = a key drawn at random among 100,000" \
        "for each call. Every key gets its first call before it is measured (populate.sql," \
        "populate.lua), so the runs update entries that exist. The memory engine's key sets" \
        "are shared by the algorithms (a key last called with another algorithm starts" \
        "afresh at its first call), so it never holds many more than 100,000 entries"
    echo "- Limits: $limit per $period (burst = limit for the buckets; the same for Redis)," \
        "so every call is allowed and counts. The first call of a token_bucket or gcra key" \
        "takes half the burst, so that its bucket stays months from full (a full bucket is an" \
        "idle key, which the engine may free) and every later call updates a live entry"
    local clients floors=""
    for clients in "${clients_list[@]}"; do
        floors+="${floors:+; }$clients client$([ "$clients" = 1 ] || echo s): SELECT 1"
        floors+=" $(printf '%.0f / %.0f' "${tps[floor/$clients/start]}" "${tps[floor/$clients/end]}")"
        floors+=", PING $(printf '%.0f / %.0f' "${tps[ping/$clients/start]}" "${tps[ping/$clients/end]}")"
    done
    echo "- Floors: \`SELECT 1\` and Redis \`PING\` at each client count at the start and at the" \
        "end of the pass; the table shows the higher (start / end: $floors)"
    echo "- Ratios: to the SELECT 1 floor and to Redis PING at the same client count; to Redis" \
        "INCR+EXPIRE on the same key set at the same client count (the memory engine's" \
        "token_bucket and gcra against Redis's fixed window too: it is the one Redis script" \
        "measured)"
    echo "- In-server queries: psql over the Unix socket, jit and parallel workers off; the" \
        "key of row g is prefix || (1 + g % keys); times from clock_timestamp() just before" \
        "and after the query, divided by $in_server_calls"
    echo "- Total run time: $run_time (setup, populating and checks included); load average" \
        "(1, 5, 15 min) before the pass: $load_before"
}

pgbench_options=(-n -M prepared -h "$pg_host" -c "<clients>" -j "<2, 1 for one client>" -P 1 -D "<variables>")
bench_finish "Memory engine: ratelimit.consume(p_engine => 'memory') vs the SELECT 1 floor and Redis" \
    "; <case> is consume (memory engine; -D sets prefix, keys, limit, period, algorithm) or select1 (floor)" \
    notes \
    "Every call was counted (memory engine: the warm-up and measured calls = memory_stats' allowed counter's increase over the case, no call denied; Redis: the key set's counts = every call made on it so far, its first calls included):" \
    "$table"
echo "memory: total run time $run_time"
