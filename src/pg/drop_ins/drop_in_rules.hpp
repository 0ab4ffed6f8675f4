// What the drop-ins read from the server before deciding: the policy of their name from the
// policy cache, the settings ratelimit.dropin_caller_limits and ratelimit.dropin_require_policy,
// and whether the current role is trusted (see ratelimit/drop_in_limits.hpp for the rule); and,
// with ratelimit.dropin_engine, where they keep their counts instead of the apps' tables.
#pragma once

#include <cstdint>
#include <optional>

#include "pg/engines/key_state_table.hpp"
#include "pg/bridge/postgres.hpp"
#include "ratelimit/drop_in_limits.hpp"
#include "ratelimit/engine.hpp"

namespace ratelimit::pg {

// The limit and window the call enforces. `prefix` and the text `name` make the policy's name
// (rpc.<p_rpc_name>, endpoint.<p_endpoint>); the caller's values must already be validated.
// Throws ArgumentError (42501) when the settings refuse the call; reads no table through SQL.
DropInLimit drop_in_limit_for(const DropInArguments& arguments, const char* prefix, Datum name,
                              std::int64_t caller_limit, std::int64_t caller_window);

// ---- the drop-ins on the engines (ratelimit.dropin_engine) ----------------------------------

// The engine ratelimit.dropin_engine names; nullopt for `table`, the apps' own tables.
std::optional<Engine> drop_in_engine();

// Each drop-in's keys live in a namespace of their own, named after the app's table they stand
// in for. The names hold a '/', which no policy name may, and are not the native API's '', so
// no native key or policy subject reaches a drop-in's counter, nor the other way round.
enum class DropInSpace { kRpcRateLimits, kRateLimits, kRateLimitBuckets };
Datum drop_in_space(DropInSpace space);

// The key "<user id>:<name>" (the id in its 36-character text form, so the split is unambiguous).
Datum user_name_key(const pg_uuid_t* user_id, Datum name);

// The schema whose state tables the table engines write (the extension's `ratelimit`).
Oid drop_in_state_schema();

// A count kept in the window open for `key`, as the apps' tables keep it: every call adds
// `increment`, allowed or not; a window ends where it ended when it opened, whatever later calls
// pass; when none is open at `now`, a new one opens that ends at `new_window_end`. The window is
// open at its end instant itself when `end_inclusive` (rpc_rate_limits: restarted once
// window_expires_at < now), not when false (rate_limits: open while expires_at > now). The count
// saturates at 2^31 - 1, like the tables' integer columns.
struct WindowCount {
    std::int64_t count = 0;
    Micros window_end = 0;
};
WindowCount count_in_window(Engine engine, const StateKey& key, Micros now, Micros new_window_end,
                            bool end_inclusive, std::int64_t increment, const char* function_name);

}  // namespace ratelimit::pg
