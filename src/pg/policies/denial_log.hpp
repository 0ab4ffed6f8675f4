// ratelimit.denial_log: a ring of ratelimit.denial_log_size rows, one per logged denial
// (log_denials), written as the table's owner. The row also goes to the denial queue
// (denial_queue.hpp), whose writer logs it when this transaction cannot.
#pragma once

#include <cstddef>
#include <cstdint>

#include "pg/bridge/postgres.hpp"
#include "pg/policies/policy_arguments.hpp"

namespace ratelimit::pg {

// Logs the denial of the call's `request`, decided under `limit` with the wait `retry_after`;
// `enforced` is false for a shadow policy's. Sampled by ratelimit.denial_log_sample_rate; a
// denial not logged is counted (policy_stats.denials_not_logged).
void log_denial(FunctionCallInfo fcinfo, const PolicyCall& call, std::size_t request,
                std::int64_t limit, Micros retry_after, bool enforced);

}  // namespace ratelimit::pg
