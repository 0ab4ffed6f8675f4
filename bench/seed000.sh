#!/usr/bin/env bash
# Benchmark for seed 000: transactions per second of the extension's check_rate_limit and
# check_rate_limit_for_user against a plpgsql reference of the seed's algorithm, with pgbench,
# on a hot user (every call on one row) and over 10k users, next to the SELECT 1 floor.
# A benchmark, not a test: it fails only when the benchmark itself is broken (a pgbench
# error or failed transaction), never on a timing.
#
# Run as root from the repository root:  BENCH_SECONDS=15 bash bench/seed000.sh
#   BENCH_SECONDS         measured seconds per case (default 15)
#   BENCH_WARMUP_SECONDS  warm-up seconds per case, same script, not measured (default 3)
# Prints a markdown table and writes it to bench/results/seed000.md.
set -euo pipefail
cd "$(dirname "$0")/.."

seconds="${BENCH_SECONDS:-15}"
warmup_seconds="${BENCH_WARMUP_SECONDS:-3}"
command="BENCH_SECONDS=$seconds BENCH_WARMUP_SECONDS=$warmup_seconds bash bench/seed000.sh"
clients=8
pgbench_options=(-n -M prepared -c "$clients" -j "$clients")
hot_user="00000000-0000-0000-0000-000000000001"  # the user of bench/seed000/*_hot.sql
database=ratelimit_bench

scripts/install-deps.sh
make -s
make -s install >/dev/null

# Durability stays at its defaults (fsync, synchronous_commit on): every call commits a write,
# and what it costs to make it durable is part of what a caller pays. A large max_wal_size
# keeps checkpoints out of the runs; each case starts right after an explicit CHECKPOINT.
source scripts/cluster.sh
cluster_start "shared_buffers = 512MB" "max_wal_size = 4GB"

# Every pgbench output, kept for inspection (bench/results/ is git-ignored).
logs=bench/results/seed000
rm -rf "$logs"
mkdir -p "$logs"

psql -X -q -v ON_ERROR_STOP=1 -c "CREATE DATABASE $database" >/dev/null
psql -X -q -v ON_ERROR_STOP=1 -d "$database" -f bench/seed000/setup.sql >/dev/null
server_version="$(psql -X -A -t -d "$database" -c "SHOW server_version")"

# pgbench_run LOG SCRIPT SECONDS: runs one pgbench; sets run_tps and run_transactions.
# A client error aborts the client and makes pgbench exit non-zero; failed transactions are
# also reported on their own line. Either means the script is broken: stop with the log.
pgbench_run() {
    local log="$logs/$1.log"
    if ! pgbench "${pgbench_options[@]}" -T "$3" -f "bench/seed000/$2" "$database" >"$log" 2>&1 ||
        grep -q "aborted" "$log" ||
        grep -q "^number of failed transactions: [1-9]" "$log"; then
        echo "seed000: pgbench run $1 failed:" >&2
        cat "$log" >&2
        exit 1
    fi
    run_tps="$(sed -n 's/^tps = \([0-9.]*\) (without initial connection time)$/\1/p' "$log")"
    run_transactions="$(sed -n 's/^number of transactions actually processed: \([0-9]*\).*/\1/p' "$log")"
    if [ -z "$run_tps" ] || [ -z "$run_transactions" ]; then
        echo "seed000: cannot read the results of pgbench run $1:" >&2
        cat "$log" >&2
        exit 1
    fi
}

# bench_case NAME SCRIPT [TABLE RPC_NAME]: a warm-up, then the measured run. For the rate
# limit cases, also checks that the table counted every call of both runs: a call that was
# not counted (say the JWT claim did not reach the session, so the caller was anonymous)
# would make the case measure something else.
declare -A tps
declare -A counted
bench_case() {
    local name="$1" script="$2" table="${3:-}" rpc_name="${4:-}"
    echo "seed000: $name (${warmup_seconds}s warm-up, ${seconds}s measured)"
    psql -X -q -d "$database" -c "CHECKPOINT"
    pgbench_run "$name-warmup" "$script" "$warmup_seconds"
    local calls="$run_transactions"
    pgbench_run "$name" "$script" "$seconds"
    calls=$((calls + run_transactions))
    tps[$name]="$run_tps"
    if [ -n "$table" ]; then
        local rows_and_count
        rows_and_count="$(psql -X -A -t -F ' ' -d "$database" -c \
            "SELECT count(*), coalesce(sum(call_count), 0) FROM $table WHERE rpc_name = '$rpc_name'")"
        local rows="${rows_and_count% *}" sum="${rows_and_count#* }"
        counted[$name]="$calls calls, $sum counted in $rows rows"
        if [ "$sum" -ne "$calls" ]; then
            echo "seed000: $name counted $sum calls but pgbench made $calls" >&2
            exit 1
        fi
    fi
}

