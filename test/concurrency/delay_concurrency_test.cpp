// Delay instead of deny (consume's p_max_wait) under real connections (the server preloads the
// library): 32 connections hammer one gcra key, on the memory engine and on the table engine,
// in rounds at frozen clock instants (ratelimit.test_clock), every call of one unit. It proves
// that:
//  - the admitted calls' go instants (the round's instant + retry_after_ms) never hold more
//    than B + floor(N·d/P) units in any span [t, t + d], however the calls interleave;
//  - exactly as many calls are admitted as the schedule has room for, at exactly its go
//    instants: the virtual scheduling of a bucket (a unit may go at the later of its arrival
//    and the previous unit's theoretical arrival time less the tolerance), admitted when that
//    is at most p_max_wait away. Within a round every call is the same call at the same
//    instant, so the outcome does not depend on the order the key's lock takes them in; a lost
//    or doubled charge would change the count or the instants.
// The limit is 50 a second (one unit every 20 ms), a burst of 10, and p_max_wait half a second;
// the instants are whole milliseconds, so every go instant is one too and the checks are exact.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "fresh_extension_fixture.hpp"
#include "parallel_clients.hpp"
#include "pg_connection.hpp"
#include "run_unique.hpp"

namespace ratelimit_test {
namespace {

constexpr int kClients = 32;
constexpr int kCallsPerClient = 4;  // per round
constexpr std::int64_t kLimit = 50;
constexpr std::int64_t kPeriodMs = 1000;
constexpr std::int64_t kBurst = 10;
constexpr std::int64_t kMaxWaitMs = 500;
constexpr std::int64_t kEmissionMs = kPeriodMs / kLimit;  // 20 ms

// 2100-01-01 00:00:00 UTC, in ms since the Unix epoch.
constexpr std::int64_t kStartMs = 4102444800LL * 1000;

// The rounds' instants, in ms after kStartMs: a fresh key; the queue still long; partly drained;
// drained and partly refilled; full again; and a few close together.
constexpr std::int64_t kRoundsMs[] = {0, 100, 450, 1200, 5000, 5010, 5300, 5310};

// The clock `ms` after kStartMs (less than a day) as ratelimit.test_clock reads it.
std::string instant_text(std::int64_t ms) {
    char text[64];
    std::snprintf(text, sizeof text, "2100-01-01 %02lld:%02lld:%02lld.%03lld+00",
                  static_cast<long long>(ms / 3600000), static_cast<long long>(ms / 60000 % 60),
                  static_cast<long long>(ms / 1000 % 60), static_cast<long long>(ms % 1000));
    return text;
}

// The schedule: virtual scheduling of a bucket of kBurst units refilled one per kEmissionMs.
class Schedule {
  public:
    // The go instant of a unit arriving at `at`, or nothing when it would wait past p_max_wait.
    std::optional<std::int64_t> admit(std::int64_t at) {
        const std::int64_t go = started_ ? std::max(at, tat_ - (kBurst - 1) * kEmissionMs) : at;
        if (go - at > kMaxWaitMs)
            return std::nullopt;
        tat_ = (started_ ? std::max(go, tat_) : go) + kEmissionMs;
        started_ = true;
        return go;
    }

