#include "pg/leases.hpp"

#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "pg/arguments.hpp"
#include "pg/clock.hpp"
#include "pg/guard.hpp"
#include "pg/lwlock_scope.hpp"
#include "pg/memory_engine.hpp"
#include "pg/postgres.hpp"
#include "pg/result_row.hpp"
#include "pg/shared_region.hpp"
#include "pg/state_engines.hpp"
#include "ratelimit/algorithms.hpp"
#include "ratelimit/error.hpp"
#include "ratelimit/lease_table.hpp"

extern "C" {
#include "access/htup_details.h"
#include "access/xact.h"
#include "funcapi.h"
#include "storage/ipc.h"
#include "storage/lwlock.h"
#include "storage/shmem.h"
#include "utils/guc.h"
}

namespace ratelimit::pg {
namespace {

int capacity_setting = 10000;

std::size_t table_bytes() {
    return LeaseTable::bytes_needed(capacity_setting);
}

void create_table(void* block) {
    LeaseTable::create(block, capacity_setting);
}

// After a crash the postmaster makes shared memory anew: no lease survives its holders.
SharedRegion region("ratelimit leases", kLeasePartitions, "leases", table_bytes, create_table);

void* table_block() {
    return region.table();
}

LWLock* partition_lock(int partition) {
    return region.lock(partition);
}

template <typename Work>
auto with_partition(int partition, Work&& work) {
    return region.with_partition<LeaseTable>(partition, std::forward<Work>(work));
}

// ---- what this backend holds ----------------------------------------------------------------

// A random token for this backend's life, stored with each of its leases.
std::uint64_t session_token = 0;

// This backend's leases: a transaction's, with the subtransaction that took each (0 for a
// session's), so that the end of either releases them.
struct HeldLease {
    std::uint64_t id;
    SubTransactionId subtransaction;  // InvalidSubTransactionId: held by the session
};
std::vector<HeldLease>* held = nullptr;

void release_held(std::uint64_t id) {
    const int partition = LeaseTable::attach(table_block()).partition_of_lease(id);
    if (partition < 0)
        return;
    // No error can happen here: a transaction's end calls it.
    LWLockAcquire(partition_lock(partition), LW_EXCLUSIVE);
    LeaseTable::attach(table_block()).release_own(partition, id, session_token);
    LWLockRelease(partition_lock(partition));
}

// Releases the transaction leases `ends` says ended, and keeps the rest.
template <typename Ends>
void release_where(Ends&& ends) {
    if (held == nullptr)
        return;
    std::size_t kept = 0;
    for (const HeldLease& lease : *held) {
        if (lease.subtransaction != InvalidSubTransactionId && ends(lease))
            release_held(lease.id);
        else
            (*held)[kept++] = lease;
    }
    held->resize(kept);
}

void at_transaction_end(XactEvent event, void*) {
    switch (event) {
        case XACT_EVENT_COMMIT:
        case XACT_EVENT_ABORT:
        case XACT_EVENT_PARALLEL_COMMIT:
        case XACT_EVENT_PARALLEL_ABORT:
        case XACT_EVENT_PREPARE:
            release_where([](const HeldLease&) { return true; });
            break;
        default:
            break;
    }
}

void at_subtransaction_end(SubXactEvent event, SubTransactionId mine, SubTransactionId parent,
                           void*) {
    if (held == nullptr)
        return;
    if (event == SUBXACT_EVENT_ABORT_SUB) {
        release_where([&](const HeldLease& lease) { return lease.subtransaction == mine; });
    } else if (event == SUBXACT_EVENT_COMMIT_SUB) {
        // The parent now holds them: its rollback ends them.
        for (HeldLease& lease : *held) {
            if (lease.subtransaction == mine)
                lease.subtransaction = parent;
        }
    }
}

// The backend's end, however it exits short of being killed outright: every lease it holds,
// found by its session token (also any it had no room to note).
void at_backend_exit(int, Datum) {
    if (!region.available() || session_token == 0)
        return;
    LeaseTable table = LeaseTable::attach(table_block());
    for (int partition = 0; partition < kLeasePartitions; ++partition) {
        LWLockAcquire(partition_lock(partition), LW_EXCLUSIVE);
        table.release_session(partition, session_token);
        LWLockRelease(partition_lock(partition));
    }
}

// The first lease of this backend: a token, the list and the callbacks that end its leases.
void prepare_backend() {
    if (session_token != 0)
        return;
    std::uint64_t token = 0;
    call_postgres([&] {
        if (!pg_strong_random(&token, sizeof token))
            ereport(ERROR, (errcode(ERRCODE_INTERNAL_ERROR),
                            errmsg("ratelimit: could not generate a random lease token")));
    });
    held = new std::vector<HeldLease>();
    call_postgres([&] {
        before_shmem_exit(at_backend_exit, 0);
        RegisterXactCallback(at_transaction_end, nullptr);
        RegisterSubXactCallback(at_subtransaction_end, nullptr);
    });
    session_token = token == 0 ? 1 : token;
}

std::uint32_t random_bits() {
    std::uint32_t bits = 0;
    call_postgres([&] {
        if (!pg_strong_random(&bits, sizeof bits))
            ereport(ERROR, (errcode(ERRCODE_INTERNAL_ERROR),
                            errmsg("ratelimit: could not generate a random lease identifier")));
    });
    return bits;
}

KeyHash lease_key(Datum key) {
    return memory_key(StateKey{native_space(), key}).hash;
}

// ---- the SQL functions ----------------------------------------------------------------------

// ratelimit.acquire(p_key, p_limit, p_cost, p_scope, p_max_hold) -> ratelimit.lease
Datum acquire_body(FunctionCallInfo fcinfo) {
    region.require_available();
    const Datum key = key_argument(fcinfo, 0, "p_key");
    const std::int32_t limit = int32_argument(fcinfo, 1, "p_limit");
    if (limit < 1)
        throw ArgumentError::invalid("p_limit",
                                     "must be at least 1 (got " + std::to_string(limit) + ")");
    const std::int32_t cost = int32_argument(fcinfo, 2, "p_cost");
    if (cost < 1 || cost > limit)
        throw ArgumentError::invalid("p_cost", "must be between 1 and p_limit (" +
                                                   std::to_string(limit) + "), got " +
                                                   std::to_string(cost));
    const std::string_view scope = name_argument(fcinfo, 3, "p_scope");
    const bool session = scope == "session";
    if (!session && scope != "transaction")
        throw ArgumentError::invalid("p_scope", "must be transaction or session (got \"" +
                                                    std::string(scope.substr(0, 64)) + "\")");
    const Micros max_hold = PG_ARGISNULL(4) ? 0 : interval_argument(fcinfo, 4, "p_max_hold");
    if (max_hold != 0 && max_hold < kMinPeriod)
        throw ArgumentError::invalid("p_max_hold", "must be at least 1 millisecond");
    const Micros now = clock_now();
    require_valid_instant(now);

    prepare_backend();
    held->reserve(held->size() + 1);  // noting the lease below cannot fail
    const KeyHash hash = lease_key(key);
    const int partition = LeaseTable::partition_of(hash);
    const std::uint32_t bits = random_bits();
    const LeaseAnswer answer = with_partition(partition, [&](LeaseTable& table) {
        return table.acquire(partition, hash, limit, cost, now, max_hold ? now + max_hold : 0,
                             session_token, bits);
    });
    if (answer.table_full) {
        const int capacity = capacity_setting;
        call_postgres([&] {
            ereport(ERROR,
                    (errcode(ERRCODE_OUT_OF_MEMORY), errmsg("ratelimit: no room for another lease"),
                     errdetail("Every lease slot of the key's partition is held."),
                     errhint("Raise ratelimit.lease_capacity (now %d leases in all).", capacity)));
        });
    }
    if (answer.allowed) {
        SubTransactionId subtransaction = InvalidSubTransactionId;
        if (!session)
            call_postgres([&] { subtransaction = GetCurrentSubTransactionId(); });
        held->push_back(HeldLease{answer.id, subtransaction});
    }

    constexpr int kFields = 5;
    Datum values[kFields] = {0};
    bool nulls[kFields] = {false};
    nulls[0] = !answer.allowed;
    values[0] = Int64GetDatum(static_cast<std::int64_t>(answer.id));
    values[1] = BoolGetDatum(answer.allowed);
    values[2] = Int32GetDatum(limit);
    values[3] = Int32GetDatum(static_cast<std::int32_t>(answer.in_flight));
    nulls[4] = answer.allowed || !answer.retry_after;
    values[4] = Int64GetDatum(milliseconds_up(answer.retry_after.value_or(0)));
    Datum result = 0;
    call_postgres([&] {
        result = HeapTupleGetDatum(heap_form_tuple(returned_row_descriptor(fcinfo), values, nulls));
    });
    return result;
}

// ratelimit.release(p_lease) -> true; an identifier that is not held is an error.
Datum release_body(FunctionCallInfo fcinfo) {
    region.require_available();
    if (PG_ARGISNULL(0))
        throw ArgumentError::null("p_lease");
    const auto id = static_cast<std::uint64_t>(PG_GETARG_INT64(0));
    const int partition = LeaseTable::attach(table_block()).partition_of_lease(id);
    const Micros now = clock_now();
    const bool released = partition >= 0 && with_partition(partition, [&](LeaseTable& table) {
                              return table.release(partition, id, now);
                          });
    if (!released)
        throw ArgumentError::invalid(
            "p_lease", "is not a lease held now (" + std::to_string(static_cast<long long>(id)) +
                           "): released already, ended with its transaction or session, past "
                           "its maximum hold time, or never acquired");
    if (held != nullptr) {
        std::size_t kept = 0;
        for (const HeldLease& lease : *held) {
            if (lease.id != id)
                (*held)[kept++] = lease;
        }
        held->resize(kept);
    }
    return BoolGetDatum(true);
}

// ratelimit.in_flight(p_key) -> the units the key holds in live leases.
Datum in_flight_body(FunctionCallInfo fcinfo) {
    region.require_available();
    const Datum key = key_argument(fcinfo, 0, "p_key");
    const KeyHash hash = lease_key(key);
    const int partition = LeaseTable::partition_of(hash);
    const Micros now = clock_now();
    const std::int64_t units = with_partition(
        partition, [&](LeaseTable& table) { return table.in_flight(partition, hash, now); });
    return Int32GetDatum(static_cast<std::int32_t>(units));
}

}  // namespace

void define_lease_settings() {
    if (!process_shared_preload_libraries_in_progress)
        return;
    DefineCustomIntVariable(
        "ratelimit.lease_capacity",
        "Leases (ratelimit.acquire) that can be held at once, over all keys (56 bytes of "
        "shared memory each).",
        "They are spread over 64 partitions by key; an acquire finding its partition full "
        "fails with SQLSTATE 53200.",
        &capacity_setting, 10000, static_cast<int>(kMinLeaseCapacity),
        static_cast<int>(kMaxLeaseCapacity), PGC_POSTMASTER, 0, nullptr, nullptr, nullptr);
}

void install_leases() {
    region.install();
}

}  // namespace ratelimit::pg

RATELIMIT_SQL_FUNCTION(ratelimit_acquire, ratelimit::pg::acquire_body)
RATELIMIT_SQL_FUNCTION(ratelimit_release, ratelimit::pg::release_body)
RATELIMIT_SQL_FUNCTION(ratelimit_in_flight, ratelimit::pg::in_flight_body)
