// Policies under real connections. It proves that:
//  - editing a policy row in one connection changes the very next decision another connection
//    makes (no cache to wait for), for a limit, an engine and a deleted policy;
//  - 64 backends calling check_all over a global and a per-IP policy get exactly the allowance
//    the tighter of the two gives, on every engine and a mix of engines, with half of them
//    naming the policies in the other order: a denial charges no policy (the global key holds
//    exactly the allowed calls), nothing deadlocks, and the per-policy counters count every call.
//
// The memory engine's store and the policy counters live in shared memory for the server's
// lifetime, so subjects carry a prefix no earlier run used and counters are compared as
// differences. Every connection freezes the decision clock in 2100.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "fresh_extension_fixture.hpp"
#include "parallel_clients.hpp"
#include "pg_connection.hpp"
#include "run_unique.hpp"

namespace ratelimit_test {
namespace {

constexpr char kFrozenClock[] = "2100-01-01 00:30:00+00";
constexpr int kClients = 64;
constexpr int kCallsPerClient = 10;
constexpr int kIpKeys = 16;
constexpr int kPerIpLimit = 5;

void freeze_clock(int, PgConnection& conn) {
    conn.query(std::string("SET ratelimit.test_clock = '") + kFrozenClock + "'");
}

std::string unique_prefix() {
    return "policytest-" + run_unique_hex();
}

class PolicyConcurrencyTest : public FreshExtensionTest {
  protected:
    void SetUp() override {
        FreshExtensionTest::SetUp();
        prefix_ = unique_prefix();
    }

    // allowed, denied, shadow_denied of `policy` since the server started.
    std::vector<std::int64_t> counters(const std::string& policy) {
        PgResult result = setup_.query_params(
            "SELECT coalesce(max(allowed), 0), coalesce(max(denied), 0), "
            "coalesce(max(shadow_denied), 0) FROM ratelimit.policy_stats() WHERE policy = $1",
            {policy.c_str()});
        return {std::stoll(result.value(0, 0)), std::stoll(result.value(0, 1)),
                std::stoll(result.value(0, 2))};
    }

