#!/usr/bin/env bash
# Keeps the documentation true: runs every SQL example of README.md and docs/*.md and compares
# its output with the example's text block, and checks docs/reference.md against the catalog.
#
#   bash test/docs/run.sh              check (TAP lines, then "N passed, N failed")
#   bash test/docs/run.sh docs/x.md    check these pages only
#   UPDATE=1 bash test/docs/run.sh     rewrite the text blocks from the actual output; review
#                                      the diff before committing it
#
# Convention in the pages:
#   - a ```sql block is run; when the next non-blank line after it opens a ```text block, that
#     block holds exactly what `psql -X -q` prints for the SQL (result tables with
#     their row counts, errors without psql's "psql:file:line:" prefix; leading and trailing
#     blank lines and trailing spaces ignored), and the two are compared;
#   - a ```sql block without a ```text block after it is run, its output not compared;
#   - a ```sql block right after the line <!-- docs-test: skip --> is not run (shell steps,
#     ALTER SYSTEM, pg_cron jobs in another database: what cannot run here);
#   - a page with the line <!-- docs-test: sql-edition --> runs on the SQL edition, installed
#     from its plain file (make sql-edition builds it), instead of the extension;
#   - docs/reference.md lists every function of the extension and of its drop-in extensions in
#     ```signature blocks, one line each: `ratelimit.<name>(<args>) RETURNS <result>` for the
#     schema ratelimit, `<name>(...)` for the drop-ins in the schema CREATE EXTENSION was given,
#     <args> and <result> exactly as pg_get_function_arguments and pg_get_function_result print
#     them.
#
# Each page runs in one psql session (so a SET in one example holds for the next), on a cluster
# of its own (the memory engine's store is shared by the databases of a server, so pages must
# not see each other's keys), in a new database with the extension created, with
# ratelimit.test_clock at 2026-03-01 10:00:00 UTC and TimeZone UTC. Run as root from anywhere;
# the extension must be installed (make -s -j2 && make -s install).
set -uo pipefail
cd "$(dirname "$0")/../.."

source scripts/tap.sh
source scripts/cluster.sh
# The SQL edition's plain file, for the pages that show it (built from the tree: no server needed).
make -s sql-edition >/dev/null

work="$(mktemp -d /tmp/ratelimit-docs.XXXXXX)"
chmod 755 "$work"
# cluster_start replaces the EXIT trap; this one is set again after each start.
cleanup() {
    cluster_stop >/dev/null
    rm -rf "$work"
}

if [ "$#" -gt 0 ]; then
    pages=("$@")
