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

void require_non_negative_cost(const std::string& argument, std::int64_t cost) {
    if (cost < 0)
        throw ArgumentError::invalid(argument,
                                     "must not be negative (got " + std::to_string(cost) + ")");
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

CalendarUnit calendar_unit(const std::string& argument, std::int32_t months, std::int32_t days,
                           std::int64_t micros, bool zone_given) {
    if (micros == 0 && months == 0 && days == 1 && zone_given)
        return CalendarUnit::kDay;
    if (micros == 0 && months == 0 && days == 7 && zone_given)
        return CalendarUnit::kWeek;
    if (micros == 0 && months == 1 && days == 0)
        return CalendarUnit::kMonth;
    if (months == 0 && !zone_given)
        return CalendarUnit::kNone;
    throw ArgumentError::invalid(
        argument, zone_given
                      ? "must be '1 day', '1 week' or '1 month' with p_time_zone (a calendar "
                        "window from local midnight)"
                      : "may use months only as '1 month' (the calendar month, in UTC "
                        "unless p_time_zone is given)");
}

Micros nominal_calendar_window(CalendarUnit unit) noexcept {
    switch (unit) {
        case CalendarUnit::kNone:
            break;
        case CalendarUnit::kDay:
            return kMicrosPerDay;
        case CalendarUnit::kWeek:
            return 7 * kMicrosPerDay;
        case CalendarUnit::kMonth:
            return 31 * kMicrosPerDay;
    }
    return 0;
}

}  // namespace ratelimit
