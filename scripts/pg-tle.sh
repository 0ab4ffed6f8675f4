#!/usr/bin/env bash
# Builds and installs pg_tle (Trusted Language Extensions, the way Supabase and Amazon RDS
# install extensions made of SQL only) for this system's PostgreSQL major: 15 here, the root's
# inside a root of scripts/debian-root.sh. The SQL edition's tests install ratelimit_sql
# through it (test/sql_edition/install.sh).
#
#   scripts/pg-tle.sh      build and install, unless the installed pg_tle was built from the
#                          same source for the same server; prints the installed version
#
# Its source is a test-only dependency in ../shared/vendor/ beside the repository (that
# folder's README.md), never copied into the repository: it is unpacked and built in
# /tmp/ratelimit-pg-tle-MAJOR. Exits 3, saying what it needs, when the source is not there (a
# clone on its own), so that a test can report itself skipped. Needs flex and libkrb5-dev
# besides postgresql-server-dev-MAJOR (scripts/install-deps.sh installs them). Run as root.
set -euo pipefail
repository="$(cd "$(dirname "$0")/.." && pwd)"
source "$repository/scripts/versions.sh"

vendor="$repository/../shared/vendor"
tarball="$(find "$vendor" -maxdepth 1 -name 'pg_tle-*.tar.gz' 2>/dev/null | sort -V | tail -1 || true)"
if [ -z "$tarball" ]; then
    echo "pg-tle: needs pg_tle's source, ../shared/vendor/pg_tle-<version>.tar.gz beside the" \
        "repository (not found: $(cd "$repository/.." && pwd)/shared/vendor/)" >&2
    exit 3
fi
if [ "$(id -u)" -ne 0 ]; then
    echo "pg-tle: run as root (it installs into $(pg_config --pkglibdir))" >&2
    exit 1
fi

major="$(native_major)"
extension_dir="$(pg_config --sharedir)/extension"
# What the installed pg_tle was built from: the source's checksum and the server it was built
# for. The same on both means nothing to do.
stamp="$extension_dir/pg_tle.built-from"
wanted="$(basename "$tarball") $(sha256sum "$tarball" | cut -d' ' -f1) $(pg_config --version)"

# Two test runs on one system build it one at a time, the second finding it done.
exec {lock}>/tmp/ratelimit-pg-tle.lock
flock -x "$lock"

installed_version() {
    sed -n "s/^default_version = '\(.*\)'/\1/p" "$extension_dir/pg_tle.control"
}
if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$wanted" ] &&
    [ -f "$(pg_config --pkglibdir)/pg_tle.so" ] && [ -f "$extension_dir/pg_tle.control" ]; then
    echo "pg-tle: pg_tle $(installed_version) installed for PostgreSQL $major (built from $(basename "$tarball"))"
    exit 0
fi

build="/tmp/ratelimit-pg-tle-$major"
rm -rf "$build"
mkdir -p "$build"
tar xzf "$tarball" -C "$build"
source_dir="$(find "$build" -mindepth 2 -maxdepth 2 -name Makefile -printf '%h\n' | head -1)"
[ -n "$source_dir" ] || { echo "pg-tle: $(basename "$tarball") holds no Makefile" >&2; exit 1; }
log="$build/build.log"
echo "pg-tle: building pg_tle from $(basename "$tarball") for PostgreSQL $major in $build"
if ! { make -C "$source_dir" -j2 PG_CONFIG="$(command -v pg_config)" &&
    make -C "$source_dir" install PG_CONFIG="$(command -v pg_config)"; } >"$log" 2>&1; then
    tail -30 "$log" >&2
    echo "pg-tle: the build failed (log: $log)" >&2
    exit 1
fi
echo "$wanted" >"$stamp"
echo "pg-tle: pg_tle $(installed_version) installed for PostgreSQL $major"
