// The clock every decision reads: the server's wall clock (clock_timestamp() semantics, not
// the transaction start), unless a superuser has set ratelimit.test_clock.
#pragma once

#include "pg/postgres.hpp"
#include "ratelimit/time.hpp"

namespace ratelimit::pg {

// Registers the ratelimit.test_clock setting; called once from _PG_init.
void define_clock_settings();

// Now, in core time (microseconds since the Unix epoch).
Micros clock_now();

TimestampTz to_timestamptz(Micros unix_micros);
Micros from_timestamptz(TimestampTz timestamp);

}  // namespace ratelimit::pg
