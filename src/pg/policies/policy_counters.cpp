// Per-policy counters and top offenders in shared memory.
//
// Locking rules:
//  - Counters belong to a database: a slot is named by (database, policy), and each database
//    reads and resets only its own (the offenders table keeps a database per entry too).
//  - Counters are found by hashing the policy name into an open-addressing table of
//    ratelimit.policy_counters slots. A slot is free (never named), counting, or freed (named
//    once, given back): a probe stops at a free slot and passes over freed ones, so giving a
//    slot back never hides another. Finding a counting slot needs no lock: its name is written
//    first and the slot published after a write barrier. Naming and freeing take the naming lock
//    exclusively (a name is looked for again under it, so it is never placed twice).
//  - A database names at most ratelimit.policy_counters_database_share percent of the slots, so
//    one database's policies can never take the counters of every other. When it finds no room
//    it first takes back the slots of dropped databases and of its own deleted policies; a call
//    that still finds none is counted in its database's "not counted" entry, by outcome, so no
//    call goes uncounted silently.
//  - The counts are atomics, added to without any lock: calls on one policy never wait for
//    each other here. A slot freed and named again while a call is adding to it may receive
//    that one count; it only happens once a database ran out of room.
//  - The offenders table (ratelimit/offender_table.hpp) is written only on a denial, under the
//    offenders lock held exclusively; reading it takes that lock shared. A database holds at
//    most ratelimit.policy_counters_database_share percent of its entries too.
#include "pg/policies/policy_counters.hpp"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

#include "pg/bridge/clock.hpp"
#include "pg/bridge/extension_schema.hpp"
#include "pg/bridge/guard.hpp"
#include "pg/shared_memory/lwlock_scope.hpp"
#include "pg/policies/policy_cache.hpp"
#include "pg/bridge/result_row.hpp"
#include "pg/bridge/settings.hpp"
#include "pg/shared_memory/shared_region.hpp"
#include "ratelimit/error.hpp"
#include "ratelimit/offender_table.hpp"

extern "C" {
#include "port/atomics.h"
#include "storage/lwlock.h"
#include "utils/array.h"
#include "utils/lsyscache.h"
#include "utils/syscache.h"
}

