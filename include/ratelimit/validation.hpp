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

// A window given as a count of `unit` (e.g. minutes): must be > 0 and at most kMaxWindow.
// Returns the window in microseconds.
Micros window_length(const std::string& argument, std::int64_t count, Micros unit);

// A span given as an SQL interval (months, days, microseconds): months are refused because
// their length varies; the total must be > 0 and at most kMaxWindow. Returns microseconds.
Micros interval_length(const std::string& argument, std::int32_t months, std::int32_t days,
                       std::int64_t micros);

}  // namespace ratelimit
