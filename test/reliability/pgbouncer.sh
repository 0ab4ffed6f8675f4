#!/usr/bin/env bash
# Exactness through pgbouncer in transaction pooling, on a cluster and a pgbouncer of its own.
# 64 pgbench clients share a pool of 8 server connections, so consecutive transactions of one
# client may run on different backends and one backend serves many clients. Every transaction
# freezes the clock with SET LOCAL (a session SET would stay on whichever server connection
# ran it and leak to other clients), makes one decision and records it in an audit table in
# the same transaction.
#  - every algorithm on every engine, one key: under the limit every call is allowed and the
#    key's state shows each one; over it exactly the limit is allowed, the audit holds every
#    decision, the allowed ones saw remaining limit-1 .. 0 once each, and the stored state is
#    spent by exactly what was allowed;
#  - the drop-ins increment_rate_limit and check_rate_limit(p_key, ...) (sliding window), one key:
#    exactly the limit allowed, each call counted once;
#  - 64 clients over 10,000 keys on each engine: every key's stored state equals its audited
#    allowed calls, and each key allowed min(limit, its calls);
#  - the frozen clock never leaks to a transaction that did not set it.
# TAP output; exits non-zero if any check fails. Run as root from the repository root, with
# the extension installed and pgbouncer present (scripts/install-deps.sh installs it).
#   PGBOUNCER_MANY_CALLS   calls per client over the 10,000 keys (default 320: about 2 calls per key)
set -euo pipefail
cd "$(dirname "$0")/../.."
source scripts/cluster.sh

source scripts/tap.sh
# sql QUERY: straight to the server (not through pgbouncer).
sql() {
    psql -X -A -t -q -F ' ' -v ON_ERROR_STOP=1 -c "$1"
}
# sql_frozen QUERY: the same, with the clock the pgbench transactions froze.
sql_frozen() {
    psql -X -A -t -q -F ' ' -v ON_ERROR_STOP=1 -c "SET ratelimit.test_clock = '$frozen'" -c "$1"
}

pgbench_bin="$CLUSTER_BINDIR/pgbench"
pgbouncer_bin="$(command -v pgbouncer || echo /usr/sbin/pgbouncer)"
if [ ! -x "$pgbouncer_bin" ]; then
    echo "pgbouncer.sh: pgbouncer is not installed (scripts/install-deps.sh installs it)" >&2
    exit 1
fi

clients=64
jobs=4
pool_size=8
frozen='2100-01-01 00:30:00+00'
many_keys=10000
many_limit=2
many_calls="${PGBOUNCER_MANY_CALLS:-320}"

# ---- the cluster and pgbouncer ---------------------------------------------------------------

bouncer_dir=""
bouncer_stop() {
    if [ -z "$bouncer_dir" ]; then
        return 0
    fi
    local pid=""
    if [ -f "$bouncer_dir/pgbouncer.pid" ]; then
        pid="$(cat "$bouncer_dir/pgbouncer.pid")"
    fi
    if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then
        kill -TERM "$pid" 2>/dev/null || true
        for _ in $(seq 100); do
            kill -0 "$pid" 2>/dev/null || break
            sleep 0.1
        done
        if kill -0 "$pid" 2>/dev/null; then
            kill -KILL "$pid" 2>/dev/null || true
        fi
    fi
    rm -rf "$bouncer_dir"
    bouncer_dir=""
    echo "pgbouncer: stopped"
}

