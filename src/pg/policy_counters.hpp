// Per-policy counters (allowed, denied, shadow-denied) and the top-offenders table, in shared
// memory. Like the memory engine they exist only when the library is preloaded; without it,
// recording is skipped and reading them is an error naming shared_preload_libraries.
#pragma once

#include "pg/postgres.hpp"

namespace ratelimit::pg {

// Registers ratelimit.denial_log_size and ratelimit.denial_log_sample_rate (read by the
// policy functions in SQL); called from _PG_init in every process.
void define_policy_settings();

// Requests the shared memory and locks; called from _PG_init only while
// shared_preload_libraries is being processed.
void install_policy_counters();

}  // namespace ratelimit::pg
