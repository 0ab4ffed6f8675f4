#!/usr/bin/env bash
# Runs every test suite on this system's PostgreSQL major (15 on Debian 12; inside a root of
# scripts/debian-root.sh, the root's): formatting, core unit tests, pg_regress, pgTAP, the edge
# helper's Node tests, the concurrency tests, the pg_cron cleanup jobs, the memory engine's
# restarts, and the reliability suite (faults, pgbouncer), against throwaway clusters that are
# stopped at the end, also when a suite fails. RELIABILITY_LONG=1 runs the longer variants.
# test/run.sh, the README's test command, runs this on each major; run it directly to test the
# major at hand only. Run as root from the repository root (it installs missing packages and
# the built extension).
#
# With arguments, only the suites named run (CONTRIBUTING.md lists them), for example
#   bash test/suites.sh pgtap concurrency
# --installed tests the extension already installed (a package) instead of building and
# installing this tree's; --build-only builds and installs, and runs no suite.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/versions.sh

installed=false
build_only=false
while [ "$#" -gt 0 ]; do
    case "$1" in
    --installed) installed=true ;;
    --build-only) build_only=true ;;
    *) break ;;
    esac
    shift
done

suite_names=(format unit regress pgtap node concurrency differential cron metrics postgrest security router lifecycle memory-wal faults pgbouncer dump-restore docs fuzz sql-edition)
for wanted in "$@"; do
    if ! printf '%s\n' "${suite_names[@]}" | grep -qxF -- "$wanted"; then
        echo "test/suites.sh: unknown suite \"$wanted\" (the suites: ${suite_names[*]})" >&2
        exit 2
    fi
done

major="$(native_major)"
scripts/install-deps.sh "$major"
# Install scripts another build or a package left in the extension directory would be used
# instead of this tree's (a full script of an older version wins over the chain of updates that
# makes it), so they go first: with a package of the extension (scripts/package.sh leaves one in
# a root) when this tree is tested, the files alone when the package is.
extension_dir="$(pg_config --sharedir)/extension"
if [ "$installed" = false ]; then
    if dpkg-query -W -f='${Status}' "postgresql-$major-ratelimit" 2>/dev/null | grep -q "ok installed"; then
        dpkg -P "postgresql-$major-ratelimit" >/dev/null
    fi
    rm -f "$extension_dir"/ratelimit--*.sql "$extension_dir"/ratelimit_*--*.sql
    make -s -j2
    make -s install >/dev/null
fi
echo "suites: PostgreSQL $("$(pg_config --bindir)/postgres" --version | awk '{print $3}')" \
    "on $(. /etc/os-release && echo "$PRETTY_NAME")"
if [ "$build_only" = true ]; then
    echo "suites: 0 passed, 0 failed"
    exit 0
fi
make -s -j2 test/unit/core_unit_tests test/concurrency/concurrency_tests

source scripts/cluster.sh
# pg_cron runs its jobs in background workers in the postgres database (test/cron/). The
# memory engine needs the library preloaded; its store holds 100,000 keys, the size the
# eviction test fills ten times over. It writes its changes to the WAL (ratelimit.memory_wal),
# so that every suite that uses it runs the logged path; test/memory/lifecycle.sh runs it
# without, on clusters of its own.
cluster_start "shared_preload_libraries = 'pg_cron,ratelimit'" "cron.database_name = 'postgres'" \
    "cron.use_background_workers = on" "max_worker_processes = 16" "fsync = off" \
    "ratelimit.memory_capacity = 100000" "ratelimit.memory_wal = on"

passed=0
failed=0
skipped=0
failed_names=()
requested=("$@")
# wanted SHORT-NAME: no suite was named, or this one was.
wanted() {
    [ "${#requested[@]}" -eq 0 ] || printf '%s\n' "${requested[@]}" | grep -qxF -- "$1"
}
# run_suite SHORT-NAME TITLE COMMAND...: runs it when wanted, and says how long it took.
run_suite() {
    local short="$1"
    local name="$2"
    shift 2
    wanted "$short" || return 0
    echo
    echo "=== $name"
    local started=$SECONDS
    if "$@"; then
        passed=$((passed + 1))
        echo "--- $short: passed in $((SECONDS - started)) s"
    else
        failed=$((failed + 1))
        failed_names+=("$name")
        echo "--- $short: FAILED in $((SECONDS - started)) s"
    fi
}
# skip_suite SHORT-NAME WHY: a suite that does not run on this major (CONTRIBUTING.md says why).
skip_suite() {
    wanted "$1" || return 0
    skipped=$((skipped + 1))
    echo
    echo "--- $1: skipped on PostgreSQL $major: $2"
}

