// An instant written as ISO 8601 text (ratelimit.test_clock): read by the core, without
// PostgreSQL's date parser, so that a bad value is an answer and never a raised error.
//
// Accepted: YYYY-MM-DD, then optionally a 'T' or a space and HH:MM[:SS[.ffffff]], then
// optionally Z or an offset ±HH, ±HHMM or ±HH:MM. A time without an offset is local time: the
// PostgreSQL layer resolves it in the session's time zone.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

#include "ratelimit/time.hpp"

namespace ratelimit {

struct InstantText {
    Micros local = 0;  // the civil date and time as if in UTC, µs since the Unix epoch
    int year = 0, month = 0, day = 0, hour = 0, minute = 0, second = 0;
    std::int64_t microsecond = 0;
    std::optional<int> offset_seconds;  // east of UTC; empty when the text gave none
};

// The fields of `text`, or empty when it is not in the form above or names no real date (for
// years 1 to 9999).
std::optional<InstantText> parse_instant_text(std::string_view text) noexcept;

}  // namespace ratelimit
