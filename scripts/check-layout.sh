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
    hits="$(grep -rnE --include=*.cpp --include=*.hpp "$pattern" "$@" | grep -v "^${allowed:-^}:" || true)"
    if [ -n "$hits" ]; then
        printf 'layout: %s\n%s\n' "$rule" "$hits" >&2
        status=1
    fi
}

breach "the core includes no PostgreSQL header (only the C++ standard library and the core)" \
    '#include[[:space:]]*"(postgres|postgres_ext|fmgr|funcapi|miscadmin|pg_config)\.h"|#include[[:space:]]*"(access|catalog|executor|utils|storage|nodes|common|lib|port|mb|postmaster|commands|parser|tcop)/|#include[[:space:]]*"pg/' \
    '' include/ratelimit src/core
breach "PG_VERSION_NUM is tested in src/pg/compat/compat.hpp only" 'PG_VERSION_NUM' \
    src/pg/compat/compat.hpp src include
breach "every setting is defined in src/pg/module/settings.cpp" 'DefineCustom[A-Za-z]*Variable|MarkGUCPrefixReserved' \
    src/pg/module/settings.cpp src include
breach "only src/pg/shared_memory/shared_region.cpp installs a shared-memory hook" 'shmem_(request|startup)_hook[[:space:]]*=' \
    src/pg/shared_memory/shared_region.cpp src include


# Each room of src/pg includes only the rooms below it (CONTRIBUTING.md, the map); every room may
# include the door (bridge/postgres.hpp) and the settings' values (bridge/settings.hpp).
rooms_below() {
    case "$1" in
        compat) echo "" ;;
        bridge) echo "compat" ;;
        shared_memory) echo "compat bridge" ;;
        engines) echo "compat bridge shared_memory" ;;
        policies) echo "compat bridge shared_memory engines" ;;
        native) echo "compat bridge shared_memory engines policies" ;;
        postgrest) echo "compat bridge shared_memory engines policies" ;;
        drop_ins) echo "compat bridge shared_memory engines policies native postgrest" ;;
        observability) echo "compat bridge shared_memory engines policies native" ;;
        router) echo "compat bridge shared_memory engines policies native postgrest drop_ins" ;;
        module) echo "compat bridge shared_memory engines policies native postgrest drop_ins observability router" ;;
        *) echo "UNKNOWN" ;;
    esac
}
for file in $(find src/pg -name '*.cpp' -o -name '*.hpp' | sort); do
    case "$file" in
        src/pg/*/*/*) printf 'layout: src/pg has one level of rooms\n%s\n' "$file" >&2; status=1; continue ;;
        src/pg/*/*) ;;
        *) printf 'layout: every file of src/pg is in a room\n%s\n' "$file" >&2; status=1; continue ;;
    esac
    room="${file#src/pg/}"; room="${room%%/*}"
    below="$(rooms_below "$room")"
    if [ "$below" = UNKNOWN ]; then
        printf 'layout: src/pg/%s is not a room of the map (CONTRIBUTING.md)\n' "$room" >&2
        status=1
        continue
    fi
    while IFS= read -r line; do
        included="${line#*\"pg/}"; included="${included%%\"*}"
        other="${included%%/*}"
        case "$included" in bridge/postgres.hpp | bridge/settings.hpp) continue ;; esac
        [ "$other" = "$room" ] && continue
        case " $below " in *" $other "*) continue ;; esac
        printf 'layout: room %s may include only %s (and the door)\n%s: %s\n' "$room" "${below:-the door}" "$file" "$line" >&2
        status=1
    done < <(grep -E '^#include "pg/' "$file")
done

# PostgreSQL's headers come after the door (postgres.h first, as PostgreSQL requires; every header
# of src/pg includes the door) and inside extern "C": a file that needs more than the door opens
# one block for them.
for file in $(find src/pg -name '*.cpp' -o -name '*.hpp' | sort); do
    [ "$file" = src/pg/bridge/postgres.hpp ] && continue
    awk -v file="$file" '
        /^#include "pg\// { door = 1 }
        /^extern "C" \{/ { inside = 1 }
        inside && /^}/ { inside = 0 }
        /^#include [<"][a-z_]+\/[a-z_0-9]+\.h[">]/ || /^#include "(postgres|fmgr|funcapi|miscadmin|pgstat|pgtime)\.h"/ {
            if ($0 ~ /<sys\// || $0 ~ /<arpa\// || $0 ~ /<netinet\//) next
            if (!door || !inside) { printf "layout: a PostgreSQL header outside extern \"C\" after the door\n%s: %s\n", file, $0 > "/dev/stderr"; bad = 1 }
        }
        END { exit bad }' "$file" || status=1
done

# Each C entry point is named after its SQL function: <extension>_<function>. The one exception
# is named in src/pg/observability/memory_stats.cpp (a released script holds the name).
entry_names() {
    local extension="$1"
    shift
    awk -v extension="$extension" '
        match($0, /FUNCTION[[:space:]]+[A-Za-z_@.]+[[:space:]]*\(/) {
            name = substr($0, RSTART, RLENGTH); sub(/^FUNCTION[[:space:]]+/, "", name)
            sub(/[[:space:]]*\($/, "", name); sub(/.*\./, "", name); last = name
        }
        match($0, /AS[[:space:]]+\x27(MODULE_PATHNAME|\$libdir\/ratelimit)\x27[[:space:]]*,[[:space:]]*\x27[a-z_0-9]+\x27/) {
            symbol = substr($0, RSTART, RLENGTH); sub(/.*,[[:space:]]*\x27/, "", symbol); sub(/\x27$/, "", symbol)
            if (symbol != extension "_" last && !(extension == "ratelimit" && last == "memory_stats" && symbol == "ratelimit_memory_store_stats")) {
                printf "layout: the entry point of %s is named %s, not %s_%s\n%s\n", last, symbol, extension, last, FILENAME > "/dev/stderr"; bad = 1
            }
        }
        END { exit bad }' "$@"
}
entry_names ratelimit sql/install/*.sql || status=1
entry_names ratelimit_router sql/router/*.sql || status=1
for app_script in sql/drop_ins/*.sql; do
    app="$(basename "$app_script" .sql)"
    entry_names "ratelimit_$app" "$app_script" || status=1
done

[ "$status" = 0 ] && echo "layout: the rooms' rules hold"
exit "$status"
