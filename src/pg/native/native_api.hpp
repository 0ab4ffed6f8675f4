// The native API (src/pg/native/native_api.cpp): its consume path, for the calls built on it
// (ratelimit.reserve and settle in src/pg/native/reservations.cpp): the same argument checks, the
// same engine, the same decision, so that a reservation decides exactly as ratelimit.consume does.
#pragma once

#include <cstdint>

#include "pg/bridge/postgres.hpp"
#include "ratelimit/algorithms.hpp"
#include "ratelimit/engine.hpp"

namespace ratelimit::pg {

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
