#!/usr/bin/env bash
# Every benchmark in one pass on one server: builds once, starts one throwaway cluster, runs
# bench/seed000.sh, seed002.sh and seed004.sh against it (each in a fresh database), then
# prints their tables. One server means every figure comes from the same configuration and
# machine state. Each seed script also runs on its own, with its own cluster.
#
# Run as root from the repository root:  BENCH_SECONDS=15 bash bench/run.sh
#   BENCH_SECONDS         measured seconds per case (default 15; 16 cases)
#   BENCH_WARMUP_SECONDS  warm-up seconds per case, not measured (default 3)
# Writes bench/results/seed000.md, seed002.md and seed004.md.
set -euo pipefail
cd "$(dirname "$0")/.."
source bench/lib.sh

seeds=(seed000 seed002 seed004)
export BENCH_COMMAND="BENCH_SECONDS=${BENCH_SECONDS:-15} BENCH_WARMUP_SECONDS=${BENCH_WARMUP_SECONDS:-3} bash bench/run.sh"

bench_build
bench_cluster_start  # exports PGHOST and PGPORT to the seed scripts; stopped on exit
export BENCH_SHARED_CLUSTER=1

for seed in "${seeds[@]}"; do
    bash "bench/$seed.sh"
done

echo
for seed in "${seeds[@]}"; do
    # The title and the table of each results file.
    grep -E '^(# |\|)' "bench/results/$seed.md"
    echo
done
