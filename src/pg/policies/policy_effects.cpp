// The effects of a policy decision on this server (pg/policies/policy_effects.hpp).
#include "pg/policies/policy_effects.hpp"

#include <cstdint>
#include <string>
#include <vector>

#include "pg/bridge/arguments.hpp"
#include "pg/bridge/clock.hpp"
#include "pg/bridge/extension_schema.hpp"
#include "pg/bridge/guard.hpp"
#include "pg/bridge/result_row.hpp"
#include "pg/engines/memory_engine.hpp"
#include "pg/engines/state_engines.hpp"
#include "pg/policies/denial_log.hpp"
#include "pg/policies/policy_counters.hpp"

extern "C" {
#include "access/htup_details.h"
#include "utils/array.h"
#include "utils/syscache.h"
#include "utils/typcache.h"
}

#include "ratelimit/error.hpp"
#include "ratelimit/policy_decision.hpp"

namespace ratelimit::pg {
namespace {

// What a call site looks up once (in fn_extra): the row type of ratelimit.policy_decision.
struct PolicyCallSite {
    TupleDesc decision = nullptr;
};

// Called inside call_postgres().
PolicyCallSite* policy_call_site(FunctionCallInfo fcinfo) {
    FmgrInfo* flinfo = fcinfo->flinfo;
    if (flinfo->fn_extra == nullptr) {
        auto* site = static_cast<PolicyCallSite*>(
            MemoryContextAllocZero(flinfo->fn_mcxt, sizeof(PolicyCallSite)));
        const Oid type =
            GetSysCacheOid2(TYPENAMENSP, Anum_pg_type_oid, CStringGetDatum("policy_decision"),
                            ObjectIdGetDatum(extension_schema()));
        if (!OidIsValid(type))
            elog(ERROR, "ratelimit: type ratelimit.policy_decision is missing");
        MemoryContext caller = MemoryContextSwitchTo(flinfo->fn_mcxt);
        site->decision = BlessTupleDesc(lookup_rowtype_tupdesc_copy(type, -1));
        MemoryContextSwitchTo(caller);
        flinfo->fn_extra = site;
    }
    return static_cast<PolicyCallSite*>(flinfo->fn_extra);
}

constexpr const char* kFunctionName = "ratelimit.check()";

// Each step the core's sequence asks for, on the engines of the policies' rules (or the lease
// table for one concurrency policy).
class EngineEffects final : public PolicyEffects {
  public:
    EngineEffects(FunctionCallInfo fcinfo, Oid schema, const PolicyCall& call,
                  InFlightLimit* in_flight)
        : fcinfo_(fcinfo), schema_(schema), call_(call), in_flight_(in_flight) {}

    void accept(const PolicyCallInput& input, const PolicyPlan& plan) override {
        for (const PolicyPlan::Checked& checked : plan.checked) {
            const PolicyRule& rule = *input.requests[checked.request].rule;
            if (rule.engine == Engine::kMemory) {
                require_memory_engine("policy \"" + rule.name + "\" (engine memory)",
                                      "move the policy to engine table or unlogged");
                require_memory_limit(checked.limit);
            }
        }
    }

    Decision peek(const PolicyCallInput& input, std::size_t request, const Limit& limit) override {
        const ResolvedPolicy& resolved = call_.policies[request];
        if (in_flight_ != nullptr)
            return in_flight_->look(resolved.state_key(), limit, input.now);
        EngineStorage storage;
        return state_engine(resolved.rule->engine, schema_, kFunctionName, storage)
            .decide(resolved.state_key(), limit, input.now, 1, Action::kPeek);
    }

    bool decide(const PolicyCallInput& input, const PolicyPlan& plan,
                std::vector<Decision>* decisions) override {
        if (in_flight_ != nullptr) {
            // One concurrency policy, on the lease table: a denied lease holds nothing, so
            // there is nothing to undo.
            const PolicyPlan::Checked& checked = plan.checked[0];
            (*decisions)[0] = in_flight_->take(call_.policies[checked.request].state_key(),
                                               checked.limit, input.cost, input.now);
            return (*decisions)[0].allowed;
        }
        std::vector<TierCall> tiers(plan.checked.size());
        std::vector<StateKey> keys(plan.checked.size());
        for (std::size_t i = 0; i < plan.checked.size(); ++i) {
            const ResolvedPolicy& resolved = call_.policies[plan.checked[i].request];
            tiers[i].index = i;
            tiers[i].engine = resolved.rule->engine;
            tiers[i].limit = plan.checked[i].limit;
            tiers[i].enforced = plan.checked[i].enforced;
            keys[i] = resolved.state_key();
        }
        sort_tiers(tiers, keys);
        const bool allowed =
            decide_tiers(tiers, keys, schema_, kFunctionName, input.now, input.cost);
        for (const TierCall& tier : tiers)
            (*decisions)[tier.index] = reported_decision(tier, allowed);
        return allowed;
    }

