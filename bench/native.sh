#!/usr/bin/env bash
# Benchmark of the native API: transactions per second of ratelimit.consume, for every
# algorithm and engine, against a plpgsql reference of the same algorithm on a table of the
# same kind (bench/native/reference/), on a hot key and over 100,000 keys, at 1, 8 and 32
# clients, next to the SELECT 1 floor. One cluster, one pass, every figure from one server.
#
# Run as root from the repository root:  bash bench/native.sh
#   BENCH_SECONDS         measured seconds per case (default 5; 144 cases and 6 floors, about
#                         22 minutes in all)
#   BENCH_WARMUP_SECONDS  warm-up seconds per case, not measured (default 2)
#   BENCH_ALGORITHMS      algorithms, e.g. "fixed_window,gcra" (default: all six)
#   BENCH_ENGINES         table, unlogged or both (default)
#   BENCH_KEYS            hot, 100k or both (default)
#   BENCH_CLIENTS         client counts (default "1 8 32")
#   BENCH_NO_BUILD        set: measure the installed extension (bench/lib.sh)
# Writes bench/results/native.md (settings, the table, the targets, every count check) and
# bench/results/native.png (the extension/plpgsql ratios); every pgbench output is kept in
# bench/results/native/.
set -euo pipefail
cd "$(dirname "$0")/.."
source bench/lib.sh

started_at="$(date +%s)"

all_algorithms=(fixed_window rolling_window sliding_window sliding_window_counter token_bucket gcra)
algorithms=() engines=() keysets=() clients_list=()
choose algorithms BENCH_ALGORITHMS "${BENCH_ALGORITHMS:-${all_algorithms[*]}}" "${all_algorithms[@]}"
choose engines BENCH_ENGINES "${BENCH_ENGINES:-table unlogged}" table unlogged
choose keysets BENCH_KEYS "${BENCH_KEYS:-hot 100k}" hot 100k
choose clients_list BENCH_CLIENTS "${BENCH_CLIENTS:-1 8 32}" $(seq 1 256)

bench_init native
# 144 cases by default: shorter runs than the drop-ins' keep the pass near 22 minutes. To look
# closer at some cases, select them with the filters and give them a longer BENCH_SECONDS.
seconds="${BENCH_SECONDS:-5}"
warmup_seconds="${BENCH_WARMUP_SECONDS:-2}"
bench_command bench/native.sh BENCH_ALGORITHMS BENCH_ENGINES BENCH_KEYS BENCH_CLIENTS

