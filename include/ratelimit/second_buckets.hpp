// The sliding window of the orphaned-user cleanup's limits (check_rate_limit(p_key, ...)), kept as
// per-second buckets: a call at instant t falls in the bucket of its whole second; a bucket
// starting at s counts at `now` while s > now - W. Only allowed calls are recorded, so a denied
// call changes nothing.
//
// Guarantee: for every instant `now`, the calls allowed in buckets that count at `now` add up to
// at most `limit` (so at most `limit` in any W-second span, to the second).
#pragma once

#include <cstdint>
#include <vector>

#include "ratelimit/time.hpp"

namespace ratelimit {

struct Bucket {
    Micros start = 0;        // the whole second the bucket covers
    std::int64_t count = 0;  // allowed calls recorded in it
};

struct BucketDecision {
    bool allowed = false;
    std::int64_t current = 0;        // counted calls after this one (before it, if denied)
    std::int64_t retry_after_s = 0;  // 0 when allowed; >= 1 when denied
};

class SecondBuckets {
  public:
    SecondBuckets(std::int64_t limit, Micros window) : limit_(limit), window_(window) {}

    // The bucket a call at `now` is recorded in.
    static Micros bucket_of(Micros now) noexcept {
        Micros q = now / kMicrosPerSecond;
        if (now % kMicrosPerSecond < 0)
            --q;
        return q * kMicrosPerSecond;
    }

    // Buckets starting after this instant count at `now`.
    Micros counts_after(Micros now) const noexcept { return now - window_; }

    // Decides a call of `cost` at `now`. `counted` holds the buckets that count at `now`
    // (start > counts_after(now)), oldest first. When denied, retry_after_s is the wait, in whole
    // seconds rounded up, until enough old buckets have left the window for this call to fit;
    // with an unchanged limit that is the moment the oldest counted bucket leaves.
    BucketDecision decide(const std::vector<Bucket>& counted, std::int64_t cost, Micros now) const;

    std::int64_t limit() const noexcept { return limit_; }
    Micros window() const noexcept { return window_; }

  private:
    std::int64_t limit_;
    Micros window_;
};

}  // namespace ratelimit
