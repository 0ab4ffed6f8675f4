// The native API (src/pg/native/native_api.cpp): the readers of its calls' arguments, for the
// router's checks of them (src/pg/router/native_calls.cpp), which must refuse exactly what the
// calls refuse; and its consume path, for the calls built on it (ratelimit.reserve and settle in
// src/pg/native/reservations.cpp): the same argument checks, the same engine, the same decision,
// so that a reservation decides exactly as ratelimit.consume does.
#pragma once

#include <cstdint>
#include <vector>

#include "pg/bridge/calendar_window.hpp"
#include "pg/bridge/postgres.hpp"
#include "ratelimit/algorithms.hpp"
#include "ratelimit/engine.hpp"
#include "ratelimit/validation.hpp"

namespace ratelimit::pg {

// ---- the calls' arguments, each reader throwing ArgumentError as the call does -------------

// The arguments of consume, peek, refund and allow (p_key, p_limit, p_period, p_cost,
// p_algorithm, p_engine, p_burst and, when the call has it, p_time_zone), checked.
struct LimitCall {
    Datum key = 0;
    Limit limit;
    std::int64_t cost = 0;
    Engine engine = Engine::kTable;
    // A calendar period: its window is set once now is read.
    CalendarUnit calendar = CalendarUnit::kNone;
    pg_tz* zone = nullptr;
};
LimitCall read_limit_call(FunctionCallInfo fcinfo);

// The check of p_cost that depends on the action: refund's refuses more than one call could
// take.
void require_cost_for(const LimitCall& call, Action action);

// consume_many's and peek_many's: p_keys, each checked as a key, then the rest as
// read_limit_call reads them (`limit.key` unused).
struct ManyCall {
    std::vector<Datum> keys;
    LimitCall limit;
};
ManyCall read_many_call(FunctionCallInfo fcinfo);

// reset's: p_key and p_engine.
struct ResetCall {
    Datum key = 0;
    Engine engine = Engine::kTable;
};
ResetCall read_reset_call(FunctionCallInfo fcinfo);

// block's: p_key, p_duration and p_engine.
struct BlockCall {
    Datum key = 0;
    Micros duration = 0;
    Engine engine = Engine::kTable;
};
BlockCall read_block_call(FunctionCallInfo fcinfo);

// ---- the consume path, for reservations ----------------------------------------------------

// A native call's checked arguments and the instant it was decided at.
struct NativeCall {
    Datum key = 0;
    Limit limit;
    std::int64_t cost = 0;
    Engine engine = Engine::kTable;
    Micros now = 0;
};

// Reads consume's arguments from `fcinfo` (p_key, p_limit, p_period, p_cost, p_algorithm,
// p_engine, p_burst), checked as consume checks them, and decides `action` on the engine they
// name as consume does. `function_name` names the caller in errors.
Decision native_call(FunctionCallInfo fcinfo, Action action, const char* function_name,
                     NativeCall* call);

// Decides `action` of `cost` for a native key on `engine` (the table engines' tables are the
// extension's).
Decision native_decide(Engine engine, Datum key, const Limit& limit, Micros now, std::int64_t cost,
                       Action action, const char* function_name);

// A ratelimit.decision row.
Datum native_decision_datum(FunctionCallInfo fcinfo, const Decision& decision);

}  // namespace ratelimit::pg
