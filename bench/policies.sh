#!/usr/bin/env bash
# Benchmark of the policy layer: calls per second of ratelimit.check, check_all and check_http
# next to the native calls underneath them (consume, consume_all with the same limit, on as
# many keys of their own), on each engine, for a hot subject and over 100,000 subjects, and
# each next to the SELECT 1 floor. One server (preloading ratelimit, for the memory engine).
#
# On a small machine a single run is too noisy to compare two calls (the floor can move by a
# third within a pass), so the pass is made of ROUNDS rounds. A round measures the floor, then
# every group of compared calls, the calls of a group one right after the other: consume, check
# (and check_http on the memory and table engines); consume_all, check_all. So the calls of a
# pair alternate over the pass (A B, A B, A B), and each ratio is taken between the two runs of
# one round, seconds apart, which cancels the slow drifts of the machine. Reported: the median
# over the rounds of each call's calls/s, of each pair's per-round ratios and of the floor, with
# the lowest and highest per-round ratio and floor (how noisy the pass was).
#
# Run as root from the repository root:  bash bench/policies.sh
#   ROUNDS          rounds (default 3; 1 with QUICK)
#   CLIENTS         pgbench clients (default 8)
#   DURATION        measured seconds per run (default 8; 3 rounds of 25 runs, about 13 minutes)
#   WARMUP          warm-up seconds before each run of the first round, not measured (default
#                   2); the later rounds warm up for 1 s (everything is warm by then)
#   QUICK           set to 1: a smoke run, DURATION=2, WARMUP=1 and ROUNDS=1 unless given, no
#                   unlogged engine; about 1.5 minutes
#   BENCH_NO_BUILD  set: measure the installed extension (bench/lib.sh)
# Writes bench/results/policies.md (settings, the table of medians, the targets, every count
# check), bench/results/policies.tsv (medians, spreads and the figures of every round) and
# bench/results/policies.png (drawn by bench/policies/plot.gp); every pgbench output is kept in
# bench/results/policies/.
set -euo pipefail
cd "$(dirname "$0")/.."
source bench/lib.sh

started_at="$(date +%s)"
# Anything else running on the machine shows in the figures: the load before the pass is
# reported with them.
load_before="$(cut -d ' ' -f 1-3 /proc/loadavg)"

quick=""
if [ "${QUICK:-0}" != 0 ] && [ -n "${QUICK:-}" ]; then
    quick=1
fi
clients_list=()
choose clients_list CLIENTS "${CLIENTS:-8}" $(seq 1 256)
if [ "${#clients_list[@]}" -ne 1 ]; then
    echo "policies: CLIENTS is one client count (got \"$CLIENTS\")" >&2
    exit 1
fi
clients="${clients_list[0]}"

bench_init policies
if [ -n "$quick" ]; then
    seconds="${DURATION:-2}"
    warmup_seconds="${WARMUP:-1}"
    rounds="${ROUNDS:-1}"
    engines=(table memory)
else
    seconds="${DURATION:-8}"
    warmup_seconds="${WARMUP:-2}"
    rounds="${ROUNDS:-3}"
    engines=(table unlogged memory)
fi
for value in "$seconds" "$warmup_seconds" "$rounds"; do
    if ! [[ "$value" =~ ^[1-9][0-9]*$ ]]; then
        echo "policies: DURATION, WARMUP and ROUNDS are whole numbers, at least 1 (got \"$value\")" >&2
        exit 1
    fi
done
# The warm-up of the rounds after the first: the data and the plans are warm by then, and the
# run only has to settle (new connections, the first calls of the run's keys).
later_warmup_seconds=1
command=""
for variable in QUICK ROUNDS CLIENTS DURATION WARMUP BENCH_NO_BUILD; do
    if [ -n "${!variable:-}" ]; then
        command+="$variable=${!variable} "
    fi
done
command+="bash bench/policies.sh"

# The engines check_all, consume_all and check_http are measured on: the fastest and the
# slowest (unlogged sits between them, and its check/consume says how the layer fares on it).
multi_engines=()
for engine in memory table; do
    if [[ " ${engines[*]} " == *" $engine "* ]]; then
        multi_engines+=("$engine")
    fi
done
keysets=(hot 100k)

