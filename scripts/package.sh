#!/usr/bin/env bash
# The Debian package postgresql-MAJOR-ratelimit, built with Debian's own extension tooling
# (debian/: pg_buildext, debian/pgversions, dh --with pgxs_loop) inside MAJOR's Debian root
# (scripts/debian-root.sh; bookworm for 15, so this system's PostgreSQL is never touched),
# checked with lintian (no error or warning), installed there with dpkg, and tested: the suites
# that test a server run against the installed package (test/suites.sh --installed). The .deb
# files are copied to dist/.
#
#   bash scripts/package.sh MAJOR [SUITE...]     e.g. bash scripts/package.sh 18
#
# Without suites named, every suite that tests the server runs (about as long as the suites
# themselves: 7 to 9 minutes on a 2-core machine); `bash test/run.sh package` does it for each
# major. Run as root.
set -euo pipefail
repository="$(cd "$(dirname "$0")/.." && pwd)"
cd "$repository"
source scripts/versions.sh

major="${1:?usage: bash scripts/package.sh MAJOR [SUITE...]}"
shift
codename_of_major "$major" >/dev/null
suites=("$@")
if [ "${#suites[@]}" -eq 0 ]; then
    # format, unit and fuzz test the source, not what is installed.
    suites=(regress pgtap node concurrency cron metrics postgrest router lifecycle memory-wal faults pgbouncer
        dump-restore docs)
fi
version="$(sed -n "s/^default_version = '\(.*\)'/\1/p" ratelimit.control)"
debian_version="$(sed -n '1s/^ratelimit (\([^)]*\)).*/\1/p' debian/changelog)"
if [ "${debian_version%-*}" != "$version" ]; then
    echo "package: debian/changelog is at $debian_version, ratelimit.control at $version" >&2
    exit 1
fi
deb="postgresql-$major-ratelimit_${debian_version}_$(dpkg --print-architecture).deb"

# ---- inside the root --------------------------------------------------------------------------
if [ -f /.ratelimit-root ]; then
    [ "$(native_major)" = "$major" ] || { echo "package: this root is not $major's" >&2; exit 2; }
    scripts/install-deps.sh "$major"
    if ! dpkg-query -W -f='${Status}' debhelper postgresql-server-dev-all lintian 2>/dev/null |
        grep -c "install ok installed" | grep -qx 3; then
        echo "package: installing debhelper postgresql-server-dev-all lintian"
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq debhelper postgresql-server-dev-all lintian \
            >/tmp/ratelimit-package-deps.log 2>&1 || {
            tail -20 /tmp/ratelimit-package-deps.log >&2
            exit 1
        }
    fi
    # A clean copy of the tree: what git tracks, no build product of an earlier make.
    work="$repository-package"
    rm -rf "$work"
    mkdir -p "$work/ratelimit"
    tar -C "$repository" --exclude=./.git --exclude='*.o' --exclude='*.so' --exclude=./build \
        --exclude=./dist --exclude=./results --exclude=node_modules --exclude='*/work' \
        --exclude=./test/unit/core_unit_tests --exclude=./test/concurrency/concurrency_tests \
        --exclude=./test/fuzz/decision_fuzzer -cf - . | tar -C "$work/ratelimit" -xf -
    echo "package: building $deb"
    started=$SECONDS
    (
        cd "$work/ratelimit"
        # debian/control is made from debian/control.in for the majors installed here.
        pg_buildext updatecontrol
        dpkg-buildpackage -b -uc -us >"$work/build.log" 2>&1
    ) || {
        tail -40 "$work/build.log"
        echo "package: dpkg-buildpackage failed (log: $work/build.log in the root)" >&2
        exit 1
    }
    echo "package: built in $((SECONDS - started)) s: $(cd "$work" && ls -- *.deb | tr '\n' ' ')"
    # What Debian's archive checks: no error or warning (the copyright notice and licence
    # included).
    if ! lintian --fail-on error,warning "$work/$deb" >"$work/lintian.log" 2>&1; then
        grep -v 'root privileges' "$work/lintian.log" >&2
        echo "package: lintian finds errors or warnings in $deb" >&2
        exit 1
    fi
    echo "package: lintian: no error or warning"
    # Scripts an earlier build left would be used with the package's (test/suites.sh says why).
    rm -f "/usr/share/postgresql/$major/extension/"ratelimit--*.sql \
        "/usr/share/postgresql/$major/extension/"ratelimit_*--*.sql
    DEBIAN_FRONTEND=noninteractive dpkg -i "$work/$deb" >/dev/null
    status=0
    dpkg -V "postgresql-$major-ratelimit" || status=$?
    [ "$status" -eq 0 ] || { echo "package: the installed files differ from the package's" >&2; exit 1; }
    libdir="$("/usr/lib/postgresql/$major/bin/pg_config" --pkglibdir)"
    sharedir="$("/usr/lib/postgresql/$major/bin/pg_config" --sharedir)"
    for file in "$libdir/ratelimit.so" "$sharedir/extension/ratelimit.control" \
        "$sharedir/extension/ratelimit--$version.sql" "$sharedir/extension/ratelimit_router.control"; do
        if ! dpkg -S "$file" 2>/dev/null | grep -q "^postgresql-$major-ratelimit:"; then
            echo "package: $file is not the package's" >&2
            exit 1
        fi
    done
    echo "package: $deb installed; its files verified (dpkg -V)"
    exec bash test/suites.sh --installed "${suites[@]}"
fi

# ---- from the host: in MAJOR's root -----------------------------------------------------------
status=0
scripts/debian-root.sh run "$major" bash scripts/package.sh "$major" "${suites[@]}" || status=$?
mkdir -p dist
cp "$(scripts/debian-root.sh source "$major")-package/"*.deb dist/ 2>/dev/null || true
if [ -f "dist/$deb" ]; then
    echo "package: dist/$deb"
fi
exit "$status"
