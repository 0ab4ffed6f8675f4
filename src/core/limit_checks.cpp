// A limit's names and checks (ratelimit/algorithms.hpp): the algorithms' SQL spellings, the
// ranges of a limit's settings, and what one call could ever take. The decisions themselves are
// in algorithms.cpp.
#include "ratelimit/algorithms.hpp"

#include <string>

#include "ratelimit/error.hpp"
#include "ratelimit/validation.hpp"

namespace ratelimit {
namespace {

using Wide = __int128;

// token_bucket and gcra: the algorithms with a burst, and the only ones a call may wait for.
bool is_bucket(Algorithm algorithm) noexcept {
    return algorithm == Algorithm::kTokenBucket || algorithm == Algorithm::kGcra;
}

}  // namespace

const char* algorithm_name(Algorithm algorithm) noexcept {
    switch (algorithm) {
        case Algorithm::kNone:
            return "none";
        case Algorithm::kFixedWindow:
            return "fixed_window";
        case Algorithm::kRollingWindow:
            return "rolling_window";
        case Algorithm::kSlidingWindow:
            return "sliding_window";
        case Algorithm::kSlidingWindowCounter:
            return "sliding_window_counter";
        case Algorithm::kTokenBucket:
            return "token_bucket";
        case Algorithm::kGcra:
            return "gcra";
    }
    return "none";
}

Algorithm parse_algorithm(const char* argument, std::string_view name) {
    for (Algorithm candidate :
         {Algorithm::kFixedWindow, Algorithm::kRollingWindow, Algorithm::kSlidingWindow,
          Algorithm::kSlidingWindowCounter, Algorithm::kTokenBucket, Algorithm::kGcra}) {
        if (name == algorithm_name(candidate))
            return candidate;
    }
    throw ArgumentError::invalid(
        argument,
        "must be one of fixed_window, rolling_window, sliding_window, sliding_window_counter, "
        "token_bucket, gcra (got \"" +
            std::string(name.substr(0, 64)) + "\")");
}

void require_calendar_algorithm(Algorithm algorithm) {
    if (algorithm != Algorithm::kFixedWindow)
        throw ArgumentError::invalid("p_algorithm",
                                     "must be fixed_window for a calendar period: calendar windows "
                                     "need fixed_window (got " +
                                         std::string(algorithm_name(algorithm)) + ")");
}

void require_valid_limit(const Limit& limit) {
    if (limit.window_end != 0)
        require_calendar_algorithm(limit.algorithm);
    if (limit.window_end != 0 &&
        (limit.window_start < 0 || limit.window_end - limit.window_start != limit.period))
        throw ArgumentError::invalid("p_period", "calendar window does not match its length");
    require_positive("p_limit", limit.limit);
    if (limit.period < kMinPeriod)
        throw ArgumentError::invalid("p_period", "must be at least 1 millisecond");
    if (limit.period > kMaxWindow)
        throw ArgumentError::invalid("p_period", "must be at most 365 days");
    require_positive("p_burst", limit.burst);
    if (!is_bucket(limit.algorithm) && limit.burst != limit.limit)
        throw ArgumentError::invalid("p_burst", "applies only to token_bucket and gcra");
    // An empty bucket refills in B·P/N; bounding that by the longest window keeps every instant
    // a bucket stores within a year of now.
    if (Wide(limit.burst) * limit.period > Wide(limit.limit) * kMaxWindow)
        throw ArgumentError::invalid(
            "p_burst",
            "is too large: refilling it (p_burst * p_period / p_limit) must take at "
            "most 365 days");
    require_valid_max_delay("p_max_wait", limit.algorithm, limit.max_delay);
}

void require_valid_max_delay(const char* argument, Algorithm algorithm, Micros max_delay) {
    if (max_delay < 0)
        throw ArgumentError::invalid(argument, "must not be negative");
    if (max_delay > kMaxWindow)
        throw ArgumentError::invalid(argument, "must be at most 365 days");
    // A window algorithm would count a delayed call in the window it was asked in, not in the
    // one it goes in, and so admit more than its limit (algorithms.hpp).
    if (max_delay > 0 && !is_bucket(algorithm))
        throw ArgumentError::invalid(argument, "applies only to token_bucket and gcra (got " +
                                                   std::string(algorithm_name(algorithm)) + ")");
}

Limit make_limit(Algorithm algorithm, std::int64_t limit, Micros period,
                 std::optional<std::int64_t> burst) {
    if (burst && !is_bucket(algorithm))
        throw ArgumentError::invalid("p_burst", "applies only to token_bucket and gcra");
    Limit checked{algorithm, limit, period, burst.value_or(limit)};
    require_valid_limit(checked);
    return checked;
}

std::int64_t allowance(const Limit& limit) noexcept {
    return is_bucket(limit.algorithm) ? limit.burst : limit.limit;
}

const char* allowance_argument(const Limit& limit) noexcept {
    return is_bucket(limit.algorithm) ? "p_burst" : "p_limit";
}

bool cost_could_be_allowed(const Limit& limit, std::int64_t cost) noexcept {
    return cost <= allowance(limit);
}

void require_valid_instant(Micros now) {
    if (now < 0 || now > kMaxInstant)
        throw ArgumentError::invalid("clock", "must read between 1970 and the year 10000");
}

}  // namespace ratelimit
