#!/usr/bin/env bash
# A database moved from PostgreSQL 15 to a later major the way users move one: `pg_dump -Fc` on
# 15, `pg_restore` with the newer major's pg_restore (which reads older dumps) into a fresh
# database there. TAP output; exits non-zero if any check fails.
#
#   bash test/cross_major.sh [--in-roots] MAJOR
#
# Run from the host, as root, with the extension built and installed for 15 (here, or with
# --in-roots in the Debian 12 root) and for MAJOR (in its root): test/run.sh does both first.
#  - on 15: the extension with every preset, a policy edited, tiers, a key override, allow and
#    deny entries, a PostgREST route, policies on the table, unlogged and memory engines and
#    native keys on each, the three drop-in extensions (the per-RPC and endpoint limits in
#    public, the sliding window's in the schema sliding_window) and their tables written through
#    their functions, and an application table with a column of the extension's type; counters
#    spent to a known point;
#  - dumped with 15's pg_dump -Fc, restored with MAJOR's pg_restore: no error, no warning; every
#    extension comes back at its version, each drop-in extension in its schema;
#  - the same rows in every table pg_dump carries (the policy tables, the routes, key_state, the
#    application's table), and what docs/operations.md says is not carried starts empty: the
#    unlogged counters, the drop-ins' tables, the memory engine's keys;
#  - the calls work on MAJOR and decide from the restored counters.
# Both clusters run with the test clock frozen at the same instant, so no window ends between
# the dump and the checks.
#
# The same script runs the two sides inside each system (--dump FILE, --restore FILE).
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/versions.sh

clock='2026-03-01 10:00:00+00'

# ---- the two sides, each run on its own system -----------------------------------------------

start_side_cluster() {
    source scripts/cluster.sh
    cluster_start "shared_preload_libraries = 'ratelimit'" "fsync = off" >/dev/null
    # PGOPTIONS separates options at spaces; a backslash keeps one in the value.
    export PGOPTIONS="-c ratelimit.test_clock=${clock// /\\ }"
}

sql() {
    psql -X -A -t -q -F ' ' -v ON_ERROR_STOP=1 -d moved -c "$1"
}

# The rows of every table the dump carries and of those it does not, one line each: the name,
# the count and an md5 of a stable text of the rows.
table_rows() {
    local table
    for table in ratelimit.policies ratelimit.tiers ratelimit.key_overrides ratelimit.access_list \
        ratelimit.request_routes ratelimit.key_state ratelimit.key_state_unlogged \
        public.rpc_rate_limits public.rate_limits sliding_window.rate_limit_buckets public.app_events; do
        sql "SELECT '$table ' || count(*) || ' ' || coalesce(md5(string_agg(t::text, '|' ORDER BY t::text)), '-')
             FROM $table t"
    done
}

# The ratelimit extensions on one line: each one's name, version and schema.
extensions() {
    sql "SELECT string_agg(e.extname || ' ' || e.extversion || ' ' || n.nspname, ', ' ORDER BY e.extname)
         FROM pg_extension e JOIN pg_namespace n ON n.oid = e.extnamespace
         WHERE e.extname LIKE 'ratelimit%'"
}

