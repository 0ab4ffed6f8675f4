// Leases through a concurrency policy (ratelimit.acquire_policy) under real connections (the
// server preloads the library):
//  - 64 connections take and end leases of one subject under a policy of 5 in flight, by
//    commit, by rollback and by release: never more than 5 holders at once, every unit back;
//  - holders terminated by pg_terminate_backend mid-flight, in a transaction or a session, or
//    whose connections are simply closed, give every unit back.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "fresh_extension_fixture.hpp"
#include "parallel_clients.hpp"
#include "pg_connection.hpp"

namespace ratelimit_test {
namespace {

class PolicyLeases : public FreshExtensionTest {
  protected:
    void SetUp() override {
        FreshExtensionTest::SetUp();
        if (HasFatalFailure())
            return;
        PgResult probe = setup_.exec("SELECT ratelimit.in_flight('probe')");
        ASSERT_TRUE(probe.ok()) << "leases need shared_preload_libraries = 'ratelimit': "
                                << probe.describe();
        // Leases live in shared memory, which outlives the extension: a subject of this run.
        subject_ = "policy-lease-test-" + std::to_string(setup_.backend_pid()) + "-" +
                   std::to_string(std::chrono::steady_clock::now().time_since_epoch().count());
        setup_.query(
            "INSERT INTO ratelimit.policies (name, \"limit\", period, engine, quota_unit) VALUES "
            "('jobs.five', 5, '10 minutes', 'memory', 'concurrent-requests'), "
            "('jobs.many', 100, '10 minutes', 'memory', 'concurrent-requests')");
    }

    // The units the subject holds under `policy` (of `limit`): a lease of the whole limit,
    // taken and rolled back, is allowed only when none are held, and a denial reports them.
    int in_flight(const std::string& policy, int limit) {
        setup_.query("BEGIN");
        PgResult probe =
            setup_.query("SELECT allowed, in_flight FROM ratelimit.acquire_policy('" + policy +
                         "', '" + subject_ + "', " + std::to_string(limit) + ")");
        setup_.query("ROLLBACK");
        const int reported = std::stoi(probe.value(0, 1));
        return probe.value(0, 0) == "t" ? reported - limit : reported;
    }

    int wait_for_in_flight(const std::string& policy, int limit, int expected, int seconds) {
        const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(seconds);
        int now = in_flight(policy, limit);
        while (now != expected && std::chrono::steady_clock::now() < deadline) {
            std::this_thread::sleep_for(std::chrono::milliseconds(20));
            now = in_flight(policy, limit);
        }
        return now;
    }

