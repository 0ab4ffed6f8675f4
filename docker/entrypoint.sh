#!/usr/bin/env bash
# Initializes the cluster on first start (pg_cron and ratelimit preloaded, the latter for its
# memory engine; ratelimit created in the postgres database), then runs PostgreSQL in the
# foreground.
set -euo pipefail
bindir="$(pg_config --bindir)"

if [ ! -s "$PGDATA/PG_VERSION" ]; then
    pwfile="$(mktemp)"
    printf '%s\n' "${POSTGRES_PASSWORD:?set POSTGRES_PASSWORD}" >"$pwfile"
    "$bindir/initdb" -D "$PGDATA" -U postgres --pwfile="$pwfile" --auth-host=scram-sha-256 \
        --auth-local=trust -E UTF8
    rm -f "$pwfile"
    {
        echo "listen_addresses = '*'"
        echo "shared_preload_libraries = 'pg_cron,ratelimit'"
        echo "cron.database_name = 'postgres'"
    } >>"$PGDATA/postgresql.conf"
    echo "host all all 0.0.0.0/0 scram-sha-256" >>"$PGDATA/pg_hba.conf"
    "$bindir/pg_ctl" -D "$PGDATA" -w start -o "-c listen_addresses=''"
    psql -X -v ON_ERROR_STOP=1 -U postgres -d postgres \
        -c "CREATE EXTENSION ratelimit" -c "CREATE EXTENSION pg_cron" -c "CREATE EXTENSION pgtap"
    "$bindir/pg_ctl" -D "$PGDATA" -m fast -w stop
fi

exec "$bindir/postgres" -D "$PGDATA"
