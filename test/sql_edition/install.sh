#!/usr/bin/env bash
# The SQL edition (ratelimit_sql, docs/sql-edition.md) installed as hosted platforms install it,
# on a cluster of its own that preloads pg_tle and not ratelimit (a hosted server has no library
# of ours), each install by a role that owns its database and is no superuser:
#   - through pg_tle, as Supabase and RDS take it: the migration file
#     (ratelimit_sql--VERSION.pg_tle.sql) run with psql by a member of pgtle_admin; the extension
#     at its version, ratelimit.sql_edition saying so, the grants, the pinned search_path of every
#     SECURITY DEFINER function; DROP EXTENSION, then CREATE EXTENSION again;
#   - from the plain file, in another database: psql -f twice, the second doing nothing; the
#     recorded version, the same grants;
#   - the migration over the plain file's install: stopped by the install's guard (42P06),
#     naming the plain file, and nothing changed;
#   - the pgTAP files of the native API and the policies (the lists below) against each install,
#     run by the superuser as the pgtap suite runs them on the C edition; then each app's drop-ins
#     installed beside it by the owner (ratelimit_sql_<app>, the way the edition was installed),
#     and the drop-ins' pgTAP files against them;
#   - the drop-ins' pg_regress tests (sql/<app>.sql) against each install, in a database of each
#     app's: their output is expected/<app>.out, but for the errors of the two statements that
#     create and drop the C edition's extension, which a database of the SQL edition refuses;
#   - the concurrency suite's exactness tests of the native API against the plain file's install.
# The grants are compared with the C edition's list in sql/install/privileges.sql, for every
# object of the schema and each of anon, authenticated, service_role and a role with no grant
# (what PUBLIC may): the edition's own objects are in no list, so granted to nobody.
#
# pg_tle is built from its source in ../shared/vendor/ (scripts/pg-tle.sh); where that is
# absent, the parts that need it are reported skipped and the plain file's still run.
set -euo pipefail
cd "$(dirname "$0")/../.."
source scripts/tap.sh

# The pgTAP files run against each install: each includes test/pgtap/install_edition.psql,
# which uses the SQL edition it finds there and skips the tests of what only the C edition has
# (the memory engine, the per-policy counters, the settings a library defines).
pgtap_files=(native_api native_api_errors batch_calls calendar_periods delay limit_changes
             policies policy_engine policy_delay policy_lookups penalties presets declared_limiters
             insert_limits policy_privileges)
# The drop-ins' pgTAP files, run once the apps' drop-ins are installed (each also includes
# test/pgtap/install_drop_in.psql, which finds them there): the per-RPC and endpoint limits in
# public, the sliding window's in the schema sliding_window, as the files have them.
drop_in_pgtap_files=(jwt_claims rpc_limits_privileges endpoint_and_sliding_window_privileges
                     drop_in_hardening drop_ins_on_engines default_privileges)
# The apps' drop-ins (the Makefile's DROP_IN_APPS), each with a pg_regress test of its own
# (sql/<app>.sql).
drop_in_apps=(rpc_limits endpoint_limits sliding_window_limits)

version="$(sed -n "s/^default_version = '\(.*\)'/\1/p" ratelimit.control)"
make -s sql-edition >/dev/null || { echo "sql-edition: make sql-edition failed" >&2; exit 1; }
migration="build/sql_edition/ratelimit_sql--$version.pg_tle.sql"
plain="build/sql_edition/ratelimit_sql--$version.plain.sql"
# drop_in_file APP pg_tle|plain: the file of ratelimit_sql_<APP> for that install.
drop_in_file() {
    echo "build/sql_edition/ratelimit_sql_$1--$version.$2.sql"
}

pg_tle=true
pg_tle_status=0
pg_tle_output="$(bash scripts/pg-tle.sh 2>&1)" || pg_tle_status=$?
echo "$pg_tle_output" | sed 's/^/# /'
case "$pg_tle_status" in
0) ;;
3)
    pg_tle=false
    pg_tle_missing="$(tail -1 <<<"$pg_tle_output" | sed 's/^pg-tle: //')"
    ;;
