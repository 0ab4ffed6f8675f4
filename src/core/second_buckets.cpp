#include "ratelimit/second_buckets.hpp"

namespace ratelimit {

BucketDecision SecondBuckets::decide(const std::vector<Bucket>& counted, std::int64_t cost,
                                     Micros now) const {
    std::int64_t current = 0;
    for (const Bucket& bucket : counted) {
        current += bucket.count;
    }
    if (current + cost <= limit_) {
        return BucketDecision{true, current + cost, 0};
    }
    // Walk the buckets out of the window, oldest first, until the call would fit.
    std::int64_t remaining = current;
    for (const Bucket& bucket : counted) {
        remaining -= bucket.count;
        if (remaining + cost <= limit_) {
            Micros wait = bucket.start + window_ - now;  // > 0: the bucket still counts now
            std::int64_t seconds = (wait + kMicrosPerSecond - 1) / kMicrosPerSecond;
            return BucketDecision{false, current, seconds < 1 ? 1 : seconds};
        }
    }
    // cost > limit never fits; callers refuse such a cost before asking.
    return BucketDecision{false, current, window_ / kMicrosPerSecond};
}

}  // namespace ratelimit