namespace ratelimit::pg {
namespace {

constexpr std::size_t kNameBytes = 64;
// Databases whose calls found no counter, each counted apart; beyond, in one shared entry.
constexpr int kUncountedDatabases = 128;
// How often a backend that found no room looks again (real time).
constexpr TimestampTz kRetryInterval = USECS_PER_SEC;

enum SlotState : std::uint32_t { kFree = 0, kCounting = 1, kFreed = 2 };

struct Counts {
    pg_atomic_uint64 allowed;
    pg_atomic_uint64 denied;
    pg_atomic_uint64 shadow_denied;
    pg_atomic_uint64 near_limit;          // allowed charges past ratelimit.near_limit_ratio
    pg_atomic_uint64 denials_not_logged;  // log_denials denials not in the denial log
};

struct PolicyCounter {
    pg_atomic_uint32 state;  // SlotState
    Oid database;
    Micros since;  // the first call counted, or this database's last reset_policy_stats
    char name[kNameBytes];
    Counts counts;
};

// The calls of one database's policies that found no counter.
struct Uncounted {
    pg_atomic_uint32 state;  // kFree or kCounting
    Oid database;
    Micros since;
    Counts counts;
};

// The region's table: its header, then `capacity` counters.
struct CounterTable {
    std::int32_t capacity;
    OffenderSlot offenders[kOffenderSlots];
    Uncounted uncounted[kUncountedDatabases];
    Uncounted uncounted_elsewhere;  // databases beyond kUncountedDatabases, all together
};

constexpr int kNamingLock = 0;
constexpr int kOffendersLock = 1;

std::size_t header_bytes() {
    return MAXALIGN(sizeof(CounterTable));
}

std::size_t table_bytes() {
    return header_bytes() +
           sizeof(PolicyCounter) * static_cast<std::size_t>(setting::policy_counters);
}

void init_counts(Counts& counts) {
    pg_atomic_init_u64(&counts.allowed, 0);
    pg_atomic_init_u64(&counts.denied, 0);
    pg_atomic_init_u64(&counts.shadow_denied, 0);
    pg_atomic_init_u64(&counts.near_limit, 0);
    pg_atomic_init_u64(&counts.denials_not_logged, 0);
}

void zero_counts(Counts& counts) {
    pg_atomic_write_u64(&counts.allowed, 0);
    pg_atomic_write_u64(&counts.denied, 0);
    pg_atomic_write_u64(&counts.shadow_denied, 0);
    pg_atomic_write_u64(&counts.near_limit, 0);
    pg_atomic_write_u64(&counts.denials_not_logged, 0);
}

void create_table(void* block) {
    std::memset(block, 0, table_bytes());
    auto* table = static_cast<CounterTable*>(block);
    table->capacity = setting::policy_counters;
    auto* counters = reinterpret_cast<PolicyCounter*>(static_cast<char*>(block) + header_bytes());
    for (int i = 0; i < setting::policy_counters; ++i) {
        pg_atomic_init_u32(&counters[i].state, kFree);
        init_counts(counters[i].counts);
    }
    for (Uncounted& entry : table->uncounted) {
        pg_atomic_init_u32(&entry.state, kFree);
        init_counts(entry.counts);
    }
    pg_atomic_init_u32(&table->uncounted_elsewhere.state, kCounting);
    init_counts(table->uncounted_elsewhere.counts);
}

SharedRegion region("ratelimit policy counters", 2, "policy counters", table_bytes, create_table);

CounterTable& table() {
    return *static_cast<CounterTable*>(region.table());
}

PolicyCounter* counters() {
    return reinterpret_cast<PolicyCounter*>(static_cast<char*>(region.table()) + header_bytes());
}

int capacity() {
    return table().capacity;
}

bool names(const PolicyCounter& counter, Oid database, std::string_view name) {
    return counter.database == database &&
           std::strncmp(counter.name, name.data(), name.size()) == 0 &&
           counter.name[name.size()] == '\0';
}

// A counting slot of `database` named `name`; read after an acquire of its state.
bool is_counter_of(PolicyCounter& counter, Oid database, std::string_view name) {
    if (pg_atomic_read_u32(&counter.state) != kCounting)
        return false;
    pg_read_barrier();
    return names(counter, database, name);
}

// ---- naming, under the naming lock ----------------------------------------------------------

// The slots `database` holds.
int held_by(Oid database) {
    int held = 0;
    PolicyCounter* all = counters();
    for (int i = 0; i < capacity(); ++i) {
        if (pg_atomic_read_u32(&all[i].state) == kCounting && all[i].database == database)
            ++held;
    }
    return held;
}

int database_share() {
    return std::max(1, static_cast<int>(static_cast<std::int64_t>(capacity()) *
                                        setting::policy_counters_database_share / 100));
}

// Finds or names the counter of (database, name) under the naming lock; null when the
// database holds its share or no slot is left.
PolicyCounter* name_counter(Oid database, std::string_view name, std::uint32_t start) {
    PolicyCounter* all = counters();
    PolicyCounter* reusable = nullptr;
    for (int probe = 0; probe < capacity(); ++probe) {
        PolicyCounter& counter = all[(start + probe) % capacity()];
        const std::uint32_t state = pg_atomic_read_u32(&counter.state);
        if (state == kCounting && names(counter, database, name))
            return &counter;
        if (state == kFreed && reusable == nullptr)
            reusable = &counter;
        if (state == kFree) {
            if (reusable == nullptr)
                reusable = &counter;
            break;
        }
    }
    if (reusable == nullptr || held_by(database) >= database_share())
        return nullptr;
    reusable->database = database;
    reusable->since = clock_now();  // counting starts with its first call
    std::memcpy(reusable->name, name.data(), name.size());
    reusable->name[name.size()] = '\0';
    zero_counts(reusable->counts);
    pg_write_barrier();
    pg_atomic_write_u32(&reusable->state, kCounting);
    return reusable;
}

// Gives back the slots of dropped databases and of this database's policies that no longer
// exist (or never did: record_outcomes counts any name). The checks run with no lock held;
// a slot is freed only if it still holds what was checked.
void take_back_slots() {
    struct Candidate {
        int index;
        Oid database;
        std::string name;
    };
    std::vector<Candidate> candidates;
    std::vector<Oid> dropped;
    std::vector<Oid> present;
    // The copy the call being counted decided with: reading the tables again here could drop
    // the rules that call still holds.
    const PolicyCatalog* catalog = current_policy_catalog();
    PolicyCounter* all = counters();
    for (int i = 0; i < capacity(); ++i) {
        PolicyCounter& counter = all[i];
        if (pg_atomic_read_u32(&counter.state) != kCounting)
            continue;
        pg_read_barrier();
        const Oid database = counter.database;
        const std::string name(counter.name, strnlen(counter.name, kNameBytes));
        bool gone = false;
        if (database == MyDatabaseId) {
            gone = catalog != nullptr && catalog->policy(name) == nullptr;
        } else if (std::find(dropped.begin(), dropped.end(), database) != dropped.end()) {
            gone = true;
        } else if (std::find(present.begin(), present.end(), database) == present.end()) {
            bool exists = true;
            call_postgres(
                [&] { exists = SearchSysCacheExists1(DATABASEOID, ObjectIdGetDatum(database)); });
            (exists ? present : dropped).push_back(database);
            gone = !exists;
        }
        if (gone)
            candidates.push_back(Candidate{i, database, name});
    }
    if (candidates.empty())
        return;
    with_lwlock(region.lock(kNamingLock), LW_EXCLUSIVE, [&] {
        for (const Candidate& candidate : candidates) {
            PolicyCounter& counter = all[candidate.index];
            if (pg_atomic_read_u32(&counter.state) == kCounting &&
                names(counter, candidate.database, candidate.name))
                pg_atomic_write_u32(&counter.state, kFreed);
        }
        // A dropped database's calls that found no counter go with it too.
        for (Uncounted& entry : table().uncounted) {
            if (pg_atomic_read_u32(&entry.state) == kCounting &&
                std::find(dropped.begin(), dropped.end(), entry.database) != dropped.end())
                pg_atomic_write_u32(&entry.state, kFree);
        }
        return 0;
    });
}

// This backend's last failure to find room, and the (database, name) pairs it failed for
// then: their calls go to the uncounted entry without looking again until kRetryInterval.
TimestampTz refused_at = 0;
std::vector<std::string> refused_names;

std::string refusal(Oid database, std::string_view name) {
    return std::to_string(database) + '/' + std::string(name);
}

bool refused_recently(Oid database, std::string_view name) {
    if (refused_names.empty())
        return false;
    if (GetCurrentTimestamp() - refused_at >= kRetryInterval) {
        refused_names.clear();
        return false;
    }
    return std::find(refused_names.begin(), refused_names.end(), refusal(database, name)) !=
           refused_names.end();
}

// The counter of `name` in `database`, named on first use; null when there is no room.
// `may_take_back`: the process may look in the catalogs to take back the slots of what is gone.
PolicyCounter* counter_of(Oid database, std::string_view name, bool may_take_back) {
    name = utf8_prefix(name, kNameBytes - 1);
    const auto start = static_cast<std::uint32_t>(
        hash_combine(hash_bytes(reinterpret_cast<const unsigned char*>(name.data()),
                                static_cast<int>(name.size())),
                     database));
    PolicyCounter* all = counters();
    for (int probe = 0; probe < capacity(); ++probe) {
        PolicyCounter& counter = all[(start + probe) % capacity()];
        if (is_counter_of(counter, database, name))
            return &counter;
        if (pg_atomic_read_u32(&counter.state) == kFree)
            break;  // not named yet: name it under the lock
    }
    if (refused_recently(database, name))
        return nullptr;
    auto name_it = [&] {
        return with_lwlock(region.lock(kNamingLock), LW_EXCLUSIVE,
                           [&] { return name_counter(database, name, start); });
    };
    PolicyCounter* counter = name_it();
    if (counter == nullptr && may_take_back) {
        take_back_slots();
        counter = name_it();
    }
    if (counter == nullptr) {
        if (refused_names.empty())
            refused_at = GetCurrentTimestamp();
        refused_names.push_back(refusal(database, name));
    }
    return counter;
}

// `database`'s uncounted entry, named on first use.
Uncounted& uncounted_of(Oid database) {
    for (Uncounted& entry : table().uncounted) {
        if (pg_atomic_read_u32(&entry.state) == kCounting) {
            pg_read_barrier();
            if (entry.database == database)
                return entry;
        }
    }
    Uncounted* found = with_lwlock(region.lock(kNamingLock), LW_EXCLUSIVE, [&] {
        Uncounted* free = nullptr;
        for (Uncounted& entry : table().uncounted) {
            const std::uint32_t state = pg_atomic_read_u32(&entry.state);
            if (state == kCounting && entry.database == database)
                return &entry;
            if (state == kFree && free == nullptr)
                free = &entry;
        }
        if (free != nullptr) {
            free->database = database;
            free->since = clock_now();
            zero_counts(free->counts);
            pg_write_barrier();
            pg_atomic_write_u32(&free->state, kCounting);
        }
        return free;
    });
    return found != nullptr ? *found : table().uncounted_elsewhere;
}

// Where a call of `policy` in `database` is counted: its counter, or the database's uncounted
// entry.
Counts& counts_of(Oid database, std::string_view policy, bool may_take_back = true) {
    if (PolicyCounter* counter = counter_of(database, policy, may_take_back))
        return counter->counts;
    return uncounted_of(database).counts;
}

PolicyCounts read_counts(Counts& counts) {
    PolicyCounts row;
    row.allowed = static_cast<std::int64_t>(pg_atomic_read_u64(&counts.allowed));
    row.denied = static_cast<std::int64_t>(pg_atomic_read_u64(&counts.denied));
    row.shadow_denied = static_cast<std::int64_t>(pg_atomic_read_u64(&counts.shadow_denied));
    row.near_limit = static_cast<std::int64_t>(pg_atomic_read_u64(&counts.near_limit));
    row.denials_not_logged =
        static_cast<std::int64_t>(pg_atomic_read_u64(&counts.denials_not_logged));
    return row;
}

}  // namespace

void count_outcome(std::string_view policy, std::string_view subject, PolicyOutcome outcome,
                   Micros now, bool near_limit) {
    if (!region.available() || outcome == PolicyOutcome::kNone)
        return;
    Counts& counts = counts_of(MyDatabaseId, policy);
    pg_atomic_uint64* count = outcome == PolicyOutcome::kAllowed  ? &counts.allowed
                              : outcome == PolicyOutcome::kDenied ? &counts.denied
                                                                  : &counts.shadow_denied;
    pg_atomic_fetch_add_u64(count, 1);
    if (near_limit && outcome == PolicyOutcome::kAllowed)
        pg_atomic_fetch_add_u64(&counts.near_limit, 1);
    if (outcome == PolicyOutcome::kDenied && !subject.empty()) {
        with_lwlock(region.lock(kOffendersLock), LW_EXCLUSIVE, [&] {
            // The database's share of the offenders, as of the counters.
            const int share =
                std::max(1, kOffenderSlots * setting::policy_counters_database_share / 100);
            OffenderTable(table().offenders).record(policy, subject, now, MyDatabaseId, share);
            return 0;
        });
    }
}

void count_unlogged_denial(std::string_view policy) {
    if (!region.available())
        return;
    pg_atomic_fetch_add_u64(&counts_of(MyDatabaseId, policy).denials_not_logged, 1);
}

pg_atomic_uint64* denials_not_logged_counter(std::string_view policy) {
    if (!region.available())
        return nullptr;
    return &counts_of(MyDatabaseId, policy).denials_not_logged;
}

void count_unlogged_denial_in(Oid database, std::string_view policy) {
    if (!region.available())
        return;
    pg_atomic_fetch_add_u64(&counts_of(database, policy, false).denials_not_logged, 1);
}

bool read_policy_counts(Oid schema, std::vector<PolicyCounts>* counts) {
    counts->clear();
    if (!region.available())
        return false;
    PolicyCounter* all = counters();
    for (int i = 0; i < capacity(); ++i) {
        PolicyCounter& counter = all[i];
        if (pg_atomic_read_u32(&counter.state) != kCounting)
            continue;
        pg_read_barrier();
        if (counter.database != MyDatabaseId)
            continue;
        PolicyCounts row = read_counts(counter.counts);
        row.policy.assign(counter.name, strnlen(counter.name, kNameBytes));
        row.since = counter.since;
        counts->push_back(std::move(row));
    }
    // Calls that found no counter: one row for them all, then the policies without a counter.
    for (Uncounted& entry : table().uncounted) {
        if (pg_atomic_read_u32(&entry.state) != kCounting)
            continue;
        pg_read_barrier();
        if (entry.database != MyDatabaseId)
            continue;
        PolicyCounts row = read_counts(entry.counts);
        row.counted = false;
        row.since = entry.since;
        counts->push_back(row);
        std::vector<std::string> without;
        for (const auto& [name, rule] : policy_catalog(schema).policies) {
            const bool has_counter =
                std::any_of(counts->begin(), counts->end(), [&](const PolicyCounts& counted) {
                    return counted.counted && counted.policy == name;
                });
            if (!has_counter)
                without.push_back(name);
        }
        std::sort(without.begin(), without.end());
        for (std::string& name : without) {
            PolicyCounts uncounted_policy;
            uncounted_policy.policy = std::move(name);
            uncounted_policy.counted = false;
            uncounted_policy.has_counts = false;
            counts->push_back(std::move(uncounted_policy));
        }
        break;
    }
    return true;
}

std::int64_t uncounted_elsewhere() {
    if (!region.available())
        return 0;
    const PolicyCounts row = read_counts(table().uncounted_elsewhere.counts);
    return row.allowed + row.denied + row.shadow_denied;
}

double near_limit_ratio() {
    return setting::near_limit_ratio;
}

namespace {

std::string_view text_view(Datum value) {
    const text* t = reinterpret_cast<const text*>(DatumGetPointer(value));
    return std::string_view(VARDATA_ANY(t), VARSIZE_ANY_EXHDR(t));
}

void deconstruct_text_array(FunctionCallInfo fcinfo, int index, Datum** values, bool** nulls,
                            int* count) {
    *count = 0;
    if (PG_ARGISNULL(index))
        return;
    call_postgres([&] {
        deconstruct_array(PG_GETARG_ARRAYTYPE_P(index), TEXTOID, -1, false, TYPALIGN_INT, values,
                          nulls, count);
        for (int i = 0; i < *count; ++i) {
            if (!(*nulls)[i])
                (*values)[i] = PointerGetDatum(PG_DETOAST_DATUM_PACKED((*values)[i]));
        }
    });
}

// ratelimit.record_outcomes(p_policies, p_subjects, p_outcomes): counts one call's outcome per
// policy ('allowed', 'denied' or 'shadow_denied') and its denials as offences. Internal: the
// policy functions call it; without preloading it does nothing.
Datum record_outcomes_body(FunctionCallInfo fcinfo) {
    if (!region.available())
        return BoolGetDatum(false);
    Datum *policies = nullptr, *subjects = nullptr, *outcomes = nullptr;
    bool *policy_nulls = nullptr, *subject_nulls = nullptr, *outcome_nulls = nullptr;
    int policy_count = 0, subject_count = 0, outcome_count = 0;
    deconstruct_text_array(fcinfo, 0, &policies, &policy_nulls, &policy_count);
    deconstruct_text_array(fcinfo, 1, &subjects, &subject_nulls, &subject_count);
    deconstruct_text_array(fcinfo, 2, &outcomes, &outcome_nulls, &outcome_count);
    if (subject_count != policy_count || outcome_count != policy_count)
        throw ArgumentError::invalid("p_outcomes", "must have as many elements as p_policies");
    // Every outcome is checked before anything is counted: a bad call counts nothing.
    for (int i = 0; i < policy_count; ++i) {
        if (outcome_nulls[i])
            continue;
        const std::string_view outcome = text_view(outcomes[i]);
        if (outcome != "allowed" && outcome != "denied" && outcome != "shadow_denied")
            throw ArgumentError::invalid("p_outcomes",
                                         "must hold allowed, denied or shadow_denied");
    }
    const Micros now = clock_now();
    for (int i = 0; i < policy_count; ++i) {
        if (policy_nulls[i] || outcome_nulls[i])
            continue;
        const std::string_view outcome = text_view(outcomes[i]);
        const PolicyOutcome kind = outcome == "allowed"  ? PolicyOutcome::kAllowed
                                   : outcome == "denied" ? PolicyOutcome::kDenied
                                                         : PolicyOutcome::kShadowDenied;
        count_outcome(text_view(policies[i]),
                      subject_nulls[i] ? std::string_view() : text_view(subjects[i]), kind, now,
                      false);
    }
    return BoolGetDatum(true);
}

// Starts the result rows of a set-returning function.
Tuplestorestate* begin_rows(FunctionCallInfo fcinfo, TupleDesc* desc) {
    Tuplestorestate* store = nullptr;
    call_postgres([&] { store = begin_result_rows(fcinfo, desc); });
    return store;
}

// ratelimit.policy_stats(): one row per policy this database counts; when some of its calls
// found no counter, a row for those calls (policy NULL) and one per policy without a counter
// (counts NULL), all with counted = false. The columns added in 0.6.0 come last, so the 0.5.0
// definition (five columns) reads the same rows until ALTER EXTENSION ratelimit UPDATE.
Datum policy_stats_body(FunctionCallInfo fcinfo) {
    std::vector<PolicyCounts> counts;
    Oid schema = InvalidOid;
    call_postgres([&] { schema = extension_schema(); });
    if (!read_policy_counts(schema, &counts))
        region.require_available();
    TupleDesc desc = nullptr;
    Tuplestorestate* store = begin_rows(fcinfo, &desc);
    for (const PolicyCounts& row : counts) {
        Datum values[8] = {row.policy.empty() ? 0 : text_datum(row.policy.c_str()),
                           Int64GetDatum(row.allowed),
                           Int64GetDatum(row.denied),
                           Int64GetDatum(row.shadow_denied),
                           TimestampTzGetDatum(to_timestamptz(row.since)),
                           Int64GetDatum(row.near_limit),
                           Int64GetDatum(row.denials_not_logged),
                           BoolGetDatum(row.counted)};
        const bool no_counts = !row.has_counts;
        bool nulls[8] = {row.policy.empty(), no_counts, no_counts, no_counts,
                         no_counts,          no_counts, no_counts, false};
        call_postgres([&] { tuplestore_putvalues(store, desc, values, nulls); });
    }
    return static_cast<Datum>(0);
}

// ratelimit.top_offenders(p_limit): the most denied (policy, subject) pairs since start.
Datum top_offenders_body(FunctionCallInfo fcinfo) {
    region.require_available();
    if (PG_ARGISNULL(0))
        throw ArgumentError::null("p_limit");
    const std::int32_t limit = PG_GETARG_INT32(0);
    if (limit < 1)
        throw ArgumentError::invalid("p_limit",
                                     "must be at least 1 (got " + std::to_string(limit) + ")");
    TupleDesc desc = nullptr;
    Tuplestorestate* store = begin_rows(fcinfo, &desc);
    // Copy the table under its lock, then build rows with no lock held.
    std::vector<OffenderSlot> copy(kOffenderSlots);
    with_lwlock(region.lock(kOffendersLock), LW_SHARED, [&] {
        std::memcpy(static_cast<void*>(copy.data()), table().offenders, OffenderTable::kBytes);
        return 0;
    });
    const std::vector<Offender> offenders = OffenderTable(copy.data()).snapshot(MyDatabaseId);
    for (std::size_t i = 0; i < offenders.size() && i < static_cast<std::size_t>(limit); ++i) {
        const Offender& offender = offenders[i];
        Datum values[6] = {text_datum(offender.policy),
                           text_datum(offender.subject),
                           Int64GetDatum(offender.denials),
                           Int64GetDatum(offender.overcount),
                           TimestampTzGetDatum(to_timestamptz(offender.first_at)),
                           TimestampTzGetDatum(to_timestamptz(offender.last_at))};
        bool nulls[6] = {false, false, false, false, false, false};
        call_postgres([&] { tuplestore_putvalues(store, desc, values, nulls); });
    }
    return static_cast<Datum>(0);
}

// ratelimit.reset_policy_stats(): gives back this database's counters (a policy's next call
// names one afresh, its counts from zero), forgets its uncounted calls and its offenders.
Datum reset_policy_stats_body(FunctionCallInfo) {
    region.require_available();
    with_lwlock(region.lock(kNamingLock), LW_EXCLUSIVE, [&] {
        PolicyCounter* all = counters();
        for (int i = 0; i < capacity(); ++i) {
            if (pg_atomic_read_u32(&all[i].state) == kCounting && all[i].database == MyDatabaseId)
                pg_atomic_write_u32(&all[i].state, kFreed);
        }
        for (Uncounted& entry : table().uncounted) {
            if (pg_atomic_read_u32(&entry.state) == kCounting && entry.database == MyDatabaseId)
                pg_atomic_write_u32(&entry.state, kFree);
        }
        return 0;
    });
    refused_names.clear();
    with_lwlock(region.lock(kOffendersLock), LW_EXCLUSIVE, [&] {
        OffenderTable(table().offenders).clear(MyDatabaseId);
        return 0;
    });
    return static_cast<Datum>(0);
}

}  // namespace

int denial_log_size() {
    return setting::denial_log_size;
}

double denial_log_sample_rate() {
    return setting::denial_log_sample_rate;
}

void install_policy_counters() {
    region.install();
}

}  // namespace ratelimit::pg

RATELIMIT_SQL_FUNCTION(ratelimit_record_outcomes, ratelimit::pg::record_outcomes_body)
RATELIMIT_SQL_FUNCTION(ratelimit_policy_stats, ratelimit::pg::policy_stats_body)
RATELIMIT_SQL_FUNCTION(ratelimit_top_offenders, ratelimit::pg::top_offenders_body)
RATELIMIT_SQL_FUNCTION(ratelimit_reset_policy_stats, ratelimit::pg::reset_policy_stats_body)