case_count=$((${#algorithms[@]} * ${#engines[@]} * ${#keysets[@]} * ${#clients_list[@]} * 2))
floor_count=$((2 * ${#clients_list[@]}))
echo "native: $case_count cases and $floor_count floors of ${warmup_seconds}s + ${seconds}s" \
    "(about $(((case_count + floor_count) * (seconds + warmup_seconds + 1) / 60 + 2)) minutes)"

bench_start
extension_version="$(psql -X -A -t -d "$database" -c \
    "SELECT extversion FROM pg_extension WHERE extname = 'ratelimit'")"
# consume took p_time_zone and p_max_wait last from 0.6.0 on.
if [ "$(psql -X -A -t -d "$database" -c "SELECT to_regprocedure(
        'ratelimit.consume(text, integer, interval, integer, text, text, integer)') IS NULL
        AND to_regprocedure('ratelimit.consume(text, integer, interval, integer, text, text, integer, text)') IS NULL
        AND to_regprocedure('ratelimit.consume(text, integer, interval, integer, text, text, integer, text, interval)') IS NULL")" = t ]; then
    echo "native: ratelimit $extension_version has no ratelimit.consume (0.3.0 or later needed)" >&2
    exit 1
fi

# The references must decide like the extension before their speed means anything.
echo "native: checking that the references decide like the extension"
same_decisions="$(psql -X -q -v ON_ERROR_STOP=1 -d "$database" \
    -f bench/native/same_decisions.sql 2>&1)" || {
    echo "$same_decisions" >&2
    exit 1
}
same_decisions="$(sed -n 's/.*NOTICE:  same_decisions: //p' <<<"$same_decisions")"
echo "native: $same_decisions"

# The limit of every call. All calls must be allowed, so that both sides write on every call
# (a denied call writes nothing), and the calls must be countable from the state afterwards:
# - fixed_window, sliding_window_counter: windows aligned on the epoch; at 365 days a run
#   never crosses a window's end, where the count would start over;
# - rolling_window: its window opens at the key's first call and lasts a day;
# - sliding_window: over 100k keys a day, so the log keeps every call; on the hot key 10 ms,
#   so the log stays at the calls of the last 10 ms (tens of entries, like a real limit of
#   some tens per period) instead of growing with the run;
# - token_bucket, gcra: a burst of 10^9 refilled at 3,000,000 per day (the extension wants a
#   bucket to refill within 365 days: 333 days here). The first call takes half the burst
#   (first_cost), so the bucket never fills up again and the arrival time stays months ahead
#   of the clock during the runs: each later call then takes exactly one token, or moves the
#   arrival time by exactly P/N, which check_counted reads back.
set_limit() {
    local algorithm="$1" keys="$2"
    burst="" first_cost=1
    case "$algorithm" in
        fixed_window | sliding_window_counter)
            limit=1000000000 period="365 days" period_us=31536000000000 ;;
        rolling_window)
            limit=1000000000 period="1 day" period_us=86400000000 ;;
        sliding_window)
            limit=1000000000 period="1 day" period_us=86400000000
            if [ "$keys" = hot ]; then
                period="10 milliseconds" period_us=10000
            fi
            ;;
        token_bucket | gcra)
            limit=3000000 period="1 day" period_us=86400000000 burst=1000000000
            first_cost=500000000 ;;
    esac
}

algorithm_code() {
    local i
    for i in "${!all_algorithms[@]}"; do
        if [ "${all_algorithms[$i]}" = "$1" ]; then
            echo $((i + 1))
        fi
    done
}

key_count() {
    if [ "$1" = hot ]; then echo 1; else echo 100000; fi
}

# state_table SIDE ENGINE
state_table() {
    local schema=ratelimit
    if [ "$1" = plpgsql ]; then
        schema=bench
    fi
    if [ "$2" = unlogged ]; then
        echo "$schema.key_state_unlogged"
    else
        echo "$schema.key_state"
    fi
}

declare -A made  # "side/algorithm/engine/keys" -> calls made on that key set so far

# populate SIDE ALGORITHM ENGINE KEYS: the first call of every key (bench/native/populate.sql),
# so both sides measure keys whose row exists.
#
# The session plans each of the reference's statements anew (plan_cache_mode): its table grows
# from empty to 100,000 rows during the call, and a plan cached while the table looked empty
# (a sequential scan) would then read the whole table at every call.
populate() {
    local side="$1" algorithm="$2" engine="$3" keys="$4"
    set_limit "$algorithm" "$keys"
    PGOPTIONS="-c plan_cache_mode=force_custom_plan" psql -X -q -v ON_ERROR_STOP=1 \
        -d "$database" -c "CALL bench.populate('$side', '$algorithm', '$engine', \
        '$algorithm:$keys:', $(key_count "$keys"), $limit, '$period', $first_cost, \
        ${burst:-NULL})" >/dev/null
    made[$side/$algorithm/$engine/$keys]="$(key_count "$keys")"
}

case_number=0

# measure NAME SCRIPT CLIENTS [pgbench -D options]: a CHECKPOINT, a warm-up and the measured
# run; sets tps[NAME], run_calls (calls of both runs) and measured_from (µs since the epoch).
measure() {
    local name="$1" script="$2" clients="$3" jobs=2
    shift 3
    if [ "$clients" -lt "$jobs" ]; then
        jobs="$clients"
    fi
    # -P 1: a progress line per second in the log, to see whether a run was steady.
    pgbench_options=(-n -M prepared -c "$clients" -j "$jobs" -P 1 "$@")
    case_number=$((case_number + 1))
    echo "native: [$case_number/$((case_count + floor_count))] ${name//\// } (${warmup_seconds}s warm-up, ${seconds}s measured)"
    psql -X -q -d "$database" -c "CHECKPOINT"
    pgbench_run "${name//\//-}-warmup" "$script" "$warmup_seconds"
    run_calls="$run_transactions"
    measured_from="$(date +%s%6N)"
    pgbench_run "${name//\//-}" "$script" "$seconds"
    run_calls=$((run_calls + run_transactions))
    tps[$name]="$run_tps"
}

# check_counted NAME SIDE ALGORITHM ENGINE KEYS: after a case, the key set's rows must hold
# every call made on it so far (its first calls, and every run on it), read back from the
# algorithm's state; a call that was not recorded would mean the case measured something else.
check_counted() {
    local name="$1" side="$2" algorithm="$3" engine="$4" keys="$5"
    local set="$side/$algorithm/$engine/$keys" table pattern reading result
    made[$set]=$((${made[$set]} + run_calls))
    set_limit "$algorithm" "$keys"
    table="$(state_table "$side" "$engine")"
    pattern="${algorithm//_/\\_}:$keys:%"
    local units="(SELECT sum(e.v) FROM unnest(s.log) WITH ORDINALITY AS e(v, i) WHERE e.i % 2 = 0)"
    # Calls per key, from its state (s) and, for the buckets, its state after the first call (p).
    case "$algorithm" in
        fixed_window | rolling_window | sliding_window_counter) reading="s.amount" ;;
        sliding_window) reading="$units" ;;
        token_bucket)
            # Tokens taken since the first call: what it left, less what is left, plus what
            # dripped in since (the carried fraction makes the drip exact).
            reading="1 + p.amount - s.amount
                     + div(p.carry + (s.instant - p.instant)::numeric * $limit, $period_us)" ;;
        gcra)
            # The arrival time (scaled by N) moved by P per call since the first.
            reading="1 + div(s.instant::numeric * $limit + s.carry
                             - (p.instant::numeric * $limit + p.carry), $period_us)" ;;
    esac
    result="$(psql -X -A -t -F ' ' -d "$database" -c "SELECT count(*), coalesce(sum($reading), 0),
        count(*) FILTER (WHERE s.algorithm <> $(algorithm_code "$algorithm")),
        coalesce(max(s.log[array_length(s.log, 1) - 1]), 0)
        FROM $table AS s
        LEFT JOIN bench.populated AS p ON (p.side, p.engine, p.key) = ('$side', '$engine', s.key)
        WHERE s.key LIKE '$pattern'")"
    local rows sum foreign newest
    read -r rows sum foreign newest <<<"$result"
    if [ "$rows" -ne "$(key_count "$keys")" ] || [ "$foreign" -ne 0 ]; then
        echo "native: $name: $rows rows ($foreign of another algorithm) for $(key_count "$keys") keys" >&2
        exit 1
    fi
    if [ "$algorithm" = sliding_window ] && [ "$keys" = hot ]; then
        # The 10 ms log keeps only the last calls: they must be there, and be recent.
        if [ "$sum" -lt 1 ] || [ "$sum" -gt "${made[$set]}" ] || [ "$newest" -lt "$measured_from" ]; then
            echo "native: $name: the hot key's log holds $sum units, newest at $newest µs," \
                "for ${made[$set]} calls made, the measured run from $measured_from µs" >&2
            exit 1
        fi
        counted[$name]="${made[$set]} calls; the log holds $sum units (the calls of the last 10 ms), its newest entry made after the measured run began"
    else
        if [ "$sum" -ne "${made[$set]}" ]; then
            echo "native: $name counted $sum calls but ${made[$set]} were made on its key set" >&2
            exit 1
        fi
        counted[$name]="${made[$set]} calls, $sum counted, keys: $rows"
    fi
    counted_names+=("$name")
}