bench_case select1 select1.sql
PGOPTIONS="-c request.jwt.claim.sub=$hot_user" \
    bench_case ext_jwt_hot ext_jwt_hot.sql rpc_rate_limits bench_ext_jwt_hot
bench_case ext_user_hot ext_user_hot.sql rpc_rate_limits bench_ext_user_hot
bench_case plpgsql_hot plpgsql_hot.sql bench_rpc_rate_limits bench_plpgsql_hot
bench_case ext_user_10k ext_user_10k.sql rpc_rate_limits bench_ext_user_10k
bench_case plpgsql_10k plpgsql_10k.sql bench_rpc_rate_limits bench_plpgsql_10k

# ratio A B [DECIMALS]
ratio() {
    awk -v a="$1" -v b="$2" -v d="${3:-2}" 'BEGIN { printf "%.*f", d, a / b }'
}

# table_row LABEL NAME [REFERENCE]: REFERENCE is the plpgsql case this one compares with.
table_row() {
    local label="$1" name="$2" reference="${3:-}" versus="—"
    if [ -n "$reference" ]; then
        versus="$(ratio "${tps[$name]}" "${tps[$reference]}")"
    fi
    printf '| %s | %.0f | %s | %s |\n' "$label" "${tps[$name]}" \
        "$(ratio "${tps[$name]}" "${tps[select1]}" 3)" "$versus"
}

table="$(
    echo "| case | TPS | ratio to SELECT 1 floor | ratio extension/plpgsql |"
    echo "|---|---:|---:|---:|"
    table_row 'floor: `SELECT 1`' select1
    table_row 'extension `check_rate_limit` (JWT), hot user' ext_jwt_hot plpgsql_hot
    table_row 'extension `check_rate_limit_for_user`, hot user' ext_user_hot plpgsql_hot
    table_row 'plpgsql reference, hot user' plpgsql_hot
    table_row 'extension `check_rate_limit_for_user`, 10k users' ext_user_10k plpgsql_10k
    table_row 'plpgsql reference, 10k users' plpgsql_10k
)"

echo
echo "$table"

mkdir -p bench/results
{
    echo "# Seed 000: extension vs plpgsql reference"
    echo
    echo "- Date: $(date -u '+%Y-%m-%d %H:%M:%S UTC')"
    echo "- PostgreSQL: $server_version"
    echo "- nproc: $(nproc) (pgbench and the server share these CPUs)"
    echo "- Command: \`$command\`"
    echo "- Each case: \`pgbench ${pgbench_options[*]} -T $seconds -f bench/seed000/<case>.sql $database\`" \
        "after a ${warmup_seconds}s warm-up run of the same script; the JWT case runs with" \
        "\`PGOPTIONS='-c request.jwt.claim.sub=$hot_user'\`"
    echo "- Server: shared_buffers = 512MB, max_wal_size = 4GB, fsync and synchronous_commit" \
        "at their defaults (on); CHECKPOINT before each case"
    echo "- Calls: limit 1000000 per 60 minutes, so nearly every call is allowed; both" \
        "implementations write the row whether a call is allowed or denied, so the limit" \
        "hardly changes the cost. No row is pre-populated: each user's first call inserts," \
        "mostly during the warm-up"
    echo "- Hot user: every call updates the same row and holds its lock until its commit" \
        "is flushed, so the calls run one at a time: the rest of the call plus a WAL flush each"
    echo "- pgbench outputs: bench/results/seed000/"
    echo
    echo "$table"
    echo
    echo "Every call was counted (warm-up + measured calls = sum of call_count):"
    echo
    for name in ext_jwt_hot ext_user_hot plpgsql_hot ext_user_10k plpgsql_10k; do
        echo "- $name: ${counted[$name]}"
    done
} >bench/results/seed000.md
echo
echo "seed000: written to bench/results/seed000.md"
