#include "pg/bridge/clock.hpp"

#include <cstdlib>

#include "pg/compat/compat.hpp"
#include "pg/bridge/guard.hpp"
#include "pg/bridge/settings.hpp"
#include "ratelimit/algorithms.hpp"
#include "ratelimit/instant_text.hpp"

extern "C" {
#include "pgtime.h"
#include "utils/datetime.h"
}

namespace ratelimit::pg {

namespace {

// PostgreSQL counts from 2000-01-01, the core from 1970-01-01.
constexpr Micros kPostgresEpochInUnixMicros =
    static_cast<Micros>(POSTGRES_EPOCH_JDATE - UNIX_EPOCH_JDATE) * USECS_PER_DAY;

// 9999-12-31 23:59:59.999999 UTC.
constexpr Micros kLatestTestClock = 253402300799999999LL;

bool test_clock_active = false;
TimestampTz test_clock_value = 0;

}  // namespace

// Parses the setting once, when it is set, so that reading the clock stays free.
bool check_test_clock(char** newval, void** extra, GucSource) {
    if (*newval == nullptr || (*newval)[0] == '\0') {
        *extra = nullptr;
        return true;
    }
    // Read by the core, never by raising: a check hook must answer, and an error caught here
    // could not be cleaned up without a subtransaction.
    const std::optional<InstantText> text = parse_instant_text(*newval);
    bool parsed = text.has_value();
    TimestampTz value = 0;
    if (parsed) {
        Micros unix_micros = text->local;
        if (text->offset_seconds) {
            unix_micros -= static_cast<Micros>(*text->offset_seconds) * kMicrosPerSecond;
        } else if (session_timezone != nullptr) {
            // Local time in the session's zone; PostgreSQL's offset counts seconds west of UTC.
            struct pg_tm tm;
            memset(&tm, 0, sizeof tm);
            tm.tm_year = text->year;
            tm.tm_mon = text->month;
            tm.tm_mday = text->day;
            tm.tm_hour = text->hour;
            tm.tm_min = text->minute;
            tm.tm_sec = text->second;
            unix_micros += static_cast<Micros>(DetermineTimeZoneOffset(&tm, session_timezone)) *
                           kMicrosPerSecond;
        }
        value = to_timestamptz(unix_micros);
    }
    // Years 1970 to 9999: every window added to it stays a valid timestamptz.
    if (!parsed || value < to_timestamptz(0) || value > to_timestamptz(kLatestTestClock)) {
        GUC_check_errdetail(
            "ratelimit.test_clock must be a timestamp with time zone between 1970 and 9999.");
        return false;
    }
    // GUC "extra" data is owned by the GUC machinery, which releases it itself.
    auto* stored = static_cast<TimestampTz*>(compat::guc_extra_malloc(sizeof(TimestampTz)));
    if (stored == nullptr)
        return false;
    *stored = value;
    *extra = stored;
    return true;
}

void assign_test_clock(const char*, void* extra) {
    test_clock_active = extra != nullptr;
    test_clock_value = extra != nullptr ? *static_cast<TimestampTz*>(extra) : 0;
}

TimestampTz to_timestamptz(Micros unix_micros) {
    return unix_micros - kPostgresEpochInUnixMicros;
}

Micros from_timestamptz(TimestampTz timestamp) {
    return timestamp + kPostgresEpochInUnixMicros;
}

Micros clock_now() {
    return from_timestamptz(test_clock_active ? test_clock_value : GetCurrentTimestamp());
}

Micros clock_now_checked() {
    const Micros now = clock_now();
    require_valid_instant(now);
    return now;
}

// ratelimit.clock_now(): the instant decisions are made at, for tests and dashboards.
Datum clock_now_sql(FunctionCallInfo) {
    return TimestampTzGetDatum(to_timestamptz(clock_now()));
}

}  // namespace ratelimit::pg

RATELIMIT_SQL_FUNCTION(ratelimit_clock_now, ratelimit::pg::clock_now_sql)
