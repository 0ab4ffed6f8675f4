// The hourly endpoint limits: increment_rate_limit(p_user_id, p_endpoint, p_limit,
// p_window_seconds, p_increment) over rate_limits, one row per (user_id, endpoint, aligned window).
#include <algorithm>
#include <cstdio>
#include <optional>

#include "pg/arguments.hpp"
#include "pg/clock.hpp"
#include "pg/guard.hpp"
#include "pg/jwt_caller.hpp"
#include "pg/spi_statement.hpp"
#include "ratelimit/aligned_window.hpp"
#include "ratelimit/error.hpp"
#include "ratelimit/identity.hpp"
#include "ratelimit/validation.hpp"

namespace ratelimit::pg {

namespace {

// One statement: the row of the current window is created or incremented under its row lock,
// so concurrent batches are serialized and none is lost. The counter saturates instead of
// overflowing the original integer column.
constexpr char kIncrementSql[] =
    "INSERT INTO %s.rate_limits AS r"
    "  (user_id, endpoint, counter, window_start, expires_at, created_at)"
    " VALUES ($1, $2, $3, $4, $5, $6)"
    " ON CONFLICT (user_id, endpoint, window_start) DO UPDATE SET"
    "  counter = LEAST(r.counter::bigint + $3, 2147483647)::integer"
    " RETURNING r.counter";

constexpr Oid kIncrementTypes[] = {UUIDOID,        TEXTOID,        INT4OID,
                                   TIMESTAMPTZOID, TIMESTAMPTZOID, TIMESTAMPTZOID};

SpiStatement increment_statement(kIncrementSql, 6, kIncrementTypes);

// An authenticated caller (a JWT with a sub) may only spend its own quota; trusted callers
// (service_role, server code: no sub) may name any user.
void require_own_quota(const pg_uuid_t* user_id) {
    std::optional<Uuid> caller = jwt_caller();
    if (caller && !std::equal(caller->begin(), caller->end(), user_id->data)) {
        throw ArgumentError::not_allowed("p_user_id", "must be the caller's own id (the JWT sub)");
    }
}

// increment_rate_limit(...) RETURNS jsonb {allowed, current, limit, retryAfter}.
Datum increment_rate_limit(FunctionCallInfo fcinfo) {
    Datum user_id = uuid_argument(fcinfo, 0, "p_user_id");
    Datum endpoint = key_argument(fcinfo, 1, "p_endpoint");
    std::int32_t limit = int32_argument(fcinfo, 2, "p_limit");
    std::int32_t window_seconds = int32_argument(fcinfo, 3, "p_window_seconds");
    std::int32_t increment = int32_argument(fcinfo, 4, "p_increment");
    require_positive("p_limit", limit);
    AlignedWindow window(limit,
                         window_length("p_window_seconds", window_seconds, kMicrosPerSecond));
    require_positive("p_increment", increment);
    require_own_quota(DatumGetUUIDP(user_id));

    Micros now = clock_now();
    std::int32_t counter = 0;
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
        int rc = SPI_execute_plan(increment_statement.plan_for(fcinfo), values, nullptr, false, 1);
        if (rc != SPI_OK_INSERT_RETURNING || SPI_processed != 1) {
            elog(ERROR, "ratelimit: incrementing a counter failed: %s", SPI_result_code_string(rc));
        }
        bool isnull = false;
        counter =
            DatumGetInt32(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull));
        SPI_finish();
    });

    // A saturated counter has lost count: it denies whatever the limit.
    bool allowed = counter < PG_INT32_MAX && window.admits(counter);
    long long retry_after = allowed ? 0 : window.seconds_until_end(now);
    char json[160];
    snprintf(json, sizeof json,
             "{\"allowed\": %s, \"current\": %d, \"limit\": %d, \"retryAfter\": %lld}",
             allowed ? "true" : "false", counter, limit, retry_after);
    Datum result = 0;
    call_postgres([&] { result = DirectFunctionCall1(jsonb_in, CStringGetDatum(json)); });
    return result;
}

}  // namespace

}  // namespace ratelimit::pg

RATELIMIT_SQL_FUNCTION(rl_increment_rate_limit, ratelimit::pg::increment_rate_limit)
