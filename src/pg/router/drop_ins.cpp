// The router's side of the drop-ins (sql/router/drop_ins.sql): the JWT caller as the local
// functions resolve it, and the checks of each drop-in's arguments and caller rule, read by the
// drop-ins' own readers (pg/drop_ins/*.hpp) and nothing counted, so that the router refuses what
// the shard would before it asks one.
#include <algorithm>
#include <optional>

#include "pg/bridge/guard.hpp"
#include "pg/bridge/postgres.hpp"
#include "pg/drop_ins/endpoint_limits.hpp"
#include "pg/drop_ins/rpc_limits.hpp"
#include "pg/drop_ins/sliding_window_limits.hpp"
#include "pg/postgrest/jwt_caller.hpp"
#include "ratelimit/identity.hpp"

namespace ratelimit::pg {
namespace {

// ratelimit_router.jwt_caller(): the caller as the local functions resolve it, or NULL, for the
// router to forward to the shard that owns the caller's keys.
Datum jwt_caller_body(FunctionCallInfo fcinfo) {
    const std::optional<Uuid> caller = jwt_caller();
    if (!caller) {
        fcinfo->isnull = true;
        return static_cast<Datum>(0);
    }
    Datum result = 0;
    call_postgres([&] {
        auto* uuid = static_cast<pg_uuid_t*>(palloc(sizeof(pg_uuid_t)));
        std::copy(caller->begin(), caller->end(), uuid->data);
        result = UUIDPGetDatum(uuid);
    });
    return result;
}

// ratelimit_router.check_rate_limit's (the per-RPC drop-in's): the arguments and the caller as
// the call reads them.
Datum rpc_limit_arguments_body(FunctionCallInfo fcinfo) {
    read_rpc_limit_call(fcinfo, 0);
    jwt_caller();  // a malformed identity is refused as the call refuses it
    return static_cast<Datum>(0);
}

// ratelimit_router.check_rate_limit_for_user's: the arguments and the caller rule.
Datum rpc_limit_for_user_arguments_body(FunctionCallInfo fcinfo) {
    read_rpc_limit_for_user_call(fcinfo);
    return static_cast<Datum>(0);
}

// ratelimit_router.increment_rate_limit's: the arguments and the caller rule.
Datum increment_rate_limit_arguments_body(FunctionCallInfo fcinfo) {
    read_increment_call(fcinfo);
    return static_cast<Datum>(0);
}

// The keyed ratelimit_router.check_rate_limit's (the sliding-window drop-in's).
Datum check_rate_limit_arguments_body(FunctionCallInfo fcinfo) {
    read_bucket_key_call(fcinfo);
    return static_cast<Datum>(0);
}

}  // namespace
}  // namespace ratelimit::pg

RATELIMIT_SQL_FUNCTION(ratelimit_router_jwt_caller, ratelimit::pg::jwt_caller_body)
RATELIMIT_SQL_FUNCTION(ratelimit_router_rpc_limit_arguments,
                       ratelimit::pg::rpc_limit_arguments_body)
RATELIMIT_SQL_FUNCTION(ratelimit_router_rpc_limit_for_user_arguments,
                       ratelimit::pg::rpc_limit_for_user_arguments_body)
RATELIMIT_SQL_FUNCTION(ratelimit_router_increment_rate_limit_arguments,
                       ratelimit::pg::increment_rate_limit_arguments_body)
RATELIMIT_SQL_FUNCTION(ratelimit_router_check_rate_limit_arguments,
                       ratelimit::pg::check_rate_limit_arguments_body)
