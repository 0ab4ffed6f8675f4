// What the drop-ins read from the server before deciding: the policy of their name from the
// policy cache, the settings ratelimit.dropin_caller_limits and ratelimit.dropin_require_policy,
// and whether the current role is trusted (see ratelimit/drop_in_limits.hpp for the rule).
#pragma once

#include <cstdint>

#include "pg/postgres.hpp"
#include "ratelimit/drop_in_limits.hpp"

namespace ratelimit::pg {

// The limit and window the call enforces. `prefix` and the text `name` make the policy's name
// (rpc.<p_rpc_name>, endpoint.<p_endpoint>); the caller's values must already be validated.
// Throws ArgumentError (42501) when the settings refuse the call; reads no table through SQL.
DropInLimit drop_in_limit_for(const DropInArguments& arguments, const char* prefix, Datum name,
                              std::int64_t caller_limit, std::int64_t caller_window);

// Declares ratelimit.dropin_caller_limits and ratelimit.dropin_require_policy.
void define_drop_in_settings();

}  // namespace ratelimit::pg
