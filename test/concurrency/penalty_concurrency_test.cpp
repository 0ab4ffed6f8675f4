// Escalating penalties under real connections, on every engine. 48 backends call check at once
// on keys of a policy with a penalty ladder, in rounds, the decision clock frozen in each round
// and moved past the blocks between rounds. It proves that:
//  - each round allows exactly the limit's calls on a fresh window, whatever the interleaving;
//  - every denial reports reason 'penalty' and a level of the ladder, and no answer reports a
//    level above the one the key holds afterwards (the level's counter is charged in the same
//    atomic step as on any other key: no charge is lost, none is counted twice);
//  - the key's level afterwards is the highest reported, and its block the step of that level;
//  - nothing deadlocks: the decision, the level's counter and the block take their locks in the
//    same order in every backend.
//
// The memory engine's store lives in shared memory for the server's lifetime, so subjects carry a
// prefix no earlier run used.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <mutex>
#include <stdexcept>
#include <string>
#include <vector>

#include "fresh_extension_fixture.hpp"
#include "parallel_clients.hpp"
#include "pg_connection.hpp"
#include "run_unique.hpp"

namespace ratelimit_test {
namespace {

constexpr int kClients = 48;
constexpr int kLimit = 3;
constexpr int kRounds = 4;
constexpr int kSteps = 16;

// Round r's clock: an hour apart, so each round meets a fresh window and an ended block.
std::string round_clock(int round) {
    return "2100-01-01 0" + std::to_string(round) + ":00:00+00";
}

struct Answer {
    bool allowed = false;
    std::string reason;
    int level = 0;  // 0: NULL
};

class PenaltyConcurrencyTest : public FreshExtensionTest {
  protected:
    void run_engine(const std::string& engine) {
        const std::string policy = "pen." + engine;
        // Blocks of 1 to 16 seconds, a level drained in a year: nothing drains between rounds.
        std::string ladder = "{";
        for (int step = 1; step <= kSteps; ++step)
            ladder += (step > 1 ? "," : "") + std::to_string(step) + " seconds";
        ladder += "}";
        setup_.query(
            "INSERT INTO ratelimit.policies (name, \"limit\", period, engine, "
            "penalty_blocks, penalty_decay) VALUES ('" +
            policy + "', " + std::to_string(kLimit) + ", '1 minute', '" + engine + "', '" + ladder +
            "', '20 days')");
        const std::string subject = "pen-" + run_unique_hex() + ":" + engine;
        int level_before = 0;
        for (int round = 0; round < kRounds; ++round) {
            std::mutex answers_mutex;
            std::vector<Answer> answers;
            const std::vector<std::string> failures = run_parallel_clients(
                kClients,
                [&](int, PgConnection& conn) {
                    conn.query("SET ratelimit.test_clock = '" + round_clock(round) + "'");
                },
                [&](int, PgConnection& conn) {
                    PgResult result = conn.query_params(
                        "SELECT allowed, reason, coalesce(penalty_level, 0) "
                        "FROM ratelimit.check($1, $2)",
                        {policy.c_str(), subject.c_str()});
                    if (!result.ok() || result.rows() != 1)
                        throw std::runtime_error("check failed: " + result.error_message());
                    Answer answer;
                    answer.allowed = result.value(0, 0) == "t";
                    answer.reason = result.value(0, 1);
                    answer.level = std::stoi(result.value(0, 2));
                    std::lock_guard<std::mutex> lock(answers_mutex);
                    answers.push_back(answer);
                });
            ASSERT_TRUE(failures.empty()) << engine << ": " << failures.front();
            ASSERT_EQ(static_cast<int>(answers.size()), kClients);

            int allowed = 0;
            int highest = 0;
            for (const Answer& answer : answers) {
                if (answer.allowed) {
                    ++allowed;
                    EXPECT_EQ(answer.reason, "within_limits") << engine;
                    continue;
                }
                EXPECT_EQ(answer.reason, "penalty") << engine << " round " << round;
                EXPECT_GT(answer.level, level_before) << engine << " round " << round;
                EXPECT_LE(answer.level, kSteps) << engine;
                highest = std::max(highest, answer.level);
            }
            EXPECT_EQ(allowed, kLimit) << engine << " round " << round;

            // Read the level and the block the round left: a call at the same instant is denied
            // by the block, reads the level and raises nothing.
            PgConnection reader;
            ASSERT_TRUE(reader.connected()) << reader.error_message();
            reader.query("SET ratelimit.test_clock = '" + round_clock(round) + "'");
            PgResult after = reader.query_params(
                "SELECT allowed, reason, penalty_level, retry_after_ms FROM ratelimit.check($1, "
                "$2)",
                {policy.c_str(), subject.c_str()});
            ASSERT_TRUE(after.ok() && after.rows() == 1) << after.error_message();
            EXPECT_EQ(after.value(0, 0), "f") << engine;
            EXPECT_EQ(after.value(0, 1), "penalty") << engine;
            const int level_after = std::stoi(after.value(0, 2));
            EXPECT_EQ(level_after, highest) << engine << " round " << round;
            // The block is the step of the level reached, at least: the window's own wait (to
            // the end of the minute) is 60 s, longer than any step here.
            EXPECT_GE(std::stoll(after.value(0, 3)), level_after * 1000LL) << engine;
            PgResult again =
                reader.query_params("SELECT penalty_level FROM ratelimit.check($1, $2)",
                                    {policy.c_str(), subject.c_str()});
            EXPECT_EQ(std::stoi(again.single_value()), level_after)
                << engine << ": a denial while blocked raised the level";
            level_before = level_after;
            if (level_before >= kSteps)
                break;
        }
        EXPECT_GT(level_before, 0) << engine;
    }
};

TEST_F(PenaltyConcurrencyTest, ConcurrentDenialsOnTheTableEngine) {
    run_engine("table");
}

TEST_F(PenaltyConcurrencyTest, ConcurrentDenialsOnTheUnloggedEngine) {
    run_engine("unlogged");
}

TEST_F(PenaltyConcurrencyTest, ConcurrentDenialsOnTheMemoryEngine) {
    run_engine("memory");
}

}  // namespace
}  // namespace ratelimit_test
