// Reservations under real connections (the server preloads the library): 16 connections race
// to settle the same reservations, on each engine. Every reservation is settled exactly once
// (the losers get the "not an open reservation" error, nothing else), a settle rolled back
// leaves its reservation open for another connection (table engines), and the key's final count
// is exactly the sum of the actual costs.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "fresh_extension_fixture.hpp"
#include "parallel_clients.hpp"
#include "pg_connection.hpp"

namespace ratelimit_test {
namespace {

constexpr int kClients = 16;
constexpr int kReservations = 300;
constexpr int kEstimate = 5;
constexpr int kLimit = 1000000;

class Reservations : public FreshExtensionTest, public ::testing::WithParamInterface<const char*> {
  protected:
    void SetUp() override {
        FreshExtensionTest::SetUp();
        if (HasFatalFailure())
            return;
        key_ = std::string("reservation-test-") + GetParam() + "-" +
               std::to_string(setup_.backend_pid()) + "-" +
               std::to_string(std::chrono::steady_clock::now().time_since_epoch().count());
    }

    // The limit every call uses: a window of 365 days, so that no window ends mid-test.
    std::string limit_arguments() const {
        return "'" + key_ + "', " + std::to_string(kLimit) + ", '365 days'";
    }

    std::string key_;
};

// The actual cost of reservation i: below, at and above the estimate.
int actual_of(int i) {
    return i % 11;
}

TEST_P(Reservations, SixteenConnectionsSettleEachReservationExactlyOnce) {
    const std::string engine = GetParam();
    const bool transactional = engine != "memory";
    std::vector<std::string> ids;
    for (int i = 0; i < kReservations; ++i) {
        PgResult made =
            setup_.query("SELECT reservation_id FROM ratelimit.reserve(" + limit_arguments() +
                         ", " + std::to_string(kEstimate) + ", p_engine => '" + engine + "')");
        ASSERT_FALSE(made.is_null(0, 0)) << "reserve " << i << " was denied";
        ids.push_back(made.value(0, 0));
    }
    std::unique_ptr<std::atomic<int>[]> settled(new std::atomic<int>[kReservations]);
    for (int i = 0; i < kReservations; ++i)
        settled[i] = 0;
    std::atomic<int> closed{0};
    std::atomic<int> lost_races{0};
    std::atomic<int> rolled_back{0};

    const std::vector<std::string> failures = run_parallel_clients(
        kClients, [](int, PgConnection&) {},
        [&](int client, PgConnection& conn) {
            std::mt19937 random(static_cast<unsigned>(client * 7919 + 13));
            std::vector<int> order(kReservations);
            for (int i = 0; i < kReservations; ++i)
                order[i] = i;
            // Passes until every reservation is closed: a settle rolled back reopens one.
            for (int pass = 0; pass < 50 && closed.load() < kReservations; ++pass) {
                std::shuffle(order.begin(), order.end(), random);
                for (int i : order) {
                    if (settled[i].load() > 0)
                        continue;
                    // A fifth of the settles on the table engines are rolled back.
                    const bool roll_back = transactional && random() % 5 == 0;
                    if (transactional)
                        conn.query("BEGIN");
                    PgResult result = conn.exec("SELECT allowed FROM ratelimit.settle(" + ids[i] +
                                                ", " + std::to_string(actual_of(i)) + ")");
                    if (!result.ok()) {
                        if (result.sqlstate() != "22023" ||
                            result.error_message().find("is not an open reservation") ==
                                std::string::npos)
                            throw std::runtime_error("settle " + ids[i] + ": " + result.describe());
                        ++lost_races;
                        if (transactional)
                            conn.query("ROLLBACK");
                        continue;
                    }
                    if (roll_back) {
                        conn.query("ROLLBACK");
                        ++rolled_back;
                        continue;
                    }
                    if (transactional)
                        conn.query("COMMIT");
                    ++settled[i];
                    ++closed;
                }
            }
        });
    ASSERT_TRUE(failures.empty()) << join_lines(failures);
    long long expected = 0;
    for (int i = 0; i < kReservations; ++i) {
        EXPECT_EQ(settled[i].load(), 1) << "reservation " << i << " (" << ids[i] << ")";
        expected += actual_of(i);
    }
    EXPECT_GT(lost_races.load(), 0) << "16 connections must have raced for the same reservations";
    if (transactional) {
        EXPECT_GT(rolled_back.load(), 0);
    }
    const int remaining =
        std::stoi(scalar("SELECT remaining FROM ratelimit.peek(" + limit_arguments() +
                         ", 1, p_engine => '" + engine + "')"));
    EXPECT_EQ(kLimit - remaining, expected) << "the key counts exactly the actual costs";
    PgResult again = setup_.exec("SELECT ratelimit.cancel(" + ids[0] + ")");
    EXPECT_EQ(again.sqlstate(), "22023") << "a settled reservation cannot be cancelled";
}

INSTANTIATE_TEST_SUITE_P(Engines, Reservations, ::testing::Values("table", "unlogged", "memory"));

}  // namespace
}  // namespace ratelimit_test
