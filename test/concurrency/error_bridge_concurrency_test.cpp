// The C++/PostgreSQL error bridge (src/pg/bridge/guard.hpp) under real connections: a PostgreSQL
// ERROR raised inside the extension's SPI call, and the extension's own argument errors, must
// reach the client with their SQLSTATE, leave the backend usable, and write nothing.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "fresh_extension_fixture.hpp"
#include "parallel_clients.hpp"
#include "pg_connection.hpp"

namespace ratelimit_test {
namespace {

constexpr char kUser[] = "3b0e9a52-1c7d-4f6e-8a2b-5d4c3b2a1f00";

class ErrorBridgeConcurrency : public FreshExtensionTest {
  protected:
    std::string call_count() {
        return scalar(
            "SELECT call_count FROM rpc_rate_limits WHERE user_id = $1::uuid"
            " AND rpc_name = 'x'",
            {kUser});
    }

    // A holds the row lock in an open transaction; B, limited by `timeout_setting`, waits for
    // it inside the extension's SPI INSERT until PostgreSQL raises `expected_sqlstate` there.
    void expect_interrupted_wait_is_reported_and_harmless(const std::string& timeout_setting,
                                                          const std::string& expected_sqlstate) {
        const std::string call =
            std::string("SELECT check_rate_limit_for_user('") + kUser + "', 'x', 10, 1)";
        PgConnection a;
        PgConnection b;
        ASSERT_TRUE(a.connected()) << a.error_message();
        ASSERT_TRUE(b.connected()) << b.error_message();
        int b_pid = b.backend_pid();

        a.query("BEGIN");
        EXPECT_TRUE(a.query(call).single_bool());

        b.query(timeout_setting);
        PgResult failed = b.exec(call);
        EXPECT_EQ(failed.status(), PGRES_FATAL_ERROR) << failed.describe();
        EXPECT_EQ(failed.sqlstate(), expected_sqlstate) << failed.describe();

        // The backend survived (same process, no crash restart) and the connection is usable.
        EXPECT_EQ(b.transaction_status(), PQTRANS_IDLE);
        EXPECT_EQ(b.query("SELECT 1").single_value(), "1");
        EXPECT_EQ(b.backend_pid(), b_pid);

        // Nothing is visible before A commits; after, only A's call.
        EXPECT_EQ(scalar("SELECT count(*) FROM rpc_rate_limits"), "0");
        a.query("COMMIT");
        EXPECT_EQ(call_count(), "1");

        // The timeout only had to break the wait; the retry must not depend on machine speed.
        b.query("RESET statement_timeout");
        EXPECT_TRUE(b.query(call).single_bool());
        // The failed call wrote nothing: A's call and B's retry only.
        EXPECT_EQ(call_count(), "2");
    }
};

TEST_F(ErrorBridgeConcurrency, LockTimeoutInsideSpiCallIsReportedAsIs) {
    expect_interrupted_wait_is_reported_and_harmless("SET lock_timeout = '200ms'", "55P03");
}

TEST_F(ErrorBridgeConcurrency, StatementTimeoutInsideSpiCallIsReportedAsIs) {
    expect_interrupted_wait_is_reported_and_harmless("SET statement_timeout = '200ms'", "57014");
}

TEST_F(ErrorBridgeConcurrency, BadArgumentsOnManyConnectionsAtOnce) {
    constexpr int kClients = 16;
    const std::string user = kUser;
    // One slot per client, each written by its own thread only.
    std::vector<std::string> zero_limit_states(kClients);
    std::vector<std::string> zero_limit_messages(kClients);
    std::vector<std::string> null_name_states(kClients);
    std::vector<std::string> null_name_messages(kClients);
    std::vector<int> good_results(kClients, -1);

    std::vector<std::string> failures =
        run_parallel_clients(kClients, nullptr, [&](int client, PgConnection& conn) {
            PgResult zero_limit =
                conn.exec("SELECT check_rate_limit_for_user('" + user + "', 'x', 0, 1)");
            zero_limit_states[client] = zero_limit.sqlstate();
            zero_limit_messages[client] = zero_limit.error_message();

            PgResult null_name =
                conn.exec("SELECT check_rate_limit_for_user('" + user + "', NULL, 10, 1)");
            null_name_states[client] = null_name.sqlstate();
            null_name_messages[client] = null_name.error_message();

            // The limit admits every client's good call, so each must be allowed.
            good_results[client] = conn.query("SELECT check_rate_limit_for_user('" + user +
                                              "', 'x', " + std::to_string(kClients) + ", 1)")
                                       .single_bool();
        });

    ASSERT_TRUE(failures.empty()) << join_lines(failures);
    for (int client = 0; client < kClients; ++client) {
        SCOPED_TRACE("client " + std::to_string(client));
        EXPECT_EQ(zero_limit_states[client], "22023") << zero_limit_messages[client];
        EXPECT_NE(zero_limit_messages[client].find("p_max_calls"), std::string::npos)
            << zero_limit_messages[client];
        EXPECT_EQ(null_name_states[client], "22004") << null_name_messages[client];
        EXPECT_NE(null_name_messages[client].find("p_rpc_name"), std::string::npos)
            << null_name_messages[client];
        EXPECT_EQ(good_results[client], 1);
    }
    // Only the good calls were counted.
    EXPECT_EQ(scalar("SELECT count(*) FROM rpc_rate_limits"), "1");
    EXPECT_EQ(call_count(), "16");
}

}  // namespace
}  // namespace ratelimit_test