# The floor is measured at the start and again at the end, and the higher kept: it is the best
# round trip the server gives, and one disturbed 5 s run would otherwise skew every ratio to it.
for clients in "${clients_list[@]}"; do
    measure "floor/$clients/start" select1.sql "$clients"
done

for algorithm in "${algorithms[@]}"; do
    for engine in "${engines[@]}"; do
        echo "native: first call of every key, $algorithm on $engine"
        for keys in "${keysets[@]}"; do
            populate extension "$algorithm" "$engine" "$keys"
            populate plpgsql "$algorithm" "$engine" "$keys"
        done
        # Fresh statistics and a vacuumed table on both sides, before either is measured.
        psql -X -q -d "$database" -c "VACUUM ANALYZE $(state_table extension "$engine"), \
            $(state_table plpgsql "$engine")"
        script_kind=window
        if [ "$algorithm" = token_bucket ] || [ "$algorithm" = gcra ]; then
            script_kind=bucket
        fi
        for keys in "${keysets[@]}"; do
            set_limit "$algorithm" "$keys"
            variables=(-D "prefix=$algorithm:$keys:" -D "keys=$(key_count "$keys")"
                -D "limit=$limit" -D "period=$period" -D "engine=$engine")
            if [ -n "$burst" ]; then
                variables+=(-D "burst=$burst")
            fi
            # Extension and reference alternate at each client count, so that both see the
            # same state of the machine and of the tables.
            for clients in "${clients_list[@]}"; do
                name="$algorithm/$engine/$keys/$clients/extension"
                measure "$name" "ext_$script_kind.sql" "$clients" "${variables[@]}" \
                    -D "algorithm=$algorithm"
                check_counted "$name" extension "$algorithm" "$engine" "$keys"
                name="$algorithm/$engine/$keys/$clients/plpgsql"
                measure "$name" "plpgsql_$algorithm.sql" "$clients" "${variables[@]}"
                check_counted "$name" plpgsql "$algorithm" "$engine" "$keys"
            done
        done
    done
