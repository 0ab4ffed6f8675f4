# shellcheck shell=bash
# Shared machinery of the benchmarks (bench/*.sh). Source it from the repository root.
# A benchmark, not a test: a benchmark script fails only when the benchmark itself is broken (a
# pgbench error, a failed transaction, a call that was not counted), never on a timing.
#
#   bench_init NAME             settings; NAME names bench/NAME/*.sql and bench/results/NAME*
#   bench_start                 build and start a cluster (unless bench/run.sh already did),
#                               then a fresh database set up by bench/NAME/setup.sql
#   bench_case NAME SCRIPT [TABLE COLUMN FILTER]
#                               a warm-up and a measured pgbench run of bench/NAME/SCRIPT
#   bench_table_header, table_row LABEL NAME [REFERENCE]
#                               the markdown ratio table
#   bench_finish TITLE CASE_NOTE NOTES_FUNCTION COUNTED_TITLE TABLE
#                               prints the table, writes bench/results/NAME.md, drops the database
#
# Environment: BENCH_SECONDS (measured seconds per case, default 15), BENCH_WARMUP_SECONDS
# (warm-up seconds per case, default 3), BENCH_NO_BUILD (set: measure the extension already
# installed instead of building and installing the working tree). bench/run.sh also sets
# BENCH_SHARED_CLUSTER (the server is already up, PGHOST/PGPORT point at it) and BENCH_COMMAND
# (for the results file).

# PG_MAJOR=17 or 18 runs the benchmark in that major's Debian root (bench/major.sh).
source "$(dirname "${BASH_SOURCE[0]}")/major.sh"
source "$(dirname "${BASH_SOURCE[0]}")/../scripts/cluster.sh"

declare -A tps      # case name -> measured TPS
declare -A counted  # case name -> "N calls, S counted in R rows"
counted_names=()    # cases with a count check, in run order

bench_init() {
    bench_name="$1"
    seconds="${BENCH_SECONDS:-15}"
    warmup_seconds="${BENCH_WARMUP_SECONDS:-3}"
    command="${BENCH_COMMAND:-BENCH_SECONDS=$seconds BENCH_WARMUP_SECONDS=$warmup_seconds bash bench/$bench_name.sh}"
    clients=8
    pgbench_options=(-n -M prepared -c "$clients" -j "$clients")
    database=ratelimit_bench
    # Every pgbench output, kept for inspection (bench/results/ is git-ignored).
    logs="bench/results/$bench_name"
}

bench_build() {
    scripts/install-deps.sh
    if [ -n "${BENCH_NO_BUILD:-}" ]; then
        echo "bench: BENCH_NO_BUILD is set, measuring the installed extension"
        return 0
    fi
    make -s
    make -s install >/dev/null
}

# Durability stays at its defaults (fsync, synchronous_commit on): every call commits a write,
# and what it costs to make it durable is part of what a caller pays. A large max_wal_size
# keeps checkpoints out of the runs; each case starts right after an explicit CHECKPOINT.
bench_cluster_start() {
    cluster_start "shared_buffers = 512MB" "max_wal_size = 4GB"
}

bench_start() {
    if [ -z "${BENCH_SHARED_CLUSTER:-}" ]; then
        bench_build
        bench_cluster_start
    fi
    rm -rf "$logs"
    mkdir -p "$logs"
    psql -X -q -v ON_ERROR_STOP=1 -c "CREATE DATABASE $database" >/dev/null
    psql -X -q -v ON_ERROR_STOP=1 -d "$database" -f "bench/$bench_name/setup.sql" >/dev/null
    server_version="$(psql -X -A -t -d "$database" -c "SHOW server_version")"
}

# pgbench_run LOG SCRIPT SECONDS: runs one pgbench; sets run_tps and run_transactions.
# A client error aborts the client and makes pgbench exit non-zero; failed transactions are
# also reported on their own line. Either means the script is broken: stop with the log.
pgbench_run() {
    local log="$logs/$1.log"
    if ! pgbench "${pgbench_options[@]}" -T "$3" -f "bench/$bench_name/$2" "$database" >"$log" 2>&1 ||
        grep -q "aborted" "$log" ||
        grep -q "^number of failed transactions: [1-9]" "$log"; then
        echo "$bench_name: pgbench run $1 failed:" >&2
        cat "$log" >&2
        exit 1
    fi
    run_tps="$(sed -n 's/^tps = \([0-9.]*\) (without initial connection time)$/\1/p' "$log")"
    run_transactions="$(sed -n 's/^number of transactions actually processed: \([0-9]*\).*/\1/p' "$log")"
    if [ -z "$run_tps" ] || [ -z "$run_transactions" ]; then
        echo "$bench_name: cannot read the results of pgbench run $1:" >&2
        cat "$log" >&2
        exit 1
    fi
}

