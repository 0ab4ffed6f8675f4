// Insert limits and within_limit under real concurrency: 32 backends insert into a table limited
// by limit_inserts, some rolling back, and exactly the limit of rows is committed, every
// rolled-back insert having given its charge back; anon and authenticated backends insert at once
// into a table whose row security policy calls within_limit, and each caller gets exactly the
// policy's limit of rows.
#include <gtest/gtest.h>

#include <atomic>
#include <string>
#include <vector>

#include "fresh_extension_fixture.hpp"
#include "parallel_clients.hpp"
#include "pg_connection.hpp"

namespace ratelimit_test {
namespace {

class InsertLimitsConcurrency : public FreshExtensionTest {};

TEST_F(InsertLimitsConcurrency, ThirtyTwoInsertersCommitExactlyTheLimitAndRollbacksGiveBack) {
    setup_.query("DROP TABLE IF EXISTS public.limited_posts");
    setup_.query("CREATE TABLE public.limited_posts (id serial, owner text NOT NULL)");
    setup_.query(
        "SELECT ratelimit.limit_inserts('public.limited_posts', 40, '1 hour', "
        "ARRAY['column:owner'], p_error_code => 'P0429')");
    std::atomic<int> committed{0};
    std::atomic<int> refused{0};
    std::atomic<int> rolled_back{0};
    std::vector<std::string> failures = run_parallel_clients(
        32, [](int, PgConnection&) {},
        [&](int client, PgConnection& conn) {
            for (int i = 0; i < 4; ++i) {
                // Every other client rolls its first insert back: that charge must come back.
                const bool roll_back = client % 2 == 1 && i == 0;
                conn.query("BEGIN");
                PgResult inserted =
                    conn.exec("INSERT INTO public.limited_posts (owner) VALUES ('racer')");
                if (!inserted.ok()) {
                    if (inserted.sqlstate() != "P0429")
                        throw std::runtime_error("insert: " + inserted.describe());
                    refused.fetch_add(1);
                    conn.query("ROLLBACK");
                    continue;
                }
                if (roll_back) {
                    conn.query("ROLLBACK");
                    rolled_back.fetch_add(1);
                } else {
                    conn.query("COMMIT");
                    committed.fetch_add(1);
                }
            }
        });
    ASSERT_TRUE(failures.empty()) << join_lines(failures);
    // 128 attempts: the 40 allowed are the committed ones plus those rolled back before the
    // limit was reached, whose charges came back and went to later inserts.
    EXPECT_EQ(committed.load(), 40);
    EXPECT_EQ(scalar("SELECT count(*) FROM public.limited_posts"), "40");
    EXPECT_EQ(committed.load() + refused.load() + rolled_back.load(), 128);
}

TEST_F(InsertLimitsConcurrency, WithinLimitInARowSecurityPolicyUnderAnonAndAuthenticated) {
    // Roles of its own, dropped at the end, standing for anon and authenticated: the cluster's
    // other tests see no role this one made.
    setup_.query("DROP TABLE IF EXISTS public.reactions");
    setup_.query("DROP ROLE IF EXISTS race_anon");
    setup_.query("DROP ROLE IF EXISTS race_user");
    setup_.query("CREATE ROLE race_anon NOLOGIN");
    setup_.query("CREATE ROLE race_user NOLOGIN");
    setup_.query("CREATE TABLE public.reactions (id serial, post integer)");
    setup_.query("ALTER TABLE public.reactions ENABLE ROW LEVEL SECURITY");
    setup_.query(
        "INSERT INTO ratelimit.policies (name, \"limit\", period) "
        "VALUES ('race.reactions', 30, '1 hour')");
    setup_.query(
        "CREATE POLICY reactions_rate ON public.reactions FOR INSERT TO race_anon, "
        "race_user WITH CHECK (ratelimit.within_limit('race.reactions'))");
    setup_.query("GRANT USAGE ON SCHEMA public TO race_anon, race_user");
    setup_.query("GRANT INSERT ON public.reactions TO race_anon, race_user");
    setup_.query("GRANT USAGE ON SEQUENCE public.reactions_id_seq TO race_anon, race_user");
    std::atomic<int> inserted{0};
    std::atomic<int> refused{0};
    std::vector<std::string> failures = run_parallel_clients(
        32,
        [](int client, PgConnection& conn) {
            // Half the clients are one signed-in user, half anonymous callers from one address.
            if (client % 2 == 0) {
                conn.query("SET ROLE race_user");
                conn.query(
                    "SET request.jwt.claims = "
                    "'{\"sub\":\"race-user\",\"role\":\"authenticated\"}'");
            } else {
                conn.query("SET ROLE race_anon");
                conn.query("SET request.jwt.claims = '{\"role\":\"anon\"}'");
                conn.query("SET request.headers = '{\"x-forwarded-for\":\"198.51.100.20\"}'");
            }
        },
        [&](int, PgConnection& conn) {
            for (int i = 0; i < 4; ++i) {
                PgResult result = conn.exec("INSERT INTO public.reactions (post) VALUES (1)");
                if (result.ok()) {
                    inserted.fetch_add(1);
                } else if (result.sqlstate() == "42501") {
                    refused.fetch_add(1);
                } else {
                    throw std::runtime_error("insert: " + result.describe());
                }
            }
        });
    ASSERT_TRUE(failures.empty()) << join_lines(failures);
    // 64 attempts each for the user and the address, 30 allowed to each.
    EXPECT_EQ(inserted.load(), 60);
    EXPECT_EQ(refused.load(), 68);
    EXPECT_EQ(scalar("SELECT count(*) FROM public.reactions"), "60");
    setup_.query("DROP TABLE public.reactions");
    setup_.query("DROP OWNED BY race_anon, race_user");
    setup_.query("DROP ROLE race_anon, race_user");
}

}  // namespace
}  // namespace ratelimit_test