# Every call must be allowed, so that every case measures a call that counts (a denied call
# writes nothing) and the counts can be checked afterwards: 10^9 per 365 days, fixed_window.
# The windows are aligned on the epoch, so no run crosses one's end, where the count would
# start over.
limit=1000000000
period="365 days"
algorithm=fixed_window

# The memory engine's shared memory is sized at server start: three memory policies over
# 100,001 subjects, and as many native keys, are 600,006 keys; room for 1,000,000 (about 124
# bytes each, 124 MB), so that no key is evicted (check_counted would see it).
memory_capacity=1000000
bench_cluster_start() {
    cluster_start "shared_buffers = 512MB" "max_wal_size = 4GB" \
        "shared_preload_libraries = 'ratelimit'" "ratelimit.memory_capacity = $memory_capacity"
}

subject_count() {
    if [ "$1" = hot ]; then echo 1; else echo 100000; fi
}

subjects_label() {
    if [ "$1" = hot ]; then echo "hot"; else echo "100k"; fi
}

# policies_of CALL ENGINE: the policies a call decides, or whose native keys
# ('native:<policy>:<subject>') it calls.
policies_of() {
    case "$1" in
        check_all | consume_all) echo "bench.$2 bench.$2.b bench.$2.c" ;;
        *) echo "bench.$2" ;;
    esac
}

# side_of CALL: native (consume, consume_all) or policy (check, check_all, check_http).
side_of() {
    case "$1" in
        consume | consume_all) echo native ;;
        *) echo policy ;;
    esac
}

# compared_with CALL: the call whose calls/s CALL's are divided by (nothing for a native call).
compared_with() {
    case "$1" in
        check) echo consume ;;
        check_all) echo consume_all ;;
        check_http) echo check ;;
    esac
}

# The groups of compared calls, in the order a round runs them: per subject set, on every
# engine consume then check (then check_http, compared with that check, on the memory and
# table engines); then consume_all and check_all. Each policy call runs right after the call
# it is compared with, so that both see the same state of the machine and of the keys.
groups=()
for keys in "${keysets[@]}"; do
    for engine in "${engines[@]}"; do
        group="consume/$engine/$keys check/$engine/$keys"
        if [[ " ${multi_engines[*]} " == *" $engine "* ]]; then
            group+=" check_http/$engine/$keys"
        fi
        groups+=("$group")
    done
    for engine in "${multi_engines[@]}"; do
        groups+=("consume_all/$engine/$keys check_all/$engine/$keys")
    done
