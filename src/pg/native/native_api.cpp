// The native API in schema ratelimit: consume, peek, refund, reset and block on every engine,
// allow, the batch calls consume_many and peek_many, and the memory engine's stats. Arguments are
// checked in the core (one place, one message per argument) before any state is touched; the
// decision itself is the core's; this file only moves a key's state between its engine and the core
// (src/pg/engines/key_state_table.hpp and src/pg/engines/memory_engine.cpp say how each stays
// exact).
#include "pg/native/native_api.hpp"

#include <algorithm>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "pg/bridge/arguments.hpp"
#include "pg/bridge/calendar_window.hpp"
#include "pg/bridge/clock.hpp"
#include "pg/bridge/extension_schema.hpp"
#include "pg/bridge/guard.hpp"
#include "pg/engines/key_state_table.hpp"
#include "pg/engines/memory_engine.hpp"
#include "pg/bridge/postgres.hpp"
#include "pg/bridge/result_row.hpp"
#include "pg/engines/state_engines.hpp"

extern "C" {
#include "utils/array.h"
#include "utils/typcache.h"
}
#include "ratelimit/algorithms.hpp"
#include "ratelimit/engine.hpp"
#include "ratelimit/error.hpp"
#include "ratelimit/validation.hpp"

namespace ratelimit::pg {
namespace {

Engine read_engine(FunctionCallInfo fcinfo, int index) {
    return parse_engine("p_engine", name_argument(fcinfo, index, "p_engine"));
}

// p_time_zone: the last argument of peek, refund, allow, consume_many and peek_many, and the
// one before p_max_wait in consume.
constexpr int kTimeZoneArgument = 7;

// p_max_wait: consume's last argument.
constexpr int kMaxWaitArgument = 8;

// p_max_wait: how long a call that would be denied may instead wait for its turn
// (Limit::max_delay). NULL or a zero interval: never; else a span as interval_argument reads it
// (no months, at most 365 days), the algorithm checked by require_valid_limit.
Micros max_wait_argument(FunctionCallInfo fcinfo) {
    if (PG_NARGS() <= kMaxWaitArgument || PG_ARGISNULL(kMaxWaitArgument))
        return 0;
    const Interval* span = PG_GETARG_INTERVAL_P(kMaxWaitArgument);
    if (span->month == 0) {
        // interval_argument says "greater than zero" of a zero or negative span; zero is
        // allowed here (no delay), so a negative one gets its own message.
        const __int128 length = static_cast<__int128>(span->day) * kMicrosPerDay + span->time;
        if (length == 0)
            return 0;
        if (length < 0)
            throw ArgumentError::invalid("p_max_wait",
                                         "must not be negative (NULL or '0' for no delay)");
    }
    return interval_argument(fcinfo, kMaxWaitArgument, "p_max_wait");
}

ZoneCache* zone_cache(FunctionCallInfo fcinfo);

// p_period, with a time zone given or not: a period without months and no time zone is
// measured as before, and nothing else is looked at; a calendar period sets `calendar` and
// stands for its usual length until its window is known.
Micros period_argument(FunctionCallInfo fcinfo, int index, bool zone_given,
                       CalendarUnit* calendar) {
    if (PG_ARGISNULL(index) || (PG_GETARG_INTERVAL_P(index)->month == 0 && !zone_given))
        return interval_argument(fcinfo, index, "p_period");
    const Interval* span = PG_GETARG_INTERVAL_P(index);
    require_finite_interval("p_period", span);
    *calendar = calendar_unit("p_period", span->month, span->day, span->time, zone_given);
    return nominal_calendar_window(*calendar);
}

// Everything but the key (arguments 1 to 7, the same in consume and consume_many).
LimitCall read_limit(FunctionCallInfo fcinfo) {
    LimitCall call;
    const std::int32_t limit = int32_argument(fcinfo, 1, "p_limit");
    const bool zone_given = PG_NARGS() > kTimeZoneArgument && !PG_ARGISNULL(kTimeZoneArgument);
    const Micros period = period_argument(fcinfo, 2, zone_given, &call.calendar);
    call.cost = int32_argument(fcinfo, 3, "p_cost");
    const Algorithm algorithm =
        parse_algorithm("p_algorithm", name_argument(fcinfo, 4, "p_algorithm"));
    if (call.calendar != CalendarUnit::kNone)
        require_calendar_algorithm(algorithm);
    call.engine = read_engine(fcinfo, 5);
    std::optional<std::int64_t> burst;
    if (!PG_ARGISNULL(6))
        burst = PG_GETARG_INT32(6);
    call.limit = make_limit(algorithm, limit, period, burst);
    require_non_negative_cost("p_cost", call.cost);
    if (call.engine == Engine::kMemory)
        require_memory_limit(call.limit);
    if (zone_given)
        call.zone =
            find_time_zone("p_time_zone", name_argument(fcinfo, kTimeZoneArgument, "p_time_zone"),
                           zone_cache(fcinfo));
    else if (call.calendar != CalendarUnit::kNone)
        call.zone = utc_zone();
    return call;
}

// Sets a calendar period's window, the one holding `now`; nothing for any other period.
void calendar_window(LimitCall& call, Micros now) {
    if (call.calendar != CalendarUnit::kNone)
        set_calendar_window(call.limit, call.calendar, call.zone, now);
}

// The last time zone a call site was given, kept for the rest of its statement (in fn_extra).
ZoneCache* zone_cache(FunctionCallInfo fcinfo) {
    ZoneCache* cache = nullptr;
    call_postgres([&] {
        FmgrInfo* flinfo = fcinfo->flinfo;
        if (flinfo->fn_extra == nullptr)
            flinfo->fn_extra = MemoryContextAllocZero(flinfo->fn_mcxt, sizeof(ZoneCache));
        cache = static_cast<ZoneCache*>(flinfo->fn_extra);
    });
    return cache;
}

// The schema of the table engines' tables: the extension's.
Oid tables_schema() {
    Oid schema = InvalidOid;
    call_postgres([&] { schema = extension_schema(); });
    return schema;
}

constexpr int kDecisionColumns = 5;

// The columns of a ratelimit.decision row: retry_after_ms is NULL for a cost that could never
// be allowed (there is no time to wait for).
void decision_values(const Decision& decision, Datum* values, bool* nulls) {
    values[0] = BoolGetDatum(decision.allowed);
    values[1] = Int32GetDatum(static_cast<std::int32_t>(decision.limit));
    values[2] = Int32GetDatum(static_cast<std::int32_t>(decision.remaining));
    values[3] = Int64GetDatum(milliseconds_up(decision.retry_after));
    nulls[3] = decision.never;
    values[4] = Int64GetDatum(milliseconds_up(decision.reset_after));
}

void decision_row_values(const void* rows, int index, Datum* values, bool* nulls) {
    decision_values(static_cast<const Decision*>(rows)[index], values, nulls);
}

// Called inside call_postgres(): the descriptor of the rows the function returns.
TupleDesc decision_descriptor(FunctionCallInfo fcinfo) {
    TupleDesc desc = returned_row_descriptor(fcinfo);
    if (desc->natts != kDecisionColumns)
        elog(ERROR, "ratelimit: the function must return ratelimit.decision");
    return desc;
}

Datum decision_datum(FunctionCallInfo fcinfo, const Decision& decision) {
    Datum values[kDecisionColumns];
    bool nulls[kDecisionColumns] = {false, false, false, false, false};
    decision_values(decision, values, nulls);
    Datum result = 0;
    call_postgres([&] {
        result = HeapTupleGetDatum(heap_form_tuple(decision_descriptor(fcinfo), values, nulls));
    });
    return result;
}

// A ratelimit.decision[] of `count` decisions, built in one piece (row_array).
Datum decision_array(FunctionCallInfo fcinfo, const Decision* decisions, std::size_t count) {
    const bool any_never = std::any_of(decisions, decisions + count,
                                       [](const Decision& decision) { return decision.never; });
    Datum result = 0;
    call_postgres([&] {
        result = row_array(decision_descriptor(fcinfo), static_cast<int>(count),
                           decision_row_values, decisions, any_never);
    });
    return result;
}

const char* action_function(Action action) {
    switch (action) {
        case Action::kConsume:
            return "ratelimit.consume()";
        case Action::kPeek:
            return "ratelimit.peek()";
        case Action::kRefund:
            return "ratelimit.refund()";
        case Action::kCharge:
            return "ratelimit.settle()";
    }
    return "ratelimit";
}

// The engine of a native call; only the table engines need the schema of their tables.
StateEngine& native_engine(Engine engine, const char* function_name, EngineStorage& storage) {
    const Oid schema = engine == Engine::kMemory ? InvalidOid : tables_schema();
    return state_engine(engine, schema, function_name, storage);
}

Datum limit_call(FunctionCallInfo fcinfo, Action action) {
    LimitCall call = read_limit_call(fcinfo);
    require_cost_for(call, action);
    if (action == Action::kConsume) {
        call.limit.max_delay = max_wait_argument(fcinfo);
        require_valid_limit(call.limit);
    }
    EngineStorage storage;
    StateEngine& engine = native_engine(call.engine, action_function(action), storage);
    const StateKey key{native_space(), call.key};
    const Micros now = clock_now_checked();
    calendar_window(call, now);
    return decision_datum(fcinfo, engine.decide(key, call.limit, now, call.cost, action));
}

Datum consume_body(FunctionCallInfo fcinfo) {
    return limit_call(fcinfo, Action::kConsume);
}

// ratelimit.allow(): consume's decision, as a boolean only.
Datum allow_body(FunctionCallInfo fcinfo) {
    LimitCall call = read_limit_call(fcinfo);
    EngineStorage storage;
    StateEngine& engine = native_engine(call.engine, "ratelimit.allow()", storage);
    const Micros now = clock_now_checked();
    calendar_window(call, now);
    return BoolGetDatum(engine
                            .decide(StateKey{native_space(), call.key}, call.limit, now, call.cost,
                                    Action::kConsume)
                            .allowed);
}

// consume_many and peek_many: each key decided on its own, in the order given, as a consume
// (or peek) of that key alone would be; every key is checked before the first is decided.
Datum many_call(FunctionCallInfo fcinfo, Action action, const char* function_name) {
    ManyCall many = read_many_call(fcinfo);
    const std::vector<Datum>& keys = many.keys;
    LimitCall& call = many.limit;
    std::vector<StateKey> state_keys;
    state_keys.reserve(keys.size());
    for (const Datum key : keys)
        state_keys.push_back(StateKey{native_space(), key});
    EngineStorage storage;
    StateEngine& engine = native_engine(call.engine, function_name, storage);
    const Micros now = clock_now_checked();
    calendar_window(call, now);
    std::vector<Decision> decisions(keys.size());
    engine.decide_each(state_keys, call.limit, now, call.cost, action, decisions.data());
    return decision_array(fcinfo, decisions.data(), decisions.size());
}

Datum consume_many_body(FunctionCallInfo fcinfo) {
    return many_call(fcinfo, Action::kConsume, "ratelimit.consume_many()");
}

Datum peek_many_body(FunctionCallInfo fcinfo) {
    return many_call(fcinfo, Action::kPeek, "ratelimit.peek_many()");
}

Datum peek_body(FunctionCallInfo fcinfo) {
    return limit_call(fcinfo, Action::kPeek);
}

Datum refund_body(FunctionCallInfo fcinfo) {
    return limit_call(fcinfo, Action::kRefund);
}

Datum reset_body(FunctionCallInfo fcinfo) {
    const ResetCall call = read_reset_call(fcinfo);
    EngineStorage storage;
    StateEngine& engine = native_engine(call.engine, "ratelimit.reset()", storage);
    return BoolGetDatum(engine.reset(StateKey{native_space(), call.key}));
}

Datum block_body(FunctionCallInfo fcinfo) {
    const BlockCall call = read_block_call(fcinfo);
    EngineStorage storage;
    StateEngine& engine = native_engine(call.engine, "ratelimit.block()", storage);
    const StateKey state_key{native_space(), call.key};
    const Micros now = clock_now_checked();
    return TimestampTzGetDatum(to_timestamptz(engine.block(state_key, now + call.duration, now)));
}

// ---- consume_all: several limits decided as one --------------------------------------------

// More tiers would only hold more partition locks at once; real checks use two to four.
constexpr int kMaxTiers = 16;

// The tiers of a consume_all call, checked, and their keys (keys[i] for tiers[i]).
std::vector<TierCall> read_tiers(FunctionCallInfo fcinfo, std::int64_t* cost,
                                 std::vector<StateKey>* state_keys) {
    const ArrayArgument keys = array_argument(fcinfo, 0, "p_keys", TEXTOID, true);
    const ArrayArgument limits = array_argument(fcinfo, 1, "p_limits", INT4OID, true);
    const ArrayArgument periods = array_argument(fcinfo, 2, "p_periods", INTERVALOID, true);
    const ArrayArgument algorithms = array_argument(fcinfo, 3, "p_algorithms", TEXTOID, false);
    const ArrayArgument engines = array_argument(fcinfo, 4, "p_engines", TEXTOID, false);
    const ArrayArgument bursts = array_argument(fcinfo, 5, "p_bursts", INT4OID, false);
    const ArrayArgument enforced = array_argument(fcinfo, 6, "p_enforced", BOOLOID, false);
    *cost = int32_argument(fcinfo, 7, "p_cost");
    // A cost some tier could never allow is that tier's denial, made by the decision.
    require_non_negative_cost("p_cost", *cost);

    const int count = keys.count;
    if (count < 1 || count > kMaxTiers)
        throw ArgumentError::invalid("p_keys", "must have 1 to " + std::to_string(kMaxTiers) +
                                                   " elements (got " + std::to_string(count) + ")");
    const std::pair<const char*, const ArrayArgument*> same_length[] = {
        {"p_limits", &limits},   {"p_periods", &periods}, {"p_algorithms", &algorithms},
        {"p_engines", &engines}, {"p_bursts", &bursts},   {"p_enforced", &enforced}};
    for (const auto& [name, array] : same_length) {
        if (array->given && array->count != count)
            throw ArgumentError::invalid(name, "must have as many elements as p_keys (" +
                                                   std::to_string(count) + ", got " +
                                                   std::to_string(array->count) + ")");
    }

    std::vector<TierCall> tiers(count);
    state_keys->assign(count, StateKey{native_space(), 0});
    for (int i = 0; i < count; ++i) {
        TierCall& tier = tiers[i];
        tier.index = static_cast<std::size_t>(i);
        Datum& tier_key = (*state_keys)[i].key;
        try {
            if (keys.nulls[i])
                throw ArgumentError::null("p_key");
            if (limits.nulls[i])
                throw ArgumentError::null("p_limit");
            if (periods.nulls[i])
                throw ArgumentError::null("p_period");
            call_postgres(
                [&] { tier_key = PointerGetDatum(PG_DETOAST_DATUM_PACKED(keys.values[i])); });
            require_key("p_key", text_bytes(tier_key).size());
            const Interval* span = DatumGetIntervalP(periods.values[i]);
            const Micros period = interval_value("p_period", span);
            Algorithm algorithm = Algorithm::kFixedWindow;
            if (algorithms.given) {
                if (algorithms.nulls[i])
                    throw ArgumentError::null("p_algorithm");
                algorithm = parse_algorithm("p_algorithm", text_bytes(algorithms.values[i]));
            }
            if (engines.given) {
                if (engines.nulls[i])
                    throw ArgumentError::null("p_engine");
                tier.engine = parse_engine("p_engine", text_bytes(engines.values[i]));
            }
            std::optional<std::int64_t> burst;
            if (bursts.given && !bursts.nulls[i])
                burst = DatumGetInt32(bursts.values[i]);
            tier.limit = make_limit(algorithm, DatumGetInt32(limits.values[i]), period, burst);
            if (tier.engine == Engine::kMemory)
                require_memory_limit(tier.limit);
        } catch (const ArgumentError& error) {
            rethrow_for_element(error, i);
        }
        if (enforced.given) {
            if (enforced.nulls[i])
                throw ArgumentError::null(element_name("p_enforced", i));
            tier.enforced = DatumGetBool(enforced.values[i]);
        }
        for (int j = 0; j < i; ++j) {
            if (tiers[j].engine == tier.engine &&
                text_bytes((*state_keys)[j].key) == text_bytes(tier_key))
                throw ArgumentError::invalid(element_name("p_keys", i),
                                             "repeats p_keys[" + std::to_string(j + 1) +
                                                 "] on the same engine: each key may appear once");
        }
    }
    return tiers;
}

// ratelimit.consume_all(): see sql/released/ratelimit--0.4.0--0.5.0.sql. The decision is the core's
// (decide_all_or_nothing), over the engines of src/pg/engines/state_engines.hpp.
Datum consume_all_body(FunctionCallInfo fcinfo) {
    std::int64_t cost = 0;
    std::vector<StateKey> keys;
    std::vector<TierCall> tiers = read_tiers(fcinfo, &cost, &keys);
    const bool uses_tables = std::any_of(tiers.begin(), tiers.end(), [](const TierCall& tier) {
        return tier.engine != Engine::kMemory;
    });
    const Oid schema = uses_tables ? tables_schema() : InvalidOid;
    const Micros now = clock_now_checked();
    sort_tiers(tiers, keys);
    const bool allowed = decide_tiers(tiers, keys, schema, "ratelimit.consume_all()", now, cost);

    std::vector<Decision> decisions(tiers.size());
    for (const TierCall& tier : tiers)
        decisions[tier.index] = reported_decision(tier, allowed);
    return decision_array(fcinfo, decisions.data(), decisions.size());
}

// ratelimit.validate_limit(): the checks consume makes on its settings, and nothing else.
Datum validate_limit_body(FunctionCallInfo fcinfo) {
    const std::int32_t limit = int32_argument(fcinfo, 0, "p_limit");
    const bool zone_given = PG_NARGS() > 5 && !PG_ARGISNULL(5);
    CalendarUnit calendar = CalendarUnit::kNone;
    const Micros period = period_argument(fcinfo, 1, zone_given, &calendar);
    const Algorithm algorithm =
        parse_algorithm("p_algorithm", name_argument(fcinfo, 2, "p_algorithm"));
    if (calendar != CalendarUnit::kNone)
        require_calendar_algorithm(algorithm);
    const Engine engine = read_engine(fcinfo, 3);
    std::optional<std::int64_t> burst;
    if (!PG_ARGISNULL(4))
        burst = PG_GETARG_INT32(4);
    const Limit checked = make_limit(algorithm, limit, period, burst);
    if (engine == Engine::kMemory)
        require_memory_limit(checked);
    if (zone_given)
        find_time_zone("p_time_zone", name_argument(fcinfo, 5, "p_time_zone"), zone_cache(fcinfo));
    // Valid, but not on this server: say so now rather than at the first call (a policy row
    // written here may be meant for another server, so it is not refused).
    if (engine == Engine::kMemory && !memory_engine_available()) {
        call_postgres([] {
            ereport(WARNING,
                    (errmsg("p_engine \"memory\" is not available on this server: ratelimit is "
                            "not in shared_preload_libraries"),
                     errdetail("Calls that use the memory engine fail here until it is."),
                     errhint("Add ratelimit to shared_preload_libraries in postgresql.conf and "
                             "restart the server, or use engine table or unlogged.")));
        });
    }
    PG_RETURN_VOID();
}

}  // namespace

// ---- the calls' arguments, read and checked (pg/native/native_api.hpp) ----

// A consume or peek of more than the key could ever allow is a denial (decide() makes it); a
// refund of more than one call could ever have taken is a mistake.
void require_cost_for(const LimitCall& call, Action action) {
    if (action == Action::kRefund && !cost_could_be_allowed(call.limit, call.cost))
        throw ArgumentError::invalid(
            "p_cost", "exceeds " + std::string(allowance_argument(call.limit)) + " (" +
                          std::to_string(allowance(call.limit)) +
                          "): a refund gives back at most what one call could take");
}

LimitCall read_limit_call(FunctionCallInfo fcinfo) {
    const Datum key = key_argument(fcinfo, 0, "p_key");
    LimitCall call = read_limit(fcinfo);
    call.key = key;
    return call;
}

ManyCall read_many_call(FunctionCallInfo fcinfo) {
    ManyCall call;
    call.keys = key_array_argument(fcinfo, 0, "p_key");
    call.limit = read_limit(fcinfo);
    return call;
}

ResetCall read_reset_call(FunctionCallInfo fcinfo) {
    ResetCall call;
    call.key = key_argument(fcinfo, 0, "p_key");
    call.engine = read_engine(fcinfo, 1);
    return call;
}

BlockCall read_block_call(FunctionCallInfo fcinfo) {
    BlockCall call;
    call.key = key_argument(fcinfo, 0, "p_key");
    call.duration = interval_argument(fcinfo, 1, "p_duration");
    call.engine = read_engine(fcinfo, 2);
    return call;
}

// ---- the consume path for reservations (pg/native/native_api.hpp) ----

Decision native_call(FunctionCallInfo fcinfo, Action action, const char* function_name,
                     NativeCall* out) {
    LimitCall call = read_limit_call(fcinfo);
    require_cost_for(call, action);
    EngineStorage storage;
    StateEngine& engine = native_engine(call.engine, function_name, storage);
    const StateKey key{native_space(), call.key};
    const Micros now = clock_now_checked();
    calendar_window(call, now);
    *out = NativeCall{call.key, call.limit, call.cost, call.engine, now};
    return engine.decide(key, call.limit, now, call.cost, action);
}

Decision native_decide(Engine engine_kind, Datum key, const Limit& limit, Micros now,
                       std::int64_t cost, Action action, const char* function_name) {
    EngineStorage storage;
    StateEngine& engine = native_engine(engine_kind, function_name, storage);
    return engine.decide(StateKey{native_space(), key}, limit, now, cost, action);
}

Datum native_decision_datum(FunctionCallInfo fcinfo, const Decision& decision) {
    return decision_datum(fcinfo, decision);
}

}  // namespace ratelimit::pg

RATELIMIT_SQL_FUNCTION(ratelimit_consume, ratelimit::pg::consume_body)
RATELIMIT_SQL_FUNCTION(ratelimit_peek, ratelimit::pg::peek_body)
RATELIMIT_SQL_FUNCTION(ratelimit_allow, ratelimit::pg::allow_body)
RATELIMIT_SQL_FUNCTION(ratelimit_consume_many, ratelimit::pg::consume_many_body)
RATELIMIT_SQL_FUNCTION(ratelimit_peek_many, ratelimit::pg::peek_many_body)
RATELIMIT_SQL_FUNCTION(ratelimit_refund, ratelimit::pg::refund_body)
RATELIMIT_SQL_FUNCTION(ratelimit_reset, ratelimit::pg::reset_body)
RATELIMIT_SQL_FUNCTION(ratelimit_block, ratelimit::pg::block_body)
RATELIMIT_SQL_FUNCTION(ratelimit_consume_all, ratelimit::pg::consume_all_body)
RATELIMIT_SQL_FUNCTION(ratelimit_validate_limit, ratelimit::pg::validate_limit_body)
