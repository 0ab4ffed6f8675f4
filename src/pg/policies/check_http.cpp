// ratelimit.check_http(): one round trip for an edge function: the decision (as check_all
// decides it, keeping the plan for the fields of every policy), its status, the IETF RateLimit
// headers and the 429 body (computed in the core, ratelimit/http_fields.hpp; built as jsonb by
// policy_http.hpp), and the decision as an object.
#include <cstdint>
#include <iterator>
#include <optional>
#include <string>
#include <vector>

#include "pg/bridge/arguments.hpp"
#include "pg/bridge/clock.hpp"
#include "pg/bridge/guard.hpp"
#include "pg/engines/state_engines.hpp"
#include "pg/policies/policy_arguments.hpp"
#include "pg/policies/policy_cache.hpp"
#include "pg/policies/policy_effects.hpp"
#include "pg/policies/policy_http.hpp"

extern "C" {
#include "common/pg_prng.h"
#include "utils/datetime.h"
#include "utils/json.h"
}

#include "ratelimit/http_fields.hpp"
#include "ratelimit/partition_key.hpp"
#include "ratelimit/validation.hpp"

namespace ratelimit::pg {
namespace {

// What the headers and the body are built from.
DecisionView decision_view(const PolicyCall& call, const PolicyAnswer& answer, Micros now) {
    DecisionView view;
    view.allowed = answer.allowed;
    if (answer.policy)
        view.policy = call.policies[*answer.policy].rule->name;
    view.limit = answer.limit;
    view.remaining = answer.remaining;
    if (answer.retry_after)
        view.retry_after_ms = milliseconds_up(*answer.retry_after);
    if (answer.reset_after)
        view.reset_after_ms = milliseconds_up(*answer.reset_after);
    if (answer.period)
        view.period_ms = (*answer.period + 500) / 1000;
    view.cost = answer.cost;
    view.reason = reason_name(answer.reason);
    view.decided_at = now;
    return view;
}

// The pk parameter (ratelimit/partition_key.hpp) under the database's
// ratelimit.partition_key_secret.
std::optional<std::string> partition_key(const PolicyCatalog& catalog,
                                         const ResolvedPolicy& resolved) {
    return ratelimit::partition_key(catalog.partition_secret, resolved.rule->name,
                                    text_bytes(resolved.key));
}

std::optional<std::string> quota_unit(const PolicyCatalog& catalog, const PolicyRule& rule) {
    const std::string* unit = catalog.quota_unit(rule.name);
    return unit != nullptr ? std::optional<std::string>(*unit) : std::nullopt;
}

// What the IETF fields and the problem body say beyond the decision: the reported policy's qu
// and pk, the call's other enforced policies (each as its key stands after the call, as the
// decision reported it), and the policies that denied.
void add_http_items(const PolicyCatalog& catalog, const PolicyCall& call, const PolicyPlan& plan,
                    const PolicyAnswer& answer, DecisionView* view) {
    for (std::size_t i = 0; i < answer.outcomes.size(); ++i) {
        if (answer.outcomes[i] == PolicyOutcome::kDenied)
            view->violated.push_back(call.policies[i].rule->name);
    }
    if (!answer.policy)
        return;
    const ResolvedPolicy& reported = call.policies[*answer.policy];
    view->quota_unit = quota_unit(catalog, *reported.rule);
    view->partition_key = partition_key(catalog, reported);
    if (plan.kind != PolicyPlan::Kind::kDecide)
        return;  // the call ended at the reported policy
    for (std::size_t k = 0; k < plan.checked.size(); ++k) {
        const PolicyPlan::Checked& checked = plan.checked[k];
        if (!checked.enforced || checked.request == *answer.policy)
            continue;
        const ResolvedPolicy& resolved = call.policies[checked.request];
        const Decision& decision = answer.checked[k];
        PolicyItem item;
        item.name = resolved.rule->name;
        item.limit = decision.limit;
        item.remaining = decision.remaining;
        item.denies = answer.outcomes[checked.request] == PolicyOutcome::kDenied;
        item.wait_ms = milliseconds_up(item.denies ? decision.retry_after : decision.reset_after);
        item.period_ms = (checked.limit.period + 500) / 1000;
        item.quota_unit = quota_unit(catalog, *resolved.rule);
        item.partition_key = partition_key(catalog, resolved);
        view->others.push_back(std::move(item));
    }
}

// A random 0 to `jitter` µs, in whole milliseconds (0 when there is no jitter).
std::int64_t jitter_ms(Micros jitter) {
    if (jitter <= 0)
        return 0;
    std::uint64_t drawn = 0;
    call_postgres([&] {
        drawn = pg_prng_uint64_range(&pg_global_prng_state, 0,
                                     static_cast<std::uint64_t>(jitter / 1000));
    });
    return static_cast<std::int64_t>(drawn);
}

// The view the headers are built from: each policy's reported wait plus a random 0 to its
// reset_jitter (the IETF RateLimit fields' advice against clients all coming back at one
// instant). Only what the headers report moves: the window and the decision stay exact, and a
// client that waits longer than it must is still allowed.
DecisionView jittered(const PolicyCatalog& catalog, DecisionView view) {
    if (catalog.reset_jitters.empty())
        return view;
    if (view.policy) {
        const std::int64_t extra = jitter_ms(catalog.reset_jitter(*view.policy));
        std::optional<std::int64_t>& wait =
            view.allowed.value_or(false) ? view.reset_after_ms : view.retry_after_ms;
        if (wait)
            *wait += extra;
    }
    for (PolicyItem& other : view.others)
        other.wait_ms += jitter_ms(catalog.reset_jitter(other.name));
    return view;
}

Datum check_http_body(FunctionCallInfo fcinfo) {
    // The formats are checked before anything is charged.
    const HttpFormats formats = read_http_formats(fcinfo);
    const ResetFormat format = formats.reset;
    const BodyShape shape = formats.body;
    const Oid schema = policies_schema();
    const Micros now = clock_now_checked();
    const PolicyCatalog& catalog = policy_catalog(schema);
    const PolicyCall call =
        read_policy_call(fcinfo, ArgumentNames{"p_policies", "p_keys", false}, catalog, now);
    const PolicyPlan plan = plan_call(fcinfo, schema, call);
    const PolicyAnswer answer = decide_planned(fcinfo, schema, call, plan);
    DecisionView view = decision_view(call, answer, now);
    add_http_items(catalog, call, plan, answer, &view);

    // The columns of ratelimit.policy_decision, in its order.
    const char* const kNames[] = {
        "allowed",   "policy", "limit",  "remaining",     "retry_after_ms", "reset_after_ms",
        "period_ms", "cost",   "reason", "shadow_denied", "decided_at",     "penalty_level"};
    std::vector<JsonMember> decision(std::size(kNames));
    for (std::size_t i = 0; i < decision.size(); ++i)
        decision[i].name = kNames[i];
    auto number = [](JsonMember& member, const std::optional<std::int64_t>& value) {
        if (value) {
            member.kind = JsonMember::Kind::kNumber;
            member.number = *value;
        }
    };
    decision[0].kind = JsonMember::Kind::kBool;
    decision[0].flag = answer.allowed;
    if (view.policy) {
        decision[1].kind = JsonMember::Kind::kString;
        decision[1].text = *view.policy;
    }
    number(decision[2], view.limit);
    number(decision[3], view.remaining);
    number(decision[4], view.retry_after_ms);
    number(decision[5], view.reset_after_ms);
    number(decision[6], view.period_ms);
    number(decision[7], view.cost);
    decision[8].kind = JsonMember::Kind::kString;
    decision[8].text = *view.reason;
    decision[9].kind = JsonMember::Kind::kStrings;
    for (std::size_t request : answer.shadow_denied)
        decision[9].strings.push_back(call.policies[request].rule->name);
    decision[10].kind = JsonMember::Kind::kString;
    char timestamp[MAXDATELEN + 1];
    call_postgres([&] {
        JsonEncodeDateTime(timestamp, TimestampTzGetDatum(to_timestamptz(now)), TIMESTAMPTZOID,
                           nullptr);
    });
    decision[10].text = timestamp;
    number(decision[11], answer.penalty_level);

    std::vector<JsonMember> members(5);
    members[0].name = "allowed";
    members[0].kind = JsonMember::Kind::kBool;
    members[0].flag = answer.allowed;
    members[1].name = "status";
    members[1].kind = JsonMember::Kind::kNumber;
    members[1].number = answer.allowed ? 200 : 429;
    members[2].name = "headers";
    members[2].kind = JsonMember::Kind::kObject;
    members[2].members = headers_members(jittered(catalog, view), format);
    members[3].name = "body";
    bool body_null = false;
    std::vector<JsonMember> body = body_members(view, shape, &body_null);
    if (!body_null) {
        members[3].kind = JsonMember::Kind::kObject;
        members[3].members = std::move(body);
        if (shape == BodyShape::kProblem) {
            JsonMember type;
            type.name = "Content-Type";
            type.kind = JsonMember::Kind::kString;
            type.text = "application/problem+json";
            members[2].members.push_back(std::move(type));
        }
    }
    members[4].name = "decision";
    members[4].kind = JsonMember::Kind::kObject;
    members[4].members = std::move(decision);
    // One pass builds the whole object.
    return jsonb_object(members);
}

}  // namespace
}  // namespace ratelimit::pg

RATELIMIT_SQL_FUNCTION(ratelimit_check_http, ratelimit::pg::check_http_body)