# The 15 side: the database, its rows, and the dump in FILE (the rows in FILE.rows).
dump_side() {
    local file="$1"
    start_side_cluster
    createdb moved
    sql "CREATE EXTENSION ratelimit" >/dev/null
    # Every app's drop-ins: the sliding window's check_rate_limit shares the per-RPC one's name,
    # so it has a schema of its own.
    sql "CREATE EXTENSION ratelimit_rpc_limits" >/dev/null
    sql "CREATE EXTENSION ratelimit_endpoint_limits" >/dev/null
    sql "CREATE SCHEMA sliding_window" >/dev/null
    sql "CREATE EXTENSION ratelimit_sliding_window_limits SCHEMA sliding_window" >/dev/null
    sql "SELECT ratelimit.load_preset(preset) FROM ratelimit.presets()" >/dev/null
    sql "UPDATE ratelimit.policies SET \"limit\" = 7 WHERE name = 'rpc.send-friend-request'"
    sql "INSERT INTO ratelimit.access_list (action, ip, reason) VALUES ('deny', '203.0.113.0/24', 'abuse')"
    sql "INSERT INTO ratelimit.access_list (action, key, reason) VALUES ('allow', 'partner', 'trusted')"
    sql "INSERT INTO ratelimit.key_overrides (policy, key, \"limit\", reason) VALUES ('rpc.auth', 'vip', 50, 'support')"
    sql "INSERT INTO ratelimit.request_routes (methods, path_pattern, policy, key)
         VALUES ('{POST}', '/rpc/login', 'rpc.auth', 'ip')" >/dev/null
    sql "INSERT INTO ratelimit.policies (name, \"limit\", period, algorithm, engine) VALUES
         ('moved.table', 5, '1 hour', 'sliding_window', 'table'),
         ('moved.unlogged', 5, '1 hour', 'token_bucket', 'unlogged'),
         ('moved.memory', 5, '1 hour', 'gcra', 'memory')"
    # Counters on every engine, through policies and native calls.
    sql "SELECT ratelimit.check(p, 'user-1') FROM unnest(ARRAY['moved.table', 'moved.unlogged', 'moved.memory']) p,
                generate_series(1, 3)" >/dev/null
    sql "SELECT ratelimit.check('moved.memory', 'spent') FROM generate_series(1, 5)" >/dev/null
    # A denied call charges nothing: what 15 answers for the spent key, kept for the other side.
    sql "SELECT allowed FROM ratelimit.check('moved.memory', 'spent')" >"$file.spent"
    sql "SELECT ratelimit.check('rpc.auth', 'user-1') FROM generate_series(1, 2)" >/dev/null
    sql "SELECT ratelimit.consume('native:' || e, 10, '1 hour', p_engine => e)
         FROM unnest(ARRAY['table', 'unlogged', 'memory']) e, generate_series(1, 4)" >/dev/null
    # The drop-ins' tables, through the apps' own calls.
    sql "SET request.jwt.claims = '{\"sub\": \"a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11\"}';
         SELECT check_rate_limit(p_rpc_name => 'complete-game', p_max_calls => 20, p_window_minutes => 1)" >/dev/null
    sql "SELECT increment_rate_limit('a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11', 'ai-inference', 10, 3600, 3)" >/dev/null
    sql "SELECT * FROM sliding_window.check_rate_limit(p_key => 'login:203.0.113.7', p_limit => 5, p_window_seconds => 60)" >/dev/null
    # An application table keeping decisions in a column of the extension's type.
    sql "CREATE TABLE public.app_events (id integer PRIMARY KEY, decision ratelimit.policy_decision)"
    sql "INSERT INTO public.app_events SELECT n, ratelimit.check('rpc.auth', 'app-' || n) FROM generate_series(1, 3) n"

    table_rows >"$file.rows"
    sql "SELECT extversion FROM pg_extension WHERE extname = 'ratelimit'" >"$file.version"
    extensions >"$file.extensions"
    "$CLUSTER_BINDIR/pg_dump" -Fc -f "$file" moved 2>"$file.err"
    chmod 644 "$file" "$file".*
    echo "# dumped by $("$CLUSTER_BINDIR/pg_dump" --version)"
}

