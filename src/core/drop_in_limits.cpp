#include "ratelimit/drop_in_limits.hpp"

#include "ratelimit/error.hpp"

namespace ratelimit {

std::int64_t whole_units(Micros period, Micros unit) {
    return period / unit + (period % unit > 0 ? 1 : 0);
}

DropInLimit drop_in_limit(const DropInArguments& arguments, const std::string& policy_name,
                          const std::optional<DropInPolicy>& policy, std::int64_t caller_limit,
                          std::int64_t caller_window, const DropInRules& rules) {
    if (!policy) {
        if (rules.require_policy && !rules.trusted_caller) {
            throw ArgumentError::not_allowed(
                arguments.name, "has no policy " + policy_name +
                                    ": ratelimit.dropin_require_policy refuses limits chosen by "
                                    "the caller");
        }
        return DropInLimit{caller_limit, caller_window * arguments.unit};
    }
    const std::int64_t window = whole_units(policy->period, arguments.unit);
    if (rules.caller_limits == CallerLimits::kMustMatch) {
        const char* setting = " (ratelimit.dropin_caller_limits is must_match)";
        if (caller_limit != policy->limit) {
            throw ArgumentError::not_allowed(
                arguments.limit, "must be " + std::to_string(policy->limit) +
                                     ", the limit of the policy " + policy_name + setting +
                                     ", got " + std::to_string(caller_limit));
        }
        if (caller_window != window) {
            throw ArgumentError::not_allowed(
                arguments.window, "must be " + std::to_string(window) +
                                      ", the period of the policy " + policy_name + setting +
                                      ", got " + std::to_string(caller_window));
        }
    }
    return DropInLimit{policy->limit, window * arguments.unit};
}

std::int64_t seconds_until(Micros end, Micros now) {
    return (end - now + kMicrosPerSecond - 1) / kMicrosPerSecond;
}

}  // namespace ratelimit