# Own config, user list, log and pid file in a temporary directory owned by postgres:
# pgbouncer refuses to run as root. It reaches the server on its Unix socket and listens on
# 127.0.0.1 only, on a free port; no Unix socket of its own.
bouncer_start() {
    bouncer_dir="$(mktemp -d /tmp/ratelimit-pgbouncer.XXXXXX)"
    bouncer_port="$(cluster_free_port)"
    cat >"$bouncer_dir/pgbouncer.ini" <<EOF
[databases]
postgres = host=$PGHOST port=$PGPORT dbname=postgres

[pgbouncer]
listen_addr = 127.0.0.1
listen_port = $bouncer_port
unix_socket_dir =
auth_type = trust
auth_file = $bouncer_dir/userlist.txt
admin_users = postgres
pool_mode = transaction
max_client_conn = 200
default_pool_size = $pool_size
min_pool_size = 0
reserve_pool_size = 0
max_db_connections = $pool_size
logfile = $bouncer_dir/pgbouncer.log
pidfile = $bouncer_dir/pgbouncer.pid
EOF
    echo '"postgres" ""' >"$bouncer_dir/userlist.txt"
    if [ "$(id -u)" -eq 0 ]; then
        chown -R postgres:postgres "$bouncer_dir"
    fi
    cluster_as_postgres "$pgbouncer_bin" -d -q "$bouncer_dir/pgbouncer.ini"
    for _ in $(seq 100); do
        if psql -X -A -t -q -h 127.0.0.1 -p "$bouncer_port" -U postgres -d postgres \
            -c "SELECT 1" >/dev/null 2>&1; then
            echo "pgbouncer: $("$pgbouncer_bin" --version | head -1) on port $bouncer_port," \
                "pool_mode = transaction, default_pool_size = $pool_size"
            return 0
        fi
        sleep 0.1
    done
    echo "pgbouncer: did not start:" >&2
    cat "$bouncer_dir/pgbouncer.log" >&2 || true
    return 1
}

cluster_start "shared_preload_libraries = 'ratelimit'" "ratelimit.memory_capacity = 100000" \
    "fsync = off"
trap 'bouncer_stop; cluster_stop' EXIT
bouncer_start
scripts_dir="$bouncer_dir/scripts"
mkdir -p "$scripts_dir"

sql "CREATE EXTENSION ratelimit"
# The endpoint limits' drop-ins in public, the sliding window's in a schema of its own (the
# convention for a database that holds several apps' drop-ins).
sql "CREATE EXTENSION ratelimit_endpoint_limits"
sql "CREATE SCHEMA sliding_window"
sql "CREATE EXTENSION ratelimit_sliding_window_limits SCHEMA sliding_window"
# Every decision of every case: allowed, and the count it reported (remaining for the native
# API, current for increment_rate_limit, current_count for the sliding-window check_rate_limit),
# and the backend that made it.
sql "CREATE TABLE rl_audit (case_name text NOT NULL, key text NOT NULL, allowed boolean NOT NULL,
                            reported integer, backend integer NOT NULL)" >/dev/null
sql "CREATE TABLE rl_clock_seen (backend integer NOT NULL, test_clock text)" >/dev/null

# bounce NAME SCRIPT TRANSACTIONS_PER_CLIENT: pgbench through pgbouncer, simple protocol (a
# transaction-mode pool keeps no prepared statements). Sets run_transactions and run_tps;
# fails the check (with the log) on a pgbench error, an aborted client or a failed transaction.
bounce() {
    local name="$1" script="$2" per_client="$3" log="$bouncer_dir/${1//[^A-Za-z0-9_.-]/_}.log"
    run_transactions=0
    run_tps=0
    if ! "$pgbench_bin" -n -M simple -h 127.0.0.1 -p "$bouncer_port" -U postgres \
        -c "$clients" -j "$jobs" -t "$per_client" -f "$script" postgres >"$log" 2>&1 ||
        grep -q "aborted" "$log" || grep -q "^number of failed transactions: [1-9]" "$log"; then
        ok 1 "$name: pgbench through pgbouncer ran without error"
        sed 's/^/#   /' "$log"
        return 1
    fi
    run_transactions="$(sed -n 's/^number of transactions actually processed: \([0-9]*\).*/\1/p' "$log")"
    run_tps="$(sed -n 's/^tps = \([0-9]*\).*/\1/p' "$log" | head -1)"
}

# memory_counts: the memory engine's "allowed denied evictions".
memory_counts() {
    sql "SELECT allowed, denied, evictions FROM ratelimit.memory_stats"
}

# ---- one key, every algorithm on every engine -------------------------------------------------

# consume_script CASE KEY LIMIT ALGORITHM ENGINE: one decision per transaction, audited.
consume_script() {
    local file="$scripts_dir/${1//[^A-Za-z0-9_.-]/_}.sql"
    cat >"$file" <<EOF
BEGIN;
SET LOCAL ratelimit.test_clock = '$frozen';
INSERT INTO rl_audit (case_name, key, allowed, reported, backend)
SELECT '$1', '$2', d.allowed, d.remaining, pg_backend_pid()
FROM ratelimit.consume('$2', $3, '1 hour', 1, p_algorithm => '$4', p_engine => '$5') AS d;
COMMIT;
EOF
    echo "$file"
}

