#!/usr/bin/env bash
# Faults under load, on a cluster of its own (it crashes and stops its server). TAP output, a
# "# summary:" line of figures per scenario (repeated at the end), exits non-zero if any check
# fails. Every check asserts behaviour, never a timing: waits only bound how long to look.
#
# How "committed" is known: every client writes each allowed decision into the logged table
# `audit` in the same transaction as the call (INSERT INTO audit SELECT ... FROM
# ratelimit.consume(...) WHERE allowed), so a transaction cut short loses both. The view `tally`
# then compares, key by key, the count each engine stores (limit - remaining from peek, and the
# row's own amount; the drop-in functions' counters) with count(*) of the key's audit rows.
# The drop-ins also run on the unlogged and memory engines (ratelimit.dropin_engine, set per
# transaction): on unlogged their counts are rows of key_state_unlogged, compared the same way;
# on memory there is no SQL view of them, so one more audited call on each key reads it back.
#
#  1. Backends terminated mid-call: 16 pgbench clients on a few keys of every engine and of the
#     drop-in functions (check_rate_limit_for_user, increment_rate_limit, the sliding-window
#     check_rate_limit) on their tables, on unlogged, and (the latter two) on memory, one call per
#     transaction and, separately, explicit transactions of seven calls; pg_terminate_backend of
#     some backends again and again (those waiting on a key's lock, inside a call, first). Then
#     kill -9 of one backend's pid: the postmaster restarts every process (crash recovery),
#     without memory snapshots, with them, and after turning them off.
#  2. pg_ctl stop -m immediate under the same load, and start again.
#  3. lock_timeout and statement_timeout firing while a call waits for a key another session
#     holds: 55P03 / 57014, nothing charged, the session goes on after ROLLBACK; consume_all over
#     several keys (one locked, one on the memory engine) charges none of them; the drop-ins on
#     unlogged time out as on their tables, and on memory decide.
#  4. A full disk: the state tables in a tablespace on a 16 MB tmpfs filled up; every table-backed
#     call that needs a new page (the drop-ins on unlogged too) fails with 53100, the memory
#     engine keeps deciding, and once space is freed every call works and every count is what
#     committed.
#  5. Fail-closed at the SQL level, throughout: a failing call raises and returns no decision,
#     and no allowed decision that committed is missing from the store (tally).
# RELIABILITY_LONG=1 runs more rounds, more terminations, crashes and immediate stops.
# Run as root from the repository root, with the extension installed (test/run.sh does both).
set -euo pipefail
cd "$(dirname "$0")/../.."
source scripts/cluster.sh

LONG="${RELIABILITY_LONG:-0}"
if [ "$LONG" = 1 ]; then
    TERMINATION_ROUNDS=3 # per variant
    TICKS=7              # per round, 2 backends each, then the rest
    LOAD_SECONDS=300     # a cap: rounds end by terminating their backends
    CRASH_ROUNDS=3
    STOP_ROUNDS=3
else
    TERMINATION_ROUNDS=1
    TICKS=6
    LOAD_SECONDS=120
    CRASH_ROUNDS=1
    STOP_ROUNDS=1
fi
CLIENTS=16
PGBENCH="$CLUSTER_BINDIR/pgbench"
WORK="$(mktemp -d /tmp/ratelimit-faults.XXXXXX)"
chmod 755 "$WORK"
MOUNT_DIR=""
BACKGROUND_PIDS=()
KILLS=0 # backends this script killed with SIGKILL
trap 'rm -rf "$WORK"' EXIT

forget_pid() {
    local pid kept=()
    for pid in "${BACKGROUND_PIDS[@]}"; do
        [ "$pid" = "$1" ] || kept+=("$pid")
    done
    BACKGROUND_PIDS=("${kept[@]}")
}
cleanup() {
    local pid
    # Only this script's own children that are still running (a finished one's id may be reused).
    for pid in "${BACKGROUND_PIDS[@]}"; do
        if [ "$(ps -o ppid= -p "$pid" 2>/dev/null | tr -d ' ')" = "$$" ]; then
            kill "$pid" 2>/dev/null || true
        fi
    done
    cluster_stop
    if [ -n "$MOUNT_DIR" ]; then
        umount "$MOUNT_DIR" 2>/dev/null || umount -l "$MOUNT_DIR" 2>/dev/null || true
        rmdir "$MOUNT_DIR" 2>/dev/null || true
    fi
    rm -rf "$WORK"
}

source scripts/tap.sh
# Figures for the fail-closed summary (scenario 5), gathered by every scenario.
CONNECTIONS_CUT=0  # load clients whose transaction ended with the connection (1, 2)
TIMEOUTS_RAISED=0  # calls that raised 55P03 or 57014 (3)
DISK_FULL_RAISED=0 # calls that raised 53100 (4)
OTHER_ERRORS=0     # calls that raised anything else (3, 4)
FAILED_RETURNED=0  # decisions returned by calls that failed (3)
MISMATCHES=0       # keys whose stored count differed from what committed, over every tally
MEMORY_KEPT=0      # memory decisions kept by transactions that did not commit (1)
SUMMARIES=()
summary() {
    echo "# summary: $*"
    SUMMARIES+=("$*")
}

sql() {
    psql -X -A -t -q -F ' ' -v ON_ERROR_STOP=1 -c "$1"
}
# Polls `command` every 0.2 s until it succeeds; false after `seconds`. A bound, not a check.
wait_until() {
    local seconds="$1"
    shift
    local deadline=$((SECONDS + seconds))
    until "$@"; do
        if [ "$SECONDS" -ge "$deadline" ]; then
            return 1
        fi
        sleep 0.2
    done
}
server_up() {
    psql -X -A -t -q -d postgres -c 'SELECT 1' >/dev/null 2>&1
}
log_offset() {
    stat -c %s "$CLUSTER_DIR/server.log"
}
log_since() {
    tail -c +"$(($1 + 1))" "$CLUSTER_DIR/server.log"
}
# log_has OFFSET PATTERN: whether the server log has a line matching PATTERN after OFFSET.
# (Through a file: grep -q ending a pipe early would fail the pipe under pipefail.)
log_has() {
    log_since "$1" >"$WORK/log-part"
    grep -q -- "$2" "$WORK/log-part"
}
postmaster_pid() {
    head -1 "$CLUSTER_DIR/data/postmaster.pid"
}
state_file() {
    echo "$CLUSTER_DIR/data/pg_stat/ratelimit_memory.state"
}

# ---- the scenario databases -------------------------------------------------------------------
# Every native call is a rolling_window over a day with cost 1, so a key's count is
# limit - remaining and no window boundary can reset it during the run. The drop-in functions
# use their longest windows; increment_rate_limit's aligned windows may still roll over, so its
# counters are summed over windows.
user_uuid() {
    printf '00000000-0000-0000-0000-%012d' "$1"
}
U1="$(user_uuid 1)"
U2="$(user_uuid 2)"

