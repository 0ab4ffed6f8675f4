// Per-policy counters (allowed, denied, shadow-denied) and the top-offenders table, in shared
// memory. Like the memory engine they exist only when the library is preloaded; without it,
// recording is skipped and reading them is an error naming shared_preload_libraries.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "pg/postgres.hpp"
#include "ratelimit/policy.hpp"

namespace ratelimit::pg {

// Registers ratelimit.denial_log_size and ratelimit.denial_log_sample_rate (read by the
// policy functions in SQL); called from _PG_init in every process.
void define_policy_settings();

// Requests the shared memory and locks; called from _PG_init only while
// shared_preload_libraries is being processed.
void install_policy_counters();

// Counts one policy's outcome of a call in this database (an allowed one near the limit also
// as such), and a denial of `subject` (unless empty) in the top-offenders table. Does nothing
// without preloading.
void count_outcome(std::string_view policy, std::string_view subject, PolicyOutcome outcome,
                   Micros now, bool near_limit);

// Counts a denial of a log_denials policy that the denial log did not record (sampled out, or
// the log is off: ratelimit.denial_log_size = 0).
void count_unlogged_denial(std::string_view policy);

// This database's counters, one row per policy counted; false without preloading.
struct PolicyCounts {
    std::string policy;
    std::int64_t allowed = 0;
    std::int64_t denied = 0;
    std::int64_t shadow_denied = 0;
    std::int64_t near_limit = 0;
    std::int64_t denials_not_logged = 0;
    Micros since = 0;
};
bool read_policy_counts(std::vector<PolicyCounts>* counts);

// ratelimit.near_limit_ratio.
double near_limit_ratio();

// The denial log's settings.
int denial_log_size();
double denial_log_sample_rate();

}  // namespace ratelimit::pg
