// A policy call's arguments (pg/policies/policy_arguments.hpp).
#include "pg/policies/policy_arguments.hpp"

#include <cstring>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "pg/bridge/arguments.hpp"
#include "pg/bridge/calendar_window.hpp"
#include "pg/bridge/guard.hpp"
#include "pg/engines/state_engines.hpp"
#include "pg/policies/policy_counters.hpp"
#include "pg/policies/subject_hash.hpp"

extern "C" {
#include <sys/socket.h>

#include "mb/pg_wchar.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/inet.h"
#include "utils/uuid.h"
}

#include "ratelimit/error.hpp"
#include "ratelimit/validation.hpp"

namespace ratelimit::pg {
namespace {

ArgumentError not_a_concurrency_policy(const std::string& argument, const PolicyRule& rule) {
    return ArgumentError(ErrorKind::kInvalidArgument, argument,
                         argument + ": policy \"" + rule.name +
                             "\" is not a concurrency policy (its quota_unit is not " +
                             kConcurrentRequests + ")");
}

// A concurrency policy is decided by leases only: a call that would count it as a rate is
// refused before anything is charged, and acquire_policy takes nothing else.
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

// What a policy's lookup gave for the subject: a tier's name or a limit, or nothing (NULL).
struct LookedUp {
    bool found = false;      // the function still exists
    bool is_null = true;     // it answered NULL
    std::string tier;        // a tier lookup's answer
    std::int64_t limit = 0;  // a limit lookup's answer
};

// Calls a policy's lookup `function` (p_subject text, p_user uuid) as the caller, in the
// caller's snapshot: the app's own data decides, and a change to it is seen by the next call.
LookedUp call_lookup(const std::string& signature, bool tier, Datum subject,
                     const std::optional<Uuid>& user) {
    LookedUp answer;
    call_postgres([&] {
        // By its signature, as the policy keeps it (qualified with its schema).
        LOCAL_FCINFO(resolve, 1);
        InitFunctionCallInfoData(*resolve, nullptr, 1, InvalidOid, nullptr, nullptr);
        resolve->args[0].value = CStringGetTextDatum(signature.c_str());
        resolve->args[0].isnull = false;
        const Datum found = to_regprocedure(resolve);
        if (resolve->isnull)
            return;
        const Oid function = DatumGetObjectId(found);
        answer.found = true;
        FmgrInfo flinfo;
        fmgr_info(function, &flinfo);
        LOCAL_FCINFO(call, 2);
        InitFunctionCallInfoData(*call, &flinfo, 2, InvalidOid, nullptr, nullptr);
        call->args[0].value = subject;
        call->args[0].isnull = false;
        call->args[1].value = 0;
        call->args[1].isnull = !user.has_value();
        if (user) {
            pg_uuid_t* id = static_cast<pg_uuid_t*>(palloc(sizeof(pg_uuid_t)));
            std::memcpy(id->data, user->data(), UUID_LEN);
            call->args[1].value = UUIDPGetDatum(id);
        }
        const Datum value = FunctionCallInvoke(call);
        if (call->isnull)
            return;
        answer.is_null = false;
        if (tier) {
            const text* name = DatumGetTextPP(value);
            answer.tier.assign(VARDATA_ANY(name), VARSIZE_ANY_EXHDR(name));
        } else {
            answer.limit = DatumGetInt32(value);
        }
    });
    return answer;
}

std::optional<Uuid> caller_user(FunctionCallInfo fcinfo, int index) {
    if (PG_ARGISNULL(index))
        return std::nullopt;
    Uuid user;
    std::memcpy(user.data(), PG_GETARG_UUID_P(index)->data, UUID_LEN);
    return user;
}

}  // namespace

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

namespace {

// A policy's lookups, asked for the subject (the key as the caller gave it): the tier replaces
// the caller's for this policy (none when it answers NULL); the limit replaces the policy's, in
// a copy of the rule the call keeps. Every answer is checked as a policy row's would be.
void apply_lookups(const PolicyCatalog& catalog, const ArgumentNames& names, int i,
                   PolicyCall& call, ResolvedPolicy& resolved, PolicyRequest& request) {
    const PolicyLookups* lookups = catalog.policy_lookups(resolved.rule->name);
    if (lookups == nullptr)
        return;
    const std::string where = names.policy(i) + ": policy \"" + resolved.rule->name + "\"'s ";
    auto gone = [&](const char* column) {
        return ArgumentError(ErrorKind::kInvalidArgument, names.policy(i),
                             where + column + " function no longer exists");
    };
    if (!lookups->tier.empty()) {
        const LookedUp tier = call_lookup(lookups->tier, true, resolved.key, call.caller.user);
        if (!tier.found)
            throw gone("tier_lookup");
        request.tier_looked_up = true;
        if (!tier.is_null) {
            request.looked_up_tier = catalog.tier(tier.tier);
            if (request.looked_up_tier == nullptr)
                throw ArgumentError(ErrorKind::kInvalidArgument, names.policy(i),
                                    where + "tier_lookup gave an unknown tier \"" +
                                        first_characters(tier.tier, 64) + "\"");
        }
    }
    if (!lookups->limit.empty()) {
        const LookedUp limit = call_lookup(lookups->limit, false, resolved.key, call.caller.user);
        if (!limit.found)
            throw gone("limit_lookup");
        if (!limit.is_null) {
            if (limit.limit < 1)
                throw ArgumentError(ErrorKind::kInvalidArgument, names.policy(i),
                                    where + "limit_lookup gave a limit of " +
                                        std::to_string(limit.limit) + " (at least 1)");
            auto rule = std::make_unique<PolicyRule>(*resolved.rule);
            rule->limit = limit.limit;
            resolved.rule = rule.get();
            call.calendar_rules.push_back(std::move(rule));
        }
    }
}

}  // namespace

PolicyCall read_policy_call(FunctionCallInfo fcinfo, const ArgumentNames& names,
                            const PolicyCatalog& catalog, Micros now, const TextList& policies,
                            const TextList& keys) {
    PolicyCall call;
    call.names = names;
    PolicyCallInput& input = call.input;
    input.now = now;
    input.policies_argument = names.policies;
    input.near_limit_ratio = near_limit_ratio();
    if (PG_ARGISNULL(2))
        throw ArgumentError::null("p_cost");
    input.cost = PG_GETARG_INT32(2);
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
    require_non_negative_cost("p_cost", input.cost);
    if (!PG_ARGISNULL(3)) {
        const std::string_view tier = name_argument(fcinfo, 3, "p_tier");
        input.tier = catalog.tier(tier);
        if (input.tier == nullptr)
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
    input.requests.resize(count);
    for (int i = 0; i < count; ++i) {
        ResolvedPolicy& resolved = call.policies[i];
        PolicyRequest& request = input.requests[i];
        apply_lookups(catalog, names, i, call, resolved, request);
        request.rule = resolved.rule;
        request.key = text_bytes(resolved.key);
        request.key_override = catalog.key_override(resolved.rule->name, request.key);
        if (!catalog.access_list.empty())
            request.lists = match_lists(catalog.access_list, resolved.rule->name, request.key,
                                        call.caller, now);
    }
    return call;
}

PolicyCall read_policy_call(FunctionCallInfo fcinfo, const ArgumentNames& names,
                            const PolicyCatalog& catalog, Micros now) {
    const TextList policies = text_list(fcinfo, 0, names.scalar, names.policies);
    const TextList keys = text_list(fcinfo, 1, names.scalar, names.keys);
    return read_policy_call(fcinfo, names, catalog, now, policies, keys);
}

std::vector<PolicyCall> read_check_many(FunctionCallInfo fcinfo, const PolicyCatalog& catalog,
                                        Micros now,
                                        const std::function<void(const PolicyCall&)>& read) {
    const TextList policy = text_list(fcinfo, 0, true, "p_policy");
    const std::vector<Datum> subjects = key_array_argument(fcinfo, 1, "p_subject");
    const std::size_t count = subjects.size();
    std::vector<PolicyCall> calls(count);
    for (std::size_t i = 0; i < count; ++i) {
        TextList subject;
        subject.values.push_back(subjects[i]);
        subject.nulls.push_back(false);
        const ArgumentNames names{"p_policy", element_name("p_subjects", static_cast<int>(i)),
                                  true};
        calls[i] = read_policy_call(fcinfo, names, catalog, now, policy, subject);
        read(calls[i]);
    }
    return calls;
}

HttpFormats read_http_formats(FunctionCallInfo fcinfo) {
    return HttpFormats{
        parse_reset_format("p_reset_format", name_argument(fcinfo, 6, "p_reset_format")),
        parse_body_shape("p_body_shape", name_argument(fcinfo, 7, "p_body_shape"))};
}

const PolicyRule& concurrency_policy(const PolicyCatalog& catalog, std::string_view name) {
    const PolicyRule* rule = catalog.policy(name);
    if (rule == nullptr)
        throw ArgumentError(ErrorKind::kInvalidArgument, "p_policy",
                            "p_policy: unknown policy \"" + first_characters(name, 64) + "\"");
    if (!rule->concurrency)
        throw not_a_concurrency_policy("p_policy", *rule);
    return *rule;
}

}  // namespace ratelimit::pg
