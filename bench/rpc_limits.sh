#!/usr/bin/env bash
# Benchmark for the game backend's per-RPC limits: transactions per second of the extension's
# check_rate_limit and check_rate_limit_for_user against a plpgsql reference of the original
# function's algorithm, with pgbench, on a hot user (every call on one row) and over 10k users,
# next to the SELECT 1 floor; and the same calls with ratelimit.dropin_engine = unlogged and
# memory (the counts in the engines instead of rpc_rate_limits).
# A benchmark, not a test: it fails only when the benchmark itself is broken (a pgbench
# error or failed transaction), never on a timing.
#
# Run as root from the repository root:  BENCH_SECONDS=15 bash bench/rpc_limits.sh
#   BENCH_SECONDS         measured seconds per case (default 15)
#   BENCH_WARMUP_SECONDS  warm-up seconds per case, same script, not measured (default 3)
# Prints a markdown table and writes it to bench/results/rpc_limits.md. bench/run.sh runs
# it with the other drop-in functions' benchmarks on one server.
set -euo pipefail
cd "$(dirname "$0")/.."
source bench/lib.sh

bench_init rpc_limits
hot_user="00000000-0000-0000-0000-000000000001"  # the user of bench/rpc_limits/*_hot.sql
source bench/drop_in_engines.sh
bench_start

bench_case select1 select1.sql
PGOPTIONS="-c request.jwt.claim.sub=$hot_user" \
    bench_case ext_jwt_hot ext_jwt_hot.sql rpc_rate_limits call_count "rpc_name = 'bench_ext_jwt_hot'"
bench_case ext_user_hot ext_user_hot.sql rpc_rate_limits call_count "rpc_name = 'bench_ext_user_hot'"
bench_case plpgsql_hot plpgsql_hot.sql bench_rpc_rate_limits call_count "rpc_name = 'bench_plpgsql_hot'"
bench_case ext_user_10k ext_user_10k.sql rpc_rate_limits call_count "rpc_name = 'bench_ext_user_10k'"
bench_case plpgsql_10k plpgsql_10k.sql bench_rpc_rate_limits call_count "rpc_name = 'bench_plpgsql_10k'"
# ratelimit.dropin_engine: the same scripts, the counts in the engine (unlogged: key_state_unlogged's
# amount; memory: not readable from SQL, so not checked).
engine_case unlogged ext_user_hot ext_user_hot.sql "drop-in/rpc_rate_limits" '%:bench_ext_user_hot'
engine_case unlogged ext_user_10k ext_user_10k.sql "drop-in/rpc_rate_limits" '%:bench_ext_user_10k'
engine_case memory ext_user_hot ext_user_hot.sql
engine_case memory ext_user_10k ext_user_10k.sql

table="$(
    bench_table_header
    table_row 'floor: `SELECT 1`' select1
    table_row 'extension `check_rate_limit` (JWT), hot user' ext_jwt_hot plpgsql_hot
    table_row 'extension `check_rate_limit_for_user`, hot user' ext_user_hot plpgsql_hot
    table_row 'plpgsql reference, hot user' plpgsql_hot
    table_row 'extension `check_rate_limit_for_user`, 10k users' ext_user_10k plpgsql_10k
    table_row 'plpgsql reference, 10k users' plpgsql_10k
    engine_row '`check_rate_limit_for_user`, dropin_engine = unlogged, hot user' unlogged ext_user_hot plpgsql_hot
    engine_row '`check_rate_limit_for_user`, dropin_engine = memory, hot user' memory ext_user_hot plpgsql_hot
    engine_row '`check_rate_limit_for_user`, dropin_engine = unlogged, 10k users' unlogged ext_user_10k plpgsql_10k
    engine_row '`check_rate_limit_for_user`, dropin_engine = memory, 10k users' memory ext_user_10k plpgsql_10k
)"

notes() {
    echo "- Calls: limit 1000000 per 60 minutes, so nearly every call is allowed; both" \
        "implementations write the row whether a call is allowed or denied, so the limit" \
        "hardly changes the cost. No row is pre-populated: each user's first call inserts," \
        "mostly during the warm-up"
    echo "- Hot user: every call updates the same row and holds its lock until its commit" \
        "is flushed, so the calls run one at a time: the rest of the call plus a WAL flush each"
    engine_notes
}

bench_finish "Per-RPC limits: extension vs plpgsql reference" \
    "; the JWT case runs with \`PGOPTIONS='-c request.jwt.claim.sub=$hot_user'\`" \
    notes "Every call was counted (warm-up + measured calls = sum of call_count):" "$table"
