#!/usr/bin/env bash
# Benchmark of batching: decisions per second of ratelimit.consume_many (10, 100 and 1,000 keys
# per call) on the memory, unlogged and table engines, next to the single calls it replaces on
# the memory engine (consume as a row, consume as one column, allow; hot key and 100k keys),
# the SELECT 1 floor, and Redis running the usual fixed-window limiter (INCR + EXPIRE in Lua)
# pipelined 100 and 1,000 deep, each case right after a SELECT 1 floor of its own. One
# PostgreSQL server, one Redis server, one pass, 8 clients.
# Then the in-server cost of a decision: one consume_many of 10,000 keys timed inside the server.
#
# Run as root from the repository root:  bash bench/batch.sh
#   BENCH_SECONDS         measured seconds per case (default 5; 2 with QUICK)
#   BENCH_WARMUP_SECONDS  warm-up seconds per case, not measured (default 2; 1 with QUICK)
#   QUICK                 set to 1: a smoke run, 2 s runs after 1 s warm-ups (about 2 minutes)
#   BENCH_NO_BUILD        set: measure the installed extension (bench/lib.sh)
# Writes bench/results/batch.md (settings, the table, every count check); every pgbench and
# redis-benchmark output is kept in bench/results/batch/.
set -euo pipefail
cd "$(dirname "$0")/.."
source bench/lib.sh

started_at="$(date +%s)"
load_before="$(cut -d ' ' -f 1-3 /proc/loadavg)"

quick=""
if [ "${QUICK:-0}" != 0 ] && [ -n "${QUICK:-}" ]; then
    quick=1
fi

bench_init batch
if [ -n "$quick" ]; then
    seconds="${BENCH_SECONDS:-2}"
    warmup_seconds="${BENCH_WARMUP_SECONDS:-1}"
else
    seconds="${BENCH_SECONDS:-5}"
    warmup_seconds="${BENCH_WARMUP_SECONDS:-2}"
fi
for value in "$seconds" "$warmup_seconds"; do
    if ! [[ "$value" =~ ^[1-9][0-9]*$ ]]; then
        echo "batch: BENCH_SECONDS and BENCH_WARMUP_SECONDS are whole numbers, at least 1 (got \"$value\")" >&2
        exit 1
    fi
done
command=""
for variable in QUICK BENCH_SECONDS BENCH_WARMUP_SECONDS BENCH_NO_BUILD; do
    if [ -n "${!variable:-}" ]; then
        command+="$variable=${!variable} "
    fi
done
command+="bash bench/batch.sh"

clients=8
jobs=2
# TCP to 127.0.0.1 for PostgreSQL (pgbench -h) as for Redis (redis-benchmark's default), as in
# bench/memory.sh: both pay the same kind of round trip.
pg_host=127.0.0.1
# Every statement is planned once, as an application's prepared statement is. Left to choose,
# the server would plan many.sql again at every call: with n known, a fresh plan of the
# statement that builds the keys looks cheaper than the generic one, and the planning would cost
# more than a hundred decisions. The other statements get their generic plan either way.
pg_options="-c plan_cache_mode=force_generic_plan"

# Every call is allowed (10^9 per hour, fixed_window), so every decision counts and the counts
# can be checked. The window is aligned on the hour; the pass waits for the next hour when it
# would cross one (below), so that no count starts over during it. Redis: the same limit, a
# window of 3,600 s from a key's first call.
limit=1000000000
period="1 hour"
period_seconds=3600

# The memory engine's shared memory is sized at server start: the 100k keys and the hot key,
# with room to spare, so that no key is evicted (the count checks would see it).
memory_capacity=200000
bench_cluster_start() {
    cluster_start "shared_buffers = 512MB" "max_wal_size = 4GB" \
        "shared_preload_libraries = 'ratelimit'" "ratelimit.memory_capacity = $memory_capacity"
}

key_total=100000
single_forms=(consume_star consume_row allow)
keysets=(hot 100k)
batch_engines=(memory unlogged table)
pipelines=(100 1000)

# batch_sizes ENGINE: keys per consume_many call. On the table engine every call commits and
# waits for its WAL flush; 1,000 keys a call would mostly measure the WAL of 1,000 rows.
batch_sizes() {
    if [ "$1" = table ]; then echo "10 100"; else echo "10 100 1000"; fi
}

key_count() {
    if [ "$1" = hot ]; then echo 1; else echo "$key_total"; fi
}
key_prefix() {
    if [ "$1" = hot ]; then echo hot; else echo k; fi
}