*)
    echo "sql-edition: scripts/pg-tle.sh failed (status $pg_tle_status)" >&2
    exit 1
    ;;
esac

source scripts/cluster.sh
if [ "$pg_tle" = true ]; then
    cluster_start "shared_preload_libraries = 'pg_tle'" "fsync = off" >/dev/null
else
    cluster_start "fsync = off" >/dev/null
fi

# q [psql options] SQL: one value, as the superuser unless -U says otherwise.
q() {
    psql -X -A -t -q -v ON_ERROR_STOP=1 "${@:1:$#-1}" -c "${!#}"
}
# error_of [psql options] FILE: "SQLSTATE|message" of the first error FILE raises, or "no error".
error_of() {
    local out
    if out="$(psql -X -q -v ON_ERROR_STOP=1 -v VERBOSITY=verbose "$@" 2>&1)"; then
        echo "no error"
    else
        sed -n 's/^.*ERROR:  \([0-9A-Z]\{5\}\): /\1|/p' <<<"$out" | head -1
    fi
}

# Supabase's API roles; each install's owner, a member of no role but pgtle_admin; a role
# granted nothing, which has what PUBLIC has. The owners' default privileges hand whatever they
# make to PUBLIC and the API roles, as a project's may: each install must take that back.
psql -X -q -v ON_ERROR_STOP=1 -f test/pgtap/supabase_roles.psql >/dev/null
psql -X -q -v ON_ERROR_STOP=1 >/dev/null <<'SQL'
CREATE ROLE tle_owner LOGIN;
CREATE ROLE plain_owner LOGIN;
CREATE ROLE no_grants NOLOGIN;
CREATE DATABASE sql_tle OWNER tle_owner;
CREATE DATABASE sql_plain OWNER plain_owner;
SQL
for pair in sql_tle:tle_owner sql_plain:plain_owner; do
    psql -X -q -v ON_ERROR_STOP=1 -d "${pair%%:*}" >/dev/null <<SQL