setup_database() {
    local db="$1"
    psql -X -q -v ON_ERROR_STOP=1 -d postgres -c "CREATE DATABASE $db" >/dev/null
    psql -X -q -v ON_ERROR_STOP=1 -d "$db" >/dev/null <<'SQL'
CREATE EXTENSION ratelimit;
-- The three apps' drop-ins: the per-RPC and endpoint limits in public, the sliding window's in a
-- schema of its own (its check_rate_limit shares the per-RPC one's name).
CREATE EXTENSION ratelimit_rpc_limits;
CREATE EXTENSION ratelimit_endpoint_limits;
CREATE SCHEMA sliding_window;
CREATE EXTENSION ratelimit_sliding_window_limits SCHEMA sliding_window;
-- One row per allowed decision, written in the caller's transaction.
CREATE TABLE audit (engine text NOT NULL, key text NOT NULL);
-- The keys a scenario uses, and their limits.
CREATE TABLE keys (engine text NOT NULL, key text NOT NULL, lim integer NOT NULL,
                   PRIMARY KEY (engine, key));
-- What the engine stores for a key: the units counted in its current window.
CREATE FUNCTION stored_count(p_engine text, p_key text, p_lim integer) RETURNS bigint
LANGUAGE plpgsql AS $$
BEGIN
    CASE p_engine
    WHEN 'table', 'unlogged', 'memory' THEN
        RETURN p_lim - (ratelimit.peek(p_key, p_lim, '1 day', 1, 'rolling_window',
                                       p_engine)).remaining;
    WHEN 'rpc_limits' THEN
        RETURN coalesce((SELECT sum(call_count) FROM public.rpc_rate_limits
                         WHERE user_id::text || '/' || rpc_name = p_key), 0);
    WHEN 'endpoint_limits' THEN
        RETURN coalesce((SELECT sum(counter) FROM public.rate_limits
                         WHERE user_id::text || '/' || endpoint = p_key), 0);
    WHEN 'sliding_window_limits' THEN
        RETURN coalesce((SELECT sum(count) FROM sliding_window.rate_limit_buckets WHERE key = p_key), 0);
    -- The drop-ins on unlogged: the row of their namespace, keyed <user id>:<name> (the window's
    -- count), or the sliding window's own key (its log's units).
    WHEN 'rpc_limits_unlogged' THEN
        RETURN coalesce((SELECT amount FROM ratelimit.key_state_unlogged
                         WHERE policy = 'drop-in/rpc_rate_limits' AND key = replace(p_key, '/', ':')), 0);
    WHEN 'endpoint_limits_unlogged' THEN
        RETURN coalesce((SELECT amount FROM ratelimit.key_state_unlogged
                         WHERE policy = 'drop-in/rate_limits' AND key = replace(p_key, '/', ':')), 0);
    WHEN 'sliding_window_limits_unlogged' THEN
        RETURN coalesce((SELECT sum(l.units) FROM ratelimit.key_state_unlogged AS s,
                                unnest(s.log) WITH ORDINALITY AS l(units, i)
                         WHERE s.policy = 'drop-in/rate_limit_buckets' AND s.key = p_key
                           AND l.i % 2 = 0), 0);
    END CASE;
END
$$;
-- The state row's own count, for the table engines (the others: as stored_count).
CREATE FUNCTION row_amount(p_engine text, p_key text, p_lim integer) RETURNS bigint
LANGUAGE plpgsql AS $$
BEGIN
    IF p_engine = 'table' THEN
        RETURN coalesce((SELECT amount FROM ratelimit.key_state WHERE key = p_key), 0);
    ELSIF p_engine = 'unlogged' THEN
        RETURN coalesce((SELECT amount FROM ratelimit.key_state_unlogged WHERE key = p_key), 0);
    END IF;
    RETURN stored_count(p_engine, p_key, p_lim);
END
$$;
-- The drop-ins' counts on memory, which has no SQL view of them: one more call on each key of
-- the load returns its count (that call included; audited, as the load's allowed calls are),
-- next to what committed.
CREATE FUNCTION read_memory_drop_ins()
RETURNS TABLE (m_kind text, m_key text, m_stored bigint, m_committed bigint)
LANGUAGE plpgsql AS $$
DECLARE
    u uuid;
    r jsonb;
    b record;
BEGIN
    PERFORM set_config('ratelimit.dropin_engine', 'memory', true);
    FOR n IN 1..2 LOOP
        u := ('00000000-0000-0000-0000-00000000000' || n)::uuid;
        r := increment_rate_limit(u, 'ep', 1000000, 31536000, 1);
        m_kind := 'endpoint_limits_memory';
        m_key := u::text || '/ep';
        m_stored := (r ->> 'current')::bigint;
        IF (r ->> 'allowed')::boolean THEN
            INSERT INTO audit VALUES (m_kind, m_key);
        END IF;
        m_committed := (SELECT count(*) FROM audit WHERE engine = m_kind AND key = m_key);
        RETURN NEXT;
        SELECT * INTO b FROM sliding_window.check_rate_limit(p_key => 'sk' || n, p_limit => 1000000,
                                              p_window_seconds => 31536000);
        m_kind := 'sliding_window_limits_memory';
        m_key := 'sk' || n;
        m_stored := b.current_count;
        IF b.allowed THEN
            INSERT INTO audit VALUES (m_kind, m_key);
        END IF;
        m_committed := (SELECT count(*) FROM audit WHERE engine = m_kind AND key = m_key);
        RETURN NEXT;
    END LOOP;
    PERFORM set_config('ratelimit.dropin_engine', 'table', true);
END
$$;
CREATE VIEW tally AS
    SELECT k.engine, k.key, k.lim,
           stored_count(k.engine, k.key, k.lim) AS stored,
           row_amount(k.engine, k.key, k.lim) AS row_amount,
           (SELECT count(*) FROM audit a WHERE a.engine = k.engine AND a.key = k.key) AS committed
    FROM keys k;
SQL
}

# The keys of the load (scenarios 1 and 2).
register_load_keys() {
    sql "INSERT INTO keys VALUES
        ('table', 'tk1', 1000000), ('table', 'tk2', 1000000), ('table', 'tk3', 1000000),
        ('table', 'tk4', 1000000), ('table', 'tkfull', 300),
        ('unlogged', 'uk1', 1000000), ('unlogged', 'uk2', 1000000),
        ('memory', 'mk1', 1000000), ('memory', 'mk2', 1000000),
        ('rpc_limits', '$U1/rpc', 1000000), ('rpc_limits', '$U2/rpc', 1000000),
        ('endpoint_limits', '$U1/ep', 1000000), ('endpoint_limits', '$U2/ep', 1000000),
        ('sliding_window_limits', 'sk1', 1000000), ('sliding_window_limits', 'sk2', 1000000),
        ('rpc_limits_unlogged', '$U1/rpc', 1000000), ('rpc_limits_unlogged', '$U2/rpc', 1000000),
        ('endpoint_limits_unlogged', '$U1/ep', 1000000), ('endpoint_limits_unlogged', '$U2/ep', 1000000),
        ('sliding_window_limits_unlogged', 'sk1', 1000000), ('sliding_window_limits_unlogged', 'sk2', 1000000)" >/dev/null
}
# What each non-durable engine holds, the drop-ins' counts on it included.
UNLOGGED_KINDS='{unlogged,rpc_limits_unlogged,endpoint_limits_unlogged,sliding_window_limits_unlogged}'
DROP_INS_UNLOGGED='{rpc_limits_unlogged,endpoint_limits_unlogged,sliding_window_limits_unlogged}'
MEMORY_KINDS='{memory,endpoint_limits_memory,sliding_window_limits_memory}'
# After a crash: the non-durable engines' audit starts afresh.
forget_non_durable() {
    sql "DELETE FROM audit WHERE engine = ANY ('$UNLOGGED_KINDS'::text[] || '$MEMORY_KINDS'::text[])" >/dev/null
    sql "DELETE FROM keys WHERE engine = 'memory'" >/dev/null
}

# Keys whose stored count differs from what committed, for `engines` (a SQL array literal).
mismatches() {
    sql "SELECT count(*) FROM tally WHERE engine = ANY ('$1'::text[])
         AND (stored <> committed OR row_amount <> committed)"
}
show_mismatches() {
    sql "SELECT engine, key, 'stored=' || stored, 'row=' || row_amount, 'committed=' || committed
         FROM tally WHERE engine = ANY ('$1'::text[])
         AND (stored <> committed OR row_amount <> committed)" | sed 's/^/#   /'
}
committed_sum() {
    sql "SELECT count(*) FROM audit WHERE engine = ANY ('$1'::text[])"
}
stored_sum() {
    sql "SELECT coalesce(sum(stored), 0) FROM tally WHERE engine = ANY ('$1'::text[])"
}
# The check at the heart of scenarios 1, 2 and 4: every transactional engine stores exactly
# what committed, key by key.
check_tally() {
    local engines="$1" what="$2" bad
    bad="$(mismatches "$engines")"
    MISMATCHES=$((MISMATCHES + bad))
    is "$bad" "0" "$what"
    if [ "$bad" != 0 ]; then
        show_mismatches "$engines"
    fi
}
# Native calls outside the load: limit 10 per rolling day, cost 1.
native="10, '1 day', 1, 'rolling_window'"
consume_sql() { # KEY [ENGINE]
    echo "ratelimit.consume('$1', $native, '${2:-table}')"
}
remaining() { # KEY [ENGINE]
    sql "SELECT remaining FROM ratelimit.peek('$1', $native, '${2:-table}')"
}
memory_allowed() {
    sql "SELECT allowed FROM ratelimit.memory_stats"
}

# ---- the load ---------------------------------------------------------------------------------
# pgbench scripts: each allowed decision is audited in the call's own transaction.
write_load_scripts() {
    local native="1000000, '1 day', 1, 'rolling_window'"
    cat >"$WORK/table.sql" <<SQL
\set k random(1, 4)
INSERT INTO audit SELECT 'table', 'tk' || :k FROM ratelimit.consume('tk' || :k, $native) WHERE allowed;
SQL
    cat >"$WORK/full.sql" <<SQL
INSERT INTO audit SELECT 'table', 'tkfull' FROM ratelimit.consume('tkfull', 300, '1 day', 1, 'rolling_window') WHERE allowed;
SQL
    cat >"$WORK/unlogged.sql" <<SQL
\set k random(1, 2)
INSERT INTO audit SELECT 'unlogged', 'uk' || :k FROM ratelimit.consume('uk' || :k, $native, 'unlogged') WHERE allowed;
SQL
    cat >"$WORK/memory.sql" <<SQL
\set k random(1, 2)
INSERT INTO audit SELECT 'memory', 'mk' || :k FROM ratelimit.consume('mk' || :k, $native, 'memory') WHERE allowed;
SQL
    cat >"$WORK/rpc_limits.sql" <<SQL
\set u random(1, 2)
INSERT INTO audit SELECT 'rpc_limits', x.u::text || '/rpc' FROM (SELECT ('00000000-0000-0000-0000-00000000000' || :u)::uuid AS u) x WHERE check_rate_limit_for_user(x.u, 'rpc', 1000000, 525600);
SQL
    cat >"$WORK/endpoint_limits.sql" <<SQL
\set u random(1, 2)
INSERT INTO audit SELECT 'endpoint_limits', x.u::text || '/ep' FROM (SELECT ('00000000-0000-0000-0000-00000000000' || :u)::uuid AS u) x, increment_rate_limit(x.u, 'ep', 1000000, 31536000, 1) AS r WHERE (r->>'allowed')::boolean;
SQL
    cat >"$WORK/sliding_window_limits.sql" <<SQL
\set k random(1, 2)
INSERT INTO audit SELECT 'sliding_window_limits', 'sk' || :k FROM sliding_window.check_rate_limit(p_key => 'sk' || :k, p_limit => 1000000, p_window_seconds => 31536000) WHERE allowed;
SQL
    # The same drop-in calls on the unlogged and memory engines, one per transaction (SET LOCAL
    # keeps the engine to it). Not the per-RPC one on memory: its only result is a boolean and the
    # memory engine shows no count, so nothing could read back what it stored.
    local engine
    for engine in unlogged memory; do
        if [ "$engine" = unlogged ]; then
            cat >"$WORK/rpc_limits_$engine.sql" <<SQL
\set u random(1, 2)
BEGIN;
SET LOCAL ratelimit.dropin_engine = $engine;
INSERT INTO audit SELECT 'rpc_limits_$engine', x.u::text || '/rpc' FROM (SELECT ('00000000-0000-0000-0000-00000000000' || :u)::uuid AS u) x WHERE check_rate_limit_for_user(x.u, 'rpc', 1000000, 525600);
COMMIT;
SQL
        fi
        cat >"$WORK/endpoint_limits_$engine.sql" <<SQL
\set u random(1, 2)
BEGIN;
SET LOCAL ratelimit.dropin_engine = $engine;
INSERT INTO audit SELECT 'endpoint_limits_$engine', x.u::text || '/ep' FROM (SELECT ('00000000-0000-0000-0000-00000000000' || :u)::uuid AS u) x, increment_rate_limit(x.u, 'ep', 1000000, 31536000, 1) AS r WHERE (r->>'allowed')::boolean;
COMMIT;
SQL
        cat >"$WORK/sliding_window_limits_$engine.sql" <<SQL
\set k random(1, 2)
BEGIN;
SET LOCAL ratelimit.dropin_engine = $engine;
INSERT INTO audit SELECT 'sliding_window_limits_$engine', 'sk' || :k FROM sliding_window.check_rate_limit(p_key => 'sk' || :k, p_limit => 1000000, p_window_seconds => 31536000) WHERE allowed;
COMMIT;
SQL
    done
    # Seven calls in one explicit transaction, taking keys in one global order (table keys
    # ascending, then unlogged, memory, per-RPC limits, the per-RPC limit on unlogged, the
    # endpoint limit on memory) so that clients never deadlock; the pause before COMMIT leaves
    # decisions made and not yet committed when a backend is terminated.
    cat >"$WORK/transaction.sql" <<SQL
\set a random(1, 3)
\set b :a + 1
\set u random(1, 2)
BEGIN;
INSERT INTO audit SELECT 'table', 'tk' || :a FROM ratelimit.consume('tk' || :a, $native) WHERE allowed;
INSERT INTO audit SELECT 'table', 'tk' || :b FROM ratelimit.consume('tk' || :b, $native) WHERE allowed;
INSERT INTO audit SELECT 'unlogged', 'uk' || :u FROM ratelimit.consume('uk' || :u, $native, 'unlogged') WHERE allowed;
INSERT INTO audit SELECT 'memory', 'mk' || :u FROM ratelimit.consume('mk' || :u, $native, 'memory') WHERE allowed;
INSERT INTO audit SELECT 'rpc_limits', x.u::text || '/rpc' FROM (SELECT ('00000000-0000-0000-0000-00000000000' || :u)::uuid AS u) x WHERE check_rate_limit_for_user(x.u, 'rpc', 1000000, 525600);
SET LOCAL ratelimit.dropin_engine = unlogged;
INSERT INTO audit SELECT 'rpc_limits_unlogged', x.u::text || '/rpc' FROM (SELECT ('00000000-0000-0000-0000-00000000000' || :u)::uuid AS u) x WHERE check_rate_limit_for_user(x.u, 'rpc', 1000000, 525600);
SET LOCAL ratelimit.dropin_engine = memory;
INSERT INTO audit SELECT 'endpoint_limits_memory', x.u::text || '/ep' FROM (SELECT ('00000000-0000-0000-0000-00000000000' || :u)::uuid AS u) x, increment_rate_limit(x.u, 'ep', 1000000, 31536000, 1) AS r WHERE (r->>'allowed')::boolean;
SELECT pg_sleep(0.002);
COMMIT;
SQL
    chmod 644 "$WORK"/*.sql
}
AUTOCOMMIT_SCRIPTS=(-f "$WORK/table.sql@6" -f "$WORK/full.sql@1" -f "$WORK/unlogged.sql@2"
    -f "$WORK/memory.sql@2" -f "$WORK/rpc_limits.sql@1" -f "$WORK/endpoint_limits.sql@1"
    -f "$WORK/sliding_window_limits.sql@1" -f "$WORK/rpc_limits_unlogged.sql@1"
    -f "$WORK/endpoint_limits_unlogged.sql@1" -f "$WORK/sliding_window_limits_unlogged.sql@1"
    -f "$WORK/endpoint_limits_memory.sql@1" -f "$WORK/sliding_window_limits_memory.sql@1")
TRANSACTION_SCRIPTS=(-f "$WORK/transaction.sql")
MIXED_SCRIPTS=("${AUTOCOMMIT_SCRIPTS[@]}" -f "$WORK/transaction.sql@4")

LOAD_PID=""
LOAD_OUT=""
# start_load NAME SECONDS SCRIPT-ARGS...: pgbench in the background, CLIENTS clients.
start_load() {
    local name="$1" seconds="$2"
    shift 2
    LOAD_OUT="$WORK/$name.out"
    "$PGBENCH" -n -c "$CLIENTS" -j 4 -T "$seconds" "$@" >"$LOAD_OUT" 2>&1 &
    LOAD_PID=$!
    BACKGROUND_PIDS+=("$LOAD_PID")
}
# Waits for pgbench to end; sets LOAD_TXNS (transactions it completed) and LOAD_ABORTED
# (clients that stopped on a lost connection).
finish_load() {
    wait "$LOAD_PID" || true
    forget_pid "$LOAD_PID"
    LOAD_PID=""
    LOAD_TXNS="$(sed -n 's/^number of transactions actually processed: \([0-9]*\).*/\1/p' "$LOAD_OUT")"
    LOAD_TXNS="${LOAD_TXNS:-0}"
    LOAD_ABORTED="$(grep -c 'aborted in command' "$LOAD_OUT" || true)"
}
audit_rows() {
    sql "SELECT count(*) FROM audit" 2>/dev/null || echo 0
}
# Waits until the audit table has grown by `rows` rows (the load is running and committing).
audit_grows_by() {
    local target=$(($(audit_rows) + $1))
    wait_until 30 audit_reached "$target"
}
audit_reached() {
    [ "$(audit_rows)" -ge "$1" ]
}
load_backends() {
    sql "SELECT count(*) FROM pg_stat_activity WHERE application_name = 'pgbench'
         AND backend_type = 'client backend' AND datname = current_database()"
}

# Terminates up to `n` of the load's backends, those waiting on a lock (a key's row or its
# creation lock: inside a rate-limit call) first, and records each in TERMINATED (pid -> t if it
# was waiting on a lock). A backend still on its way out may be signalled twice; it counts once.
declare -A TERMINATED=()
terminate_backends() {
    local pid waiting
    while read -r pid waiting; do
        if [ -n "$pid" ] && [ -z "${TERMINATED[$pid]:-}" ]; then
            TERMINATED[$pid]="$waiting"
        fi
    done < <(sql "SELECT pid, wait_event_type IS NOT DISTINCT FROM 'Lock'
                  FROM (SELECT pid, wait_event_type FROM pg_stat_activity
                        WHERE application_name = 'pgbench' AND backend_type = 'client backend'
                          AND datname = current_database() AND pid <> pg_backend_pid()
                        ORDER BY wait_event_type = 'Lock' DESC NULLS LAST, random()
                        LIMIT $1) s
                  WHERE pg_terminate_backend(pid)")
}
terminated_waiting() {
    local pid n=0
    for pid in "${!TERMINATED[@]}"; do
        [ "${TERMINATED[$pid]}" = t ] && n=$((n + 1))
    done
    echo "$n"
}

# kill -9 of one of the load's backends (one inside a call if there is one). The postmaster
# then ends every process and reinitializes: crash recovery. Sets VICTIM_PID and VICTIM_DOING.
VICTIM_PID=""
VICTIM_DOING=""
kill_one_backend() { # [APPLICATION_NAME]
    local line pid wait_type postmaster
    line="$(sql "SELECT pid, coalesce(wait_event_type, state) FROM pg_stat_activity
                 WHERE application_name = '${1:-pgbench}' AND backend_type = 'client backend'
                   AND datname = current_database()
                 ORDER BY wait_event_type = 'Lock' DESC NULLS LAST, state = 'active' DESC
                 LIMIT 1")"
    pid="${line%% *}"
    wait_type="${line#* }"
    postmaster="$(postmaster_pid)"
    # Only ever a backend of this cluster's postmaster.
    VICTIM_PID="none"
    VICTIM_DOING="nothing"
    if [ -z "$pid" ] || [ "$(ps -o ppid= -p "$pid" | tr -d ' ')" != "$postmaster" ]; then
        return 0
    fi
    kill -9 "$pid"
    KILLS=$((KILLS + 1))
    VICTIM_PID="$pid"
    VICTIM_DOING="$wait_type"
}

# ---- the cluster ------------------------------------------------------------------------------
# fsync off: the faults here end processes, never the machine, so the OS keeps what was written.
cluster_start "shared_preload_libraries = 'ratelimit'" "ratelimit.memory_capacity = 10000" \
    "fsync = off" "restart_after_crash = on"
trap cleanup EXIT
trap 'exit 130' INT TERM
write_load_scripts
run_started=$SECONDS

# =================================================================================================
echo "# 1. backends terminated mid-call, then kill -9 of a backend (crash recovery)"
export PGDATABASE=faults1
setup_database faults1
register_load_keys
memory_base="$(memory_allowed)"
terminated_total=0
TABLE_ENGINES='{table,rpc_limits,endpoint_limits,sliding_window_limits}'
TRANSACTIONAL='{table,unlogged,rpc_limits,endpoint_limits,sliding_window_limits,rpc_limits_unlogged,endpoint_limits_unlogged,sliding_window_limits_unlogged}'

for variant in autocommit transaction; do
    if [ "$variant" = autocommit ]; then
        scripts=("${AUTOCOMMIT_SCRIPTS[@]}")
        calls_per_txn=1
    else
        scripts=("${TRANSACTION_SCRIPTS[@]}")
        calls_per_txn=7
    fi
    txns=0
    aborted=0
    terminated=0
    waiting=0
    for ((round = 1; round <= TERMINATION_ROUNDS; round++)); do
        start_load "s1-$variant-$round" "$LOAD_SECONDS" "${scripts[@]}"
        # Two backends at a time while the others go on committing; then the round ends by
        # terminating every backend left (each terminated client stops: pgbench does not
        # reconnect).
        TERMINATED=()
        for ((tick = 1; tick <= TICKS; tick++)); do
            audit_grows_by 150 || break
            terminate_backends 2
        done
        while [ "$(load_backends)" -gt 0 ]; do
            terminate_backends "$CLIENTS"
            sleep 0.2
        done
        finish_load
        CONNECTIONS_CUT=$((CONNECTIONS_CUT + LOAD_ABORTED))
        terminated=$((terminated + ${#TERMINATED[@]}))
        waiting=$((waiting + $(terminated_waiting)))
        txns=$((txns + LOAD_TXNS))
        aborted=$((aborted + LOAD_ABORTED))
    done
    terminated_total=$((terminated_total + terminated))
    ok "$([ "$txns" -gt 0 ]; echo $?)" "1/$variant: the load ran ($txns transactions completed)"
    # Each client has one backend and pgbench does not reconnect: every backend of every round
    # ended by pg_terminate_backend, none in any other way (a crash would restart them all).
    is "$terminated $aborted" "$((CLIENTS * TERMINATION_ROUNDS)) $((CLIENTS * TERMINATION_ROUNDS))" \
        "1/$variant: all $((CLIENTS * TERMINATION_ROUNDS)) backends were terminated under load, $((TICKS * 2 * TERMINATION_ROUNDS)) of them while the others went on, and each client saw its connection end"
    is "$(sql 'SELECT 1')" "1" "1/$variant: the server accepts connections"
    check_tally "$TRANSACTIONAL" \
        "1/$variant: table, unlogged and drop-in counters (on their tables and on unlogged) store exactly the allowed calls that committed"
    is "$(sql "SELECT committed <= 300 AND stored = committed FROM tally WHERE key = 'tkfull'")" "t" \
        "1/$variant: a key at its limit (300) never counted past it"
    # The memory engine is not transactional: a terminated transaction keeps its decision, so the
    # store holds at least what committed and at most one call more per terminated backend. The
    # drop-ins' keys on it are read back first, as their reading counts one more call each.
    sql "SELECT * FROM read_memory_drop_ins()" >"$WORK/memory-drop-ins"
    md_stored="$(awk '{ s += $3 } END { print s + 0 }' "$WORK/memory-drop-ins")"
    md_committed="$(awk '{ s += $4 } END { print s + 0 }' "$WORK/memory-drop-ins")"
    mem_stored="$(stored_sum '{memory}')"
    mem_committed="$(committed_sum '{memory}')"
    MEMORY_KEPT=$((mem_stored - mem_committed + md_stored - md_committed))
    is "$(($(memory_allowed) - memory_base))" "$((mem_stored + md_stored))" \
        "1/$variant: memory keys (the drop-ins' too) hold exactly the allowed decisions the engine counted"
    ok "$([ "$mem_stored" -ge "$mem_committed" ] &&
        [ $((mem_stored - mem_committed)) -le "$terminated_total" ]; echo $?)" \
        "1/$variant: memory decisions not committed ($((mem_stored - mem_committed))) are at most the terminated backends ($terminated_total)"
    is "$(awk '$3 < $4 { print $1 "/" $2 }' "$WORK/memory-drop-ins")" "" \
        "1/$variant: the drop-ins on memory hold every allowed call that committed ($md_committed)"
    ok "$([ $((md_stored - md_committed)) -le "$terminated_total" ]; echo $?)" \
        "1/$variant: their calls not committed ($((md_stored - md_committed))) are at most the terminated backends ($terminated_total)"
    summary "1 terminate/$variant: clients=$CLIENTS calls_per_txn=$calls_per_txn" \
        "txns_completed=$txns clients_aborted=$aborted backends_terminated=$terminated" \
        "(waiting_on_key_lock=$waiting)" \
        "committed_allowed: table=$(committed_sum '{table}') unlogged=$(committed_sum '{unlogged}')" \
        "drop_ins=$(committed_sum '{rpc_limits,endpoint_limits,sliding_window_limits}') memory=$mem_committed" \
        "drop_ins_on_unlogged=$(committed_sum "$DROP_INS_UNLOGGED") drop_ins_on_memory=$md_committed" \
        "stored: table=$(stored_sum '{table}') unlogged=$(stored_sum '{unlogged}')" \
        "drop_ins=$(stored_sum '{rpc_limits,endpoint_limits,sliding_window_limits}') memory=$mem_stored" \
        "drop_ins_on_unlogged=$(stored_sum "$DROP_INS_UNLOGGED") drop_ins_on_memory=$md_stored" \
        "mismatched_keys=$(mismatches "$TRANSACTIONAL")"
done

# kill -9, without and then with memory snapshots.
for snapshots in off on; do
    if [ "$snapshots" = on ]; then
        sql "ALTER SYSTEM SET ratelimit.memory_snapshot_interval = 1" >/dev/null
        sql "SELECT pg_reload_conf()" >/dev/null
        # A quiet key, decided before a snapshot that must contain it.
        for _ in 1 2 3; do
            sql "SELECT ratelimit.consume('snap', 10, '1 day', 1, 'rolling_window', 'memory')" >/dev/null
        done
        touch "$WORK/after-snap-calls"
        ok "$(wait_until 30 test "$(state_file)" -nt "$WORK/after-snap-calls"; echo $?)" \
            "1/kill -9 with snapshots: the worker wrote a snapshot after the calls"
    fi
    for ((round = 1; round <= CRASH_ROUNDS; round++)); do
        before="$(log_offset)"
        start_load "s1-crash-$snapshots-$round" 60 "${MIXED_SCRIPTS[@]}"
        audit_grows_by 300 || true
        kill_one_backend
        finish_load
        CONNECTIONS_CUT=$((CONNECTIONS_CUT + LOAD_ABORTED))
        ok "$(wait_until 120 server_up; echo $?)" \
            "1/kill -9 ($snapshots): the server accepts connections again after crash recovery"
        victim_pid="$VICTIM_PID"
        # The process is named "server process" up to 17, by its type ("client backend") from 18.
        ok "$(log_has "$before" " (PID $victim_pid) was terminated by signal 9" &&
            log_has "$before" 'all server processes terminated; reinitializing'; echo $?)" \
            "1/kill -9 ($snapshots): backend $victim_pid was killed and the postmaster reinitialized"
        check_tally "$TABLE_ENGINES" \
            "1/kill -9 ($snapshots): table and drop-in counters store exactly the allowed calls that committed"
        unlogged_before="$(committed_sum "$UNLOGGED_KINDS")" # audit is logged: it survived
        drop_ins_before="$(committed_sum "$DROP_INS_UNLOGGED")"
        is "$(sql 'SELECT count(*) FROM ratelimit.key_state_unlogged')" "0" \
            "1/kill -9 ($snapshots): the unlogged engine is empty after crash recovery (by design)"
        ok "$([ "$unlogged_before" -gt 0 ] && [ "$drop_ins_before" -gt 0 ]; echo $?)" \
            "1/kill -9 ($snapshots): ... though $unlogged_before unlogged decisions had committed ($drop_ins_before of them the drop-ins')"
        if [ "$snapshots" = off ]; then
            is "$(sql 'SELECT entries, allowed FROM ratelimit.memory_stats')" "0 0" \
                "1/kill -9 (off): the memory store starts empty"
            memory_after="empty"
        else
            is "$(sql "SELECT remaining FROM ratelimit.peek('snap', 10, '1 day', 1, 'rolling_window', 'memory')")" \
                "7" "1/kill -9 (on): the memory store comes back from the snapshot (3 calls on a quiet key)"
            ok "$(log_has "$before" 'ratelimit: memory engine restored'; echo $?)" \
                "1/kill -9 (on): the log says the store was restored"
            memory_after="restored:$(sql 'SELECT entries FROM ratelimit.memory_stats')_keys"
        fi
        is "$(sql "SELECT allowed, remaining FROM ratelimit.consume('after-crash-$snapshots-$round', 5, '1 day', 1, 'rolling_window', 'memory')")" \
            "t 4" "1/kill -9 ($snapshots): the memory engine decides again"
        is "$(sql "SELECT allowed, remaining FROM ratelimit.consume('after-crash-$snapshots-$round', 5, '1 day', 1, 'rolling_window')")" \
            "t 4" "1/kill -9 ($snapshots): the table engine decides again"
        summary "1 kill-9/snapshots=$snapshots: clients=$CLIENTS txns_completed=$LOAD_TXNS" \
            "clients_aborted=$LOAD_ABORTED killed_backend=$VICTIM_PID($VICTIM_DOING)" \
            "committed_allowed: table=$(committed_sum '{table}') drop_ins=$(committed_sum '{rpc_limits,endpoint_limits,sliding_window_limits}')" \
            "stored: table=$(stored_sum '{table}') drop_ins=$(stored_sum '{rpc_limits,endpoint_limits,sliding_window_limits}')" \
            "mismatched_keys=$(mismatches "$TABLE_ENGINES")" \
            "unlogged: committed_before=$unlogged_before (drop_ins=$drop_ins_before)" \
            "stored_after=$(stored_sum "$UNLOGGED_KINDS")" \
            "memory_after=$memory_after"
        # The crash emptied (or rewound) the non-durable engines: compare them afresh from here.
        forget_non_durable
    done
done
# Snapshots off again, then a crash: the store must start empty, not from the last snapshot
# taken while they were on (it is older than every decision since).
sql "ALTER SYSTEM RESET ratelimit.memory_snapshot_interval" >/dev/null
sql "SELECT pg_reload_conf()" >/dev/null
sql "SELECT ratelimit.consume('snap', 10, '1 day', 1, 'rolling_window', 'memory')" >/dev/null
psql -X -q -c "SET application_name = 'victim'" -c "SELECT pg_sleep(600)" >/dev/null 2>&1 &
victim_session=$!
BACKGROUND_PIDS+=("$victim_session")
victim_waiting() {
    [ "$(sql "SELECT count(*) FROM pg_stat_activity WHERE application_name = 'victim'")" = 1 ]
}
wait_until 30 victim_waiting || true
before="$(log_offset)"
kill_one_backend victim
wait "$victim_session" || true
forget_pid "$victim_session"
ok "$(wait_until 120 server_up && log_has "$before" 'all server processes terminated; reinitializing'; echo $?)" \
    "1/kill -9 after snapshots were turned off: crash recovery, and the server accepts connections"
stale_entries="$(sql 'SELECT entries FROM ratelimit.memory_stats')"
is "$stale_entries $(sql "SELECT remaining FROM ratelimit.peek('snap', 10, '1 day', 1, 'rolling_window', 'memory')")" \
    "0 10" "1/kill -9 after snapshots were turned off: the memory store starts empty (an old snapshot is not restored)"
summary "1 kill-9/snapshots turned off: memory keys after the crash=$stale_entries (expected 0)"

# =================================================================================================
echo "# 2. pg_ctl stop -m immediate under load, then start"
export PGDATABASE=faults2
setup_database faults2
register_load_keys
for ((round = 1; round <= STOP_ROUNDS; round++)); do
    before="$(log_offset)"
    start_load "s2-$round" 60 "${MIXED_SCRIPTS[@]}"
    audit_grows_by 500 || true
    memory_keys_before="$(sql 'SELECT entries FROM ratelimit.memory_stats')"
    cluster_server_stop immediate
    finish_load
    CONNECTIONS_CUT=$((CONNECTIONS_CUT + LOAD_ABORTED))
    cluster_server_start
    ok "$(log_has "$before" 'database system was not properly shut down; automatic recovery in progress'; echo $?)" \
        "2/immediate: the server ran crash recovery at start"
    is "$(sql 'SELECT 1')" "1" "2/immediate: the server accepts connections"
    check_tally "$TABLE_ENGINES" \
        "2/immediate: table and drop-in counters store exactly the allowed calls that committed"
    unlogged_before="$(committed_sum "$UNLOGGED_KINDS")"
    drop_ins_before="$(committed_sum "$DROP_INS_UNLOGGED")"
    is "$(sql 'SELECT count(*) FROM ratelimit.key_state_unlogged')" "0" \
        "2/immediate: the unlogged engine is empty after the restart (by design)"
    ok "$([ "$unlogged_before" -gt 0 ] && [ "$drop_ins_before" -gt 0 ]; echo $?)" \
        "2/immediate: ... though $unlogged_before unlogged decisions had committed ($drop_ins_before of them the drop-ins')"
    memory_entries="$(sql 'SELECT entries FROM ratelimit.memory_stats')"
    is "$memory_entries" "0" \
        "2/immediate: the memory store starts empty without snapshots (an immediate stop saves nothing)"
    is "$(sql "SELECT allowed, remaining FROM ratelimit.consume('after-stop-$round', 5, '1 day', 1, 'rolling_window', 'memory')")" \
        "t 4" "2/immediate: the memory engine decides again"
    is "$(sql 'SELECT capacity FROM ratelimit.memory_stats')" "10000" "2/immediate: memory_stats works"
    summary "2 immediate-stop: clients=$CLIENTS txns_completed=$LOAD_TXNS clients_aborted=$LOAD_ABORTED" \
        "committed_allowed: table=$(committed_sum '{table}') drop_ins=$(committed_sum '{rpc_limits,endpoint_limits,sliding_window_limits}')" \
        "stored: table=$(stored_sum '{table}') drop_ins=$(stored_sum '{rpc_limits,endpoint_limits,sliding_window_limits}')" \
        "mismatched_keys=$(mismatches "$TABLE_ENGINES")" \
        "unlogged: committed_before=$unlogged_before (drop_ins=$drop_ins_before)" \
        "stored_after=$(stored_sum "$UNLOGGED_KINDS")" \
        "memory: keys_before_stop>=$memory_keys_before keys_after_start=$memory_entries"
    forget_non_durable
done

# =================================================================================================
echo "# 3. lock_timeout and statement_timeout inside a call"
export PGDATABASE=faults3
setup_database faults3
drop_in_counts() {
    sql "SELECT (SELECT sum(call_count) FROM rpc_rate_limits),
                (SELECT sum(counter) FROM rate_limits),
                (SELECT sum(count) FROM sliding_window.rate_limit_buckets)"
}
# The same three counters on the unlogged engine, where the same calls keep them instead.
unlogged_drop_in_counts() {
    sql "SELECT (SELECT sum(amount) FROM ratelimit.key_state_unlogged WHERE policy = 'drop-in/rpc_rate_limits'),
                (SELECT sum(amount) FROM ratelimit.key_state_unlogged WHERE policy = 'drop-in/rate_limits'),
                (SELECT sum(l.units) FROM ratelimit.key_state_unlogged AS s,
                        unnest(s.log) WITH ORDINALITY AS l(units, i)
                 WHERE s.policy = 'drop-in/rate_limit_buckets' AND l.i % 2 = 0)"
}
rpc_limits_call="check_rate_limit_for_user('$U1', 'rpc', 10, 525600)"
endpoint_limits_call="increment_rate_limit('$U1', 'ep', 10, 31536000, 1)"
sliding_window_limits_call="sliding_window.check_rate_limit(p_key => 'sk', p_limit => 10, p_window_seconds => 31536000)"
# Three committed calls on each key the holder will lock, the drop-ins' on their tables and on
# unlogged.
for _ in 1 2 3; do
    sql "SELECT $(consume_sql held), $(consume_sql held-u unlogged), $rpc_limits_call, $endpoint_limits_call" >/dev/null
    sql "SELECT * FROM $sliding_window_limits_call" >/dev/null
    psql -X -q -v ON_ERROR_STOP=1 -c "SET ratelimit.dropin_engine = unlogged" \
        -c "SELECT $rpc_limits_call, $endpoint_limits_call" -c "SELECT * FROM $sliding_window_limits_call" >/dev/null
done
# The holder: one open transaction that has decided on every one of those keys (and created
# a new one), then sleeps holding their row locks and the keys' creation locks.
psql -X -q -v ON_ERROR_STOP=1 -c "SET application_name = 'holder'" -c "BEGIN" \
    -c "SELECT $(consume_sql held), $(consume_sql held-new), $(consume_sql held-u unlogged)" \
    -c "SELECT $rpc_limits_call, $endpoint_limits_call" -c "SELECT * FROM $sliding_window_limits_call" \
    -c "SET ratelimit.dropin_engine = unlogged" \
    -c "SELECT $rpc_limits_call, $endpoint_limits_call" -c "SELECT * FROM $sliding_window_limits_call" \
    -c "SELECT pg_sleep(600)" >"$WORK/holder.out" 2>&1 &
holder=$!
BACKGROUND_PIDS+=("$holder")
holder_sleeping() {
    [ "$(sql "SELECT wait_event FROM pg_stat_activity WHERE application_name = 'holder'")" = PgSleep ]
}
ok "$(wait_until 30 holder_sleeping; echo $?)" "3: a session holds the keys in an open transaction"

all_keys="ARRAY['free-a', 'free-b', 'held', 'mem-a']"
consume_all_sql="ratelimit.consume_all($all_keys, ARRAY[10, 10, 10, 10],
    ARRAY['1 day', '1 day', '1 day', '1 day']::interval[],
    ARRAY['rolling_window', 'rolling_window', 'rolling_window', 'rolling_window'],
    ARRAY['table', 'table', 'table', 'memory'])"
# One session: each case prints "decision CASE ..." if the call returned anything, then
# "sqlstate CASE CODE".
timeout_cases() { # PREFIX
    local p="$1"
    cat <<SQL
SELECT 'decision $p/table', allowed FROM $(consume_sql held);
\\echo sqlstate $p/table :SQLSTATE
SELECT 'decision $p/table-new-key', allowed FROM $(consume_sql held-new);
\\echo sqlstate $p/table-new-key :SQLSTATE
SELECT 'decision $p/unlogged', allowed FROM $(consume_sql held-u unlogged);
\\echo sqlstate $p/unlogged :SQLSTATE
SELECT 'decision $p/rpc_limits', $rpc_limits_call;
\\echo sqlstate $p/rpc_limits :SQLSTATE
SELECT 'decision $p/endpoint_limits', $endpoint_limits_call;
\\echo sqlstate $p/endpoint_limits :SQLSTATE
SELECT 'decision $p/sliding_window_limits', allowed FROM $sliding_window_limits_call;
\\echo sqlstate $p/sliding_window_limits :SQLSTATE
SET ratelimit.dropin_engine = unlogged;
SELECT 'decision $p/rpc_limits_unlogged', $rpc_limits_call;
\\echo sqlstate $p/rpc_limits_unlogged :SQLSTATE
SELECT 'decision $p/endpoint_limits_unlogged', $endpoint_limits_call;
\\echo sqlstate $p/endpoint_limits_unlogged :SQLSTATE
SELECT 'decision $p/sliding_window_limits_unlogged', allowed FROM $sliding_window_limits_call;
\\echo sqlstate $p/sliding_window_limits_unlogged :SQLSTATE
RESET ratelimit.dropin_engine;
SELECT 'decision $p/consume_all', $consume_all_sql;
\\echo sqlstate $p/consume_all :SQLSTATE
SQL
}
{
    echo "SET lock_timeout = '100ms';"
    timeout_cases lock
    cat <<SQL
SELECT 'decision lock/memory', allowed FROM $(consume_sql mem-b memory);
\\echo sqlstate lock/memory :SQLSTATE
SET ratelimit.dropin_engine = memory;
SELECT 'decision lock/memory_drop_ins', $rpc_limits_call, ($endpoint_limits_call)->>'current',
       (SELECT current_count FROM $sliding_window_limits_call);
\\echo sqlstate lock/memory_drop_ins :SQLSTATE
RESET ratelimit.dropin_engine;
BEGIN;
SELECT 'decision txn/table', allowed FROM $(consume_sql held);
\\echo sqlstate txn/table :SQLSTATE
SELECT 'decision txn/next-statement', 1;
\\echo sqlstate txn/next-statement :SQLSTATE
ROLLBACK;
SELECT 'decision txn/after-rollback', allowed, remaining FROM $(consume_sql free-c);
\\echo sqlstate txn/after-rollback :SQLSTATE
BEGIN;
SAVEPOINT before_call;
SELECT 'decision savepoint/consume_all', $consume_all_sql;
\\echo sqlstate savepoint/consume_all :SQLSTATE
ROLLBACK TO SAVEPOINT before_call;
SELECT 'decision savepoint/peek-free-a', remaining FROM ratelimit.peek('free-a', $native);
SELECT 'decision savepoint/peek-free-b', remaining FROM ratelimit.peek('free-b', $native);
SELECT 'decision savepoint/peek-mem-a', remaining FROM ratelimit.peek('mem-a', $native, 'memory');
SELECT 'decision savepoint/consume-free-a', allowed, remaining FROM $(consume_sql free-a);
COMMIT;
\\echo sqlstate savepoint/commit :SQLSTATE
SET lock_timeout = 0;
SET statement_timeout = '200ms';
SQL
    timeout_cases statement
    echo "RESET statement_timeout;"
} >"$WORK/timeouts.sql"
psql -X -A -t -q -F ' ' -f "$WORK/timeouts.sql" >"$WORK/timeouts.out" 2>&1 || true
sqlstate_of() {
    awk -v c="$1" '$1 == "sqlstate" && $2 == c { print $3 }' "$WORK/timeouts.out"
}
decision_of() {
    awk -v c="$1" '$1 == "decision" && $2 == c { $1 = ""; $2 = ""; sub(/^ +/, ""); print }' \
        "$WORK/timeouts.out"
}
raised=0
for prefix in lock statement; do
    code=55P03
    [ "$prefix" = statement ] && code=57014
    for case in table table-new-key unlogged rpc_limits endpoint_limits sliding_window_limits \
        rpc_limits_unlogged endpoint_limits_unlogged sliding_window_limits_unlogged consume_all; do
        is "$(sqlstate_of "$prefix/$case") [$(decision_of "$prefix/$case")]" "$code []" \
            "3/${prefix}_timeout: $case on a held key raises $code and returns no decision"
        raised=$((raised + 1))
    done
done
is "$(sqlstate_of lock/memory) $(decision_of lock/memory)" "00000 t" \
    "3: the memory engine decides while table rows are held"
is "$(sqlstate_of lock/memory_drop_ins) $(decision_of lock/memory_drop_ins)" "00000 t 1 1" \
    "3: so do the drop-ins on memory (per-RPC, endpoint and sliding-window counts of 1)"
is "$(sqlstate_of txn/table) $(sqlstate_of txn/next-statement)" "55P03 25P02" \
    "3: inside a transaction the timeout aborts it"
is "$(sqlstate_of txn/after-rollback) $(decision_of txn/after-rollback)" "00000 t 9" \
    "3: after ROLLBACK the same session decides again"
is "$(sqlstate_of savepoint/consume_all)" "55P03" "3: consume_all under a savepoint raises 55P03"
is "$(decision_of savepoint/peek-free-a) $(decision_of savepoint/peek-free-b) $(decision_of savepoint/peek-mem-a)" \
    "10 10 10" \
    "3: after ROLLBACK TO SAVEPOINT, consume_all charged none of its keys (table keys before the locked one, memory key after)"
is "$(decision_of savepoint/consume-free-a) $(sqlstate_of savepoint/commit)" "t 9 00000" \
    "3: the transaction goes on and commits"
# Counts while the holder still holds its uncommitted calls: only committed calls show.
held_now="$(remaining held) $(remaining held-new) $(remaining held-u unlogged)"
is "$held_now" "7 10 7" "3: the held keys still count 3, 0 and 3: no failed call charged anything"
drop_ins_now="$(drop_in_counts)"
is "$drop_ins_now" "3 3 3" "3: the drop-in counters still count 3 each"
unlogged_drop_ins_now="$(unlogged_drop_in_counts)"
is "$unlogged_drop_ins_now" "3 3 3" "3: so do their counters on unlogged"
others_now="$(remaining free-a) $(remaining free-b) $(remaining free-c) $(remaining mem-a memory) $(remaining mem-b memory)"
is "$others_now" "9 10 9 10 9" \
    "3: consume_all's other keys were never charged (free-a: 1 call after the savepoint, mem-a: none)"
# Units charged beyond the committed calls: on the held keys and drop-in counters, and on
# consume_all's other keys (free-b and mem-a had no successful call at all).
read -r h1 h2 h3 <<<"$held_now"
read -r s1 s2 s3 <<<"$drop_ins_now"
read -r v1 v2 v3 <<<"$unlogged_drop_ins_now"
held_charged=$(((7 - h1) + (10 - h2) + (7 - h3) + (s1 - 3) + (s2 - 3) + (s3 - 3) + (v1 - 3) + (v2 - 3) + (v3 - 3)))
read -r _ o2 _ o4 _ <<<"$others_now"
others_charged=$(((10 - o2) + (10 - o4)))
# The holder ends (its transaction rolls back); then the keys decide from their committed state.
sql "SELECT pg_cancel_backend(pid) FROM pg_stat_activity WHERE application_name = 'holder'" >/dev/null
wait "$holder" || true
forget_pid "$holder"
is "$(remaining held) $(remaining held-new) $(remaining held-u unlogged) $(drop_in_counts) $(unlogged_drop_in_counts)" \
    "7 10 7 3 3 3 3 3 3" "3: the holder's rolled-back calls left nothing"
is "$(sql "SELECT (c).allowed, (c).remaining FROM (SELECT $(consume_sql held) AS c) x")" "t 6" \
    "3: the formerly held key decides and counts from its committed state"
is "$(sql "SELECT (c).allowed, (c).remaining FROM (SELECT $(consume_sql held-new) AS c) x")" "t 9" \
    "3: the key whose creation timed out is created by the next call"
is "$(sql "SELECT $rpc_limits_call, ($endpoint_limits_call)->>'current'") $(sql "SELECT current_count FROM $sliding_window_limits_call")" \
    "t 4 4" "3: the drop-in counters go on from 3"
is "$(psql -X -A -t -q -F ' ' -v ON_ERROR_STOP=1 -c "SET ratelimit.dropin_engine = unlogged" \
    -c "SELECT $rpc_limits_call, ($endpoint_limits_call)->>'current', (SELECT current_count FROM $sliding_window_limits_call)")" \
    "t 4 4" "3: so do their counters on unlogged"
lock_raised="$(awk '$1 == "sqlstate" && $2 ~ /^lock\// && $3 == "55P03"' "$WORK/timeouts.out" | wc -l)"
statement_raised="$(awk '$1 == "sqlstate" && $2 ~ /^statement\// && $3 == "57014"' "$WORK/timeouts.out" | wc -l)"
failed_returned="$(grep -c '^decision \(lock\|statement\)/\(table\|unlogged\|rpc_limits\|endpoint_limits\|sliding_window_limits\|consume_all\)' "$WORK/timeouts.out" || true)"
TIMEOUTS_RAISED=$((TIMEOUTS_RAISED + lock_raised + statement_raised))
OTHER_ERRORS=$((OTHER_ERRORS + raised - lock_raised - statement_raised))
FAILED_RETURNED=$((FAILED_RETURNED + failed_returned))
summary "3 timeouts: calls_on_held_keys=$raised raised: lock_timeout_55P03=$lock_raised statement_timeout_57014=$statement_raised" \
    "decisions_returned_by_failed_calls=$failed_returned" \
    "units_charged_by_failed_calls: held_keys=$held_charged consume_all_other_keys=$others_charged" \
    "memory_decides_while_rows_held=$(decision_of lock/memory)" \
    "drop_ins_on_memory_decide=$(decision_of lock/memory_drop_ins | tr ' ' ,)"

# =================================================================================================
echo "# 4. a full disk under the state tables"
export PGDATABASE=faults4
setup_database faults4
MOUNT_DIR="$(mktemp -d /tmp/ratelimit-faults-tmpfs.XXXXXX)"
if ! mount -t tmpfs -o size=16M,mode=755 tmpfs "$MOUNT_DIR"; then
    rmdir "$MOUNT_DIR"
    MOUNT_DIR=""
    # Without mount rights (an unprivileged container) there is no honest disk-full here:
    # temp_file_limit never fires inside a call, and a file-size rlimit would hit the WAL first.
    checks=$((checks + 1))
    echo "ok $checks - 4: disk full # SKIP cannot mount a tmpfs here (needs root with mount rights)"
    summary "4 disk-full: SKIPPED, no tmpfs mount possible"
else
    mkdir "$MOUNT_DIR/ts"
    chown postgres:postgres "$MOUNT_DIR/ts"
    chmod 700 "$MOUNT_DIR/ts"
    sql "CREATE TABLESPACE small LOCATION '$MOUNT_DIR/ts'" >/dev/null
    # Every table a call writes, and its indexes, onto the small filesystem; audit stays off it.
    psql -X -q -v ON_ERROR_STOP=1 >/dev/null <<'SQL'
SELECT format('ALTER TABLE %s SET TABLESPACE small', c::regclass)
FROM unnest(ARRAY['ratelimit.key_state', 'ratelimit.key_state_unlogged', 'public.rpc_rate_limits',
                  'public.rate_limits', 'sliding_window.rate_limit_buckets']::regclass[]) AS c \gexec
SELECT format('ALTER INDEX %s SET TABLESPACE small', indexrelid::regclass)
FROM pg_index
WHERE indrelid = ANY (ARRAY['ratelimit.key_state', 'ratelimit.key_state_unlogged',
                            'public.rpc_rate_limits', 'public.rate_limits',
                            'sliding_window.rate_limit_buckets']::regclass[]) \gexec
SQL
    N=200
    existing_native="1000, '1 day', 1, 'rolling_window'"
    disk_calls() { # one pass over N new keys per engine; each call audited in its transaction
        local i uuid
        for i in $(seq 1 "$N"); do
            uuid="$(user_uuid "$((1000 + i))")"
            echo "INSERT INTO audit SELECT 'table', 'dk-$i' FROM ratelimit.consume('dk-$i', $native) WHERE allowed;"
            printf '%s\n' '\echo sqlstate table :SQLSTATE'
            echo "INSERT INTO audit SELECT 'unlogged', 'du-$i' FROM ratelimit.consume('du-$i', $native, 'unlogged') WHERE allowed;"
            printf '%s\n' '\echo sqlstate unlogged :SQLSTATE'
            echo "INSERT INTO audit SELECT 'rpc_limits', '$uuid/rpc' WHERE check_rate_limit_for_user('$uuid', 'rpc', 10, 525600);"
            printf '%s\n' '\echo sqlstate rpc_limits :SQLSTATE'
            echo "INSERT INTO audit SELECT 'endpoint_limits', '$uuid/ep' FROM increment_rate_limit('$uuid', 'ep', 10, 31536000, 1) AS r WHERE (r->>'allowed')::boolean;"
            printf '%s\n' '\echo sqlstate endpoint_limits :SQLSTATE'
            echo "INSERT INTO audit SELECT 'sliding_window_limits', 'dsk-$i' FROM sliding_window.check_rate_limit(p_key => 'dsk-$i', p_limit => 10, p_window_seconds => 31536000) WHERE allowed;"
            printf '%s\n' '\echo sqlstate sliding_window_limits :SQLSTATE'
            echo "INSERT INTO audit SELECT 'table', 'dk-existing' FROM ratelimit.consume('dk-existing', $existing_native) WHERE allowed;"
            printf '%s\n' '\echo sqlstate existing :SQLSTATE'
            # The drop-ins on unlogged: new rows of key_state_unlogged.
            echo "SET ratelimit.dropin_engine = unlogged;"
            echo "INSERT INTO audit SELECT 'rpc_limits_unlogged', '$uuid/rpc' WHERE check_rate_limit_for_user('$uuid', 'rpc', 10, 525600);"
            printf '%s\n' '\echo sqlstate rpc_limits_unlogged :SQLSTATE'
            echo "INSERT INTO audit SELECT 'endpoint_limits_unlogged', '$uuid/ep' FROM increment_rate_limit('$uuid', 'ep', 10, 31536000, 1) AS r WHERE (r->>'allowed')::boolean;"
            printf '%s\n' '\echo sqlstate endpoint_limits_unlogged :SQLSTATE'
            echo "INSERT INTO audit SELECT 'sliding_window_limits_unlogged', 'dsk-$i' FROM sliding_window.check_rate_limit(p_key => 'dsk-$i', p_limit => 10, p_window_seconds => 31536000) WHERE allowed;"
            printf '%s\n' '\echo sqlstate sliding_window_limits_unlogged :SQLSTATE'
            echo "RESET ratelimit.dropin_engine;"
        done
    }
    {
        echo "INSERT INTO keys VALUES ('table', 'dk-existing', 1000), ('memory', 'dm', 10);"
        for i in $(seq 1 "$N"); do
            uuid="$(user_uuid "$((1000 + i))")"
            echo "INSERT INTO keys VALUES ('table', 'dk-$i', 10), ('unlogged', 'du-$i', 10),"
            echo "  ('rpc_limits', '$uuid/rpc', 10), ('endpoint_limits', '$uuid/ep', 10), ('sliding_window_limits', 'dsk-$i', 10),"
            echo "  ('rpc_limits_unlogged', '$uuid/rpc', 10), ('endpoint_limits_unlogged', '$uuid/ep', 10),"
            echo "  ('sliding_window_limits_unlogged', 'dsk-$i', 10);"
        done
    } | psql -X -q -v ON_ERROR_STOP=1 >/dev/null
    # A key that exists before the disk fills.
    sql "INSERT INTO audit SELECT 'table', 'dk-existing' FROM ratelimit.consume('dk-existing', $existing_native) WHERE allowed" >/dev/null
    # Fill the filesystem: 1 MB statements until the first fails for lack of space.
    sql "CREATE TABLE filler (pad text) TABLESPACE small" >/dev/null
    fill_state=""
    for _ in $(seq 1 40); do
        fill_state="$(psql -X -A -t -q -c "\\set VERBOSITY verbose" \
            -c "INSERT INTO filler SELECT repeat('x', 1000) FROM generate_series(1, 1000)" 2>&1 |
            grep -o 'ERROR:  [0-9A-Z]\{5\}' | head -1 || true)"
        [ -n "$fill_state" ] && break
    done
    is "$fill_state" "ERROR:  53100" "4: filling the tablespace ends in 53100 (disk full)"
    free_kb_full="$(df -k --output=avail "$MOUNT_DIR" | tail -1 | tr -d ' ')"
    before="$(log_offset)"

    disk_calls >"$WORK/disk.sql"
    psql -X -A -t -q -f "$WORK/disk.sql" >"$WORK/disk-full.out" 2>&1 || true
    count_state() { # FILE KIND CODE
        awk -v k="$2" -v c="$3" '$1 == "sqlstate" && $2 == k && $3 == c { n++ } END { print n + 0 }' "$1"
    }
    other_states() { # FILE: sqlstates other than success and disk full
        awk '$1 == "sqlstate" && $3 != "00000" && $3 != "53100" { print $2 ":" $3 }' "$1" |
            sort | uniq -c | tr -s ' ' | paste -sd, -
    }
    figures=""
    for kind in table unlogged rpc_limits endpoint_limits sliding_window_limits \
        rpc_limits_unlogged endpoint_limits_unlogged sliding_window_limits_unlogged; do
        full="$(count_state "$WORK/disk-full.out" "$kind" 53100)"
        okay="$(count_state "$WORK/disk-full.out" "$kind" 00000)"
        ok "$([ "$full" -gt 0 ]; echo $?)" \
            "4/full: $kind calls that need space fail with 53100 ($full of $N; $okay fitted in existing pages)"
        figures="$figures $kind=${okay}ok/${full}x53100"
        DISK_FULL_RAISED=$((DISK_FULL_RAISED + full))
    done
    existing_ok="$(count_state "$WORK/disk-full.out" existing 00000)"
    existing_full="$(count_state "$WORK/disk-full.out" existing 53100)"
    DISK_FULL_RAISED=$((DISK_FULL_RAISED + existing_full))
    other_full="$(awk '$1 == "sqlstate" && $3 != "00000" && $3 != "53100"' "$WORK/disk-full.out" | wc -l)"
    OTHER_ERRORS=$((OTHER_ERRORS + other_full))
    is "$(other_states "$WORK/disk-full.out")" "" "4/full: no call failed with any other error"
    is "$(sql 'SELECT 1')" "1" "4/full: the server accepts connections"
    DISK_KINDS='{table,unlogged,rpc_limits,endpoint_limits,sliding_window_limits,rpc_limits_unlogged,endpoint_limits_unlogged,sliding_window_limits_unlogged}'
    check_tally "$DISK_KINDS" \
        "4/full: every engine stores exactly the allowed calls that committed (failed calls charged nothing)"
    # The memory engine needs no disk.
    for _ in 1 2 3 4 5; do
        sql "INSERT INTO audit SELECT 'memory', 'dm' FROM ratelimit.consume('dm', $native, 'memory') WHERE allowed" >/dev/null
    done
    is "$(remaining dm memory) $(committed_sum '{memory}')" "5 5" \
        "4/full: the memory engine keeps deciding and counting (5 calls)"
    ok "$(log_has "$before" 'could not extend file .*No space left on device'; echo $?)" \
        "4/full: the server log names the file it could not extend"

    # Free the space: every call works again and the counts are still exact.
    sql "DROP TABLE filler" >/dev/null
    sql "CHECKPOINT" >/dev/null
    free_kb_freed="$(df -k --output=avail "$MOUNT_DIR" | tail -1 | tr -d ' ')"
    psql -X -A -t -q -f "$WORK/disk.sql" >"$WORK/disk-freed.out" 2>&1 || true
    failed_after="$(awk '$1 == "sqlstate" && $3 != "00000"' "$WORK/disk-freed.out" | wc -l)"
    is "$failed_after" "0" "4/freed: every call succeeds once space is freed ($((N * 9)) calls)"
    check_tally "${DISK_KINDS%\}},memory}" \
        "4/freed: every engine stores exactly the allowed calls that committed"
    is "$(sql "SELECT count(*) FROM tally WHERE engine <> 'memory' AND key <> 'dk-existing' AND stored NOT IN (1, 2)")" \
        "0" "4/freed: each new key counts its one or two committed calls"
    ok "$(! log_has "$before" 'PANIC'; echo $?)" "4: no PANIC in the server log"
    summary "4 disk-full: tmpfs=16MB free_kb_when_full=$free_kb_full free_kb_after_drop=$free_kb_freed" \
        "new_key_calls_per_engine=$N results:$figures" \
        "existing_key=${existing_ok}ok/${existing_full}x53100 memory=$((10 - $(remaining dm memory)))_of_5_counted" \
        "other_errors=$other_full after_freeing: calls=$((N * 9)) failed=$failed_after" \
        "committed_allowed=$(committed_sum "$DISK_KINDS")" \
        "stored=$(stored_sum "$DISK_KINDS")" \
        "mismatched_keys=$(mismatches "${DISK_KINDS%\}},memory}")"
