#include "pg/drop_in_rules.hpp"

#include <string>

#include "pg/guard.hpp"
#include "pg/policy_cache.hpp"

extern "C" {
#include "catalog/namespace.h"
#include "utils/acl.h"
}

namespace ratelimit::pg {
namespace {

int caller_limits_setting = static_cast<int>(CallerLimits::kIgnore);
bool require_policy_setting = false;

const config_enum_entry kCallerLimitsOptions[] = {
    {"ignore", static_cast<int>(CallerLimits::kIgnore), false},
    {"must_match", static_cast<int>(CallerLimits::kMustMatch), false},
    {nullptr, 0, false}};

// service_role, a superuser or the extension's owner, judged by the session's current role
// (SET ROLE's, as for the JWT roles) so that a SECURITY DEFINER function in between lends
// nothing. Under the drop-ins' own SECURITY DEFINER, GetUserId() is their owner, the
// extension's.
bool trusted_caller() {
    bool trusted = false;
    call_postgres([&] {
        const Oid role = GetOuterUserId();
        trusted = superuser_arg(role) || role == GetUserId() ||
                  role == get_role_oid("service_role", true);
    });
    return trusted;
}

}  // namespace

DropInLimit drop_in_limit_for(const DropInArguments& arguments, const char* prefix, Datum name,
                              std::int64_t caller_limit, std::int64_t caller_window) {
    const text* name_text = reinterpret_cast<const text*>(DatumGetPointer(name));
    std::string policy_name(prefix);
    policy_name.append(VARDATA_ANY(name_text), VARSIZE_ANY_EXHDR(name_text));

    // A version older than the library (installed, not yet updated) may have no policy table:
    // then there is no policy to read.
    Oid schema = InvalidOid;
    bool has_policies = false;
    call_postgres([&] {
        schema = get_namespace_oid("ratelimit", true);
        has_policies = OidIsValid(schema) && OidIsValid(get_relname_relid("policies", schema));
    });
    std::optional<DropInPolicy> policy;
    if (has_policies) {
        if (const PolicyRule* rule = policy_catalog(schema).policy(policy_name))
            policy = DropInPolicy{rule->limit, rule->period};
    }

    DropInRules rules;
    rules.caller_limits = static_cast<CallerLimits>(caller_limits_setting);
    rules.require_policy = require_policy_setting;
    if (!policy && rules.require_policy)
        rules.trusted_caller = trusted_caller();
    return drop_in_limit(arguments, policy_name, policy, caller_limit, caller_window, rules);
}

void define_drop_in_settings() {
    // Superuser only, like ratelimit.jwt_roles: the roles these settings restrain must not be
    // able to change them.
    DefineCustomEnumVariable(
        "ratelimit.dropin_caller_limits",
        "When a policy exists for a drop-in's name: ignore the caller's limit and window, or "
        "refuse a call whose values differ (must_match).",
        nullptr, &caller_limits_setting, static_cast<int>(CallerLimits::kIgnore),
        kCallerLimitsOptions, PGC_SUSET, 0, nullptr, nullptr, nullptr);
    DefineCustomBoolVariable(
        "ratelimit.dropin_require_policy",
        "Refuses a drop-in call without a policy for its name, except from service_role, "
        "superusers and the extension's owner.",
        nullptr, &require_policy_setting, false, PGC_SUSET, 0, nullptr, nullptr, nullptr);
}

}  // namespace ratelimit::pg
