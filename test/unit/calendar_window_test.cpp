// fixed_window over calendar windows: windows of any lengths, one after another, as the
// PostgreSQL layer gives them (a day of 23 or 25 hours, a month of 28 to 31 days), against a
// brute-force model that counts every window's units on its own; and the rules that say which
// periods are calendar periods.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "ratelimit/algorithms.hpp"
#include "ratelimit/error.hpp"
#include "ratelimit/validation.hpp"

namespace ratelimit {
namespace {

// 2026-03-01 00:00:00 UTC.
constexpr Micros kT0 = 1772323200LL * kMicrosPerSecond;
constexpr Micros kHour = 60 * kMicrosPerMinute;

// The calendar limit of the window [start, end).
Limit calendar_limit(std::int64_t n, Micros start, Micros end) {
    Limit limit{Algorithm::kFixedWindow, n, end - start, n};
    limit.window_start = start;
    limit.window_end = end;
    return limit;
}

// Consecutive windows of random lengths from kT0: bounds[k] to bounds[k + 1] is window k.
std::vector<Micros> random_bounds(std::mt19937_64& random, int windows) {
    std::uniform_int_distribution<Micros> length(1000, 40000);
    std::vector<Micros> bounds{kT0};
    for (int k = 0; k < windows; ++k)
        bounds.push_back(bounds.back() + length(random));
    return bounds;
}

// The window holding t.
std::size_t window_of(const std::vector<Micros>& bounds, Micros t) {
    return static_cast<std::size_t>(std::upper_bound(bounds.begin(), bounds.end(), t) -
                                    bounds.begin()) -
           1;
}

// The brute-force model: every window's units, counted on their own.
struct CalendarModel {
    std::int64_t n = 1;
    std::map<std::size_t, std::int64_t> used;