fi

# =================================================================================================
echo "# whole run"
ok "$(! log_has 0 'PANIC'; echo $?)" "no PANIC anywhere in the server log"
is "$(grep -c 'was terminated by signal' "$CLUSTER_DIR/server.log" || true)" "$KILLS" \
    "the only processes that died of a signal are the $KILLS backends this script killed"
summary "5 fail-closed: failed calls raised: connection_ended=$CONNECTIONS_CUT" \
    "timeout_55P03_57014=$TIMEOUTS_RAISED disk_full_53100=$DISK_FULL_RAISED other_errors=$OTHER_ERRORS;" \
    "decisions_returned_by_failed_calls=$FAILED_RETURNED;" \
    "keys_whose_stored_count_differed_from_committed=$MISMATCHES (over every tally);" \
    "memory_decisions_kept_by_uncommitted_txns=$MEMORY_KEPT (by design: not transactional)"
cluster_stop
if [ -n "$MOUNT_DIR" ]; then
    umount "$MOUNT_DIR"
    rmdir "$MOUNT_DIR"
    MOUNT_DIR=""
fi

echo "# ---- figures ----"
for line in "${SUMMARIES[@]}"; do
    echo "# summary: $line"
done
echo "# run time: $((SECONDS - run_started)) s (RELIABILITY_LONG=$LONG)"
echo "1..$checks"
if [ "$failures" -gt 0 ]; then
    echo "# $failures of $checks checks failed"
    exit 1
fi
echo "# all $checks checks passed"
