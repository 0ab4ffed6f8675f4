#!/usr/bin/env bash
# The TypeScript edge helper's tests (examples/edge/, node:test with the pg package) and the
# IETF fields' conformance test (test/node/, parsed with the structured-headers package) against
# the running cluster, in a database of their own that is dropped at the end, also on failure.
# npm installs the locked dependencies only when node_modules is missing or older than
# package-lock.json. Needs PGHOST, PGPORT and PGUSER (a superuser) as scripts/cluster.sh sets them.
set -euo pipefail
cd "$(dirname "$0")/../.."

edge=examples/edge
database=ratelimit_node

drop_database() {
    psql -X -q -d postgres -c "DROP DATABASE IF EXISTS $database" >/dev/null || true
}

psql -X -q -v ON_ERROR_STOP=1 -d postgres -c "CREATE DATABASE $database" >/dev/null
trap drop_database EXIT
psql -X -q -v ON_ERROR_STOP=1 -d "$database" -c "CREATE EXTENSION ratelimit" \
    -c "SELECT ratelimit.load_preset('social-activity')" >/dev/null  # its tiers

# npm writes node_modules/.package-lock.json at the end of an install.
for project in "$edge" test/node; do
    if [ ! -f "$project/node_modules/.package-lock.json" ] \
        || [ "$project/package-lock.json" -nt "$project/node_modules/.package-lock.json" ]; then
        (cd "$project" && npm ci --no-audit --no-fund)
    else
        echo "node: dependencies up to date in $project/node_modules"
    fi
done

status=0
(cd "$edge" && PGDATABASE=$database npm test) || status=$?
(cd test/node && PGDATABASE=$database npm test) || status=$?
exit $status
