// Per-policy counters (allowed, denied, shadow-denied) and the top-offenders table, in shared
// memory. Like the memory engine they exist only when the library is preloaded; without it,
// recording is skipped and reading them is an error naming shared_preload_libraries.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "pg/bridge/postgres.hpp"

extern "C" {
#include "port/atomics.h"
}
#include "ratelimit/policy.hpp"

namespace ratelimit::pg {

// Requests the shared memory and locks; called from _PG_init only while
// shared_preload_libraries is being processed.
void install_policy_counters();

// Counts one policy's outcome of a call in this database (an allowed one near the limit also
// as such), and a denial of `subject` (unless empty) in the top-offenders table. Does nothing
// without preloading.
void count_outcome(std::string_view policy, std::string_view subject, PolicyOutcome outcome,
                   Micros now, bool near_limit);

// Counts a denial of a log_denials policy that the denial log did not record (sampled out, the
// log is off, its queue was full, or the server is a standby).
void count_unlogged_denial(std::string_view policy);

// The count a denial of `policy` not logged goes to, found now, so that it can be added to
// where nothing may be looked up (a transaction's abort); null without preloading.
pg_atomic_uint64* denials_not_logged_counter(std::string_view policy);

// count_unlogged_denial for `database`, from a process of another database or none (the denial
// log's workers): it looks nothing up in the catalogs.
void count_unlogged_denial_in(Oid database, std::string_view policy);

// This database's counters, one row per policy counted; false without preloading. When some
// of its calls found no counter (ratelimit.policy_counters full, or the database's share), a row
// with counted = false and no policy holds their counts, and one row per policy of the
// database without a counter says so (counted = false, has_counts = false).
struct PolicyCounts {
    std::string policy;
    std::int64_t allowed = 0;
    std::int64_t denied = 0;
    std::int64_t shadow_denied = 0;
    std::int64_t near_limit = 0;
    std::int64_t denials_not_logged = 0;
    Micros since = 0;
    bool counted = true;
    bool has_counts = true;
};
// `schema`: the extension's, where the policy tables are.
bool read_policy_counts(Oid schema, std::vector<PolicyCounts>* counts);

// Calls of databases beyond the ones counted apart that found no counter, all together.
std::int64_t uncounted_elsewhere();

// ratelimit.near_limit_ratio.
double near_limit_ratio();

// The denial log's settings.
int denial_log_size();
double denial_log_sample_rate();

}  // namespace ratelimit::pg
