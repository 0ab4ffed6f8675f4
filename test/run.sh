#!/usr/bin/env bash
# The README's test command, and what CI runs: every test suite on each PostgreSQL major the
# extension is built for, then one summary line per major and one overall line; exits non-zero
# if any suite failed. Run as root from anywhere.
#
#   - 15 runs here, on Debian 12 (test/suites.sh);
#   - 17 and 18 run inside their Debian roots, trixie and forky (scripts/debian-root.sh makes
#     them the first time, about 5 minutes each, and reuses them after): this working tree is
#     copied into the root and built there, so objects of different majors never meet;
#   - on 17 and 18, `cross-major` also restores a `pg_dump -Fc` of a 15 database into that
#     major (test/cross_major.sh), and moves a 15 cluster to it with pg_upgrade
#     (test/pg_upgrade.sh).
#
#   bash test/run.sh                          every suite on 15, 17 and 18
#   bash test/run.sh --pg 17                  on 17 only (also: PG_MAJOR=17 bash test/run.sh)
#   bash test/run.sh --pg 17 --pg 18 pgtap    the suites named, on the majors named
#   bash test/run.sh package                  the .deb packages (scripts/package.sh): built,
#                                             installed and tested in each major's root
#   bash test/run.sh --in-roots               15 in a Debian 12 root too, leaving this
#                                             system's PostgreSQL untouched
#
# The suites are test/suites.sh's (CONTRIBUTING.md lists them), `cross-major` and `package`.
# `package` runs only when named: it rebuilds the extension the Debian way and runs the suites
# again against the installed package, which the time a whole run may take has no room for.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/versions.sh

majors=()
in_roots=false
requested=()
while [ "$#" -gt 0 ]; do
    case "$1" in
    --pg)
        [ "$#" -ge 2 ] || { echo "test/run.sh: --pg needs a major" >&2; exit 2; }
        majors+=("$2")
        shift 2
        ;;
    --pg=*)
        majors+=("${1#--pg=}")
        shift
        ;;
    --in-roots)
        in_roots=true
        shift
        ;;
    *)
        requested+=("$1")
        shift
        ;;
    esac
done
if [ "${#majors[@]}" -eq 0 ] && [ -n "${PG_MAJOR:-}" ]; then
    read -r -a majors <<<"${PG_MAJOR//,/ }"
fi
if [ "${#majors[@]}" -eq 0 ]; then
    majors=("${supported_majors[@]}")
fi
for major in "${majors[@]}"; do
    codename_of_major "$major" >/dev/null || exit 2
done
# In the order supported_majors lists them, each once: 15 first, the source of cross-major.
mapfile -t majors < <(for major in "${supported_majors[@]}"; do
    printf '%s\n' "${majors[@]}" | grep -qxF "$major" && echo "$major"
done)

native="$(native_major)"
if [ -f /.ratelimit-root ]; then
    echo "test/run.sh: this is a root already; run test/suites.sh here" >&2
    exit 2
fi

# The suites test/suites.sh knows, and the ones run from here.
mapfile -t local_suites < <(sed -n 's/^suite_names=(\(.*\))$/\1/p' test/suites.sh | tr ' ' '\n')
for wanted in "${requested[@]}"; do
    if ! printf '%s\n' "${local_suites[@]}" cross-major package | grep -qxF -- "$wanted"; then
        echo "test/run.sh: unknown suite \"$wanted\" (the suites: ${local_suites[*]} cross-major package)" >&2
        exit 2
    fi
done
is_wanted() {
    if [ "${#requested[@]}" -eq 0 ]; then
        [ "$1" != package ]
    else
        printf '%s\n' "${requested[@]}" | grep -qxF -- "$1"
    fi
}
suite_arguments=()
if [ "${#requested[@]}" -gt 0 ]; then
    for wanted in "${requested[@]}"; do
        if printf '%s\n' "${local_suites[@]}" | grep -qxF -- "$wanted"; then
            suite_arguments+=("$wanted")
        fi
    done
    # Only cross-major or package named: the majors are built and installed, no suite run.
    if [ "${#suite_arguments[@]}" -eq 0 ]; then
        suite_arguments=(--build-only)
    fi
fi

# Whether MAJOR runs on this system rather than in a root.
runs_here() {
    [ "$1" = "$native" ] && [ "$in_roots" = false ]
}

# on_major MAJOR COMMAND...: COMMAND in this working tree, here or in MAJOR's root (copied there
# first).
on_major() {
    local major="$1"
    shift
    if runs_here "$major"; then
        "$@"
    else
        scripts/debian-root.sh run "$major" "$@"
    fi
}

logs="$(mktemp -d /tmp/ratelimit-run.XXXXXX)"
declare -A passed failed skipped failed_at seconds
started_all=$SECONDS

