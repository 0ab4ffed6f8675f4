// A policy's limit lookup under real concurrency: 32 backends check one subject while the app's
// table its lookup reads says 10, then 25: exactly 10 calls are allowed under the first, and
// exactly 15 more once the change has committed, each call deciding with the limit committed
// when it began.
#include <gtest/gtest.h>

#include <atomic>
#include <string>
#include <vector>

#include "fresh_extension_fixture.hpp"
#include "parallel_clients.hpp"
#include "pg_connection.hpp"

namespace ratelimit_test {
namespace {

class PolicyLookupsConcurrency : public FreshExtensionTest {
  protected:
    // 32 backends, 3 checks each of the subject; returns how many were allowed.
    int allowed_checks() {
        std::atomic<int> allowed{0};
        std::vector<std::string> failures = run_parallel_clients(
            32, [](int, PgConnection&) {},
            [&](int, PgConnection& conn) {
                for (int i = 0; i < 3; ++i) {
                    if (conn.query("SELECT (ratelimit.check('lookups.race', 'racer')).allowed")
                            .single_bool())
                        allowed.fetch_add(1);
                }
            });
        EXPECT_TRUE(failures.empty()) << join_lines(failures);
        return allowed.load();
    }
};

TEST_F(PolicyLookupsConcurrency, TheLimitFromTheAppsTableIsExactAndItsChangeDecidesTheNextCalls) {
    setup_.query("DROP TABLE IF EXISTS public.race_rates CASCADE");
    setup_.query("CREATE TABLE public.race_rates (subject text PRIMARY KEY, per_hour integer)");
    setup_.query("INSERT INTO public.race_rates VALUES ('racer', 10)");
    setup_.query(
        "CREATE OR REPLACE FUNCTION public.race_rate(p_subject text, p_user uuid) "
        "RETURNS integer LANGUAGE sql STABLE AS "
        "'SELECT per_hour FROM public.race_rates WHERE subject = p_subject'");
    setup_.query(
        "INSERT INTO ratelimit.policies (name, \"limit\", period, limit_lookup) "
        "VALUES ('lookups.race', 1, '1 hour', 'public.race_rate(text,uuid)')");
    EXPECT_EQ(allowed_checks(), 10);
    setup_.query("UPDATE public.race_rates SET per_hour = 25");
    EXPECT_EQ(allowed_checks(), 15);
    EXPECT_EQ(scalar("SELECT (ratelimit.check('lookups.race', 'racer', 0)).remaining"), "0");
}

}  // namespace
}  // namespace ratelimit_test