# bench_case NAME SCRIPT [TABLE COLUMN FILTER]: a warm-up, then the measured run. With TABLE,
# also checks that sum(COLUMN) over the rows matching FILTER equals the calls of both runs:
# a call that was not counted (say the JWT claim did not reach the session, so the caller was
# anonymous) would make the case measure something else.
bench_case() {
    local name="$1" script="$2" table="${3:-}" column="${4:-}" filter="${5:-}"
    echo "$bench_name: $name (${warmup_seconds}s warm-up, ${seconds}s measured)"
    psql -X -q -d "$database" -c "CHECKPOINT"
    pgbench_run "$name-warmup" "$script" "$warmup_seconds"
    local calls="$run_transactions"
    pgbench_run "$name" "$script" "$seconds"
    calls=$((calls + run_transactions))
    tps[$name]="$run_tps"
    if [ -n "$table" ]; then
        local rows_and_count
        rows_and_count="$(psql -X -A -t -F ' ' -d "$database" -c \
            "SELECT count(*), coalesce(sum($column), 0) FROM $table WHERE $filter")"
        local rows="${rows_and_count% *}" sum="${rows_and_count#* }"
        counted[$name]="$calls calls, $sum counted in $rows rows"
        counted_names+=("$name")
        if [ "$sum" -ne "$calls" ]; then
            echo "$bench_name: $name counted $sum calls but pgbench made $calls" >&2
            exit 1
        fi
    fi
}

# ratio A B [DECIMALS]
ratio() {
    awk -v a="$1" -v b="$2" -v d="${3:-2}" 'BEGIN { printf "%.*f", d, a / b }'
}

bench_table_header() {
    echo "| case | TPS | ratio to SELECT 1 floor | ratio extension/plpgsql |"
    echo "|---|---:|---:|---:|"
}

# table_row LABEL NAME [REFERENCE]: REFERENCE is the plpgsql case this one compares with.
# Every benchmark that uses it measures its floor as case select1.
table_row() {
    local label="$1" name="$2" reference="${3:-}" versus="—"
    if [ -n "$reference" ]; then
        versus="$(ratio "${tps[$name]}" "${tps[$reference]}")"
    fi
    printf '| %s | %.0f | %s | %s |\n' "$label" "${tps[$name]}" \
        "$(ratio "${tps[$name]}" "${tps[select1]}" 3)" "$versus"
}

# bench_finish TITLE CASE_NOTE NOTES_FUNCTION COUNTED_TITLE TABLE: CASE_NOTE ends the "Each
# case" line (empty, or "; ..."); NOTES_FUNCTION prints the benchmark's own "- ..." lines.
bench_finish() {
    local title="$1" case_note="$2" notes="$3" counted_title="$4" table="$5"
    echo
    echo "$table"

    mkdir -p bench/results
    {
        echo "# $title"
        echo
        echo "- Date: $(date -u '+%Y-%m-%d %H:%M:%S UTC')"
        echo "- PostgreSQL: $server_version"
        echo "- nproc: $(nproc) (pgbench and the server share these CPUs)"
        echo "- Command: \`$command\`"
        echo "- Each case: \`pgbench ${pgbench_options[*]} -T $seconds -f bench/$bench_name/<case>.sql $database\`" \
            "after a ${warmup_seconds}s warm-up run of the same script$case_note"
        echo "- Server: shared_buffers = 512MB, max_wal_size = 4GB, fsync and synchronous_commit" \
            "at their defaults (on); CHECKPOINT before each case"
        if [ -n "${BENCH_SHARED_CLUSTER:-}" ]; then
            echo "- Cluster: one server for every benchmark of \`bash bench/run.sh\`, run one after" \
                "the other, each in a fresh database dropped when it ends"
        fi
        "$notes"
        echo "- pgbench outputs: bench/results/$bench_name/"
        echo
        echo "$table"
        echo
        echo "$counted_title"
        echo
        local name
        for name in "${counted_names[@]}"; do
            echo "- $name: ${counted[$name]}"
        done
    } >"bench/results/$bench_name.md"
    echo
    echo "$bench_name: written to bench/results/$bench_name.md"

    # On a shared server the next benchmark must not find this one's tables (autovacuum would work
    # on them during its runs); on a throwaway one this costs nothing.
    psql -X -q -v ON_ERROR_STOP=1 -c "DROP DATABASE $database" >/dev/null
}

# choose VAR NAME VALUE ALLOWED...: the words of VALUE (spaces or commas) into array VAR; each
# must be one of ALLOWED, so that a typo fails now rather than after twenty minutes.
choose() {
    local -n chosen="$1"
    local name="$2" value="$3" word allowed found
    shift 3
    chosen=()
    for word in ${value//,/ }; do
        found=""
        for allowed in "$@"; do
            if [ "$word" = "$allowed" ]; then
                found=1
            fi
        done
        if [ -z "$found" ]; then
            echo "$(basename "$0" .sh): $name: unknown \"$word\" (expected some of: $*)" >&2
            exit 1
        fi
        chosen+=("$word")
    done
    if [ "${#chosen[@]}" -eq 0 ]; then
        echo "$(basename "$0" .sh): $name selects nothing" >&2
        exit 1
    fi
}

# bench_command SCRIPT FILTER...: sets `command`, the command line that repeats this pass (its
# seconds and whichever filters were set), for the results file.
bench_command() {
    local script="$1" filter
    shift
    command="BENCH_SECONDS=$seconds BENCH_WARMUP_SECONDS=$warmup_seconds"
    for filter in "$@"; do
        if [ -n "${!filter:-}" ]; then
            command+=" $filter=\"${!filter}\""
        fi
    done
    command+=" bash $script"
}