# audit CASE: "rows allowed denied distinct_reported_among_allowed min max" of a case.
audit() {
    sql "SELECT count(*), count(*) FILTER (WHERE allowed), count(*) FILTER (WHERE NOT allowed),
                count(DISTINCT reported) FILTER (WHERE allowed),
                coalesce(min(reported) FILTER (WHERE allowed), -1),
                coalesce(max(reported) FILTER (WHERE allowed), -1)
         FROM rl_audit WHERE case_name = '$1'"
}

peek_remaining() {
    sql_frozen "SELECT remaining FROM ratelimit.peek('$1', $2, '1 hour', 1, p_algorithm => '$3',
                                                     p_engine => '$4')"
}

algorithms=(fixed_window rolling_window sliding_window sliding_window_counter token_bucket gcra)
engines=(table unlogged memory)
echo "# one key, $clients clients through $pool_size server connections, clock frozen at $frozen"
for engine in "${engines[@]}"; do
    for algorithm in "${algorithms[@]}"; do
        name="$algorithm/$engine"
        key="one:$algorithm:$engine"
        limit=100
        # The memory engine keeps sliding_window's log in its fixed slot: 6 entries at most.
        if [ "$engine" = memory ] && [ "$algorithm" = sliding_window ]; then
            limit=6
        fi
        transactions=0
        before_memory="$(memory_counts)"

        # Under the limit (where 64 calls fit): every call allowed, and the state shows each.
        if [ "$limit" -gt "$clients" ]; then
            script="$(consume_script "$name/under" "$key" "$limit" "$algorithm" "$engine")"
            bounce "$name under the limit" "$script" 1 || continue
            transactions=$((transactions + run_transactions))
            read -r rows allowed denied _ <<<"$(audit "$name/under")"
            remaining="$(peek_remaining "$key" "$limit" "$algorithm" "$engine")"
            is "transactions=$run_transactions audited=$rows allowed=$allowed remaining=$remaining" \
                "transactions=$clients audited=$clients allowed=$clients remaining=$((limit - clients))" \
                "$name: $clients calls under the limit of $limit: all allowed, all audited, the state spent by $clients"
        fi

        # Over the limit: exactly the limit, over all the calls of both runs.
        per_client=$((2 * limit / clients + 2))
        script="$(consume_script "$name/over" "$key" "$limit" "$algorithm" "$engine")"
        bounce "$name over the limit" "$script" "$per_client" || continue
        transactions=$((transactions + run_transactions))
        tps="$run_tps"
        read -r rows allowed denied distinct low high <<<"$(audit "$name/over")"
        read -r all_rows all_allowed _ <<<"$(sql "SELECT count(*), count(*) FILTER (WHERE allowed)
                                                 FROM rl_audit WHERE key = '$key'")"
        remaining="$(peek_remaining "$key" "$limit" "$algorithm" "$engine")"
        backends="$(sql "SELECT count(DISTINCT backend) FROM rl_audit WHERE key = '$key'")"
        is "transactions=$transactions audited=$all_rows allowed=$all_allowed state_spent=$((limit - remaining))" \
            "transactions=$transactions audited=$transactions allowed=$limit state_spent=$limit" \
            "$name: $transactions calls on one key, limit $limit: exactly $limit allowed, every decision audited, the state spent by exactly the allowed calls"
        # The allowed calls of this run saw remaining (limit - already spent - 1) down to 0,
        # each once: no two calls were given the same unit.
        first=$((limit - (all_allowed - allowed) - 1))
        is "distinct=$distinct range=$low..$high" "distinct=$allowed range=0..$first" \
            "$name: the allowed calls over the limit saw remaining $first down to 0, each once"
        if [ "$engine" = memory ]; then
            read -r a0 d0 e0 <<<"$before_memory"
            read -r a1 d1 e1 <<<"$(memory_counts)"
            is "allowed=$((a1 - a0)) denied=$((d1 - d0)) evictions=$((e1 - e0))" \
                "allowed=$all_allowed denied=$((all_rows - all_allowed)) evictions=0" \
                "$name: memory_stats counted the same allowed and denied calls as the audit"
        fi
        echo "# $name: $transactions transactions, $all_allowed allowed, $((all_rows - all_allowed)) denied," \
            "$backends server backends, $tps TPS (last run)"
    done
