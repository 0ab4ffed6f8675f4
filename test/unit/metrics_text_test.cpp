#include "ratelimit/metrics_text.hpp"

#include <gtest/gtest.h>

#include <limits>

namespace ratelimit {
namespace {

TEST(MetricsText, FamiliesAndSamplesInTheTextFormat) {
    MetricsText text;
    text.family("ratelimit_policy_decisions_total", MetricsText::Type::kCounter,
                "Decisions per policy.");
    text.sample("ratelimit_policy_decisions_total", {{"policy", "login"}, {"outcome", "allowed"}},
                std::int64_t{12});
    text.family("ratelimit_memory_entries", MetricsText::Type::kGauge, "Keys held.");
    text.sample("ratelimit_memory_entries", {}, std::int64_t{0});
    text.sample("ratelimit_ratio", {}, 0.5);
    text.sample("ratelimit_ratio", {}, 0.8);
    text.sample("ratelimit_since", {}, 1795456214.3684771);
    EXPECT_EQ(text.text(),
              "# HELP ratelimit_policy_decisions_total Decisions per policy.\n"
              "# TYPE ratelimit_policy_decisions_total counter\n"
              "ratelimit_policy_decisions_total{policy=\"login\",outcome=\"allowed\"} 12\n"
              "# HELP ratelimit_memory_entries Keys held.\n"
              "# TYPE ratelimit_memory_entries gauge\n"
              "ratelimit_memory_entries 0\n"
              "ratelimit_ratio 0.5\n"
              "ratelimit_ratio 0.8\n"
              "ratelimit_since 1795456214.368477\n");
}

TEST(MetricsText, LabelValuesEscapeBackslashQuoteAndLineFeedOnly) {
    EXPECT_EQ(escape_label_value("a\\b\"c\nd}e,f=g"), "a\\\\b\\\"c\\nd}e,f=g");
    EXPECT_EQ(escape_label_value("\xc3\xa9t\xc3\xa9"), "\xc3\xa9t\xc3\xa9");
    EXPECT_EQ(escape_help("line\\one\nline \"two\""), "line\\\\one\\nline \"two\"");
}

TEST(MetricsText, NonFiniteValuesAreSpelledAsTheFormatSays) {
    MetricsText text;
    text.sample("x", {}, std::numeric_limits<double>::infinity());
    text.sample("y", {}, -std::numeric_limits<double>::infinity());
    EXPECT_EQ(text.text(), "x +Inf\ny -Inf\n");
}

}  // namespace
}  // namespace ratelimit
