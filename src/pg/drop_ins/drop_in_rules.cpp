#include "pg/drop_ins/drop_in_rules.hpp"

#include <cstring>
#include <string>

#include "pg/bridge/arguments.hpp"
#include "pg/bridge/extension_schema.hpp"
#include "pg/bridge/guard.hpp"
#include "pg/engines/memory_engine.hpp"
#include "pg/policies/policy_cache.hpp"
#include "pg/bridge/result_row.hpp"
#include "pg/bridge/settings.hpp"
#include "pg/engines/state_engines.hpp"
#include "ratelimit/identity.hpp"

extern "C" {
#include "catalog/namespace.h"
#include "utils/acl.h"
}

namespace ratelimit::pg {
namespace {

// The counts of the apps' tables are integer columns: they stop at 2^31 - 1.
constexpr std::int64_t kCountCeiling = 2147483647;

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
        schema = extension_schema_if_exists();
        has_policies = OidIsValid(schema) && OidIsValid(get_relname_relid("policies", schema));
    });
    std::optional<DropInPolicy> policy;
    if (has_policies) {
        if (const PolicyRule* rule = policy_catalog(schema).policy(policy_name))
            policy = DropInPolicy{rule->limit, rule->period};
    }

    DropInRules rules;
    rules.caller_limits = static_cast<CallerLimits>(setting::dropin_caller_limits);
    rules.require_policy = setting::dropin_require_policy;
    if (!policy && rules.require_policy)
        rules.trusted_caller = trusted_caller();
    return drop_in_limit(arguments, policy_name, policy, caller_limit, caller_window, rules);
}

std::optional<Engine> drop_in_engine() {
    if (setting::dropin_engine == kDropInAppTables)
        return std::nullopt;
    const auto engine = static_cast<Engine>(setting::dropin_engine - 1);
    if (engine == Engine::kMemory)
        require_memory_engine("ratelimit.dropin_engine = memory",
                              "set ratelimit.dropin_engine to table or unlogged");
    return engine;
}

Datum drop_in_space(DropInSpace space) {
    static const char* const kNames[] = {"drop-in/rpc_rate_limits", "drop-in/rate_limits",
                                         "drop-in/rate_limit_buckets"};
    static Datum made[3] = {0, 0, 0};
    const int i = static_cast<int>(space);
    if (made[i] == 0) {
        call_postgres([&] {
            MemoryContext caller = MemoryContextSwitchTo(TopMemoryContext);
            made[i] = PointerGetDatum(cstring_to_text(kNames[i]));
            MemoryContextSwitchTo(caller);
        });
    }
    return made[i];
}

Datum user_name_key(const pg_uuid_t* user_id, Datum name) {
    Uuid id;
    std::memcpy(id.data(), user_id->data, UUID_LEN);
    std::string key = uuid_text(id) + ':';
    key.append(text_bytes(name));
    return text_datum(key);
}

Oid drop_in_state_schema() {
    Oid schema = InvalidOid;
    call_postgres([&] { schema = extension_schema(); });
    return schema;
}

WindowCount count_in_window(Engine engine, const StateKey& key, Micros now, Micros new_window_end,
                            bool end_inclusive, std::int64_t increment, const char* function_name) {
    // The key's state is a rolling_window whose instant is the end of the open window I, decided
    // at the clock moved forward to new_window_end E with a period P = E - now (+1 when the end
    // instant is inside). The algorithm keeps counting while max(E, I) < I + P, which holds
    // exactly while now < I (now <= I), whatever length this call passes; once it fails, the
    // window restarts with its instant at the clock, E. The ceiling as the limit counts every
    // call, allowed or not: the caller compares the count with its own limit.
    Limit limit;
    limit.algorithm = Algorithm::kRollingWindow;
    limit.limit = kCountCeiling;
    limit.burst = kCountCeiling;
    limit.period = new_window_end - now + (end_inclusive ? 1 : 0);

    Decision decision;
    if (engine == Engine::kMemory) {
        const MemoryKey memory = memory_key(key);
        // Decided at the clock moved forward, but room for a new key is made at the real one:
        // no other key that still counts is taken for expired.
        decision = memory_decide(memory, limit, new_window_end, increment, Action::kConsume, now);
        if (!decision.allowed && decision.remaining > 0)
            decision = memory_decide(memory, limit, new_window_end, decision.remaining,
                                     Action::kConsume, now);
    } else {
        EngineStorage storage;
        StateEngine& state = state_engine(engine, drop_in_state_schema(), function_name, storage);
        decision = state.decide(key, limit, new_window_end, increment, Action::kConsume);
        if (!decision.allowed && decision.remaining > 0)
            decision =
                state.decide(key, limit, new_window_end, decision.remaining, Action::kConsume);
    }
    WindowCount count;
    // Past the ceiling the count stays there (the second decision above fills the key to it).
    count.count = decision.allowed ? kCountCeiling - decision.remaining : kCountCeiling;
    // The wait until the key is fresh again is I + P - E, the rest of the open window.
    count.window_end = now + decision.reset_after - (end_inclusive ? 1 : 0);
    return count;
}

}  // namespace ratelimit::pg
