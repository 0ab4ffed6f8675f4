#include "ratelimit/instant_text.hpp"

namespace ratelimit {
namespace {

// Days from 1970-01-01 to the civil date (proleptic Gregorian).
std::int64_t days_from_civil(std::int64_t year, unsigned month, unsigned day) noexcept {
    year -= month <= 2;
    const std::int64_t era = (year >= 0 ? year : year - 399) / 400;
    const unsigned year_of_era = static_cast<unsigned>(year - era * 400);
    const unsigned day_of_year = (153 * (month > 2 ? month - 3 : month + 9) + 2) / 5 + day - 1;
    const unsigned day_of_era =
        year_of_era * 365 + year_of_era / 4 - year_of_era / 100 + day_of_year;
    return era * 146097 + static_cast<std::int64_t>(day_of_era) - 719468;
}

bool leap(int year) noexcept {
    return (year % 4 == 0 && year % 100 != 0) || year % 400 == 0;
}

int days_in_month(int year, int month) noexcept {
    static const int kDays[] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
    return month == 2 && leap(year) ? 29 : kDays[month - 1];
}

// Reads exactly `count` digits at `*pos` into `*value`.
bool digits(std::string_view text, std::size_t* pos, int count, int* value) noexcept {
    if (*pos + count > text.size())
        return false;
    int result = 0;
    for (int i = 0; i < count; ++i) {
        const char c = text[*pos + i];
        if (c < '0' || c > '9')
            return false;
        result = result * 10 + (c - '0');
    }
    *pos += count;
    *value = result;
    return true;
}

bool take(std::string_view text, std::size_t* pos, char c) noexcept {
    if (*pos < text.size() && text[*pos] == c) {
        ++*pos;
        return true;
    }
    return false;
}

}  // namespace

std::optional<InstantText> parse_instant_text(std::string_view text) noexcept {
    InstantText out;
    std::size_t pos = 0;
    if (!digits(text, &pos, 4, &out.year) || !take(text, &pos, '-') ||
        !digits(text, &pos, 2, &out.month) || !take(text, &pos, '-') ||
        !digits(text, &pos, 2, &out.day))
        return std::nullopt;
    if (out.year < 1 || out.month < 1 || out.month > 12 || out.day < 1 ||
        out.day > days_in_month(out.year, out.month))
        return std::nullopt;
    if (take(text, &pos, 'T') || take(text, &pos, ' ')) {
        if (!digits(text, &pos, 2, &out.hour) || !take(text, &pos, ':') ||
            !digits(text, &pos, 2, &out.minute))
            return std::nullopt;
        if (take(text, &pos, ':')) {
            if (!digits(text, &pos, 2, &out.second))
                return std::nullopt;
            if (take(text, &pos, '.')) {
                int count = 0;
                std::int64_t fraction = 0;
                while (pos < text.size() && text[pos] >= '0' && text[pos] <= '9') {
                    if (count < 6) {
                        fraction = fraction * 10 + (text[pos] - '0');
                        ++count;
                    } else if (count == 6 && text[pos] != '0') {
                        return std::nullopt;  // finer than a microsecond
                    }
                    ++pos;
                }
                if (count == 0)
                    return std::nullopt;
                for (; count < 6; ++count)
                    fraction *= 10;
                out.microsecond = fraction;
            }
        }
        if (out.hour > 23 || out.minute > 59 || out.second > 59)
            return std::nullopt;
    }
    if (take(text, &pos, 'Z')) {
        out.offset_seconds = 0;
    } else if (pos < text.size() && (text[pos] == '+' || text[pos] == '-')) {
        const int sign = text[pos] == '-' ? -1 : 1;
        ++pos;
        int hours = 0;
        int minutes = 0;
        if (!digits(text, &pos, 2, &hours))
            return std::nullopt;
        if (take(text, &pos, ':')) {
            if (!digits(text, &pos, 2, &minutes))
                return std::nullopt;
        } else if (pos < text.size()) {
            if (!digits(text, &pos, 2, &minutes))
                return std::nullopt;
        }
        if (hours > 15 || minutes > 59)
            return std::nullopt;
        out.offset_seconds = sign * (hours * 3600 + minutes * 60);
    }
    if (pos != text.size())
        return std::nullopt;
    out.local = (days_from_civil(out.year, static_cast<unsigned>(out.month),
                                 static_cast<unsigned>(out.day)) *
                     86400 +
                 out.hour * 3600 + out.minute * 60 + out.second) *
                    kMicrosPerSecond +
                out.microsecond;
    return out;
}

}  // namespace ratelimit
