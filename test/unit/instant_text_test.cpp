// ratelimit.test_clock's text: ISO 8601 read without PostgreSQL's date parser.
#include "ratelimit/instant_text.hpp"

#include <gtest/gtest.h>

namespace ratelimit {
namespace {

constexpr Micros kSecond = kMicrosPerSecond;

TEST(InstantText, ReadsDateTimeFractionAndOffset) {
    auto t = parse_instant_text("2026-03-01 10:00:00+00");
    ASSERT_TRUE(t);
    EXPECT_EQ(t->local, 1772359200 * kSecond);
    EXPECT_EQ(t->offset_seconds, 0);

    t = parse_instant_text("2026-03-01T12:00:00+02");
    ASSERT_TRUE(t);
    EXPECT_EQ(t->local - *t->offset_seconds * kSecond, 1772359200 * kSecond);

    t = parse_instant_text("2026-03-01 10:01:00.000001+00");
    ASSERT_TRUE(t);
    EXPECT_EQ(t->local, 1772359260 * kSecond + 1);

    t = parse_instant_text("2026-06-01 12:00:09.999Z");
    ASSERT_TRUE(t);
    EXPECT_EQ(t->microsecond, 999000);

    t = parse_instant_text("1970-01-01 00:00:00-05:30");
    ASSERT_TRUE(t);
    EXPECT_EQ(*t->offset_seconds, -(5 * 3600 + 30 * 60));

    t = parse_instant_text("9999-12-31 23:59:59.999999+0000");
    ASSERT_TRUE(t);
    EXPECT_EQ(t->local, 253402300799999999LL);
}

TEST(InstantText, WithoutOffsetIsLocalTime) {
    auto t = parse_instant_text("2024-02-29 23:59");
    ASSERT_TRUE(t);
    EXPECT_FALSE(t->offset_seconds);
    EXPECT_EQ(t->local, (1709251140) * kSecond);
    t = parse_instant_text("2024-02-29");
    ASSERT_TRUE(t);
    EXPECT_EQ(t->hour, 0);
}

TEST(InstantText, RefusesEverythingElse) {
    for (const char* text : {"",
                             "not a time",
                             "infinity",
                             "epoch",
                             "2026-3-01",
                             "2026-02-30 00:00:00+00",
                             "2023-02-29",
                             "2026-13-01",
                             "2026-01-01 24:00:00",
                             "2026-01-01 10:60",
                             "2026-01-01 10:00:61",
                             "2026-01-01 10:00:00.",
                             "2026-01-01 10:00:00.0000001",
                             "2026-01-01 10:00:00+16",
                             "2026-01-01 10:00:00+0",
                             "2026-01-01 10:00:00 UTC",
                             "2026-01-01 10:00:00+00 ",
                             " 2026-01-01",
                             "0000-01-01",
                             "+2026-01-01"}) {
        EXPECT_FALSE(parse_instant_text(text)) << text;
    }
    // Trailing zeros past the microsecond change nothing.
    EXPECT_TRUE(parse_instant_text("2026-01-01 10:00:00.1234560+00"));
}

}  // namespace
}  // namespace ratelimit