    Decision penalty_counter(const PolicyCallInput& input, std::size_t request,
                             const Limit& counter, bool charge) override {
        const ResolvedPolicy& resolved = call_.policies[request];
        EngineStorage storage;
        return state_engine(resolved.rule->engine, schema_, kFunctionName, storage)
            .decide(StateKey{penalty_space(resolved.rule->name), resolved.subject}, counter,
                    input.now, 1, charge ? Action::kCharge : Action::kPeek);
    }

    void block(const PolicyCallInput& input, std::size_t request, Micros until) override {
        const ResolvedPolicy& resolved = call_.policies[request];
        EngineStorage storage;
        state_engine(resolved.rule->engine, schema_, kFunctionName, storage)
            .block(resolved.state_key(), until, input.now);
    }

    void log_denial(const PolicyCallInput&, std::size_t request, std::int64_t limit,
                    Micros retry_after, bool enforced) override {
        pg::log_denial(fcinfo_, call_, request, limit, retry_after, enforced);
    }

    void count(const PolicyCallInput& input, std::size_t request, PolicyOutcome outcome,
               bool near_limit) override {
        const ResolvedPolicy& resolved = call_.policies[request];
        count_outcome(resolved.rule->name, text_bytes(resolved.subject), outcome, input.now,
                      near_limit);
    }

  private:
    FunctionCallInfo fcinfo_;
    Oid schema_;
    const PolicyCall& call_;
    InFlightLimit* in_flight_;
};

}  // namespace

PolicyPlan plan_call(FunctionCallInfo fcinfo, Oid schema, const PolicyCall& call) {
    EngineEffects effects(fcinfo, schema, call, nullptr);
    return plan_policy_call(call.input, effects);
}

PolicyAnswer decide_planned(FunctionCallInfo fcinfo, Oid schema, const PolicyCall& call,
                            const PolicyPlan& plan, InFlightLimit* in_flight) {
    EngineEffects effects(fcinfo, schema, call, in_flight);
    return decide_planned_policy_call(call.input, plan, effects);
}

Datum penalty_space(const std::string& policy) {
    return text_datum(policy + "/penalty");
}

// The answer as a ratelimit.policy_decision row.
Datum answer_datum(FunctionCallInfo fcinfo, const PolicyCall& call, const PolicyAnswer& answer) {
    const Micros now = call.input.now;
    constexpr int kFields = 12;
    Datum values[kFields] = {0};
    bool nulls[kFields] = {false};
    nulls[11] = !answer.penalty_level.has_value();
    values[11] = Int32GetDatum(static_cast<std::int32_t>(answer.penalty_level.value_or(0)));
    values[0] = BoolGetDatum(answer.allowed);
    nulls[1] = !answer.policy.has_value();
    if (answer.policy)
        values[1] = text_datum(call.policies[*answer.policy].rule->name);
    nulls[2] = !answer.limit.has_value();
    values[2] = Int32GetDatum(static_cast<std::int32_t>(answer.limit.value_or(0)));
    nulls[3] = !answer.remaining.has_value();
    values[3] = Int32GetDatum(static_cast<std::int32_t>(answer.remaining.value_or(0)));
    nulls[4] = !answer.retry_after.has_value();
    values[4] = Int64GetDatum(milliseconds_up(answer.retry_after.value_or(0)));
    nulls[5] = !answer.reset_after.has_value();
    values[5] = Int64GetDatum(milliseconds_up(answer.reset_after.value_or(0)));
    nulls[6] = !answer.period.has_value();
    values[6] = Int64GetDatum((answer.period.value_or(0) + 500) / 1000);
    values[7] = Int32GetDatum(static_cast<std::int32_t>(answer.cost));
    values[10] = TimestampTzGetDatum(to_timestamptz(now));
    const char* reason = reason_name(answer.reason);
    const std::size_t shadow_count = answer.shadow_denied.size();
    Datum result = 0;
    // One guarded section builds the row: every value is a plain C value by now.
    call_postgres([&] {
        values[8] = CStringGetTextDatum(reason);
        Datum* shadow = static_cast<Datum*>(palloc(sizeof(Datum) * (shadow_count + 1)));
        for (std::size_t i = 0; i < shadow_count; ++i) {
            const std::string& name = call.policies[answer.shadow_denied[i]].rule->name;
            shadow[i] = PointerGetDatum(
                cstring_to_text_with_len(name.data(), static_cast<int>(name.size())));
        }
        values[9] = PointerGetDatum(construct_array(shadow, static_cast<int>(shadow_count), TEXTOID,
                                                    -1, false, TYPALIGN_INT));
        PolicyCallSite* site = policy_call_site(fcinfo);
        result = HeapTupleGetDatum(heap_form_tuple(site->decision, values, nulls));
    });
    return result;
}

Oid policy_decision_type(FunctionCallInfo fcinfo) {
    Oid type = InvalidOid;
    call_postgres([&] { type = policy_call_site(fcinfo)->decision->tdtypeid; });
    return type;
}

Oid policies_schema() {
    Oid schema = InvalidOid;
    call_postgres([&] { schema = extension_schema(); });
    return schema;
}

}  // namespace ratelimit::pg
