// The limit a drop-in enforces (check_rate_limit(p_rpc_name, ...), check_rate_limit_for_user,
// increment_rate_limit). Their callers pass the limit and the window, and those callers include
// the users being limited (PostgREST exposes the functions to them), so a policy of the same
// name (rpc.<rpc name>, endpoint.<endpoint>) is the server's word and wins; without one, the
// operator may refuse caller-chosen limits to every untrusted role.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "ratelimit/time.hpp"

namespace ratelimit {

// ratelimit.dropin_caller_limits: what becomes of the caller's values when a policy exists.
enum class CallerLimits {
    kIgnore,     // the policy's values are used, the caller's ignored
    kMustMatch,  // a call whose values differ from the policy's is refused
};

// How one drop-in spells its arguments, and the unit of its window argument.
struct DropInArguments {
    const char* name;    // p_rpc_name, p_endpoint
    const char* limit;   // p_max_calls, p_limit
    const char* window;  // p_window_minutes, p_window_seconds
    Micros unit;         // kMicrosPerMinute, kMicrosPerSecond
};

// A policy's values, as ratelimit.policies holds them.
struct DropInPolicy {
    std::int64_t limit = 1;
    Micros period = 0;
};

struct DropInRules {
    CallerLimits caller_limits = CallerLimits::kIgnore;
    bool require_policy = false;  // ratelimit.dropin_require_policy
    bool trusted_caller = false;  // service_role, a superuser, the extension's owner
};

// What the call enforces.
struct DropInLimit {
    std::int64_t limit = 1;
    Micros length = 0;  // a whole number of the drop-in's unit
};

// A period as a whole number of `unit`, rounded up: the drop-in tables count whole minutes or
// seconds, and rounding down would let more calls through than the policy allows.
std::int64_t whole_units(Micros period, Micros unit);

// The limit and window a call enforces, given the caller's (already validated) values and the
// policy `policy_name`, if any. Throws ArgumentError (42501) naming the argument when
// `rules` refuse the call: must_match and a value that differs from the policy's; or no
// policy, require_policy, and a caller that is not trusted.
DropInLimit drop_in_limit(const DropInArguments& arguments, const std::string& policy_name,
                          const std::optional<DropInPolicy>& policy, std::int64_t caller_limit,
                          std::int64_t caller_window, const DropInRules& rules);

// Whole seconds from `now` to `end`, rounded up (at least 1 when now < end).
std::int64_t seconds_until(Micros end, Micros now);

}  // namespace ratelimit
