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
    throw ArgumentError::invalid(argument, "must be one of error_message, detailed (got \"" +
                                               std::string(name.substr(0, 64)) + "\")");
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
    headers->emplace_back(
        "RateLimit-Policy",
        "\"" + policy + "\";q=" + std::to_string(*d.limit) +
            ";w=" + (d.period_ms ? std::to_string(ceil_div(*d.period_ms, 1000)) : std::string()));
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
    const std::int64_t wait_seconds = ceil_div(*wait_ms, 1000);
    headers->emplace_back("X-RateLimit-Reset", reset);
    headers->emplace_back(
        "RateLimit",
        "\"" + policy + "\";r=" + std::to_string(remaining) + ";t=" +
            std::to_string(allowed ? wait_seconds : std::max<std::int64_t>(wait_seconds, 1)));
    if (denied)
        headers->emplace_back("Retry-After",
                              std::to_string(std::max<std::int64_t>(wait_seconds, 1)));
    return HttpOverflow::kNone;
}

HttpOverflow rate_limit_body(const DecisionView& d, BodyShape shape, bool* denied,
                             std::vector<BodyField>* fields) {
    fields->clear();
    *denied = !d.allowed.value_or(false);
    if (!*denied)
        return HttpOverflow::kNone;
    if (shape == BodyShape::kErrorMessage) {
        fields->push_back({"error", std::string("Rate limit exceeded"), std::nullopt});
        fields->push_back(
            {"message", std::string("Too many requests. Please try again later."), std::nullopt});
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
    std::string message = "Too many requests. Limit: " + number_or_empty(d.limit) + " per " +
                          (d.period_ms ? describe_period_ms(*d.period_ms) : std::string()) + ".";
    if (current)
        message += " Current: " + std::to_string(*current) + ".";
    if (!retry_seconds)
        message += " Try again later.";
    else if (*retry_seconds == 1)
        message += " Try again in 1 second.";
    else
        message += " Try again in " + std::to_string(*retry_seconds) + " seconds.";
    fields->push_back({"error", std::string("Rate limit exceeded"), std::nullopt});
    fields->push_back({"code", std::string("RATE_LIMIT_EXCEEDED"), std::nullopt});
    fields->push_back({"message", message, std::nullopt});
    fields->push_back({"limit", std::nullopt, d.limit});
    fields->push_back({"current", std::nullopt, current});
    fields->push_back({"retryAfter", std::nullopt, retry_seconds});
    return HttpOverflow::kNone;
}

}  // namespace ratelimit
