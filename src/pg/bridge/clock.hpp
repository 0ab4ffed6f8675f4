// The clock every decision reads: the server's wall clock (clock_timestamp() semantics, not
// the transaction start), unless a superuser has set ratelimit.test_clock.
#pragma once

#include "pg/bridge/postgres.hpp"
#include "ratelimit/time.hpp"

namespace ratelimit::pg {

// The hooks of ratelimit.test_clock (pg/module/settings.cpp): the value is parsed once, when it is
// set, so that reading the clock stays free.
bool check_test_clock(char** newval, void** extra, GucSource source);
void assign_test_clock(const char* newval, void* extra);

// Now, in core time (microseconds since the Unix epoch).
Micros clock_now();

// clock_now(), refused (ArgumentError naming the clock) unless between 1970 and the year 10000
// (require_valid_instant): the clock every decision is made at.
Micros clock_now_checked();

TimestampTz to_timestamptz(Micros unix_micros);
Micros from_timestamptz(TimestampTz timestamp);

}  // namespace ratelimit::pg
