#!/usr/bin/env bash
# Benchmark for the orphaned-user cleanup's sliding-window limits: transactions per second of
# the extension's check_rate_limit(p_key, p_limit, p_window_seconds, p_cost) against a plpgsql
# reference of the original algorithm made exact (per-key advisory lock), with pgbench, on a hot
# key and over 10k keys, next to the SELECT 1 floor; and the same calls with
# ratelimit.dropin_engine = unlogged and memory (the counts in the engines instead of
# rate_limit_buckets).
#
# Run as root from the repository root:  BENCH_SECONDS=15 bash bench/sliding_window_limits.sh
# (see bench/lib.sh for the settings). Prints a markdown table and writes it to
# bench/results/sliding_window_limits.md. bench/run.sh runs it with the other drop-in
# functions' benchmarks on one server.
set -euo pipefail
cd "$(dirname "$0")/.."
source bench/lib.sh

bench_init sliding_window_limits
source bench/drop_in_engines.sh
bench_start

# Only allowed calls are recorded; with a limit of 100000000 every call is allowed, so
# sum(count) is the calls made.
bench_case select1 select1.sql
bench_case ext_hot ext_hot.sql rate_limit_buckets count "key = 'bench_ext_hot'"
bench_case plpgsql_hot plpgsql_hot.sql bench_rate_limit_buckets count "key = 'bench_plpgsql_hot'"
bench_case ext_10k ext_10k.sql rate_limit_buckets count "key LIKE 'bench\_ext\_10k:%'"
bench_case plpgsql_10k plpgsql_10k.sql bench_rate_limit_buckets count "key LIKE 'bench\_plpgsql\_10k:%'"
# On an engine a key is a sliding_window log of (instant, units) pairs: its calls are the units.
log_units="(SELECT sum(v) FROM unnest(log) WITH ORDINALITY AS l(v, i) WHERE i % 2 = 0)"
engine_case unlogged ext_hot ext_hot.sql "drop-in/rate_limit_buckets" 'bench_ext_hot' "$log_units"
engine_case unlogged ext_10k ext_10k.sql "drop-in/rate_limit_buckets" 'bench\_ext\_10k:%' "$log_units"
engine_case memory ext_hot ext_hot.sql
engine_case memory ext_10k ext_10k.sql

table="$(
    bench_table_header
    table_row 'floor: `SELECT 1`' select1
    table_row 'extension `check_rate_limit` (4 arguments), hot key' ext_hot plpgsql_hot
    table_row 'plpgsql reference, hot key' plpgsql_hot
    table_row 'extension `check_rate_limit` (4 arguments), 10k keys' ext_10k plpgsql_10k
    table_row 'plpgsql reference, 10k keys' plpgsql_10k
    engine_row '`check_rate_limit`, dropin_engine = unlogged, hot key' unlogged ext_hot plpgsql_hot
    engine_row '`check_rate_limit`, dropin_engine = memory, hot key' memory ext_hot plpgsql_hot
    engine_row '`check_rate_limit`, dropin_engine = unlogged, 10k keys' unlogged ext_10k plpgsql_10k
    engine_row '`check_rate_limit`, dropin_engine = memory, 10k keys' memory ext_10k plpgsql_10k
)"

notes() {
    echo "- Reference: \`bench_plpgsql_check_rate_limit\` (bench/sliding_window_limits/setup.sql)," \
        "the original algorithm (sum of the key's per-second buckets in the window, then" \
        "upsert of the current bucket if allowed) after \`pg_advisory_xact_lock(hashtext(p_key))\`, so that it" \
        "is exact like the extension. The original function is not exact (two concurrent" \
        "calls can both see room for the last unit and both be recorded), so it is not the" \
        "reference. The original in-call DELETE of old buckets is left out on both sides: the" \
        "extension cleans up from a scheduled job. Its table has the extension's columns," \
        "primary key, fillfactor (70), index on bucket_time and logging"
    echo "- Calls: limit 100000000 per 60 s window, cost 1, so every call is allowed and" \
        "recorded (only allowed calls are). Called with 4 arguments: with 3 the call would be" \
        "the per-RPC \`check_rate_limit(text, integer, integer)\`"
    echo "- Hot key: each call reads every bucket of the key still in the window, one per" \
        "second that saw a call, so the scan grows with the run up to 60 rows (a case runs" \
        "${warmup_seconds}s + ${seconds}s); calls take the key's advisory lock and update the" \
        "current second's row, holding both until the commit is flushed, so they run one at a" \
        "time: the rest of the call plus a WAL flush each"
    echo "- 10k keys: most calls insert a new bucket row (a key sees about one call a second)"
    engine_notes
}

bench_finish "Sliding-window limits: extension vs plpgsql reference" "" notes \
    "Every call was counted (warm-up + measured calls = sum of count; every call was allowed):" "$table"
