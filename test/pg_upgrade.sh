#!/usr/bin/env bash
# A cluster moved from PostgreSQL 15 to a later major in place, with `pg_upgrade`, while the
# extension is in use on every engine; shows what each engine keeps. TAP output; exits non-zero
# if any check fails.
#
#   bash test/pg_upgrade.sh [--in-roots] MAJOR
#
# Run from the host, as root, with the extension built and installed for 15 (here, or with
# --in-roots in the Debian 12 root) and for MAJOR (in its root): test/run.sh does both.
# pg_upgrade runs the old major's binaries and the new one's side by side, so both must be in one
# system: MAJOR's root gets Debian 12's postgresql-15 beside its own major (`scripts/debian-root.sh
# add-15`, once, about 10 s), and the extension's 15 build is copied into it from where it is
# installed, as `make install` put it (ratelimit.so, the control files and the SQL scripts).
#  - on 15: the library preloaded, ratelimit.memory_wal on; policies on the table, unlogged and
#    memory engines, native keys, a native block on each engine and a policy key blocked on
#    each; the cluster stopped cleanly, which saves the memory engine's store in its pg_stat/;
#  - MAJOR's pg_upgrade, `--check` first, then the upgrade, in copy mode and with --link (each
#    from its own copy of the stopped 15 cluster), into a fresh MAJOR cluster;
#  - on MAJOR: the extension at its version, no update due; the policies, and the counters and
#    blocks of the table engine as they were; the unlogged engine's too (pg_upgrade copies an
#    unlogged table's files, written at the old server's clean shutdown, and the new server
#    starts without the crash recovery that would empty them); the memory engine empty (its
#    file stays in the old pg_stat/, and the new cluster hashes keys with a nonce of its own);
#    the calls work on every engine. The end of the output says what each engine kept.
# Every cluster runs with the test clock frozen at the same instant, so no window or block ends
# between the two sides.
#
# The same script runs the inside of MAJOR's root (--inside DIR, DIR holding the 15 build).
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/versions.sh

clock='2026-03-01 10:00:00+00'
# Where Debian's postgresql-15 and `make install` against its pg_config put the extension.
lib15=usr/lib/postgresql/15/lib
extension15=usr/share/postgresql/15/extension

# ---- inside MAJOR's root ---------------------------------------------------------------------

# The servers listen on a socket in the run's own directory only, so no port is shared with
# anything else on this machine, and one server runs at a time.
port=5432

# start_server BINDIR DATA, stop_server BINDIR DATA: as the postgres OS user.
start_server() {
    cluster_as_postgres "$1/pg_ctl" -D "$2" -l "$2.log" -w -t 60 start >/dev/null
}
stop_server() {
    cluster_as_postgres "$1/pg_ctl" -D "$2" -m fast -w stop >/dev/null
}

# init_cluster BINDIR DATA: a cluster set up the same on both sides. pg_upgrade wants both
# alike in encoding, locale and data checksums; 18's initdb turns checksums on by default, so
# every side has them. The test clock is the server's, not only the sessions': the postmaster
# and the memory engine's worker drop expired keys when they save the store, and keys stamped
# on the frozen clock would look expired on the real one.
init_cluster() {
    cluster_as_postgres "$1/initdb" -D "$2" -U postgres --auth=trust --no-sync -E UTF8 \
        --locale=C --data-checksums >"$2.initdb.log" 2>&1 || {
        cat "$2.initdb.log" >&2
        return 1
    }
    {
        echo "port = $port"
        echo "listen_addresses = ''"
        echo "unix_socket_directories = '$dir/socket'"
        echo "shared_preload_libraries = 'ratelimit'"
        echo "ratelimit.memory_wal = on"
        echo "ratelimit.test_clock = '$clock'"
        echo "fsync = off"
        echo "log_min_messages = warning"
    } >>"$2/postgresql.conf"
}

# sql BINDIR STATEMENT: one statement in the database `upgraded`.
sql() {
    "$1/psql" -X -A -t -q -F ' ' -v ON_ERROR_STOP=1 -h "$dir/socket" -p "$port" -U postgres \
        -d upgraded -c "$2"
}