ALTER DEFAULT PRIVILEGES FOR ROLE ${pair#*:} GRANT ALL ON TABLES TO PUBLIC, anon, authenticated, service_role;
ALTER DEFAULT PRIVILEGES FOR ROLE ${pair#*:} GRANT ALL ON SEQUENCES TO PUBLIC, anon, authenticated, service_role;
ALTER DEFAULT PRIVILEGES FOR ROLE ${pair#*:} GRANT ALL ON FUNCTIONS TO PUBLIC, anon, authenticated, service_role;
ALTER DEFAULT PRIVILEGES FOR ROLE ${pair#*:} GRANT ALL ON TYPES TO PUBLIC, anon, authenticated, service_role;
ALTER DEFAULT PRIVILEGES FOR ROLE ${pair#*:} GRANT ALL ON SCHEMAS TO PUBLIC, anon, authenticated, service_role;
SQL
done

# grant_differences DATABASE: each privilege on an object of the schema ratelimit that a role
# has and the C edition's list does not give it, or the reverse, on one line; nothing when they
# agree.
grant_differences() {
    {
        echo "CREATE TEMP TABLE c_edition_grants AS"
        echo "SELECT l.g[i][1] AS privilege, l.g[i][2] AS kind, l.g[i][3] AS object, l.g[i][4] AS grantee"
        echo "FROM (SELECT ARRAY["
        sed -n '/^-- @begin ratelimit_grants$/,/^-- @end ratelimit_grants$/{/^ *--/d;p}' \
            sql/install/privileges.sql
        echo "] AS g) AS l, generate_subscripts(l.g, 1) AS i;"
        cat <<'SQL'
WITH objects(kind, object, privileges) AS (
    SELECT 'FUNCTION', p.oid::regprocedure::text, ARRAY['EXECUTE']
    FROM pg_proc p WHERE p.pronamespace = 'ratelimit'::regnamespace
    UNION ALL
    SELECT 'TABLE', c.oid::regclass::text,
           ARRAY['SELECT', 'INSERT', 'UPDATE', 'DELETE', 'TRUNCATE', 'REFERENCES', 'TRIGGER']
    FROM pg_class c WHERE c.relnamespace = 'ratelimit'::regnamespace AND c.relkind IN ('r', 'p', 'v', 'm', 'f')
    UNION ALL
    SELECT 'SEQUENCE', c.oid::regclass::text, ARRAY['USAGE', 'SELECT', 'UPDATE']
    FROM pg_class c WHERE c.relnamespace = 'ratelimit'::regnamespace AND c.relkind = 'S'
    UNION ALL
    SELECT 'SCHEMA', 'ratelimit', ARRAY['USAGE', 'CREATE']
    UNION ALL
    -- The types CREATE TYPE made, as the list names them: not a table's row type nor an array.
    SELECT 'TYPE', t.oid::regtype::text, ARRAY['USAGE']
    FROM pg_type t
    WHERE t.typnamespace = 'ratelimit'::regnamespace
      AND t.typsubscript <> 'pg_catalog.array_subscript_handler'::regproc
      AND NOT EXISTS (SELECT FROM pg_class c WHERE c.oid = t.typrelid AND c.relkind <> 'c')
)
SELECT string_agg(format('%s %s on %s: %s, the C edition''s list %s', r.role, p.privilege, o.object,
                         CASE WHEN x.has THEN 'granted' ELSE 'not granted' END,
                         CASE WHEN x.listed THEN 'grants it' ELSE 'does not' END), '; '
                  ORDER BY r.role, o.object, p.privilege)
FROM (VALUES ('anon'), ('authenticated'), ('service_role'), ('no_grants')) AS r(role)
CROSS JOIN objects o
CROSS JOIN LATERAL unnest(o.privileges) AS p(privilege)
CROSS JOIN LATERAL (
    SELECT CASE o.kind
               WHEN 'FUNCTION' THEN has_function_privilege(r.role, o.object, p.privilege)
               WHEN 'TABLE' THEN has_table_privilege(r.role, o.object, p.privilege)
               WHEN 'SEQUENCE' THEN has_sequence_privilege(r.role, o.object, p.privilege)
               WHEN 'SCHEMA' THEN has_schema_privilege(r.role, o.object, p.privilege)
               ELSE has_type_privilege(r.role, o.object, p.privilege) END AS has,
           EXISTS (SELECT FROM c_edition_grants g
                   WHERE g.kind = o.kind AND g.object = o.object AND g.privilege = p.privilege
                     AND g.grantee IN (r.role, 'PUBLIC')) AS listed
) AS x
WHERE x.has IS DISTINCT FROM x.listed;
SQL
    } | psql -X -A -t -q -v ON_ERROR_STOP=1 -d "$1" 2>&1
}

# unpinned_definers DATABASE: "N definers" and, after a colon, each SECURITY DEFINER function of
# the schema whose search_path is not pinned to pg_catalog, pg_temp.
unpinned_definers() {
    q -d "$1" "SELECT count(*) || ' definers:' || coalesce(string_agg(p.oid::regprocedure::text, ', ')
                                                                  FILTER (WHERE NOT pinned), '')
               FROM pg_proc p,
                    LATERAL (SELECT coalesce('search_path=pg_catalog, pg_temp' = ANY (p.proconfig), false)
                                 AS pinned) AS s
               WHERE p.pronamespace = 'ratelimit'::regnamespace AND p.prosecdef"
}

# snapshot DATABASE: the schema's objects, owners, grants and settings, and each table's rows
# (count and newest xmin), as one checksum.
snapshot() {
    q -d "$1" "SELECT md5(string_agg(x, E'\n' ORDER BY x)) FROM (
        SELECT format('schema %s %s %s', n.oid, n.nspowner, n.nspacl) FROM pg_namespace n
        WHERE n.nspname = 'ratelimit'
        UNION ALL
        SELECT format('class %s %s %s %s %s', c.oid, c.relname, c.relowner, c.relacl,
                      CASE WHEN c.relkind IN ('r', 'p') THEN query_to_xml(format(
                          'SELECT count(*), max(xmin::text::bigint) FROM %s', c.oid::regclass), false, false, '')::text END)
        FROM pg_class c WHERE c.relnamespace = 'ratelimit'::regnamespace
        UNION ALL
        SELECT format('function %s %s %s %s %s %s', p.oid, p.oid::regprocedure, p.proowner, p.proacl,
                      p.proconfig, md5(p.prosrc))
        FROM pg_proc p WHERE p.pronamespace = 'ratelimit'::regnamespace
        UNION ALL
        SELECT format('type %s %s %s %s', t.oid, t.typname, t.typowner, t.typacl)
        FROM pg_type t WHERE t.typnamespace = 'ratelimit'::regnamespace) AS s(x)"
}

# pgtap_against DATABASE WHAT FILE...: each pgTAP file named against the SQL edition in DATABASE.
pgtap_against() {
    local database="$1" what="$2" file log status
    shift 2
    PGOPTIONS="-c client_min_messages=warning" q -d "$database" "CREATE EXTENSION IF NOT EXISTS pgtap" >/dev/null
    for file in "$@"; do
        log="$CLUSTER_DIR/pgtap-$database-$file.log"
        status=0
        PGDATABASE="$database" pg_prove -Q "test/pgtap/$file.sql" >"$log" 2>&1 || status=$?
        ok "$status" "test/pgtap/$file.sql passes against the SQL edition $what"
        if [ "$status" -ne 0 ]; then
            { grep -m1 'ERROR:' "$log" || true
              grep -E 'Failed tests?:|Parse errors:' "$log" | head -2 || true
            } | sed 's/^ */#   /'
        fi
    done
}

# install_edition DATABASE OWNER pg_tle|plain: the SQL edition in DATABASE, as OWNER, through
# pg_tle (whose extension the superuser creates, as the platform does) or from the plain file.
install_edition() {
    local database="$1" owner="$2" how="$3"
    if [ "$how" = pg_tle ]; then
        q -d "$database" "CREATE EXTENSION IF NOT EXISTS pg_tle" >/dev/null 2>&1 &&
            psql -X -q -1 -v ON_ERROR_STOP=1 -U "$owner" -d "$database" -f "$migration" >/dev/null 2>&1
    else
        psql -X -q -v ON_ERROR_STOP=1 -U "$owner" -d "$database" -f "$plain" >/dev/null 2>&1
    fi
}

# install_drop_in DATABASE OWNER pg_tle|plain APP [SCHEMA]: ratelimit_sql_<APP> into SCHEMA
# (public by default; another is made by OWNER first), as OWNER, as that install takes it: the
# migration into the first schema of search_path, the plain file with -v schema=SCHEMA. Prints
# its errors, if any.
install_drop_in() {
    local database="$1" owner="$2" how="$3" app="$4" schema="${5:-public}"
    if [ "$schema" != public ]; then
        q -U "$owner" -d "$database" "CREATE SCHEMA $schema" 2>&1 || return 1
    fi
    if [ "$how" = pg_tle ]; then
        PGOPTIONS="-c search_path=$schema -c client_min_messages=warning" \
            psql -X -q -1 -v ON_ERROR_STOP=1 -U "$owner" -d "$database" \
            -f "$(drop_in_file "$app" pg_tle)" 2>&1 >/dev/null
    else
        PGOPTIONS="-c client_min_messages=warning" \
            psql -X -q -v ON_ERROR_STOP=1 -v schema="$schema" -U "$owner" -d "$database" \
            -f "$(drop_in_file "$app" plain)" 2>&1 >/dev/null
    fi
}

# drop_ins_against DATABASE OWNER pg_tle|plain WHAT: the apps' drop-ins installed beside the SQL
# edition in DATABASE, then the drop-ins' pgTAP files against them.
drop_ins_against() {
    local database="$1" owner="$2" how="$3" what="$4" app schema out status
    for app in "${drop_in_apps[@]}"; do
        # The sliding window's check_rate_limit would clash with the per-RPC one in public.
        schema=public
        [ "$app" != sliding_window_limits ] || schema=sliding_window
        status=0
        out="$(install_drop_in "$database" "$owner" "$how" "$app" "$schema")" || status=$?
        ok "$status" "$what: ratelimit_sql_$app installed in schema $schema by the owner"
        [ "$status" -eq 0 ] || sed 's/^/#   /' <<<"$out" | head -10
    done
    pgtap_against "$database" "$what, beside the apps' drop-ins" "${drop_in_pgtap_files[@]}"
}

# regress_against OWNER pg_tle|plain WHAT: each app's pg_regress test (sql/<app>.sql, after
# sql/regress_setup.sql) in a database of its own holding the SQL edition, the app's drop-ins in
# public and the test clock switched on, by OWNER. The test creates the C edition's
# ratelimit_<app> CASCADE, which stops at the C edition's guard where the SQL edition is, and at
# its end drops that extension, which is then not there: the output, those two errors taken out,
# must be expected/<app>.out.
regress_against() {
    local owner="$1" how="$2" what="$3" app database out status
    local pg_regress
    pg_regress="$(pg_config --pkglibdir)/pgxs/src/test/regress/pg_regress"
    for app in "${drop_in_apps[@]}"; do
        database="regress_${how}_$app"
        out="$CLUSTER_DIR/$database"
        mkdir -p "$out"
        status=0
        { q "CREATE DATABASE $database OWNER $owner" &&
            install_edition "$database" "$owner" "$how" &&
            install_drop_in "$database" "$owner" "$how" "$app" &&
            q -U "$owner" -d "$database" "SELECT ratelimit.use_test_clock(true)" >/dev/null
        } >"$out/setup.log" 2>&1 || status=$?
        if [ "$status" -eq 0 ]; then
            "$pg_regress" --use-existing --dbname="$database" --inputdir=. --outputdir="$out" \
                --bindir="$(pg_config --bindir)" regress_setup "$app" >"$out/pg_regress.log" 2>&1 || true
            # The output without the lines each refused statement added (its error, and the
            # error's HINT, DETAIL and CONTEXT, which may span lines, as the statement a context
            # quotes does from PostgreSQL 18 on; a NOTICE before it is the C edition's too), up
            # to the line the expected output has next, and those errors apart.
            awk -v create="CREATE EXTENSION ratelimit_$app CASCADE;" \
                -v drop="DROP EXTENSION ratelimit_$app, ratelimit;" -v refused="$out/$app.refused" '
                FNR == NR { if (seen && !/^NOTICE:  / && next_line == "") next_line = $0
                            if ($0 == create) seen = 1
                            next }
                $0 == create || $0 == drop { refusing = 1; print; next }
                refusing && /^NOTICE:  / { print; next }
                refusing && /^ERROR:  / { print > refused; next }
                refusing && $0 != next_line { next }
                { refusing = 0; print }' \
                "expected/$app.out" "$out/results/$app.out" >"$out/$app.out" 2>&1 || status=$?
            diff -w -U3 "expected/$app.out" "$out/$app.out" >"$out/$app.diff" 2>&1 || status=$?
            case "$(cat "$out/$app.refused" 2>/dev/null)" in
            "ERROR:  ratelimit cannot be installed in this database: the SQL edition of ratelimit ("*") is installed"$'\n'"ERROR:  extension \"ratelimit_$app\" does not exist") ;;
            *)
                [ "$status" -ne 0 ] || status=2
                { echo "the refused statements' errors:"; cat "$out/$app.refused"; } >>"$out/$app.diff" 2>&1
                ;;
            esac
        fi
        ok "$status" "sql/$app.sql gives expected/$app.out against the SQL edition $what, but for refusing the C edition's CREATE and DROP EXTENSION"
        if [ "$status" -ne 0 ]; then
            cat "$out/setup.log" "$out/$app.diff" 2>/dev/null | head -30 | sed 's/^/#   /'
        fi
    done
}

# ---- through pg_tle -----------------------------------------------------------------------------
if [ "$pg_tle" = true ]; then
    # CREATE EXTENSION pg_tle needs a superuser (its control file is not trusted): the platform's
    # does it (Supabase creates it, RDS lets rds_superuser), and grants pgtle_admin to the
    # project's role. The migration's own CREATE EXTENSION IF NOT EXISTS pg_tle then finds it.
    q -d sql_tle "CREATE EXTENSION pg_tle" >/dev/null
    q "GRANT pgtle_admin TO tle_owner" >/dev/null
    is "$(q "SELECT rolsuper FROM pg_roles WHERE rolname = 'tle_owner'")" "f" \
        "the role that runs the migration is no superuser"
    status=0
    psql -X -q -1 -v ON_ERROR_STOP=1 -U tle_owner -d sql_tle -f "$migration" >"$CLUSTER_DIR/tle.out" 2>&1 ||
        status=$?
    ok "$status" "$migration runs with psql, in one transaction, as the database's owner (a member of pgtle_admin)"
    [ "$status" -eq 0 ] || sed 's/^/#   /' "$CLUSTER_DIR/tle.out" | head -20
    is "$(q -d sql_tle "SELECT extversion || ' ' || extowner::regrole FROM pg_extension WHERE extname = 'ratelimit_sql'")" \
        "$version tle_owner" "through pg_tle: extension ratelimit_sql $version, owned by the owner of the database"
    is "$(q -d sql_tle "SELECT version || ' ' || installed_as FROM ratelimit.sql_edition")" "$version extension" \
        "through pg_tle: ratelimit.sql_edition says $version, an extension"
    is "$(grant_differences sql_tle)" "" \
        "through pg_tle: every grant to anon, authenticated, service_role and PUBLIC is the C edition's list"
    definers="$(unpinned_definers sql_tle 2>&1)" || true
    is "${definers#* definers:}" "" \
        "through pg_tle: each of the ${definers%% *} SECURITY DEFINER functions pins search_path to pg_catalog, pg_temp"

    ok "$(q -U tle_owner -d sql_tle "DROP EXTENSION ratelimit_sql" >/dev/null; echo $?)" \
        "through pg_tle: DROP EXTENSION ratelimit_sql, by its owner"
    is "$(q -d sql_tle "SELECT count(*) FROM pg_namespace WHERE nspname = 'ratelimit'")" "0" \
        "through pg_tle: the schema ratelimit went with it"
    ok "$(q -U tle_owner -d sql_tle "CREATE EXTENSION ratelimit_sql" >/dev/null; echo $?)" \
        "through pg_tle: CREATE EXTENSION ratelimit_sql again, by the owner"
    is "$(q -d sql_tle "SELECT e.extversion || ' ' || s.version || ' ' || s.installed_as
                        FROM pg_extension e, ratelimit.sql_edition s WHERE e.extname = 'ratelimit_sql'")" \
        "$version $version extension" "through pg_tle: reinstalled at $version, ratelimit.sql_edition says so"
    is "$(grant_differences sql_tle)" "" "through pg_tle: reinstalled with the C edition's grants"

    pgtap_against sql_tle "through pg_tle" "${pgtap_files[@]}"
    drop_ins_against sql_tle tle_owner pg_tle "through pg_tle"
    regress_against tle_owner pg_tle "through pg_tle"

else
    skip "the SQL edition through pg_tle" "$pg_tle_missing"
fi

# ---- from the plain file ------------------------------------------------------------------------
is "$(q "SELECT rolsuper FROM pg_roles WHERE rolname = 'plain_owner'")" "f" \
    "the role that runs the plain file is no superuser"
status=0
first="$(psql -X -q -U plain_owner -d sql_plain -f "$plain" 2>&1)" || status=$?
ok "$status" "$plain runs with psql -f as the database's owner"
[ "$status" -eq 0 ] || sed 's/^/#   /' <<<"$first" | head -20
is "$(tail -1 <<<"$first")" "ratelimit_sql $version is installed (plain file)." "the plain file says it installed $version"
is "$(q -d sql_plain "SELECT version || ' ' || installed_as FROM ratelimit.sql_edition")" "$version plain file" \
    "plain file: ratelimit.sql_edition records $version, from the plain file"
is "$(q -d sql_plain "SELECT count(*) FROM pg_extension WHERE extname LIKE 'ratelimit%'")" "0" \
    "plain file: no extension is recorded"
is "$(q -d sql_plain "SELECT nspowner::regrole FROM pg_namespace WHERE nspname = 'ratelimit'")" "plain_owner" \
    "plain file: the schema belongs to the owner of the database"
before="$(snapshot sql_plain 2>&1)" || true
status=0
second="$(psql -X -q -U plain_owner -d sql_plain -f "$plain" 2>&1)" || status=$?
ok "$status" "the plain file runs a second time without an error"
is "$second" "ratelimit_sql $version is already installed in this database: nothing to do." \
    "the second run says there is nothing to do"
is "$(snapshot sql_plain 2>&1)" "$before" "the second run changed nothing (objects, owners, grants, settings, rows)"
is "$(grant_differences sql_plain)" "" \
    "plain file: every grant to anon, authenticated, service_role and PUBLIC is the C edition's list"
definers="$(unpinned_definers sql_plain 2>&1)" || true
is "${definers#* definers:}" "" \
    "plain file: each of the ${definers%% *} SECURITY DEFINER functions pins search_path to pg_catalog, pg_temp"

# ---- the migration over the plain file's install ------------------------------------------------
if [ "$pg_tle" = true ]; then
    q -d sql_plain "CREATE EXTENSION pg_tle" >/dev/null
    q "GRANT pgtle_admin TO plain_owner" >/dev/null
    before="$(snapshot sql_plain 2>&1)" || true
    error="$(error_of -1 -U plain_owner -d sql_plain -f "$migration")"
    is "${error%%|*}" "42P06" "the migration over the plain file's install stops with 42P06 (duplicate_schema)"
    is "${error#*|}" "ratelimit cannot be installed in this database: the SQL edition of ratelimit (its plain file) is installed" \
        "and names the plain file's install"
    is "$(q -d sql_plain "SELECT count(*) FROM pg_extension WHERE extname = 'ratelimit_sql'")|$(snapshot sql_plain 2>&1)" \
        "0|$before" "and changed nothing: no extension, the plain file's install as it was"
else
    skip "the migration over the plain file's install" "$pg_tle_missing"
fi

pgtap_against sql_plain "from the plain file" "${pgtap_files[@]}"
drop_ins_against sql_plain plain_owner plain "from the plain file"
regress_against plain_owner plain "from the plain file"

# The concurrency suite's exactness tests of the native API (64 connections racing on one key
# for every algorithm and both table engines, and on 10,000 keys) and of the apps' drop-ins
# (installed above beside it), against the plain file's install, which needs no pg_tle: the
# tests' fixture empties the state tables and the drop-ins' tables before each test.
status=0
RATELIMIT_EDITION=sql PGDATABASE=sql_plain test/concurrency/concurrency_tests \
    --gtest_filter='AllAlgorithmsAndEngines/NativeOneKey.*:BothEngines/NativeManyKeys.*:RpcLimitsConcurrency.*:EndpointLimitsConcurrency.*:SlidingWindowLimitsConcurrency.*' \
    >"$CLUSTER_DIR/concurrency.out" 2>&1 || status=$?
ok "$status" "the concurrency suite's exactness tests of the native API and the apps' drop-ins pass on the SQL edition ($(
    grep -o '\[  PASSED  \] [0-9]* tests' "$CLUSTER_DIR/concurrency.out" | tail -1 | sed 's/\[  PASSED  \] //') passed)"
[ "$status" -eq 0 ] || grep -E '^\[  FAILED  \]|Failure|rror' "$CLUSTER_DIR/concurrency.out" | head -20 | sed 's/^/#   /'

echo "1..$checks"
if [ "$failures" -gt 0 ]; then
    echo "sql-edition: $failures of $checks failed"
    exit 1
fi
echo "sql-edition: all $checks passed"
