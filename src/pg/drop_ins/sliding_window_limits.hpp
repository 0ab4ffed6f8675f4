// The sliding-window drop-in's arguments (src/pg/drop_ins/sliding_window_limits.cpp), read for
// its check_rate_limit and for the router's check of them (src/pg/router/drop_ins.cpp), which
// must refuse exactly what the call refuses.
#pragma once

#include <cstdint>
#include <vector>

#include "pg/bridge/postgres.hpp"
#include "ratelimit/second_buckets.hpp"

namespace ratelimit::pg {

// One key of a call and its limit over the per-second buckets.
struct BucketKeyLimit {
    Datum key;  // detoasted text
    std::int32_t window_seconds;
    SecondBuckets rule;
    const char* limit_name;  // p_limit, p_global_limit, ...
};

// check_rate_limit(p_key, p_limit, p_window_seconds, p_cost)'s arguments, checked (ArgumentError
// naming the argument): its one key, and the cost.
struct BucketKeyCall {
    std::vector<BucketKeyLimit> keys;
    std::int32_t cost = 0;
};
BucketKeyCall read_bucket_key_call(FunctionCallInfo fcinfo);

}  // namespace ratelimit::pg
