// Declared limiters under real concurrency: many backends call the app's function declared over
// consume (keyed by an argument, on the table and memory engines) or over a policy (keyed by the
// JWT's sub), and exactly the limit of them is allowed, every call answered once.
#include <gtest/gtest.h>

#include <atomic>
#include <string>
#include <vector>

#include "fresh_extension_fixture.hpp"
#include "parallel_clients.hpp"
#include "pg_connection.hpp"

namespace ratelimit_test {
namespace {

class DeclaredLimitersConcurrency : public FreshExtensionTest {};

// CLIENTS backends each make CALLS calls of `call` (one boolean: allowed); returns the allowed.
int allowed_calls(int clients, int calls, const std::string& setup, const std::string& call,
                  std::vector<std::string>& failures) {
    std::atomic<int> allowed{0};
    failures = run_parallel_clients(
        clients,
        [&](int, PgConnection& conn) {
            if (!setup.empty())
                conn.query(setup);
        },
        [&](int, PgConnection& conn) {
            for (int i = 0; i < calls; ++i) {
                if (conn.query(call).single_bool())
                    allowed.fetch_add(1);
            }
        });
    return allowed.load();
}

TEST_F(DeclaredLimitersConcurrency, KeyedByAnArgumentOnEachEngineAllowsExactlyTheLimit) {
    for (const std::string engine : {"table", "unlogged", "memory"}) {
        const std::string name = "declared_" + engine;
        scalar("SELECT ratelimit.declare_limiter('" + name +
               "', ARRAY['p_user text', 'p_max integer DEFAULT 25'], p_key => "
               "ARRAY['arg:p_user'], p_limit_argument => 'p_max', p_period => '1 hour', "
               "p_engine => '" +
               engine + "', p_roles => ARRAY['PUBLIC'])::text");
        std::vector<std::string> failures;
        const int allowed =
            allowed_calls(32, 4, "", "SELECT " + name + "('racer-" + engine + "')", failures);
        ASSERT_TRUE(failures.empty()) << join_lines(failures);
        EXPECT_EQ(allowed, 25) << engine;
        // The key's counter holds the 25 allowed calls, no more: a peek has nothing left.
        EXPECT_EQ(scalar("SELECT remaining FROM ratelimit.peek('public." + name + ":racer-" +
                         engine + "', 25, '1 hour', p_engine => '" + engine + "')"),
                  "0")
            << engine;
    }
}

TEST_F(DeclaredLimitersConcurrency, OverAPolicyKeyedByTheJwtSubAllowsExactlyTheLimit) {
    setup_.query(
        "INSERT INTO ratelimit.policies (name, \"limit\", period) "
        "VALUES ('declared.race', 40, '1 hour')");
    scalar(
        "SELECT ratelimit.declare_limiter('declared_race', p_policy => 'declared.race', "
        "p_roles => ARRAY['PUBLIC'])::text");
    std::vector<std::string> failures;
    const int allowed = allowed_calls(
        32, 4, "SET request.jwt.claims = '{\"sub\":\"declared-racer\",\"role\":\"authenticated\"}'",
        "SELECT declared_race()", failures);
    ASSERT_TRUE(failures.empty()) << join_lines(failures);
    EXPECT_EQ(allowed, 40);
}

}  // namespace
}  // namespace ratelimit_test
