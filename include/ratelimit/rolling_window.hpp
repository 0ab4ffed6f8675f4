// The rolling window of the game backend's per-RPC limits (check_rate_limit(p_rpc_name, ...)): a
// window starts at the first call of a key and lasts `length`; the first call after it has lasted
// longer than `length` starts a new one.
//
// Every call is counted, allowed or not (the original call_count is the number of calls in the
// window); a call is allowed when its own position in the window is within the limit.
//
// Guarantee: between two window starts at most `limit` calls are allowed, and a window restarts
// only once it is strictly older than `length`; so at most `limit` calls are allowed in any
// window of `length` that begins at a window start.
#pragma once

#include <cstdint>

#include "ratelimit/time.hpp"

namespace ratelimit {

struct RollingWindowState {
    std::int64_t call_count = 0;  // calls counted in the current window, this one included
    Micros window_start = 0;      // when the current window started
};

class RollingWindow {
  public:
    RollingWindow(std::int64_t limit, Micros length) : limit_(limit), length_(length) {}

    // Windows that started before this instant have expired at `now`.
    Micros restart_cutoff(Micros now) const noexcept { return now - length_; }

    // The state after one more call at `now`; `current` is nullptr for a key never seen.
    RollingWindowState after_call(const RollingWindowState* current, Micros now) const noexcept {
        if (current == nullptr || current->window_start < restart_cutoff(now)) {
            return RollingWindowState{1, now};
        }
        return RollingWindowState{current->call_count + 1, current->window_start};
    }

    // Whether the call that brought the window to `call_count` is allowed.
    bool admits(std::int64_t call_count) const noexcept { return call_count <= limit_; }

    std::int64_t limit() const noexcept { return limit_; }
    Micros length() const noexcept { return length_; }

  private:
    std::int64_t limit_;
    Micros length_;
};

}  // namespace ratelimit
