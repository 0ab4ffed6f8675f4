// Calendar windows: a p_time_zone argument, and the window of a calendar period (a day, an ISO
// week, a month) that holds now in that zone, computed with PostgreSQL's own time-zone code.
#pragma once

#include <string_view>

#include "pg/bridge/postgres.hpp"

extern "C" {
#include "pgtime.h"
}
#include "ratelimit/algorithms.hpp"
#include "ratelimit/time.hpp"
#include "ratelimit/validation.hpp"

namespace ratelimit::pg {

// A time zone looked up once and kept by its user (a call site's fn_extra, a cached policy):
// the lookup runs again only when the name differs. Plain data, so that it can live in memory
// PostgreSQL allocates; zeroed means empty.
struct ZoneCache {
    char name[TZ_STRLEN_MAX + 1];
    int length;
    pg_tz* zone;
};

// The zone named `name` (an IANA name such as Europe/Berlin, or UTC), through `cache`. Throws
// ArgumentError (22023, naming `argument`) for a zone PostgreSQL does not know.
pg_tz* find_time_zone(const char* argument, std::string_view name, ZoneCache* cache);

// UTC, the zone of a calendar period given without a time zone.
pg_tz* utc_zone();

// Sets `limit`'s window to the calendar `unit` holding `now` in `zone`, from its local
// midnight to the next unit's, and its period to that window's length.
void set_calendar_window(Limit& limit, CalendarUnit unit, pg_tz* zone, Micros now);

}  // namespace ratelimit::pg