  private:
    bool started_ = false;
    std::int64_t tat_ = 0;  // theoretical arrival time of the next unit
};

// Over every span between two go instants, at most B + floor(N·d/P) units; empty when so.
std::string span_violation(const std::vector<std::int64_t>& sorted_goes) {
    for (std::size_t i = 0; i < sorted_goes.size(); ++i) {
        if (i > 0 && sorted_goes[i - 1] == sorted_goes[i])
            continue;
        for (std::size_t j = i; j < sorted_goes.size(); ++j) {
            if (j + 1 < sorted_goes.size() && sorted_goes[j + 1] == sorted_goes[j])
                continue;
            const std::int64_t units = static_cast<std::int64_t>(j - i + 1);
            const std::int64_t d = sorted_goes[j] - sorted_goes[i];
            if (units > kBurst + kLimit * d / kPeriodMs)
                return std::to_string(units) + " units go in [" + std::to_string(sorted_goes[i]) +
                       ", " + std::to_string(sorted_goes[j]) + "] ms";
        }
    }
    return {};
}

class Delays : public FreshExtensionTest, public ::testing::WithParamInterface<const char*> {};

TEST_P(Delays, ThirtyTwoConnectionsNeverGoFasterThanTheLimit) {
    const std::string engine = GetParam();
    const std::string key = "delay-test-" + engine + "-" + run_unique_hex();
    const std::string call = "SELECT allowed, retry_after_ms FROM ratelimit.consume('" + key +
                             "', " + std::to_string(kLimit) + ", '1 second', 1, 'gcra', '" +
                             engine + "', " + std::to_string(kBurst) + ", p_max_wait => '" +
                             std::to_string(kMaxWaitMs) + " milliseconds')";
    Schedule schedule;
    std::vector<std::int64_t> goes;           // every admitted call's go instant, in ms
    std::vector<std::int64_t> expected_goes;  // the schedule's
    for (const std::int64_t round_ms : kRoundsMs) {
        SCOPED_TRACE("round at +" + std::to_string(round_ms) + " ms");
        const std::int64_t at = kStartMs + round_ms;
        const std::string clock = instant_text(round_ms);
        std::vector<std::int64_t> expected;
        for (int i = 0; i < kClients * kCallsPerClient; ++i) {
            if (const auto go = schedule.admit(at))
                expected.push_back(*go);
        }
        std::mutex mutex;
        std::vector<std::int64_t> admitted;
        int denied = 0;
        const std::vector<std::string> failures = run_parallel_clients(
            kClients,
            [&](int, PgConnection& conn) {
                conn.query("SET ratelimit.test_clock = '" + clock + "'");
                const std::string now =
                    conn.query("SELECT (extract(epoch FROM ratelimit.clock_now()) * 1000)::bigint")
                        .single_value();
                if (std::stoll(now) != at)
                    throw std::runtime_error("the test clock reads " + now);
            },
            [&](int, PgConnection& conn) {
                for (int i = 0; i < kCallsPerClient; ++i) {
                    PgResult result = conn.query(call);
                    const bool allowed = result.value(0, 0) == "t";
                    const std::int64_t retry_after_ms = std::stoll(result.value(0, 1));
                    std::lock_guard<std::mutex> lock(mutex);
                    if (allowed)
                        admitted.push_back(at + retry_after_ms);
                    else
                        ++denied;
                }
            });
        ASSERT_TRUE(failures.empty()) << join_lines(failures);
        std::sort(admitted.begin(), admitted.end());
        EXPECT_EQ(admitted.size(), expected.size()) << "admitted as many as the schedule allows";
        EXPECT_EQ(admitted, expected) << "at the schedule's go instants";
        EXPECT_EQ(static_cast<std::size_t>(denied) + admitted.size(),
                  static_cast<std::size_t>(kClients * kCallsPerClient));
        goes.insert(goes.end(), admitted.begin(), admitted.end());
        expected_goes.insert(expected_goes.end(), expected.begin(), expected.end());
    }
    std::sort(goes.begin(), goes.end());
    EXPECT_EQ(span_violation(goes), "");
    // The rounds reach every case: delays, denials, and a key that had refilled.
    EXPECT_GT(goes.size(), kBurst * 3);
    EXPECT_EQ(goes, expected_goes);
    // The first round, on a fresh key: the burst at once, then one every 20 ms up to 500 ms.
    EXPECT_EQ(std::count(goes.begin(), goes.end(), kStartMs), kBurst);
}

INSTANTIATE_TEST_SUITE_P(Engines, Delays, ::testing::Values("memory", "table"));

}  // namespace
}  // namespace ratelimit_test
