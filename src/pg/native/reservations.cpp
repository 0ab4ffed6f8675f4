#include "pg/native/reservations.hpp"

#include <algorithm>
#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "pg/bridge/arguments.hpp"
#include "pg/bridge/clock.hpp"
#include "pg/bridge/extension_schema.hpp"
#include "pg/bridge/guard.hpp"
#include "pg/shared_memory/lwlock_scope.hpp"
#include "pg/native/native_api.hpp"
#include "pg/policies/policy_cache.hpp"
#include "pg/policies/check.hpp"
#include "pg/bridge/postgres.hpp"
#include "pg/bridge/result_row.hpp"
#include "pg/bridge/settings.hpp"
#include "pg/shared_memory/shared_region.hpp"
#include "pg/engines/state_engines.hpp"
#include "ratelimit/error.hpp"
#include "ratelimit/validation.hpp"
#include "ratelimit/reservation_table.hpp"

extern "C" {
#include "access/htup_details.h"
#include "access/xact.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "storage/ipc.h"
#include "storage/lwlock.h"
#include "storage/shmem.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/lsyscache.h"
}

namespace ratelimit::pg {
namespace {

std::size_t table_bytes() {
    return ReservationTable::bytes_needed(setting::reservation_capacity);
}

void create_table(void* block) {
    ReservationTable::create(block, setting::reservation_capacity);
}

// A restart (or a crash) makes shared memory anew: open reservations are forgotten, which
// leaves each charged its estimate, as its expiry would.
SharedRegion region("ratelimit reservations", kReservationPartitions, "reservations", table_bytes,
                    create_table);

void* table_block() {
    return region.table();
}

LWLock* partition_lock(int partition) {
    return region.lock(partition);
}

template <typename Work>
auto with_partition(int partition, Work&& work) {
    return region.with_partition<ReservationTable>(partition, std::forward<Work>(work));
}

// ---- what this backend's transactions changed -----------------------------------------------

// A random token for this backend's life, stored in the slots its transactions hold.
std::uint64_t session_token = 0;

// Each change of a slot by this backend's transaction, in order, with the subtransaction that
// made it and the slot's state before it, so that a rollback of either puts it back.
struct Change {
    std::uint64_t id;
    SubTransactionId subtransaction;
    ReservationState previous;
};
std::vector<Change>* changes = nullptr;

// Called from transaction callbacks: no error can happen here.
template <typename Apply>
void on_slot(std::uint64_t id, Apply&& apply) {
    const int partition = ReservationTable::attach(table_block()).partition_of(id);
    if (partition < 0)
        return;
    LWLockAcquire(partition_lock(partition), LW_EXCLUSIVE);
    ReservationTable table = ReservationTable::attach(table_block());
    apply(table, partition);
    LWLockRelease(partition_lock(partition));
}

void commit_change(const Change& change) {
    on_slot(change.id, [&](ReservationTable& table, int partition) {
        table.commit(partition, change.id, session_token);
    });
}

void roll_back_change(const Change& change) {
    on_slot(change.id, [&](ReservationTable& table, int partition) {
        table.roll_back(partition, change.id, session_token, change.previous);
    });
}

// Rolls back, newest first, the changes `ends` says ended, and keeps the rest.
template <typename Ends>
void roll_back_where(Ends&& ends) {
    if (changes == nullptr)
        return;
    for (auto it = changes->rbegin(); it != changes->rend(); ++it) {
        if (ends(*it))
            roll_back_change(*it);
    }
    changes->erase(std::remove_if(changes->begin(), changes->end(), ends), changes->end());
}

void at_transaction_end(XactEvent event, void*) {
    if (changes == nullptr || changes->empty())
        return;
    switch (event) {
        case XACT_EVENT_PRE_PREPARE:
            // A prepared transaction's table writes are decided later, by another session; the
            // registry could not follow them.
            ereport(ERROR, (errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
                            errmsg("ratelimit: cannot PREPARE a transaction that has reserved, "
                                   "settled or cancelled a reservation")));
            break;
        case XACT_EVENT_COMMIT:
        case XACT_EVENT_PARALLEL_COMMIT:
            for (const Change& change : *changes)
                commit_change(change);
            changes->clear();
            break;
        case XACT_EVENT_ABORT:
        case XACT_EVENT_PARALLEL_ABORT:
            roll_back_where([](const Change&) { return true; });
            break;
        default:
            break;
    }
}

void at_subtransaction_end(SubXactEvent event, SubTransactionId mine, SubTransactionId parent,
                           void*) {
    if (changes == nullptr)
        return;
    if (event == SUBXACT_EVENT_ABORT_SUB) {
        roll_back_where([&](const Change& change) { return change.subtransaction == mine; });
    } else if (event == SUBXACT_EVENT_COMMIT_SUB) {
        // The parent now made them: its rollback undoes them.
        for (Change& change : *changes) {
            if (change.subtransaction == mine)
                change.subtransaction = parent;
        }
    }
}

// The first reservation call of this backend: a token, the list and the callbacks.
void prepare_backend() {
    if (session_token != 0)
        return;
    std::uint64_t token = 0;
    call_postgres([&] {
        if (!pg_strong_random(&token, sizeof token))
            ereport(ERROR, (errcode(ERRCODE_INTERNAL_ERROR),
                            errmsg("ratelimit: could not generate a random reservation token")));
    });
    changes = new std::vector<Change>();
    call_postgres([&] {
        RegisterXactCallback(at_transaction_end, nullptr);
        RegisterSubXactCallback(at_subtransaction_end, nullptr);
    });
    session_token = token == 0 ? 1 : token;
}

std::uint32_t random_bits() {
    std::uint32_t bits = 0;
    call_postgres([&] {
        if (!pg_strong_random(&bits, sizeof bits))
            ereport(ERROR,
                    (errcode(ERRCODE_INTERNAL_ERROR),
                     errmsg("ratelimit: could not generate a random reservation identifier")));
    });
    return bits;
}

SubTransactionId current_subtransaction() {
    SubTransactionId subtransaction = InvalidSubTransactionId;
    call_postgres([&] { subtransaction = GetCurrentSubTransactionId(); });
    return subtransaction;
}

// Takes a slot for a reservation about to be made, before anything is decided, so that a full
// registry refuses the call before it consumes. The slot is pending in this transaction: its
// rollback (a bad argument, any error) frees it.
std::uint64_t take_slot(Micros now) {
    const std::uint32_t bits = random_bits();
    const int first = static_cast<int>(bits % kReservationPartitions);
    for (int i = 0; i < kReservationPartitions; ++i) {
        const int partition = (first + i) % kReservationPartitions;
        const std::uint64_t id = with_partition(partition, [&](ReservationTable& table) {
            return table.take(partition, now, session_token, bits);
        });
        if (id != 0) {
            changes->push_back(Change{id, current_subtransaction(), ReservationState::kFree});
            return id;
        }
    }
    const int capacity = setting::reservation_capacity;
    call_postgres([&] {
        ereport(ERROR, (errcode(ERRCODE_OUT_OF_MEMORY),
                        errmsg("ratelimit: no room for another reservation"),
                        errdetail("Every reservation slot is held by an open reservation."),
                        errhint("Raise ratelimit.reservation_capacity (now %d reservations in "
                                "all), or settle reservations sooner.",
                                capacity)));
    });
    throw std::logic_error("unreachable");
}

// Frees a slot taken for a reservation that was not made (the call was denied).
void give_back_slot(std::uint64_t id) {
    const int partition = ReservationTable::attach(table_block()).partition_of(id);
    with_partition(partition, [&](ReservationTable& table) {
        table.roll_back(partition, id, session_token, ReservationState::kFree);
        return true;
    });
    changes->erase(std::remove_if(changes->begin(), changes->end(),
                                  [&](const Change& change) { return change.id == id; }),
                   changes->end());
}

// ---- the SQL functions ----------------------------------------------------------------------

constexpr int kConsumeArguments = 7;  // p_key .. p_burst, as ratelimit.consume takes them
constexpr int kHoldArgument = 7;

// The reservation row of an answer: `id` when a reservation was opened, else NULL with
// expires_at; limit and remaining NULL when no limit was checked, retry_after_ms NULL when no
// wait will do (a deny entry without an end).
Datum reservation_datum(FunctionCallInfo fcinfo, std::optional<std::uint64_t> id, bool allowed,
                        std::optional<std::int64_t> limit, std::optional<std::int64_t> remaining,
                        std::optional<Micros> retry_after, std::optional<Micros> reset_after,
                        Micros expires_at) {
    constexpr int kFields = 7;
    Datum values[kFields] = {0};
    bool nulls[kFields] = {false};
    nulls[0] = !id.has_value();
    values[0] = Int64GetDatum(static_cast<std::int64_t>(id.value_or(0)));
    values[1] = BoolGetDatum(allowed);
    nulls[2] = !limit.has_value();
    values[2] = Int32GetDatum(static_cast<std::int32_t>(limit.value_or(0)));
    nulls[3] = !remaining.has_value();
    values[3] = Int32GetDatum(static_cast<std::int32_t>(remaining.value_or(0)));
    nulls[4] = !retry_after.has_value();
    values[4] = Int64GetDatum(milliseconds_up(retry_after.value_or(0)));
    nulls[5] = !reset_after.has_value();
    values[5] = Int64GetDatum(milliseconds_up(reset_after.value_or(0)));
    nulls[6] = !id.has_value();
    values[6] = TimestampTzGetDatum(to_timestamptz(expires_at));
    Datum result = 0;
    call_postgres([&] {
        result = HeapTupleGetDatum(heap_form_tuple(returned_row_descriptor(fcinfo), values, nulls));
    });
    return result;
}

// p_hold, checked: 1 millisecond to 1 day.
Micros hold_argument(FunctionCallInfo fcinfo, int index) {
    const Micros hold = interval_argument(fcinfo, index, "p_hold");
    if (hold < kMinReservationHold)
        throw ArgumentError::invalid("p_hold", "must be at least 1 millisecond");
    if (hold > kMaxReservationHold)
        throw ArgumentError::invalid("p_hold", "must be at most 1 day");
    return hold;
}

// Runs `decide` (consume's or check's own path), reporting its p_cost as p_estimate: the
// reservation's cost is its estimate.
template <typename Decide>
auto with_cost_as_estimate(Decide decide) -> decltype(decide()) {
    try {
        return decide();
    } catch (const ArgumentError& error) {
        if (error.argument() != "p_cost")
            throw;
        const std::string detail = std::string(error.what()).substr(error.argument().size());
        throw ArgumentError(error.kind(), "p_estimate", "p_estimate" + detail);
    }
}

// Fills slot `id`, taken by take_slot(), with a reservation of `estimate` units of `key` (in
// key space `space`: empty for a native key, a policy's name) under `limit` on `engine`.
void open_reservation(std::uint64_t id, Engine engine, const Limit& limit, std::int64_t estimate,
                      Micros expires_at, std::string_view key, std::string_view space) {
    Reservation made;
    call_postgres([&] {
        made.database = MyDatabaseId;
        made.role = GetUserId();
    });
    made.engine = engine;
    made.limit = limit;
    made.estimate = estimate;
    made.expires_at = expires_at;
    made.key_length = static_cast<std::uint16_t>(key.size());
    std::copy(key.begin(), key.end(), made.key);
    if (space.size() > kMaxReservationSpaceBytes)  // the policies table allows no longer
        throw std::length_error("ratelimit: policy name too long for a reservation");
    made.space_length = static_cast<std::uint8_t>(space.size());
    std::copy(space.begin(), space.end(), made.space);
    const int partition = ReservationTable::attach(table_block()).partition_of(id);
    with_partition(partition, [&](ReservationTable& table) {
        return table.fill(partition, id, session_token, made);
    });
}

// ratelimit.reserve(p_key, p_limit, p_period, p_estimate, p_algorithm, p_engine, p_burst,
// p_hold) -> ratelimit.reservation
Datum reserve_body(FunctionCallInfo fcinfo) {
    region.require_available();
    const Micros hold = hold_argument(fcinfo, kHoldArgument);
    prepare_backend();
    changes->reserve(changes->size() + 2);  // noting the slot's changes cannot fail
    const std::uint64_t id = take_slot(clock_now_checked());

    // The first seven arguments are consume's, read and decided by consume's own path: a view
    // of the call that holds only them.
    LOCAL_FCINFO(consume_args, kConsumeArguments);
    InitFunctionCallInfoData(*consume_args, fcinfo->flinfo, kConsumeArguments, fcinfo->fncollation,
                             nullptr, nullptr);
    for (int i = 0; i < kConsumeArguments; ++i)
        consume_args->args[i] = fcinfo->args[i];
    NativeCall call;
    const Decision decision = with_cost_as_estimate(
        [&] { return native_call(consume_args, Action::kConsume, "ratelimit.reserve()", &call); });

    if (decision.allowed)
        open_reservation(id, call.engine, call.limit, call.cost, call.now + hold,
                         text_bytes(call.key), std::string_view());
    else
        give_back_slot(id);
    return reservation_datum(
        fcinfo, decision.allowed ? std::optional<std::uint64_t>(id) : std::nullopt,
        decision.allowed, decision.limit, decision.remaining,
        decision.never ? std::nullopt : std::optional<Micros>(decision.retry_after),
        decision.reset_after, call.now + hold);
}

// The adjustment of a reservation made through a policy (reserve_policy): on the policy's own
// counter key, never a native key, under the limit the reservation was decided with.
Decision settle_policy_key(const Reservation& made, Datum key, Micros now, std::int64_t units,
                           Action action, const char* function_name) {
    Oid schema = InvalidOid;
    Datum space = 0;
    call_postgres([&] {
        schema = extension_schema();
        space = PointerGetDatum(
            cstring_to_text_with_len(made.space, static_cast<int>(made.space_length)));
    });
    Limit limit = made.limit;
    if (limit.window_end != 0 && now >= limit.window_end) {
        // A calendar period's window ended since the reserve: the window holding now, in the
        // policy's zone, as its next check would take it.
        const CalendarPolicy* calendar = policy_catalog(schema).calendar(made.space_text());
        if (calendar != nullptr)
            set_calendar_window(limit, calendar->unit, calendar->zone, now);
    }
    EngineStorage storage;
    StateEngine& engine = state_engine(made.engine, schema, function_name, storage);
    return engine.decide(StateKey{space, key}, limit, now, units, action);
}

// ratelimit.reserve_policy(p_policy, p_key, p_estimate, p_hold, p_tier, p_ip, p_user)
// -> ratelimit.reservation: check(p_policy, p_key, p_estimate, p_tier, p_ip, p_user), and when
// it charged the policy's key, a reservation on that key, settled by settle and cancel.
Datum reserve_policy_body(FunctionCallInfo fcinfo) {
    region.require_available();
    const Micros hold = hold_argument(fcinfo, 3);
    prepare_backend();
    changes->reserve(changes->size() + 2);  // noting the slot's changes cannot fail
    const std::uint64_t id = take_slot(clock_now_checked());

    const PolicySubject subject =
        with_cost_as_estimate([&] { return decide_policy_subject(fcinfo, nullptr); });

    const PolicyAnswer& answer = subject.answer;
    if (subject.charged)
        open_reservation(id, subject.engine, subject.limit, answer.cost, subject.now + hold,
                         text_bytes(subject.key.key), subject.policy);
    else
        give_back_slot(id);
    return reservation_datum(
        fcinfo, subject.charged ? std::optional<std::uint64_t>(id) : std::nullopt, answer.allowed,
        answer.limit, answer.remaining, answer.retry_after, answer.reset_after, subject.now + hold);
}

// Settles reservation `id` at `actual` units: refunds or charges the difference to its
// estimate, and answers what a one-unit peek says afterwards.
Datum settle(FunctionCallInfo fcinfo, std::uint64_t id, std::int64_t actual,
             const char* function_name) {
    const Micros now = clock_now_checked();
    prepare_backend();
    changes->reserve(changes->size() + 1);
    std::uint32_t database = 0;
    std::uint32_t role = 0;
    call_postgres([&] {
        database = MyDatabaseId;
        role = GetUserId();
    });
    const int partition = ReservationTable::attach(table_block()).partition_of(id);
    Reservation made;
    ReservationState previous = ReservationState::kFree;
    const bool claimed =
        partition >= 0 && with_partition(partition, [&](ReservationTable& table) {
            return table.claim(partition, id, database, role, now, session_token, &made, &previous);
        });
    // One answer for every identifier that cannot be settled here, so that it tells nothing
    // about reservations of others.
    if (!claimed)
        throw ArgumentError::invalid(
            "p_reservation", "is not an open reservation (" +
                                 std::to_string(static_cast<long long>(id)) +
                                 "): settled or cancelled already, past its hold time, rolled "
                                 "back, or never made");
    changes->push_back(Change{id, current_subtransaction(), previous});

    Datum key = 0;
    call_postgres(
        [&] { key = PointerGetDatum(cstring_to_text_with_len(made.key, made.key_length)); });
    const std::int64_t difference = actual - made.estimate;
    const Action action = difference < 0   ? Action::kRefund
                          : difference > 0 ? Action::kCharge
                                           : Action::kPeek;
    const std::int64_t units = difference == 0 ? 1 : difference < 0 ? -difference : difference;
    const Decision decision =
        made.space_length == 0
            ? native_decide(made.engine, key, made.limit, now, units, action, function_name)
            : settle_policy_key(made, key, now, units, action, function_name);
    if (made.engine == Engine::kMemory) {
        // The memory engine's adjustment is made for good: so is the settle, lest a rollback
        // reopen the reservation and a second settle adjust the key twice.
        with_partition(partition, [&](ReservationTable& table) {
            table.commit(partition, id, session_token);
            return true;
        });
        changes->pop_back();
    }
    return native_decision_datum(fcinfo, decision);
}

std::uint64_t reservation_argument(FunctionCallInfo fcinfo) {
    region.require_available();
    if (PG_ARGISNULL(0))
        throw ArgumentError::null("p_reservation");
    return static_cast<std::uint64_t>(PG_GETARG_INT64(0));
}

// ratelimit.settle(p_reservation, p_actual) -> ratelimit.decision
Datum settle_body(FunctionCallInfo fcinfo) {
    const std::uint64_t id = reservation_argument(fcinfo);
    const std::int32_t actual = int32_argument(fcinfo, 1, "p_actual");
    require_non_negative_cost("p_actual", actual);
    return settle(fcinfo, id, actual, "ratelimit.settle()");
}

// ratelimit.cancel(p_reservation) -> ratelimit.decision: a settle at 0 units.
Datum cancel_body(FunctionCallInfo fcinfo) {
    const std::uint64_t id = reservation_argument(fcinfo);
    return settle(fcinfo, id, 0, "ratelimit.cancel()");
}

}  // namespace

void install_reservations() {
    region.install();
}

}  // namespace ratelimit::pg

RATELIMIT_SQL_FUNCTION(ratelimit_reserve, ratelimit::pg::reserve_body)
RATELIMIT_SQL_FUNCTION(ratelimit_settle, ratelimit::pg::settle_body)
RATELIMIT_SQL_FUNCTION(ratelimit_cancel, ratelimit::pg::cancel_body)
RATELIMIT_SQL_FUNCTION(ratelimit_reserve_policy, ratelimit::pg::reserve_policy_body)