    std::string subject_;
};

TEST_F(PolicyLeases, SixtyFourConnectionsNeverHoldMoreThanTheLimitAndGiveEveryUnitBack) {
    constexpr int kClients = 64;
    constexpr int kRounds = 30;
    constexpr int kLimit = 5;
    std::atomic<int> holding{0};
    std::atomic<int> most_holding{0};
    std::atomic<int> granted{0};
    std::atomic<int> denied{0};
    const std::string counted_sql =
        "SELECT coalesce((SELECT allowed + denied FROM ratelimit.policy_stats() "
        "WHERE policy = 'jobs.five'), 0)";
    const long long counted_before = std::stoll(scalar(counted_sql));
    const std::vector<std::string> failures = run_parallel_clients(
        kClients, [](int, PgConnection&) {},
        [&](int client, PgConnection& conn) {
            std::mt19937 random(static_cast<unsigned>(client * 31 + 7));
            for (int round = 0; round < kRounds; ++round) {
                // Three ways to end a lease: commit, rollback, release of a session lease.
                const int way = static_cast<int>(random() % 3);
                const std::string scope = way == 2 ? "session" : "transaction";
                if (way != 2)
                    conn.query("BEGIN");
                PgResult lease = conn.query(
                    "SELECT allowed, lease_id, in_flight FROM ratelimit.acquire_policy("
                    "'jobs.five', '" +
                    subject_ + "', p_scope => '" + scope + "')");
                const bool allowed = lease.value(0, 0) == "t";
                if (std::stoi(lease.value(0, 2)) > kLimit)
                    throw std::runtime_error("in_flight above the limit: " + lease.value(0, 2));
                if (allowed) {
                    ++granted;
                    const int now = ++holding;
                    int seen = most_holding.load();
                    while (now > seen && !most_holding.compare_exchange_weak(seen, now)) {
                    }
                    std::this_thread::sleep_for(std::chrono::microseconds(200 + random() % 800));
                    // Counted out before the lease ends, so the count never exceeds the holders.
                    --holding;
                } else {
                    ++denied;
                }
                if (way == 0)
                    conn.query("COMMIT");
                else if (way == 1)
                    conn.query("ROLLBACK");
                else if (allowed)
                    conn.query("SELECT ratelimit.release(" + lease.value(0, 1) + ")");
            }
        });
    ASSERT_TRUE(failures.empty()) << join_lines(failures);
    EXPECT_LE(most_holding.load(), kLimit);
    EXPECT_EQ(most_holding.load(), kLimit) << "64 connections must have filled the limit";
    EXPECT_GT(denied.load(), 0) << "and met it";
    EXPECT_GT(granted.load(), kClients);
    // The policy counted every call, as check counts.
    EXPECT_EQ(std::stoll(scalar(counted_sql)) - counted_before, granted.load() + denied.load());
    EXPECT_EQ(in_flight("jobs.five", kLimit), 0);
}

// Holders that never end their leases themselves: 8 in an open transaction, 8 in their
// session, terminated by pg_terminate_backend; 8 more whose connections are closed.
TEST_F(PolicyLeases, TerminatedAndClosedHoldersGiveEveryUnitBack) {
    constexpr int kEach = 8;
    constexpr int kLimit = 100;
    std::mutex mutex;
    std::vector<int> pids;
    std::atomic<int> ready{0};
    std::vector<std::thread> holders;
    std::vector<std::string> errors(2 * kEach);
    for (int i = 0; i < 2 * kEach; ++i) {
        holders.emplace_back([&, i] {
            PgConnection conn;
            const bool in_transaction = i < kEach;
            try {
                if (in_transaction)
                    conn.query("BEGIN");
                const std::string scope = in_transaction ? "transaction" : "session";
                if (conn.query("SELECT allowed FROM ratelimit.acquire_policy('jobs.many', '" +
                               subject_ + "', p_scope => '" + scope + "')")
                        .single_value() != "t")
                    throw std::runtime_error("a lease was denied below the limit");
                {
                    std::lock_guard<std::mutex> lock(mutex);
                    pids.push_back(conn.backend_pid());
                }
                ++ready;
                // Terminated while it waits: the query fails, as it must.
                conn.exec("SELECT pg_sleep(60)");
            } catch (const std::exception& e) {
                errors[i] = e.what();
                ++ready;
            }
        });
    }
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    while (ready.load() < 2 * kEach && std::chrono::steady_clock::now() < deadline)
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
    {
        // Connections closed without a word: their sessions end.
        std::vector<std::unique_ptr<PgConnection>> closing;
        for (int i = 0; i < kEach; ++i) {
            closing.push_back(std::make_unique<PgConnection>());
            closing.back()->query("SELECT ratelimit.acquire_policy('jobs.many', '" + subject_ +
                                  "', p_scope => 'session')");
        }
        EXPECT_EQ(in_flight("jobs.many", kLimit), 3 * kEach) << "every holder holds its unit";
    }
    EXPECT_EQ(wait_for_in_flight("jobs.many", kLimit, 2 * kEach, 10), 2 * kEach)
        << "closing a connection ends its session's lease";
    {
        std::lock_guard<std::mutex> lock(mutex);
        for (int pid : pids)
            setup_.query("SELECT pg_terminate_backend(" + std::to_string(pid) + ")");
    }
    for (std::thread& holder : holders)
        holder.join();
    for (int i = 0; i < 2 * kEach; ++i)
        EXPECT_TRUE(errors[i].empty()) << "holder " << i << ": " << errors[i];
    EXPECT_EQ(wait_for_in_flight("jobs.many", kLimit, 0, 10), 0)
        << "a terminated backend's leases end, in a transaction as in a session";
}

}  // namespace
}  // namespace ratelimit_test
