#!/usr/bin/env bash
# The SQL edition decides exactly as the C edition (test/sql_edition/differential_test.cpp says
# how): on a cluster of its own that preloads ratelimit, pairs of databases, one of each pair with
# the C edition (CREATE EXTENSION, by a superuser) and one with the SQL edition from its plain
# files, installed by the role that owns that database and is no superuser, whose clock then reads
# ratelimit.test_clock; the same random calls made in both of a pair. One pair has the editions
# alone (the native and policy calls); each app's drop-ins have a pair of their own
# (ratelimit_<app>, and ratelimit_sql_<app>'s plain file), as a database gets only one app's.
#
#   DIFFERENTIAL_STEPS  how many calls (default 100000)
#   DIFFERENTIAL_SEED   replays a run (every run prints its seed)
#
# Run from the repository root (as root or as the postgres OS user) with the C edition installed,
# as test/suites.sh installs it: bash test/sql_edition/differential.sh
set -euo pipefail
cd "$(dirname "$0")/../.."

version="$(sed -n "s/^default_version = '\(.*\)'/\1/p" ratelimit.control)"
make -s sql-edition test/sql_edition/differential_test
plain="build/sql_edition/ratelimit_sql--$version.plain.sql"
apps=(rpc_limits endpoint_limits sliding_window_limits)

source scripts/cluster.sh
cluster_start "shared_preload_libraries = 'ratelimit'" "fsync = off"

owner=ratelimit_sql_owner
{
    # Supabase's API roles, which the drop-ins' grants and caller rules name; the SQL edition's
    # owner may act as each (SET ROLE), as the superuser does in the C edition's databases.
    echo "CREATE ROLE anon NOLOGIN;"
    echo "CREATE ROLE authenticated NOLOGIN;"
    echo "CREATE ROLE service_role NOLOGIN;"
    echo "CREATE ROLE $owner LOGIN;"
    echo "GRANT anon, authenticated, service_role TO $owner;"
    echo "CREATE DATABASE ratelimit_c_edition;"
    echo "CREATE DATABASE ratelimit_sql_edition OWNER $owner;"
    for app in "${apps[@]}"; do
        echo "CREATE DATABASE ratelimit_c_$app;"
        echo "CREATE DATABASE ratelimit_sql_$app OWNER $owner;"
    done
    # With the library loaded, these are the C edition's settings, which only a superuser may set
    # unless granted: the SQL edition's owner sets the clock, and the drop-ins' settings that
    # the test varies.
    echo "GRANT SET ON PARAMETER ratelimit.test_clock, ratelimit.dropin_engine,"
    echo "    ratelimit.dropin_require_policy, ratelimit.dropin_caller_limits, ratelimit.jwt_roles"
    echo "    TO $owner;"
} | psql -X -q -v ON_ERROR_STOP=1

# install_editions SUFFIX [APP]: the C edition in ratelimit_c_SUFFIX, the SQL edition in
# ratelimit_sql_SUFFIX, and the app's drop-ins in both.
install_editions() {
    local c_database="ratelimit_c_$1" sql_database="ratelimit_sql_$1"
    psql -X -q -v ON_ERROR_STOP=1 -d "$c_database" -c "CREATE EXTENSION ratelimit"
    psql -X -q -v ON_ERROR_STOP=1 -U "$owner" -d "$sql_database" -o /dev/null -f "$plain"
    if [ $# -gt 1 ]; then
        psql -X -q -v ON_ERROR_STOP=1 -d "$c_database" -c "CREATE EXTENSION ratelimit_$2"
        psql -X -q -v ON_ERROR_STOP=1 -U "$owner" -d "$sql_database" -o /dev/null \
            -f "build/sql_edition/ratelimit_sql_$2--$version.plain.sql"
    fi
    psql -X -q -v ON_ERROR_STOP=1 -U "$owner" -d "$sql_database" -o /dev/null \
        -c "SELECT ratelimit.use_test_clock(true)"
    # Each install makes a random partition-key secret, which check_http's pk parameter is
    # hashed with: the SQL edition takes the C edition's, so that their headers agree.
    local secret
    secret="$(psql -X -A -t -v ON_ERROR_STOP=1 -d "$c_database" \
        -c "SELECT encode(secret, 'hex') FROM ratelimit.partition_key_secret")"
    psql -X -q -v ON_ERROR_STOP=1 -d "$sql_database" \
        -c "UPDATE ratelimit.partition_key_secret SET secret = decode('$secret', 'hex')"
}

install_editions edition
app_databases=()
for app in "${apps[@]}"; do
    install_editions "$app" "$app"
    app_databases+=("$app" "dbname=ratelimit_c_$app user=postgres"
        "dbname=ratelimit_sql_$app user=$owner")
done

test/sql_edition/differential_test "dbname=ratelimit_c_edition user=postgres" \
    "dbname=ratelimit_sql_edition user=$owner" "${app_databases[@]}"
