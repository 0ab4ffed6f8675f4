#!/usr/bin/env bash
# Installs every Debian package the build, the tests, the demo and the benchmarks need.
# Safe to run again: it only calls apt-get when something is missing. Run as root.
set -euo pipefail

packages=(
    build-essential
    postgresql-15
    postgresql-server-dev-15
    postgresql-15-pgtap
    postgresql-15-cron
    postgresql-15-plproxy
    libpq-dev
    libtap-parser-sourcehandler-pgtap-perl
    libgtest-dev
    clang-format
    clang
    libclang-rt-14-dev
    gnuplot-nox
    redis-server
    redis-tools
    pgbouncer
    prometheus
    prometheus-postgres-exporter
    curl
    nodejs
    npm
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
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
echo "install-deps: done"
