#include "ratelimit/drop_in_limits.hpp"

#include <gtest/gtest.h>

#include <string>

#include "ratelimit/error.hpp"

namespace ratelimit {
namespace {

const DropInArguments kPerRpc{"p_rpc_name", "p_max_calls", "p_window_minutes", kMicrosPerMinute};
const DropInArguments kEndpoint{"p_endpoint", "p_limit", "p_window_seconds", kMicrosPerSecond};

// Runs `call`, expecting a 42501 naming `argument`; returns the message.
template <typename Call>
std::string refusal(Call call, const std::string& argument) {
    try {
        call();
    } catch (const ArgumentError& e) {
        EXPECT_EQ(e.kind(), ErrorKind::kNotAllowed);
        EXPECT_EQ(e.argument(), argument);
        return e.what();
    }
    ADD_FAILURE() << "no error";
    return {};
}

TEST(WholeUnits, RoundsUp) {
    EXPECT_EQ(whole_units(60 * kMicrosPerMinute, kMicrosPerMinute), 60);
    EXPECT_EQ(whole_units(90 * kMicrosPerSecond, kMicrosPerMinute), 2);
    EXPECT_EQ(whole_units(1, kMicrosPerSecond), 1);
    EXPECT_EQ(whole_units(1500 * 1000, kMicrosPerSecond), 2);
    EXPECT_EQ(whole_units(kMaxWindow, kMicrosPerMinute), 525600);
}

TEST(DropInLimit, ThePolicyWinsOverTheCaller) {
    DropInPolicy hourly{3, 60 * kMicrosPerMinute};
    for (bool trusted : {false, true}) {
        DropInLimit limit =
            drop_in_limit(kPerRpc, "rpc.x", hourly, 1000, 1, DropInRules{{}, true, trusted});
        EXPECT_EQ(limit.limit, 3);
        EXPECT_EQ(limit.length, 60 * kMicrosPerMinute);
    }
    // A period that is not a whole number of the drop-in's unit is rounded up.
    DropInLimit limit =
        drop_in_limit(kPerRpc, "rpc.x", DropInPolicy{5, 90 * kMicrosPerSecond}, 5, 2, {});
    EXPECT_EQ(limit.length, 2 * kMicrosPerMinute);
}

TEST(DropInLimit, MustMatchRefusesAnyDifference) {
    DropInRules must_match{CallerLimits::kMustMatch, false, true};
    DropInPolicy hourly{10, 3600 * kMicrosPerSecond};
    std::string message = refusal(
        [&] { drop_in_limit(kEndpoint, "endpoint.e", hourly, 1000, 3600, must_match); }, "p_limit");
    EXPECT_EQ(message,
              "p_limit must be 10, the limit of the policy endpoint.e "
              "(ratelimit.dropin_caller_limits is must_match), got 1000");
    refusal([&] { drop_in_limit(kEndpoint, "endpoint.e", hourly, 10, 60, must_match); },
            "p_window_seconds");
    DropInLimit limit = drop_in_limit(kEndpoint, "endpoint.e", hourly, 10, 3600, must_match);
    EXPECT_EQ(limit.limit, 10);
    EXPECT_EQ(limit.length, 3600 * kMicrosPerSecond);
}

TEST(DropInLimit, WithoutAPolicyTheCallerDecidesUnlessRequired) {
    DropInLimit limit = drop_in_limit(kPerRpc, "rpc.x", std::nullopt, 7, 15, {});
    EXPECT_EQ(limit.limit, 7);
    EXPECT_EQ(limit.length, 15 * kMicrosPerMinute);
    // Trusted callers keep choosing.
    limit = drop_in_limit(kPerRpc, "rpc.x", std::nullopt, 7, 15,
                          DropInRules{CallerLimits::kMustMatch, true, true});
    EXPECT_EQ(limit.limit, 7);
    std::string message = refusal(
        [&] {
            drop_in_limit(kPerRpc, "rpc.x", std::nullopt, 7, 15,
                          DropInRules{CallerLimits::kIgnore, true, false});
        },
        "p_rpc_name");
    EXPECT_EQ(message,
              "p_rpc_name has no policy rpc.x: ratelimit.dropin_require_policy refuses limits "
              "chosen by the caller");
}

TEST(SecondsUntil, RoundsUp) {
    EXPECT_EQ(seconds_until(10 * kMicrosPerSecond, 0), 10);
    EXPECT_EQ(seconds_until(10 * kMicrosPerSecond, 1), 10);
    EXPECT_EQ(seconds_until(10 * kMicrosPerSecond, 10 * kMicrosPerSecond - 1), 1);
}

}  // namespace
}  // namespace ratelimit
