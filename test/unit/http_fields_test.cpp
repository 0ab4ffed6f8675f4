// The IETF RateLimit fields and the problem body: Structured Fields serialization (RFC 8941),
// several policies in one field, qu and pk, and Retry-After equal to the reported policy's t.
#include <gtest/gtest.h>

#include <string>

#include "ratelimit/error.hpp"
#include "ratelimit/http_fields.hpp"

namespace ratelimit {
namespace {

std::optional<std::string> header(const HeaderList& headers, const std::string& name) {
    for (const auto& [key, value] : headers) {
        if (key == name)
            return value;
    }
    return std::nullopt;
}

DecisionView denied_view() {
    DecisionView d;
    d.allowed = false;
    d.policy = "api.minute";
    d.limit = 3;
    d.remaining = 0;
    d.retry_after_ms = 12001;
    d.reset_after_ms = 60000;
    d.period_ms = 60000;
    d.cost = 1;
    d.reason = "limited";
    d.decided_at = 0;
    return d;
}

TEST(SfString, PrintableAsciiAsIs) {
    EXPECT_EQ(sf_string("api.minute"), "\"api.minute\"");
    EXPECT_EQ(sf_string(""), "\"\"");
    EXPECT_EQ(sf_string("a b~"), "\"a b~\"");
}

TEST(SfString, QuoteAndBackslashEscaped) {
    EXPECT_EQ(sf_string("a\"b"), "\"a\\\"b\"");
    EXPECT_EQ(sf_string("a\\b"), "\"a\\\\b\"");
}

TEST(SfString, OtherBytesPercentEncoded) {
    EXPECT_EQ(sf_string("caf\xC3\xA9"), "\"caf%C3%A9\"");
    EXPECT_EQ(sf_string(std::string("a\0b", 3)), "\"a%00b\"");
    EXPECT_EQ(sf_string("tab\there\x7F"), "\"tab%09here%7F\"");
    // `%` itself is encoded, so two names never give one string.
    EXPECT_EQ(sf_string("100%"), "\"100%25\"");
    EXPECT_NE(sf_string("%C3%A9"), sf_string("\xC3\xA9"));
}

TEST(SfString, OnlyPrintableAsciiOut) {
    std::string every;
    for (int c = 0; c < 256; ++c)
        every += static_cast<char>(c);
    const std::string out = sf_string(every);
    for (const char c : out)
        EXPECT_TRUE(c >= 0x20 && c <= 0x7E) << static_cast<int>(static_cast<unsigned char>(c));
}

TEST(SfBinary, Base64WithPadding) {
    EXPECT_EQ(sf_binary(""), "::");
    EXPECT_EQ(sf_binary("f"), ":Zg==:");
    EXPECT_EQ(sf_binary("fo"), ":Zm8=:");
    EXPECT_EQ(sf_binary("foo"), ":Zm9v:");
    EXPECT_EQ(sf_binary("foobar"), ":Zm9vYmFy:");
    EXPECT_EQ(sf_binary(std::string("\xFF\xFE\x00", 3)), "://4A:");
}

TEST(QuotaUnit, Tokens) {
    EXPECT_TRUE(valid_quota_unit("requests"));
    EXPECT_TRUE(valid_quota_unit("content-bytes"));
    EXPECT_TRUE(valid_quota_unit("concurrent-requests"));
    EXPECT_TRUE(valid_quota_unit("*tokens/v1"));
    EXPECT_FALSE(valid_quota_unit(""));
    EXPECT_FALSE(valid_quota_unit("1bytes"));
    EXPECT_FALSE(valid_quota_unit("two words"));
    EXPECT_FALSE(valid_quota_unit("quo\"te"));
    EXPECT_FALSE(valid_quota_unit(std::string(64, 'a')));
}

TEST(BodyShapes, ProblemParses) {
    EXPECT_EQ(parse_body_shape("p_shape", "problem"), BodyShape::kProblem);
    EXPECT_THROW(parse_body_shape("p_shape", "Problem"), ArgumentError);
}

TEST(RateLimitFields, OnePolicyAsBefore) {
    HeaderList headers;
    ASSERT_EQ(rate_limit_headers(denied_view(), ResetFormat::kUnix, &headers), HttpOverflow::kNone);
    EXPECT_EQ(header(headers, "RateLimit"), "\"api.minute\";r=0;t=13");
    EXPECT_EQ(header(headers, "RateLimit-Policy"), "\"api.minute\";q=3;w=60");
    EXPECT_EQ(header(headers, "Retry-After"), "13");
    EXPECT_EQ(header(headers, "X-RateLimit-Limit"), "3");
}

TEST(RateLimitFields, SeveralPoliciesQuotaUnitAndPartitionKey) {
    DecisionView d = denied_view();
    d.partition_key = std::string("\x01\x02\x03", 3);
    d.quota_unit = "requests";  // the default: not shown
    PolicyItem hour;
    hour.name = "api.hour";
    hour.limit = 100;
    hour.remaining = 97;
    hour.wait_ms = 3599001;
    hour.period_ms = 3600000;
    hour.quota_unit = "content-bytes";
    hour.partition_key = "abc";
    d.others.push_back(hour);
    HeaderList headers;
    ASSERT_EQ(rate_limit_headers(d, ResetFormat::kIso8601, &headers), HttpOverflow::kNone);
    EXPECT_EQ(header(headers, "RateLimit"),
              "\"api.minute\";r=0;t=13;pk=:AQID:, \"api.hour\";r=97;t=3600;pk=:YWJj:");
    EXPECT_EQ(header(headers, "RateLimit-Policy"),
              "\"api.minute\";q=3;w=60;pk=:AQID:, "
              "\"api.hour\";q=100;qu=\"content-bytes\";w=3600;pk=:YWJj:");
    EXPECT_EQ(header(headers, "X-RateLimit-Limit"), "3");
}

TEST(RateLimitFields, RetryAfterIsTheReportedT) {
    for (std::int64_t wait : {0LL, 1LL, 999LL, 1000LL, 1001LL, 59999LL, 86400001LL}) {
        DecisionView d = denied_view();
        d.retry_after_ms = wait;
        HeaderList headers;
        ASSERT_EQ(rate_limit_headers(d, ResetFormat::kUnix, &headers), HttpOverflow::kNone);
        const std::string field = *header(headers, "RateLimit");
        const std::string retry = *header(headers, "Retry-After");
        EXPECT_EQ(field, "\"api.minute\";r=0;t=" + retry) << wait;
        EXPECT_GE(std::stoll(retry), 1);
        EXPECT_GE(std::stoll(retry) * 1000, wait);
    }
}

TEST(RateLimitFields, AnotherPolicysDenialWaitsAtLeastASecond) {
    DecisionView d = denied_view();
    PolicyItem other;
    other.name = "b";
    other.limit = 1;
    other.wait_ms = 0;
    other.period_ms = 1000;
    other.denies = true;
    d.others.push_back(other);
    HeaderList headers;
    rate_limit_headers(d, ResetFormat::kUnix, &headers);
    EXPECT_EQ(header(headers, "RateLimit"), "\"api.minute\";r=0;t=13, \"b\";r=0;t=1");
}

TEST(RateLimitFields, HostileNameStaysOneItem) {
    DecisionView d = denied_view();
    d.policy = "a\", \"b\";r=1000";
    HeaderList headers;
    rate_limit_headers(d, ResetFormat::kUnix, &headers);
    EXPECT_EQ(header(headers, "RateLimit"), "\"a\\\", \\\"b\\\";r=1000\";r=0;t=13");
}

TEST(RateLimitFields, NoWindowNoW) {
    DecisionView d = denied_view();
    d.period_ms.reset();
    HeaderList headers;
    rate_limit_headers(d, ResetFormat::kUnix, &headers);
    EXPECT_EQ(header(headers, "RateLimit-Policy"), "\"api.minute\";q=3");
}

// A lease's decision (lease_decision) counts concurrent requests: its reasons give the unit
// a decision row cannot carry, and the body a limit "at once".
TEST(RateLimitFields, LeaseReasonsCountConcurrentRequests) {
    DecisionView d = denied_view();
    d.reason = "concurrency_limited";
    d.cost.reset();
    HeaderList headers;
    rate_limit_headers(d, ResetFormat::kUnix, &headers);
    EXPECT_EQ(header(headers, "RateLimit-Policy"),
              "\"api.minute\";q=3;qu=\"concurrent-requests\";w=60");
    bool denied = false;
    std::vector<BodyField> fields;
    ASSERT_EQ(rate_limit_body(d, BodyShape::kDetailed, &denied, &fields), HttpOverflow::kNone);
    ASSERT_TRUE(denied);
    EXPECT_EQ(fields[2].text, "Too many requests. Limit: 3 at once. Try again in 13 seconds.");

    d.allowed = true;
    d.reason = "leased";
    rate_limit_headers(d, ResetFormat::kUnix, &headers);
    EXPECT_EQ(header(headers, "RateLimit-Policy"),
              "\"api.minute\";q=3;qu=\"concurrent-requests\";w=60");
    d.reason = "within_limits";
    rate_limit_headers(d, ResetFormat::kUnix, &headers);
    EXPECT_EQ(header(headers, "RateLimit-Policy"), "\"api.minute\";q=3;w=60");
}

TEST(ProblemBody, Fields) {
    DecisionView d = denied_view();
    d.violated = {"api.minute", "api.hour"};
    bool denied = false;
    std::vector<BodyField> fields;
    ASSERT_EQ(rate_limit_body(d, BodyShape::kProblem, &denied, &fields), HttpOverflow::kNone);
    ASSERT_TRUE(denied);
    ASSERT_EQ(fields.size(), 5u);
    EXPECT_EQ(fields[0].name, "type");
    EXPECT_EQ(fields[0].text, std::string(kQuotaExceededType));
    EXPECT_EQ(fields[1].name, "title");
    EXPECT_EQ(fields[2].name, "status");
    EXPECT_EQ(fields[2].number, 429);
    EXPECT_EQ(fields[3].name, "detail");
    EXPECT_EQ(fields[3].text,
              "Too many requests. Limit: 3 per minute. Current: 4. Try again in 13 seconds.");
    EXPECT_EQ(fields[4].name, "violated-policies");
    EXPECT_EQ(fields[4].strings, (std::vector<std::string>{"api.minute", "api.hour"}));
}

TEST(ProblemBody, ReportedPolicyWhenNoListGiven) {
    bool denied = false;
    std::vector<BodyField> fields;
    rate_limit_body(denied_view(), BodyShape::kProblem, &denied, &fields);
    EXPECT_EQ(fields.back().strings, (std::vector<std::string>{"api.minute"}));
}

TEST(ProblemBody, NoneWhenAllowed) {
    DecisionView d = denied_view();
    d.allowed = true;
    bool denied = true;
    std::vector<BodyField> fields;
    rate_limit_body(d, BodyShape::kProblem, &denied, &fields);
    EXPECT_FALSE(denied);
    EXPECT_TRUE(fields.empty());
}

// Limits in words: one request is singular, the period as describe_period_ms says it.
TEST(DescribeLimit, CountsAndPeriods) {
    EXPECT_EQ(describe_limit(1, 60000), "1 request per minute");
    EXPECT_EQ(describe_limit(10, 60000), "10 requests per minute");
    EXPECT_EQ(describe_limit(5, 900000), "5 requests per 15 minutes");
    EXPECT_EQ(describe_limit(0, 1000), "0 requests per second");
}

}  // namespace
}  // namespace ratelimit
