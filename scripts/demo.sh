#!/usr/bin/env bash
# The README's set-up command: on a fresh Debian 12 machine, as root, installs every package,
# builds and installs the extension, starts a throwaway cluster as the postgres OS user, runs
# the demo (examples/demo.sql) and stops the cluster. Safe to run again.
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/install-deps.sh
make -s -j2
make -s install >/dev/null
echo "build: ratelimit $(sed -n "s/^default_version = '\(.*\)'/\1/p" ratelimit.control) installed into $(pg_config --pkglibdir)"

source scripts/cluster.sh
# The memory engine needs the library preloaded; its store holds 200,000 keys (about 25 MB).
cluster_start "shared_preload_libraries = 'ratelimit'" "ratelimit.memory_capacity = 200000"
psql -X -q -v ON_ERROR_STOP=1 -f examples/demo.sql
