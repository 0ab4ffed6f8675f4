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

void require_batch_size(const std::string& argument, std::size_t count) {
    if (count < 1 || count > kMaxBatchElements) {
        throw ArgumentError::invalid(argument, "must have 1 to " +
                                                   std::to_string(kMaxBatchElements) +
                                                   " elements (got " + std::to_string(count) + ")");
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

Micros interval_length(const std::string& argument, std::int32_t months, std::int32_t days,
                       std::int64_t micros) {
    if (months != 0) {
        throw ArgumentError::invalid(
            argument, "must not use months or years, whose length varies (use days)");
    }
    Micros day_part = 0;
    Micros total = 0;
    if (!checked_mul(days, kMicrosPerDay, &day_part) || !checked_add(day_part, micros, &total) ||
        total > kMaxWindow) {
        throw ArgumentError::invalid(argument, "must be at most 365 days");
    }
    if (total <= 0) {
        throw ArgumentError::invalid(argument, "must be greater than zero");
    }
    return total;
}

}  // namespace ratelimit
