// Creating keys on the table engines. A key's first row goes in by speculative insertion (see
// src/pg/engines/key_state_table.hpp), which holds no lock once the row is in, so:
//  - one transaction can create 100,000 keys (far more than PostgreSQL's shared lock table could
//    hold locks for) while other sessions keep creating and deciding keys of their own, and it
//    holds a handful of locks while doing so;
//  - a first call that meets another transaction's uncommitted first call of the same key waits
//    for that transaction and then decides on its row (committed) or creates the key itself
//    (rolled back): nothing is lost or counted twice.
#include <gtest/gtest.h>

#include <atomic>
#include <algorithm>
#include <chrono>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "fresh_extension_fixture.hpp"
#include "parallel_clients.hpp"
#include "pg_connection.hpp"

namespace ratelimit_test {
namespace {

constexpr char kFrozenClock[] = "2100-01-01 00:30:00+00";

class KeyCreation : public FreshExtensionTest, public ::testing::WithParamInterface<const char*> {
  protected:
    const char* engine() const { return GetParam(); }
    std::string table() const {
        return std::string("ratelimit.") +
               (std::string(engine()) == "unlogged" ? "key_state_unlogged" : "key_state");
    }
};

TEST_P(KeyCreation, OneTransactionCreatesHundredThousandKeysWhileOthersKeepDeciding) {
    constexpr int kBatches = 10;
    constexpr int kBatchKeys = 10000;  // consume_many's largest batch
    constexpr int kOtherClients = 8;
    constexpr int kOtherCalls = 400;
    constexpr int kLimit = 3;
    std::atomic<bool> creator_done{false};
    std::atomic<int> creator_allowed{0};
    std::atomic<int> most_locks_held{0};
    std::vector<int> other_calls(kOtherClients + 1, 0);
    std::vector<int> other_allowed(kOtherClients + 1, 0);

    const std::vector<std::string> failures = run_parallel_clients(
        kOtherClients + 1,
        [](int, PgConnection& conn) {
            conn.query(std::string("SET ratelimit.test_clock = '") + kFrozenClock + "'");
        },
        [&](int client, PgConnection& conn) {
            const std::string engine_name = engine();
            if (client == 0) {
                // The others stop once this is set, also when a step below throws.
                struct Done {
                    std::atomic<bool>& flag;
                    ~Done() { flag = true; }
                } done{creator_done};
                conn.query("BEGIN");
                for (int batch = 0; batch < kBatches; ++batch) {
                    const std::string first = std::to_string(batch * kBatchKeys);
                    const std::string last = std::to_string((batch + 1) * kBatchKeys - 1);
                    PgResult allowed = conn.query(
                        "SELECT count(*) FILTER (WHERE allowed) FROM unnest(ratelimit.consume_many("
                        "ARRAY(SELECT 'bulk:' || g FROM generate_series(" +
                        first + ", " + last + ") AS g), " + std::to_string(kLimit) +
                        ", '1 hour', p_engine => '" + engine_name + "'))");
                    creator_allowed += std::stoi(allowed.single_value());
                    // Relation and virtual-transaction locks only: none per key created.
                    const int locks = std::stoi(
                        conn.query("SELECT count(*) FROM pg_locks WHERE pid = pg_backend_pid()")
                            .single_value());
                    most_locks_held = std::max(most_locks_held.load(), locks);
                }
                conn.query("COMMIT");
                return;
            }
            // Until the creator commits (and at least kOtherCalls times): a new key of this
            // client's own, then the shared hot key, each in its own transaction.
            int call = 0;
            while (call < kOtherCalls || !creator_done) {
                const std::string key =
                    "other:" + std::to_string(client) + ":" + std::to_string(call);
                PgResult fresh = conn.exec_params(
                    "SELECT allowed FROM ratelimit.consume($1::text, 3, '1 hour', 1, "
                    "'fixed_window', $2::text)",
                    {key.c_str(), engine_name.c_str()});
                if (!fresh.ok() || !fresh.single_bool()) {
                    throw std::runtime_error("a new key's first call failed or was denied: " +
                                             fresh.describe());
                }
                PgResult hot = conn.exec_params(
                    "SELECT allowed FROM ratelimit.consume('hot', 1000000, '1 hour', 1, "
                    "'fixed_window', $1::text)",
                    {engine_name.c_str()});
                if (!hot.ok()) {
                    throw std::runtime_error("the hot key's call failed: " + hot.describe());
                }
                other_allowed[client] += hot.single_bool() ? 1 : 0;
                ++call;
            }
            other_calls[client] = call;
        });
    ASSERT_TRUE(failures.empty()) << join_lines(failures);

    EXPECT_EQ(creator_allowed.load(), kBatches * kBatchKeys);
    EXPECT_LT(most_locks_held.load(), 20);
    EXPECT_EQ(scalar("SELECT count(*) FROM " + table() + " WHERE key LIKE 'bulk:%'"),
              std::to_string(kBatches * kBatchKeys));
    // Each bulk key was charged once (a fixed window's row keeps the units used as `amount`).
    EXPECT_EQ(scalar("SELECT count(*) FROM " + table() + " WHERE key LIKE 'bulk:%' AND amount = 1"),
              std::to_string(kBatches * kBatchKeys));
    int total_calls = 0;
    int total_hot_allowed = 0;
    for (int client = 1; client <= kOtherClients; ++client) {
        EXPECT_GE(other_calls[client], kOtherCalls) << "client " << client;
        total_calls += other_calls[client];
        total_hot_allowed += other_allowed[client];
    }
    EXPECT_EQ(total_hot_allowed, total_calls);
    EXPECT_EQ(scalar("SELECT count(*) FROM " + table() + " WHERE key LIKE 'other:%'"),
              std::to_string(total_calls));
    EXPECT_EQ(scalar("SELECT allowed::text || '/' || remaining FROM ratelimit.peek('hot', 1000000, "
                     "'1 hour', p_engine => '" +
                     std::string(engine()) + "')"),
              "true/" + std::to_string(1000000 - total_calls));
}

// Runs `sql` on its own connection in a thread, and reports once the call is seen waiting for
// a lock held by another backend (pg_stat_activity), so the test knows the race is set up.
class WaitingCall {
  public:
    explicit WaitingCall(std::string sql) : sql_(std::move(sql)) {
        thread_ = std::thread([this] {
            pid_ = conn_.backend_pid();
            conn_.query(std::string("SET ratelimit.test_clock = '") + kFrozenClock + "'");
            started_ = true;
            PgResult result = conn_.exec(sql_);
            result_ = result.ok() && result.rows() == 1 ? result.value(0, 0) : result.describe();
            done_ = true;
        });
    }
    ~WaitingCall() {
        if (thread_.joinable())
            thread_.join();
    }
    // True once the call waits on a lock; false if it finished first or never waited in 10 s.
    bool waits(PgConnection& observer) {
        for (int attempt = 0; attempt < 1000 && !done_; ++attempt) {
            if (started_ &&
                observer.query("SELECT count(*) FROM pg_stat_activity WHERE pid = " +
                               std::to_string(pid_.load()) + " AND wait_event_type = 'Lock'")
                        .single_value() == "1") {
                return true;
            }
            std::this_thread::sleep_for(std::chrono::milliseconds(10));
        }
        return false;
    }
    std::string result() {
        thread_.join();
        return result_;
    }

