// What a policy decision says over HTTP: the rate-limit response headers and the 429 bodies,
// as plain strings and numbers (the PostgreSQL layer turns them into jsonb).
//
//  X-RateLimit-Limit / -Remaining     the limit and what is left (never below 0)
//  X-RateLimit-Reset                  the instant the call would be allowed (denied) or the
//                                     allowance is full again (allowed), rounded up to the
//                                     millisecond: ISO 8601 in UTC with milliseconds, or Unix
//                                     seconds rounded up
//  Retry-After                        denied only: that wait in whole seconds, rounded up, >= 1
//  RateLimit / RateLimit-Policy       the IETF fields (draft-ietf-httpapi-ratelimit-headers),
//                                     Structured Fields lists (RFC 8941) with one item per
//                                     policy, the reported policy first:
//                                     "policy";r=<remaining>;t=<seconds>;pk=:<base64>: and
//                                     "policy";q=<limit>;qu="<unit>";w=<window seconds>;pk=...
//                                     (qu only when the unit is not requests, pk only when the
//                                     caller has one: check_http)
//  Content-Type                       denied with the problem body only:
//                                     application/problem+json
// Rounding up everywhere means that a client retrying at the time shown is allowed; the
// reported policy's t and Retry-After are the same number.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "ratelimit/time.hpp"

namespace ratelimit {

// One more policy of a call for the IETF fields, after the reported one: its limit, what is
// left, its wait in milliseconds (until the call would be allowed when it denies, until it is
// full again otherwise) and its window.
struct PolicyItem {
    std::string name;
    std::int64_t limit = 0;
    std::int64_t remaining = 0;
    std::int64_t wait_ms = 0;
    std::int64_t period_ms = 0;
    bool denies = false;                       // a denial's wait is at least one second
    std::optional<std::string> quota_unit;     // NULL or "requests": no qu
    std::optional<std::string> partition_key;  // raw bytes; no pk when empty
};

// A policy decision as ratelimit.policy_decision holds it (any field may be NULL when a caller
// crafts one); waits in milliseconds. The last fields are check_http's only (a decision row
// has none of them).
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
    std::optional<std::string> quota_unit;     // the reported policy's qu
    std::optional<std::string> partition_key;  // the reported policy's pk, raw bytes
    std::vector<PolicyItem> others;            // the call's other enforced policies, in order
    std::vector<std::string> violated;         // the denying policies; empty: the reported one
};

enum class ResetFormat { kIso8601, kUnix };
enum class BodyShape { kErrorMessage, kDetailed, kProblem };

// The problem type of a quota-exceeded 429 (draft-ietf-httpapi-ratelimit-headers).
inline constexpr const char* kQuotaExceededType =
    "https://iana.org/assignments/http-problem-types#quota-exceeded";

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
    std::optional<std::string> text;                  // a string value
    std::optional<std::int64_t> number;               // else a number
    std::optional<std::vector<std::string>> strings;  // else an array of strings, else null
};
HttpOverflow rate_limit_body(const DecisionView& decision, BodyShape shape, bool* denied,
                             std::vector<BodyField>* fields);

// Structured Fields (RFC 8941) pieces.
// An sf-string holds printable ASCII only: `"` and `\` are escaped with `\`; every other byte
// outside 0x20..0x7E, and `%` itself, is written %XX (uppercase hex), so distinct names stay
// distinct and a UTF-8 name reads as its percent-encoding.
std::string sf_string(std::string_view text);
// An sf-binary: `:` base64 (with padding) `:`.
std::string sf_binary(std::string_view bytes);
// True if `unit` may be a policy's quota unit: an sf-token (a letter or `*`, then letters,
// digits and !#$%&'*+-.^_`|~:/) of 1 to 63 characters; requests, content-bytes and
// concurrent-requests are the draft's.
bool valid_quota_unit(std::string_view unit);

// A period in words, for messages: "minute", "hour", "15 minutes", "90 seconds".
std::string describe_period_ms(std::int64_t period_ms);

// A limit in words, for messages: "1 request per minute", "10 requests per 15 minutes".
std::string describe_limit(std::int64_t limit, std::int64_t period_ms);

// An instant (µs since the Unix epoch, 0..kMaxInstant) as ISO 8601 in UTC with milliseconds,
// the milliseconds truncated: "2026-03-01T10:00:00.000Z".
std::string iso8601_utc(Micros at);

}  // namespace ratelimit
