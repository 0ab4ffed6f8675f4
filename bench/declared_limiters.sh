#!/usr/bin/env bash
# Benchmark of declared limiters and insert limits: a function made by ratelimit.declare_limiter
# (keyed by its argument, a boolean answer) against the native consume it stands for, on one key
# and over 10,000 keys on the table engine, and over 10,000 keys on the memory engine when the
# library is preloaded; and inserts into a table with an insert limit (limit_inserts, keyed by a
# column, 10,000 users) against the same inserts into a table without one. Each against the
# SELECT 1 floor, 8 clients, one run.
# A benchmark, not a test: it fails only when the benchmark itself is broken, never on a timing.
#
# Run as root from the repository root:  BENCH_SECONDS=15 bash bench/declared_limiters.sh
#   BENCH_SECONDS         measured seconds per case (default 15)
#   BENCH_WARMUP_SECONDS  warm-up seconds per case, same script, not measured (default 3)
#   BENCH_NO_BUILD        set: measure the installed extension
# Prints a markdown table and writes it to bench/results/declared_limiters.md.
set -euo pipefail
cd "$(dirname "$0")/.."
source bench/lib.sh

bench_init declared_limiters
source bench/drop_in_engines.sh
# Its own server preloads the library, for the memory engine's cases (a server bench/run.sh
# shares may not: those cases are then skipped).
bench_cluster_start() {
    cluster_start "shared_buffers = 512MB" "max_wal_size = 4GB" "shared_preload_libraries = 'ratelimit'"
}
bench_start

bench_case select1 select1.sql
bench_case native_hot native_hot.sql
bench_case declared_hot declared_hot.sql
bench_case native_10k native_10k.sql
bench_case declared_10k declared_10k.sql
if memory_available; then
    bench_case native_memory native_memory.sql
    bench_case declared_memory declared_memory.sql
fi
bench_case insert_plain insert_plain.sql bench_posts 1 true
bench_case insert_limited insert_limited.sql bench_limited_posts 1 true

# versus NAME REFERENCE LABEL: a row whose last column compares NAME with REFERENCE.
versus() {
    if [ -n "${tps[$1]:-}" ]; then
        printf '| %s | %.0f | %s | %s |\n' "$3" "${tps[$1]}" "$(ratio "${tps[$1]}" "${tps[select1]}" 3)" \
            "$(ratio "${tps[$1]}" "${tps[$2]}" 3)"
    else
        echo "| $3 | skipped (not preloaded) | — | — |"
    fi
}
table="$(
    echo "| case | TPS | ratio to SELECT 1 floor | ratio to its reference |"
    echo "|---|---:|---:|---:|"
    printf '| floor: `SELECT 1` | %.0f | 1.000 | — |\n' "${tps[select1]}"
    versus native_hot native_hot 'native `consume`, one key (reference)'
    versus declared_hot native_hot 'declared limiter, one key'
    versus native_10k native_10k 'native `consume`, 10k keys (reference)'
    versus declared_10k native_10k 'declared limiter, 10k keys'
    versus native_memory native_memory 'native `consume`, memory engine, 10k keys (reference)'
    versus declared_memory native_memory 'declared limiter, memory engine, 10k keys'
    versus insert_plain insert_plain 'INSERT, no limit, 10k users (reference)'
    versus insert_limited insert_plain 'INSERT with `limit_inserts`, 10k users'
)"

notes() {
    echo "- Declared limiter: \`declare_limiter('bench_declared', ARRAY['p_key text'], 'boolean'," \
        "p_key => ARRAY['arg:p_key'], p_limit => 1000000000, p_period => '365 days')\`; its" \
        "reference is the \`consume\` it makes, called directly with the same key, limit and period"
    echo "- Insert limit: \`limit_inserts('bench_limited_posts', 1000000000, '365 days'," \
        "ARRAY['column:user_id'])\`, the table engine; the inserts' rows counted after each case"
}

bench_finish "Declared limiters and insert limits" "" notes \
    "Every insert case's rows were counted (each call one row):" "$table"
