#!/usr/bin/env bash
# The SQL edition decides exactly as the C edition (test/sql_edition/differential_test.cpp says
# how): on a cluster of its own that preloads ratelimit, two databases, one with the C edition
# (CREATE EXTENSION ratelimit, by a superuser) and one with the SQL edition from its plain file,
# installed by the role that owns that database and is no superuser, whose clock then reads
# ratelimit.test_clock; the same random calls made in both.
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

source scripts/cluster.sh
cluster_start "shared_preload_libraries = 'ratelimit'" "fsync = off"

owner=ratelimit_sql_owner
psql -X -q -v ON_ERROR_STOP=1 <<SQL
CREATE DATABASE ratelimit_c_edition;
CREATE ROLE $owner LOGIN;
CREATE DATABASE ratelimit_sql_edition OWNER $owner;
-- With the library loaded, ratelimit.test_clock is the C edition's setting, which only a
-- superuser may set unless granted: the SQL edition's owner sets it to move its clock.
GRANT SET ON PARAMETER ratelimit.test_clock TO $owner;
SQL
psql -X -q -v ON_ERROR_STOP=1 -d ratelimit_c_edition -c "CREATE EXTENSION ratelimit"
psql -X -q -v ON_ERROR_STOP=1 -U "$owner" -d ratelimit_sql_edition -o /dev/null -f "$plain"
psql -X -q -v ON_ERROR_STOP=1 -U "$owner" -d ratelimit_sql_edition -o /dev/null \
    -c "SELECT ratelimit.use_test_clock(true)"
# Each install makes a random partition-key secret, which check_http's pk parameter is hashed
# with: the SQL edition takes the C edition's, so that their headers agree.
secret="$(psql -X -A -t -v ON_ERROR_STOP=1 -d ratelimit_c_edition \
    -c "SELECT encode(secret, 'hex') FROM ratelimit.partition_key_secret")"
psql -X -q -v ON_ERROR_STOP=1 -d ratelimit_sql_edition \
    -c "UPDATE ratelimit.partition_key_secret SET secret = decode('$secret', 'hex')"

test/sql_edition/differential_test "dbname=ratelimit_c_edition user=postgres" \
    "dbname=ratelimit_sql_edition user=$owner"
