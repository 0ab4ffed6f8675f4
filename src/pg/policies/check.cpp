// Deciding by policy: ratelimit.check, check_many, check_all (and decide_policies, the body they
// share, kept callable for administrators). The path reads in one direction: the arguments,
// checked (policy_arguments.hpp, the policy rows from this backend's exact cache,
// policy_cache.hpp); the decision's whole sequence, the core's (ratelimit/policy_decision.hpp),
// carried out on the engines (policy_effects.hpp); the answer as a ratelimit.policy_decision row.
#include "pg/policies/check.hpp"

#include <string>
#include <string_view>
#include <vector>

#include "pg/bridge/arguments.hpp"
#include "pg/bridge/clock.hpp"
#include "pg/bridge/guard.hpp"
#include "pg/policies/policy_arguments.hpp"
#include "pg/policies/policy_cache.hpp"
#include "pg/policies/policy_effects.hpp"

extern "C" {
#include "utils/array.h"
}

#include "ratelimit/policy_decision.hpp"
#include "ratelimit/validation.hpp"

namespace ratelimit::pg {
namespace {

// Decides a policy call from its arguments, named as `names` says.
Datum decide_call(FunctionCallInfo fcinfo, const ArgumentNames& names) {
    const Oid schema = policies_schema();
    const Micros now = clock_now_checked();
    const PolicyCall call = read_policy_call(fcinfo, names, policy_catalog(schema), now);
    const PolicyAnswer answer =
        decide_planned(fcinfo, schema, call, plan_call(fcinfo, schema, call));
    return answer_datum(fcinfo, call, answer);
}

Datum check_body(FunctionCallInfo fcinfo) {
    return decide_call(fcinfo, ArgumentNames{"p_policy", "p_key", true});
}

Datum check_all_body(FunctionCallInfo fcinfo) {
    return decide_call(fcinfo, ArgumentNames{"p_policies", "p_keys", false});
}

// check_many(): check(p_policy, subject, ...) for each subject in turn. Every subject is read
// and planned (its key, its override, its lists, the limit it gets) before the first is
// decided, so a refused argument charges nothing.
Datum check_many_body(FunctionCallInfo fcinfo) {
    const Oid schema = policies_schema();
    const Micros now = clock_now_checked();
    std::vector<PolicyPlan> plans;
    const std::vector<PolicyCall> calls = read_check_many(
        fcinfo, policy_catalog(schema), now,
        [&](const PolicyCall& call) { plans.push_back(plan_call(fcinfo, schema, call)); });
    const std::size_t count = calls.size();
    Datum* elements = nullptr;
    call_postgres([&] { elements = static_cast<Datum*>(palloc(sizeof(Datum) * count)); });
    for (std::size_t i = 0; i < count; ++i) {
        const PolicyAnswer answer = decide_planned(fcinfo, schema, calls[i], plans[i]);
        elements[i] = answer_datum(fcinfo, calls[i], answer);
    }
    const Oid row_type = policy_decision_type(fcinfo);
    Datum result = 0;
    call_postgres([&] {
        result = PointerGetDatum(construct_array(elements, static_cast<int>(count), row_type, -1,
                                                 false, TYPALIGN_DOUBLE));
    });
    return result;
}

// decide_policies(..., p_policy_argument, p_key_argument): the shared body, with the names
// its errors use given by the caller.
Datum decide_policies_body(FunctionCallInfo fcinfo) {
    const std::string_view policy_argument = name_argument(fcinfo, 6, "p_policy_argument");
    const std::string_view key_argument = name_argument(fcinfo, 7, "p_key_argument");
    // The arrays are read as arrays whatever the names say.
    return decide_call(fcinfo, ArgumentNames{std::string(policy_argument.substr(0, 64)),
                                             std::string(key_argument.substr(0, 64)), false});
}

}  // namespace

PolicySubject decide_policy_subject(FunctionCallInfo caller, InFlightLimit* in_flight) {
    // check's six arguments, in check's order: the caller's, less its fourth (its own p_hold
    // or p_scope), so that they are read and decided on check's own path.
    constexpr int kCheckArguments = 6;
    constexpr int kFrom[kCheckArguments] = {0, 1, 2, 4, 5, 6};
    LOCAL_FCINFO(fcinfo, kCheckArguments);
    InitFunctionCallInfoData(*fcinfo, caller->flinfo, kCheckArguments, caller->fncollation, nullptr,
                             nullptr);
    for (int i = 0; i < kCheckArguments; ++i)
        fcinfo->args[i] = caller->args[kFrom[i]];
    PolicySubject result;
    const Oid schema = policies_schema();
    const Micros now = clock_now_checked();
    ArgumentNames names{"p_policy", "p_key", true};
    names.leases = in_flight != nullptr;
    const PolicyCall call = read_policy_call(fcinfo, names, policy_catalog(schema), now);
    const PolicyPlan plan = plan_call(fcinfo, schema, call);
    const ResolvedPolicy& resolved = call.policies[0];
    result.policy = resolved.rule->name;
    result.key = resolved.state_key();
    result.engine = resolved.rule->engine;
    result.now = now;
    result.schema = schema;
    if (plan.kind == PolicyPlan::Kind::kDecide)
        result.limit = plan.checked[0].limit;
    else if (plan.kind == PolicyPlan::Kind::kCostExceedsLimit)
        result.limit = plan.stop_limit;
    result.answer = decide_planned(fcinfo, schema, call, plan, in_flight);
    result.charged = plan.kind == PolicyPlan::Kind::kDecide && result.answer.allowed &&
                     result.answer.outcomes[0] == PolicyOutcome::kAllowed;
    return result;
}

}  // namespace ratelimit::pg

RATELIMIT_SQL_FUNCTION(ratelimit_check, ratelimit::pg::check_body)
RATELIMIT_SQL_FUNCTION(ratelimit_check_all, ratelimit::pg::check_all_body)
RATELIMIT_SQL_FUNCTION(ratelimit_check_many, ratelimit::pg::check_many_body)
RATELIMIT_SQL_FUNCTION(ratelimit_decide_policies, ratelimit::pg::decide_policies_body)
