#!/usr/bin/env bash
# The core's decision fuzzer (libFuzzer; clang, no PostgreSQL): builds test/fuzz/decision_fuzzer
# and runs it for FUZZ_SECONDS (default 60) from the committed seed corpus test/fuzz/corpus,
# keeping the inputs it finds in test/fuzz/work (ignored by git) so that later runs go on from
# there. Prints the executions, their rate and the coverage reached. Exits non-zero when an
# invariant broke, a sanitizer fired or the fuzzer did not run; the crashing input is left in
# test/fuzz/work/ (replay it with: test/fuzz/decision_fuzzer <file>).
#   FUZZ_SECONDS=3600 bash test/fuzz/run.sh
set -euo pipefail
cd "$(dirname "$0")/../.."

seconds="${FUZZ_SECONDS:-60}"
log="$(mktemp)"
trap 'rm -f "$log"' EXIT

make -s fuzz
status=0
make -s fuzz-run FUZZ_SECONDS="$seconds" >"$log" 2>&1 || status=$?

executions="$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)"
rate="$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -1)"
if [ -z "$executions" ]; then
    # No final statistics (the run died): the last status line still counts the executions.
    executions="$(grep -o '^#[0-9]*' "$log" | tail -1 | tr -d '#')"
fi
coverage="$(grep -o 'cov: [0-9]* ft: [0-9]*' "$log" | tail -1)"

if [ "$status" -ne 0 ] || grep -q -e '^==[0-9]*==ERROR' -e 'runtime error:' -e 'invariant broken' "$log"; then
    echo "decision fuzzer: FAILED after ${executions:-0} executions (exit status $status)"
    grep -e 'invariant broken' -e 'runtime error:' -e '==ERROR' -e 'SUMMARY' -e 'Test unit written' "$log" || tail -40 "$log"
    [ "$status" -ne 0 ] || status=1
    exit "$status"
fi
echo "decision fuzzer: ${executions:-0} executions in ${seconds} s (${rate:-?} exec/s), ${coverage:-no coverage line}, no invariant broken"
