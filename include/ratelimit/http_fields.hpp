// What a policy decision says over HTTP: the rate-limit response headers and the 429 bodies,
// as plain strings and numbers (the PostgreSQL layer turns them into jsonb).
//
//  X-RateLimit-Limit / -Remaining     the limit and what is left (never below 0)
//  X-RateLimit-Reset                  the instant the call would be allowed (denied) or the
//                                     allowance is full again (allowed), rounded up to the
//                                     millisecond: ISO 8601 in UTC with milliseconds, or Unix
//                                     seconds rounded up
//  Retry-After                        denied only: that wait in whole seconds, rounded up, >= 1
//  RateLimit / RateLimit-Policy       the IETF fields: "policy";r=<remaining>;t=<seconds> and
//                                     "policy";q=<limit>;w=<window seconds>
// Rounding up everywhere means that a client retrying at the time shown is allowed.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "ratelimit/time.hpp"

namespace ratelimit {

// A policy decision as ratelimit.policy_decision holds it (any field may be NULL when a caller
// crafts one); waits in milliseconds.
struct DecisionView {
    std::optional<bool> allowed;
    std::optional<std::string> policy;
    std::optional<std::int64_t> limit;
    std::optional<std::int64_t> remaining;
    std::optional<std::int64_t> retry_after_ms;
    std::optional<std::int64_t> reset_after_ms;
    std::optional<std::int64_t> period_ms;
    std::optional<std::int64_t> cost;
    std::optional<std::string> reason;
    std::optional<Micros> decided_at;
};

enum class ResetFormat { kIso8601, kUnix };
enum class BodyShape { kErrorMessage, kDetailed };

// Throw ArgumentError (22023, naming `argument`) for an unknown name.
ResetFormat parse_reset_format(const char* argument, std::string_view name);
BodyShape parse_body_shape(const char* argument, std::string_view name);

// Why a decision cannot be written out: a wait past what a timestamp holds, a count past what
// an integer holds (crafted decisions only).
enum class HttpOverflow { kNone, kTimestamp, kInteger };

// The headers, in a fixed order; empty when the decision checked no limit (limit NULL).
// A header whose value is empty is JSON null (a crafted decision without decided_at).
using HeaderList = std::vector<std::pair<std::string, std::optional<std::string>>>;
HttpOverflow rate_limit_headers(const DecisionView& decision, ResetFormat format,
                                HeaderList* headers);

// The 429 body's fields; `*denied` false (and no fields) when the decision allowed.
struct BodyField {
    std::string name;
    std::optional<std::string> text;     // a string value
    std::optional<std::int64_t> number;  // else a number, else JSON null
};
HttpOverflow rate_limit_body(const DecisionView& decision, BodyShape shape, bool* denied,
                             std::vector<BodyField>* fields);

// A period in words, for messages: "minute", "hour", "15 minutes", "90 seconds".
std::string describe_period_ms(std::int64_t period_ms);

// An instant (µs since the Unix epoch, 0..kMaxInstant) as ISO 8601 in UTC with milliseconds,
// the milliseconds truncated: "2026-03-01T10:00:00.000Z".
std::string iso8601_utc(Micros at);

}  // namespace ratelimit
