# Throwaway clusters for the router's tests and benchmark: one router and its shards, each a
# PostgreSQL server of its own (as the `postgres` OS user, under /tmp, own port and socket
# directory). Source after scripts/cluster.sh.
#
#   router_cluster_start NAME [extra postgresql.conf line ...]
#       starts a server; router_cluster_dir/port NAME tell where it is
#   router_cluster_stop NAME [mode], router_cluster_resume NAME: the server only
#   router_clusters_stop_all: stops and removes every server started here (the EXIT trap)

ROUTER_CLUSTERS_ROOT="$(mktemp -d /tmp/ratelimit-router.XXXXXX)"
chmod 755 "$ROUTER_CLUSTERS_ROOT"
[ "$(id -u)" -eq 0 ] && chown postgres:postgres "$ROUTER_CLUSTERS_ROOT"
trap router_clusters_stop_all EXIT

router_cluster_dir() { echo "$ROUTER_CLUSTERS_ROOT/$1"; }
router_cluster_port() { cat "$ROUTER_CLUSTERS_ROOT/$1/port"; }

router_cluster_start() {
    local name="$1"
    shift
    local dir="$ROUTER_CLUSTERS_ROOT/$name"
    cluster_as_postgres mkdir -p "$dir/socket"
    cluster_as_postgres "$CLUSTER_BINDIR/initdb" -D "$dir/data" -U postgres --auth=trust \
        --no-sync -E UTF8 --locale=C >"$dir.initdb.log" 2>&1 || {
        cat "$dir.initdb.log" >&2
        return 1
    }
    local line
    {
        echo "listen_addresses = '127.0.0.1'"
        echo "unix_socket_directories = '$dir/socket'"
        echo "max_connections = 200"
        echo "shared_buffers = 128MB"
        echo "fsync = off"
        echo "log_min_messages = warning"
        for line in "$@"; do echo "$line"; done
    } | cluster_as_postgres tee -a "$dir/data/postgresql.conf" >/dev/null
    # Another cluster on this machine may take the port between the check and the start.
    local attempt port
    for attempt in 1 2 3 4 5; do
        port="$(cluster_free_port)"
        echo "port = $port" | cluster_as_postgres tee "$dir/data/port.conf" >/dev/null
        grep -q "include_if_exists = 'port.conf'" "$dir/data/postgresql.conf" ||
            echo "include_if_exists = 'port.conf'" | cluster_as_postgres tee -a "$dir/data/postgresql.conf" >/dev/null
        echo "$port" | cluster_as_postgres tee "$dir/port" >/dev/null
        if router_cluster_resume "$name" 2>/dev/null; then
            return 0
        fi
        sleep 0.$((RANDOM % 9 + 1))
    done
    cat "$dir/server.log" >&2
    return 1
}

router_cluster_resume() {
    local dir="$ROUTER_CLUSTERS_ROOT/$1"
    cluster_as_postgres "$CLUSTER_BINDIR/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w -t 60 \
        start >/dev/null
}

router_cluster_stop() {
    local dir="$ROUTER_CLUSTERS_ROOT/$1"
    cluster_as_postgres "$CLUSTER_BINDIR/pg_ctl" -D "$dir/data" -m "${2:-fast}" -w stop >/dev/null
}

# The postmaster's process id, for SIGSTOP and SIGCONT.
router_cluster_pid() {
    head -1 "$ROUTER_CLUSTERS_ROOT/$1/data/postmaster.pid"
}

router_clusters_stop_all() {
    local dir
    [ -d "${ROUTER_CLUSTERS_ROOT:-}" ] || return 0
    for dir in "$ROUTER_CLUSTERS_ROOT"/*/; do
        [ -f "$dir/data/postmaster.pid" ] || continue
        # A frozen server must be thawed before it can stop.
        kill -CONT "$(head -1 "$dir/data/postmaster.pid")" 2>/dev/null || true
        pkill -CONT -P "$(head -1 "$dir/data/postmaster.pid")" 2>/dev/null || true
        cluster_as_postgres "$CLUSTER_BINDIR/pg_ctl" -D "$dir/data" -m immediate -w stop \
            >/dev/null 2>&1 || true
    done
    rm -rf "$ROUTER_CLUSTERS_ROOT"
}

# psql against one of them: router_psql NAME [psql args...]
router_psql() {
    local name="$1"
    shift
    psql -X -q -v ON_ERROR_STOP=1 -h "$ROUTER_CLUSTERS_ROOT/$name/socket" \
        -p "$(router_cluster_port "$name")" -U postgres -d postgres "$@"
}
