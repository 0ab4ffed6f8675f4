// The sequence of a policy call (ratelimit/policy_decision.hpp).
#include "ratelimit/policy_decision.hpp"

#include <utility>

#include "ratelimit/error.hpp"

namespace ratelimit {

void PolicyEffects::accept(const PolicyCallInput&, const PolicyPlan&) {}

PolicyPlan plan_policy_call(const PolicyCallInput& call, PolicyEffects& effects) {
    try {
        PolicyPlan plan = plan_policies(call.requests, call.tier, call.cost, call.now);
        effects.accept(call, plan);
        return plan;
    } catch (const ArgumentError& error) {
        const std::string& where =
            call.tier != nullptr ? call.tier_argument : call.policies_argument;
        throw ArgumentError(error.kind(), where,
                            where + ": the limit it gives is refused: " + error.what());
    }
}

namespace {

// Charges the penalties the answer asks for (each counter, then the key's block) and reads the
// levels of keys denied while blocked; the answer then reports them (apply_penalty).
void settle_penalties(const PolicyCallInput& call, PolicyAnswer& answer, PolicyEffects& effects) {
    auto settle = [&](std::size_t request, bool earned) {
        const PolicyRule& rule = *call.requests[request].rule;
        const Decision counter =
            effects.penalty_counter(call, request, penalty_counter(rule), earned);
        const std::int64_t level = penalty_level(rule, counter);
        Micros block = 0;
        if (earned) {
            block = penalty_block(rule, level);
            effects.block(call, request, call.now + block);
        }
        apply_penalty(answer, level, block);
    };
    for (std::size_t request : answer.penalized)
        settle(request, true);
    for (std::size_t request : answer.penalty_reads)
        settle(request, false);
}

// Carries out what the answer asks: count_denied blocks, the denial log, the counters.
void carry_out(const PolicyCallInput& call, const PolicyAnswer& answer, PolicyEffects& effects) {
    for (std::size_t request : answer.blocks)
        effects.block(call, request, call.now + call.requests[request].rule->period);
    for (const auto& [request, retry_after] : answer.logged) {
        const PolicyRequest& logged = call.requests[request];
        // The limit the policy decided with (after the override and the tier).
        bool bypass = false;
        const std::int64_t limit =
            effective_limit(*logged.rule, logged.key_override, request_tier(logged, call.tier),
                            call.now, &bypass)
                .limit;
        effects.log_denial(call, request, limit, retry_after, !logged.rule->shadow);
    }
    for (std::size_t i = 0; i < answer.outcomes.size(); ++i) {
        if (answer.outcomes[i] == PolicyOutcome::kNone)
            continue;
        bool near = false;
        for (const PolicyAnswer::Charged& charged : answer.charged) {
            if (charged.request == i) {
                near = near_limit(charged.limit, charged.remaining, call.near_limit_ratio);
                break;
            }
        }
        effects.count(call, i, answer.outcomes[i], near);
    }
}

}  // namespace

PolicyAnswer decide_planned_policy_call(const PolicyCallInput& call, const PolicyPlan& plan,
                                        PolicyEffects& effects) {
    PolicyAnswer answer;
    switch (plan.kind) {
        case PolicyPlan::Kind::kSkipped:
            answer = answer_skipped(call.requests, plan, call.cost);
            break;
        case PolicyPlan::Kind::kDenyList:
            answer = answer_deny_list(call.requests, plan, call.cost, call.now);
            break;
        case PolicyPlan::Kind::kCostExceedsLimit:
            answer = answer_cost_exceeds(call.requests, plan,
                                         effects.peek(call, plan.stop, plan.stop_limit), call.cost);
            break;
        case PolicyPlan::Kind::kDecide: {
            std::vector<Decision> decisions(plan.checked.size());
            const bool allowed = effects.decide(call, plan, &decisions);
            answer = answer_decided(call.requests, plan, decisions, allowed, call.cost);
            answer.checked = std::move(decisions);
            settle_penalties(call, answer, effects);
            break;
        }
    }
    carry_out(call, answer, effects);
    return answer;
}

PolicyAnswer decide_policy_call(const PolicyCallInput& call, PolicyEffects& effects,
                                PolicyPlan* plan_out) {
    PolicyPlan plan = plan_policy_call(call, effects);
    PolicyAnswer answer = decide_planned_policy_call(call, plan, effects);
    if (plan_out != nullptr)
        *plan_out = std::move(plan);
    return answer;
}

}  // namespace ratelimit