done
# shellcheck disable=SC2206  # the groups' words are case names, without spaces or globs
cases=(${groups[*]})
runs_per_round=$((${#cases[@]} + 1))  # the cases and the floor
run_count=$((rounds * runs_per_round))
# The expected duration: every run's warm-up and measured seconds, about a second per run for
# the CHECKPOINT, the connections and the count checks, and populating the keys (about 5 s per
# engine on 2 cores).
expected=$((run_count * (seconds + 1) + runs_per_round * warmup_seconds +
    (rounds - 1) * runs_per_round * later_warmup_seconds + 5 * ${#engines[@]}))
warmups="${warmup_seconds}s warm-up"
if [ "$rounds" -gt 1 ] && [ "$warmup_seconds" -ne "$later_warmup_seconds" ]; then
    warmups+=" (${later_warmup_seconds}s from round 2 on)"
fi
echo "policies: $rounds round(s) of $runs_per_round runs (the floor and ${#cases[@]} cases), each" \
    "${seconds}s measured at $clients clients after a $warmups"
echo "policies: expected duration about $((expected / 60)) min $((expected % 60)) s, populating included"

bench_build
bench_cluster_start  # cluster_start's EXIT trap stops the server, also on failure
rm -rf "$logs"
mkdir -p "$logs"
psql -X -q -v ON_ERROR_STOP=1 -c "CREATE DATABASE $database" >/dev/null
engines_csv="$(IFS=,; echo "${engines[*]}")"
psql -X -q -v ON_ERROR_STOP=1 -d "$database" -v limit="$limit" -v period="$period" \
    -v algorithm="$algorithm" -v engines="$engines_csv" -f bench/policies/setup.sql >/dev/null
server_version="$(psql -X -A -t -d "$database" -c "SHOW server_version")"
extension_version="$(psql -X -A -t -d "$database" -c \
    "SELECT extversion FROM pg_extension WHERE extname = 'ratelimit'")"
namespaced="$(psql -X -A -t -d "$database" -c "SELECT bench.namespaced()")"

declare -A made     # "side/policy/keys" -> calls made on that side's keys of the subject set
declare -A checked  # policy -> calls made through check, check_all or check_http
for engine in "${engines[@]}"; do
    for policy in $(policies_of check_all "$engine"); do
        checked[$policy]=0
    done
done
# Each side of every engine gets its own keys, one per policy and subject: the native calls
# 'native:<policy>:<subject>' (consume), the policy calls their policy's counters (check_all
# over the three policies, which also counts in policy_stats).
populate_started="$(date +%s)"
for keys in "${keysets[@]}"; do
    echo "policies: first call of every key, $(subject_count "$keys") subject(s)"
    for engine in "${engines[@]}"; do
        for side in native policy; do
            psql -X -q -v ON_ERROR_STOP=1 -d "$database" -c \
                "CALL bench.populate('$side', '$engine', '$keys:', $(subject_count "$keys"))" >/dev/null
            for policy in $(policies_of check_all "$engine"); do
                made[$side/$policy/$keys]="$(subject_count "$keys")"
                if [ "$side" = policy ]; then
                    checked[$policy]=$((${checked[$policy]} + $(subject_count "$keys")))
                fi
            done
        done
    done
done
# Fresh statistics and vacuumed tables before anything is measured.
psql -X -q -d "$database" -c "VACUUM ANALYZE ratelimit.key_state, ratelimit.key_state_unlogged"
echo "policies: keys populated in $(($(date +%s) - populate_started)) s"

# memory_stats: the memory engine's counters as "allowed denied entries".
memory_stats() {
    psql -X -A -t -F ' ' -d "$database" -c "SELECT allowed, denied, entries FROM ratelimit.memory_stats"
}
# Every memory key now exists: the runs must neither add one (a first call) nor lose one.
memory_entries=0
if [[ " ${engines[*]} " == *" memory "* ]]; then
    memory_entries=$((2 * 3 * (1 + 100000)))
fi
read -r _ memory_denied entries <<<"$(memory_stats)"
if [ "$entries" -ne "$memory_entries" ] || [ "$memory_denied" -ne 0 ]; then
    echo "policies: after populating, the memory engine holds $entries keys ($memory_denied" \
        "calls denied) for $memory_entries populated" >&2
    exit 1
fi

jobs=2
if [ "$clients" -lt "$jobs" ]; then
    jobs="$clients"
fi
run_number=0

# measure NAME ROUND WARMUP SCRIPT [pgbench -D options]: a CHECKPOINT, a warm-up of WARMUP
# seconds and the measured run; sets tps[NAME@ROUND] and run_calls (calls of both runs).
measure() {
    local name="$1" round="$2" warmup="$3" script="$4" log
    shift 4
    log="${name//\//-}-r$round"
    # -P 1: a progress line per second in the log, to see whether a run was steady.
    pgbench_options=(-n -M prepared -c "$clients" -j "$jobs" -P 1 "$@")
    run_number=$((run_number + 1))
    echo "policies: [$run_number/$run_count] round $round/$rounds: ${name//\// }" \
        "(${warmup}s warm-up, ${seconds}s measured)"
    psql -X -q -d "$database" -c "CHECKPOINT"
    pgbench_run "$log-warmup" "$script" "$warmup"
    run_calls="$run_transactions"
    pgbench_run "$log" "$script" "$seconds"
    run_calls=$((run_calls + run_transactions))
    tps[$name@$round]="$run_tps"
}

# policy_stats POLICY: "allowed denied shadow_denied" counted by the policy layer.
policy_stats() {
    psql -X -A -t -F ' ' -d "$database" -c "SELECT coalesce(sum(allowed), 0),
        coalesce(sum(denied), 0), coalesce(sum(shadow_denied), 0)
        FROM ratelimit.policy_stats WHERE policy = '$1'"
}

# check_counted LABEL CALL ENGINE KEYS BEFORE: after every run, every key of the subject set on
# the call's side, under each policy it decides, must hold every call made on it so far (its
# first call, every run of every round): read from the rows on the table engines, peeked at on
# the memory engine (a policy's memory counters, which 0.6.0 keeps in a namespace no peek
# reaches, are left to the next checks). The policy layer must have counted every policy call
# as allowed (policy_stats), and on the memory engine every decision since BEFORE (a
# memory_stats line) must be an allowed one, on a key that existed. A call that was not
# counted, was denied or created its key would mean the run measured something else.
check_counted() {
    local name="$1" call="$2" engine="$3" keys="$4" before="$5" side policy result rows sum
    local detail="" policy_count=0
    side="$(side_of "$call")"
    for policy in $(policies_of "$call" "$engine"); do
        policy_count=$((policy_count + 1))
        made[$side/$policy/$keys]=$((${made[$side/$policy/$keys]} + run_calls))
        result="$(psql -X -A -t -F ' ' -d "$database" -c "SELECT coalesce(keys::text, '-'),
            coalesce(calls::text, '-') FROM bench.counted('$side', '$policy', '$keys:',
            $(subject_count "$keys"))")"
        read -r rows sum <<<"$result"
        detail+="${detail:+; }$policy: ${made[$side/$policy/$keys]} calls"
        if [ "$rows" != - ]; then
            if [ "$rows" -ne "$(subject_count "$keys")" ] || [ "$sum" -ne "${made[$side/$policy/$keys]}" ]; then
                echo "policies: $name: $policy's $side keys ($keys) hold $sum calls in $rows keys," \
                    "for ${made[$side/$policy/$keys]} calls made on $(subject_count "$keys") keys" >&2
                exit 1
            fi
            detail+=", $sum counted in $rows keys"
        fi
        if [ "$side" = policy ]; then
            checked[$policy]=$((${checked[$policy]} + run_calls))
            local allowed denied shadow
            read -r allowed denied shadow <<<"$(policy_stats "$policy")"
            if [ "$allowed" -ne "${checked[$policy]}" ] || [ "$denied" -ne 0 ] || [ "$shadow" -ne 0 ]; then
                echo "policies: $name: policy_stats counts $allowed allowed, $denied denied and" \
                    "$shadow shadow-denied calls of $policy, for ${checked[$policy]} policy calls made" >&2
                exit 1
            fi
            detail+=", policy_stats allowed ${checked[$policy]}"
        fi
    done
    local a0 d0 a1 d1 n1
    read -r a0 d0 _ <<<"$before"
    read -r a1 d1 n1 <<<"$(memory_stats)"
    if [ "$n1" -ne "$memory_entries" ]; then
        echo "policies: $name: the memory engine holds $n1 keys, $memory_entries were populated" >&2
        exit 1
    fi
    if [ "$engine" = memory ]; then
        if [ $((a1 - a0)) -ne $((run_calls * policy_count)) ] || [ $((d1 - d0)) -ne 0 ]; then
            echo "policies: $name: $((run_calls * policy_count)) memory decisions made, but" \
                "memory_stats counted $((a1 - a0)) allowed and $((d1 - d0)) denied" >&2
            exit 1
        fi
        detail+="; memory_stats: allowed +$((a1 - a0)), denied +$((d1 - d0)), keys $n1"
    fi
    counted[$name]="$detail"
    counted_names+=("$name")
}

# The rounds: the floor, then every group, its calls one after the other.
for round in $(seq 1 "$rounds"); do
    warmup="$warmup_seconds"
    if [ "$round" -gt 1 ]; then
        warmup="$later_warmup_seconds"
    fi
    measure floor "$round" "$warmup" select1.sql
    echo "policies:     SELECT 1: $(printf '%.0f' "${tps[floor@$round]}") calls/s"
    for group in "${groups[@]}"; do
        for name in $group; do
            IFS=/ read -r call engine keys <<<"$name"
            before="$(memory_stats)"
            measure "$name" "$round" "$warmup" "$call.sql" -D "policy=bench.$engine" \
                -D "prefix=$keys:" -D "subjects=$(subject_count "$keys")" -D "limit=$limit" \
                -D "period=$period" -D "algorithm=$algorithm" -D "engine=$engine"
            check_counted "$name, round $round" "$call" "$engine" "$keys" "$before"
            line="$(printf '%.0f' "${tps[$name@$round]}") calls/s"
            base="$(compared_with "$call")"
            if [ -n "$base" ]; then
                line+=", $call/$base $(ratio "${tps[$name@$round]}" "${tps[$base/$engine/$keys@$round]}" 3)"
            fi
            echo "policies:     $line"
        done
    done
done

# --- The results ----------------------------------------------------------------------

# median_min_max NUMBER...: "median min max" of the numbers (the median of an even count is
# the mean of the two middle ones).
median_min_max() {
    printf '%s\n' "$@" | LC_ALL=C sort -g | awk '{ v[NR] = $1 } END {
        m = NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2
        printf "%.6f %.6f %.6f\n", m, v[1], v[NR] }'
}

# Per call: the median calls/s over the rounds (tps[NAME]) and the figures of every round
# (by_round[NAME], separated by commas). Per policy call: the ratio to the call it is compared
# with in each round, their median, lowest and highest.
declare -A by_round ratio_median ratio_min ratio_max ratio_by_round
for name in floor "${cases[@]}"; do
    values=()
    for round in $(seq 1 "$rounds"); do
        values+=("${tps[$name@$round]}")
    done
    read -r "tps[$name]" low high <<<"$(median_min_max "${values[@]}")"
    by_round[$name]="$(IFS=,; echo "${values[*]}")"
    if [ "$name" = floor ]; then
        floor_min="$low" floor_max="$high"
    fi
done
for name in "${cases[@]}"; do
    IFS=/ read -r call engine keys <<<"$name"
    base="$(compared_with "$call")"
    if [ -n "$base" ]; then
        values=()
        for round in $(seq 1 "$rounds"); do
            values+=("$(ratio "${tps[$name@$round]}" "${tps[$base/$engine/$keys@$round]}" 3)")
        done
        read -r median low high <<<"$(median_min_max "${values[@]}")"
        ratio_median[$name]="$(printf '%.2f' "$median")"
        ratio_min[$name]="$(printf '%.2f' "$low")"
        ratio_max[$name]="$(printf '%.2f' "$high")"
        ratio_by_round[$name]="$(IFS=,; echo "${values[*]}")"
    fi
done

# target CALL ENGINE: the target of CALL's ratio on ENGINE ("-" when there is none).
target() {
    local call="$1" engine="$2"
    case "$call" in
        check)
            if [ "$engine" = memory ]; then echo 0.9; else echo 0.95; fi ;;
        check_http) echo 0.8 ;;
        *) echo - ;;
    esac
}

# met RATIO TARGET
met() {
    if awk -v r="$1" -v g="$2" 'BEGIN { exit !(r + 0 < g + 0) }'; then
        echo "**missed**"
    else
        echo met
    fi
}

raw="bench/results/policies.tsv"
mkdir -p bench/results
printf '%s\t' call engine subjects clients seconds calls_per_s floor_calls_per_s x_floor \
    compared_with ratio target ratio_min ratio_max rounds calls_per_s_by_round >"$raw"
printf '%s\n' ratio_by_round >>"$raw"
table="$(
    echo "| call | subjects | calls/s | x floor | ratio | spread | target |"
    echo "|---|---|---:|---:|---|---|---|"
    spread="—"
    if [ "$rounds" -gt 1 ]; then
        spread="$(printf '%.0f–%.0f calls/s' "$floor_min" "$floor_max")"
    fi
    printf '| %s (floor) | — | %.0f | 1.000 | — | %s | — |\n' "\`SELECT 1\`" "${tps[floor]}" "$spread"
    for name in "${cases[@]}"; do
        IFS=/ read -r call engine keys <<<"$name"
        share="$(ratio "${tps[$name]}" "${tps[floor]}" 3)"
        versus="-" goal="-" low="-" high="-" ratio_cell="—" spread="—" goal_cell="—"
        base="$(compared_with "$call")"
        if [ -n "$base" ]; then
            versus="${ratio_median[$name]}" low="${ratio_min[$name]}" high="${ratio_max[$name]}"
            goal="$(target "$call" "$engine")"
            ratio_cell="$call/$base $versus"
            if [ "$rounds" -gt 1 ]; then
                spread="$low–$high"
            fi
            if [ "$goal" != - ]; then
                goal_cell=">= $goal $(met "$versus" "$goal")"
            fi
        fi
        printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$call" \
            "$engine" "$(subjects_label "$keys")" "$clients" "$seconds" "${tps[$name]}" \
            "${tps[floor]}" "$share" "${base:--}" "$versus" "$goal" "$low" "$high" "$rounds" \
            "${by_round[$name]}" "${ratio_by_round[$name]:--}" >>"$raw"
        printf '| %s, %s | %s | %.0f | %s | %s | %s | %s |\n' "\`$call\`" "$engine" \
            "$(subjects_label "$keys")" "${tps[$name]}" "$share" "$ratio_cell" "$spread" "$goal_cell"
    done
)"
printf 'floor\t-\t-\t%s\t%s\t%s\t%s\t1.000\t-\t-\t-\t-\t-\t%s\t%s\t-\n' "$clients" "$seconds" \
    "${tps[floor]}" "${tps[floor]}" "$rounds" "${by_round[floor]}" >>"$raw"

# One line: how many median ratios met their target, and which missed.
summary="$(awk -F '\t' -v rounds="$rounds" '
    NR > 1 && $11 != "-" {
        n++
        if ($10 + 0 >= $11 + 0) met++
        else missed = missed (missed ? "; " : "") $1 "/" $9 " " $2 " " $3 " (" $10 " < " $11 ")"
    }
    END {
        printf "- **Targets** (check/consume: memory >= 0.9, table and unlogged >= 0.95;"
        printf " check_http/check >= 0.8), on the median ratio of %d round(s): met in %d of %d", rounds, met, n
        if (missed) printf "; missed: %s", missed
        printf "\n"
    }' "$raw")"

# The plot: per subject set, the share of the floor per call and engine, and the ratios with
# their lowest and highest round and their targets (bench/policies/plot.gp).
plotted=""
if command -v gnuplot >/dev/null; then
    for keys in "${keysets[@]}"; do
        label="$(subjects_label "$keys")"
        for call in consume check check_http consume_all check_all; do
            line="$call"
            for engine in "${engines[@]}"; do
                line+=" $(awk -F '\t' -v c="$call" -v e="$engine" -v k="$label" '
                    $1 == c && $2 == e && $3 == k { v = $8 } END { print (v == "" ? "-" : v) }' "$raw")"
            done
            echo "$line"
        done >"$logs/floor-$keys.dat"
        for call in check check_http check_all; do
            line="$call/$(compared_with "$call")"
            targets="" lows="" highs=""
            for engine in "${engines[@]}"; do
                for column in 10 12 13; do
                    value="$(awk -F '\t' -v c="$call" -v e="$engine" -v k="$label" -v n="$column" '
                        $1 == c && $2 == e && $3 == k { v = $n } END { print (v == "" ? "-" : v) }' "$raw")"
                    case "$column" in
                        10) line+=" $value" ;;
                        12) lows+=" $value" ;;
                        13) highs+=" $value" ;;
                    esac
                done
                goal="$(target "$call" "$engine")"
                if ! [[ " ${multi_engines[*]} " == *" $engine "* ]] && [ "$call" != check ]; then
                    goal=-
                fi
                targets+=" $goal"
            done
            echo "$line$targets$lows$highs"
        done >"$logs/ratio-$keys.dat"
    done
    ymax_floor="$(awk -F '\t' 'NR > 1 && $8 > m { m = $8 } END { print (m > 1 ? m : 1) * 1.15 }' "$raw")"
    ymax_ratio="$(awk -F '\t' 'NR > 1 && $13 != "-" && $13 > m { m = $13 }
        END { print (m > 1 ? m : 1) * 1.2 }' "$raw")"
    gnuplot -e "datadir='$logs'; output='bench/results/policies.png'; keysets='${keysets[*]}';
        engines='${engines[*]}'; ymax_floor=$ymax_floor; ymax_ratio=$ymax_ratio;
        rounds=$rounds" bench/policies/plot.gp
    plotted=1
