// Per-policy counters and top offenders in shared memory.
//
// Locking rules:
//  - Counters belong to a database: a slot is named by (database, policy), and each database
//    reads and resets only its own (the offenders table keeps a database per entry too).
//  - Counters are found by hashing the policy name into a fixed open-addressing table. A slot,
//    once named, keeps its name until the server stops, so finding one needs no lock: the name
//    is written first and the slot published after a write barrier. Naming a slot takes the
//    counters lock exclusively (and looks again under it, so a name is never placed twice).
//  - The counts are atomics, added to without any lock: calls on one policy never wait for
//    each other here.
//  - The offenders table (ratelimit/offender_table.hpp) is written only on a denial, under the
//    offenders lock held exclusively; reading it takes that lock shared.
#include "pg/policy_counters.hpp"

#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "pg/clock.hpp"
#include "pg/guard.hpp"
#include "pg/result_row.hpp"
#include "ratelimit/error.hpp"
#include "ratelimit/offender_table.hpp"

extern "C" {
#include "port/atomics.h"
#include "storage/ipc.h"
#include "storage/lwlock.h"
#include "storage/shmem.h"
#include "utils/array.h"
}

namespace ratelimit::pg {
namespace {

constexpr const char* kTrancheName = "ratelimit policy counters";
constexpr int kCounterSlots = 1024;  // distinct policy names counted since start
constexpr std::size_t kNameBytes = 64;

struct PolicyCounter {
    pg_atomic_uint32 published;  // 0: free; 1: name set, counting
    Oid database;
    Micros since;  // the first call counted, or this database's last reset_policy_stats
    char name[kNameBytes];
    pg_atomic_uint64 allowed;
    pg_atomic_uint64 denied;
    pg_atomic_uint64 shadow_denied;
    pg_atomic_uint64 near_limit;          // allowed charges past ratelimit.near_limit_ratio
    pg_atomic_uint64 denials_not_logged;  // log_denials denials not written to the denial log
};

struct SharedCounters {
    LWLockPadded* locks;  // [0] naming counters, [1] the offenders table
    PolicyCounter counters[kCounterSlots];
    OffenderSlot offenders[kOffenderSlots];
};

int denial_log_size_setting = 10000;
double near_limit_ratio_setting = 0.8;
double denial_log_sample_rate_setting = 1.0;

shmem_request_hook_type previous_shmem_request_hook = nullptr;
shmem_startup_hook_type previous_shmem_startup_hook = nullptr;
SharedCounters* shared = nullptr;

void request_shared_memory() {
    if (previous_shmem_request_hook != nullptr)
        previous_shmem_request_hook();
    RequestAddinShmemSpace(MAXALIGN(sizeof(SharedCounters)));
    RequestNamedLWLockTranche(kTrancheName, 2);
}

void start_shared_memory() {
    if (previous_shmem_startup_hook != nullptr)
        previous_shmem_startup_hook();
    bool found = false;
    LWLockAcquire(AddinShmemInitLock, LW_EXCLUSIVE);
    shared =
        static_cast<SharedCounters*>(ShmemInitStruct(kTrancheName, sizeof(SharedCounters), &found));
    if (!found) {
        std::memset(static_cast<void*>(shared), 0, sizeof(SharedCounters));
        shared->locks = GetNamedLWLockTranche(kTrancheName);
        for (PolicyCounter& counter : shared->counters) {
            pg_atomic_init_u32(&counter.published, 0);
            pg_atomic_init_u64(&counter.allowed, 0);
            pg_atomic_init_u64(&counter.denied, 0);
            pg_atomic_init_u64(&counter.shadow_denied, 0);
            pg_atomic_init_u64(&counter.near_limit, 0);
            pg_atomic_init_u64(&counter.denials_not_logged, 0);
        }
    }
    LWLockRelease(AddinShmemInitLock);
}

[[noreturn]] void not_available() {
    call_postgres([] {
        ereport(ERROR, (errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
                        errmsg("policy counters are not available: ratelimit is not in "
                               "shared_preload_libraries"),
                        errhint("Add ratelimit to shared_preload_libraries in postgresql.conf and "
                                "restart the server.")));
    });
    throw std::logic_error("unreachable");
}

bool names(const PolicyCounter& counter, std::string_view name) {
    return counter.database == MyDatabaseId &&
           std::strncmp(counter.name, name.data(), name.size()) == 0 &&
           counter.name[name.size()] == '\0';
}

// The counter of `name`, named on first use; null when every slot is taken.
PolicyCounter* counter_of(std::string_view name) {
    name = utf8_prefix(name, kNameBytes - 1);
    const std::uint32_t start =
        hash_combine(hash_bytes(reinterpret_cast<const unsigned char*>(name.data()),
                                static_cast<int>(name.size())),
                     MyDatabaseId);
    for (int pass = 0; pass < 2; ++pass) {
        LWLock* naming = &shared->locks[0].lock;
        if (pass == 1)
            call_postgres([&] { LWLockAcquire(naming, LW_EXCLUSIVE); });
        for (int probe = 0; probe < kCounterSlots; ++probe) {
            PolicyCounter& counter = shared->counters[(start + probe) % kCounterSlots];
            if (pg_atomic_read_u32(&counter.published) == 1) {
                pg_read_barrier();
                if (names(counter, name)) {
                    if (pass == 1)
                        LWLockRelease(naming);
                    return &counter;
                }
                continue;
            }
            if (pass == 0)
                break;  // a free slot ends the probe: name it under the lock
            counter.database = MyDatabaseId;
            counter.since = clock_now();  // counting starts with its first call
            std::memcpy(counter.name, name.data(), name.size());
            counter.name[name.size()] = '\0';
            pg_write_barrier();
            pg_atomic_write_u32(&counter.published, 1);
            LWLockRelease(naming);
            return &counter;
        }
        if (pass == 1)
            LWLockRelease(naming);
    }
    return nullptr;
}

}  // namespace

void count_outcome(std::string_view policy, std::string_view subject, PolicyOutcome outcome,
                   Micros now, bool near_limit) {
    if (shared == nullptr || outcome == PolicyOutcome::kNone)
        return;
    PolicyCounter* counter = counter_of(policy);
    if (counter != nullptr) {
        pg_atomic_uint64* count = outcome == PolicyOutcome::kAllowed  ? &counter->allowed
                                  : outcome == PolicyOutcome::kDenied ? &counter->denied
                                                                      : &counter->shadow_denied;
        pg_atomic_fetch_add_u64(count, 1);
        if (near_limit && outcome == PolicyOutcome::kAllowed)
            pg_atomic_fetch_add_u64(&counter->near_limit, 1);
    }
    if (outcome == PolicyOutcome::kDenied && !subject.empty()) {
        LWLock* lock = &shared->locks[1].lock;
        call_postgres([&] { LWLockAcquire(lock, LW_EXCLUSIVE); });
        OffenderTable(shared->offenders).record(policy, subject, now, MyDatabaseId);
        LWLockRelease(lock);
    }
}

void count_unlogged_denial(std::string_view policy) {
    if (shared == nullptr)
        return;
    PolicyCounter* counter = counter_of(policy);
    if (counter != nullptr)
        pg_atomic_fetch_add_u64(&counter->denials_not_logged, 1);
}

bool read_policy_counts(std::vector<PolicyCounts>* counts) {
    counts->clear();
    if (shared == nullptr)
        return false;
    for (PolicyCounter& counter : shared->counters) {
        if (pg_atomic_read_u32(&counter.published) != 1)
            continue;
        pg_read_barrier();
        if (counter.database != MyDatabaseId)
            continue;
        PolicyCounts row;
        row.policy = counter.name;
        row.allowed = static_cast<std::int64_t>(pg_atomic_read_u64(&counter.allowed));
        row.denied = static_cast<std::int64_t>(pg_atomic_read_u64(&counter.denied));
        row.shadow_denied = static_cast<std::int64_t>(pg_atomic_read_u64(&counter.shadow_denied));
        row.near_limit = static_cast<std::int64_t>(pg_atomic_read_u64(&counter.near_limit));
        row.denials_not_logged =
            static_cast<std::int64_t>(pg_atomic_read_u64(&counter.denials_not_logged));
        row.since = counter.since;
        counts->push_back(std::move(row));
    }
    return true;
}

double near_limit_ratio() {
    return near_limit_ratio_setting;
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
    if (shared == nullptr)
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

// ratelimit.policy_stats(): one row per policy this database has counted. The columns added
// in 0.6.0 come last, so the 0.5.0 definition (five columns) reads the same rows until
// ALTER EXTENSION ratelimit UPDATE.
Datum policy_stats_body(FunctionCallInfo fcinfo) {
    std::vector<PolicyCounts> counts;
    if (!read_policy_counts(&counts))
        not_available();
    TupleDesc desc = nullptr;
    Tuplestorestate* store = begin_rows(fcinfo, &desc);
    for (const PolicyCounts& row : counts) {
        Datum values[7] = {text_datum(row.policy.c_str()),
                           Int64GetDatum(row.allowed),
                           Int64GetDatum(row.denied),
                           Int64GetDatum(row.shadow_denied),
                           TimestampTzGetDatum(to_timestamptz(row.since)),
                           Int64GetDatum(row.near_limit),
                           Int64GetDatum(row.denials_not_logged)};
        bool nulls[7] = {false, false, false, false, false, false, false};
        call_postgres([&] { tuplestore_putvalues(store, desc, values, nulls); });
    }
    return static_cast<Datum>(0);
}

// ratelimit.top_offenders(p_limit): the most denied (policy, subject) pairs since start.
Datum top_offenders_body(FunctionCallInfo fcinfo) {
    if (shared == nullptr)
        not_available();
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
    LWLock* lock = &shared->locks[1].lock;
    call_postgres([&] { LWLockAcquire(lock, LW_SHARED); });
    std::memcpy(static_cast<void*>(copy.data()), shared->offenders, OffenderTable::kBytes);
    LWLockRelease(lock);
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

// ratelimit.reset_policy_stats(): zeroes this database's counters and offenders.
Datum reset_policy_stats_body(FunctionCallInfo) {
    if (shared == nullptr)
        not_available();
    const Micros now = clock_now();
    for (PolicyCounter& counter : shared->counters) {
        if (pg_atomic_read_u32(&counter.published) != 1)
            continue;
        pg_read_barrier();
        if (counter.database != MyDatabaseId)
            continue;
        counter.since = now;
        pg_atomic_write_u64(&counter.allowed, 0);
        pg_atomic_write_u64(&counter.denied, 0);
        pg_atomic_write_u64(&counter.shadow_denied, 0);
        pg_atomic_write_u64(&counter.near_limit, 0);
        pg_atomic_write_u64(&counter.denials_not_logged, 0);
    }
    LWLock* lock = &shared->locks[1].lock;
    call_postgres([&] { LWLockAcquire(lock, LW_EXCLUSIVE); });
    OffenderTable(shared->offenders).clear(MyDatabaseId);
    LWLockRelease(lock);
    return static_cast<Datum>(0);
}

}  // namespace

int denial_log_size() {
    return denial_log_size_setting;
}

double denial_log_sample_rate() {
    return denial_log_sample_rate_setting;
}

void define_policy_settings() {
    DefineCustomIntVariable(
        "ratelimit.denial_log_size",
        "Rows the denial log keeps: a ring, the newest denial overwriting the oldest.", nullptr,
        &denial_log_size_setting, 10000, 0, 10000000, PGC_SUSET, 0, nullptr, nullptr, nullptr);
    DefineCustomRealVariable(
        "ratelimit.denial_log_sample_rate",
        "Fraction of the denials of policies with log_denials that the denial log records.",
        nullptr, &denial_log_sample_rate_setting, 1.0, 0.0, 1.0, PGC_SUSET, 0, nullptr, nullptr,
        nullptr);
    DefineCustomRealVariable(
        "ratelimit.near_limit_ratio",
        "An allowed charge counts as near the limit when it leaves more than this fraction of "
        "the limit used (policy_stats.near_limit, ratelimit.metrics()).",
        nullptr, &near_limit_ratio_setting, 0.8, 0.0, 1.0, PGC_SUSET, 0, nullptr, nullptr, nullptr);
}

void install_policy_counters() {
    previous_shmem_request_hook = shmem_request_hook;
    shmem_request_hook = request_shared_memory;
    previous_shmem_startup_hook = shmem_startup_hook;
    shmem_startup_hook = start_shared_memory;
}

}  // namespace ratelimit::pg

RATELIMIT_SQL_FUNCTION(ratelimit_record_outcomes, ratelimit::pg::record_outcomes_body)
RATELIMIT_SQL_FUNCTION(ratelimit_policy_stats, ratelimit::pg::policy_stats_body)
RATELIMIT_SQL_FUNCTION(ratelimit_top_offenders, ratelimit::pg::top_offenders_body)
RATELIMIT_SQL_FUNCTION(ratelimit_reset_policy_stats, ratelimit::pg::reset_policy_stats_body)
