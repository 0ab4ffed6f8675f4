#include "pg/native/leases.hpp"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "pg/bridge/arguments.hpp"
#include "pg/bridge/clock.hpp"
#include "pg/bridge/extension_schema.hpp"
#include "pg/bridge/guard.hpp"
#include "pg/shared_memory/lwlock_scope.hpp"
#include "pg/engines/memory_engine.hpp"
#include "pg/policies/policy_cache.hpp"
#include "pg/policies/check.hpp"
#include "pg/bridge/postgres.hpp"
#include "pg/bridge/result_row.hpp"
#include "pg/bridge/settings.hpp"
#include "pg/shared_memory/shared_region.hpp"
#include "pg/engines/state_engines.hpp"
#include "ratelimit/algorithms.hpp"
#include "ratelimit/error.hpp"
#include "ratelimit/lease_table.hpp"

extern "C" {
#include "access/htup_details.h"
#include "access/xact.h"
#include "funcapi.h"
#include "utils/acl.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/typcache.h"
#include "storage/ipc.h"
#include "storage/lwlock.h"
#include "storage/shmem.h"
#include "utils/guc.h"
}

namespace ratelimit::pg {
namespace {

std::size_t table_bytes() {
    return LeaseTable::bytes_needed(setting::lease_capacity);
}

void create_table(void* block) {
    LeaseTable::create(block, setting::lease_capacity);
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

// p_scope: true for 'session', false for 'transaction'.
bool scope_argument(FunctionCallInfo fcinfo, int index) {
    const std::string_view scope = name_argument(fcinfo, index, "p_scope");
    const bool session = scope == "session";
    if (!session && scope != "transaction")
        throw ArgumentError::invalid("p_scope", "must be transaction or session (got \"" +
                                                    std::string(scope.substr(0, 64)) + "\")");
    return session;
}

// This call's database and role: the lease's owner.
LeaseOwner current_owner() {
    LeaseOwner owner;
    call_postgres([&] {
        owner.database = MyDatabaseId;
        owner.role = GetUserId();
    });
    return owner;
}

// Refuses (42501) a release of a lease held in another database, or by a role whose
// privileges the current one does not have: an identifier is not a capability.
void require_may_release(const LeaseOwner& holder) {
    const LeaseOwner caller = current_owner();
    bool allowed = holder.database == caller.database;
    if (allowed && holder.role != caller.role)
        call_postgres([&] { allowed = has_privs_of_role(caller.role, holder.role); });
    if (!allowed)
        throw ArgumentError::not_allowed(
            "p_lease",
            "names a lease taken by another role or in another database: only its "
            "own role (or one with that role's privileges), in its own database, may "
            "release it");
}

// Takes `cost` of `limit` units for the key hashed `hash` when they fit, held by this
// backend's transaction or session; a full partition is an error (53200).
LeaseAnswer take_lease(const KeyHash& hash, std::int64_t limit, std::int64_t cost, Micros now,
                       Micros max_hold, bool session) {
    prepare_backend();
    held->reserve(held->size() + 1);  // noting the lease below cannot fail
    const int partition = LeaseTable::partition_of(hash);
    const std::uint32_t bits = random_bits();
    const LeaseOwner owner = current_owner();
    const LeaseAnswer answer = with_partition(partition, [&](LeaseTable& table) {
        return table.acquire(partition, hash, limit, cost, now, max_hold ? now + max_hold : 0,
                             session_token, bits, owner);
    });
    if (answer.table_full) {
        const int capacity = setting::lease_capacity;
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
    return answer;
}

// ---- the SQL functions ----------------------------------------------------------------------

// A ratelimit.lease row: lease_id, allowed, limit, in_flight, retry_after_ms (each optional
// but allowed).
Datum lease_datum(FunctionCallInfo fcinfo, std::optional<std::uint64_t> id, bool allowed,
                  std::optional<std::int64_t> limit, std::optional<std::int64_t> in_flight,
                  std::optional<Micros> retry_after) {
    constexpr int kFields = 5;
    Datum values[kFields] = {0};
    bool nulls[kFields] = {false};
    nulls[0] = !id.has_value();
    values[0] = Int64GetDatum(static_cast<std::int64_t>(id.value_or(0)));
    values[1] = BoolGetDatum(allowed);
    nulls[2] = !limit.has_value();
    values[2] = Int32GetDatum(static_cast<std::int32_t>(limit.value_or(0)));
    nulls[3] = !in_flight.has_value();
    values[3] = Int32GetDatum(static_cast<std::int32_t>(in_flight.value_or(0)));
    nulls[4] = !retry_after.has_value();
    values[4] = Int64GetDatum(milliseconds_up(retry_after.value_or(0)));
    Datum result = 0;
    call_postgres([&] {
        result = HeapTupleGetDatum(heap_form_tuple(returned_row_descriptor(fcinfo), values, nulls));
    });
    return result;
}

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
    const bool session = scope_argument(fcinfo, 3);
    const Micros max_hold = PG_ARGISNULL(4) ? 0 : interval_argument(fcinfo, 4, "p_max_hold");
    if (max_hold != 0 && max_hold < kMinPeriod)
        throw ArgumentError::invalid("p_max_hold", "must be at least 1 millisecond");
    const Micros now = clock_now_checked();
    const LeaseAnswer answer = take_lease(lease_key(key), limit, cost, now, max_hold, session);
    return lease_datum(fcinfo,
                       answer.allowed ? std::optional<std::uint64_t>(answer.id) : std::nullopt,
                       answer.allowed, limit, answer.in_flight,
                       answer.allowed ? std::nullopt : answer.retry_after);
}

// ratelimit.release(p_lease) -> true; an identifier that is not held is an error.
Datum release_body(FunctionCallInfo fcinfo) {
    region.require_available();
    if (PG_ARGISNULL(0))
        throw ArgumentError::null("p_lease");
    const auto id = static_cast<std::uint64_t>(PG_GETARG_INT64(0));
    const int partition = LeaseTable::attach(table_block()).partition_of_lease(id);
    const Micros now = clock_now();
    const std::optional<LeaseOwner> holder =
        partition < 0 ? std::nullopt : with_partition(partition, [&](LeaseTable& table) {
            return table.owner_of(partition, id, now);
        });
    if (holder)
        require_may_release(*holder);
    // Looked up again: the lease may have ended meanwhile (its identifier is never reused).
    const bool released = holder && with_partition(partition, [&](LeaseTable& table) {
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

// ---- leases through a policy -------------------------------------------------------------------

// A concurrency policy's limit decided by the lease table: its subjects' leases are keyed by
// the policy's name and the subject (hashed as the memory engine hashes a policy's key), so
// that neither another policy's nor a native key's leases share its slots. A lease is held at
// most the policy's period.
class PolicyLeases final : public InFlightLimit {
  public:
    explicit PolicyLeases(bool session) : session_(session) {}

    Decision take(const StateKey& key, const Limit& limit, std::int64_t cost, Micros now) override {
        answer = take_lease(memory_key(key).hash, limit.limit, cost, now, limit.period, session_);
        decided = true;
        return decision(limit, answer.allowed);
    }

    Decision look(const StateKey& key, const Limit& limit, Micros now) override {
        const KeyHash hash = memory_key(key).hash;
        const int partition = LeaseTable::partition_of(hash);
        answer = LeaseAnswer{};
        answer.in_flight = with_partition(
            partition, [&](LeaseTable& table) { return table.in_flight(partition, hash, now); });
        decided = true;
        return decision(limit, false);
    }

    LeaseAnswer answer;
    bool decided = false;  // take or look ran: the policy's limit was looked at

  private:
    // As a policy reports it: remaining is what a lease could take now; a denial waits for the
    // first lease to reach its maximum hold; the key is whole again once every lease it holds
    // has ended, at most a period from now.
    Decision decision(const Limit& limit, bool allowed) const {
        Decision d;
        d.allowed = allowed;
        d.limit = limit.limit;
        d.remaining = std::max<std::int64_t>(0, limit.limit - answer.in_flight);
        d.retry_after = allowed ? 0 : answer.retry_after.value_or(0);
        d.reset_after = answer.in_flight > 0 ? limit.period : 0;
        return d;
    }

    bool session_;
};

// ratelimit.acquire_policy(p_policy, p_key, p_cost, p_scope, p_tier, p_ip, p_user)
// -> ratelimit.lease
Datum acquire_policy_body(FunctionCallInfo fcinfo) {
    region.require_available();
    const bool session = scope_argument(fcinfo, 3);
    if (!PG_ARGISNULL(2) && PG_GETARG_INT32(2) < 1)
        throw ArgumentError::invalid(
            "p_cost", "must be at least 1 (got " + std::to_string(PG_GETARG_INT32(2)) + ")");

    PolicyLeases leases(session);
    const PolicySubject subject = decide_policy_subject(fcinfo, &leases);
    const PolicyAnswer& answer = subject.answer;

    // Which way the call went shows in which fields are NULL (lease_decision reads them back):
    // a lease held has an identifier; a limit looked at has in_flight; a deny entry has
    // neither, and the policy's limit; an allow entry only the limit; a bypass nothing.
    std::optional<std::uint64_t> id;
    std::optional<std::int64_t> limit;
    std::optional<std::int64_t> in_flight;
    std::optional<Micros> retry_after;
    if (subject.charged)
        id = leases.answer.id;
    if (leases.decided) {
        limit = subject.limit.limit;
        in_flight = leases.answer.in_flight;
        if (!answer.allowed)
            retry_after = leases.answer.retry_after;
    } else if (answer.reason == PolicyReason::kDenyList) {
        limit = answer.limit;
        retry_after = answer.retry_after;
    } else if (answer.reason == PolicyReason::kAllowList) {
        const PolicyRule* rule = policy_catalog(subject.schema).policy(subject.policy);
        if (rule != nullptr)
            limit = rule->limit;
    }
    return lease_datum(fcinfo, id, answer.allowed, limit, in_flight, retry_after);
}

// ratelimit.lease_decision(p_policy, p_lease) -> ratelimit.policy_decision: what
// acquire_policy answered, as check would report it, for http_headers and http_body. The
// reasons of a limit looked at are the leases' own ('leased', 'concurrency_limited'), so that
// the headers count the limit in concurrent requests.
Datum lease_decision_body(FunctionCallInfo fcinfo) {
    const std::string_view name = name_argument(fcinfo, 0, "p_policy");
    Oid schema = InvalidOid;
    call_postgres([&] { schema = extension_schema(); });
    const PolicyCatalog& catalog = policy_catalog(schema);
    const PolicyRule* rule = &concurrency_policy(catalog, name);
    if (PG_ARGISNULL(1))
        throw ArgumentError::null("p_lease");
    constexpr int kLeaseFields = 5;
    Datum lease[kLeaseFields];
    bool lease_nulls[kLeaseFields];
    bool wrong_type = false;
    call_postgres([&] { wrong_type = !row_argument(fcinfo, 1, kLeaseFields, lease, lease_nulls); });
    if (wrong_type)
        throw ArgumentError::invalid("p_lease", "must be a ratelimit.lease");
    bool all_null = true;
    for (bool is_null : lease_nulls)
        all_null = all_null && is_null;
    if (all_null)
        throw ArgumentError::null("p_lease");
    if (lease_nulls[1])
        throw ArgumentError::invalid("p_lease", "has no answer (allowed is NULL)");
    const bool allowed = DatumGetBool(lease[1]);
    const bool held_lease = !lease_nulls[0];
    const std::optional<std::int64_t> limit =
        lease_nulls[2] ? std::nullopt : std::optional<std::int64_t>(DatumGetInt32(lease[2]));
    const bool in_flight = !lease_nulls[3];
    const std::int64_t units = in_flight ? DatumGetInt32(lease[3]) : 0;
    const std::optional<std::int64_t> retry_ms =
        lease_nulls[4] ? std::nullopt : std::optional<std::int64_t>(DatumGetInt64(lease[4]));
    const std::int64_t period_ms = (rule->period + 500) / 1000;
    const Micros now = clock_now_checked();

    // Read back as acquire_policy wrote it (see there).
    PolicyReason reason = PolicyReason::kWithinLimits;
    const char* reason_text = "leased";
    std::optional<std::int64_t> remaining;
    std::optional<std::int64_t> retry_after_ms;
    std::optional<std::int64_t> reset_after_ms;
    bool reported = true;  // the policy is reported (a limit was looked at, or a deny entry)
    if (allowed && !held_lease && !in_flight) {
        reason = limit ? PolicyReason::kAllowList : PolicyReason::kBypass;
        reported = false;
        retry_after_ms = 0;
        reset_after_ms = 0;
    } else if (!allowed && !in_flight) {
        reason = PolicyReason::kDenyList;
        remaining = 0;
        retry_after_ms = retry_ms;
        reset_after_ms = retry_ms;
    } else {
        if (limit)
            remaining = std::max<std::int64_t>(0, *limit - units);
        if (allowed) {
            retry_after_ms = 0;
            reset_after_ms = period_ms;
        } else if (retry_ms) {
            reason = PolicyReason::kLimited;
            reason_text = "concurrency_limited";
            retry_after_ms = retry_ms;
            reset_after_ms = std::max(*retry_ms, period_ms);
        } else {
            // Every lease of a concurrency policy has a maximum hold, so a denial with no
            // release to wait for held nothing: the cost was above the limit.
            reason = PolicyReason::kCostExceedsLimit;
            reset_after_ms = units > 0 ? period_ms : 0;
        }
    }
    if (reason != PolicyReason::kWithinLimits && reason != PolicyReason::kLimited)
        reason_text = reason_name(reason);

    Datum result = 0;
    const std::string& policy_name = rule->name;
    call_postgres([&] {
        TupleDesc desc = returned_row_descriptor(fcinfo);
        if (desc->natts < 11)
            elog(ERROR, "ratelimit: the function must return ratelimit.policy_decision");
        Datum* values = static_cast<Datum*>(palloc0(sizeof(Datum) * desc->natts));
        bool* nulls = static_cast<bool*>(palloc(sizeof(bool) * desc->natts));
        for (int i = 0; i < desc->natts; ++i)
            nulls[i] = true;
        auto set = [&](int i, Datum value) {
            values[i] = value;
            nulls[i] = false;
        };
        set(0, BoolGetDatum(allowed));
        if (reported)
            set(1, PointerGetDatum(cstring_to_text_with_len(policy_name.data(),
                                                            static_cast<int>(policy_name.size()))));
        if (reported && limit)
            set(2, Int32GetDatum(static_cast<std::int32_t>(*limit)));
        if (remaining)
            set(3, Int32GetDatum(static_cast<std::int32_t>(*remaining)));
        if (retry_after_ms)
            set(4, Int64GetDatum(*retry_after_ms));
        if (reset_after_ms)
            set(5, Int64GetDatum(*reset_after_ms));
        if (reported)
            set(6, Int64GetDatum(period_ms));
        set(8, CStringGetTextDatum(reason_text));
        set(9, PointerGetDatum(construct_empty_array(TEXTOID)));
        set(10, TimestampTzGetDatum(to_timestamptz(now)));
        result = HeapTupleGetDatum(heap_form_tuple(desc, values, nulls));
    });
    return result;
}

}  // namespace

void install_leases() {
    region.install();
}

}  // namespace ratelimit::pg

RATELIMIT_SQL_FUNCTION(ratelimit_acquire, ratelimit::pg::acquire_body)
RATELIMIT_SQL_FUNCTION(ratelimit_release, ratelimit::pg::release_body)
RATELIMIT_SQL_FUNCTION(ratelimit_in_flight, ratelimit::pg::in_flight_body)
RATELIMIT_SQL_FUNCTION(ratelimit_acquire_policy, ratelimit::pg::acquire_policy_body)
RATELIMIT_SQL_FUNCTION(ratelimit_lease_decision, ratelimit::pg::lease_decision_body)