# The newer side: restores FILE into a fresh database and checks it; TAP.
restore_side() {
    local file="$1"
    source scripts/tap.sh
    start_side_cluster
    echo "# restored with $("$CLUSTER_BINDIR/pg_restore" --version)"
    is "$(cat "$file.err")" "" "pg_dump -Fc on 15: nothing on stderr"
    createdb moved
    ok "$("$CLUSTER_BINDIR/pg_restore" -d moved "$file" 2>"$CLUSTER_DIR/restore.err"; echo $?)" \
        "pg_restore -d into a fresh database succeeds"
    is "$(cat "$CLUSTER_DIR/restore.err")" "" "with no error or warning"
    is "$(sql "SELECT extversion FROM pg_extension WHERE extname = 'ratelimit'")" "$(cat "$file.version")" \
        "the same version of the extension"
    is "$(extensions)" "$(cat "$file.extensions")" \
        "the drop-in extensions come back, each at its version and in its schema"

    local restored table count digest
    restored="$(table_rows)"
    while read -r table count digest; do
        case "$table" in
        ratelimit.key_state_unlogged | public.rpc_rate_limits | public.rate_limits | sliding_window.rate_limit_buckets)
            # Not dumped (docs/operations.md, "Backups"): the source had rows, the restore none.
            ok "$([ "$count" -gt 0 ] && grep -qx "$table 0 -" <<<"$restored"; echo $?)" \
                "$table: not carried by the dump ($count rows on 15, none restored)"
            ;;
        *)
            is "$(grep "^$table " <<<"$restored")" "$table $count $digest" "$table: the same $count rows"
            ;;
        esac
    done <"$file.rows"

    # The calls work and decide from what was restored.
    is "$(sql "SELECT remaining FROM ratelimit.check('moved.table', 'user-1')")" 1 \
        "a sliding_window policy on the table engine goes on from its 3 of 5"
    is "$(sql "SELECT remaining FROM ratelimit.check('rpc.auth', 'user-1')")" 2 "a preset's policy too"
    is "$(sql "SELECT remaining FROM ratelimit.consume('native:table', 10, '1 hour')")" 5 \
        "a native key on the table engine goes on from its 4 of 10"
    is "$(sql "SELECT remaining FROM ratelimit.check('moved.unlogged', 'user-1')")" 4 \
        "the unlogged engine starts afresh (not dumped)"
    is "$(cat "$file.spent")" f "on 15, the memory key was spent"
    is "$(sql "SELECT allowed || ' ' || remaining FROM ratelimit.check('moved.memory', 'spent')")" "true 4" \
        "the memory engine starts afresh: the key spent on 15 is allowed (docs/operations.md)"
    is "$(sql "SELECT remaining FROM ratelimit.consume('native:memory', 10, '1 hour', p_engine => 'memory')")" 9 \
        "so is a native memory key"
    is "$(sql "SELECT remaining FROM ratelimit.check('rpc.auth', 'vip')")" 49 "the key override applies"
    is "$(sql "SELECT reason FROM ratelimit.check('rpc.auth', 'user-2', p_ip => '203.0.113.9')")" deny_list \
        "the deny-list entry applies"
    is "$(sql "SELECT reason FROM ratelimit.check('rpc.auth', 'partner')")" allow_list \
        "the allow-list entry applies"
    is "$(sql "SELECT \"limit\" FROM ratelimit.policies WHERE name = 'rpc.send-friend-request'")" 7 \
        "the edited policy keeps its edit"
    is "$(sql "SELECT (decision).policy || ' ' || (decision).remaining FROM public.app_events WHERE id = 1")" \
        "rpc.auth 4" "the application's column of the extension's type reads back"
    is "$(sql "SET request.jwt.claims = '{\"sub\": \"a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11\"}';
               SELECT check_rate_limit(p_rpc_name => 'complete-game', p_max_calls => 20, p_window_minutes => 1)")" t \
        "the game backend's check_rate_limit works"
    is "$(sql "SELECT increment_rate_limit('a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11', 'ai-inference', 10, 3600, 3)->>'current'")" 3 \
        "increment_rate_limit works"
    is "$(sql "SELECT allowed || ' ' || current_count FROM sliding_window.check_rate_limit(p_key => 'login:203.0.113.7', p_limit => 5, p_window_seconds => 60)")" \
        "true 1" "the sliding-window check_rate_limit works"
    ok "$(sql "INSERT INTO ratelimit.access_list (action, key) VALUES ('deny', 'new-after-restore')" >/dev/null 2>&1; echo $?)" \
        "a new access-list entry can be added"
    is "$(sql "SELECT count(DISTINCT id) FROM ratelimit.access_list")" 3 "with an id of its own"

    echo "1..$checks"
    return $((failures > 0))
}

# ---- the orchestration, from the host ---------------------------------------------------------

orchestrate() {
    local in_roots=false
    if [ "${1:-}" = --in-roots ]; then
        in_roots=true
        shift
    fi
    local target="${1:?usage: bash test/cross_major.sh [--in-roots] MAJOR}"
    codename_of_major "$target" >/dev/null
    [ "$target" != 15 ] || { echo "cross_major: the target must be a later major than 15" >&2; exit 2; }

    local name=moved-15.dump
    work="$(mktemp -d /tmp/ratelimit-cross.XXXXXX)"
    # The files go through each root's /tmp under this run's own name.
    inside="/tmp/$(basename "$work")"
    source_dir="" target_dir=""
    trap 'rm -rf "$work" "$source_dir" "$target_dir"' EXIT
    chmod 755 "$work"
    # The 15 side: here on Debian 12, or in the Debian 12 root.
    if [ "$(native_major)" = 15 ] && [ "$in_roots" = false ]; then
        bash test/cross_major.sh --dump "$work/$name"
    else
        source_dir="$(scripts/debian-root.sh make 15)$inside"
        mkdir -p "$source_dir"
        chmod 777 "$source_dir"
        scripts/debian-root.sh run 15 bash test/cross_major.sh --dump "$inside/$name"
        mv "$source_dir/$name"* "$work/"
    fi
    # The newer side, in its root.
    target_dir="$(scripts/debian-root.sh make "$target")$inside"
    mkdir -p "$target_dir"
    cp "$work/$name"* "$target_dir/"
    chmod -R a+rX "$target_dir"
    scripts/debian-root.sh run "$target" bash test/cross_major.sh --restore "$inside/$name"
}

case "${1:-}" in
--dump) dump_side "$2" ;;
--restore) restore_side "$2" ;;
*) orchestrate "$@" ;;
esac