    std::string prefix_;
};

// One decision by policy on `conn`: true if allowed.
bool check(PgConnection& conn, const std::string& policy, const std::string& subject) {
    return conn
        .query_params("SELECT (ratelimit.check($1, $2)).allowed", {policy.c_str(), subject.c_str()})
        .single_bool();
}

TEST_F(PolicyConcurrencyTest, AnEditInOneConnectionDecidesTheNextCallInAnother) {
    setup_.query(
        "INSERT INTO ratelimit.policies (name, algorithm, \"limit\", period) "
        "VALUES ('edit.test', 'fixed_window', 3, '1 hour')");
    PgConnection caller;
    ASSERT_TRUE(caller.connected()) << caller.error_message();
    freeze_clock(0, caller);
    const std::string subject = prefix_ + ":edited";

    // The caller's session has run the policy functions (and cached their plans) before the edit.
    int allowed = 0;
    for (int i = 0; i < 5; ++i)
        allowed += check(caller, "edit.test", subject) ? 1 : 0;
    EXPECT_EQ(allowed, 3);

    // How many of the caller's calls after an edit commit still decide by the old row: 0.
    setup_.query("UPDATE ratelimit.policies SET \"limit\" = 6 WHERE name = 'edit.test'");
    int stale_calls = 0;
    while (stale_calls < 10 && !check(caller, "edit.test", subject))
        ++stale_calls;
    EXPECT_EQ(stale_calls, 0) << "calls decided by the old limit after the edit committed";
    allowed = 1;
    for (int i = 0; i < 5; ++i)
        allowed += check(caller, "edit.test", subject) ? 1 : 0;
    EXPECT_EQ(allowed, 3) << "the raised limit of 6 allows 3 more";

    setup_.query("UPDATE ratelimit.policies SET \"limit\" = 1 WHERE name = 'edit.test'");
    EXPECT_FALSE(check(caller, "edit.test", subject + "-2") &&
                 check(caller, "edit.test", subject + "-2"))
        << "a lowered limit applies to the next calls";

    setup_.query(
        "UPDATE ratelimit.policies SET engine = 'memory', \"limit\" = 2 WHERE name = 'edit.test'");
    allowed = 0;
    for (int i = 0; i < 4; ++i)
        allowed += check(caller, "edit.test", subject) ? 1 : 0;
    EXPECT_EQ(allowed, 2) << "moved to the memory engine, the key starts fresh there";

    setup_.query("DELETE FROM ratelimit.policies WHERE name = 'edit.test'");
    PgResult gone =
        caller.exec_params("SELECT ratelimit.check('edit.test', $1)", {subject.c_str()});
    EXPECT_EQ(gone.sqlstate(), "22023") << "a deleted policy is unknown at once";
}

struct EngineMix {
    const char* global_engine;
    const char* ip_engine;
};

class AllOrNothingTest : public PolicyConcurrencyTest,
                         public ::testing::WithParamInterface<EngineMix> {};

// Runs kClients x kCallsPerClient check_all calls over aon.global (limit `global_limit`) and
// aon.ip (kPerIpLimit per IP, kIpKeys IPs); odd clients name the policies in the other order.
// Returns the number of allowed calls.
int run_all_or_nothing(const std::string& prefix) {
    std::atomic<int> allowed{0};
    const std::vector<std::string> failures =
        run_parallel_clients(kClients, freeze_clock, [&](int client, PgConnection& conn) {
            const std::string global = prefix + ":global";
            const std::string ip = prefix + ":ip-" + std::to_string(client % kIpKeys);
            const bool reversed = client % 2 == 1;
            const std::string sql =
                reversed ? "SELECT (ratelimit.check_all(ARRAY['aon.ip', 'aon.global'], "
                           "ARRAY[$2, $1])).allowed"
                         : "SELECT (ratelimit.check_all(ARRAY['aon.global', 'aon.ip'], "
                           "ARRAY[$1, $2])).allowed";
            for (int i = 0; i < kCallsPerClient; ++i) {
                if (conn.query_params(sql, {global.c_str(), ip.c_str()}).single_bool())
                    ++allowed;
            }
        });
    if (!failures.empty())
        throw std::runtime_error(join_lines(failures));
    return allowed.load();
}

TEST_P(AllOrNothingTest, SixtyFourConnectionsGetExactlyTheTighterAllowanceAndDenialsChargeNothing) {
    const EngineMix mix = GetParam();
    for (const int global_limit : {200, 50}) {
        SCOPED_TRACE("global limit " + std::to_string(global_limit));
        const std::string prefix = prefix_ + "-" + std::to_string(global_limit);
        setup_.query("DELETE FROM ratelimit.policies WHERE name LIKE 'aon.%'");
        setup_.query(
            std::string("INSERT INTO ratelimit.policies (name, algorithm, \"limit\", period, "
                        "engine) VALUES ('aon.global', 'fixed_window', ") +
            std::to_string(global_limit) + ", '1 hour', '" + mix.global_engine +
            "'), ('aon.ip', 'fixed_window', " + std::to_string(kPerIpLimit) + ", '1 hour', '" +
            mix.ip_engine + "')");
        const std::vector<std::int64_t> global_before = counters("aon.global");
        const std::vector<std::int64_t> ip_before = counters("aon.ip");

        const int allowed = run_all_or_nothing(prefix);

        // The IPs allow 16 x 5 = 80 at most; the global policy 200 (not binding) or 50.
        const int expected = std::min(global_limit, kIpKeys * kPerIpLimit);
        EXPECT_EQ(allowed, expected);

        // Every call is counted once, against the policy that decided it (read first: the
        // reads below are calls too).
        const int calls = kClients * kCallsPerClient;
        const std::vector<std::int64_t> global_after = counters("aon.global");
        const std::vector<std::int64_t> ip_after = counters("aon.ip");
        EXPECT_EQ(global_after[0] - global_before[0], expected) << "aon.global allowed";
        EXPECT_EQ(ip_after[0] - ip_before[0], expected) << "aon.ip allowed";
        const std::int64_t denials =
            (global_after[1] - global_before[1]) + (ip_after[1] - ip_before[1]);
        if (global_limit > kIpKeys * kPerIpLimit) {
            EXPECT_EQ(ip_after[1] - ip_before[1], calls - expected) << "only aon.ip denies";
            EXPECT_EQ(global_after[1] - global_before[1], 0) << "aon.global never denies";
        } else {
            // A call both policies deny counts against each.
            EXPECT_GE(denials, calls - expected);
        }

        // The global key was charged exactly once per allowed call: denials charged nothing. A
        // policy's counters are reachable only through the policy; a call of cost 0 reads them.
        setup_.query("SET ratelimit.test_clock = '2100-01-01 00:30:00+00'");
        const std::string global_subject = prefix + ":global";
        const std::string global_remaining =
            setup_
                .query_params("SELECT (ratelimit.check('aon.global', $1, 0)).remaining",
                              {global_subject.c_str()})
                .single_value();
        EXPECT_EQ(std::stoi(global_remaining), global_limit - expected);
        // And the IP keys together hold exactly the allowed calls, none above its limit.
        int ip_used = 0;
        for (int ip = 0; ip < kIpKeys; ++ip) {
            const std::string subject = prefix + ":ip-" + std::to_string(ip);
            const int remaining =
                std::stoi(setup_
                              .query_params("SELECT (ratelimit.check('aon.ip', $1, 0)).remaining",
                                            {subject.c_str()})
                              .single_value());
            EXPECT_GE(remaining, 0);
            ip_used += kPerIpLimit - remaining;
        }
        EXPECT_EQ(ip_used, expected);
        setup_.query("RESET ratelimit.test_clock");
    }
}

INSTANTIATE_TEST_SUITE_P(
    Engines, AllOrNothingTest,
    ::testing::Values(EngineMix{"table", "table"}, EngineMix{"unlogged", "unlogged"},
                      EngineMix{"memory", "memory"}, EngineMix{"memory", "table"},
                      EngineMix{"table", "memory"}),
    [](const ::testing::TestParamInfo<EngineMix>& info) {
        return std::string(info.param.global_engine) + "_" + info.param.ip_engine;
    });

}  // namespace
}  // namespace ratelimit_test
