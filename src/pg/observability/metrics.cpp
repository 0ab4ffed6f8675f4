// ratelimit.metrics(): this database's policy counters and the memory engine's store in the
// Prometheus text format, for a scraper that runs SQL (or a sidecar that serves the text).
// Counters and gauges only; nothing here decides or writes anything.
#include <cstdint>
#include <string>
#include <vector>

#include "pg/policies/denial_queue.hpp"
#include "pg/bridge/extension_schema.hpp"
#include "pg/bridge/guard.hpp"
#include "pg/engines/memory_engine.hpp"
#include "pg/engines/memory_wal.hpp"
#include "pg/policies/policy_counters.hpp"
#include "pg/bridge/postgres.hpp"
#include "pg/bridge/result_row.hpp"
#include "ratelimit/metrics_text.hpp"

extern "C" {
#include "commands/dbcommands.h"
#include "utils/lsyscache.h"
}

namespace ratelimit::pg {
namespace {

using Type = MetricsText::Type;

// Calls of this database's policies that found no counter (ratelimit.policy_counters full, or
// the database's share): their outcomes, and how many policies have no counter then.
void uncounted_metrics(const std::string& database, const std::vector<PolicyCounts>& rows,
                       MetricsText& text) {
    text.family("ratelimit_policy_decisions_not_counted_total", Type::kCounter,
                "Calls of this database's policies that found no per-policy counter "
                "(ratelimit.policy_counters, ratelimit.policy_counters_database_share), by "
                "outcome.");
    std::int64_t policies_without = 0;
    PolicyCounts uncounted;
    for (const PolicyCounts& row : rows) {
        if (row.counted)
            continue;
        if (row.has_counts)
            uncounted = row;
        else
            ++policies_without;
    }
    const std::pair<const char*, std::int64_t> outcomes[] = {
        {"allowed", uncounted.allowed},
        {"denied", uncounted.denied},
        {"shadow_denied", uncounted.shadow_denied}};
    for (const auto& [outcome, value] : outcomes) {
        text.sample("ratelimit_policy_decisions_not_counted_total",
                    {{"database", database}, {"outcome", outcome}}, value);
    }
    text.family("ratelimit_policies_not_counted", Type::kGauge,
                "Policies of this database without a counter while some of its calls found "
                "none.");
    text.sample("ratelimit_policies_not_counted", {{"database", database}}, policies_without);
    text.family("ratelimit_policy_decisions_not_counted_elsewhere_total", Type::kCounter,
                "Calls that found no counter in databases past the 128 counted apart, all "
                "databases together.");
    text.sample("ratelimit_policy_decisions_not_counted_elsewhere_total", {},
                uncounted_elsewhere());
}

void policy_metrics(const std::string& database, const std::vector<PolicyCounts>& all,
                    MetricsText& text) {
    std::vector<PolicyCounts> counts;
    for (const PolicyCounts& row : all) {
        if (row.counted)
            counts.push_back(row);
    }
    uncounted_metrics(database, all, text);
    text.family("ratelimit_policy_decisions_total", Type::kCounter,
                "Calls each policy decided in this database, by outcome (allowed, denied, "
                "shadow_denied), since the policy's counters started.");
    for (const PolicyCounts& row : counts) {
        const std::pair<const char*, std::int64_t> outcomes[] = {
            {"allowed", row.allowed}, {"denied", row.denied}, {"shadow_denied", row.shadow_denied}};
        for (const auto& [outcome, value] : outcomes) {
            text.sample("ratelimit_policy_decisions_total",
                        {{"database", database}, {"policy", row.policy}, {"outcome", outcome}},
                        value);
        }
    }
    text.family("ratelimit_policy_near_limit_total", Type::kCounter,
                "Allowed calls that left the key with more than ratelimit.near_limit_ratio of "
                "the policy's limit used.");
    for (const PolicyCounts& row : counts) {
        text.sample("ratelimit_policy_near_limit_total",
                    {{"database", database}, {"policy", row.policy}}, row.near_limit);
    }
    text.family("ratelimit_policy_denials_not_logged_total", Type::kCounter,
                "Denials of log_denials policies that the denial log did not record (sampled "
                "out, or the log is off).");
    for (const PolicyCounts& row : counts) {
        text.sample("ratelimit_policy_denials_not_logged_total",
                    {{"database", database}, {"policy", row.policy}}, row.denials_not_logged);
    }
    text.family("ratelimit_policy_counting_since_seconds", Type::kGauge,
                "When the policy's counters started (its first call, or reset_policy_stats()), "
                "in Unix seconds.");
    for (const PolicyCounts& row : counts) {
        text.sample("ratelimit_policy_counting_since_seconds",
                    {{"database", database}, {"policy", row.policy}},
                    static_cast<double>(row.since) / 1e6);
    }
    text.family("ratelimit_near_limit_ratio", Type::kGauge,
                "The ratelimit.near_limit_ratio setting of this session.");
    text.sample("ratelimit_near_limit_ratio", {}, near_limit_ratio());
}

// The denial log's queue (pg/policies/denial_queue.hpp), all databases.
void denial_queue_metrics(MetricsText& text) {
    const DenialQueueStats stats = denial_queue_stats();
    text.family("ratelimit_denial_queue_capacity", Type::kGauge,
                "Denials the denial log's queue can hold (ratelimit.denial_queue_size).");
    text.sample("ratelimit_denial_queue_capacity", {}, stats.capacity);
    text.family("ratelimit_denial_queue_queued", Type::kGauge,
                "Denials in the queue now: held by open transactions, or waiting for a writer.");
    text.sample("ratelimit_denial_queue_queued", {}, stats.queued);
    text.family("ratelimit_denial_queue_full_total", Type::kCounter,
                "Denials the queue could not hold (counted as not logged unless the transaction "
                "that denied wrote them and committed).");
    text.sample("ratelimit_denial_queue_full_total", {}, stats.full);
    text.family("ratelimit_denial_queue_written_total", Type::kCounter,
                "Denial log rows the queue's writers wrote, for transactions that did not.");
    text.sample("ratelimit_denial_queue_written_total", {}, stats.written);
}

void memory_metrics(const std::string& database, MetricsText& text) {
    std::int64_t shared_bytes = 0;
    const MemoryStats stats = memory_stats(&shared_bytes);
    const std::pair<const char*, std::int64_t> gauges[] = {
        {"ratelimit_memory_entries", stats.entries},
        {"ratelimit_memory_capacity", stats.capacity},
        {"ratelimit_memory_full_partitions", stats.full_partitions},
        {"ratelimit_memory_log_blocks", stats.log_blocks},
        {"ratelimit_memory_log_blocks_used", stats.log_blocks_used},
        {"ratelimit_memory_shared_bytes", shared_bytes}};
    const char* gauge_help[] = {
        "Keys the memory engine holds, all databases.",
        "Keys the memory engine can hold (ratelimit.memory_capacity).",
        "Partitions whose last look for a new key's slot found none free or expired.",
        "Log blocks for sliding_window logs longer than a slot holds.",
        "Log blocks in use.",
        "Bytes of shared memory the store takes."};
    for (std::size_t i = 0; i < std::size(gauges); ++i) {
        text.family(gauges[i].first, Type::kGauge, gauge_help[i]);
        text.sample(gauges[i].first, {}, gauges[i].second);
    }
    const std::pair<const char*, std::int64_t> counters[] = {
        {"ratelimit_memory_evictions_total", stats.evictions},
        {"ratelimit_memory_expired_total", stats.expired},
        {"ratelimit_memory_refusals_total", stats.refusals},
        {"ratelimit_memory_allowed_total", stats.allowed},
        {"ratelimit_memory_denied_total", stats.denied}};
    const char* counter_help[] = {
        "Keys taken from the store before they had expired (ratelimit.memory_when_full = evict).",
        "Slots freed because their key had expired.",
        "Calls refused for lack of room (a slot, the database's share, a log block).",
        "Memory-engine consume calls allowed, all databases, since the server started.",
        "Memory-engine consume calls denied, refusals included."};
    for (std::size_t i = 0; i < std::size(counters); ++i) {
        text.family(counters[i].first, Type::kCounter, counter_help[i]);
        text.sample(counters[i].first, {}, counters[i].second);
    }
    // The WAL's side, with ratelimit.memory_wal on.
    const MemoryWalStatus wal = memory_wal_status();
    if (wal.enabled) {
        text.family("ratelimit_memory_wal_worker_running", Type::kGauge,
                    "1 while the memory engine's WAL worker runs: without it, checkpoints do not "
                    "wait for the keys.");
        text.sample("ratelimit_memory_wal_worker_running", {},
                    static_cast<std::int64_t>(wal.worker_running ? 1 : 0));
        text.family(
            "ratelimit_memory_wal_worker_starts_total", Type::kCounter,
            "Times the WAL worker started: more than one means it was ended and came back.");
        text.sample("ratelimit_memory_wal_worker_starts_total", {}, wal.worker_starts);
    }
    text.family("ratelimit_memory_replay_unplaced_total", Type::kCounter,
                "Replayed keys the store had no room for (a standby smaller than its primary).");
    text.sample("ratelimit_memory_replay_unplaced_total", {}, wal.replay_unplaced);
    // This database's own row of the store's table, when it has one.
    std::vector<MemoryDatabaseStats> rows(kMaxMemoryDatabases);
    std::int64_t share_limit = 0;
    const int count = memory_database_stats(rows.data(), &share_limit);
    for (int i = 0; i < count; ++i) {
        if (rows[i].oid != MyDatabaseId)
            continue;
        text.family("ratelimit_memory_database_entries", Type::kGauge,
                    "Keys this database holds in the memory engine.");
        text.sample("ratelimit_memory_database_entries", {{"database", database}}, rows[i].entries);
        text.family("ratelimit_memory_database_share_limit", Type::kGauge,
                    "The most keys one database may hold (ratelimit.memory_database_share).");
        text.sample("ratelimit_memory_database_share_limit", {{"database", database}}, share_limit);
        text.family("ratelimit_memory_database_refusals_total", Type::kCounter,
                    "This database's calls refused for lack of room.");
        text.sample("ratelimit_memory_database_refusals_total", {{"database", database}},
                    rows[i].refusals);
        text.family("ratelimit_memory_database_evictions_total", Type::kCounter,
                    "This database's keys taken before they had expired.");
        text.sample("ratelimit_memory_database_evictions_total", {{"database", database}},
                    rows[i].evictions);
    }
}

Datum metrics_body(FunctionCallInfo) {
    std::string database;
    Oid schema = InvalidOid;
    call_postgres([&] {
        schema = extension_schema();
        const char* name = get_database_name(MyDatabaseId);
        database = name != nullptr ? name : "";
    });
    MetricsText text;
    std::vector<PolicyCounts> counts;
    // The counters and the store live in shared memory: both exist only when the library was
    // preloaded, and then both do.
    const bool preloaded = read_policy_counts(schema, &counts);
    text.family("ratelimit_shared_memory_available", Type::kGauge,
                "1 when ratelimit is in shared_preload_libraries (policy counters and the memory "
                "engine exist), else 0.");
    text.sample("ratelimit_shared_memory_available", {}, std::int64_t{preloaded ? 1 : 0});
    if (preloaded) {
        policy_metrics(database, counts, text);
        denial_queue_metrics(text);
        memory_metrics(database, text);
    }
    return text_datum(text.text());
}

}  // namespace
}  // namespace ratelimit::pg

RATELIMIT_SQL_FUNCTION(ratelimit_metrics, ratelimit::pg::metrics_body)