case_count=$((${#single_forms[@]} * ${#keysets[@]}))
for engine in "${batch_engines[@]}"; do
    for n in $(batch_sizes "$engine"); do
        case_count=$((case_count + 1))
    done
done
case_count=$((case_count + ${#pipelines[@]}))
# Each case is measured right after a SELECT 1 floor of its own (floor_measure).
case_count=$((case_count * 2))
# About a second per case for the CHECKPOINT, the connections and the checks; about 20 s to
# populate the keys and start the servers.
expected=$((case_count * (seconds + warmup_seconds + 1) + 20))
echo "batch: $case_count cases of ${warmup_seconds}s + ${seconds}s and ${#keysets[@]} in-server" \
    "timings, about $((expected / 60)) min $((expected % 60)) s"
# The in-server timings take a second or two each.
case_count=$((case_count + ${#keysets[@]}))

# --- Redis: a throwaway server, as bench/memory.sh starts it, stopped on exit -------------

redis_dir="" redis_port="" redis_version=""

redis_cli() {
    redis-cli -h 127.0.0.1 -p "$redis_port" "$@"
}

# No persistence: the counters live in memory only, like the memory engine's. As root it runs
# as the redis user of the Debian package, never as root.
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
            echo "batch: Redis $redis_version running in $redis_dir on port $redis_port"
            return 0
        fi
        sleep 0.1
    done
    echo "batch: Redis did not start:" >&2
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
    echo "batch: Redis stopped"
}

# lua FILE: a script of bench/memory/ (the same as bench/memory.sh's) without its comment
# lines, which EVAL would otherwise send on every call.
lua() {
    grep -v '^--' "bench/memory/$1"
}

# --- The pass waits rather than cross an hour ---------------------------------------------

# The fixed window is aligned on the hour: a pass that crossed one would see every count start
# over, and the count checks fail. Populating happens after this wait, so the whole pass, its
# first calls included, falls in one hour.
into_hour=$(($(date +%s) % 3600))
margin=$((expected * 2 + 60))
if [ $((into_hour + margin)) -ge 3600 ]; then
    wait_for=$((3600 - into_hour + 1))
    echo "batch: the pass (about ${expected}s, ${margin}s allowed) would cross the hour: waiting ${wait_for}s for the next one"
    sleep "$wait_for"
fi

bench_start  # cluster_start's EXIT trap stops the server; the one below stops Redis too
trap 'redis_stop; cluster_stop' EXIT
redis_start
extension_version="$(psql -X -A -t -d "$database" -c \
    "SELECT extversion FROM pg_extension WHERE extname = 'ratelimit'")"

declare -A made  # "engine/keys" -> decisions made on that key set so far
case_number=0

progress() {
    case_number=$((case_number + 1))
    echo "batch: [$case_number/$case_count] $1 (${warmup_seconds}s warm-up, ${seconds}s measured)"
}

# measure NAME SCRIPT [pgbench -D options]: a CHECKPOINT, a warm-up and the measured run; sets
# tps[NAME] and run_calls (calls of both runs).
measure() {
    local name="$1" script="$2"
    shift 2
    # -P 1: a progress line per second in the log, to see whether a run was steady.
    pgbench_options=(-n -M prepared -h "$pg_host" -c "$clients" -j "$jobs" -P 1 "$@")
    progress "${name//\// }"
    psql -X -q -d "$database" -c "CHECKPOINT"
    PGOPTIONS="$pg_options" pgbench_run "${name//\//-}-warmup" "$script" "$warmup_seconds"
    run_calls="$run_transactions"
    PGOPTIONS="$pg_options" pgbench_run "${name//\//-}" "$script" "$seconds"
    run_calls=$((run_calls + run_transactions))
    tps[$name]="$run_tps"
}

# floor_measure NAME: the SELECT 1 floor right before case NAME, as tps[floor/NAME]. The load of
# a shared machine can move the floor by half within one pass; each case is read against the
# floor measured next to it.
floor_names=()
floor_measure() {
    measure "floor/$1" select1.sql
    floor_names+=("floor/$1")
}

# memory_stats: the memory engine's counters as "allowed denied entries".
memory_stats() {
    psql -X -A -t -F ' ' -d "$database" -c "SELECT allowed, denied, entries FROM ratelimit.memory_stats"
}

# counted ENGINE KEYS: "keys calls" held by the key set on the engine (bench/batch/counted.sql).
counted_in() {
    psql -X -q -A -t -v ON_ERROR_STOP=1 -d "$database" -v engine="$1" \
        -v prefix="$(key_prefix "$2")" -v keys="$(key_count "$2")" -v limit="$limit" \
        -v period="$period" -f bench/batch/counted.sql
}

# check NAME ENGINE KEYS DECISIONS BEFORE: after a case, the key set must hold every decision
# made on it so far (first calls, every warm-up and measured run), in every one of its keys;
# on the memory engine, memory_stats must count the case's DECISIONS as allowed since BEFORE
# (a memory_stats line), none denied, and no key added or lost. A decision that was not
# counted, or was denied, would mean the case measured something else.
check() {
    local name="$1" engine="$2" keys="$3" decisions="$4" before="$5" rows sum detail
    made[$engine/$keys]=$((${made[$engine/$keys]} + decisions))
    read -r rows sum <<<"$(counted_in "$engine" "$keys")"
    if [ "$rows" -ne "$(key_count "$keys")" ] || [ "$sum" -ne "${made[$engine/$keys]}" ]; then
        echo "batch: $name: the $keys keys ($engine) hold $sum decisions in $rows keys, for" \
            "${made[$engine/$keys]} made on $(key_count "$keys") keys" >&2
        exit 1
    fi
    detail="$decisions decisions; ${made[$engine/$keys]} made on the set so far, $sum counted in $rows keys"
    if [ "$engine" = memory ]; then
        local a0 d0 n0 a1 d1 n1
        read -r a0 d0 n0 <<<"$before"
        read -r a1 d1 n1 <<<"$(memory_stats)"
        if [ $((a1 - a0)) -ne "$decisions" ] || [ $((d1 - d0)) -ne 0 ] || [ "$n1" -ne "$n0" ]; then
            echo "batch: $name: $decisions decisions made, but memory_stats counted $((a1 - a0))" \
                "allowed and $((d1 - d0)) denied, and holds $n1 keys (before: $n0)" >&2
            exit 1
        fi
        detail+="; memory_stats: allowed +$((a1 - a0)), denied +$((d1 - d0)), keys $n1"
    fi
    counted[$name]="$detail"
    counted_names+=("$name")
}

# populate ENGINE: the first call of every key of the 100k set (and of the hot key on the
# memory engine), then a VACUUM ANALYZE of the table engines' tables.
populate() {
    local engine="$1" allowed=0 first
    for first in $(seq 0 10000 $((key_total - 1))); do
        allowed=$((allowed + $(psql -X -q -A -t -v ON_ERROR_STOP=1 -d "$database" \
            -v engine="$engine" -v first="$first" -v limit="$limit" -v period="$period" \
            -f bench/batch/populate.sql)))
    done
    if [ "$allowed" -ne "$key_total" ]; then
        echo "batch: populating $engine: $allowed of $key_total first calls allowed" >&2
        exit 1
    fi
    made[$engine/100k]="$key_total"
    if [ "$engine" = memory ]; then
        allowed="$(psql -X -q -A -t -v ON_ERROR_STOP=1 -d "$database" -c \
            "SELECT ratelimit.allow('hot0', $limit, '$period', 1, 'fixed_window', 'memory')")"
        if [ "$allowed" != t ]; then
            echo "batch: populating the hot key: not allowed" >&2
            exit 1
        fi
        made[memory/hot]=1
    else
        psql -X -q -d "$database" -c "VACUUM ANALYZE ratelimit.key_state, ratelimit.key_state_unlogged"
    fi
}

# redis_benchmark LOG REQUESTS ARGS...: one redis-benchmark run at 8 clients, 2 threads (like
# pgbench's -j 2); sets run_rps, the requests (decisions) per second. An error reply is printed
# and the run goes on, so the log is searched for one.
redis_benchmark() {
    local log="$logs/$1.log" requests="$2"
    shift 2
    if ! redis-benchmark -h 127.0.0.1 -p "$redis_port" -c "$clients" -n "$requests" \
        --threads "$jobs" --csv "$@" >"$log" 2>&1 || grep -qi "error" "$log"; then
        echo "batch: redis-benchmark run $1 failed:" >&2
        cat "$log" >&2
        exit 1
    fi
    # The last CSV line: "test","rps",... with the test possibly holding commas; rps is the 7th
    # field from the end.
    run_rps="$(tail -n 1 "$log" | awk -F, '{ gsub(/"/, "", $(NF - 6)); print $(NF - 6) }')"
    if ! awk -v r="$run_rps" 'BEGIN { exit !(r + 0 > 0) }'; then
        echo "batch: cannot read the requests per second of redis-benchmark run $1:" >&2
        cat "$log" >&2
        exit 1
    fi
}

# redis_measure NAME PIPELINE: the fixed-window script over the 100k Redis keys, pipelined
# PIPELINE deep; a probe sizes the warm-up, the warm-up sizes the measured run, so that each
# lasts about its seconds. Sets tps[NAME] and run_calls (requests of all three runs). Every
# client sends whole pipelines, so a run's requests are a multiple of PIPELINE x clients, and
# its count is exact.
redis_measure() {
    local name="$1" pipeline="$2" requests unit=$(($2 * clients))
    local args=(-P "$pipeline" -r "$key_total" EVAL "$(lua fixed_window.lua)" 1
        "redis:100k:__rand_int__" "$limit" "$period_seconds")
    progress "${name//\// }"
    requests=$((pipeline * clients * 100))
    redis_benchmark "${name//\//-}-probe" "$requests" "${args[@]}"
    run_calls="$requests"
    requests="$(awk -v r="$run_rps" -v s="$warmup_seconds" -v u="$unit" 'BEGIN { printf "%d", r * s / u + 1 }')"
    requests=$((requests * unit))
    redis_benchmark "${name//\//-}-warmup" "$requests" "${args[@]}"
    run_calls=$((run_calls + requests))
    requests="$(awk -v r="$run_rps" -v s="$seconds" -v u="$unit" 'BEGIN { printf "%d", r * s / u + 1 }')"
    requests=$((requests * unit))
    redis_benchmark "${name//\//-}" "$requests" "${args[@]}"
    run_calls=$((run_calls + requests))
    tps[$name]="$run_rps"
}

# redis_check NAME: the 100k Redis keys' counts must add up to every call made on them, and
# every key must have its expiry.
redis_check() {
    local name="$1" rows sum persistent
    read -r rows sum persistent <<<"$(redis_cli EVAL "$(lua count.lua)" 0 "redis:100k:*" | tr '\n' ' ')"
    if [ "$rows" -ne "$key_total" ] || [ "$sum" -ne "${made[redis/100k]}" ] ||
        [ "$persistent" -ne 0 ]; then
        echo "batch: $name: Redis holds $rows keys counting $sum calls ($persistent without" \
            "expiry) for $key_total keys and ${made[redis/100k]} calls made" >&2
        exit 1
    fi
    counted[$name]="${made[redis/100k]} calls made on the set so far, $sum counted in $rows keys, each with an expiry"
    counted_names+=("$name")
}

# in_server SET: in_server_rounds consume_many calls of 10,000 keys on the memory engine, each
# timed inside the server (bench/batch/in_server.sql); sets in_server[SET] to "median lowest"
# microseconds per decision, and checks that the key set and memory_stats counted every one.
in_server_rounds=20
declare -A in_server
in_server_measure() {
    local set="$1" before micros
    case_number=$((case_number + 1))
    echo "batch: [$case_number/$case_count] in-server $set ($in_server_rounds calls of 10,000 keys)"
    before="$(memory_stats)"
    micros="$(psql -X -q -A -t -v ON_ERROR_STOP=1 -d "$database" -v set="$set" \
        -v rounds="$in_server_rounds" -v limit="$limit" -v period="$period" \
        -f bench/batch/in_server.sql | sort -g)"
    if [ "$(wc -l <<<"$micros")" -ne "$in_server_rounds" ]; then
        echo "batch: in-server $set: expected $in_server_rounds timings, got: $micros" >&2
        exit 1
    fi
    in_server[$set]="$(awk '{ v[NR] = $1 } END { printf "%.3f %.3f", (v[int((NR + 1) / 2)] + v[int(NR / 2) + 1]) / 2, v[1] }' <<<"$micros")"
    check "in-server/$set" memory "$set" $((in_server_rounds * 10000)) "$before"
}

# --- Measuring ---------------------------------------------------------------------------

# Redis, pipelined: each request of a pipeline is one decision.
populated="$(redis_cli EVAL "$(lua populate.lua)" 0 "redis:100k:" "$key_total" "$period_seconds")"
if [ "$populated" -ne "$key_total" ]; then
    echo "batch: populating Redis created $populated keys" >&2
    exit 1
fi
made[redis/100k]="$key_total"
for pipeline in "${pipelines[@]}"; do
    name="redis/P$pipeline"
    floor_measure "$name"
    redis_measure "$name" "$pipeline"
    made[redis/100k]=$((${made[redis/100k]} + run_calls))
    redis_check "$name"
done

# The memory engine: the single calls, then consume_many; then the unlogged and table engines.
for engine in "${batch_engines[@]}"; do
    echo "batch: first call of every key, $engine engine"
    populate "$engine"
    if [ "$engine" = memory ]; then
        for keys in "${keysets[@]}"; do
            for form in "${single_forms[@]}"; do
                name="$form/$keys"
                floor_measure "$name"
                before="$(memory_stats)"
                measure "$name" "$form.sql" -D "prefix=$(key_prefix "$keys")" \
                    -D "keys=$(key_count "$keys")" -D "limit=$limit" -D "period=$period"
                check "$name" memory "$keys" "$run_calls" "$before"
            done
        done
    fi
    for n in $(batch_sizes "$engine"); do
        name="many/$engine/$n"
        floor_measure "$name"
        before="$(memory_stats)"
        measure "$name" many.sql -D "n=$n" -D "limit=$limit" -D "period=$period" \
            -D "engine=$engine"
        check "$name" "$engine" 100k $((run_calls * n)) "$before"
    done
    if [ "$engine" = memory ]; then
        for keys in "${keysets[@]}"; do
            in_server_measure "$keys"
        done
    fi
done

# The floor row: the median of the floors, and their range.
floors="$(for name in "${floor_names[@]}"; do echo "${tps[$name]}"; done | sort -g)"
tps[select1]="$(awk '{ v[NR] = $1 } END { print (v[int((NR + 1) / 2)] + v[int(NR / 2) + 1]) / 2 }' <<<"$floors")"
floor_range="$(awk 'NR == 1 { low = $1 } { high = $1 } END { printf "%.0f to %.0f", low, high }' <<<"$floors")"

# --- The results ----------------------------------------------------------------------

keys_label() {
    if [ "$1" = hot ]; then echo "hot key"; else echo "100k keys"; fi
}

form_label() {
    case "$1" in
        consume_star) echo "\`SELECT * FROM ratelimit.consume(...)\`" ;;
        consume_row) echo "\`SELECT ratelimit.consume(...)\`" ;;
        allow) echo "\`SELECT ratelimit.allow(...)\`" ;;
    esac
}

# row LABEL ENGINE KEYS PER_CALL CALLS_PER_S DECISIONS_PER_S FLOOR_CALLS_PER_S
row() {
    local calls="—"
    if [ -n "$5" ]; then
        calls="$(printf '%.0f' "$5")"
    fi
    printf '| %s | %s | %s | %s | %s | %.0f | %.0f | %s |\n' "$1" "$2" "$3" "$4" "$calls" "$6" \
        "$7" "$(ratio "$6" "$7" 3)"
}

table="$(
    echo "| call | engine | keys | decisions per call | calls/s | decisions/s | floor calls/s | x floor |"
    echo "|---|---|---|---:|---:|---:|---:|---:|"
    row "\`SELECT 1\` (floor, median)" — — — "${tps[select1]}" "${tps[select1]}" "${tps[select1]}"
    for keys in "${keysets[@]}"; do
        for form in "${single_forms[@]}"; do
            name="$form/$keys"
            row "$(form_label "$form")" memory "$(keys_label "$keys")" 1 "${tps[$name]}" \
                "${tps[$name]}" "${tps[floor/$name]}"
        done
    done
    for engine in "${batch_engines[@]}"; do
        for n in $(batch_sizes "$engine"); do
            name="many/$engine/$n"
            row "\`ratelimit.consume_many(...)\`" "$engine" "$n of 100k" "$n" "${tps[$name]}" \
                "$(awk -v t="${tps[$name]}" -v n="$n" 'BEGIN { print t * n }')" "${tps[floor/$name]}"
        done
    done
    for pipeline in "${pipelines[@]}"; do
        name="redis/P$pipeline"
        row "Redis INCR+EXPIRE (EVAL), pipeline $pipeline" Redis "100k keys" \
            "1 ($pipeline a round trip)" "" "${tps[$name]}" "${tps[floor/$name]}"
    done
)"

finished_at="$(date +%s)"
run_time="$(((finished_at - started_at) / 60)) min $(((finished_at - started_at) % 60)) s"
read -r _ _ final_entries <<<"$(memory_stats)"
table="$table

- **calls/s**: pgbench transactions per second, all $clients clients together (one call per
  transaction). **decisions/s**: calls/s × decisions per call; for Redis, the requests per
  second redis-benchmark reports, each one decision. **floor calls/s**: \`SELECT 1\` measured
  right before the case. **x floor**: decisions/s over that floor's calls/s; for a single call,
  the share of the floor's round trips it keeps.

| in-server: one \`consume_many\` of 10,000 keys, memory engine | µs per decision, median of $in_server_rounds | lowest |
|---|---:|---:|
| hot key (the same key 10,000 times) | ${in_server[hot]% *} | ${in_server[hot]#* } |
| 100k keys (10,000 distinct keys a call) | ${in_server[100k]% *} | ${in_server[100k]#* } |

- **in-server**: clock_timestamp() around the call alone, inside the server
  (bench/batch/in_server.sql), divided by its 10,000 decisions: what a decision costs once its
  statement runs, with no round trip, no parsing and no output."

notes() {
    echo "- Extension: ratelimit $extension_version; server started with" \
        "shared_preload_libraries = 'ratelimit', ratelimit.memory_capacity = $memory_capacity" \
        "($final_entries keys in the memory engine at the end)"
    echo "- Calls (bench/batch/*.sql): \`ratelimit.consume(key, $limit, '$period', 1," \
        "'fixed_window', 'memory')\` read as a row (\`SELECT * FROM\`, consume_star.sql) and as" \
        "one composite column (consume_row.sql), \`ratelimit.allow(...)\` with the same" \
        "arguments (allow.sql); \`ratelimit.consume_many(keys, $limit, '$period', 1," \
        "'fixed_window', engine)\` on n consecutive keys of the 100k set from a random offset," \
        "the array built in the statement (many.sql)"
    echo "- Keys: hot = one key (hot0) for every call; 100k = k0 .. k99999, a key drawn at random" \
        "for each single call, n consecutive ones (modulo 100,000) for consume_many. Every key" \
        "gets its first call on each engine before it is measured (populate.sql), so the" \
        "measured calls update keys that exist. The table engine is measured with 10 and 100" \
        "keys a call only: each call commits, and waits for its WAL flush"
    echo "- Every decision is allowed ($limit per $period, fixed_window, aligned on the hour;" \
        "the pass waits for the next hour rather than cross one). After each case the key set" \
        "must hold every decision made on it so far (a peek at each key on the memory engine," \
        "the rows on the table engines) and, on the memory engine, memory_stats must count the" \
        "case's decisions as allowed, none denied, no key added or lost"
    echo "- Redis: $redis_version, a throwaway \`redis-server\` with no persistence, the Lua" \
        "script bench/memory/fixed_window.lua run with EVAL (INCR the key, EXPIRE it for" \
        "$period_seconds s when the count becomes 1): \`redis-benchmark -c $clients --threads" \
        "$jobs -P <100 or 1000> -r $key_total -n <requests> EVAL ... 1 redis:100k:__rand_int__" \
        "$limit $period_seconds\` over the 100k keys, populated first (populate.lua); a probe," \
        "then a warm-up sized to ${warmup_seconds}s, then a run sized to ${seconds}s. After each" \
        "case the keys' counts must add up to every call made on them (count.lua)"
    echo "- Transport: TCP to 127.0.0.1 for both (pgbench -h 127.0.0.1, redis-benchmark -h" \
        "127.0.0.1), one connection per client; the load generators run on the same CPUs"
    echo "- Planning: every statement is planned once (plan_cache_mode = force_generic_plan, as" \
        "an application's prepared statement is); left to choose, the server plans many.sql" \
        "again at every call"
    echo "- Floor: \`SELECT 1\` right before each case, each case read against its own (the" \
        "floors ranged from $floor_range calls/s over the pass; their median is the floor row)"
    echo "- Total run time: $run_time (setup, populating and checks included); load average" \
        "(1, 5, 15 min) before the pass: $load_before"
}

pgbench_options=(-n -M prepared -h "$pg_host" -c "$clients" -j "$jobs" -P 1 -D "<variables>")
bench_finish "Batching: ratelimit.consume_many vs single calls, the SELECT 1 floor and pipelined Redis" \
    "; <case> is consume_star, consume_row, allow, many or select1 (floor); -D sets prefix, keys, n, limit, period and engine" \
    notes \
    "Every decision was counted (after each case: first calls + every decision of the warm-up and measured runs so far = what the key set holds; memory engine: memory_stats allowed):" \
    "$table"
echo "batch: total run time $run_time"