done

for clients in "${clients_list[@]}"; do
    measure "floor/$clients/end" select1.sql "$clients"
    tps[floor/$clients]="$(awk -v a="${tps[floor/$clients/start]}" -v b="${tps[floor/$clients/end]}" \
        'BEGIN { print (a > b ? a : b) }')"
done

# The targets: over 100k keys the extension at least 2x the reference on the unlogged engine,
# 1.5x on the table engine; on a hot key never below it.
target() {
    if [ "$2" = hot ]; then
        echo 1
    elif [ "$1" = unlogged ]; then
        echo 2
    else
        echo 1.5
    fi
}

ratios="$logs/ratios.txt"  # engine keys algorithm clients ratio, for the summary and the plot
: >"$ratios"
table="$(
    echo "| algorithm | engine | keys | clients | extension TPS | plpgsql TPS | SELECT 1 TPS |" \
        "extension/plpgsql | target | extension/floor |"
    echo "|---|---|---|---:|---:|---:|---:|---:|---|---:|"
    for algorithm in "${algorithms[@]}"; do
        for engine in "${engines[@]}"; do
            for keys in "${keysets[@]}"; do
                for clients in "${clients_list[@]}"; do
                    extension="${tps[$algorithm/$engine/$keys/$clients/extension]}"
                    reference="${tps[$algorithm/$engine/$keys/$clients/plpgsql]}"
                    floor_tps="${tps[floor/$clients]}"
                    versus="$(ratio "$extension" "$reference")"
                    goal="$(target "$engine" "$keys")"
                    met="met"
                    if awk -v r="$versus" -v g="$goal" 'BEGIN { exit !(r < g) }'; then
                        met="**missed**"
                    fi
                    echo "$engine $keys $algorithm $clients $versus" >>"$ratios"
                    printf '| %s | %s | %s | %s | %.0f | %.0f | %.0f | %s | >= %s %s | %s |\n' \
                        "$algorithm" "$engine" "$keys" "$clients" "$extension" "$reference" \
                        "$floor_tps" "$versus" "$goal" "$met" "$(ratio "$extension" "$floor_tps" 3)"
                done
            done
        done
    done
)"

# One line per engine and key set: the range of extension/plpgsql against its target.
summary="$(
    for engine in "${engines[@]}"; do
        for keys in "${keysets[@]}"; do
            awk -v engine="$engine" -v keys="$keys" '$1 == engine && $2 == keys' "$ratios" |
                sort -g -k 5 |
                awk -v engine="$engine" -v keys="$keys" -v goal="$(target "$engine" "$keys")" '
                    { n++; r[n] = $5; case_of[n] = $3 ", " $4 ($4 == 1 ? " client" : " clients") }
                    $5 + 0 >= goal + 0 { met++ }
                    $5 + 0 < goal + 0 {
                        missed = missed (missed ? "; " : "") case_of[n] " (" $5 ")"
                    }
                    END {
                        median = n % 2 ? r[(n + 1) / 2] : (r[n / 2] + r[n / 2 + 1]) / 2
                        printf "- **%s, %s**: extension/plpgsql from %.2f (%s) to %.2f, median %.2f;", \
                            engine, keys == "hot" ? "hot key" : "100k keys", r[1], case_of[1], r[n], median
                        printf " target >= %s met in %d of %d cases", goal, met, n
                        if (missed) printf "; missed: %s", missed
                        printf "\n"
                    }'
        done
    done
)"

# The plot: one data file per key set and client count, a line per algorithm, a column per
# engine (bench/native/plot.gp).
plotted=""
if command -v gnuplot >/dev/null; then
    for keys in "${keysets[@]}"; do
        for clients in "${clients_list[@]}"; do
            for algorithm in "${algorithms[@]}"; do
                line="$algorithm"
                for engine in "${engines[@]}"; do
                    line+=" $(awk -v e="$engine" -v k="$keys" -v a="$algorithm" -v c="$clients" \
                        '$1 == e && $2 == k && $3 == a && $4 == c { print $5 }' "$ratios")"
                done
                echo "$line"
            done >"$logs/ratio-$keys-c$clients.dat"
        done
    done
    ymax="$(awk '$5 > m { m = $5 } END { print (m > 2 ? m : 2) * 1.3 }' "$ratios")"  # room for the key
    gnuplot -e "datadir='$logs'; output='bench/results/native.png'; keysets='${keysets[*]}';
        clients='${clients_list[*]}'; engines='${engines[*]}'; ymax=$ymax" bench/native/plot.gp
    plotted=1