done

# ---- the drop-in functions, one key -----------------------------------------------------------

echo "# drop-in functions, one key"
drop_in_limit=100
drop_in_per_client=3
drop_in_calls=$((clients * drop_in_per_client))

user_id=3b0e9a52-1c7d-4f6e-8a2b-5d4c3b2a1f00
cat >"$scripts_dir/endpoint_limits.sql" <<EOF
BEGIN;
SET LOCAL ratelimit.test_clock = '$frozen';
INSERT INTO rl_audit (case_name, key, allowed, reported, backend)
SELECT 'endpoint_limits', 'endpoint_limits', (r ->> 'allowed')::boolean, (r ->> 'current')::integer, pg_backend_pid()
FROM increment_rate_limit('$user_id', 'pgbouncer', $drop_in_limit, 3600) AS r;
COMMIT;
EOF
if bounce "endpoint_limits" "$scripts_dir/endpoint_limits.sql" "$drop_in_per_client"; then
    read -r rows allowed denied distinct low high <<<"$(audit endpoint_limits)"
    # Every call counts (denied ones too): the calls saw current 1 .. calls, each once.
    counted="$(sql "SELECT coalesce(sum(counter), 0) || ' in ' || count(*) || ' row'
                    FROM rate_limits WHERE user_id = '$user_id' AND endpoint = 'pgbouncer'")"
    all_currents="$(sql "SELECT count(DISTINCT reported) || ' ' || min(reported) || '..' || max(reported)
                         FROM rl_audit WHERE case_name = 'endpoint_limits'")"
    is "transactions=$run_transactions audited=$rows allowed=$allowed counter=$counted currents=$all_currents" \
        "transactions=$drop_in_calls audited=$drop_in_calls allowed=$drop_in_limit counter=$drop_in_calls in 1 row currents=$drop_in_calls 1..$drop_in_calls" \
        "increment_rate_limit: $drop_in_calls calls, limit $drop_in_limit: exactly $drop_in_limit allowed, every call counted once"
    echo "# endpoint_limits: $run_transactions transactions, $allowed allowed, $denied denied, $run_tps TPS"
fi

cat >"$scripts_dir/sliding_window_limits.sql" <<EOF
BEGIN;
SET LOCAL ratelimit.test_clock = '$frozen';
INSERT INTO rl_audit (case_name, key, allowed, reported, backend)
SELECT 'sliding_window_limits', 'sliding_window_limits', c.allowed, c.current_count, pg_backend_pid()
FROM sliding_window.check_rate_limit(p_key => 'pgbouncer', p_limit => $drop_in_limit, p_window_seconds => 3600) AS c;
COMMIT;
EOF
if bounce "sliding_window_limits" "$scripts_dir/sliding_window_limits.sql" "$drop_in_per_client"; then
    read -r rows allowed denied distinct low high <<<"$(audit sliding_window_limits)"
    # Only allowed calls are recorded: they saw current_count 1 .. limit, each once.
    counted="$(sql "SELECT coalesce(sum(count), 0) FROM sliding_window.rate_limit_buckets WHERE key = 'pgbouncer'")"
    is "transactions=$run_transactions audited=$rows allowed=$allowed buckets=$counted counts=$distinct $low..$high" \
        "transactions=$drop_in_calls audited=$drop_in_calls allowed=$drop_in_limit buckets=$drop_in_limit counts=$drop_in_limit 1..$drop_in_limit" \
        "sliding-window check_rate_limit(p_key, p_limit, p_window_seconds): $drop_in_calls calls, limit $drop_in_limit: exactly $drop_in_limit allowed and recorded"
    echo "# sliding_window_limits: $run_transactions transactions, $allowed allowed, $denied denied, $run_tps TPS"
fi

# ---- 10,000 keys ------------------------------------------------------------------------------

