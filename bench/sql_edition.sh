#!/usr/bin/env bash
# Benchmark of the SQL edition against the C edition: the same calls in two databases of one
# server, one per edition (the C edition's extension; the SQL edition from its plain file), 8
# clients: consume on the table and unlogged engines, one hot key and over 10,000 keys, and
# check_http on a policy, each against the SELECT 1 floor; and each app's drop-ins on the SQL
# edition against that app's own plpgsql limiter, and against that limiter with only the lookup of
# its policy added (the least a drop-in can do in PL/pgSQL).
# A benchmark, not a test: it fails only when the benchmark itself is broken, never on a timing.
#
# Run as root from the repository root:  BENCH_SECONDS=15 bash bench/sql_edition.sh
#   BENCH_SECONDS         measured seconds per case (default 15)
#   BENCH_WARMUP_SECONDS  warm-up seconds per case, same script, not measured (default 3)
#   BENCH_NO_BUILD        set: measure the installed C edition and the SQL edition built already
# Prints a markdown table and writes it to bench/results/sql_edition.md.
set -euo pipefail
cd "$(dirname "$0")/.."
source bench/lib.sh

bench_init sql_edition
if [ -z "${BENCH_NO_BUILD:-}" ]; then
    make -s sql-edition
fi
plain_file="build/sql_edition/ratelimit_sql--$(sed -n "s/^default_version = '\(.*\)'/\1/p" ratelimit.control).plain.sql"
bench_start
c_database="$database"
sql_database="${database}_sql"
psql -X -q -v ON_ERROR_STOP=1 -c "CREATE DATABASE $sql_database" >/dev/null
psql -X -q -v ON_ERROR_STOP=1 -d "$sql_database" -f "$plain_file" >/dev/null
psql -X -q -v ON_ERROR_STOP=1 -d "$sql_database" -f "bench/$bench_name/setup.sql" >/dev/null

# edition_case EDITION NAME SCRIPT: the case NAME run in EDITION's database, as EDITION_NAME.
edition_case() {
    local edition="$1"
    shift
    if [ "$edition" = sql ]; then
        database="$sql_database"
    else
        database="$c_database"
    fi
    bench_case "${edition}_$1" "$2"
    database="$c_database"
}

bench_case select1 select1.sql
for script in consume_table_hot consume_table_10k consume_unlogged_hot consume_unlogged_10k check_http; do
    edition_case c "$script" "$script.sql"
    edition_case sql "$script" "$script.sql"
done

# Each app's drop-ins on the SQL edition against that app's own plpgsql limiter, over 10,000
# users, in a database per app (the per-RPC and sliding-window apps' check_rate_limit share a
# name): the SQL edition and the app's drop-ins from their plain files, and the app's own
# function as the app's benchmark defines it (bench/<app>/setup.sql, less its CREATE EXTENSION
# of the C edition's drop-ins), with the same scripts.
declare -A drop_in_script=([rpc_limits]=ext_user_10k.sql [endpoint_limits]=ext_10k.sql
                           [sliding_window_limits]=ext_10k.sql)
drop_in_apps=(rpc_limits endpoint_limits sliding_window_limits)
for app in "${drop_in_apps[@]}"; do
    app_database="${database}_sql_$app"
    psql -X -q -v ON_ERROR_STOP=1 -c "CREATE DATABASE $app_database" >/dev/null
    psql -X -q -v ON_ERROR_STOP=1 -d "$app_database" -f "$plain_file" >/dev/null
    psql -X -q -v ON_ERROR_STOP=1 -d "$app_database" \
        -f "${plain_file/ratelimit_sql--/ratelimit_sql_$app--}" >/dev/null
    sed '/^CREATE EXTENSION/d' "bench/$app/setup.sql" |
        psql -X -q -v ON_ERROR_STOP=1 -d "$app_database" >/dev/null
    psql -X -q -v ON_ERROR_STOP=1 -d "$app_database" -f "bench/$bench_name/apps_with_policy_lookup.sql" >/dev/null
    database="$app_database"
    bench_case "${app}_sql" "../$app/${drop_in_script[$app]}"
    bench_case "${app}_plpgsql" "../$app/plpgsql_10k.sql"
    if [ -f "bench/$bench_name/${app}_with_policy_lookup_10k.sql" ]; then
        bench_case "${app}_lookup" "${app}_with_policy_lookup_10k.sql"
    fi
    database="$c_database"
done

# row LABEL SCRIPT: the two editions' rates, each against the floor, and the SQL edition's
# share of the C edition's.
row() {
    printf '| %s | %.0f | %.0f | %s | %s | %s |\n' "$1" "${tps[c_$2]}" "${tps[sql_$2]}" \
        "$(ratio "${tps[c_$2]}" "${tps[select1]}" 3)" "$(ratio "${tps[sql_$2]}" "${tps[select1]}" 3)" \
        "$(ratio "${tps[sql_$2]}" "${tps[c_$2]}" 2)"
}
table="$(
    echo "| case | C edition TPS | SQL edition TPS | C / floor | SQL / floor | SQL / C |"
    echo "|---|---:|---:|---:|---:|---:|"
    printf '| floor: `SELECT 1` | %.0f | | 1.000 | | |\n' "${tps[select1]}"
    row '`consume`, table engine, one key' consume_table_hot
    row '`consume`, table engine, 10k keys' consume_table_10k
    row '`consume`, unlogged engine, one key' consume_unlogged_hot
    row '`consume`, unlogged engine, 10k keys' consume_unlogged_10k
    row '`check_http`, one policy (table engine), 10k subjects' check_http
    echo
    echo "| each app's drop-ins, 10k users | SQL edition TPS | the app's own plpgsql TPS | SQL edition / the app's own | the app's own with its policy looked up TPS | that / the app's own |"
    echo "|---|---:|---:|---:|---:|---:|"
    for app in "${drop_in_apps[@]}"; do
        lookup_tps="" lookup_ratio=""
        if [ -n "${tps[${app}_lookup]:-}" ]; then
            lookup_tps="$(printf '%.0f' "${tps[${app}_lookup]}")"
            lookup_ratio="$(ratio "${tps[${app}_lookup]}" "${tps[${app}_plpgsql]}" 2)"
        fi
        printf '| %s (`%s`) | %.0f | %.0f | %s | %s | %s |\n' "$app" "${drop_in_script[$app]}" "${tps[${app}_sql]}" \
            "${tps[${app}_plpgsql]}" "$(ratio "${tps[${app}_sql]}" "${tps[${app}_plpgsql]}" 2)" "$lookup_tps" "$lookup_ratio"
    done
)"

notes() {
    echo "- Editions: the C edition (\`CREATE EXTENSION ratelimit\`) in database $c_database; the" \
        "SQL edition (its plain file, \`$plain_file\`) in $sql_database; the same scripts in both"
    echo "- Calls: limit 1000000000 per 365 days, so every call is allowed and writes its row;" \
        "both editions wait for the commit's flush on the table engine"
}

bench_finish "The SQL edition against the C edition" "" notes "" "$table"
for drop in "$sql_database" "${drop_in_apps[@]/#/${database}_sql_}"; do
    psql -X -q -v ON_ERROR_STOP=1 -c "DROP DATABASE $drop" >/dev/null
done
