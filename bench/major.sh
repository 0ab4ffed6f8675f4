# shellcheck shell=bash
# PG_MAJOR: the PostgreSQL major a benchmark runs on (15, 17 or 18; default: this system's).
# Sourced by every benchmark right after it changed to the repository root. When PG_MAJOR names
# a major this system does not run (17 or 18 on Debian 12), or RATELIMIT_IN_ROOTS=1 is set, the
# script runs again inside that major's Debian root (scripts/debian-root.sh), against its server
# and its build of this tree, with the same arguments, and what it wrote to bench/results/ is
# copied back to bench/results/pg<major>/.
#   PG_MAJOR=18 bash bench/batch.sh
source scripts/versions.sh
if [ -n "${PG_MAJOR:-}" ] && [ ! -f /.ratelimit-root ] &&
    { [ "$PG_MAJOR" != "$(native_major)" ] || [ -n "${RATELIMIT_IN_ROOTS:-}" ]; }; then
    codename_of_major "$PG_MAJOR" >/dev/null || exit 2
    bench_status=0
    scripts/debian-root.sh run "$PG_MAJOR" bash "bench/$(basename "$0")" "$@" || bench_status=$?
    mkdir -p "bench/results/pg$PG_MAJOR"
    cp -r "$(scripts/debian-root.sh source "$PG_MAJOR")/bench/results/." \
        "bench/results/pg$PG_MAJOR/" 2>/dev/null || true
    echo "bench: the results of PostgreSQL $PG_MAJOR are in bench/results/pg$PG_MAJOR/"
    exit "$bench_status"
fi
