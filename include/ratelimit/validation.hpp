// Argument validation shared by every SQL surface: one place decides what a valid key, limit
// and window are, and what the error says when they are not.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "ratelimit/time.hpp"

namespace ratelimit {

// Keys (rpc names, endpoints, bucket keys) are at most this many bytes. Long enough for a
// prefix plus a SHA-256 hex digest; short enough that a key can never bloat an index entry.
constexpr std::size_t kMaxKeyBytes = 256;

// Throws ArgumentError unless 1 <= length <= kMaxKeyBytes.
void require_key(const std::string& argument, std::size_t length);

// The most elements a batch call (consume_many, check_many, ...) takes: enough for any page of
// work, small enough that one call's answer stays a few megabytes.
constexpr std::size_t kMaxBatchElements = 10000;

// Throws ArgumentError unless 1 <= count <= kMaxBatchElements.
void require_batch_size(const std::string& argument, std::size_t count);

// Throws ArgumentError unless value > 0.
void require_positive(const std::string& argument, std::int64_t value);

// The one rule for a cost (p_cost of every call that takes one, an estimate, an actual cost):
// throws ArgumentError unless cost >= 0.
void require_non_negative_cost(const std::string& argument, std::int64_t cost);

// A window given as a count of `unit` (e.g. minutes): must be > 0 and at most kMaxWindow.
// Returns the window in microseconds.
Micros window_length(const std::string& argument, std::int64_t count, Micros unit);

// A span given as an SQL interval (months, days, microseconds): months are refused because
// their length varies; the total must be > 0 and at most kMaxWindow. Returns microseconds.
Micros interval_length(const std::string& argument, std::int32_t months, std::int32_t days,
                       std::int64_t micros);

// A calendar period: a window from one local midnight to another (a day, an ISO week from
// Monday, a month), whose length varies with daylight saving time and the month.
enum class CalendarUnit { kNone, kDay, kWeek, kMonth };

// What an SQL interval given as p_period means when a time zone is given (`zone_given`) or not.
// With a zone it must be '1 day', '1 week' (or '7 days') or '1 month'; without one, '1 month'
// is the calendar month in UTC and any period without months is no calendar period (kNone: the
// caller measures it with interval_length, as before). Throws ArgumentError naming `argument`.
CalendarUnit calendar_unit(const std::string& argument, std::int32_t months, std::int32_t days,
                           std::int64_t micros, bool zone_given);

// The usual length of `unit` (a day, 7 days, 31 days), which a limit is checked with before
// the call's real window is known.
Micros nominal_calendar_window(CalendarUnit unit) noexcept;

}  // namespace ratelimit
