// The game backend's per-RPC check_rate_limit under real concurrency: many backends race on the
// same (user_id, rpc_name) row, and exactly p_max_calls of them may be allowed, with every call
// counted once.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "fresh_extension_fixture.hpp"
#include "parallel_clients.hpp"
#include "pg_connection.hpp"

namespace ratelimit_test {
namespace {

class RpcLimitsConcurrency : public FreshExtensionTest {};

constexpr char kCaller[] = "6f1c2d4e-8a3b-4c5d-9e7f-0a1b2c3d4e5f";

TEST_F(RpcLimitsConcurrency, FiftyParallelCallsWithLimitTenAllowExactlyTen) {
    constexpr int kClients = 50;
    std::atomic<int> allowed{0};
    std::atomic<int> denied{0};

    std::vector<std::string> failures = run_parallel_clients(
        kClients,
        [](int, PgConnection& conn) {
            // How PostgREST (v10+) hands the caller to the function: the whole JWT claim set.
            conn.query(std::string("SET request.jwt.claims = '{\"sub\":\"") + kCaller +
                       "\",\"role\":\"authenticated\"}'");
        },
        [&](int, PgConnection& conn) {
            bool ok = conn.query(
                              "SELECT check_rate_limit(p_rpc_name => 'complete-game', p_max_calls "
                              "=> 10, p_window_minutes => 1)")
                          .single_bool();
            (ok ? allowed : denied).fetch_add(1);
        });

    ASSERT_TRUE(failures.empty()) << join_lines(failures);
    EXPECT_EQ(allowed.load(), 10);
    EXPECT_EQ(denied.load(), 40);
    // One row, not one per racing INSERT, and no call lost.
    EXPECT_EQ(scalar("SELECT count(*) FROM rpc_rate_limits"), "1");
    EXPECT_EQ(scalar("SELECT call_count FROM rpc_rate_limits"
                     " WHERE user_id = $1::uuid AND rpc_name = 'complete-game'",
                     {kCaller}),
              "50");
}

TEST_F(RpcLimitsConcurrency, NamedArgumentsAndOldClaimSettingInParallel) {
    constexpr int kClients = 32;
    std::atomic<int> allowed{0};
    std::atomic<int> denied{0};

    std::vector<std::string> failures = run_parallel_clients(
        kClients,
        [](int, PgConnection& conn) {
            // The setting PostgREST before v10 used for the caller.
            conn.query(std::string("SET request.jwt.claim.sub = '") + kCaller + "'");
        },
        [&](int, PgConnection& conn) {
            // The named-argument call PostgREST makes for POST /rpc/check_rate_limit.
            bool ok = conn.query(
                              "SELECT check_rate_limit(p_rpc_name => 'login', p_max_calls => 5,"
                              " p_window_minutes => 15)")
                          .single_bool();
            (ok ? allowed : denied).fetch_add(1);
        });

    ASSERT_TRUE(failures.empty()) << join_lines(failures);
    EXPECT_EQ(allowed.load(), 5);
    EXPECT_EQ(denied.load(), kClients - 5);
    EXPECT_EQ(scalar("SELECT count(*) FROM rpc_rate_limits"), "1");
    EXPECT_EQ(scalar("SELECT call_count FROM rpc_rate_limits"
                     " WHERE user_id = $1::uuid AND rpc_name = 'login'",
                     {kCaller}),
              "32");
}

TEST_F(RpcLimitsConcurrency, ThousandUsersTimesFiftyCallsFromTwentyFiveConnections) {
    constexpr int kClients = 25;
    constexpr int kUsers = 1000;
    constexpr int kPasses = 2;  // so each user gets kClients * kPasses = 50 calls
    constexpr int kMaxCalls = 10;

    std::vector<std::string> user_ids;
    for (int user = 0; user < kUsers; ++user) {
        char id[40];
        std::snprintf(id, sizeof id, "00000000-0000-0000-0000-%012d", user);
        user_ids.push_back(id);
    }
    // Written by every client, so atomic; read once the threads are joined.
    std::vector<std::atomic<int>> allowed_per_user(kUsers);
    for (std::atomic<int>& allowed : allowed_per_user) {
        allowed.store(0);
    }
    std::atomic<int> allowed_total{0};

    std::vector<std::string> failures =
        run_parallel_clients(kClients, nullptr, [&](int client, PgConnection& conn) {
            // Each client visits the users in its own order, so clients collide on rows at
            // different times instead of marching in lockstep; seeded, so a failure reruns.
            std::mt19937 random(static_cast<unsigned>(client));
            std::vector<int> order(kUsers);
            for (int user = 0; user < kUsers; ++user) {
                order[user] = user;
            }
            for (int pass = 0; pass < kPasses; ++pass) {
                std::shuffle(order.begin(), order.end(), random);
                for (int user : order) {
                    bool ok = conn.query_params(
                                      "SELECT check_rate_limit_for_user($1::uuid,"
                                      " 'send-dm', 10, 60)",
                                      {user_ids[user].c_str()})
                                  .single_bool();
                    if (ok) {
                        allowed_per_user[user].fetch_add(1);
                        allowed_total.fetch_add(1);
                    }
                }
            }
        });

    ASSERT_TRUE(failures.empty()) << join_lines(failures);
    EXPECT_EQ(allowed_total.load(), kMaxCalls * kUsers);
    // One message listing every wrong user rather than up to a thousand failures.
    std::string wrong_users;
    for (int user = 0; user < kUsers; ++user) {
        int allowed = allowed_per_user[user].load();
        if (allowed != kMaxCalls) {
            wrong_users += user_ids[user] + " allowed " + std::to_string(allowed) + " times\n";
        }
    }
    EXPECT_TRUE(wrong_users.empty()) << wrong_users;

    PgResult table = setup_.query(
        "SELECT count(*), count(DISTINCT (user_id, rpc_name)), min(call_count), max(call_count)"
        " FROM rpc_rate_limits");
    ASSERT_EQ(table.rows(), 1);
    EXPECT_EQ(table.value(0, 0), "1000");
    EXPECT_EQ(table.value(0, 1), "1000");
    EXPECT_EQ(table.value(0, 2), "50");
    EXPECT_EQ(table.value(0, 3), "50");
}

}  // namespace
}  // namespace ratelimit_test