else
    echo "policies: gnuplot is missing (scripts/install-deps.sh installs gnuplot-nox): no plot" >&2
fi

finished_at="$(date +%s)"
load_after="$(cut -d ' ' -f 1-3 /proc/loadavg)"
run_time="$(((finished_at - started_at) / 60)) min $(((finished_at - started_at) % 60)) s"
table="$table

- **calls/s**: the median over the rounds. **x floor**: that median over the floor's median.
  **ratio**: the median of the per-round ratios, each between the two calls' runs of one round.
  **spread**: the lowest and the highest per-round ratio (for the floor, its lowest and highest
  calls/s)
$summary"
if [ -n "$plotted" ]; then
    table="$table

![calls/s over the floor, and the policy calls over the native calls](policies.png)"
fi

notes() {
    local multi_label="${multi_engines[*]}"
    echo "- Extension: ratelimit $extension_version; server started with" \
        "shared_preload_libraries = 'ratelimit', ratelimit.memory_capacity = $memory_capacity"
    echo "- Calls (bench/policies/*.sql): \`ratelimit.check(policy, subject)\` on a policy of" \
        "$limit calls per $period ($algorithm) on an engine (bench.<engine>), against" \
        "\`ratelimit.consume(key, $limit, '$period', 1, '$algorithm', engine)\` on a key of its" \
        "own per subject, 'native:<policy>:<subject>'; \`ratelimit.check_all\` over three such" \
        "policies (bench.<engine>, .b, .c) and one subject, against \`ratelimit.consume_all\` on" \
        "the three native keys; \`ratelimit.check_http\` on one policy, against \`check\`." \
        "Counters of policies: $(if [ "$namespaced" = t ]; then echo "in a namespace per policy" \
        "(rows (policy, subject))"; else echo "under the key '<policy>:<subject>'"; fi)"
    echo "- Subjects: hot = one subject for every call; 100k = a subject drawn at random among" \
        "100,000 for each call. Every key of both sides is populated before anything is measured" \
        "(consume on the native keys, check_all on the policies), so the runs update keys that" \
        "exist"
    echo "- Every call is allowed (10^9 per 365 days, aligned windows no run crosses). After each" \
        "run the keys must hold every call made on them (the rows of the table engines, a peek" \
        "at each native memory key), policy_stats must count every policy call as allowed, and" \
        "memory_stats must count every memory decision as allowed, with no key added or lost"
    echo "- Engines: ${engines[*]} for consume and check; ${multi_engines[*]} for check_http," \
        "check_all and consume_all"
    echo "- Rounds: $rounds. A round runs the floor, then each group of compared calls, its calls" \
        "one right after the other: consume, check (and check_http on ${multi_label// / and }) per" \
        "engine; consume_all, check_all. So the calls of a pair alternate over the pass, and each" \
        "ratio is taken between two runs of the same round"
    local floors="" round
    for round in $(seq 1 "$rounds"); do
        floors+="${floors:+, }$(printf '%.0f' "${tps[floor@$round]}")"
    done
    if [ "$rounds" -gt 1 ]; then
        echo "- Floor: \`SELECT 1\` at the start of each round: $floors calls/s; median" \
            "$(printf '%.0f' "${tps[floor]}"), min–max $(printf '%.0f–%.0f' "$floor_min" "$floor_max")" \
            "($(awk -v a="$floor_min" -v b="$floor_max" -v m="${tps[floor]}" \
                'BEGIN { printf "%.0f", 100 * (b - a) / m }')% of the median)"
    else
        echo "- Floor: \`SELECT 1\` measured once, at the start ($floors calls/s); one round," \
            "so no spread"
    fi
    echo "- Load average before the pass: $load_before; after it: $load_after"
    echo "- Raw figures: bench/results/policies.tsv (medians, lowest and highest ratio, and the" \
        "calls/s and ratio of every round, in round order)"
    echo "- Total run time: $run_time (setup, populating and checks included)"
}

pgbench_options=(-n -M prepared -c "$clients" -j "$jobs" -P 1 -D "<variables>")
bench_finish "Policy layer: check, check_all, check_http vs consume, consume_all" \
    "${warmups#"${warmup_seconds}s warm-up"}; <case> is consume, check, check_http, consume_all, check_all or select1 (floor); -D sets policy, prefix, subjects, limit, period, algorithm and engine" \
    notes \
    "Every call was counted (after each run: first calls + every call of the warm-up and measured runs so far = what the keys hold; policy calls = policy_stats allowed):" \
    "$table"
echo "policies: raw figures in $raw"
if [ -n "$plotted" ]; then
    echo "policies: plot in bench/results/policies.png"
fi
echo "policies: total run time $run_time (expected about $((expected / 60)) min $((expected % 60)) s)"