regress() {
    # pg_regress writes results/ and regression.diffs here; show the diffs on failure.
    if make -s installcheck; then
        return 0
    fi
    cat regression.diffs 2>/dev/null || true
    return 1
}

pgtap() {
    psql -X -q -v ON_ERROR_STOP=1 -c "CREATE DATABASE ratelimit_pgtap" >/dev/null
    local status=0
    PGDATABASE=ratelimit_pgtap pg_prove --ext .sql test/pgtap/ || status=$?
    psql -X -q -c "DROP DATABASE ratelimit_pgtap" >/dev/null
    return $status
}

cron() {
    PGDATABASE=postgres pg_prove --ext .sql test/cron/
}

concurrency() {
    psql -X -q -v ON_ERROR_STOP=1 -c "CREATE DATABASE ratelimit_concurrency" >/dev/null
    local status=0
    PGDATABASE=ratelimit_concurrency test/concurrency/concurrency_tests || status=$?
    psql -X -q -c "DROP DATABASE ratelimit_concurrency" >/dev/null
    return $status
}

# The C++ is laid out by Debian 12's clang-format (14); later releases' (19 in trixie, 21 in
# forky) place a few constructs differently. The layout is the source's, whatever the server.
if [ "$major" = 15 ]; then
    run_suite format "formatting and the rooms' rules (clang-format, scripts/check-layout.sh)" make -s format-check
else
    skip_suite format "the layout is checked with Debian 12's clang-format, on 15"
fi
run_suite unit "core unit tests (GoogleTest)" test/unit/core_unit_tests
run_suite regress "pg_regress" regress
run_suite pgtap "pgTAP (pg_prove)" pgtap
run_suite node "TypeScript edge helper (Node, pg)" bash test/node/run.sh
run_suite concurrency "concurrency (libpq, real connections)" concurrency
# The SQL edition against the C edition: the same random calls in a database of each, on a
# cluster of its own that preloads ratelimit.
run_suite differential "SQL edition decides as the C edition (libpq, own cluster)" \
    bash test/sql_edition/differential.sh
run_suite cron "pg_cron cleanup jobs (pg_prove)" cron
# ratelimit.metrics() and the exporter's queries, scraped by the real prometheus-postgres-exporter;
# then the policy counters running out, on a cluster of their own.
metrics() {
    bash test/metrics/exporter.sh && bash test/metrics/policy_counters.sh
}
run_suite metrics "metrics (promtool, prometheus-postgres-exporter; own cluster)" metrics
# ratelimit.pre_request() in PostgREST's transactions, on a primary and a hot standby of its own.
run_suite postgrest "PostgREST pre-request hook (own primary and hot standby)" bash test/postgrest/pre_request.sh
run_suite security "security: the attackers of docs/operations.md (own cluster)" bash test/security/run.sh
# ratelimit_router: a router and two shards (PL/Proxy), and a server to compare with.
run_suite router "router: keys sharded with PL/Proxy (own router and shards)" bash test/router/run.sh
# Restarts, crashes and a server without the library preloaded need clusters of their own.
run_suite lifecycle "memory engine lifecycle (own clusters)" bash test/memory/lifecycle.sh
run_suite memory-wal "memory engine in the WAL: crashes, a standby, a failover (own clusters)" bash test/memory/wal.sh
# Reliability: faults under load (terminated and killed backends, immediate stops, timeouts, a
# full disk) and exactness through pgbouncer in transaction pooling, on clusters of their own.
run_suite faults "reliability: faults under load (own cluster)" bash test/reliability/faults.sh
run_suite pgbouncer "reliability: pgbouncer transaction pooling (own cluster)" bash test/reliability/pgbouncer.sh
# pg_dump and pg_restore of a database using the extension, into a fresh one.
run_suite dump-restore "dump and restore (own cluster)" bash test/dump_restore.sh
# Every SQL example of README.md and docs/ run and its output compared; docs/reference.md
# checked against the catalog.
run_suite docs "documentation examples and reference (own clusters)" bash test/docs/run.sh
# The core's decision functions under libFuzzer for FUZZ_SECONDS (60 by default; longer on demand).
run_suite fuzz "fuzzing the core (libFuzzer, ASan, UBSan)" bash test/fuzz/run.sh
# The SQL edition installed through pg_tle and from its plain file, on a server without our library.
run_suite sql-edition "SQL edition: installed through pg_tle and from the plain file (own cluster)" \
    bash test/sql_edition/install.sh

echo
if [ "$failed" -gt 0 ]; then
    echo "failed suites: ${failed_names[*]}"
fi
echo "suites: $passed passed, $failed failed$([ "$skipped" -eq 0 ] || echo ", $skipped skipped")"
[ "$failed" -eq 0 ]
