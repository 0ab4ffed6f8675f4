#include "ratelimit/aligned_window.hpp"

#include <gtest/gtest.h>

#include <map>
#include <random>

namespace ratelimit {
namespace {

constexpr Micros kHour = 3600 * kMicrosPerSecond;
// 2025-10-28 07:01:00 UTC.
constexpr Micros kT0 = 1761634860LL * kMicrosPerSecond;

TEST(AlignedWindow, AlignsToMultiplesOfTheLengthSinceTheEpoch) {
    AlignedWindow w(10, kHour);
    EXPECT_EQ(w.start(kT0), 1761634800LL * kMicrosPerSecond);  // 07:00:00
    EXPECT_EQ(w.end(kT0), 1761638400LL * kMicrosPerSecond);    // 08:00:00
    EXPECT_EQ(w.start(w.end(kT0)), w.end(kT0));                // the end starts the next one
    EXPECT_EQ(w.start(w.end(kT0) - 1), w.start(kT0));
}

TEST(AlignedWindow, FloorsInstantsBeforeTheEpoch) {
    AlignedWindow w(1, 10 * kMicrosPerSecond);
    EXPECT_EQ(w.start(-1), -10 * kMicrosPerSecond);
    EXPECT_EQ(w.start(-10 * kMicrosPerSecond), -10 * kMicrosPerSecond);
}

TEST(AlignedWindow, SecondsUntilEndRoundUpAndAreNeverZero) {
    AlignedWindow w(10, kHour);
    EXPECT_EQ(w.seconds_until_end(kT0), 3540);  // the original 429's Retry-After: 3540
    EXPECT_EQ(w.seconds_until_end(w.end(kT0) - 1), 1);
    EXPECT_EQ(w.seconds_until_end(w.end(kT0) - kMicrosPerSecond), 1);
    EXPECT_EQ(w.seconds_until_end(w.end(kT0) - kMicrosPerSecond - 1), 2);
    EXPECT_EQ(w.seconds_until_end(w.start(kT0)), 3600);
}

TEST(AlignedWindow, AdmitsUpToTheLimit) {
    AlignedWindow w(10, kHour);
    EXPECT_TRUE(w.admits(10));
    EXPECT_FALSE(w.admits(11));
}

// Property: driving counters the way increment_rate_limit does (every call adds its size),
// the allowed sizes in each aligned window add up to at most the limit, and retry-after always
// points at the first instant of a later window.
TEST(AlignedWindow, RandomSequencesHonourTheGuarantee) {
    std::mt19937_64 rng(7);
    for (int sequence = 0; sequence < 2000; ++sequence) {
        std::int64_t limit = 1 + static_cast<std::int64_t>(rng() % 50);
        Micros length = (1 + static_cast<Micros>(rng() % 600)) * kMicrosPerSecond;
        AlignedWindow w(limit, length);
        std::map<Micros, std::int64_t> counter;  // what the table holds, per window start
        std::map<Micros, std::int64_t> allowed;  // reference: allowed sizes per window
        Micros now = kT0 + static_cast<Micros>(rng() % 1000000);
        for (int i = 0; i < 300; ++i) {
            std::int64_t step = static_cast<std::int64_t>(rng() % (length / 3 + 1));
            now += (rng() % 8 == 0) ? -step : step;
            std::int64_t size = 1 + static_cast<std::int64_t>(rng() % 5);
            Micros start = w.start(now);
            ASSERT_LE(start, now);
            ASSERT_LT(now, w.end(now));
            std::int64_t& c = counter[start];
            c += size;
            if (w.admits(c)) {
                allowed[start] += size;
            } else {
                std::int64_t s = w.seconds_until_end(now);
                ASSERT_GE(s, 1);
                ASSERT_GE(now + s * kMicrosPerSecond, w.end(now));
                ASSERT_LT(now + (s - 1) * kMicrosPerSecond, w.end(now));
            }
            ASSERT_LE(allowed[start], limit);
        }
    }
}

}  // namespace
}  // namespace ratelimit
