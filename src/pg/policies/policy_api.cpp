// Deciding by policy: ratelimit.check, check_many, check_all, check_http (and decide_policies, the
// body they share, kept callable for administrators). The path reads in one direction: the
// arguments, checked; the policy rows, from this backend's exact cache (policy_cache.hpp); the
// plan and the answer, from the core (ratelimit/policy.hpp); the keys, decided as one through
// the engines (state_engines.hpp), each policy's subjects in a namespace of their own.
#include "pg/policies/policy_api.hpp"

#include <cstdint>
#include <iterator>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "pg/bridge/arguments.hpp"
#include "pg/bridge/clock.hpp"
#include "pg/policies/denial_queue.hpp"
#include "pg/bridge/guard.hpp"
#include "pg/bridge/result_row.hpp"
#include "pg/engines/memory_engine.hpp"
#include "pg/policies/policy_cache.hpp"
#include "pg/policies/policy_counters.hpp"
#include "pg/policies/policy_http.hpp"
#include "pg/bridge/spi_statement.hpp"
#include "pg/engines/state_engines.hpp"
#include "pg/policies/subject_hash.hpp"

extern "C" {
#include <sys/socket.h>

#include "access/htup_details.h"
#include "catalog/pg_class.h"
#include "catalog/namespace.h"
#include "commands/sequence.h"
#include "common/pg_prng.h"
#include "common/sha2.h"
#include "mb/pg_wchar.h"
#include "utils/array.h"
#include "utils/inet.h"
#include "utils/datetime.h"
#include "utils/json.h"
#include "utils/syscache.h"
#include "utils/typcache.h"
}

#include "ratelimit/error.hpp"
#include "ratelimit/http_fields.hpp"
#include "ratelimit/key_hash.hpp"
#include "ratelimit/policy.hpp"
#include "ratelimit/validation.hpp"

namespace ratelimit::pg {
namespace {

// More policies would only hold more partition locks at once; real checks use two to four.
constexpr int kMaxPolicies = 16;

// What a call site looks up once (in fn_extra): the extension's schema and the row type of
// ratelimit.policy_decision.
struct PolicyCallSite {
    Oid schema = InvalidOid;
    TupleDesc decision = nullptr;
};

// Called inside call_postgres().
PolicyCallSite* policy_call_site(FunctionCallInfo fcinfo) {
    FmgrInfo* flinfo = fcinfo->flinfo;
    if (flinfo->fn_extra == nullptr) {
        auto* site = static_cast<PolicyCallSite*>(
            MemoryContextAllocZero(flinfo->fn_mcxt, sizeof(PolicyCallSite)));
        site->schema = get_func_namespace(flinfo->fn_oid);
        const Oid type =
            GetSysCacheOid2(TYPENAMENSP, Anum_pg_type_oid, CStringGetDatum("policy_decision"),
                            ObjectIdGetDatum(site->schema));
        if (!OidIsValid(type))
            elog(ERROR, "ratelimit: type ratelimit.policy_decision is missing");
        MemoryContext caller = MemoryContextSwitchTo(flinfo->fn_mcxt);
        site->decision = BlessTupleDesc(lookup_rowtype_tupdesc_copy(type, -1));
        MemoryContextSwitchTo(caller);
        flinfo->fn_extra = site;
    }
    return static_cast<PolicyCallSite*>(flinfo->fn_extra);
}

// The argument names a call reports errors with: check has scalars, the others arrays.
struct ArgumentNames {
    std::string policies;
    std::string keys;
    bool scalar = false;
    // acquire_policy: the policy must be a concurrency policy; every other call refuses one.
    bool leases = false;

