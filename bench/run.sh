#!/usr/bin/env bash
# The drop-in functions' benchmarks in one pass on one server: builds once, starts one throwaway
# cluster, runs bench/rpc_limits.sh, endpoint_limits.sh and sliding_window_limits.sh against it
# (each in a fresh database), then prints their tables. One server means every figure comes from
# the same configuration and machine state. Each script also runs on its own, with its own
# cluster.
#
# Run as root from the repository root:  BENCH_SECONDS=15 bash bench/run.sh
#   BENCH_SECONDS         measured seconds per case (default 15; 16 cases)
#   BENCH_WARMUP_SECONDS  warm-up seconds per case, not measured (default 3)
# Writes bench/results/rpc_limits.md, endpoint_limits.md and sliding_window_limits.md.
set -euo pipefail
cd "$(dirname "$0")/.."
source bench/lib.sh

benchmarks=(rpc_limits endpoint_limits sliding_window_limits)
export BENCH_COMMAND="BENCH_SECONDS=${BENCH_SECONDS:-15} BENCH_WARMUP_SECONDS=${BENCH_WARMUP_SECONDS:-3} bash bench/run.sh"

bench_build
bench_cluster_start  # exports PGHOST and PGPORT to the scripts; stopped on exit
export BENCH_SHARED_CLUSTER=1

for benchmark in "${benchmarks[@]}"; do
    bash "bench/$benchmark.sh"
done

echo
for benchmark in "${benchmarks[@]}"; do
    # The title and the table of each results file.
    grep -E '^(# |\|)' "bench/results/$benchmark.md"
    echo
done
