# Throwaway PostgreSQL clusters for the demo, the tests and the benchmarks. Source this file.
#
# PostgreSQL refuses to run as root, so the server runs as the `postgres` OS user, in a
# directory under /tmp that it owns, on its own port and socket directory. cluster_start
# installs an EXIT trap that stops the server, also when the calling script fails.
#
#   cluster_start [extra postgresql.conf line ...]
#       sets CLUSTER_DIR, PGHOST (the socket directory), PGPORT, PGUSER, PGDATABASE
#   cluster_stop
#   cluster_restart [pg_ctl stop mode]
#   cluster_server_stop [pg_ctl stop mode], cluster_server_start: the server only

CLUSTER_BINDIR="$(pg_config --bindir)"

cluster_as_postgres() {
    if [ "$(id -u)" -eq 0 ]; then
        runuser -u postgres -- "$@"
    else
        "$@"
    fi
}

cluster_free_port() {
    local port
    for port in $(seq 54330 54399); do
        if ! (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
            echo "$port"
            return 0
        fi
    done
    echo "cluster: no free port in 54330-54399" >&2
    return 1
}

cluster_start() {
    CLUSTER_DIR="$(mktemp -d /tmp/ratelimit-cluster.XXXXXX)"
    chmod 755 "$CLUSTER_DIR"
    mkdir -p "$CLUSTER_DIR/socket"
    if [ "$(id -u)" -eq 0 ]; then
        chown -R postgres:postgres "$CLUSTER_DIR"
    fi
    PGPORT="$(cluster_free_port)"
    trap cluster_stop EXIT

    cluster_as_postgres "$CLUSTER_BINDIR/initdb" -D "$CLUSTER_DIR/data" -U postgres \
        --auth=trust --no-sync -E UTF8 --locale=C >"$CLUSTER_DIR/initdb.log" 2>&1 || {
        cat "$CLUSTER_DIR/initdb.log" >&2
        return 1
    }
    {
        echo "port = $PGPORT"
        echo "listen_addresses = '127.0.0.1'"
        echo "unix_socket_directories = '$CLUSTER_DIR/socket'"
        echo "max_connections = 300"
        echo "shared_buffers = 256MB"
        echo "log_min_messages = warning"
        local line
        for line in "$@"; do
            echo "$line"
        done
    } >>"$CLUSTER_DIR/data/postgresql.conf"

    # A port free when looked at can be taken by another server before this one binds it: then
    # the next free port is tried (the last "port =" line of the file wins).
    local attempt
    for attempt in 1 2 3 4 5; do
        if cluster_as_postgres "$CLUSTER_BINDIR/pg_ctl" -D "$CLUSTER_DIR/data" \
            -l "$CLUSTER_DIR/server.log" -w -t 60 start >/dev/null; then
            break
        fi
        if [ "$attempt" -eq 5 ] || ! grep -q 'could not bind\|could not create any TCP/IP sockets' "$CLUSTER_DIR/server.log"; then
            cat "$CLUSTER_DIR/server.log" >&2
            return 1
        fi
        sleep 1
        PGPORT="$(cluster_free_port)"
        echo "port = $PGPORT" >>"$CLUSTER_DIR/data/postgresql.conf"
    done
    export PGHOST="$CLUSTER_DIR/socket" PGPORT PGUSER=postgres PGDATABASE=postgres
    echo "cluster: PostgreSQL running in $CLUSTER_DIR on port $PGPORT"
}

# The server alone, its cluster kept: for tests that stop, restart or crash it.
cluster_server_start() {
    cluster_as_postgres "$CLUSTER_BINDIR/pg_ctl" -D "$CLUSTER_DIR/data" \
        -l "$CLUSTER_DIR/server.log" -w -t 60 start >/dev/null || {
        cat "$CLUSTER_DIR/server.log" >&2
        return 1
    }
}

cluster_server_stop() {
    cluster_as_postgres "$CLUSTER_BINDIR/pg_ctl" -D "$CLUSTER_DIR/data" -m "${1:-fast}" -w stop \
        >/dev/null
}

cluster_restart() {
    cluster_server_stop "${1:-fast}"
    cluster_server_start
}

cluster_stop() {
    if [ -n "${CLUSTER_DIR:-}" ] && [ -d "$CLUSTER_DIR/data" ]; then
        cluster_as_postgres "$CLUSTER_BINDIR/pg_ctl" -D "$CLUSTER_DIR/data" -m fast -w stop \
            >/dev/null 2>&1 || true
        rm -rf "$CLUSTER_DIR"
        echo "cluster: stopped"
    fi
    CLUSTER_DIR=""
}
