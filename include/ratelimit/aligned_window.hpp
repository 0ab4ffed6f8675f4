// The fixed window of the hourly endpoint limits (increment_rate_limit): windows are aligned to
// multiples of their length since the Unix epoch ([k*L, (k+1)*L)), so every caller agrees on where
// a window starts without storing it. Every call adds its size to the window's counter, allowed or
// not (the original counter is the traffic, its 429 shows "current 11 of 10"); a call is allowed
// when the counter, its own size included, is within the limit.
//
// Guarantee: in each aligned window, the calls allowed add up to at most `limit`.
#pragma once

#include <cstdint>

#include "ratelimit/time.hpp"

namespace ratelimit {

class AlignedWindow {
  public:
    AlignedWindow(std::int64_t limit, Micros length) : limit_(limit), length_(length) {}

    // Start of the window holding `now` (floor division, also for instants before 1970).
    Micros start(Micros now) const noexcept {
        Micros q = now / length_;
        if (now % length_ < 0)
            --q;
        return q * length_;
    }
    Micros end(Micros now) const noexcept { return start(now) + length_; }

    bool admits(std::int64_t counter) const noexcept { return counter <= limit_; }

    // Whole seconds until the window holding `now` ends, rounded up: calling again that many
    // seconds later lands in the next window. Never 0, since now < end(now).
    std::int64_t seconds_until_end(Micros now) const noexcept {
        Micros left = end(now) - now;
        return (left + kMicrosPerSecond - 1) / kMicrosPerSecond;
    }

    std::int64_t limit() const noexcept { return limit_; }
    Micros length() const noexcept { return length_; }

  private:
    std::int64_t limit_;
    Micros length_;
};

}  // namespace ratelimit
