// The hourly endpoint limits: increment_rate_limit(p_user_id, p_endpoint, p_limit,
// p_window_seconds, p_increment) over rate_limits, one row per (user_id, endpoint, aligned window).
#include <algorithm>
#include <cstdio>
#include <optional>

#include "pg/bridge/arguments.hpp"
#include "pg/bridge/clock.hpp"
#include "pg/drop_ins/drop_in_rules.hpp"
#include "pg/drop_ins/endpoint_limits.hpp"
#include "pg/bridge/guard.hpp"
#include "pg/postgrest/jwt_caller.hpp"
#include "pg/bridge/spi_statement.hpp"
#include "ratelimit/aligned_window.hpp"
#include "ratelimit/drop_in_limits.hpp"
#include "ratelimit/identity.hpp"
#include "ratelimit/validation.hpp"

namespace ratelimit::pg {

namespace {

// One statement: the row of the window is created or incremented under its row lock, so
// concurrent batches are serialized and none is lost. The counter saturates instead of
// overflowing the original integer column.
//
// The window counted in is the one still open for (user_id, endpoint), if any (the one ending
// last), whatever p_window_seconds says; only when none is open does the caller's aligned
// window $4..$5 start. Otherwise a caller would reset its count by passing another length:
// a shorter one opens a fresh aligned window that knows nothing of the calls counted in the
// current one, and a longer one does too, its window starting before the current one. So, as
// on rpc_rate_limits, a window restarts only once the window in force has ended; a changed
// length (or an edited policy) applies from the next window. Refusing a length that differs
// from the open row's would be as safe, but would break every caller for up to a window when
// an application or policy changes its length.
constexpr char kIncrementSql[] =
    "WITH open_window AS ("
    "  SELECT o.window_start, o.expires_at FROM %1$s.rate_limits AS o"
    "  WHERE o.user_id = $1 AND o.endpoint = $2 AND o.window_start <= $6 AND o.expires_at > $6"
    "  ORDER BY o.expires_at DESC LIMIT 1)"
    " INSERT INTO %1$s.rate_limits AS r"
    "  (user_id, endpoint, counter, window_start, expires_at, created_at)"
    " SELECT $1, $2, $3, COALESCE(w.window_start, $4), COALESCE(w.expires_at, $5), $6"
    " FROM (VALUES (1)) AS one LEFT JOIN open_window AS w ON true"
    " ON CONFLICT (user_id, endpoint, window_start) DO UPDATE SET"
    "  counter = LEAST(r.counter::bigint + $3, 2147483647)::integer"
    " RETURNING r.counter, r.expires_at";

constexpr Oid kIncrementTypes[] = {UUIDOID,        TEXTOID,        INT4OID,
                                   TIMESTAMPTZOID, TIMESTAMPTZOID, TIMESTAMPTZOID};

SpiStatement increment_statement(kIncrementSql, 6, kIncrementTypes);

const DropInArguments kArgumentNames{"p_endpoint", "p_limit", "p_window_seconds", kMicrosPerSecond};

// A caller with a JWT sub may only spend its own quota, a JWT role without one no quota at all;
// trusted callers (service_role, server code: no sub) may name any user.
void require_own_quota(const pg_uuid_t* user_id) {
    Uuid target;
    std::copy(user_id->data, user_id->data + target.size(), target.begin());
    require_may_act_on("p_user_id", user_id_caller(), target);
}

}  // namespace

IncrementCall read_increment_call(FunctionCallInfo fcinfo) {
    Datum user_id = uuid_argument(fcinfo, 0, "p_user_id");
    Datum endpoint = key_argument(fcinfo, 1, "p_endpoint");
    std::int32_t limit = int32_argument(fcinfo, 2, "p_limit");
    std::int32_t window_seconds = int32_argument(fcinfo, 3, "p_window_seconds");
    std::int32_t increment = int32_argument(fcinfo, 4, "p_increment");
    require_positive("p_limit", limit);
    window_length("p_window_seconds", window_seconds, kMicrosPerSecond);
    require_positive("p_increment", increment);
    DropInLimit chosen =
        drop_in_limit_for(kArgumentNames, "endpoint.", endpoint, limit, window_seconds);
    require_own_quota(DatumGetUUIDP(user_id));
    return IncrementCall{user_id, endpoint, increment, AlignedWindow(chosen.limit, chosen.length)};
}

namespace {

// increment_rate_limit(...) RETURNS jsonb {allowed, current, limit, retryAfter}.
Datum increment_rate_limit(FunctionCallInfo fcinfo) {
    const IncrementCall call = read_increment_call(fcinfo);
    const Datum user_id = call.user_id;
    const Datum endpoint = call.endpoint;
    const std::int32_t increment = call.increment;
    const AlignedWindow& window = call.window;

    Micros now = clock_now();
    std::int64_t counter = 0;
    Micros window_end = 0;
    if (const std::optional<Engine> engine = drop_in_engine()) {
        // The same windows on an engine: the counter of (user_id, endpoint) in its own
        // namespace, in the window still open (expires_at > now), else a new aligned one.
        const StateKey key{drop_in_space(DropInSpace::kRateLimits),
                           user_name_key(DatumGetUUIDP(user_id), endpoint)};
        const WindowCount counted = count_in_window(*engine, key, now, window.end(now), false,
                                                    increment, "increment_rate_limit");
        counter = counted.count;
        window_end = counted.window_end;
    } else {
        call_postgres([&] {
            if (SPI_connect() != SPI_OK_CONNECT) {
                elog(ERROR, "ratelimit: SPI_connect failed");
            }
            Datum values[] = {user_id,
                              endpoint,
                              Int32GetDatum(increment),
                              TimestampTzGetDatum(to_timestamptz(window.start(now))),
                              TimestampTzGetDatum(to_timestamptz(window.end(now))),
                              TimestampTzGetDatum(to_timestamptz(now))};
            int rc =
                SPI_execute_plan(increment_statement.plan_for(fcinfo), values, nullptr, false, 1);
            if (rc != SPI_OK_INSERT_RETURNING || SPI_processed != 1) {
                elog(ERROR, "ratelimit: incrementing a counter failed: %s",
                     SPI_result_code_string(rc));
            }
            bool isnull = false;
            counter = DatumGetInt32(
                SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull));
            window_end = from_timestamptz(DatumGetTimestampTz(
                SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 2, &isnull)));
            SPI_finish();
        });
    }

    // A saturated counter has lost count: it denies whatever the limit.
    bool allowed = counter < PG_INT32_MAX && window.admits(counter);
    long long retry_after = allowed ? 0 : seconds_until(window_end, now);
    char json[160];
    snprintf(json, sizeof json,
             "{\"allowed\": %s, \"current\": %d, \"limit\": %lld, \"retryAfter\": %lld}",
             allowed ? "true" : "false", static_cast<int>(counter),
             static_cast<long long>(window.limit()), retry_after);
    Datum result = 0;
    call_postgres([&] { result = DirectFunctionCall1(jsonb_in, CStringGetDatum(json)); });
    return result;
}

}  // namespace

}  // namespace ratelimit::pg

RATELIMIT_SQL_FUNCTION(ratelimit_endpoint_limits_increment_rate_limit,
                       ratelimit::pg::increment_rate_limit)