else
    pages=(README.md docs/*.md)
fi

# start_page_cluster [EDITION]: EDITION sql installs the SQL edition from its plain file (built
# by make sql-edition) instead of creating the extension, its clock switched to the test clock.
start_page_cluster() {
    cluster_start "shared_preload_libraries = 'pg_cron,ratelimit'" "cron.database_name = 'postgres'" \
        "max_worker_processes = 16" "fsync = off" >/dev/null || return 1
    trap cleanup EXIT
    psql -X -q -v ON_ERROR_STOP=1 -c "CREATE DATABASE docs" >/dev/null || return 1
    if [ "${1:-c}" = sql ]; then
        PGDATABASE=docs psql -X -q -v ON_ERROR_STOP=1 -o /dev/null \
            -f "build/sql_edition/ratelimit_sql--$(sed -n "s/^default_version = '\(.*\)'/\1/p" ratelimit.control).plain.sql" &&
            PGDATABASE=docs psql -X -q -v ON_ERROR_STOP=1 -o /dev/null -c "SELECT ratelimit.use_test_clock(true)"
    else
        PGDATABASE=docs psql -X -q -v ON_ERROR_STOP=1 -c "CREATE EXTENSION ratelimit" >/dev/null
    fi
}

# Prints the text of a block's output, trailing spaces and surrounding blank lines removed, so
# that an editor that trims lines does not break an example.
normalize() {
    sed -e 's/[ \t]*$//' "$1" | awk 'NF { for (; blank > 0; blank--) print ""; print; seen = 1; next }
                                      seen { blank++ }'
}

check_page() {
    local page="$1" dir="$work/$(echo "$1" | tr '/.' '__')"
    mkdir -p "$dir"
    chmod 755 "$dir"
    : >"$dir/session.sql"
    : >"$dir/blocks.tsv"
    awk -v out="$dir" -f test/docs/blocks.awk "$page"
    local blocks
    blocks="$(sort -n "$dir/blocks.tsv")"
    if [ -z "$blocks" ]; then
        return 0
    fi
    # A page that shows the SQL edition says so on a line of its own.
    local edition=c
    if grep -qxF '<!-- docs-test: sql-edition -->' "$page"; then
        edition=sql
    fi
    if ! start_page_cluster "$edition"; then
        ok 1 "$page: cluster and database start"
        return 0
    fi
    {
        echo "SET ratelimit.test_clock = '2026-03-01 10:00:00+00';"
        echo "SET TimeZone = 'UTC';"
        cat "$dir/session.sql"
    } >"$dir/run.sql"
    chmod 644 "$dir/run.sql"
    # One session for the page; stderr into the same stream, so an error sits where it happens
    # (psql flushes its output before it prints an error).
    PGDATABASE=docs psql -X -q -f "$dir/run.sql" >"$dir/all.out" 2>&1
    # Split the output at the markers: $dir/N.actual is block N's output.
    awk -v dir="$dir" '
        /^@@docs-block [0-9]+@@$/ { n = $2; sub(/@@$/, "", n); file = dir "/" n ".actual"; printf "" > file; next }
        file { sub(/^psql:[^ ]*:[0-9]+: /, ""); print > file }' "$dir/all.out"

    local n first open close
    local replacements="$dir/replacements.tsv"
    : >"$replacements"
    while IFS=$'\t' read -r n first open close; do
        [ -f "$dir/$n.actual" ] || : >"$dir/$n.actual"
        if [ "$open" = 0 ]; then
            # Run, not compared; an error still fails it, as an example that cannot run is wrong.
            if grep -q '^ERROR:' "$dir/$n.actual"; then
                ok 1 "$page:$first runs without error"
                sed 's/^/#   /' "$dir/$n.actual"
            else
                ok 0 "$page:$first runs without error"
            fi
            continue
        fi
        normalize "$dir/$n.actual" >"$dir/$n.got"
        normalize "$dir/$n.expected" >"$dir/$n.want"
        if cmp -s "$dir/$n.got" "$dir/$n.want"; then
            ok 0 "$page:$first output as shown"
        elif [ "${UPDATE:-}" = 1 ]; then
            printf '%s\t%s\t%s\n' "$open" "$close" "$dir/$n.got" >>"$replacements"
            ok 0 "$page:$first output rewritten (UPDATE=1)"
        else
            ok 1 "$page:$first output as shown"
            diff -u --label "shown in $page" --label "printed by psql" "$dir/$n.want" "$dir/$n.got" |
                sed 's/^/#   /'
        fi
    done <<<"$blocks"
    if [ -s "$replacements" ]; then
        # Rewrite the text blocks between their fences with the actual output.
        awk -v list="$replacements" '
            BEGIN { while ((getline l < list) > 0) { split(l, f, "\t"); stop[f[1]] = f[2]; src[f[1]] = f[3] } }
            FNR in src { print; while ((getline o < src[FNR]) > 0) print o; close(src[FNR]); skipping = stop[FNR]; next }
            skipping && FNR < skipping { next }
            { skipping = 0; print }' "$page" >"$dir/page.new" && cat "$dir/page.new" >"$page"
    fi
    cluster_stop >/dev/null
}

check_reference() {
    local ref=docs/reference.md
    if ! start_page_cluster; then
        ok 1 "reference: cluster and database start"
        return 0
    fi
    # Every function that belongs to the extension or to one of its drop-in extensions (the
    # sliding-window app's in a schema of its own, as it cannot share one with the per-RPC app's),
    # as the reference must spell it.
    PGDATABASE=docs psql -X -q -A -t -v ON_ERROR_STOP=1 >"$work/catalog.txt" <<'SQL'
\o /dev/null
CREATE EXTENSION ratelimit_rpc_limits;
CREATE EXTENSION ratelimit_endpoint_limits;
CREATE SCHEMA sliding_window;
CREATE EXTENSION ratelimit_sliding_window_limits SCHEMA sliding_window;
\o
SELECT CASE WHEN n.nspname = 'ratelimit' THEN 'ratelimit.' ELSE '' END
       || p.proname || '(' || pg_get_function_arguments(p.oid) || ') RETURNS '
       || pg_get_function_result(p.oid)
  FROM pg_depend d
  JOIN pg_extension e ON e.oid = d.refobjid AND d.refclassid = 'pg_extension'::regclass
  JOIN pg_proc p ON p.oid = d.objid AND d.classid = 'pg_proc'::regclass
  JOIN pg_namespace n ON n.oid = p.pronamespace
 WHERE e.extname IN ('ratelimit', 'ratelimit_rpc_limits', 'ratelimit_endpoint_limits',
                     'ratelimit_sliding_window_limits') AND d.deptype = 'e'
 ORDER BY 1;
SQL
    awk '/^```signature[ \t]*$/ { inside = 1; next } inside && /^```/ { inside = 0; next }
         inside && NF { sub(/[ \t]+$/, ""); print }' "$ref" | sort >"$work/documented.txt"
    local line
    while IFS= read -r line; do
        if grep -qxF -- "$line" "$work/documented.txt"; then
            ok 0 "reference: $line"
        else
            ok 1 "reference: $line (missing from $ref, or written differently)"
        fi
    done <"$work/catalog.txt"
    while IFS= read -r line; do
        if ! grep -qxF -- "$line" "$work/catalog.txt"; then
            ok 1 "reference: $line (in $ref, but no such function in the catalog)"
        fi
    done <"$work/documented.txt"
    cluster_stop >/dev/null
}

for page in "${pages[@]}"; do
    check_page "$page"
done
if [ "$#" -eq 0 ] || printf '%s\n' "$@" | grep -qx 'docs/reference.md'; then
    check_reference
fi

cleanup
echo "$((checks - failures)) passed, $failures failed"
[ "$failures" -eq 0 ]