# A table's rows on one line: its count and an md5 of a stable text of the rows.
table_rows() {
    sql "$1" "SELECT count(*) || ' ' || coalesce(md5(string_agg(t::text, '|' ORDER BY t::text)), '-')
              FROM $2 t"
}

# What engine E holds, read without charging anything: the native key's remaining allowance
# (4 of 10 spent on 15), then what a peek at the blocked native key answers (allowed,
# retry_after_ms). "6 false 86400000" on 15; "10 true 0" is a key never seen.
engine_state() {
    sql "$1" "SELECT n.remaining || ' ' || b.allowed || ' ' || b.retry_after_ms
              FROM ratelimit.peek('native:$2', 10, '1 hour', 0, 'fixed_window', '$2') n,
                   ratelimit.peek('blocked:$2', 10, '1 hour', 0, 'fixed_window', '$2') b"
}
fresh_state='10 true 0'

# At the end, failed or not: whatever server still runs is stopped, each with its own major's
# pg_ctl, and the clusters go.
clean_up() {
    local data bin
    for data in "$dir"/*/; do
        [ -f "$data/postmaster.pid" ] || continue
        bin="$new_bin"
        [ "$(cat "$data/PG_VERSION")" != 15 ] || bin="$old_bin"
        cluster_as_postgres "$bin/pg_ctl" -D "$data" -m immediate -w stop >/dev/null 2>&1 || true
    done
    rm -rf "$dir"
}

# Words separated by ", ".
word_list() {
    local IFS=,
    local words="$*"
    echo "${words//,/, }"
}

# A pg_controldata field of DATA.
control_field() {
    "$1/pg_controldata" "$2" | sed -n "s/^$3:[[:space:]]*//p"
}

