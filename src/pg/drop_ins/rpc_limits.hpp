// The per-RPC drop-in's arguments (src/pg/drop_ins/rpc_limits.cpp), read for its
// check_rate_limit and check_rate_limit_for_user and for the router's checks of them
// (src/pg/router/drop_ins.cpp), which must refuse exactly what the calls refuse.
#pragma once

#include "pg/bridge/postgres.hpp"
#include "ratelimit/rolling_window.hpp"

namespace ratelimit::pg {

// The arguments both functions share, starting at position `first` (p_rpc_name, p_max_calls,
// p_window_minutes); validated, and the window taken from the policy rpc.<p_rpc_name> when there
// is one, before anything is read from the session or written.
struct RpcLimitCall {
    Datum rpc_name;
    RollingWindow window;
};
RpcLimitCall read_rpc_limit_call(FunctionCallInfo fcinfo, int first);

// check_rate_limit_for_user's arguments, checked, and its caller rule: meant for trusted roles;
// should a JWT role be granted it, it may only name its own id (the JWT sub).
struct RpcLimitForUserCall {
    Datum user_id;
    RpcLimitCall args;
};
RpcLimitForUserCall read_rpc_limit_for_user_call(FunctionCallInfo fcinfo);

}  // namespace ratelimit::pg
