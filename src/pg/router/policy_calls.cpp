// The router's checks of the policy calls (ratelimit_router, sql/router/policy_calls.sql): a
// policy call's arguments read and planned exactly as the call reads them, and nothing decided:
// the router refuses bad input with the server's own message before it asks a shard (a shard's
// error costs PL/Proxy its connection). They are declared in the router's schema and find the
// policies in the extension's (policies_schema()).
#include <vector>

#include "pg/bridge/clock.hpp"
#include "pg/bridge/guard.hpp"
#include "pg/policies/policy_arguments.hpp"
#include "pg/policies/policy_cache.hpp"
#include "pg/policies/policy_effects.hpp"

#include "ratelimit/validation.hpp"

namespace ratelimit::pg {
namespace {

void read_and_plan(FunctionCallInfo fcinfo, const ArgumentNames& names) {
    const Oid schema = policies_schema();
    const Micros now = clock_now_checked();
    plan_call(fcinfo, schema, read_policy_call(fcinfo, names, policy_catalog(schema), now));
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
    const Oid schema = policies_schema();
    const Micros now = clock_now_checked();
    read_check_many(fcinfo, policy_catalog(schema), now,
                    [&](const PolicyCall& call) { plan_call(fcinfo, schema, call); });
    return static_cast<Datum>(0);
}

}  // namespace
}  // namespace ratelimit::pg

RATELIMIT_SQL_FUNCTION(ratelimit_router_check_arguments, ratelimit::pg::check_arguments_body)
RATELIMIT_SQL_FUNCTION(ratelimit_router_check_all_arguments,
                       ratelimit::pg::check_all_arguments_body)
RATELIMIT_SQL_FUNCTION(ratelimit_router_check_http_arguments,
                       ratelimit::pg::check_http_arguments_body)
RATELIMIT_SQL_FUNCTION(ratelimit_router_check_many_arguments,
                       ratelimit::pg::check_many_arguments_body)
