// The router's checks of the native calls' arguments (sql/router/native_calls.sql:
// ratelimit_router.consume, peek, refund, allow, consume_many, peek_many, reset and block): each
// read by the native calls' own readers (pg/native/native_api.hpp), nothing decided, so that
// bad input is refused with the server's own message before a shard is asked (a shard's error
// costs PL/Proxy its connection).
#include "pg/bridge/guard.hpp"
#include "pg/bridge/postgres.hpp"
#include "pg/native/native_api.hpp"
#include "ratelimit/engine.hpp"

namespace ratelimit::pg {
namespace {

// consume's, peek's and allow's.
Datum limit_arguments_body(FunctionCallInfo fcinfo) {
    read_limit_call(fcinfo);
    return static_cast<Datum>(0);
}

// refund's, which also refuses a cost above what one call could take, as refund does.
Datum refund_arguments_body(FunctionCallInfo fcinfo) {
    require_cost_for(read_limit_call(fcinfo), Action::kRefund);
    return static_cast<Datum>(0);
}

// consume_many's and peek_many's.
Datum many_arguments_body(FunctionCallInfo fcinfo) {
    read_many_call(fcinfo);
    return static_cast<Datum>(0);
}

Datum reset_arguments_body(FunctionCallInfo fcinfo) {
    read_reset_call(fcinfo);
    return static_cast<Datum>(0);
}

Datum block_arguments_body(FunctionCallInfo fcinfo) {
    read_block_call(fcinfo);
    return static_cast<Datum>(0);
}

}  // namespace
}  // namespace ratelimit::pg

RATELIMIT_SQL_FUNCTION(ratelimit_router_limit_arguments, ratelimit::pg::limit_arguments_body)
RATELIMIT_SQL_FUNCTION(ratelimit_router_refund_arguments, ratelimit::pg::refund_arguments_body)
RATELIMIT_SQL_FUNCTION(ratelimit_router_many_arguments, ratelimit::pg::many_arguments_body)
RATELIMIT_SQL_FUNCTION(ratelimit_router_reset_arguments, ratelimit::pg::reset_arguments_body)
RATELIMIT_SQL_FUNCTION(ratelimit_router_block_arguments, ratelimit::pg::block_arguments_body)