# run_suites MAJOR COMMAND...: runs test/suites.sh (COMMAND), its output shown and kept in a
# log, and adds its "suites: N passed, N failed[, N skipped]" line to the major's counts; a run
# that ended without that line counts as one failed suite.
run_suites() {
    local major="$1"
    shift
    local log="$logs/$major-suites.log" line
    "$@" 2>&1 | tee "$log" || true
    line="$(grep -E '^suites: [0-9]+ passed, [0-9]+ failed' "$log" | tail -1 || true)"
    if [ -z "$line" ]; then
        failed[$major]=$((failed[$major] + 1))
        failed_at[$major]+=" test/suites.sh (ended early)"
        return 0
    fi
    passed[$major]=$((passed[$major] + $(sed -E 's/^suites: ([0-9]+) passed.*/\1/' <<<"$line")))
    failed[$major]=$((failed[$major] + $(sed -E 's/^suites: [0-9]+ passed, ([0-9]+) failed.*/\1/' <<<"$line")))
    skipped[$major]=$((skipped[$major] + $(sed -nE 's/.* ([0-9]+) skipped.*/\1/p' <<<"$line" | grep . || echo 0)))
    if grep -q '^failed suites: ' "$log"; then
        failed_at[$major]+=" $(sed -n 's/^failed suites: //p' "$log" | tail -1)"
    fi
}

# run_one MAJOR NAME COMMAND...: one suite run from here, counted by its exit status.
run_one() {
    local major="$1" name="$2"
    shift 2
    local status=0
    "$@" 2>&1 | tee "$logs/$major-$name.log" || status=$?
    if [ "$status" -eq 0 ]; then
        passed[$major]=$((passed[$major] + 1))
        echo "--- $name: passed"
    else
        failed[$major]=$((failed[$major] + 1))
        failed_at[$major]+=" $name"
        echo "--- $name: FAILED"
    fi
}

# cross-major dumps on 15: with 15 not among the majors run, it is built and installed first.
if ! printf '%s\n' "${majors[@]}" | grep -qx 15 && is_wanted cross-major &&
    printf '%s\n' "${majors[@]}" | grep -qvx 15; then
    echo
    echo "##### PostgreSQL 15, for cross-major: build and install only"
    on_major 15 bash test/suites.sh --build-only || true
fi

for major in "${majors[@]}"; do
    started=$SECONDS
    where="here"
    runs_here "$major" || where="in the $(codename_of_major "$major") root"
    echo
    echo "##### PostgreSQL $major ($where)"
    passed[$major]=0 failed[$major]=0 skipped[$major]=0 failed_at[$major]=""
    # Only package named: it builds and tests on its own.
    if [ "${suite_arguments[*]}" != --build-only ] || { [ "$major" != 15 ] && is_wanted cross-major; }; then
        run_suites "$major" on_major "$major" bash test/suites.sh "${suite_arguments[@]}"
    fi
    if [ "$major" != 15 ] && is_wanted cross-major; then
        echo
        echo "##### PostgreSQL 15 -> $major: pg_dump -Fc on 15, pg_restore on $major"
        cross_arguments=()
        [ "$in_roots" = false ] || cross_arguments=(--in-roots)
        run_one "$major" cross-major bash test/cross_major.sh "${cross_arguments[@]}" "$major"
        echo
        echo "##### PostgreSQL 15 -> $major: pg_upgrade, every engine in use"
        run_one "$major" pg-upgrade bash test/pg_upgrade.sh "${cross_arguments[@]}" "$major"
    fi
    if is_wanted package; then
        echo
        echo "##### PostgreSQL $major: the Debian package"
        run_one "$major" package bash scripts/package.sh "$major"
    fi
    seconds[$major]=$((SECONDS - started))
done

duration() {
    printf '%dm%02ds' $(($1 / 60)) $(($1 % 60))
}

echo
echo "##### summary (logs in $logs)"
total_passed=0
total_failed=0
total_skipped=0
for major in "${majors[@]}"; do
    line="PostgreSQL $major: ${passed[$major]} passed, ${failed[$major]} failed"
    [ "${skipped[$major]}" -eq 0 ] || line+=", ${skipped[$major]} skipped"
    line+=" in $(duration "${seconds[$major]}")"
    [ "${failed[$major]}" -eq 0 ] || line+=" (failed:${failed_at[$major]})"
    echo "$line"
    total_passed=$((total_passed + passed[$major]))
    total_failed=$((total_failed + failed[$major]))
    total_skipped=$((total_skipped + skipped[$major]))
done
line="overall: $total_passed passed, $total_failed failed"
[ "$total_skipped" -eq 0 ] || line+=", $total_skipped skipped"
line+=" on PostgreSQL ${majors[*]} in $(duration $((SECONDS - started_all)))"
echo "$line"
[ "$total_failed" -eq 0 ]
