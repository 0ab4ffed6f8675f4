// Per-policy counters (allowed, denied, shadow-denied) and the top-offenders table, in shared
// memory. Like the memory engine they exist only when the library is preloaded; without it,
// recording is skipped and reading them is an error naming shared_preload_libraries.
#pragma once

#include <string_view>

#include "pg/postgres.hpp"
#include "ratelimit/policy.hpp"

namespace ratelimit::pg {

// Registers ratelimit.denial_log_size and ratelimit.denial_log_sample_rate (read by the
// policy functions in SQL); called from _PG_init in every process.
void define_policy_settings();

// Requests the shared memory and locks; called from _PG_init only while
// shared_preload_libraries is being processed.
void install_policy_counters();

// Counts one policy's outcome of a call in this database, and a denial of `subject` (unless
// empty) in the top-offenders table. Does nothing without preloading.
void count_outcome(std::string_view policy, std::string_view subject, PolicyOutcome outcome,
                   Micros now);

// The denial log's settings.
int denial_log_size();
double denial_log_sample_rate();

}  // namespace ratelimit::pg
