#include "ratelimit/http_fields.hpp"

#include <cstdio>
#include <limits>

#include "ratelimit/error.hpp"

namespace ratelimit {
namespace {

using Wide = __int128;

// The latest instant a PostgreSQL timestamp holds (294277-01-01), in µs since the Unix epoch.
constexpr Wide kTimestampEnd = Wide(9223371331200000000LL) + Wide(946684800000000LL);

// ceil(a / b) for b > 0, any sign of a.
std::int64_t ceil_div(std::int64_t a, std::int64_t b) {
    std::int64_t q = a / b;
    if (a % b != 0 && a > 0)
        ++q;
    return q;
}

std::int64_t floor_div(Wide a, std::int64_t b) {
    Wide q = a / b;
    if (a % b != 0 && a < 0)
        --q;
    return static_cast<std::int64_t>(q);
}

std::string text_or_empty(const std::optional<std::string>& value) {
    return value ? *value : std::string();
}

std::string number_or_empty(const std::optional<std::int64_t>& value) {
    return value ? std::to_string(*value) : std::string();
}

bool fits_int32(std::int64_t value) {
    return value >= std::numeric_limits<std::int32_t>::min() &&
           value <= std::numeric_limits<std::int32_t>::max();
}

BodyField text_field(const char* name, std::string text) {
    BodyField field;
    field.name = name;
    field.text = std::move(text);
    return field;
}

BodyField number_field(const char* name, std::optional<std::int64_t> number) {
    BodyField field;
    field.name = name;
    field.number = number;
    return field;
}

// A wait in whole seconds as t and Retry-After show it: rounded up, and at least 1 for a
// denial (a client must not retry at once).
std::int64_t wait_seconds(std::int64_t wait_ms, bool denies) {
    const std::int64_t seconds = ceil_div(wait_ms, 1000);
    return denies ? std::max<std::int64_t>(seconds, 1) : seconds;
}

// The parameters every item may end with: qu (RateLimit-Policy only) and pk.
std::string unit_parameter(const std::optional<std::string>& unit) {
    if (!unit || unit->empty() || *unit == "requests")
        return std::string();
    return ";qu=" + sf_string(*unit);
}

// A lease decision (ratelimit.lease_decision) limits units in flight: its own reasons say so,
// as a decision row has no quota unit of its own.
bool lease_reason(const std::optional<std::string>& reason) {
    return reason && (*reason == "leased" || *reason == "concurrency_limited");
}

std::string key_parameter(const std::optional<std::string>& key) {
    return key && !key->empty() ? ";pk=" + sf_binary(*key) : std::string();
}

std::string policy_item(const std::string& name, std::int64_t limit,
                        std::optional<std::int64_t> period_ms,
                        const std::optional<std::string>& unit,
                        const std::optional<std::string>& key) {
    std::string item = sf_string(name) + ";q=" + std::to_string(limit) + unit_parameter(unit);
    if (period_ms)
        item += ";w=" + std::to_string(ceil_div(*period_ms, 1000));
    return item + key_parameter(key);
}

std::string remaining_item(const std::string& name, std::int64_t remaining, std::int64_t seconds,
                           const std::optional<std::string>& key) {
    return sf_string(name) + ";r=" + std::to_string(std::max<std::int64_t>(remaining, 0)) +
           ";t=" + std::to_string(seconds) + key_parameter(key);
}

}  // namespace

ResetFormat parse_reset_format(const char* argument, std::string_view name) {
    if (name == "iso8601")
        return ResetFormat::kIso8601;
    if (name == "unix")
        return ResetFormat::kUnix;
    throw ArgumentError::invalid(
        argument, "must be one of iso8601, unix (got \"" + std::string(name.substr(0, 64)) + "\")");
}

BodyShape parse_body_shape(const char* argument, std::string_view name) {
    if (name == "error_message")
        return BodyShape::kErrorMessage;
    if (name == "detailed")
        return BodyShape::kDetailed;
    if (name == "problem")
        return BodyShape::kProblem;
    throw ArgumentError::invalid(argument,
                                 "must be one of error_message, detailed, problem (got \"" +
                                     std::string(name.substr(0, 64)) + "\")");
}

std::string sf_string(std::string_view text) {
    static const char kHex[] = "0123456789ABCDEF";
    std::string out = "\"";
    for (const char c : text) {
        const auto byte = static_cast<unsigned char>(c);
        if (c == '"' || c == '\\') {
            out += '\\';
            out += c;
        } else if (byte < 0x20 || byte > 0x7E || c == '%') {
            out += '%';
            out += kHex[byte >> 4];
            out += kHex[byte & 0xF];
        } else {
            out += c;
        }
    }
    return out + "\"";
}

std::string sf_binary(std::string_view bytes) {
    static const char kAlphabet[] =
        "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    std::string out = ":";
    std::size_t i = 0;
    for (; i + 2 < bytes.size(); i += 3) {
        const std::uint32_t n = (static_cast<unsigned char>(bytes[i]) << 16) |
                                (static_cast<unsigned char>(bytes[i + 1]) << 8) |
                                static_cast<unsigned char>(bytes[i + 2]);
        out += kAlphabet[(n >> 18) & 63];
        out += kAlphabet[(n >> 12) & 63];
        out += kAlphabet[(n >> 6) & 63];
        out += kAlphabet[n & 63];
    }
    if (i < bytes.size()) {
        const bool two = i + 1 < bytes.size();
        const std::uint32_t n = (static_cast<unsigned char>(bytes[i]) << 16) |
                                (two ? static_cast<unsigned char>(bytes[i + 1]) << 8 : 0);
        out += kAlphabet[(n >> 18) & 63];
        out += kAlphabet[(n >> 12) & 63];
        out += two ? kAlphabet[(n >> 6) & 63] : '=';
        out += '=';
    }
    return out + ":";
}

bool valid_quota_unit(std::string_view unit) {
    if (unit.empty() || unit.size() > 63)
        return false;
    auto letter = [](char c) { return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z'); };
    if (!letter(unit[0]) && unit[0] != '*')
        return false;
    const std::string_view kSymbols = "!#$%&'*+-.^_`|~:/";
    for (const char c : unit) {
        if (!letter(c) && !(c >= '0' && c <= '9') && kSymbols.find(c) == std::string_view::npos)
            return false;
    }
    return true;
}

std::string describe_limit(std::int64_t limit, std::int64_t period_ms) {
    return std::to_string(limit) + (limit == 1 ? " request per " : " requests per ") +
           describe_period_ms(period_ms);
}

std::string describe_period_ms(std::int64_t ms) {
    static const std::pair<const char*, std::int64_t> kUnits[] = {{"day", 86400000},
                                                                  {"hour", 3600000},
                                                                  {"minute", 60000},
                                                                  {"second", 1000},
                                                                  {"millisecond", 1}};
    for (const auto& [name, unit] : kUnits) {
        if (ms % unit != 0)
            continue;
        if (ms == unit)
            return name;
        return std::to_string(ms / unit) + " " + name + "s";
    }
    return std::to_string(ms) + " milliseconds";
}

std::string iso8601_utc(Micros at) {
    const std::int64_t days = floor_div(at, kMicrosPerDay);
    const std::int64_t in_day = at - days * kMicrosPerDay;
    // Civil date from days since 1970-01-01 (proleptic Gregorian).
    std::int64_t z = days + 719468;
    const std::int64_t era = (z >= 0 ? z : z - 146096) / 146097;
    const std::int64_t doe = z - era * 146097;
    const std::int64_t yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
    std::int64_t year = yoe + era * 400;
    const std::int64_t doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    const std::int64_t mp = (5 * doy + 2) / 153;
    const std::int64_t day = doy - (153 * mp + 2) / 5 + 1;
    const std::int64_t month = mp < 10 ? mp + 3 : mp - 9;
    if (month <= 2)
        ++year;
    const std::int64_t ms = in_day / 1000;
    char buffer[64];
    std::snprintf(buffer, sizeof buffer, "%04lld-%02lld-%02lldT%02lld:%02lld:%02lld.%03lldZ",
                  static_cast<long long>(year), static_cast<long long>(month),
                  static_cast<long long>(day), static_cast<long long>(ms / 3600000),
                  static_cast<long long>(ms / 60000 % 60), static_cast<long long>(ms / 1000 % 60),
                  static_cast<long long>(ms % 1000));
    return buffer;
}

HttpOverflow rate_limit_headers(const DecisionView& d, ResetFormat format, HeaderList* headers) {
    headers->clear();
    if (!d.limit)
        return HttpOverflow::kNone;
    const std::int64_t remaining = d.remaining ? std::max<std::int64_t>(*d.remaining, 0) : 0;
    const std::string policy = text_or_empty(d.policy);
    const bool allowed = d.allowed.value_or(false);
    const bool denied = d.allowed.has_value() && !*d.allowed;
    headers->emplace_back("X-RateLimit-Limit", std::to_string(*d.limit));
    headers->emplace_back("X-RateLimit-Remaining", std::to_string(remaining));
    const std::optional<std::string> unit = d.quota_unit || !lease_reason(d.reason)
                                                ? d.quota_unit
                                                : std::optional<std::string>("concurrent-requests");
    std::string policies = policy_item(policy, *d.limit, d.period_ms, unit, d.partition_key);
    for (const PolicyItem& other : d.others)
        policies += ", " + policy_item(other.name, other.limit, other.period_ms, other.quota_unit,
                                       other.partition_key);
    headers->emplace_back("RateLimit-Policy", policies);
    const std::optional<std::int64_t> wait_ms = allowed ? d.reset_after_ms : d.retry_after_ms;
    if (!wait_ms)
        return HttpOverflow::kNone;
    std::optional<std::string> reset;
    if (d.decided_at) {
        // The instant shown, rounded up to the millisecond: a retry then is allowed.
        const Wide exact = Wide(*d.decided_at) + Wide(*wait_ms) * 1000;
        if (exact >= kTimestampEnd || exact > Wide(std::numeric_limits<std::int64_t>::max()))
            return HttpOverflow::kTimestamp;
        Wide reset_at = exact;
        if (reset_at % 1000 != 0)
            reset_at += (reset_at > 0 ? 1000 - reset_at % 1000 : -(reset_at % 1000));
        const auto at = static_cast<std::int64_t>(reset_at);
        if (format == ResetFormat::kUnix)
            reset = std::to_string(ceil_div(at, kMicrosPerSecond));
        else
            reset = iso8601_utc(at);
    }
    // The reported policy's t and Retry-After are one number.
    const std::int64_t seconds = wait_seconds(*wait_ms, !allowed);
    headers->emplace_back("X-RateLimit-Reset", reset);
    std::string fields = remaining_item(policy, remaining, seconds, d.partition_key);
    for (const PolicyItem& other : d.others)
        fields +=
            ", " + remaining_item(other.name, other.remaining,
                                  wait_seconds(other.wait_ms, other.denies), other.partition_key);
    headers->emplace_back("RateLimit", fields);
    if (denied)
        headers->emplace_back("Retry-After", std::to_string(seconds));
    return HttpOverflow::kNone;
}

HttpOverflow rate_limit_body(const DecisionView& d, BodyShape shape, bool* denied,
                             std::vector<BodyField>* fields) {
    fields->clear();
    *denied = !d.allowed.value_or(false);
    if (!*denied)
        return HttpOverflow::kNone;
    if (shape == BodyShape::kErrorMessage) {
        fields->push_back(text_field("error", "Rate limit exceeded"));
        fields->push_back(text_field("message", "Too many requests. Please try again later."));
        return HttpOverflow::kNone;
    }
    // No wait will do (a deny-list entry without an end, a cost above the limit): no
    // retryAfter, and "current" (counting the denied call) only when a limit was counted.
    std::optional<std::int64_t> retry_seconds;
    if (d.retry_after_ms)
        retry_seconds = std::max<std::int64_t>(1, ceil_div(*d.retry_after_ms, 1000));
    std::optional<std::int64_t> current;
    if (d.reason && (*d.reason == "limited" || *d.reason == "cost_exceeds_limit") && d.limit &&
        d.cost) {
        // As the SQL integers it is stored in: an overflow is an error, not a wrapped count.
        const std::int64_t used = *d.limit - std::max<std::int64_t>(d.remaining.value_or(0), 0);
        if (!fits_int32(used) || !fits_int32(used + *d.cost))
            return HttpOverflow::kInteger;
        current = used + *d.cost;
    }
    std::string message =
        "Too many requests. Limit: " + number_or_empty(d.limit) +
        (lease_reason(d.reason)
             ? std::string(" at once")
             : " per " + (d.period_ms ? describe_period_ms(*d.period_ms) : std::string())) +
        ".";
    if (current)
        message += " Current: " + std::to_string(*current) + ".";
    if (!retry_seconds)
        message += " Try again later.";
    else if (*retry_seconds == 1)
        message += " Try again in 1 second.";
    else
        message += " Try again in " + std::to_string(*retry_seconds) + " seconds.";
    if (shape == BodyShape::kProblem) {
        // RFC 9457 with the draft's quota-exceeded type.
        std::vector<std::string> violated = d.violated;
        if (violated.empty() && d.policy)
            violated.push_back(*d.policy);
        fields->push_back(text_field("type", kQuotaExceededType));
        fields->push_back(
            text_field("title", "Request cannot be satisfied as assigned quota has been exceeded"));
        fields->push_back(number_field("status", 429));
        fields->push_back(text_field("detail", message));
        BodyField policies;
        policies.name = "violated-policies";
        policies.strings = std::move(violated);
        fields->push_back(std::move(policies));
        return HttpOverflow::kNone;
    }
    fields->push_back(text_field("error", "Rate limit exceeded"));
    fields->push_back(text_field("code", "RATE_LIMIT_EXCEEDED"));
    fields->push_back(text_field("message", message));
    fields->push_back(number_field("limit", d.limit));
    fields->push_back(number_field("current", current));
    fields->push_back(number_field("retryAfter", retry_seconds));
    return HttpOverflow::kNone;
}

}  // namespace ratelimit
