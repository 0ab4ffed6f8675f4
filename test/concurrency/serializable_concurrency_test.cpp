// Distinct keys under SERIALIZABLE: 32 connections, each consuming on its own key, one call per
// serializable transaction, many rounds. Keys never contend with each other, so no engine may
// fail such a transaction with a serialization failure (40001): the table engines' key look-up
// takes no SSI predicate lock (their row write serializes decisions on a key, see
// src/pg/engines/key_state_table.hpp), and the memory engine uses no table at all. Every committed
// decision is exact: the k-th committed call on a key is allowed iff k <= limit, and reports
// limit - k remaining (0 once denied).
//
// Every connection freezes the decision clock (ratelimit.test_clock) in the year 2100, so the
// window never ends during the test; keys carry a run-unique part because the memory engine's
// store outlives the extension.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
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
constexpr int kRounds = 150;
// Below the number of rounds, so that every key sees allowed and denied decisions.
constexpr int kLimit = 100;
constexpr char kFrozenClock[] = "2100-01-01 00:30:00+00";

struct ClientOutcome {
    int committed = 0;
    int serialization_failures = 0;
    std::string mismatch;  // the first inexact decision, if any
};

// Runs the rounds on `engine`; returns each client's outcome.
std::vector<ClientOutcome> run_serializable_rounds(const char* engine, const std::string& prefix) {
    std::vector<ClientOutcome> outcomes(kClients);
    const std::vector<std::string> failures = run_parallel_clients(
        kClients,
        [](int, PgConnection& conn) {
            conn.query(std::string("SET ratelimit.test_clock = '") + kFrozenClock + "'");
        },
        [&](int client, PgConnection& conn) {
            const std::string key = prefix + ":" + std::to_string(client);
            const std::string limit = std::to_string(kLimit);
            ClientOutcome& outcome = outcomes[client];
            for (int round = 0; round < kRounds; ++round) {
                conn.query("BEGIN ISOLATION LEVEL SERIALIZABLE");
                PgResult call = conn.exec_params(
                    "SELECT allowed, remaining FROM ratelimit.consume($1::text, $2::integer,"
                    " '1 hour', 1, 'fixed_window', $3::text)",
                    {key.c_str(), limit.c_str(), engine});
                if (!call.ok()) {
                    conn.exec("ROLLBACK");
                    if (call.sqlstate() != "40001")
                        throw std::runtime_error("consume: " + call.describe());
                    ++outcome.serialization_failures;
                    continue;
                }
                PgResult commit = conn.exec("COMMIT");
                if (!commit.ok()) {
                    conn.exec("ROLLBACK");
                    if (commit.sqlstate() != "40001")
                        throw std::runtime_error("COMMIT: " + commit.describe());
                    ++outcome.serialization_failures;
                    continue;
                }
                const int k = ++outcome.committed;
                const bool allowed = call.value(0, 0) == "t";
                const long long remaining = std::stoll(call.value(0, 1));
                const long long expected_remaining = std::max(kLimit - k, 0);
                if (outcome.mismatch.empty() &&
                    (allowed != (k <= kLimit) || remaining != expected_remaining)) {
                    outcome.mismatch = "committed call " + std::to_string(k) + ": allowed " +
                                       call.value(0, 0) + ", remaining " + call.value(0, 1) +
                                       " (expected remaining " +
                                       std::to_string(expected_remaining) + ")";
                }
            }
        });
    if (!failures.empty())
        throw std::runtime_error(join_lines(failures));
    return outcomes;
}

class SerializableDistinctKeysTest : public FreshExtensionTest,
                                     public ::testing::WithParamInterface<const char*> {};

TEST_P(SerializableDistinctKeysTest, NoSerializationFailureAndExactDecisions) {
    const char* engine = GetParam();
    const std::string prefix = std::string("serializable-") + engine + "-" + run_unique_hex();
    std::vector<ClientOutcome> outcomes;
    try {
        outcomes = run_serializable_rounds(engine, prefix);
    } catch (const std::exception& e) {
        FAIL() << e.what();
    }

    int committed = 0;
    int serialization_failures = 0;
    setup_.query(std::string("SET ratelimit.test_clock = '") + kFrozenClock + "'");
    for (int client = 0; client < kClients; ++client) {
        const ClientOutcome& outcome = outcomes[client];
        committed += outcome.committed;
        serialization_failures += outcome.serialization_failures;
        EXPECT_TRUE(outcome.mismatch.empty()) << "client " << client << ": " << outcome.mismatch;
        // What the key holds is what its committed calls took, and no more.
        const std::string key = prefix + ":" + std::to_string(client);
        const std::string limit = std::to_string(kLimit);
        PgResult remaining = setup_.query_params(
            "SELECT remaining FROM ratelimit.peek($1::text, $2::integer, '1 hour', 1,"
            " 'fixed_window', $3::text)",
            {key.c_str(), limit.c_str(), engine});
        EXPECT_EQ(std::to_string(std::max(kLimit - outcome.committed, 0)), remaining.single_value())
            << "client " << client;
    }
    const int transactions = kClients * kRounds;
    std::printf("[ serializable ] %s engine: %d of %d transactions failed with 40001 (%.2f %%)\n",
                engine, serialization_failures, transactions,
                100.0 * serialization_failures / transactions);
    EXPECT_EQ(serialization_failures, 0);
    EXPECT_EQ(committed + serialization_failures, transactions);
}

INSTANTIATE_TEST_SUITE_P(Engines, SerializableDistinctKeysTest,
                         ::testing::Values("table", "unlogged", "memory"));

}  // namespace
}  // namespace ratelimit_test
