// Leases under real connections (the server preloads the library):
//  - 64 connections take and end leases of one key with a limit of 5, by commit, by rollback
//    and by release: never more than 5 holders at once, and every unit comes back;
//  - holders whose backends are terminated mid-flight, in a transaction or a session, or whose
//    connections are simply closed, give every unit back.
// (A backend killed outright, which makes the server reinitialize shared memory, is tested with
// the memory engine's crashes: test/memory/lifecycle.sh.)
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

class Leases : public FreshExtensionTest {
  protected:
    void SetUp() override {
        FreshExtensionTest::SetUp();
        if (HasFatalFailure())
            return;
        PgResult probe = setup_.exec("SELECT ratelimit.in_flight('probe')");
        ASSERT_TRUE(probe.ok()) << "leases need shared_preload_libraries = 'ratelimit': "
                                << probe.describe();
        key_ = "lease-test-" + std::to_string(setup_.backend_pid()) + "-" +
               std::to_string(std::chrono::steady_clock::now().time_since_epoch().count());
    }

    int in_flight() { return std::stoi(scalar("SELECT ratelimit.in_flight('" + key_ + "')")); }

    // Polls in_flight until it is `expected` or `seconds` pass; returns the last value.
    int wait_for_in_flight(int expected, int seconds) {
        const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(seconds);
        int now = in_flight();
        while (now != expected && std::chrono::steady_clock::now() < deadline) {
            std::this_thread::sleep_for(std::chrono::milliseconds(20));
            now = in_flight();
        }
        return now;
    }

    std::string key_;
};

TEST_F(Leases, SixtyFourConnectionsNeverHoldMoreThanTheLimitAndGiveEveryUnitBack) {
    constexpr int kClients = 64;
    constexpr int kRounds = 30;
    constexpr int kLimit = 5;
    std::atomic<int> holding{0};
    std::atomic<int> most_holding{0};
    std::atomic<int> granted{0};
    std::atomic<int> denied{0};
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
                PgResult lease =
                    conn.query("SELECT allowed, lease_id FROM ratelimit.acquire('" + key_ + "', " +
                               std::to_string(kLimit) + ", p_scope => '" + scope + "')");
                const bool allowed = lease.value(0, 0) == "t";
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
    EXPECT_EQ(in_flight(), 0);
}

// Holders that never end their leases themselves: 8 in an open transaction, 8 in their
// session, terminated by pg_terminate_backend; 8 more whose connections are closed.
TEST_F(Leases, TerminatedAndClosedHoldersGiveEveryUnitBack) {
    constexpr int kEach = 8;
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
                if (conn.query("SELECT allowed FROM ratelimit.acquire('" + key_ +
                               "', 100, p_scope => '" + scope + "')")
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
            closing.back()->query("SELECT ratelimit.acquire('" + key_ +
                                  "', 100, p_scope => 'session')");
        }
        EXPECT_EQ(in_flight(), 3 * kEach) << "every holder holds its unit";
    }
    EXPECT_EQ(wait_for_in_flight(2 * kEach, 10), 2 * kEach)
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
    EXPECT_EQ(wait_for_in_flight(0, 10), 0)
        << "a terminated backend's leases end, in a transaction as in a session";
}

// A lease's identifier is no capability in another database: the same role there is refused
// (42501) and the lease stays held, until its own database releases it.
TEST_F(Leases, AnotherDatabaseCannotReleaseALease) {
    const std::string other_database = "ratelimit_concurrency_other";
    setup_.query("DROP DATABASE IF EXISTS " + other_database);
    setup_.query("CREATE DATABASE " + other_database);
    {
        PgConnection other("dbname=" + other_database);
        ASSERT_TRUE(other.connected()) << other.error_message();
        other.query("CREATE EXTENSION ratelimit");
        const std::string lease = scalar("SELECT lease_id FROM ratelimit.acquire('" + key_ +
                                         "', 2, p_scope => 'session')");
        const PgResult refused = other.exec("SELECT ratelimit.release(" + lease + ")");
        EXPECT_FALSE(refused.ok());
        EXPECT_EQ(refused.sqlstate(), "42501") << refused.describe();
        EXPECT_EQ(in_flight(), 1) << "the lease is still held";
        EXPECT_EQ(scalar("SELECT ratelimit.release(" + lease + ")"), "t")
            << "its own database releases it";
        EXPECT_EQ(in_flight(), 0);
    }
    setup_.query("DROP DATABASE " + other_database);
}

}  // namespace
}  // namespace ratelimit_test
