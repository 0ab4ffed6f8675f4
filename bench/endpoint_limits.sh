#!/usr/bin/env bash
# Benchmark for the hourly endpoint limits: transactions per second of the extension's
# increment_rate_limit against a plpgsql reference of the original function (one INSERT ... ON
# CONFLICT DO UPDATE), with pgbench, on a hot user (every call on one row) and over 10k users,
# next to the SELECT 1 floor.
#
# Run as root from the repository root:  BENCH_SECONDS=15 bash bench/endpoint_limits.sh
# (see bench/lib.sh for the settings). Prints a markdown table and writes it to
# bench/results/endpoint_limits.md. bench/run.sh runs it with the other drop-in functions'
# benchmarks on one server.
set -euo pipefail
cd "$(dirname "$0")/.."
source bench/lib.sh

bench_init endpoint_limits
source bench/drop_in_engines.sh
bench_start

# Every call adds 1 to its window's counter, allowed or not: sum(counter) is the calls made.
bench_case select1 select1.sql
bench_case ext_hot ext_hot.sql rate_limits counter "endpoint = 'bench_ext_hot'"
bench_case plpgsql_hot plpgsql_hot.sql bench_rate_limits counter "endpoint = 'bench_plpgsql_hot'"
bench_case ext_10k ext_10k.sql rate_limits counter "endpoint = 'bench_ext_10k'"
bench_case plpgsql_10k plpgsql_10k.sql bench_rate_limits counter "endpoint = 'bench_plpgsql_10k'"
engine_case unlogged ext_hot ext_hot.sql "drop-in/rate_limits" '%:bench_ext_hot'
engine_case unlogged ext_10k ext_10k.sql "drop-in/rate_limits" '%:bench_ext_10k'
engine_case memory ext_hot ext_hot.sql
engine_case memory ext_10k ext_10k.sql

table="$(
    bench_table_header
    table_row 'floor: `SELECT 1`' select1
    table_row 'extension `increment_rate_limit`, hot user' ext_hot plpgsql_hot
    table_row 'plpgsql reference, hot user' plpgsql_hot
    table_row 'extension `increment_rate_limit`, 10k users' ext_10k plpgsql_10k
    table_row 'plpgsql reference, 10k users' plpgsql_10k
    engine_row '`increment_rate_limit`, dropin_engine = unlogged, hot user' unlogged ext_hot plpgsql_hot
    engine_row '`increment_rate_limit`, dropin_engine = memory, hot user' memory ext_hot plpgsql_hot
    engine_row '`increment_rate_limit`, dropin_engine = unlogged, 10k users' unlogged ext_10k plpgsql_10k
    engine_row '`increment_rate_limit`, dropin_engine = memory, 10k users' memory ext_10k plpgsql_10k
)"

notes() {
    echo "- Reference: \`bench_plpgsql_increment_rate_limit\` (bench/endpoint_limits/setup.sql)," \
        "the original function's semantics written as one \`INSERT ... ON CONFLICT (user_id," \
        "endpoint, window_start) DO UPDATE SET counter = counter + p_increment RETURNING counter\` on the" \
        "window aligned from \`clock_timestamp()\`, returning the same jsonb; its table has the" \
        "extension's columns, constraints, fillfactor (70), indexes and logging"
    echo "- Calls: limit 1000000 per 3600 s window, increment 1, so nearly every call is" \
        "allowed; both implementations add to the counter whether a call is allowed or denied," \
        "so the limit hardly changes the cost. No row is pre-populated: each user's first call" \
        "in a window inserts, mostly during the warm-up (a run that crosses an aligned hour" \
        "starts new rows)"
    echo "- Hot user: every call updates the same row and holds its lock until its commit" \
        "is flushed, so the calls run one at a time: the rest of the call plus a WAL flush each"
    engine_notes
}

bench_finish "Endpoint limits: extension vs plpgsql reference" "" notes \
    "Every call was counted (warm-up + measured calls = sum of counter):" "$table"
