#!/usr/bin/env bash
# Installs every Debian package the build, the tests, the demo and the benchmarks need, for one
# PostgreSQL major: scripts/install-deps.sh [MAJOR]. The major defaults to the one this Debian
# release ships (15 on Debian 12; inside a root of scripts/debian-root.sh, the root's: 17 in
# trixie, 18 in forky); another major is refused, its packages being in another release.
# Safe to run again: it only calls apt-get when something is missing. Run as root.
set -euo pipefail
source "$(dirname "$0")/versions.sh"

native="$(native_major)"
major="${1:-$native}"
codename_of_major "$major" >/dev/null
if [ "$major" != "$native" ]; then
    echo "install-deps: PostgreSQL $major is Debian $(codename_of_major "$major")'s, this is" \
        "$(codename_of_major "$native"): run it in that root (scripts/debian-root.sh run $major" \
        "scripts/install-deps.sh)" >&2
    exit 2
fi

# libFuzzer and the sanitizers' runtime, for the release's default clang.
declare -A clang_major=([15]=14 [17]=19 [18]=21)

packages=(
    build-essential
    "postgresql-$major"
    "postgresql-server-dev-$major"
    "postgresql-$major-pgtap"
    "postgresql-$major-cron"
    "postgresql-$major-plproxy"
    libpq-dev
    libtap-parser-sourcehandler-pgtap-perl
    libgtest-dev
    clang-format
    clang
    "libclang-rt-${clang_major[$major]}-dev"
    gnuplot-nox
    redis-server
    redis-tools
    pgbouncer
    prometheus
    prometheus-postgres-exporter
    procps
    curl
    nodejs
    npm
    # pg_tle, built from its source for the SQL edition's tests (scripts/pg-tle.sh).
    flex
    libkrb5-dev
)

# A package that an installed one provides counts as present (a nodejs build that bundles npm
# provides npm and conflicts with Debian's).
provided="$(dpkg-query -W -f='${db:Status-Abbrev}|${Provides}\n' 2>/dev/null |
    sed -n 's/^ii *|//p' | tr ',' '\n' | sed 's/([^)]*)//; s/[[:space:]]//g' | sort -u)"

missing=()
for package in "${packages[@]}"; do
    if ! dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed" &&
        ! grep -qxF "$package" <<<"$provided"; then
        missing+=("$package")
    fi
done

if [ "${#missing[@]}" -eq 0 ]; then
    echo "install-deps: all ${#packages[@]} packages present"
    exit 0
fi

if [ "$(id -u)" -ne 0 ]; then
    echo "install-deps: missing packages (${missing[*]}); run as root to install them" >&2
    exit 1
fi

echo "install-deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
log="$(mktemp)"
# An installation cut short (an interrupted run) is finished first. The packages' own messages
# are shown only when something fails.
if ! { dpkg --configure -a && apt-get update -qq &&
    apt-get install -y -qq --no-install-recommends "${missing[@]}"; } >"$log" 2>&1; then
    tail -40 "$log" >&2
    rm -f "$log"
    echo "install-deps: apt-get failed" >&2
    exit 1
fi
rm -f "$log"
echo "install-deps: done"
