#!/usr/bin/env bash
# The metrics as an operator scrapes them. Against the running throwaway cluster (PGHOST,
# PGPORT, PGUSER set by scripts/cluster.sh): known calls on three policies in a database of
# its own, then
#  1. ratelimit.metrics() parses as the Prometheus text format (promtool check metrics) and
#     holds the expected series and values;
#  2. the real prometheus-postgres-exporter, started with examples/prometheus/queries.yaml on a
#     loopback port, serves /metrics with the same counts;
#  3. the example alert rules, one set for each way of scraping, load, pass their rule tests
#     (promtool test rules), and read only series that way of scraping serves.
set -euo pipefail
cd "$(dirname "$0")/../.."

database=ratelimit_metrics
work="$(mktemp -d)"
exporter_pid=""
cleanup() {
    if [ -n "$exporter_pid" ]; then
        kill "$exporter_pid" 2>/dev/null || true
        wait "$exporter_pid" 2>/dev/null || true
    fi
    psql -X -q -c "DROP DATABASE IF EXISTS $database" >/dev/null 2>&1 || true
    rm -rf "$work"
}
trap cleanup EXIT

failures=0
# expect_line FILE LINE: the file holds exactly that line.
expect_line() {
    if grep -qxF -- "$2" "$1"; then
        echo "ok: $2"
    else
        echo "MISSING: $2"
        failures=$((failures + 1))
    fi
}

PGOPTIONS="-c client_min_messages=warning" psql -X -q -c "DROP DATABASE IF EXISTS $database" >/dev/null
psql -X -q -c "CREATE DATABASE $database" >/dev/null
psql -X -q -v ON_ERROR_STOP=1 -d "$database" >/dev/null <<'SQL'
CREATE EXTENSION ratelimit;
-- The clock stands still, so every count below is exact.
SET ratelimit.test_clock = '2026-03-01 10:00:00+00';
INSERT INTO ratelimit.policies (name, algorithm, "limit", period, engine, log_denials)
VALUES ('api.search', 'fixed_window', 10, '1 hour', 'memory', true),
       ('auth.login', 'sliding_window', 5, '15 minutes', 'table', false);
INSERT INTO ratelimit.policies (name, algorithm, "limit", period, engine, shadow)
VALUES ('api.export', 'fixed_window', 2, '1 hour', 'unlogged', true);
-- api.search: 12 calls, 10 allowed (the 9th and 10th near the limit at the default 0.8), 2
-- denied and logged; one more denial with the log's sampling at 0, so not logged.
SELECT ratelimit.check('api.search', 'u1') FROM generate_series(1, 12);
SET ratelimit.denial_log_sample_rate = 0;
SELECT ratelimit.check('api.search', 'u1');
RESET ratelimit.denial_log_sample_rate;
-- auth.login: 3 calls, none near its limit of 5.
SELECT ratelimit.check('auth.login', 'u1') FROM generate_series(1, 3);
-- api.export (shadow): 3 calls, the third over the limit but allowed.
SELECT ratelimit.check('api.export', 'u1') FROM generate_series(1, 3);
SQL

echo "-- ratelimit.metrics()"
psql -X -A -t -d "$database" -c "SELECT ratelimit.metrics()" >"$work/metrics.txt"
if promtool check metrics <"$work/metrics.txt"; then
    echo "ok: promtool check metrics"
else
    echo "FAILED: promtool check metrics"
    failures=$((failures + 1))
fi
for line in \
    "ratelimit_shared_memory_available 1" \
    "ratelimit_policy_decisions_total{database=\"$database\",policy=\"api.search\",outcome=\"allowed\"} 10" \
    "ratelimit_policy_decisions_total{database=\"$database\",policy=\"api.search\",outcome=\"denied\"} 3" \
    "ratelimit_policy_decisions_total{database=\"$database\",policy=\"api.search\",outcome=\"shadow_denied\"} 0" \
    "ratelimit_policy_near_limit_total{database=\"$database\",policy=\"api.search\"} 2" \
    "ratelimit_policy_denials_not_logged_total{database=\"$database\",policy=\"api.search\"} 1" \
    "ratelimit_policy_decisions_total{database=\"$database\",policy=\"auth.login\",outcome=\"allowed\"} 3" \
    "ratelimit_policy_near_limit_total{database=\"$database\",policy=\"auth.login\"} 0" \
    "ratelimit_policy_decisions_total{database=\"$database\",policy=\"api.export\",outcome=\"allowed\"} 2" \
    "ratelimit_policy_decisions_total{database=\"$database\",policy=\"api.export\",outcome=\"shadow_denied\"} 1" \
    "ratelimit_near_limit_ratio 0.8" \
    "ratelimit_memory_database_entries{database=\"$database\"} 1"; do
    expect_line "$work/metrics.txt" "$line"
