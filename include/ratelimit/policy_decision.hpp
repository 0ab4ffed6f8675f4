// A policy call's whole decision, in the order it always runs, written once here: the plan (lists,
// override, tier, an impossible cost), the decision of the checked limits as one, the answer,
// the penalties it earned or is under, the count_denied blocks, the denial log (with the limit
// the policy decided with), and the counters (with whether a charge left its key near the
// limit). The rules of each step are ratelimit/policy.hpp's; this is their sequence. What it
// needs of the engines and the server it asks through PolicyEffects, which the PostgreSQL layer
// implements (src/pg/policies/policy_effects.cpp) and the unit tests fake.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "ratelimit/algorithms.hpp"
#include "ratelimit/policy.hpp"

namespace ratelimit {

// A policy call as the sequence needs it: the requests in the caller's order (each rule with
// its calendar window set for `now`), the tier (may be null), the cost and the instant.
struct PolicyCallInput {
    std::vector<PolicyRequest> requests;
    const TierRule* tier = nullptr;
    std::int64_t cost = 0;
    Micros now = 0;
    // The arguments a refused limit is reported against: the tier's when the call has one,
    // else the policies' (p_policy, p_policies, ...).
    std::string policies_argument;
    std::string tier_argument = "p_tier";
    // ratelimit.near_limit_ratio, for the near-limit counter (near_limit).
    double near_limit_ratio = 0;
};

// What the sequence does to the world, request by request (`request` indexes the call's
// requests). Every method may throw; an exception ends the call where it is.
class PolicyEffects {
  public:
    virtual ~PolicyEffects() = default;
    // The plan is made: an engine may refuse a checked limit (ArgumentError, reported against
    // the call's argument as a refused limit). Default: every limit is taken.
    virtual void accept(const PolicyCallInput& call, const PolicyPlan& plan);
    // A cost the limit could never allow: the request's key as it stands, by a one-unit peek
    // under `limit`; nothing is charged.
    virtual Decision peek(const PolicyCallInput& call, std::size_t request, const Limit& limit) = 0;
    // plan.checked, decided as one (all or nothing): fills (*decisions)[k] for plan.checked[k]
    // (after the charge when allowed, as the key stands when denied) and returns whether the
    // call is allowed.
    virtual bool decide(const PolicyCallInput& call, const PolicyPlan& plan,
                        std::vector<Decision>* decisions) = 0;
    // The request's penalty counter (penalty_counter(rule)): one unit charged when `charge`,
    // else peeked.
    virtual Decision penalty_counter(const PolicyCallInput& call, std::size_t request,
                                     const Limit& counter, bool charge) = 0;
    // Blocks the request's key until `until` (never shortening a longer block).
    virtual void block(const PolicyCallInput& call, std::size_t request, Micros until) = 0;
    // A denial of the request to log: `limit` is the one it was decided under (after the
    // override and the tier), `retry_after` the wait it reported, `enforced` false for shadow.
    virtual void log_denial(const PolicyCallInput& call, std::size_t request, std::int64_t limit,
                            Micros retry_after, bool enforced) = 0;
    // The request's outcome for the per-policy counters; `near_limit`: an allowed charge left
    // its key near the limit.
    virtual void count(const PolicyCallInput& call, std::size_t request, PolicyOutcome outcome,
                       bool near_limit) = 0;
};

// The plan, with `effects.accept`; a limit that an override or tier makes and that the policy or
// its engine refuses is an ArgumentError against call.tier_argument (when the call has a tier)
// or call.policies_argument: "<argument>: the limit it gives is refused: <why>".
PolicyPlan plan_policy_call(const PolicyCallInput& call, PolicyEffects& effects);

// Everything after the plan: decides, answers, settles the penalties, then blocks, logs and
// counts as the answer asks, in that order.
PolicyAnswer decide_planned_policy_call(const PolicyCallInput& call, const PolicyPlan& plan,
                                        PolicyEffects& effects);

// plan_policy_call, then decide_planned_policy_call.
PolicyAnswer decide_policy_call(const PolicyCallInput& call, PolicyEffects& effects,
                                PolicyPlan* plan_out = nullptr);

}  // namespace ratelimit