  private:
    std::string sql_;
    PgConnection conn_;
    std::atomic<int> pid_{0};
    std::atomic<bool> started_{false};
    std::atomic<bool> done_{false};
    std::string result_;
    std::thread thread_;
};

std::string race_call(const char* engine) {
    return std::string(
               "SELECT allowed::text || '/' || remaining FROM ratelimit.consume('race', 5, "
               "'1 hour', p_engine => '") +
           engine + "')";
}

TEST_P(KeyCreation, FirstCallWaitsForAnUncommittedFirstCallAndDecidesOnItsRow) {
    PgConnection first;
    PgConnection observer;
    first.query(std::string("SET ratelimit.test_clock = '") + kFrozenClock + "'");
    first.query("BEGIN");
    EXPECT_EQ(first.query(race_call(engine())).single_value(), "true/4");
    WaitingCall second(race_call(engine()));
    ASSERT_TRUE(second.waits(observer)) << "the second first call did not wait";
    first.query("COMMIT");
    EXPECT_EQ(second.result(), "true/3");
    EXPECT_EQ(scalar("SELECT count(*) FROM " + table() + " WHERE key = 'race'"), "1");
}

TEST_P(KeyCreation, FirstCallAfterAnUncommittedFirstCallRolledBackCreatesTheKeyItself) {
    PgConnection first;
    PgConnection observer;
    first.query(std::string("SET ratelimit.test_clock = '") + kFrozenClock + "'");
    first.query("BEGIN");
    EXPECT_EQ(first.query(race_call(engine())).single_value(), "true/4");
    WaitingCall second(race_call(engine()));
    ASSERT_TRUE(second.waits(observer)) << "the second first call did not wait";
    first.query("ROLLBACK");
    EXPECT_EQ(second.result(), "true/4");
    EXPECT_EQ(scalar("SELECT count(*) FROM " + table() + " WHERE key = 'race'"), "1");
}

INSTANTIATE_TEST_SUITE_P(TableEngines, KeyCreation, ::testing::Values("table", "unlogged"),
                         [](const ::testing::TestParamInfo<const char*>& info) {
                             return std::string(info.param);
                         });

}  // namespace
}  // namespace ratelimit_test