# True when pg_upgrade from 15 to this major fails, with the column option pg_attver refused, on
# a cluster that holds one plain table and no extension: then the failure is the packages', not
# the extension's. Run once, on clusters of its own.
upgrade_fails_without_extension() {
    local plain="$dir/plain-old" plain_new="$dir/plain-new" status=0
    if [ -z "${plain_verdict:-}" ]; then
        init_cluster "$old_bin" "$plain"
        start_server "$old_bin" "$plain"
        cluster_as_postgres "$old_bin/psql" -X -q -h "$dir/socket" -p "$port" -U postgres -d postgres \
            -c "CREATE TABLE plain (a integer)" >/dev/null
        stop_server "$old_bin" "$plain"
        init_cluster "$new_bin" "$plain_new"
        cluster_as_postgres "$new_bin/pg_upgrade" -b "$old_bin" -B "$new_bin" -d "$plain" \
            -D "$plain_new" -s "$dir/socket" -U postgres >"$dir/plain-upgrade.log" 2>&1 || status=$?
        plain_verdict=no
        if [ "$status" -ne 0 ] &&
            grep -qs 'unrecognized parameter "pg_attver"' "$plain_new"/pg_upgrade_output.d/*/log/*.log; then
            plain_verdict=yes
        fi
    fi
    [ "$plain_verdict" = yes ]
}

inside() {
    local staged="$1" major engine mode
    # Global: the EXIT trap uses them.
    old_bin=/usr/lib/postgresql/15/bin
    source scripts/cluster.sh
    source scripts/tap.sh
    major="$(native_major)"
    new_bin="$(pg_config --bindir)"
    if [ ! -f "$(pg_config --pkglibdir)/ratelimit.so" ]; then
        echo "Bail out! the extension is not installed for $major in this root (test/run.sh --pg $major installs it)"
        exit 1
    fi
    # pg_upgrade keeps 15's catalog, whose C functions must each find their symbol in the new
    # major's library: the two builds must come from one tree, as their SQL scripts tell.
    local file differing=()
    for file in "$staged/extension/"*; do
        cmp -s "$file" "$(pg_config --sharedir)/extension/${file##*/}" || differing+=("${file##*/}")
    done
    if [ "${#differing[@]}" -gt 0 ]; then
        echo "Bail out! the 15 build and the $major build are of different trees (${differing[*]} differ): build and install both from one (test/run.sh does)"
        exit 1
    fi
    # The 15 build, in the place `make install` gives it; scripts of an earlier copy go first.
    rm -f "/$lib15/ratelimit.so" "/$extension15/"ratelimit*
    install -m 755 "$staged/ratelimit.so" "/$lib15/"
    install -m 644 "$staged/extension/"* "/$extension15/"

    dir="$(mktemp -d /tmp/ratelimit-upgrade.XXXXXX)"
    chmod 755 "$dir"
    mkdir -p "$dir/socket"
    chown -R postgres:postgres "$dir"
    trap clean_up EXIT
    # pg_upgrade writes its scripts into the current directory.
    cd "$dir"

    echo "# from $("$old_bin/postgres" --version) to $("$new_bin/postgres" --version), in the $(. /etc/os-release && echo "$VERSION_CODENAME") root"

    # ---- 15: every engine in use ----
    local old="$dir/old"
    init_cluster "$old_bin" "$old"
    start_server "$old_bin" "$old"
    cluster_as_postgres "$old_bin/createdb" -h "$dir/socket" -p "$port" -U postgres upgraded
    sql "$old_bin" "CREATE EXTENSION ratelimit"
    sql "$old_bin" "INSERT INTO ratelimit.policies (name, \"limit\", period, algorithm, engine) VALUES
                    ('up.table', 5, '1 hour', 'sliding_window', 'table'),
                    ('up.unlogged', 5, '1 hour', 'token_bucket', 'unlogged'),
                    ('up.memory', 5, '1 hour', 'gcra', 'memory')"
    # 3 of each policy's 5 spent by user-1; 4 of each native key's 10; a native key and a
    # policy's key blocked for a day, on each engine.
    sql "$old_bin" "SELECT ratelimit.check('up.' || e, 'user-1')
                    FROM unnest(ARRAY['table', 'unlogged', 'memory']) e, generate_series(1, 3)" >/dev/null
    sql "$old_bin" "SELECT ratelimit.consume('native:' || e, 10, '1 hour', 1, 'fixed_window', e)
                    FROM unnest(ARRAY['table', 'unlogged', 'memory']) e, generate_series(1, 4)" >/dev/null
    sql "$old_bin" "SELECT ratelimit.block('blocked:' || e, '1 day', e),
                           ratelimit.block_policy_key('up.' || e, 'user-blocked', '1 day')
                    FROM unnest(ARRAY['table', 'unlogged', 'memory']) e" >/dev/null

    is "$(sql "$old_bin" "SHOW ratelimit.memory_wal")" on "15: the library preloaded, memory_wal on"
    local version policies key_state key_state_unlogged old_entries
    declare -A before
    for engine in table unlogged memory; do
        before[$engine]="$(engine_state "$old_bin" "$engine")"
        is "${before[$engine]}" "6 false 86400000" "15: the $engine engine holds 4 of 10 spent and a day's block"
    done
    version="$(sql "$old_bin" "SELECT extversion FROM pg_extension WHERE extname = 'ratelimit'")"
    policies="$(table_rows "$old_bin" ratelimit.policies)"
    key_state="$(table_rows "$old_bin" ratelimit.key_state)"
    key_state_unlogged="$(table_rows "$old_bin" ratelimit.key_state_unlogged)"
    old_entries="$(sql "$old_bin" "SELECT entries FROM ratelimit.memory_stats")"
    # The native key, the blocked key, the policy's user-1 and its blocked key.
    is "$old_entries" 4 "15: the memory engine holds its 4 keys"
    is "${key_state%% *} ${key_state_unlogged%% *}" "4 4" "15: each state table holds its 4 rows"
    # What the upgrade does to the memory engine is told from what a restart does: 15 restarted
    # keeps every engine's keys (the memory engine's from its file in pg_stat/).
    ok "$(stop_server "$old_bin" "$old" && start_server "$old_bin" "$old"; echo $?)" "15: the cluster restarts"
    is "$(engine_state "$old_bin" table) | $(engine_state "$old_bin" unlogged) | $(engine_state "$old_bin" memory) | $(sql "$old_bin" "SELECT entries FROM ratelimit.memory_stats")" \
        "${before[table]} | ${before[unlogged]} | ${before[memory]} | 4" "15: a restart keeps every engine's keys"
    ok "$(stop_server "$old_bin" "$old"; echo $?)" "15: the cluster stops cleanly"
    ok "$([ -s "$old/pg_stat/ratelimit_memory.checkpoint" ]; echo $?)" \
        "15: the memory engine's store is saved in the old data directory's pg_stat/"
    # The link run gets a copy of its own: after --link the old cluster is the new one's.
    cluster_as_postgres cp -a "$old" "$dir/old-link"

    # ---- MAJOR: pg_upgrade in each mode, then what came across ----
    declare -A after
    local source_data new options status got log upgraded=()
    for mode in copy link; do
        source_data="$old" options=()
        if [ "$mode" = link ]; then
            source_data="$dir/old-link" options=(--link)
        fi
        new="$dir/new-$mode"
        init_cluster "$new_bin" "$new"
        status=0
        cluster_as_postgres "$new_bin/pg_upgrade" --check -b "$old_bin" -B "$new_bin" \
            -d "$source_data" -D "$new" -s "$dir/socket" -U postgres "${options[@]}" \
            >"$dir/check-$mode.log" 2>&1 || status=$?
        ok "$status" "$major ($mode): pg_upgrade --check passes"
        [ "$status" -eq 0 ] || sed 's/^/#   /' "$dir/check-$mode.log"
        status=0
        cluster_as_postgres "$new_bin/pg_upgrade" -b "$old_bin" -B "$new_bin" \
            -d "$source_data" -D "$new" -s "$dir/socket" -U postgres "${options[@]}" \
            >"$dir/upgrade-$mode.log" 2>&1 || status=$?
        if [ "$status" -ne 0 ] &&
            grep -qs 'unrecognized parameter "pg_attver"' "$new"/pg_upgrade_output.d/*/log/*.log &&
            upgrade_fails_without_extension; then
            # The old major's packages write the column option pg_attver on every column they
            # create, and the new major's do not know it: pg_upgrade fails on any table, with or
            # without the extension (shown by upgrading a cluster with one plain table and nothing
            # else), so nothing of the extension can be checked here.
            skip "$major ($mode): pg_upgrade succeeds" \
                "$("$old_bin/postgres" --version) writes the column option pg_attver, which $("$new_bin/postgres" --version) refuses: pg_upgrade fails on any table, without the extension too"
            continue
        fi
        ok "$status" "$major ($mode): pg_upgrade succeeds"
        if [ "$status" -ne 0 ]; then
            # The end of pg_upgrade's report, and the first error of the log it names.
            tail -n 6 "$dir/upgrade-$mode.log" | sed 's/^/#   /'
            for log in $(grep -o '"[^"]*\.log"' "$dir/upgrade-$mode.log" | tr -d '"'); do
                grep -m 1 'error:' "$log" | sed 's/^/#   /'
            done
            continue
        fi
        # pg_upgrade builds the new data directory from initdb: the old pg_stat/ stays behind
        # (the new one may hold a file of its own, the empty store of the server pg_upgrade ran).
        echo "# $major ($mode): the new pg_stat/ holds: $(cd "$new/pg_stat" && echo *)"
        ok "$(! cmp -s "$source_data/pg_stat/ratelimit_memory.checkpoint" "$new/pg_stat/ratelimit_memory.checkpoint"; echo $?)" \
            "$major ($mode): the memory engine's file did not come across"
        ok "$([ "$(control_field "$new_bin" "$new" 'Database system identifier')" != "$(control_field "$old_bin" "$old" 'Database system identifier')" ] &&
            [ "$(control_field "$new_bin" "$new" 'Mock authentication nonce')" != "$(control_field "$old_bin" "$old" 'Mock authentication nonce')" ]; echo $?)" \
            "$major ($mode): the new cluster has its own system identifier and nonce (the memory WAL's hash key)"
        status=0
        start_server "$new_bin" "$new" || status=$?
        ok "$status" "$major ($mode): the upgraded cluster starts"
        [ "$status" -eq 0 ] || continue

        is "$(sql "$new_bin" "SELECT extversion FROM pg_extension WHERE extname = 'ratelimit'")" "$version" \
            "$major ($mode): the extension at $version, as on 15"
        is "$(sed -n "s/^default_version = '\(.*\)'/\1/p" "$(pg_config --sharedir)/extension/ratelimit.control")" "$version" \
            "$major ($mode): $major's build installs $version too: no ALTER EXTENSION UPDATE is due"
        is "$(table_rows "$new_bin" ratelimit.policies)" "$policies" "$major ($mode): the policies, the same rows"
        is "$(table_rows "$new_bin" ratelimit.key_state)" "$key_state" "$major ($mode): ratelimit.key_state, the same rows"
        # pg_upgrade carries an unlogged table's files like any other's; the old server's clean
        # shutdown had written them, and the new one starts without crash recovery, which alone
        # would empty them.
        is "$(table_rows "$new_bin" ratelimit.key_state_unlogged)" "$key_state_unlogged" \
            "$major ($mode): ratelimit.key_state_unlogged, the same rows"
        is "$(sql "$new_bin" "SELECT entries FROM ratelimit.memory_stats")" 0 \
            "$major ($mode): the memory engine starts empty"

        for engine in table unlogged memory; do
            after[$mode.$engine]="$(engine_state "$new_bin" "$engine")"
        done
        is "${after[$mode.table]}" "${before[table]}" "$major ($mode): table engine: the native key's count and block kept"
        is "${after[$mode.unlogged]}" "${before[unlogged]}" "$major ($mode): unlogged engine: the same, kept"
        is "${after[$mode.memory]}" "$fresh_state" "$major ($mode): memory engine: a fresh key, no block"
        # The policies' keys, by the calls users make: 3 of 5 spent goes on to 1 left, a fresh
        # key to 4; the blocked key is denied for the day, or allowed when its block was lost.
        got="$(sql "$new_bin" "SELECT string_agg(c.remaining || ' ' || b.allowed || ' ' || b.retry_after_ms, ', ' ORDER BY e.n)
                               FROM unnest(ARRAY['table', 'unlogged', 'memory']) WITH ORDINALITY e(name, n),
                                    ratelimit.check('up.' || e.name, 'user-1') c,
                                    ratelimit.check('up.' || e.name, 'user-blocked') b")"
        after[$mode.policies]="$got"
        is "$got" "1 false 86400000, 1 false 86400000, 4 true 0" \
            "$major ($mode): policies on table and unlogged go on from their counts and blocks; on memory, afresh"

        # The calls work: each engine decides and blocks, a new policy applies at once.
        is "$(sql "$new_bin" "SELECT string_agg((ratelimit.consume('after:' || e, 10, '1 hour', 1, 'fixed_window', e)).remaining::text, ' ')
                              FROM unnest(ARRAY['table', 'unlogged', 'memory']) e")" "9 9 9" \
            "$major ($mode): consume on each engine"
        is "$(sql "$new_bin" "SELECT count(*) FROM unnest(ARRAY['table', 'unlogged', 'memory']) e
                              WHERE ratelimit.block('after-blocked:' || e, '1 minute', e) IS NOT NULL
                                AND NOT (ratelimit.peek('after-blocked:' || e, 10, '1 hour', 0, 'fixed_window', e)).allowed")" 3 \
            "$major ($mode): block on each engine"
        sql "$new_bin" "INSERT INTO ratelimit.policies (name, \"limit\", period, engine) VALUES ('up.new', 2, '1 minute', 'memory')"
        is "$(sql "$new_bin" "SELECT string_agg((ratelimit.check('up.new', 'user-1')).allowed::text, ' ') FROM generate_series(1, 3)")" \
            "true true false" "$major ($mode): a policy added after the upgrade decides"
        is "$(sql "$new_bin" "SELECT wal_worker_running FROM ratelimit.memory_stats")" t \
            "$major ($mode): the memory engine's WAL worker runs"
        ok "$(stop_server "$new_bin" "$new"; echo $?)" "$major ($mode): the upgraded cluster stops cleanly"
        upgraded+=("$mode")
    done

    # ---- what each engine kept, from what was read above ----
    local modes=("${upgraded[@]}") alike="" i kept lost native policy
    if [ "${#upgraded[@]}" -eq 0 ]; then
        echo "# pg_upgrade from 15 to $major did not succeed: nothing came across"
    elif [ "${#upgraded[@]}" -eq 2 ] &&
        [ "${after[copy.table]}|${after[copy.unlogged]}|${after[copy.memory]}|${after[copy.policies]}" = \
            "${after[link.table]}|${after[link.unlogged]}|${after[link.memory]}|${after[link.policies]}" ]; then
        modes=(copy) alike=yes
    fi
    for mode in "${modes[@]}"; do
        if [ -n "$alike" ]; then
            echo "# What pg_upgrade from 15 to $major kept, on each engine (copy mode and --link alike):"
        else
            echo "# What pg_upgrade from 15 to $major kept, on each engine ($mode mode):"
        fi
        i=0
        for engine in table unlogged memory; do
            i=$((i + 1))
            # The native key: its remaining allowance, then its blocked key's allowed; the policy:
            # user-1's remaining after one more call (1 when its 3 of 5 came across), then its
            # blocked key's allowed.
            read -r -a native <<<"${after[$mode.$engine]}"
            read -r -a policy <<<"$(cut -d, -f"$i" <<<"${after[$mode.policies]}")"
            kept=() lost=()
            if [ "${native[0]}" = "${before[$engine]%% *}" ]; then kept+=("native count"); else lost+=("native count"); fi
            if [ "${native[1]}" = false ]; then kept+=("native block"); else lost+=("native block"); fi
            if [ "${policy[0]}" = 1 ]; then kept+=("policy count"); else lost+=("policy count"); fi
            if [ "${policy[1]}" = false ]; then kept+=("policy block"); else lost+=("policy block"); fi
            printf '#   %-9s kept: %s; lost: %s\n' "$engine:" "$(word_list "${kept[@]:-nothing}")" \
                "$(word_list "${lost[@]:-nothing}")"
        done
    done

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
    local target="${1:?usage: bash test/pg_upgrade.sh [--in-roots] MAJOR}" from="" root
    codename_of_major "$target" >/dev/null
    [ "$target" != 15 ] || { echo "pg_upgrade: the target must be a later major than 15" >&2; exit 2; }
    # The 15 build: here on Debian 12, or in the Debian 12 root.
    if [ "$(native_major)" != 15 ] || [ "$in_roots" = true ]; then
        from="$(scripts/debian-root.sh path 15)"
    fi
    [ -f "$from/$lib15/ratelimit.so" ] || {
        echo "pg_upgrade: no 15 build in $from/$lib15 (test/run.sh --pg 15 installs it)" >&2
        exit 1
    }
    root="$(scripts/debian-root.sh make "$target")"
    scripts/debian-root.sh add-15 "$target"
    # The files go through the root's /tmp under this run's own name.
    staged="$(mktemp -d "$root/tmp/ratelimit-upgrade-15.XXXXXX")"
    trap 'rm -rf "$staged"' EXIT
    mkdir -p "$staged/extension"
    cp "$from/$lib15/ratelimit.so" "$staged/"
    cp "$from/$extension15/"ratelimit* "$staged/extension/"
    chmod -R a+rX "$staged"
    scripts/debian-root.sh run "$target" bash test/pg_upgrade.sh --inside "/tmp/$(basename "$staged")"
}

case "${1:-}" in
--inside) inside "$2" ;;
*) orchestrate "$@" ;;
esac
