#include "ratelimit/validation.hpp"

#include "ratelimit/error.hpp"

namespace ratelimit {

void require_key(const std::string& argument, std::size_t length) {
    if (length == 0) {
        throw ArgumentError::invalid(argument, "must not be empty");
    }
    if (length > kMaxKeyBytes) {
        throw ArgumentError::invalid(argument, "must be at most " + std::to_string(kMaxKeyBytes) +
                                                   " bytes long, got " + std::to_string(length));
    }
}

void require_positive(const std::string& argument, std::int64_t value) {
    if (value <= 0) {
        throw ArgumentError::invalid(argument,
                                     "must be greater than zero, got " + std::to_string(value));
    }
}

Micros window_length(const std::string& argument, std::int64_t count, Micros unit) {
    require_positive(argument, count);
    Micros length = 0;
    if (!checked_mul(count, unit, &length) || length > kMaxWindow) {
        throw ArgumentError::invalid(argument, "must be at most " +
                                                   std::to_string(kMaxWindow / unit) +
                                                   " (365 days), got " + std::to_string(count));
    }
    return length;
}

}  // namespace ratelimit
