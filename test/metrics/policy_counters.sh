#!/usr/bin/env bash
# The per-policy counters when they run out, on a cluster of its own with room for 64
# (ratelimit.policy_counters = 64; each database may hold half of them, the default share):
#  - a database with more policies than its share counts the rest as "not counted" (one row
#    for their calls, one row per policy without a counter), in policy_stats and metrics();
#  - it cannot take the counters of another database, which still counts every policy;
#  - reset_policy_stats gives its counters back; deleting policies frees theirs when room is
#    needed; a dropped database's counters go to the next database that needs them.
# Run as root from the repository root, with the extension installed (test/run.sh does both).
set -euo pipefail
cd "$(dirname "$0")/../.."
source scripts/cluster.sh
source scripts/tap.sh

sql() {
    psql -X -A -t -q -F ' ' -v ON_ERROR_STOP=1 -c "$1"
}
# policies DB PREFIX N: N policies PREFIX1..PREFIXN in DB, each called once.
policies() {
    PGDATABASE="$1" sql "INSERT INTO ratelimit.policies (name, \"limit\", period)
                         SELECT '$2' || i, 10, '1 minute' FROM generate_series(1, $3) AS i" >/dev/null
    for i in $(seq 1 "$3"); do echo "SELECT ratelimit.check('$2$i', 'k');"; done |
        PGDATABASE="$1" psql -X -q -v ON_ERROR_STOP=1 >/dev/null
}

cluster_start "shared_preload_libraries = 'ratelimit'" "ratelimit.policy_counters = 64" \
    "fsync = off" >/dev/null
for database in alpha beta gamma; do
    sql "CREATE DATABASE $database" >/dev/null
    PGDATABASE=$database sql "CREATE EXTENSION ratelimit"
done

echo "# one database past its share"
policies alpha p 40
is "$(PGDATABASE=alpha sql "SELECT count(*) FILTER (WHERE counted), sum(allowed) FILTER (WHERE counted) FROM ratelimit.policy_stats")" \
    "32 32" "alpha counts 32 policies, its share of 64"
is "$(PGDATABASE=alpha sql "SELECT allowed, denied, shadow_denied FROM ratelimit.policy_stats WHERE NOT counted AND policy IS NULL")" \
    "8 0 0" "the 8 calls of the other policies are counted as not counted, by outcome"
is "$(PGDATABASE=alpha sql "SELECT count(*), count(allowed) FROM ratelimit.policy_stats WHERE NOT counted AND policy IS NOT NULL")" \
    "8 0" "each policy without a counter has a row that says so (its counts NULL)"
metrics="$(PGDATABASE=alpha sql "SELECT ratelimit.metrics()")"
ok "$(grep -qxF 'ratelimit_policy_decisions_not_counted_total{database="alpha",outcome="allowed"} 8' <<<"$metrics"; echo $?)" \
    "metrics() has the calls not counted"
ok "$(grep -qxF 'ratelimit_policies_not_counted{database="alpha"} 8' <<<"$metrics"; echo $?)" \
    "and the policies without a counter"
is "$(grep -c '^ratelimit_policy_decisions_total{database="alpha"' <<<"$metrics")" "96" \
    "and the 32 counted policies' decisions, three outcomes each"

echo "# another database keeps counting"
policies beta q 5
is "$(PGDATABASE=beta sql "SELECT count(*) FILTER (WHERE counted), count(*) FILTER (WHERE NOT counted) FROM ratelimit.policy_stats")" \
    "5 0" "beta counts all of its 5 policies: alpha could not take its counters"
PGDATABASE=beta sql "SELECT ratelimit.check('q1', 'k')" >/dev/null
is "$(PGDATABASE=beta sql "SELECT allowed FROM ratelimit.policy_stats WHERE policy = 'q1'")" "2" \
    "and counts on"

echo "# counters given back"
PGDATABASE=alpha sql "DELETE FROM ratelimit.policies WHERE name IN (SELECT policy FROM ratelimit.policy_stats WHERE counted ORDER BY policy LIMIT 10)" >/dev/null
uncounted="$(PGDATABASE=alpha sql "SELECT string_agg(policy, ' ' ORDER BY policy) FROM ratelimit.policy_stats WHERE NOT counted AND policy IS NOT NULL")"
for policy in $uncounted; do PGDATABASE=alpha sql "SELECT ratelimit.check('$policy', 'k')" >/dev/null; done
is "$(PGDATABASE=alpha sql "SELECT count(*) FILTER (WHERE counted), count(*) FILTER (WHERE NOT counted AND policy IS NOT NULL) FROM ratelimit.policy_stats")" \
    "30 0" "after 10 policies are deleted, the 8 without a counter get one (the deleted ones' are taken back)"
PGDATABASE=alpha sql "SELECT ratelimit.reset_policy_stats()" >/dev/null
is "$(PGDATABASE=alpha sql "SELECT count(*) FROM ratelimit.policy_stats")" "0" \
    "reset_policy_stats gives back every counter of the database (no row is left)"
policies alpha r 32
is "$(PGDATABASE=alpha sql "SELECT count(*) FILTER (WHERE counted), count(*) FILTER (WHERE NOT counted) FROM ratelimit.policy_stats")" \
    "32 0" "so 32 policies count again from zero"

echo "# a dropped database's counters"
policies beta s 27
is "$(PGDATABASE=beta sql "SELECT count(*) FILTER (WHERE counted) FROM ratelimit.policy_stats")" "32" \
    "beta holds its 32: all 64 counters are taken"
policies gamma t 3
is "$(PGDATABASE=gamma sql "SELECT count(*) FILTER (WHERE counted), count(*) FILTER (WHERE NOT counted AND policy IS NOT NULL) FROM ratelimit.policy_stats")" \
    "0 3" "gamma finds no counter while every one is taken"
sql "DROP DATABASE beta" >/dev/null
PGDATABASE=gamma sql "SELECT ratelimit.reset_policy_stats()" >/dev/null
for i in 1 2 3; do PGDATABASE=gamma sql "SELECT ratelimit.check('t$i', 'k')" >/dev/null; done
is "$(PGDATABASE=gamma sql "SELECT count(*) FILTER (WHERE counted), count(*) FILTER (WHERE NOT counted) FROM ratelimit.policy_stats")" \
    "3 0" "once beta is dropped, its counters go to gamma"

echo "1..$checks"
cluster_stop
if [ "$failures" -gt 0 ]; then
    echo "policy counters: $failures of $checks failed"
    exit 1
fi
echo "policy counters: all $checks passed"
