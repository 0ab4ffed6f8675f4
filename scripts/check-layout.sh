#!/usr/bin/env bash
# The rules of the rooms that a search of the source can check (CONTRIBUTING.md, "Layers and
# their rooms"). Prints each breach with its file and line; exits 1 if there is any.
set -u
cd "$(dirname "$0")/.."

status=0
# breach <rule> <pattern> <allowed file or ''> <paths...>: a line matching the pattern outside
# the allowed file breaks the rule.
breach() {
    local rule="$1" pattern="$2" allowed="$3"
    shift 3
    local hits
    hits="$(grep -rnE "$pattern" "$@" | grep -v "^${allowed:-^}:" || true)"
    if [ -n "$hits" ]; then
        printf 'layout: %s\n%s\n' "$rule" "$hits" >&2
        status=1
    fi
}

breach "the core includes no PostgreSQL header (only the C++ standard library and the core)" \
    '#include[[:space:]]*"(postgres|postgres_ext|fmgr|funcapi|miscadmin|pg_config)\.h"|#include[[:space:]]*"(access|catalog|executor|utils|storage|nodes|common|lib|port|mb|postmaster|commands|parser|tcop)/|#include[[:space:]]*"pg/' \
    '' include/ratelimit src/core
breach "PG_VERSION_NUM is tested in src/pg/compat.hpp only" 'PG_VERSION_NUM' \
    src/pg/compat.hpp src include
breach "every setting is defined in src/pg/settings.cpp" 'DefineCustom[A-Za-z]*Variable|MarkGUCPrefixReserved' \
    src/pg/settings.cpp src include
breach "only src/pg/shared_region.cpp installs a shared-memory hook" 'shmem_(request|startup)_hook[[:space:]]*=' \
    src/pg/shared_region.cpp src include

[ "$status" = 0 ] && echo "layout: the rooms' rules hold"
exit "$status"
