// The game backend's per-RPC limits: check_rate_limit(p_rpc_name, p_max_calls, p_window_minutes)
// over rpc_rate_limits, one row per (user_id, rpc_name), the caller taken from the request JWT; and
// check_rate_limit_for_user, the same decision for an explicit user id.
#include <algorithm>
#include <optional>

#include "pg/bridge/arguments.hpp"
#include "pg/bridge/clock.hpp"
#include "pg/drop_ins/drop_in_rules.hpp"
#include "pg/drop_ins/rpc_limits.hpp"
#include "pg/bridge/guard.hpp"
#include "pg/postgrest/jwt_caller.hpp"
#include "pg/bridge/spi_statement.hpp"
#include "ratelimit/drop_in_limits.hpp"
#include "ratelimit/identity.hpp"
#include "ratelimit/rolling_window.hpp"
#include "ratelimit/validation.hpp"

namespace ratelimit::pg {

namespace {

// The transition of RollingWindow::after_call, applied under the row lock that
// INSERT ... ON CONFLICT takes, so concurrent callers are serialized on the row and none is
// lost. $3 is now, $4 when the window ends if it starts now. A window restarts only once the
// window_expires_at it was opened with has passed: the length a later call passes (or a
// policy edited since) neither shortens nor lengthens a window already open, so no caller can
// restart its own window early. call_count saturates instead of overflowing the original
// integer column.
constexpr char kRecordCallSql[] =
    "INSERT INTO %s.rpc_rate_limits AS r"
    "  (user_id, rpc_name, call_count, window_start, window_expires_at)"
    " VALUES ($1, $2, 1, $3, $4)"
    " ON CONFLICT (user_id, rpc_name) DO UPDATE SET"
    "  call_count = CASE WHEN r.window_expires_at < $3 THEN 1"
    "                    ELSE r.call_count + (r.call_count < 2147483647)::integer END,"
    "  window_start = CASE WHEN r.window_expires_at < $3 THEN $3 ELSE r.window_start END,"
    "  window_expires_at = CASE WHEN r.window_expires_at < $3 THEN $4"
    "                           ELSE r.window_expires_at END"
    " RETURNING r.call_count";

constexpr Oid kRecordCallTypes[] = {UUIDOID, TEXTOID, TIMESTAMPTZOID, TIMESTAMPTZOID};

SpiStatement record_call_statement(kRecordCallSql, 4, kRecordCallTypes);

const DropInArguments kArgumentNames{"p_rpc_name", "p_max_calls", "p_window_minutes",
                                     kMicrosPerMinute};

}  // namespace

RpcLimitCall read_rpc_limit_call(FunctionCallInfo fcinfo, int first) {
    Datum rpc_name = key_argument(fcinfo, first, "p_rpc_name");
    std::int32_t max_calls = int32_argument(fcinfo, first + 1, "p_max_calls");
    std::int32_t window_minutes = int32_argument(fcinfo, first + 2, "p_window_minutes");
    require_positive("p_max_calls", max_calls);
    window_length("p_window_minutes", window_minutes, kMicrosPerMinute);
    DropInLimit limit =
        drop_in_limit_for(kArgumentNames, "rpc.", rpc_name, max_calls, window_minutes);
    return RpcLimitCall{rpc_name, RollingWindow(limit.limit, limit.length)};
}

namespace {

// Counts one call of `user_id` on the rpc and says whether it is allowed.
bool record_call(FunctionCallInfo fcinfo, Datum user_id, const RpcLimitCall& args) {
    Micros now = clock_now();
    Micros expires = now + args.window.length();
    if (const std::optional<Engine> engine = drop_in_engine()) {
        // The same window on an engine: the count of (user_id, rpc_name) in its own namespace;
        // the window restarts once window_expires_at < now.
        const StateKey key{drop_in_space(DropInSpace::kRpcRateLimits),
                           user_name_key(DatumGetUUIDP(user_id), args.rpc_name)};
        const WindowCount counted =
            count_in_window(*engine, key, now, expires, true, 1, "check_rate_limit");
        return counted.count < PG_INT32_MAX && args.window.admits(counted.count);
    }
    std::int32_t call_count = 0;
    call_postgres([&] {
        if (SPI_connect() != SPI_OK_CONNECT) {
            elog(ERROR, "ratelimit: SPI_connect failed");
        }
        Datum values[] = {user_id, args.rpc_name, TimestampTzGetDatum(to_timestamptz(now)),
                          TimestampTzGetDatum(to_timestamptz(expires))};
        int rc =
            SPI_execute_plan(record_call_statement.plan_for(fcinfo), values, nullptr, false, 1);
        if (rc != SPI_OK_INSERT_RETURNING || SPI_processed != 1) {
            elog(ERROR, "ratelimit: recording a call failed: %s", SPI_result_code_string(rc));
        }
        bool isnull = false;
        call_count =
            DatumGetInt32(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull));
        SPI_finish();
    });
    // A saturated count has lost count: it denies whatever the limit.
    return call_count < PG_INT32_MAX && args.window.admits(call_count);
}

// check_rate_limit(p_rpc_name, p_max_calls, p_window_minutes): the caller comes from the JWT;
// an anonymous caller is allowed without being counted (the original function's fail-open).
Datum check_rate_limit(FunctionCallInfo fcinfo) {
    RpcLimitCall args = read_rpc_limit_call(fcinfo, 0);
    std::optional<Uuid> caller = jwt_caller();
    if (!caller) {
        return BoolGetDatum(true);
    }
    pg_uuid_t user_id;  // plain bytes; SPI reads it during the call below
    std::copy(caller->begin(), caller->end(), user_id.data);
    return BoolGetDatum(record_call(fcinfo, UUIDPGetDatum(&user_id), args));
}

}  // namespace

RpcLimitForUserCall read_rpc_limit_for_user_call(FunctionCallInfo fcinfo) {
    Datum user_id = uuid_argument(fcinfo, 0, "p_user_id");
    RpcLimitCall args = read_rpc_limit_call(fcinfo, 1);
    if (in_jwt_role()) {
        Uuid target;
        std::copy(DatumGetUUIDP(user_id)->data, DatumGetUUIDP(user_id)->data + target.size(),
                  target.begin());
        require_may_act_on("p_user_id", UserIdCaller{true, jwt_caller()}, target);
    }
    return RpcLimitForUserCall{user_id, args};
}

namespace {

// check_rate_limit_for_user(p_user_id, p_rpc_name, p_max_calls, p_window_minutes).
Datum check_rate_limit_for_user(FunctionCallInfo fcinfo) {
    const RpcLimitForUserCall call = read_rpc_limit_for_user_call(fcinfo);
    return BoolGetDatum(record_call(fcinfo, call.user_id, call.args));
}

}  // namespace

}  // namespace ratelimit::pg

RATELIMIT_SQL_FUNCTION(ratelimit_rpc_limits_check_rate_limit, ratelimit::pg::check_rate_limit)
RATELIMIT_SQL_FUNCTION(ratelimit_rpc_limits_check_rate_limit_for_user,
                       ratelimit::pg::check_rate_limit_for_user)