done
# The store is the cluster's: other suites' keys may be in it, so only its shape is checked.
if grep -qE '^ratelimit_memory_capacity [0-9]+$' "$work/metrics.txt" &&
    grep -qE '^ratelimit_memory_refusals_total [0-9]+$' "$work/metrics.txt"; then
    echo "ok: the memory store's gauges and counters"
else
    echo "MISSING: the memory store's gauges and counters"
    failures=$((failures + 1))
fi

echo "-- prometheus-postgres-exporter"
port=""
for candidate in $(seq 19187 19287); do
    if ! (exec 3<>"/dev/tcp/127.0.0.1/$candidate") 2>/dev/null; then
        port="$candidate"
        break
    fi
done
if [ -z "$port" ]; then
    echo "FAILED: no free loopback port for the exporter"
    exit 1
fi
DATA_SOURCE_NAME="host=$PGHOST port=$PGPORT user=$PGUSER dbname=$database sslmode=disable" \
    prometheus-postgres-exporter --web.listen-address="127.0.0.1:$port" \
    --extend.query-path=examples/prometheus/queries.yaml --disable-default-metrics \
    --disable-settings-metrics >"$work/exporter.log" 2>&1 &
exporter_pid=$!
scraped=false
for _ in $(seq 1 100); do
    if curl -sf "http://127.0.0.1:$port/metrics" >"$work/scrape.txt" 2>/dev/null &&
        grep -q '^ratelimit_policy_allowed' "$work/scrape.txt"; then
        scraped=true
        break
    fi
    sleep 0.1
done
if ! $scraped; then
    echo "FAILED: the exporter served no ratelimit series; its log:"
    cat "$work/exporter.log"
    exit 1
fi
# The exporter prints labels in name order and adds the server it scraped.
server="$(sed -n 's/^ratelimit_policy_allowed{.*server="\([^"]*\)".*/\1/p' "$work/scrape.txt" | head -1)"
for sample in \
    "ratelimit_policy_allowed{database=\"$database\",policy=\"api.search\",server=\"$server\"} 10" \
    "ratelimit_policy_denied{database=\"$database\",policy=\"api.search\",server=\"$server\"} 3" \
    "ratelimit_policy_near_limit{database=\"$database\",policy=\"api.search\",server=\"$server\"} 2" \
    "ratelimit_policy_denials_not_logged{database=\"$database\",policy=\"api.search\",server=\"$server\"} 1" \
    "ratelimit_policy_shadow_denied{database=\"$database\",policy=\"api.export\",server=\"$server\"} 1" \
    "ratelimit_policy_allowed{database=\"$database\",policy=\"auth.login\",server=\"$server\"} 3"; do
    expect_line "$work/scrape.txt" "$sample"
done
if grep -qE "^ratelimit_memory_capacity\{server=\"$server\"\} [0-9.e+]+$" "$work/scrape.txt" &&
    grep -qE "^ratelimit_memory_refusals\{server=\"$server\"\} [0-9.e+]+$" "$work/scrape.txt"; then
    echo "ok: the exporter's memory store series"
else
    echo "MISSING: the exporter's memory store series"
    failures=$((failures + 1))
fi

echo "-- alert rules, one set per way of scraping"
# rules_fit RULES SCRAPE: every series the rules read is one the scrape serves, so that the rules
# can fire on what that way of scraping gives.
rules_fit() {
    local series missing=0
    for series in $(grep -oE 'ratelimit_[a-z_]+' "$1" | sort -u); do
        if ! grep -qE "^$series(\{| )" "$2"; then
            echo "MISSING: $1 reads $series, which $(basename "$2") does not serve"
            missing=1
        fi
    done
    return $missing
}
for set in metrics:metrics.txt exporter:scrape.txt; do
    rules="examples/prometheus/alerts_${set%%:*}.yml"
    if promtool check rules "$rules" &&
        (cd examples/prometheus && promtool test rules "alerts_${set%%:*}_test.yml") &&
        rules_fit "$rules" "$work/${set#*:}"; then
        echo "ok: $rules load, pass their tests and read only series the scrape serves"
    else
        echo "FAILED: $rules"
        failures=$((failures + 1))
    fi
done

if [ "$failures" -gt 0 ]; then
    echo "metrics: $failures failed"
    exit 1
fi
echo "metrics: all passed"
