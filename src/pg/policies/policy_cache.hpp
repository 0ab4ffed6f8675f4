// The policy tables (ratelimit.policies, tiers, key_overrides, access_list) as this backend's
// cache, for the policy calls to decide without reading a table; with them the secret of the
// partition keys (ratelimit.partition_key_secret), kept exact the same way.
//
// Exactness, as PostgreSQL's own caches are kept:
//  - A statement that changes any of these tables queues a relcache invalidation of that
//    table (the trigger ratelimit.policy_tables_changed). PostgreSQL sends it to every backend
//    when the transaction commits, before COMMIT returns, and replays it in the editing backend
//    after each command and on rollback; a transaction that rolls back sends nothing out.
//  - Every policy call first takes in the invalidations queued for this backend; one that names
//    a policy table (or a reset of every cache, after a queue overflow) drops the whole cache.
//  - A dropped cache is read again with a snapshot taken after those invalidations, so it holds
//    at least every edit committed before the call began; an invalidation arriving while it is
//    read drops it again for the next call.
//  - DROP EXTENSION drops the tables, which invalidates them; the next call looks the tables up
//    again by name in the calling function's schema, so a re-created extension is read afresh.
// The rows are read with the heap functions, not SQL, so neither the caller's privileges nor
// its search_path are involved.
#pragma once

#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "pg/bridge/calendar_window.hpp"
#include "pg/bridge/postgres.hpp"
#include "ratelimit/policy.hpp"

namespace ratelimit::pg {

// A policy with a calendar period: its unit and the zone its midnights are in (the
// time_zone column, or UTC), looked up when the row is read.
struct CalendarPolicy {
    CalendarUnit unit = CalendarUnit::kNone;
    pg_tz* zone = nullptr;
};

// The functions a policy asks, for each key, for the key's tier and limit (the tier_lookup and
// limit_lookup columns).
struct PolicyLookups {
    // Each function's signature, qualified with its schema; empty when the policy has none.
    // Looked up by name at each call, so a function made again is found.
    std::string tier;
    std::string limit;
};

struct PolicyCatalog {
    std::unordered_map<std::string, PolicyRule> policies;
    std::unordered_map<std::string, TierRule> tiers;
    // Keyed by policy + '\0' + key (neither holds a NUL).
    std::unordered_map<std::string, KeyOverrideRule> overrides;
    std::vector<AccessEntry> access_list;
    // A policy's quota unit (the quota_unit column), for the policies that have one.
    std::unordered_map<std::string, std::string> quota_units;
    // The policies with a calendar period.
    std::unordered_map<std::string, CalendarPolicy> calendars;
    // A policy's reset_jitter, for the policies that have one above 0.
    std::unordered_map<std::string, Micros> reset_jitters;
    // The key of the pk parameter's hash; empty when the table has no row.
    std::string partition_secret;
    // A policy's lookups (tier_lookup, limit_lookup), for the policies that have one.
    std::unordered_map<std::string, PolicyLookups> lookups;

    const PolicyRule* policy(std::string_view name) const;
    const TierRule* tier(std::string_view name) const;
    const KeyOverrideRule* key_override(std::string_view policy, std::string_view key) const;
    const std::string* quota_unit(std::string_view policy) const;
    const CalendarPolicy* calendar(std::string_view policy) const;
    Micros reset_jitter(std::string_view policy) const;                  // 0: none
    const PolicyLookups* policy_lookups(std::string_view policy) const;  // null: none
};

// The committed rows of the policy tables in `schema` (see the rules above).
const PolicyCatalog& policy_catalog(Oid schema);

// The copy this backend holds now, as it is (no invalidation taken in, nothing read), or null:
// for code that runs while a call still uses the rules policy_catalog() gave it.
const PolicyCatalog* current_policy_catalog();

}  // namespace ratelimit::pg