    std::string policy(int i) const {
        return scalar ? policies : policies + "[" + std::to_string(i + 1) + "]";
    }
    std::string key(int i) const {
        return scalar ? keys : keys + "[" + std::to_string(i + 1) + "]";
    }
};

// A text[] argument's elements (detoasted), or a scalar text as one element.
struct TextList {
    std::vector<Datum> values;
    std::vector<bool> nulls;
};

TextList text_list(FunctionCallInfo fcinfo, int index, bool scalar, const std::string& name) {
    TextList list;
    if (PG_ARGISNULL(index))
        throw ArgumentError::null(name);
    if (scalar) {
        Datum value = 0;
        call_postgres([&] { value = PointerGetDatum(PG_GETARG_TEXT_PP(index)); });
        list.values.push_back(value);
        list.nulls.push_back(false);
        return list;
    }
    int dimensions = 0;
    int count = 0;
    Datum* values = nullptr;
    bool* nulls = nullptr;
    call_postgres([&] {
        ArrayType* array = PG_GETARG_ARRAYTYPE_P(index);
        dimensions = ARR_NDIM(array);
        if (dimensions <= 1) {
            deconstruct_array(array, TEXTOID, -1, false, TYPALIGN_INT, &values, &nulls, &count);
            for (int i = 0; i < count; ++i) {
                if (!nulls[i])
                    values[i] = PointerGetDatum(PG_DETOAST_DATUM_PACKED(values[i]));
            }
        }
    });
    if (dimensions > 1)
        throw ArgumentError::invalid(name, "must be a one-dimensional array");
    list.values.assign(values, values + count);
    list.nulls.assign(nulls, nulls + count);
    return list;
}

// The caller's address: one host (a netmask on it must not widen what it matches), and an
// IPv4-mapped IPv6 address as the IPv4 address it carries.
std::optional<IpAddress> caller_ip(FunctionCallInfo fcinfo, int index) {
    if (PG_ARGISNULL(index))
        return std::nullopt;
    const inet* value = nullptr;
    call_postgres([&] { value = PG_GETARG_INET_PP(index); });
    IpAddress address;
    address.family = ip_family(value) == PGSQL_AF_INET ? 4 : 6;
    std::memcpy(address.bytes.data(), ip_addr(value), address.family == 4 ? 4 : 16);
    return caller_address(address);
}

std::optional<Uuid> caller_user(FunctionCallInfo fcinfo, int index) {
    if (PG_ARGISNULL(index))
        return std::nullopt;
    Uuid user;
    std::memcpy(user.data(), PG_GETARG_UUID_P(index)->data, UUID_LEN);
    return user;
}

// SHA-256 of the subject's UTF-8 bytes, as 64 lowercase hex digits (ratelimit.hash_subject).
Datum hashed_subject(Datum subject) {
    Datum result = 0;
    call_postgres([&] {
        const text* value = reinterpret_cast<const text*>(DatumGetPointer(subject));
        const char* bytes = VARDATA_ANY(value);
        const int length = static_cast<int>(VARSIZE_ANY_EXHDR(value));
        const char* utf8 = pg_server_to_any(bytes, length, PG_UTF8);
        const int utf8_length = utf8 == bytes ? length : static_cast<int>(strlen(utf8));
        result = sha256_hex(nullptr, utf8, utf8_length);
    });
    return result;
}

// The first `count` characters of UTF-8 text, as SQL's left(text, count).
std::string first_characters(std::string_view text, int count) {
    std::size_t end = 0;
    for (int seen = 0; end < text.size() && seen < count; ++seen) {
        ++end;
        while (end < text.size() && (static_cast<unsigned char>(text[end]) & 0xC0) == 0x80)
            ++end;
    }
    return std::string(text.substr(0, end));
}

// One policy of the call, resolved.
struct ResolvedPolicy {
    const PolicyRule* rule = nullptr;
    Datum key = 0;      // the subject as given
    Datum subject = 0;  // the state's key: the subject, or its SHA-256 when the policy hashes
    Datum space = 0;    // the policy's name: the state's namespace
};

// A call's arguments and everything resolved from them before any key is touched.
struct PolicyCall {
    std::vector<ResolvedPolicy> policies;
    std::vector<PolicyRequest> requests;
    std::int64_t cost = 0;
    const TierRule* tier = nullptr;
    std::string tier_name;
    Caller caller;
    ArgumentNames names;
    // The call's copies of its calendar policies, with the window holding now set: the
    // policies' rule points here instead of the cache.
    std::vector<std::unique_ptr<PolicyRule>> calendar_rules;
};

// A concurrency policy (pg/policies/policy_api.hpp) is decided by leases only: a call that would
// count it as a rate is refused before anything is charged, and acquire_policy takes nothing else.
void require_policy_kind(const PolicyRule& rule, const ArgumentNames& names, int i);

// Reads and checks the arguments in the order the SQL layer always has: the arrays, their
// sizes, the cost, the tier, then each policy and its subject.
// `policies` and `keys` are the first two arguments, already read (check_many passes one
// subject at a time).
PolicyCall read_policy_call(FunctionCallInfo fcinfo, const ArgumentNames& names,
                            const PolicyCatalog& catalog, Micros now, const TextList& policies,
                            const TextList& keys) {
    PolicyCall call;
    call.names = names;
    if (PG_ARGISNULL(2))
        throw ArgumentError::null("p_cost");
    call.cost = PG_GETARG_INT32(2);
    call.caller.ip = caller_ip(fcinfo, 4);
    call.caller.user = caller_user(fcinfo, 5);
    const int count = static_cast<int>(policies.values.size());
    if (count < 1 || count > kMaxPolicies)
        throw ArgumentError::invalid(
            names.policies, "must have 1 to " + std::to_string(kMaxPolicies) + " elements (got " +
                                std::to_string(count) + ")");
    if (static_cast<int>(keys.values.size()) != count)
        throw ArgumentError::invalid(names.keys, "must have as many elements as " + names.policies +
                                                     " (" + std::to_string(count) + ", got " +
                                                     std::to_string(keys.values.size()) + ")");
    require_non_negative_cost("p_cost", call.cost);
    if (!PG_ARGISNULL(3)) {
        const std::string_view tier = name_argument(fcinfo, 3, "p_tier");
        call.tier = catalog.tier(tier);
        if (call.tier == nullptr)
            throw ArgumentError(ErrorKind::kInvalidArgument, "p_tier",
                                "p_tier: unknown tier \"" + first_characters(tier, 64) + "\"");
        call.tier_name = std::string(tier);
    }
    call.policies.resize(count);
    for (int i = 0; i < count; ++i) {
        ResolvedPolicy& resolved = call.policies[i];
        if (policies.nulls[i])
            throw ArgumentError::null(names.policy(i));
        if (keys.nulls[i])
            throw ArgumentError::null(names.key(i));
        const std::string_view name = text_bytes(policies.values[i]);
        resolved.rule = catalog.policy(name);
        if (resolved.rule == nullptr)
            throw ArgumentError(
                ErrorKind::kInvalidArgument, names.policy(i),
                names.policy(i) + ": unknown policy \"" + first_characters(name, 64) + "\"");
        for (int j = 0; j < i; ++j) {
            if (call.policies[j].rule == resolved.rule)
                throw ArgumentError(
                    ErrorKind::kInvalidArgument, names.policy(i),
                    names.policy(i) + ": policy \"" + resolved.rule->name + "\" is listed twice");
        }
        resolved.key = keys.values[i];
        require_key(names.key(i), text_bytes(resolved.key).size());
        resolved.subject = resolved.rule->hash_key ? hashed_subject(resolved.key) : resolved.key;
        resolved.space = policies.values[i];
        require_policy_kind(*resolved.rule, names, i);
    }
    for (ResolvedPolicy& resolved : call.policies) {
        const CalendarPolicy* calendar = catalog.calendar(resolved.rule->name);
        if (calendar == nullptr)
            continue;
        auto rule = std::make_unique<PolicyRule>(*resolved.rule);
        Limit window;
        set_calendar_window(window, calendar->unit, calendar->zone, now);
        rule->window_start = window.window_start;
        rule->window_end = window.window_end;
        rule->period = window.period;
        resolved.rule = rule.get();
        call.calendar_rules.push_back(std::move(rule));
    }
    call.requests.resize(count);
    for (int i = 0; i < count; ++i) {
        const ResolvedPolicy& resolved = call.policies[i];
        PolicyRequest& request = call.requests[i];
        request.rule = resolved.rule;
        request.key = text_bytes(resolved.key);
        request.key_override = catalog.key_override(resolved.rule->name, request.key);
        if (!catalog.access_list.empty())
            request.lists = match_lists(catalog.access_list, resolved.rule->name, request.key,
                                        call.caller, now);
    }
    return call;
}

// Plans the call; a tier or override whose multiplied limit the engine cannot take is reported
// against the policy it came from.
PolicyPlan plan_call(const PolicyCall& call, Micros now) {
    PolicyPlan plan;
    try {
        plan = plan_policies(call.requests, call.tier, call.cost, now);
        for (const PolicyPlan::Checked& checked : plan.checked) {
            const PolicyRule& rule = *call.requests[checked.request].rule;
            if (rule.engine == Engine::kMemory) {
                require_memory_engine("policy \"" + rule.name + "\" (engine memory)",
                                      "move the policy to engine table or unlogged");
                require_memory_limit(checked.limit);
            }
        }
    } catch (const ArgumentError& error) {
        const std::string where = call.tier != nullptr ? "p_tier" : call.names.policies;
        throw ArgumentError(error.kind(), where,
                            where + ": the limit it gives is refused: " + error.what());
    }
    return plan;
}

// Writes one denial to ratelimit.denial_log, a ring of ratelimit.denial_log_size slots.
void log_denial(FunctionCallInfo fcinfo, const PolicyCall& call, std::size_t request,
                Micros retry_after, bool enforced, Micros now);

// Carries out what the core's answer asks: count_denied blocks, the denial log, the counters.
void apply_answer(FunctionCallInfo fcinfo, Oid schema, const PolicyCall& call,
                  const PolicyAnswer& answer, Micros now) {
    for (std::size_t request : answer.blocks) {
        const ResolvedPolicy& resolved = call.policies[request];
        EngineStorage storage;
        StateEngine& engine =
            state_engine(resolved.rule->engine, schema, "ratelimit.check()", storage);
        engine.block(StateKey{resolved.space, resolved.subject}, now + resolved.rule->period, now);
    }
    for (const auto& [request, retry_after] : answer.logged) {
        const bool enforced = !call.policies[request].rule->shadow;
        log_denial(fcinfo, call, request, retry_after, enforced, now);
    }
    const double ratio = near_limit_ratio();
    // Whether request i's charge left it near its limit: `charged` holds a few entries at most.
    auto near = [&](std::size_t i) {
        for (const PolicyAnswer::Charged& charged : answer.charged) {
            if (charged.request == i)
                return near_limit(charged.limit, charged.remaining, ratio);
        }
        return false;
    };
    for (std::size_t i = 0; i < answer.outcomes.size(); ++i) {
        if (answer.outcomes[i] == PolicyOutcome::kNone)
            continue;
        count_outcome(call.policies[i].rule->name, text_bytes(call.policies[i].subject),
                      answer.outcomes[i], now, near(i));
    }
}

// The namespace of a policy's penalty levels: its name and "/penalty". A policy name has no
// '/', so no policy's counters (nor the native keys, in '') can meet it.
Datum penalty_space(const std::string& policy) {
    return text_datum(policy + "/penalty");
}

// Charges the penalties the core's answer asks for (each counter, then the key's block) and
// reads the levels of keys denied while blocked; the answer then reports them (apply_penalty).
void apply_penalties(Oid schema, const PolicyCall& call, PolicyAnswer& answer, Micros now) {
    auto settle_level = [&](std::size_t request, bool earned) {
        const ResolvedPolicy& resolved = call.policies[request];
        const PolicyRule& rule = *resolved.rule;
        EngineStorage storage;
        StateEngine& engine = state_engine(rule.engine, schema, "ratelimit.check()", storage);
        const StateKey counter{penalty_space(rule.name), resolved.subject};
        const Decision level_decision = engine.decide(counter, penalty_counter(rule), now, 1,
                                                      earned ? Action::kCharge : Action::kPeek);
        const std::int64_t level = penalty_level(rule, level_decision);
        Micros block = 0;
        if (earned) {
            block = penalty_block(rule, level);
            engine.block(StateKey{resolved.space, resolved.subject}, now + block, now);
        }
        apply_penalty(answer, level, block);
    };
    for (std::size_t request : answer.penalized)
        settle_level(request, true);
    for (std::size_t request : answer.penalty_reads)
        settle_level(request, false);
}

// Decides a call read and planned; `schema` is the extension's.
PolicyAnswer decide_planned(FunctionCallInfo fcinfo, Oid schema, const PolicyCall& call,
                            const PolicyPlan& plan, Micros now,
                            InFlightLimit* in_flight = nullptr) {
    PolicyAnswer answer;
    auto key_of = [&](std::size_t request) {
        const ResolvedPolicy& resolved = call.policies[request];
        return StateKey{resolved.space, resolved.subject};
    };
    switch (plan.kind) {
        case PolicyPlan::Kind::kSkipped:
            answer = answer_skipped(call.requests, plan, call.cost);
            break;
        case PolicyPlan::Kind::kDenyList:
            answer = answer_deny_list(call.requests, plan, call.cost, now);
            break;
        case PolicyPlan::Kind::kCostExceedsLimit: {
            Decision peek;
            if (in_flight != nullptr) {
                peek = in_flight->look(key_of(plan.stop), plan.stop_limit, now);
            } else {
                EngineStorage storage;
                StateEngine& engine = state_engine(call.policies[plan.stop].rule->engine, schema,
                                                   "ratelimit.check()", storage);
                peek = engine.decide(key_of(plan.stop), plan.stop_limit, now, 1, Action::kPeek);
            }
            answer = answer_cost_exceeds(call.requests, plan, peek, call.cost);
            break;
        }
        case PolicyPlan::Kind::kDecide: {
            std::vector<Decision> decisions(plan.checked.size());
            bool allowed = false;
            if (in_flight != nullptr) {
                // One concurrency policy, on the lease table: a denied lease holds nothing, so
                // there is nothing to undo.
                decisions[0] = in_flight->take(key_of(plan.checked[0].request),
                                               plan.checked[0].limit, call.cost, now);
                allowed = decisions[0].allowed;
            } else {
                std::vector<TierCall> tiers(plan.checked.size());
                std::vector<StateKey> keys(plan.checked.size());
                for (std::size_t i = 0; i < plan.checked.size(); ++i) {
                    tiers[i].index = i;
                    tiers[i].engine = call.policies[plan.checked[i].request].rule->engine;
                    tiers[i].limit = plan.checked[i].limit;
                    tiers[i].enforced = plan.checked[i].enforced;
                    keys[i] = key_of(plan.checked[i].request);
                }
                sort_tiers(tiers, keys);
                allowed = decide_tiers(tiers, keys, schema, "ratelimit.check()", now, call.cost);
                for (const TierCall& tier : tiers)
                    decisions[tier.index] = reported_decision(tier, allowed);
            }
            answer = answer_decided(call.requests, plan, decisions, allowed, call.cost);
            answer.checked = std::move(decisions);
            apply_penalties(schema, call, answer, now);
            break;
        }
    }
    apply_answer(fcinfo, schema, call, answer, now);
    return answer;
}

// Decides a policy call from its arguments; `schema` is the extension's.
PolicyAnswer decide_call(FunctionCallInfo fcinfo, const ArgumentNames& names, Oid schema,
                         Micros now, PolicyCall* call_out) {
    const PolicyCatalog& catalog = policy_catalog(schema);
    const TextList policies = text_list(fcinfo, 0, names.scalar, names.policies);
    const TextList keys = text_list(fcinfo, 1, names.scalar, names.keys);
    PolicyCall& call = *call_out;
    call = read_policy_call(fcinfo, names, catalog, now, policies, keys);
    return decide_planned(fcinfo, schema, call, plan_call(call, now), now);
}

// The answer as a ratelimit.policy_decision row.
Datum answer_datum(FunctionCallInfo fcinfo, const PolicyCall& call, const PolicyAnswer& answer,
                   Micros now) {
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

Oid call_schema(FunctionCallInfo fcinfo) {
    Oid schema = InvalidOid;
    call_postgres([&] { schema = policy_call_site(fcinfo)->schema; });
    return schema;
}

Micros now_checked() {
    const Micros now = clock_now();
    require_valid_instant(now);
    return now;
}

Datum check_body(FunctionCallInfo fcinfo) {
    const Oid schema = call_schema(fcinfo);
    const Micros now = now_checked();
    PolicyCall call;
    const PolicyAnswer answer =
        decide_call(fcinfo, ArgumentNames{"p_policy", "p_key", true}, schema, now, &call);
    return answer_datum(fcinfo, call, answer, now);
}

// check_many(): check(p_policy, subject, ...) for each subject in turn. Every subject is read
// and planned (its key, its override, its lists, the limit it gets) before the first is
// decided, so a refused argument charges nothing.
void read_check_many(FunctionCallInfo fcinfo, Oid schema, Micros now,
                     std::vector<PolicyCall>* calls, std::vector<PolicyPlan>* plans) {
    const TextList policy = text_list(fcinfo, 0, true, "p_policy");
    const std::vector<Datum> subjects = key_array_argument(fcinfo, 1, "p_subject");
    const PolicyCatalog& catalog = policy_catalog(schema);
    const std::size_t count = subjects.size();
    calls->resize(count);
    plans->resize(count);
    for (std::size_t i = 0; i < count; ++i) {
        TextList subject;
        subject.values.push_back(subjects[i]);
        subject.nulls.push_back(false);
        const ArgumentNames names{"p_policy", element_name("p_subjects", static_cast<int>(i)),
                                  true};
        (*calls)[i] = read_policy_call(fcinfo, names, catalog, now, policy, subject);
        (*plans)[i] = plan_call((*calls)[i], now);
    }
}

Datum check_many_body(FunctionCallInfo fcinfo) {
    const Oid schema = call_schema(fcinfo);
    const Micros now = now_checked();
    std::vector<PolicyCall> calls;
    std::vector<PolicyPlan> plans;
    read_check_many(fcinfo, schema, now, &calls, &plans);
    const std::size_t count = calls.size();
    Datum* elements = nullptr;
    call_postgres([&] { elements = static_cast<Datum*>(palloc(sizeof(Datum) * count)); });
    for (std::size_t i = 0; i < count; ++i) {
        const PolicyAnswer answer = decide_planned(fcinfo, schema, calls[i], plans[i], now);
        elements[i] = answer_datum(fcinfo, calls[i], answer, now);
    }
    Datum result = 0;
    call_postgres([&] {
        const Oid row_type = policy_call_site(fcinfo)->decision->tdtypeid;
        result = PointerGetDatum(construct_array(elements, static_cast<int>(count), row_type, -1,
                                                 false, TYPALIGN_DOUBLE));
    });
    return result;
}

Datum check_all_body(FunctionCallInfo fcinfo) {
    const Oid schema = call_schema(fcinfo);
    const Micros now = now_checked();
    PolicyCall call;
    const PolicyAnswer answer =
        decide_call(fcinfo, ArgumentNames{"p_policies", "p_keys", false}, schema, now, &call);
    return answer_datum(fcinfo, call, answer, now);
}

// decide_policies(..., p_policy_argument, p_key_argument): the shared body, with the names
// its errors use given by the caller.
Datum decide_policies_body(FunctionCallInfo fcinfo) {
    const std::string_view policy_argument = name_argument(fcinfo, 6, "p_policy_argument");
    const std::string_view key_argument = name_argument(fcinfo, 7, "p_key_argument");
    // The arrays are read as arrays whatever the names say.
    const ArgumentNames names{std::string(policy_argument.substr(0, 64)),
                              std::string(key_argument.substr(0, 64)), false};
    const Oid schema = call_schema(fcinfo);
    const Micros now = now_checked();
    PolicyCall call;
    const PolicyAnswer answer = decide_call(fcinfo, names, schema, now, &call);
    return answer_datum(fcinfo, call, answer, now);
}

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

// The pk parameter: SipHash-2-4 (128-bit output, ratelimit/key_hash.hpp) of the policy's name,
// a NUL and the subject as given, keyed with the first 16 bytes of the database's
// ratelimit.partition_key_secret, cut to kPartitionKeyBytes. SipHash is a pseudorandom function:
// a client can tell whether two responses count against the same subject, never which subject
// (it cannot know the secret); the name in the hash keeps one subject's keys apart across
// policies. It costs a fraction of a microsecond, with no allocation.
constexpr std::size_t kPartitionKeyBytes = 12;

std::optional<std::string> partition_key(const PolicyCatalog& catalog,
                                         const ResolvedPolicy& resolved) {
    const std::string& secret = catalog.partition_secret;
    if (secret.size() < 16)
        return std::nullopt;
    HashSecret key;
    for (int i = 0; i < 8; ++i) {
        key.k0 |= static_cast<std::uint64_t>(static_cast<std::uint8_t>(secret[i])) << (8 * i);
        key.k1 |= static_cast<std::uint64_t>(static_cast<std::uint8_t>(secret[8 + i])) << (8 * i);
    }
    const std::string& name = resolved.rule->name;
    const std::string_view subject = text_bytes(resolved.key);
    std::string input;
    input.reserve(name.size() + 1 + subject.size());
    input.append(name);
    input.push_back('\0');
    input.append(subject);
    const KeyHash hash = hash_key(key, input.data(), input.size());
    std::string bytes(16, '\0');
    for (int i = 0; i < 8; ++i) {
        bytes[i] = static_cast<char>(hash.low >> (8 * i));
        bytes[8 + i] = static_cast<char>(hash.high >> (8 * i));
    }
    bytes.resize(kPartitionKeyBytes);
    return bytes;
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

// check_http(): one round trip for an edge function: the decision, its status, headers and
// 429 body, and the decision as an object. Decided as check_all decides, keeping the plan for
// the fields of every policy.
struct HttpFormats {
    ResetFormat reset;
    BodyShape body;
};

HttpFormats read_http_formats(FunctionCallInfo fcinfo) {
    return HttpFormats{
        parse_reset_format("p_reset_format", name_argument(fcinfo, 6, "p_reset_format")),
        parse_body_shape("p_body_shape", name_argument(fcinfo, 7, "p_body_shape"))};
}

Datum check_http_body(FunctionCallInfo fcinfo) {
    // The formats are checked before anything is charged.
    const HttpFormats formats = read_http_formats(fcinfo);
    const ResetFormat format = formats.reset;
    const BodyShape shape = formats.body;
    const Oid schema = call_schema(fcinfo);
    const Micros now = now_checked();
    const ArgumentNames names{"p_policies", "p_keys", false};
    const PolicyCatalog& catalog = policy_catalog(schema);
    const TextList policies = text_list(fcinfo, 0, names.scalar, names.policies);
    const TextList keys = text_list(fcinfo, 1, names.scalar, names.keys);
    const PolicyCall call = read_policy_call(fcinfo, names, catalog, now, policies, keys);
    const PolicyPlan plan = plan_call(call, now);
    const PolicyAnswer answer = decide_planned(fcinfo, schema, call, plan, now);
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

// ---- a policy's key, for administrators ---------------------------------------------------------

// The policy and subject of reset_policy_key and block_policy_key: a policy's counters are
// reachable through the policy only, never through a native key.
ResolvedPolicy policy_key_arguments(FunctionCallInfo fcinfo, const PolicyCatalog& catalog) {
    const std::string_view name = name_argument(fcinfo, 0, "p_policy");
    ResolvedPolicy resolved;
    resolved.rule = catalog.policy(name);
    if (resolved.rule == nullptr)
        throw ArgumentError(ErrorKind::kInvalidArgument, "p_policy",
                            "p_policy: unknown policy \"" + first_characters(name, 64) + "\"");
    resolved.key = key_argument(fcinfo, 1, "p_key");
    resolved.subject = resolved.rule->hash_key ? hashed_subject(resolved.key) : resolved.key;
    call_postgres([&] { resolved.space = PointerGetDatum(PG_GETARG_TEXT_PP(0)); });
    return resolved;
}

// ratelimit.reset_policy_key(p_policy, p_key): forgets what the policy counted for the subject.
Datum reset_policy_key_body(FunctionCallInfo fcinfo) {
    const Oid schema = call_schema(fcinfo);
    const ResolvedPolicy resolved = policy_key_arguments(fcinfo, policy_catalog(schema));
    EngineStorage storage;
    StateEngine& engine =
        state_engine(resolved.rule->engine, schema, "ratelimit.reset_policy_key()", storage);
    // The penalty level goes too: a reset key starts over at the first step.
    const bool level_reset =
        !resolved.rule->penalty_blocks.empty() &&
        engine.reset(StateKey{penalty_space(resolved.rule->name), resolved.subject});
    return BoolGetDatum(engine.reset(StateKey{resolved.space, resolved.subject}) || level_reset);
}

// ratelimit.block_policy_key(p_policy, p_key, p_duration): denies the subject under the policy
// until now + p_duration (an earlier block is never shortened); returns the block's end.
Datum block_policy_key_body(FunctionCallInfo fcinfo) {
    const Oid schema = call_schema(fcinfo);
    const ResolvedPolicy resolved = policy_key_arguments(fcinfo, policy_catalog(schema));
    const Micros duration = interval_argument(fcinfo, 2, "p_duration");
    EngineStorage storage;
    StateEngine& engine =
        state_engine(resolved.rule->engine, schema, "ratelimit.block_policy_key()", storage);
    const Micros now = now_checked();
    return TimestampTzGetDatum(to_timestamptz(
        engine.block(StateKey{resolved.space, resolved.subject}, now + duration, now)));
}

// ratelimit.validate_policy_options(p_algorithm, p_penalty_blocks, p_penalty_decay,
// p_max_delay): the policies table's check of its penalty and delay columns, with the core's
// rules (require_valid_penalties, require_valid_limit).
Datum validate_policy_options_body(FunctionCallInfo fcinfo) {
    const Algorithm algorithm =
        parse_algorithm("p_algorithm", name_argument(fcinfo, 0, "p_algorithm"));
    if (!PG_ARGISNULL(1)) {
        const ArrayArgument blocks = array_argument(fcinfo, 1, "penalty_blocks", INTERVALOID, true);
        std::vector<Micros> lengths;
        for (int i = 0; i < blocks.count; ++i) {
            if (blocks.nulls[i])
                throw ArgumentError::null("penalty_blocks");
            const Interval* span = DatumGetIntervalP(blocks.values[i]);
            lengths.push_back(interval_value("penalty_blocks", span));
        }
        if (PG_ARGISNULL(2))
            throw ArgumentError::invalid("penalty_decay", "must be given with penalty_blocks");
        require_valid_penalties("", lengths, interval_argument(fcinfo, 2, "penalty_decay"));
    } else if (!PG_ARGISNULL(2)) {
        throw ArgumentError::invalid("penalty_decay", "needs penalty_blocks");
    }
    if (!PG_ARGISNULL(3)) {
        const Micros max_delay = interval_argument(fcinfo, 3, "max_delay");
        require_valid_max_delay("max_delay", algorithm, max_delay);
    }
    PG_RETURN_VOID();
}

// ---- the denial log --------------------------------------------------------------------------

const Oid kDenialRowTypes[] = {INT4OID, TIMESTAMPTZOID, TEXTOID, TEXTOID, JSONBOID};
SpiStatement denial_insert(
    "INSERT INTO %s.denial_log AS l (slot, logged_at, event_type, severity, source, status, "
    "error_message, event_data) VALUES ($1, $2, 'rate_limit_violation', 'warning', 'ratelimit', "
    "$3, $4, $5) ON CONFLICT (slot) DO UPDATE SET logged_at = EXCLUDED.logged_at, "
    "event_type = EXCLUDED.event_type, severity = EXCLUDED.severity, source = EXCLUDED.source, "
    "status = EXCLUDED.status, error_message = EXCLUDED.error_message, "
    "event_data = EXCLUDED.event_data",
    5, kDenialRowTypes);
const Oid kDenialTrimTypes[] = {INT4OID};
SpiStatement denial_trim("DELETE FROM %s.denial_log WHERE slot OPERATOR(pg_catalog.>=) $1", 1,
                         kDenialTrimTypes);

// round(a period in minutes, 3), as numeric text: "1.000", "0.250".
std::string minutes_text(Micros period) {
    const std::int64_t thousandths = (period * 1000 + kMicrosPerMinute / 2) / kMicrosPerMinute;
    std::string fraction = std::to_string(thousandths % 1000);
    fraction.insert(0, 3 - fraction.size(), '0');
    return std::to_string(thousandths / 1000) + "." + fraction;
}

void log_denial(FunctionCallInfo fcinfo, const PolicyCall& call, std::size_t request,
                Micros retry_after, bool enforced, Micros now) {
    const ResolvedPolicy& resolved = call.policies[request];
    const int size = denial_log_size();
    double draw = 0;
    if (size > 0)
        call_postgres([&] { draw = pg_prng_double(&pg_global_prng_state); });
    if (size <= 0 || !(draw < denial_log_sample_rate())) {
        count_unlogged_denial(resolved.rule->name);
        return;
    }
    const PolicyRule& rule = *resolved.rule;
    // The limit the policy decided with (after tiers and overrides).
    bool bypass = false;
    const std::int64_t limit =
        effective_limit(rule, call.requests[request].key_override, call.tier, now, &bypass).limit;
    const std::string message =
        "Rate limit exceeded: " + describe_limit(limit, (rule.period + 500) / 1000);
    std::vector<JsonMember> data(8);
    data[0].name = "identifier";
    data[0].kind = JsonMember::Kind::kString;
    data[0].text = std::string(text_bytes(resolved.subject));
    data[1].name = "policy";
    data[1].kind = JsonMember::Kind::kString;
    data[1].text = rule.name;
    data[2].name = "limit";
    data[2].kind = JsonMember::Kind::kNumber;
    data[2].number = limit;
    data[3].name = "window_minutes";
    data[3].kind = JsonMember::Kind::kNumericText;
    data[3].text = minutes_text(rule.period);
    data[4].name = "cost";
    data[4].kind = JsonMember::Kind::kNumber;
    data[4].number = call.cost;
    data[5].name = "retry_after_ms";
    data[5].kind = JsonMember::Kind::kNumber;
    data[5].number = milliseconds_up(retry_after);
    data[6].name = "user_id";
    data[7].name = "ip";
    char user_text[64] = {0};
    char ip_text[64] = {0};
    call_postgres([&] {
        if (call.caller.user) {
            pg_uuid_t uuid;
            memcpy(uuid.data, call.caller.user->data(), UUID_LEN);
            strlcpy(user_text, DatumGetCString(DirectFunctionCall1(uuid_out, UUIDPGetDatum(&uuid))),
                    sizeof user_text);
        }
        if (call.caller.ip) {
            inet* address = static_cast<inet*>(palloc0(sizeof(inet)));
            const int family = call.caller.ip->family;
            address->inet_data.family = family == 4 ? PGSQL_AF_INET : PGSQL_AF_INET6;
            address->inet_data.bits = family == 4 ? 32 : 128;
            memcpy(address->inet_data.ipaddr, call.caller.ip->bytes.data(), family == 4 ? 4 : 16);
            SET_INET_VARSIZE(address);
            char* host =
                TextDatumGetCString(DirectFunctionCall1(network_host, InetPGetDatum(address)));
            strlcpy(ip_text, host, sizeof ip_text);
        }
    });
    if (user_text[0] != '\0') {
        data[6].kind = JsonMember::Kind::kString;
        data[6].text = user_text;
    }
    if (ip_text[0] != '\0') {
        data[7].kind = JsonMember::Kind::kString;
        // a policy that hashes its keys keeps the caller's IP hashed too
        data[7].text = rule.hash_key ? std::string(text_bytes(hashed_subject(text_datum(ip_text))))
                                     : std::string(ip_text);
    }
    const Datum event_data = jsonb_object(data);
    // The queue (pg/policies/denial_queue.hpp) carries the row to the log whatever becomes of this
    // transaction; one that can write (not read only) also writes it now, so that its own
    // commit shows it at once.
    DenialRecord record;
    record.policy = rule.name;
    record.logged_at = now;
    record.enforced = enforced;
    record.log_size = size;
    record.message = message;
    const char* record_text = nullptr;
    call_postgres(
        [&] { record_text = DatumGetCString(DirectFunctionCall1(jsonb_out, event_data)); });
    record.event_data = record_text;
    const bool write_here = !XactReadOnly;
    queue_denial(record, write_here);
    if (!write_here)
        return;
    const Datum status = text_datum(enforced ? "blocked" : "shadow");
    const Datum error_message = text_datum(message);
    call_postgres([&] {
        const Oid schema = get_func_namespace(fcinfo->flinfo->fn_oid);
        const Oid sequence = get_relname_relid("denial_log_position", schema);
        const Oid table = get_relname_relid("denial_log", schema);
        if (!OidIsValid(sequence) || !OidIsValid(table))
            elog(ERROR, "ratelimit: the denial log is missing");
        // Written as the table's owner: callers decide by policy without any right on the log.
        HeapTuple class_row = SearchSysCache1(RELOID, ObjectIdGetDatum(table));
        if (!HeapTupleIsValid(class_row))
            elog(ERROR, "ratelimit: the denial log is missing");
        const Oid owner = reinterpret_cast<Form_pg_class>(GETSTRUCT(class_row))->relowner;
        ReleaseSysCache(class_row);
        Oid saved_user = InvalidOid;
        int saved_context = 0;
        GetUserIdAndSecContext(&saved_user, &saved_context);
        SetUserIdAndSecContext(
            owner, saved_context | SECURITY_LOCAL_USERID_CHANGE | SECURITY_RESTRICTED_OPERATION);
        const int slot = static_cast<int>(nextval_internal(sequence, false) % size);
        if (SPI_connect() != SPI_OK_CONNECT)
            elog(ERROR, "ratelimit: SPI_connect failed");
        Datum values[5] = {Int32GetDatum(slot), TimestampTzGetDatum(to_timestamptz(now)), status,
                           error_message, event_data};
        int rc = SPI_execute_plan(denial_insert.plan_for(fcinfo), values, nullptr, false, 0);
        if (rc != SPI_OK_INSERT)
            elog(ERROR, "ratelimit: writing the denial log failed: %s", SPI_result_code_string(rc));
        // A smaller ring than before: the slots past its end go.
        Datum trim[1] = {Int32GetDatum(size)};
        rc = SPI_execute_plan(denial_trim.plan_for(fcinfo), trim, nullptr, false, 0);
        if (rc != SPI_OK_DELETE)
            elog(ERROR, "ratelimit: trimming the denial log failed: %s",
                 SPI_result_code_string(rc));
        SPI_finish();
        SetUserIdAndSecContext(saved_user, saved_context);
    });
}

// ---- The router's checks (ratelimit_router, sql/router/policy_calls.sql) ----------------------
// A policy call's arguments read and planned exactly as the call reads them, and nothing decided:
// the router refuses bad input with the server's own message before it asks a shard (a shard's
// error costs PL/Proxy its connection). They are declared in the router's schema, so they find
// the policies in the schema ratelimit (the extension's, which is fixed), looked up once per
// call site.

Oid policies_schema(FunctionCallInfo fcinfo) {
    Oid schema = InvalidOid;
    call_postgres([&] {
        FmgrInfo* flinfo = fcinfo->flinfo;
        if (flinfo->fn_extra == nullptr) {
            auto* cached = static_cast<Oid*>(MemoryContextAlloc(flinfo->fn_mcxt, sizeof(Oid)));
            *cached = get_namespace_oid("ratelimit", false);
            flinfo->fn_extra = cached;
        }
        schema = *static_cast<Oid*>(flinfo->fn_extra);
    });
    return schema;
}

void read_and_plan(FunctionCallInfo fcinfo, const ArgumentNames& names) {
    const Oid schema = policies_schema(fcinfo);
    const Micros now = now_checked();
    const PolicyCatalog& catalog = policy_catalog(schema);
    const TextList policies = text_list(fcinfo, 0, names.scalar, names.policies);
    const TextList keys = text_list(fcinfo, 1, names.scalar, names.keys);
    plan_call(read_policy_call(fcinfo, names, catalog, now, policies, keys), now);
}

Datum check_arguments_body(FunctionCallInfo fcinfo) {
    read_and_plan(fcinfo, ArgumentNames{"p_policy", "p_key", true});
    return static_cast<Datum>(0);
}

Datum check_all_arguments_body(FunctionCallInfo fcinfo) {
    read_and_plan(fcinfo, ArgumentNames{"p_policies", "p_keys", false});
    return static_cast<Datum>(0);
}

Datum check_http_arguments_body(FunctionCallInfo fcinfo) {
    read_http_formats(fcinfo);
    read_and_plan(fcinfo, ArgumentNames{"p_policies", "p_keys", false});
    return static_cast<Datum>(0);
}

Datum check_many_arguments_body(FunctionCallInfo fcinfo) {
    std::vector<PolicyCall> calls;
    std::vector<PolicyPlan> plans;
    read_check_many(fcinfo, policies_schema(fcinfo), now_checked(), &calls, &plans);
    return static_cast<Datum>(0);
}

// ---- concurrency policies, and one policy for one subject (pg/policies/policy_api.hpp)
// ----------------

ArgumentError not_a_concurrency_policy(const std::string& argument, const PolicyRule& rule) {
    return ArgumentError(ErrorKind::kInvalidArgument, argument,
                         argument + ": policy \"" + rule.name +
                             "\" is not a concurrency policy (its quota_unit is not " +
                             kConcurrentRequests + ")");
}

void require_policy_kind(const PolicyRule& rule, const ArgumentNames& names, int i) {
    if (rule.concurrency == names.leases)
        return;
    const std::string argument = names.policy(i);
    if (names.leases)
        throw not_a_concurrency_policy(argument, rule);
    // Counted as a rate, its limit would refill over its period instead of coming back when
    // the work ends: refused, before anything is charged.
    const std::string message = argument + ": policy \"" + rule.name +
                                "\" is a concurrency policy (quota_unit " + kConcurrentRequests +
                                "): it limits units in flight, not a rate";
    call_postgres([&] {
        ereport(ERROR, (errcode(ERRCODE_FEATURE_NOT_SUPPORTED), errmsg("%s", message.c_str()),
                        errhint("Take a lease with ratelimit.acquire_policy() and release it (or "
                                "end its transaction) when the work is done.")));
    });
}

}  // namespace

const PolicyRule& concurrency_policy(const PolicyCatalog& catalog, std::string_view name) {
    const PolicyRule* rule = catalog.policy(name);
    if (rule == nullptr)
        throw ArgumentError(ErrorKind::kInvalidArgument, "p_policy",
                            "p_policy: unknown policy \"" + first_characters(name, 64) + "\"");
    if (!rule->concurrency)
        throw not_a_concurrency_policy("p_policy", *rule);
    return *rule;
}

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
    const Oid schema = call_schema(fcinfo);
    const Micros now = now_checked();
    ArgumentNames names{"p_policy", "p_key", true};
    names.leases = in_flight != nullptr;
    const PolicyCatalog& catalog = policy_catalog(schema);
    const TextList policies = text_list(fcinfo, 0, names.scalar, names.policies);
    const TextList keys = text_list(fcinfo, 1, names.scalar, names.keys);
    const PolicyCall call = read_policy_call(fcinfo, names, catalog, now, policies, keys);
    const PolicyPlan plan = plan_call(call, now);
    const ResolvedPolicy& resolved = call.policies[0];
    result.policy = resolved.rule->name;
    result.key = StateKey{resolved.space, resolved.subject};
    result.engine = resolved.rule->engine;
    result.now = now;
    result.schema = schema;
    if (plan.kind == PolicyPlan::Kind::kDecide)
        result.limit = plan.checked[0].limit;
    else if (plan.kind == PolicyPlan::Kind::kCostExceedsLimit)
        result.limit = plan.stop_limit;
    result.answer = decide_planned(fcinfo, schema, call, plan, now, in_flight);
    result.charged = plan.kind == PolicyPlan::Kind::kDecide && result.answer.allowed &&
                     result.answer.outcomes[0] == PolicyOutcome::kAllowed;
    return result;
}

}  // namespace ratelimit::pg

RATELIMIT_SQL_FUNCTION(ratelimit_check, ratelimit::pg::check_body)
RATELIMIT_SQL_FUNCTION(ratelimit_check_all, ratelimit::pg::check_all_body)
RATELIMIT_SQL_FUNCTION(ratelimit_check_many, ratelimit::pg::check_many_body)
RATELIMIT_SQL_FUNCTION(ratelimit_check_http, ratelimit::pg::check_http_body)
RATELIMIT_SQL_FUNCTION(ratelimit_decide_policies, ratelimit::pg::decide_policies_body)
RATELIMIT_SQL_FUNCTION(ratelimit_reset_policy_key, ratelimit::pg::reset_policy_key_body)
RATELIMIT_SQL_FUNCTION(ratelimit_validate_policy_options,
                       ratelimit::pg::validate_policy_options_body)
RATELIMIT_SQL_FUNCTION(ratelimit_block_policy_key, ratelimit::pg::block_policy_key_body)
RATELIMIT_SQL_FUNCTION(ratelimit_router_check_arguments, ratelimit::pg::check_arguments_body)
RATELIMIT_SQL_FUNCTION(ratelimit_router_check_all_arguments,
                       ratelimit::pg::check_all_arguments_body)
RATELIMIT_SQL_FUNCTION(ratelimit_router_check_http_arguments,
                       ratelimit::pg::check_http_arguments_body)
RATELIMIT_SQL_FUNCTION(ratelimit_router_check_many_arguments,
                       ratelimit::pg::check_many_arguments_body)
