// ratelimit.check, check_all, check_many and decide_policies (src/pg/policies/check.cpp), and one
// policy decided for one subject on ratelimit.check's own path (the lists, the key's override, the
// tier, shadow, count_denied, the counters and the denial log), for the calls built on it:
// ratelimit.reserve_policy (src/pg/native/reservations.cpp), which keeps the policy's counter key
// to settle later, and ratelimit.acquire_policy (src/pg/native/leases.cpp), which takes a lease in
// the policy's own key space instead of charging a counter.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "pg/engines/key_state_table.hpp"
#include "pg/policies/policy_arguments.hpp"
#include "pg/policies/policy_effects.hpp"
#include "pg/policies/policy_cache.hpp"
#include "pg/bridge/postgres.hpp"
#include "ratelimit/algorithms.hpp"
#include "ratelimit/engine.hpp"
#include "ratelimit/policy.hpp"

namespace ratelimit::pg {

// What the call decided, and where: the policy's counter key (its name as the key space, the
// subject, hashed when the policy has hash_key), its engine and the effective limit (after
// the override and the tier) the call was decided under.
struct PolicySubject {
    PolicyAnswer answer;  // as check answers it; answer.policy is 0 when a limit was checked
    std::string policy;   // the policy's name
    StateKey key;         // datums valid for the rest of the call
    Engine engine = Engine::kTable;
    Limit limit;
    // The call charged the policy's key (or took a lease): allowed, a limit checked, and not
    // a shadow policy's would-be denial. Only then is there anything to settle or release.
    bool charged = false;
    Micros now = 0;
    Oid schema = InvalidOid;  // the extension's
};

// Decides check(p_policy, p_key, p_cost, p_tier, p_ip, p_user) exactly as ratelimit.check
// does (same checks, errors and effects), from `fcinfo`'s seven arguments: p_policy, p_key,
// p_cost (or p_estimate), the caller's own fourth argument (p_hold, p_scope: not read here),
// then p_tier, p_ip and p_user. `fcinfo` calls a function of the extension's schema. With
// `in_flight`, the policy must be a concurrency policy (quota_unit 'concurrent-requests') and its
// limit is decided by `in_flight` instead of the policy's engine; without it, a concurrency policy
// is refused (0A000) as check refuses it.
PolicySubject decide_policy_subject(FunctionCallInfo fcinfo, InFlightLimit* in_flight);

}  // namespace ratelimit::pg
