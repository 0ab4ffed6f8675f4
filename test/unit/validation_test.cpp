#include "ratelimit/validation.hpp"

#include <gtest/gtest.h>

#include <limits>

#include "ratelimit/error.hpp"

namespace ratelimit {
namespace {

ArgumentError caught(void (*fn)()) {
    try {
        fn();
    } catch (const ArgumentError& e) {
        return e;
    }
    ADD_FAILURE() << "expected an ArgumentError";
    return ArgumentError::invalid("none", "");
}

TEST(RequireKey, AcceptsOneToMaxBytes) {
    EXPECT_NO_THROW(require_key("p_key", 1));
    EXPECT_NO_THROW(require_key("p_key", kMaxKeyBytes));
}

TEST(RequireKey, RejectsEmptyNamingTheArgument) {
    ArgumentError e = caught([] { require_key("p_rpc_name", 0); });
    EXPECT_EQ(e.kind(), ErrorKind::kInvalidArgument);
    EXPECT_EQ(e.argument(), "p_rpc_name");
    EXPECT_STREQ(e.what(), "p_rpc_name must not be empty");
}

TEST(RequireKey, RejectsOneByteTooLong) {
    ArgumentError e = caught([] { require_key("p_key", kMaxKeyBytes + 1); });
    EXPECT_EQ(e.argument(), "p_key");
    EXPECT_NE(std::string(e.what()).find("at most 256 bytes"), std::string::npos);
}

TEST(RequireBatchSize, AcceptsOneToMaxElements) {
    EXPECT_NO_THROW(require_batch_size("p_keys", 1));
    EXPECT_NO_THROW(require_batch_size("p_keys", kMaxBatchElements));
}

TEST(RequireBatchSize, RejectsNoneAndOneTooManyNamingTheArgument) {
    ArgumentError none = caught([] { require_batch_size("p_keys", 0); });
    EXPECT_EQ(none.kind(), ErrorKind::kInvalidArgument);
    EXPECT_STREQ(none.what(), "p_keys must have 1 to 10000 elements (got 0)");
    ArgumentError many = caught([] { require_batch_size("p_subjects", kMaxBatchElements + 1); });
    EXPECT_EQ(many.argument(), "p_subjects");
    EXPECT_STREQ(many.what(), "p_subjects must have 1 to 10000 elements (got 10001)");
}

TEST(RequirePositive, RejectsZeroAndNegative) {
    EXPECT_NO_THROW(require_positive("p_max_calls", 1));
    EXPECT_THROW(require_positive("p_max_calls", 0), ArgumentError);
    EXPECT_THROW(require_positive("p_max_calls", -1), ArgumentError);
    EXPECT_THROW(require_positive("p_max_calls", std::numeric_limits<std::int64_t>::min()),
                 ArgumentError);
}

TEST(WindowLength, ConvertsUnits) {
    EXPECT_EQ(window_length("p_window_minutes", 1, kMicrosPerMinute), 60 * kMicrosPerSecond);
    EXPECT_EQ(window_length("p_window_seconds", 3600, kMicrosPerSecond), 3600 * kMicrosPerSecond);
}

TEST(WindowLength, AcceptsExactlyAYearAndNoMore) {
    EXPECT_EQ(window_length("p_window_minutes", 525600, kMicrosPerMinute), kMaxWindow);
    ArgumentError e = caught([] { window_length("p_window_minutes", 525601, kMicrosPerMinute); });
    EXPECT_EQ(e.argument(), "p_window_minutes");
    EXPECT_EQ(e.kind(), ErrorKind::kInvalidArgument);
}

TEST(WindowLength, RejectsValuesWhoseProductOverflows) {
    EXPECT_THROW(window_length("w", std::numeric_limits<std::int64_t>::max(), kMicrosPerMinute),
                 ArgumentError);
    EXPECT_THROW(window_length("w", std::numeric_limits<std::int64_t>::max() / 2, kMicrosPerDay),
                 ArgumentError);
}

TEST(WindowLength, RejectsZeroAndNegative) {
    EXPECT_THROW(window_length("w", 0, kMicrosPerMinute), ArgumentError);
    EXPECT_THROW(window_length("w", -5, kMicrosPerMinute), ArgumentError);
}

TEST(ArgumentError, NullKindAndMessage) {
    ArgumentError e = ArgumentError::null("p_user_id");
    EXPECT_EQ(e.kind(), ErrorKind::kNullArgument);
    EXPECT_STREQ(e.what(), "p_user_id must not be NULL");
}

}  // namespace
}  // namespace ratelimit
