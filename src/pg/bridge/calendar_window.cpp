#include "pg/bridge/calendar_window.hpp"

#include <algorithm>
#include <cstring>

#include "pg/bridge/clock.hpp"
#include "pg/bridge/guard.hpp"

extern "C" {
#include "utils/datetime.h"
}
#include "ratelimit/error.hpp"

namespace ratelimit::pg {
namespace {

// Called inside call_postgres(): the first instant at which `zone`'s clock reads 00:00 on Julian
// day `julian`. A midnight that a daylight saving change skips is the instant of the change
// (PostgreSQL reads a skipped time at the offset before the change); a midnight that a change
// back makes happen twice is the first of the two (PostgreSQL would take the second).
TimestampTz local_midnight(int julian, pg_tz* zone) {
    struct pg_tm midnight;
    std::memset(&midnight, 0, sizeof(midnight));
    j2date(julian, &midnight.tm_year, &midnight.tm_mon, &midnight.tm_mday);
    struct pg_tm fields = midnight;
    int offset = DetermineTimeZoneOffset(&fields, zone);
    TimestampTz result = 0;
    if (tm2timestamp(&midnight, 0, &offset, &result) != 0)
        ereport(ERROR, (errcode(ERRCODE_DATETIME_VALUE_OUT_OF_RANGE),
                        errmsg("ratelimit: calendar window out of range")));
    // The same midnight at the offset in force just before it, if that is earlier and the
    // clock does read midnight then.
    struct pg_tm before;
    fsec_t fraction = 0;
    int offset_before = 0;
    if (timestamp2tm(result - 1, &offset_before, &before, &fraction, nullptr, zone) != 0 ||
        offset_before == offset)
        return result;
    TimestampTz earlier = 0;
    struct pg_tm fields_before = midnight;
    if (tm2timestamp(&fields_before, 0, &offset_before, &earlier) != 0 || earlier >= result)
        return result;
    struct pg_tm check;
    int offset_check = 0;
    if (timestamp2tm(earlier, &offset_check, &check, &fraction, nullptr, zone) == 0 &&
        check.tm_year == midnight.tm_year && check.tm_mon == midnight.tm_mon &&
        check.tm_mday == midnight.tm_mday && check.tm_hour == 0 && check.tm_min == 0 &&
        check.tm_sec == 0 && fraction == 0)
        return earlier;
    return result;
}

}  // namespace

pg_tz* find_time_zone(const char* argument, std::string_view name, ZoneCache* cache) {
    if (cache->zone != nullptr && static_cast<std::size_t>(cache->length) == name.size() &&
        std::memcmp(cache->name, name.data(), name.size()) == 0)
        return cache->zone;
    pg_tz* zone = nullptr;
    if (!name.empty() && name.size() <= TZ_STRLEN_MAX) {
        char terminated[TZ_STRLEN_MAX + 1];
        std::memcpy(terminated, name.data(), name.size());
        terminated[name.size()] = '\0';
        // pg_tzset keeps every zone it loads for the life of the backend, so the pointer may be
        // kept too.
        call_postgres([&] { zone = pg_tzset(terminated); });
    }
    if (zone == nullptr) {
        // PST, CEST, IST...: an abbreviation stands for an offset (and several zones), not for
        // a zone whose midnights and daylight saving a calendar window can follow.
        const bool abbreviation =
            name.size() >= 2 && name.size() <= 6 &&
            std::all_of(name.begin(), name.end(), [](char c) { return c >= 'A' && c <= 'Z'; });
        throw ArgumentError::invalid(
            argument,
            "must name a time zone PostgreSQL knows, such as Europe/Berlin or UTC (got \"" +
                std::string(name.substr(0, 64)) + "\"" +
                (abbreviation ? ": an abbreviation is not a zone; give its full name, such as "
                                "America/Los_Angeles for PST (see pg_timezone_names)"
                              : "") +
                ")");
    }
    std::memcpy(cache->name, name.data(), name.size());
    cache->length = static_cast<int>(name.size());
    cache->zone = zone;
    return zone;
}

pg_tz* utc_zone() {
    static pg_tz* utc = nullptr;
    if (utc == nullptr)
        call_postgres([&] { utc = pg_tzset("UTC"); });
    return utc;
}

void set_calendar_window(Limit& limit, CalendarUnit unit, pg_tz* zone, Micros now) {
    TimestampTz start = 0;
    TimestampTz end = 0;
    const TimestampTz at = to_timestamptz(now);
    call_postgres([&] {
        struct pg_tm tm;
        fsec_t fraction = 0;
        int offset = 0;
        if (timestamp2tm(at, &offset, &tm, &fraction, nullptr, zone) != 0)
            ereport(ERROR, (errcode(ERRCODE_DATETIME_VALUE_OUT_OF_RANGE),
                            errmsg("ratelimit: the clock is out of range")));
        int first = date2j(tm.tm_year, tm.tm_mon, tm.tm_mday);
        int next = first + 1;
        switch (unit) {
            case CalendarUnit::kNone:
            case CalendarUnit::kDay:
                break;
            case CalendarUnit::kWeek:
                // j2day counts from Sunday (0); an ISO week starts on Monday.
                first -= (j2day(first) + 6) % 7;
                next = first + 7;
                break;
            case CalendarUnit::kMonth:
                first = date2j(tm.tm_year, tm.tm_mon, 1);
                next = tm.tm_mon == MONTHS_PER_YEAR ? date2j(tm.tm_year + 1, 1, 1)
                                                    : date2j(tm.tm_year, tm.tm_mon + 1, 1);
                break;
        }
        start = local_midnight(first, zone);
        end = local_midnight(next, zone);
    });
    limit.window_start = from_timestamptz(start);
    limit.window_end = from_timestamptz(end);
    limit.period = limit.window_end - limit.window_start;
}

}  // namespace ratelimit::pg
