#include "ratelimit/rolling_window.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <vector>

namespace ratelimit {
namespace {

constexpr Micros kT0 = 1'800'000'000LL * kMicrosPerSecond;  // an arbitrary instant in 2027

struct Outcome {
    RollingWindowState state;
    bool allowed;
};

Outcome call(const RollingWindow& w, const RollingWindowState* s, Micros now) {
    RollingWindowState next = w.after_call(s, now);
    return {next, w.admits(next.call_count)};
}

TEST(RollingWindow, ElevenCallsLimitTenAllowsTheFirstTen) {
    RollingWindow w(10, kMicrosPerMinute);
    RollingWindowState s;
    const RollingWindowState* current = nullptr;
    int allowed = 0;
    for (int i = 0; i < 11; ++i) {
        Outcome o = call(w, current, kT0 + i * kMicrosPerSecond);
        EXPECT_EQ(o.allowed, i < 10) << "call " << i + 1;
        allowed += o.allowed;
        s = o.state;
        current = &s;
    }
    EXPECT_EQ(allowed, 10);
    EXPECT_EQ(s.call_count, 11);  // denied calls are counted, as in the original
    EXPECT_EQ(s.window_start, kT0);
}

TEST(RollingWindow, RestartsOnlyWhenStrictlyOlderThanTheWindow) {
    RollingWindow w(1, kMicrosPerMinute);
    RollingWindowState s{1, kT0};
    // Exactly one window later the window still holds: the original function compares with <.
    Outcome at_edge = call(w, &s, kT0 + kMicrosPerMinute);
    EXPECT_FALSE(at_edge.allowed);
    EXPECT_EQ(at_edge.state.window_start, kT0);
    // One microsecond later it restarts.
    Outcome after = call(w, &s, kT0 + kMicrosPerMinute + 1);
    EXPECT_TRUE(after.allowed);
    EXPECT_EQ(after.state.call_count, 1);
    EXPECT_EQ(after.state.window_start, kT0 + kMicrosPerMinute + 1);
}

TEST(RollingWindow, SecondBatchAfterTheWindowEndsWithCountTen) {
    RollingWindow w(10, kMicrosPerMinute);
    RollingWindowState s;
    const RollingWindowState* current = nullptr;
    for (int i = 0; i < 10; ++i) {
        s = call(w, current, kT0).state;
        current = &s;
    }
    for (int i = 0; i < 10; ++i) {
        Outcome o = call(w, &s, kT0 + 61 * kMicrosPerSecond);
        EXPECT_TRUE(o.allowed);
        s = o.state;
    }
    EXPECT_EQ(s.call_count, 10);
}

TEST(RollingWindow, ClockGoingBackwardsNeverRestarts) {
    RollingWindow w(3, kMicrosPerMinute);
    RollingWindowState s{3, kT0};
    Outcome o = call(w, &s, kT0 - 10 * kMicrosPerMinute);
    EXPECT_FALSE(o.allowed);
    EXPECT_EQ(o.state.window_start, kT0);
}

// Property: over random call sequences (time moving forwards and, sometimes, backwards), the
// calls allowed since a window start never exceed the limit, and a window only restarts once
// it is strictly older than its length. Checked against a brute-force log of every call.
TEST(RollingWindow, RandomSequencesHonourTheGuarantee) {
    std::mt19937_64 rng(20261121);
    for (int sequence = 0; sequence < 2000; ++sequence) {
        std::int64_t limit = 1 + static_cast<std::int64_t>(rng() % 20);
        Micros length = (1 + static_cast<Micros>(rng() % 120)) * kMicrosPerSecond;
        RollingWindow w(limit, length);
        RollingWindowState s;
        const RollingWindowState* current = nullptr;
        Micros now = kT0;
        Micros window_start = 0;
        std::int64_t allowed_in_window = 0;
        std::int64_t calls_in_window = 0;
        for (int i = 0; i < 200; ++i) {
            std::int64_t step = static_cast<std::int64_t>(rng() % (length / 4 + 1));
            now += (rng() % 10 == 0) ? -step : step;
            Outcome o = call(w, current, now);
            bool restarted = current == nullptr || o.state.window_start != window_start;
            if (restarted) {
                ASSERT_TRUE(current == nullptr || now - window_start > length)
                    << "restart of a window that was not yet expired";
                window_start = now;
                allowed_in_window = 0;
                calls_in_window = 0;
            }
            ++calls_in_window;
            allowed_in_window += o.allowed;
            ASSERT_EQ(o.state.call_count, calls_in_window);
            ASSERT_LE(allowed_in_window, limit);
            ASSERT_EQ(o.allowed, calls_in_window <= limit);
            s = o.state;
            current = &s;
        }
    }
}

}  // namespace
}  // namespace ratelimit