    Decision decide(const std::vector<Micros>& bounds, Micros now, std::int64_t cost,
                    Action action) {
        const std::size_t k = window_of(bounds, now);
        std::int64_t& units = used[k];
        const Micros end = bounds[k + 1];
        if (action == Action::kRefund) {
            units = std::max<std::int64_t>(0, units - cost);
            return decide(bounds, now, 1, Action::kPeek);
        }
        Decision d;
        d.limit = n;
        d.allowed = cost == 0 || units + cost <= n;
        if (action == Action::kConsume && d.allowed)
            units += cost;
        d.remaining = std::max<std::int64_t>(0, n - units);
        d.retry_after = d.allowed ? 0 : end - now;
        d.reset_after = units > 0 ? end - now : 0;
        return d;
    }
};

TEST(CalendarWindows, RandomSequencesOverWindowsOfEveryLengthMatchTheModel) {
    std::mt19937_64 random(20260329);
    for (int sequence = 0; sequence < 20000; ++sequence) {
        const std::vector<Micros> bounds = random_bounds(random, 8);
        const std::int64_t n = std::uniform_int_distribution<std::int64_t>(1, 6)(random);
        CalendarModel model{n, {}};
        KeyState state;
        Micros now = kT0;
        for (int call = 0; call < 40 && now < bounds.back(); ++call) {
            const Action action =
                std::uniform_int_distribution<int>(0, 5)(random) == 0   ? Action::kRefund
                : std::uniform_int_distribution<int>(0, 4)(random) == 0 ? Action::kPeek
                                                                        : Action::kConsume;
            const std::int64_t cost = std::uniform_int_distribution<std::int64_t>(0, n)(random);
            const std::size_t k = window_of(bounds, now);
            const Limit limit = calendar_limit(n, bounds[k], bounds[k + 1]);
            const Decision got = decide(limit, state, now, cost, action);
            const Decision want = model.decide(bounds, now, cost, action);
            ASSERT_EQ(got.allowed, want.allowed) << "sequence " << sequence << " call " << call;
            ASSERT_EQ(got.limit, want.limit);
            ASSERT_EQ(got.remaining, want.remaining) << "sequence " << sequence << " call " << call;
            ASSERT_EQ(got.retry_after, want.retry_after);
            ASSERT_EQ(got.reset_after, want.reset_after);
            // The state is fresh from idle_from on: the end of the window it counts in, or now
            // already when it counts in an earlier one.
            if (state.amount > 0 && state.instant == bounds[k]) {
                ASSERT_EQ(idle_from(limit, state), bounds[k + 1]);
            } else {
                ASSERT_LE(idle_from(limit, state), now);
            }
            now += std::uniform_int_distribution<Micros>(0, 15000)(random);
        }
    }
}

TEST(CalendarWindows, AtMostNUnitsInEachWindowWhateverItsLength) {
    std::mt19937_64 random(7);
    for (int sequence = 0; sequence < 20000; ++sequence) {
        const std::vector<Micros> bounds = random_bounds(random, 6);
        const std::int64_t n = std::uniform_int_distribution<std::int64_t>(1, 5)(random);
        KeyState state;
        std::map<std::size_t, std::int64_t> units;
        for (Micros now = kT0; now < bounds.back();
             now += std::uniform_int_distribution<Micros>(0, 3000)(random)) {
            const std::size_t k = window_of(bounds, now);
            const std::int64_t cost = std::uniform_int_distribution<std::int64_t>(1, n)(random);
            if (decide(calendar_limit(n, bounds[k], bounds[k + 1]), state, now, cost,
                       Action::kConsume)
                    .allowed)
                units[k] += cost;
            ASSERT_LE(units[k], n) << "sequence " << sequence << " window " << k;
        }
    }
}

TEST(CalendarWindows, ADaylightSavingDayOf23HoursResetsAtItsEnd) {
    // 2026-03-29 in Europe/Berlin: from 2026-03-28 23:00 UTC to 2026-03-29 22:00 UTC.
    const Micros start = 1774738800LL * kMicrosPerSecond;
    const Micros end = start + 23 * kHour;
    KeyState state;
    const Limit day = calendar_limit(2, start, end);
    EXPECT_TRUE(decide(day, state, start, 2, Action::kConsume).allowed);
    const Decision denied = decide(day, state, end - 1, 1, Action::kConsume);
    EXPECT_FALSE(denied.allowed);
    EXPECT_EQ(denied.retry_after, 1);
    EXPECT_EQ(denied.reset_after, 1);
    const Limit next = calendar_limit(2, end, end + 24 * kHour);
    const Decision allowed = decide(next, state, end, 1, Action::kConsume);
    EXPECT_TRUE(allowed.allowed);
    EXPECT_EQ(allowed.remaining, 1);
    EXPECT_EQ(allowed.reset_after, 24 * kHour);
}

TEST(CalendarWindows, AClockSteppingBackNeverAllowsMoreInTheLaterWindow) {
    const Micros start = kT0;
    const Micros end = kT0 + 25 * kHour;
    KeyState state;
    const Limit next = calendar_limit(3, end, end + 24 * kHour);
    EXPECT_TRUE(decide(next, state, end + kHour, 3, Action::kConsume).allowed);
    // The clock reads the earlier window again: the state's later window still counts.
    const Limit earlier = calendar_limit(3, start, end);
    const Decision d = decide(earlier, state, end - kHour, 1, Action::kConsume);
    EXPECT_FALSE(d.allowed);
    EXPECT_EQ(d.remaining, 0);
    EXPECT_GE(idle_from(earlier, state), end + 24 * kHour);
}

TEST(CalendarWindows, ABlockEndingInALaterWindowReportsAFreshKeyThen) {
    const Micros start = kT0;
    const Micros end = kT0 + 24 * kHour;
    KeyState state;
    const Limit day = calendar_limit(1, start, end);
    EXPECT_TRUE(decide(day, state, start, 1, Action::kConsume).allowed);
    block_until(state, end + kHour);
    const Decision d = decide(day, state, start + kHour, 1, Action::kConsume);
    EXPECT_FALSE(d.allowed);
    EXPECT_EQ(d.retry_after, end + kHour - (start + kHour));
    EXPECT_EQ(d.reset_after, end + kHour - (start + kHour));
}

TEST(CalendarWindows, AnUtcDayIsTheEpochAlignedDay) {
    // The same key under '1 day' and under '1 day' in UTC counts in the same window.
    const Micros day_start = kT0;
    KeyState state;
    const Limit epoch{Algorithm::kFixedWindow, 2, kMicrosPerDay, 2};
    EXPECT_TRUE(decide(epoch, state, day_start + kHour, 2, Action::kConsume).allowed);
    const Limit calendar = calendar_limit(2, day_start, day_start + kMicrosPerDay);
    EXPECT_FALSE(decide(calendar, state, day_start + 2 * kHour, 1, Action::kConsume).allowed);
}

TEST(CalendarWindows, OnlyFixedWindowCountsCalendarWindows) {
    require_calendar_algorithm(Algorithm::kFixedWindow);
    for (Algorithm algorithm :
         {Algorithm::kRollingWindow, Algorithm::kSlidingWindow, Algorithm::kSlidingWindowCounter,
          Algorithm::kTokenBucket, Algorithm::kGcra}) {
        try {
            require_calendar_algorithm(algorithm);
            FAIL() << algorithm_name(algorithm);
        } catch (const ArgumentError& error) {
            EXPECT_EQ(error.argument(), "p_algorithm");
            EXPECT_NE(std::string(error.what()).find("calendar windows need fixed_window"),
                      std::string::npos);
        }
        Limit limit = calendar_limit(1, kT0, kT0 + kMicrosPerDay);
        limit.algorithm = algorithm;
        EXPECT_THROW(require_valid_limit(limit), ArgumentError);
    }
    EXPECT_NO_THROW(require_valid_limit(calendar_limit(1, kT0, kT0 + 23 * kHour)));
}

TEST(CalendarPeriods, WhichIntervalsAreCalendarPeriods) {
    const Micros hour = kHour;
    // With a time zone: a day, a week (also as 7 days) or a month.
    EXPECT_EQ(calendar_unit("p_period", 0, 1, 0, true), CalendarUnit::kDay);
    EXPECT_EQ(calendar_unit("p_period", 0, 7, 0, true), CalendarUnit::kWeek);
    EXPECT_EQ(calendar_unit("p_period", 1, 0, 0, true), CalendarUnit::kMonth);
    // Without one: only a month; every other period without months is no calendar period.
    EXPECT_EQ(calendar_unit("p_period", 1, 0, 0, false), CalendarUnit::kMonth);
    EXPECT_EQ(calendar_unit("p_period", 0, 1, 0, false), CalendarUnit::kNone);
    EXPECT_EQ(calendar_unit("p_period", 0, 0, hour, false), CalendarUnit::kNone);
    struct Refused {
        std::int32_t months;
        std::int32_t days;
        Micros micros;
        bool zone;
    };
    for (const Refused& r :
         {Refused{0, 0, 24 * hour, true}, Refused{0, 1, hour, true}, Refused{0, 2, 0, true},
          Refused{2, 0, 0, true}, Refused{12, 0, 0, true}, Refused{1, 1, 0, true},
          Refused{2, 0, 0, false}, Refused{1, 0, hour, false}, Refused{-1, 0, 0, false},
          Refused{0, 0, hour, true}}) {
        try {
            calendar_unit("p_period", r.months, r.days, r.micros, r.zone);
            FAIL() << r.months << " months " << r.days << " days " << r.micros;
        } catch (const ArgumentError& error) {
            EXPECT_EQ(error.argument(), "p_period");
            EXPECT_EQ(error.kind(), ErrorKind::kInvalidArgument);
        }
    }
    EXPECT_EQ(nominal_calendar_window(CalendarUnit::kDay), kMicrosPerDay);
    EXPECT_EQ(nominal_calendar_window(CalendarUnit::kWeek), 7 * kMicrosPerDay);
    EXPECT_EQ(nominal_calendar_window(CalendarUnit::kMonth), 31 * kMicrosPerDay);
}

}  // namespace
}  // namespace ratelimit
