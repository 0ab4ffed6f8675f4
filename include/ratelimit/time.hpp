// Time in the core: signed 64-bit microseconds since the Unix epoch, integer arithmetic only.
#pragma once

#include <cstdint>

namespace ratelimit {

using Micros = std::int64_t;

constexpr Micros kMicrosPerSecond = 1000 * 1000;
constexpr Micros kMicrosPerMinute = 60 * kMicrosPerSecond;
constexpr Micros kMicrosPerDay = 24 * 60 * kMicrosPerMinute;

// The longest window any limit may use: a year of 365 days. Longer windows are almost always a
// unit mistake (seconds passed as minutes), and bounding them keeps every sum below overflow.
constexpr Micros kMaxWindow = 365 * kMicrosPerDay;

// A span as whole milliseconds, rounded up (a wait of 1 µs is 1 ms), as every decision reports
// its waits; 0 for a span that is not positive.
constexpr std::int64_t milliseconds_up(Micros span) noexcept {
    return span <= 0 ? 0 : (span + 999) / 1000;
}

// Overflow-checked arithmetic: false when the exact result does not fit.
inline bool checked_add(Micros a, Micros b, Micros* out) noexcept {
    return !__builtin_add_overflow(a, b, out);
}
inline bool checked_sub(Micros a, Micros b, Micros* out) noexcept {
    return !__builtin_sub_overflow(a, b, out);
}
inline bool checked_mul(Micros a, Micros b, Micros* out) noexcept {
    return !__builtin_mul_overflow(a, b, out);
}

}  // namespace ratelimit