else
    echo "native: gnuplot is missing (scripts/install-deps.sh installs gnuplot-nox): no plot" >&2
fi

finished_at="$(date +%s)"
run_time="$(((finished_at - started_at) / 60)) min $(((finished_at - started_at) % 60)) s"
table="$table

$summary"
if [ -n "$plotted" ]; then
    table="$table

![extension/plpgsql TPS ratio per algorithm](native.png)"
fi

notes() {
    echo "- Extension: ratelimit $extension_version, \`ratelimit.consume(key, limit, period, 1," \
        "p_algorithm => ..., p_engine => ...)\` (bench/native/ext_window.sql, ext_bucket.sql)"
    echo "- Reference: one plpgsql function per algorithm, \`bench.<algorithm>(key, limit, period," \
        "1, p_engine => ...)\` (bench/native/reference/), on \`bench.key_state\` or" \
        "\`bench.key_state_unlogged\`: the same columns, primary key, fillfactor (70), row level" \
        "security and logging as the extension's table of that engine (setup.sql checks it)." \
        "Each locks the key's row (SELECT ... FOR NO KEY UPDATE, INSERT ... ON CONFLICT DO" \
        "NOTHING first if missing), decides in plpgsql (numeric where a product can exceed 64" \
        "bits) and UPDATEs the row when the call changes it; SECURITY DEFINER with a pinned" \
        "search_path. Exact under concurrency, like the extension"
    echo "- Same semantics, checked before measuring (bench/native/same_decisions.sql): random" \
        "calls on both sides under a frozen, moving test clock must return the same decisions" \
        "and leave the same rows, or raise the same error: $same_decisions"
    echo "- Keys: hot = one key for every call; 100k = a key drawn at random among 100,000 for" \
        "each call. Every key is populated (its first call made, on both sides) before its" \
        "algorithm and engine are measured, so the runs update existing rows: the steady state" \
        "of a limiter that sees the same keys again and again. One key set per algorithm," \
        "engine and side, shared by its client counts"
    echo "- Limits: every call allowed, so both sides write on every call: limit 10^9 per" \
        "365 days (fixed_window, sliding_window_counter: aligned windows no run crosses), per" \
        "day (rolling_window, sliding_window over 100k keys) or per 10 ms (sliding_window on the" \
        "hot key, so its log holds the calls of the last 10 ms, tens of entries, not every call" \
        "of the run); token_bucket and gcra: burst 10^9 refilled at 3,000,000 per day, the" \
        "key's first call taking half the burst (so every later call is counted exactly: the" \
        "bucket never fills up again, the arrival time stays months ahead)"
    local clients floors=""
    for clients in "${clients_list[@]}"; do
        floors+="${floors:+; }$clients client$([ "$clients" = 1 ] || echo s): $(printf '%.0f' \
            "${tps[floor/$clients/start]}") at the start, $(printf '%.0f' "${tps[floor/$clients/end]}") at the end"
    done
    echo "- Floor: \`SELECT 1\` at each client count at the start and at the end of the pass; the" \
        "table shows the higher ($floors)"
    echo "- Clients: pgbench -c ${clients_list[*]} with -j 2 (-j 1 for one client); at each" \
        "count the extension's case, then the reference's, on the same key set"
    echo "- Targets: over 100k keys the extension at least 2x the reference on the unlogged" \
        "engine and 1.5x on the table engine; on the hot key never below it (>= 1)"
    echo "- Total run time: $run_time (setup, checks and populating included)"
}

pgbench_options=(-n -M prepared -c "<clients>" -j "<2, 1 for one client>" -P 1 -D "<variables>")
bench_finish "Native API: ratelimit.consume vs plpgsql references" \
    "; <case> is ext_window or ext_bucket (extension), plpgsql_<algorithm> (reference) or select1 (floor); -D sets prefix, keys, limit, period, engine, algorithm and burst" \
    notes \
    "Every call was counted (the key set's first calls + every call of the warm-up and measured runs so far = what its rows hold):" \
    "$table"
echo "native: total run time $run_time"