echo "# $clients clients over $many_keys keys, limit $many_limit per key, $many_calls calls per client"
for engine in "${engines[@]}"; do
    name="many/$engine"
    prefix="many:$engine:"
    cat >"$scripts_dir/many-$engine.sql" <<EOF
\\set k random(1, $many_keys)
BEGIN;
SET LOCAL ratelimit.test_clock = '$frozen';
INSERT INTO rl_audit (case_name, key, allowed, reported, backend)
SELECT '$name', '$prefix' || :k, d.allowed, d.remaining, pg_backend_pid()
FROM ratelimit.consume('$prefix' || :k, $many_limit, '1 hour', p_engine => '$engine') AS d;
COMMIT;
EOF
    before_memory="$(memory_counts)"
    bounce "$name" "$scripts_dir/many-$engine.sql" "$many_calls" || continue
    # Per key: the audited calls and allowed calls, and the key's stored state (peek).
    read -r keys_called calls allowed wrong_allowed wrong_state <<<"$(sql_frozen "
        SELECT count(a.key), coalesce(sum(a.calls), 0), coalesce(sum(a.allowed), 0),
               count(*) FILTER (WHERE coalesce(a.allowed, 0) <> least($many_limit, coalesce(a.calls, 0))),
               count(*) FILTER (WHERE $many_limit - p.remaining <> coalesce(a.allowed, 0))
        FROM generate_series(1, $many_keys) AS g
        LEFT JOIN (SELECT key, count(*) AS calls, count(*) FILTER (WHERE allowed) AS allowed
                   FROM rl_audit WHERE case_name = '$name' GROUP BY key) AS a
               ON a.key = '$prefix' || g
        CROSS JOIN LATERAL ratelimit.peek('$prefix' || g, $many_limit, '1 hour',
                                          p_engine => '$engine') AS p")"
    is "transactions=$run_transactions audited=$calls wrong_allowed=$wrong_allowed wrong_state=$wrong_state" \
        "transactions=$((clients * many_calls)) audited=$((clients * many_calls)) wrong_allowed=0 wrong_state=0" \
        "$name: every one of $many_keys keys allowed min($many_limit, its calls) and its stored state equals its audited allowed calls"
    case "$engine" in
        table | unlogged)
            table=ratelimit.key_state
            [ "$engine" = unlogged ] && table=ratelimit.key_state_unlogged
            rows="$(sql "SELECT count(*) FROM $table WHERE key LIKE '$prefix%'")"
            is "$rows" "$keys_called" "$name: one state row for each of the $keys_called keys called"
            ;;
        memory)
            read -r a0 d0 e0 <<<"$before_memory"
            read -r a1 d1 e1 <<<"$(memory_counts)"
            is "allowed=$((a1 - a0)) denied=$((d1 - d0)) evictions=$((e1 - e0))" \
                "allowed=$allowed denied=$((calls - allowed)) evictions=0" \
                "$name: memory_stats counted the same allowed and denied calls as the audit"
            ;;
    esac
    echo "# $name: $run_transactions transactions on $keys_called keys, $allowed allowed," \
        "$((calls - allowed)) denied, $run_tps TPS"
done

# ---- pooling happened, and the frozen clock stayed in its transactions ------------------------

backends="$(sql "SELECT count(DISTINCT backend) FROM rl_audit")"
ok "$([ "$backends" -le "$pool_size" ] && echo 0 || echo 1)" \
    "$clients clients were served by $backends server backends (pool of $pool_size)"

cat >"$scripts_dir/clock_seen.sql" <<EOF
INSERT INTO rl_clock_seen SELECT pg_backend_pid(), current_setting('ratelimit.test_clock');
EOF
if bounce "clock" "$scripts_dir/clock_seen.sql" 5; then
    is "$(sql "SELECT count(*) || ' transactions, ' || count(*) FILTER (WHERE test_clock <> '')
                      || ' with a test clock' FROM rl_clock_seen")" \
        "$((clients * 5)) transactions, 0 with a test clock" \
        "SET LOCAL did not leak: no later transaction on the pooled connections sees the frozen clock"
fi

echo "# run time: ${SECONDS}s"
echo "1..$checks"
if [ "$failures" -gt 0 ]; then
    echo "# $failures of $checks checks failed"
    exit 1
fi
echo "# all $checks checks passed"
