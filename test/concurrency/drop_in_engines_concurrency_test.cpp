// The drop-in functions on the unlogged and memory engines (ratelimit.dropin_engine) under real
// concurrency: the per-RPC check_rate_limit and check_rate_limit_for_user, increment_rate_limit,
// the sliding-window check_rate_limit and check_rate_limit_tiers. Many backends race on one key
// and on many keys, and every engine must give what the apps' tables give
// (rpc_limits_concurrency_test.cpp, endpoint_and_sliding_window_concurrency_test.cpp): exactly
// the limit allowed, the results of one serial order of the calls, every call counted once, and
// the apps' tables left empty.
//
// Every connection sets the engine (the test connections are superusers) and freezes the clock.
// The memory engine's store outlives DROP EXTENSION and is shared by every test and earlier run,
// so the users, RPC names and keys hold a part unique to the run, and each test freezes the
// clock at an hour no earlier test used: check_rate_limit_tiers' 'global' key is the same in
// every call. The hours are centuries ahead of the real clock, by which the memory engine's
// worker expires keys.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <random>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

#include "fresh_extension_fixture.hpp"
#include "parallel_clients.hpp"
#include "pg_connection.hpp"
#include "run_unique.hpp"

namespace ratelimit_test {
namespace {

constexpr int kClients = 64;

// Each drop-in's namespace on the engines (docs/migrating.md).
constexpr char kRpcSpace[] = "drop-in/rpc_rate_limits";
constexpr char kEndpointSpace[] = "drop-in/rate_limits";
constexpr char kBucketSpace[] = "drop-in/rate_limit_buckets";

// The frozen clock sits half an hour into an hour, so that increment_rate_limit's aligned hourly
// window has exactly 1800 s left; the sliding windows' calls all fall in one whole second, so a
// denied call waits exactly its window.
constexpr int kSecondsLeftInHour = 1800;

// An hour after every hour an earlier test or run froze: 8 per second of the real clock, so
// later runs take later hours (the count wraps after some 58 days, some 4,500 years ahead).
int unique_hour() {
    static std::atomic<int> sequence{0};
    const long long seconds = std::chrono::duration_cast<std::chrono::seconds>(
                                  std::chrono::system_clock::now().time_since_epoch())
                                  .count();
    return static_cast<int>(seconds % 5000000 * 8 + sequence.fetch_add(1) % 8);
}

// One increment_rate_limit call's jsonb result.
struct IncrementResult {
    bool returned = false;
    std::string allowed;
    int current = -1;
    int limit = -1;
    int retry_after = -1;
};

IncrementResult increment(PgConnection& conn, const std::string& user, const std::string& endpoint,
                          int limit, int batch) {
    const std::string limit_text = std::to_string(limit);
    const std::string batch_text = std::to_string(batch);
    PgResult result = conn.query_params(
        "SELECT r->>'allowed', (r->>'current')::integer, (r->>'limit')::integer,"
        " (r->>'retryAfter')::integer"
        " FROM increment_rate_limit($1::uuid, $2::text, $3::integer, 3600, $4::integer) AS r",
        {user.c_str(), endpoint.c_str(), limit_text.c_str(), batch_text.c_str()});
    if (result.rows() != 1 || result.columns() != 4) {
        throw std::runtime_error("increment_rate_limit: " + result.describe());
    }
    for (int column = 0; column < 4; ++column) {
        if (result.is_null(0, column)) {
            throw std::runtime_error("increment_rate_limit: a NULL field in its jsonb result");
        }
    }
    return IncrementResult{true, result.value(0, 0), std::stoi(result.value(0, 1)),
                           std::stoi(result.value(0, 2)), std::stoi(result.value(0, 3))};
}

// One sliding-window check_rate_limit call's row.
struct BucketResult {
    bool returned = false;
    bool allowed = false;
    int current_count = -1;
    int retry_after = -1;
};

BucketResult check_key(PgConnection& conn, const std::string& key, int limit) {
    const std::string limit_text = std::to_string(limit);
    // Positional, as the app calls it; in its own schema, beside the per-RPC one in public.
    PgResult result = conn.query_params(
        "SELECT allowed, current_count, retry_after"
        " FROM sliding_window.check_rate_limit($1::text, $2::integer, 3600)",
        {key.c_str(), limit_text.c_str()});
    if (result.rows() != 1 || result.columns() != 3 || result.is_null(0, 0) ||
        result.is_null(0, 1) || result.is_null(0, 2)) {
        throw std::runtime_error("check_rate_limit(" + key + "): " + result.describe());
    }
    return BucketResult{true, result.value(0, 0) == "t", std::stoi(result.value(0, 1)),
                        std::stoi(result.value(0, 2))};
}

bool rpc_for_user(PgConnection& conn, const std::string& user, const std::string& rpc,
                  int max_calls, int window_minutes) {
    const std::string max_text = std::to_string(max_calls);
    const std::string window_text = std::to_string(window_minutes);
    return conn
        .query_params(
            "SELECT check_rate_limit_for_user($1::uuid, $2::text, $3::integer,"
            " $4::integer)",
            {user.c_str(), rpc.c_str(), max_text.c_str(), window_text.c_str()})
        .single_bool();
}

// An array literal of items that need no quoting.
std::string text_array(const std::vector<std::string>& items) {
    std::string literal = "{";
    for (const std::string& item : items) {
        literal += (literal.size() == 1 ? "" : ",") + item;
    }
    return literal + "}";
}

// Every call's value once, in one serial order: exactly step, 2 * step, ..., calls * step.
std::set<int> multiples(int calls, int step) {
    std::set<int> values;
    for (int call = 1; call <= calls; ++call) {
        values.insert(call * step);
    }
    return values;
}

// Every test: a fresh extension, a run-unique token for its users and keys, a run-unique frozen
// hour, and the setup connection on the engine too (its follow-up calls read the counts back).
class DropInEngineConcurrency : public FreshExtensionTest,
                                public ::testing::WithParamInterface<const char*> {
  protected:
    void SetUp() override {
        FreshExtensionTest::SetUp();
        if (HasFatalFailure()) {
            return;
        }
        if (is_memory()) {
            PgResult stats = setup_.exec("SELECT capacity FROM ratelimit.memory_stats");
            ASSERT_TRUE(stats.ok()) << "the memory engine needs shared_preload_libraries = "
                                       "'ratelimit': "
                                    << stats.describe();
        }
        token_ = run_unique_hex();
        const std::string hour = std::to_string(unique_hour());
        clock_ = setup_
                     .query_params(
                         "SELECT to_char((timestamptz '2100-01-01 00:30:00+00'"
                         " + make_interval(hours => $1::integer)) AT TIME ZONE 'UTC',"
                         " 'YYYY-MM-DD HH24:MI:SS') || '+00'",
                         {hour.c_str()})
                     .single_value();
        ASSERT_NO_THROW(prepare(setup_));
    }

    // The apps' tables and the logged key_state never see a call on these engines; the unlogged
    // key_state sees none on memory.
    void TearDown() override {
        if (!setup_.connected()) {
            return;
        }
        EXPECT_EQ(scalar("SELECT (SELECT count(*) FROM rpc_rate_limits)"
                         " + (SELECT count(*) FROM rate_limits)"
                         " + (SELECT count(*) FROM sliding_window.rate_limit_buckets)"),
                  "0")
            << "the apps' tables were written on " << GetParam();
        EXPECT_EQ(scalar("SELECT count(*) FROM ratelimit.key_state WHERE policy LIKE 'drop-in/%'"),
                  "0");
        if (is_memory()) {
            EXPECT_EQ(scalar("SELECT count(*) FROM ratelimit.key_state_unlogged"), "0");
        }
    }

    bool is_memory() const { return std::string(GetParam()) == "memory"; }

    // What every connection runs first: the engine and the frozen clock, both checked.
    void prepare(PgConnection& conn) const {
        conn.query(std::string("SET ratelimit.dropin_engine = '") + GetParam() + "'");
        conn.query("SET ratelimit.test_clock = '" + clock_ + "'");
        if (!conn.query_params("SELECT current_setting('ratelimit.dropin_engine') = $1"
                               " AND ratelimit.clock_now() = $2::timestamptz",
                               {GetParam(), clock_.c_str()})
                 .single_bool()) {
            throw std::runtime_error("the engine or the frozen clock did not take");
        }
    }

    // A user id of this run.
    std::string user(int n) const {
        char id[40];
        std::snprintf(id, sizeof id, "%.8s-%.4s-%.4s-0000-%012d", token_.c_str(),
                      token_.c_str() + 8, token_.c_str() + 12, n);
        return id;
    }
    std::string name(const std::string& base) const { return base + "-" + token_; }

    // The unlogged engine's rows of a namespace whose keys start with `key_prefix`: how many,
    // and the least and greatest count (a window's amount, or a sliding window's log summed).
    std::string unlogged_rows(const char* space, const std::string& key_prefix) {
        PgResult rows = setup_.query_params(
            "SELECT count(*) || ' ' || coalesce(min(n), -1) || ' ' || coalesce(max(n), -1)"
            " FROM (SELECT CASE WHEN algorithm = 3 THEN (SELECT sum(log[i])"
            "   FROM generate_subscripts(log, 1) AS i WHERE i % 2 = 0) ELSE amount END AS n"
            " FROM ratelimit.key_state_unlogged WHERE policy = $1 AND starts_with(key, $2)) s",
            {space, key_prefix.c_str()});
        return rows.single_value();
    }

    std::string token_;
    std::string clock_;
};

std::string engine_name(const ::testing::TestParamInfo<const char*>& info) {
    return info.param;
}

// ---- the per-RPC limits: check_rate_limit(p_rpc_name, ...), check_rate_limit_for_user -------

// 64 callers of one user and RPC (half with PostgREST's claim set, half with the older single
// claim setting), limit 10: exactly 10 allowed, and all 64 counted in one count.
TEST_P(DropInEngineConcurrency, RpcSixtyFourCallsOfOneUserAllowExactlyTenAndCountAll) {
    const std::string caller = user(1);
    const std::string rpc = name("complete-game");
    std::atomic<int> allowed{0};
    std::atomic<int> denied{0};

    std::vector<std::string> failures = run_parallel_clients(
        kClients,
        [&](int client, PgConnection& conn) {
            prepare(conn);
            if (client % 2 == 0) {
                conn.query("SET request.jwt.claims = '{\"sub\":\"" + caller +
                           "\",\"role\":\"authenticated\"}'");
            } else {
                conn.query("SET request.jwt.claim.sub = '" + caller + "'");
            }
        },
        [&](int, PgConnection& conn) {
            bool ok = conn.query_params(
                              "SELECT check_rate_limit(p_rpc_name => $1::text,"
                              " p_max_calls => 10, p_window_minutes => 1)",
                              {rpc.c_str()})
                          .single_bool();
            (ok ? allowed : denied).fetch_add(1);
        });

    ASSERT_TRUE(failures.empty()) << join_lines(failures);
    EXPECT_EQ(allowed.load(), 10);
    EXPECT_EQ(denied.load(), kClients - 10);
    if (!is_memory()) {
        // One row, not one per racing first call, and no call lost.
        EXPECT_EQ(unlogged_rows(kRpcSpace, caller), "1 64 64");
    }
    // The count is exactly 64, read back by the same count's next calls (check_rate_limit_for_user
    // counts in it too): the 65th fits a limit of 65, the 66th does not.
    EXPECT_TRUE(rpc_for_user(setup_, caller, rpc, 65, 1));
    EXPECT_FALSE(rpc_for_user(setup_, caller, rpc, 65, 1));
}

// 25 connections x 500 users x 2 passes in shuffled orders, limit 10: every user allowed exactly
// 10 of its 50 calls, and every user's count exactly 50.
TEST_P(DropInEngineConcurrency, RpcFiveHundredUsersTimesFiftyCallsFromTwentyFiveConnections) {
    constexpr int kRpcClients = 25;
    constexpr int kUsers = 500;
    constexpr int kPasses = 2;
    constexpr int kMaxCalls = 10;
    const std::string rpc = name("send-dm");
    std::vector<std::string> user_ids;
    for (int n = 0; n < kUsers; ++n) {
        user_ids.push_back(user(n));
    }
    // Written by every client, so atomic; read once the threads are joined.
    std::vector<std::atomic<int>> allowed_per_user(kUsers);
    for (std::atomic<int>& allowed : allowed_per_user) {
        allowed.store(0);
    }

    std::vector<std::string> failures = run_parallel_clients(
        kRpcClients, [&](int, PgConnection& conn) { prepare(conn); },
        [&](int client, PgConnection& conn) {
            // Seeded per client, so a failure reruns the same way.
            std::mt19937 random(static_cast<unsigned>(client));
            std::vector<int> order(kUsers);
            for (int n = 0; n < kUsers; ++n) {
                order[n] = n;
            }
            for (int pass = 0; pass < kPasses; ++pass) {
                std::shuffle(order.begin(), order.end(), random);
                for (int n : order) {
                    if (rpc_for_user(conn, user_ids[n], rpc, kMaxCalls, 60)) {
                        allowed_per_user[n].fetch_add(1);
                    }
                }
            }
        });
    ASSERT_TRUE(failures.empty()) << join_lines(failures);

    std::string wrong_users;
    for (int n = 0; n < kUsers; ++n) {
        if (allowed_per_user[n].load() != kMaxCalls) {
            wrong_users +=
                user_ids[n] + " allowed " + std::to_string(allowed_per_user[n].load()) + " times\n";
        }
    }
    EXPECT_TRUE(wrong_users.empty()) << wrong_users;
    if (!is_memory()) {
        EXPECT_EQ(unlogged_rows(kRpcSpace, token_.substr(0, 8)), "500 50 50");
    }
    // Every user's count is exactly 50: a limit of 51 admits one more call, then none.
    const std::string max_calls = std::to_string(kRpcClients * kPasses + 1);
    for (bool expected : {true, false}) {
        std::string wrong;
        for (const std::string& id : user_ids) {
            if (rpc_for_user(setup_, id, rpc, kRpcClients * kPasses + 1, 60) != expected) {
                wrong += id + "\n";
            }
        }
        EXPECT_TRUE(wrong.empty()) << "the call of limit " << max_calls << " was not "
                                   << (expected ? "allowed" : "denied") << " for:\n"
                                   << wrong;
    }
}

// ---- the hourly endpoint limits: increment_rate_limit ------------------------------------------

class DropInEngineEndpoints : public DropInEngineConcurrency {
  protected:
    // 64 connections, one increment_rate_limit call of `batch` each on one user's endpoint: the
    // calls are serialized, so the counters they saw are exactly batch, 2 * batch, ...,
    // 64 * batch, a call is allowed iff its counter fits, and the count ends at 64 * batch.
    void race_and_check(int limit, int batch, int expected_allowed) {
        const std::string caller = user(7);
        const std::string endpoint = name("generate-image");
        std::vector<IncrementResult> results(kClients);  // one slot per client
        std::vector<std::string> failures = run_parallel_clients(
            kClients, [&](int, PgConnection& conn) { prepare(conn); },
            [&](int client, PgConnection& conn) {
                results[client] = increment(conn, caller, endpoint, limit, batch);
            });
        ASSERT_TRUE(failures.empty()) << join_lines(failures);

        std::set<int> seen;
        int allowed = 0;
        for (int client = 0; client < kClients; ++client) {
            const IncrementResult& r = results[client];
            SCOPED_TRACE("client " + std::to_string(client));
            ASSERT_TRUE(r.returned);
            seen.insert(r.current);
            EXPECT_EQ(r.limit, limit);
            if (r.current <= limit) {
                ++allowed;
                EXPECT_EQ(r.allowed, "true") << "current " << r.current;
                EXPECT_EQ(r.retry_after, 0);
            } else {
                EXPECT_EQ(r.allowed, "false") << "current " << r.current;
                EXPECT_EQ(r.retry_after, kSecondsLeftInHour);
            }
        }
        EXPECT_EQ(allowed, expected_allowed);
        EXPECT_EQ(seen, multiples(kClients, batch));
        if (!is_memory()) {
            const std::string total = std::to_string(kClients * batch);
            EXPECT_EQ(unlogged_rows(kEndpointSpace, caller), "1 " + total + " " + total);
        }
        // The next call counts on from exactly 64 * batch, in the same hourly window.
        const IncrementResult next = increment(setup_, caller, endpoint, 1000000, 1);
        EXPECT_EQ(next.current, kClients * batch + 1);
        EXPECT_EQ(next.allowed, "true");
    }
};

TEST_P(DropInEngineEndpoints, SixtyFourCallsWithLimitTenAllowExactlyTenAndCountAll) {
    race_and_check(10, 1, 10);
}

TEST_P(DropInEngineEndpoints, SixtyFourBatchesOfThreeWithLimitFiftyAllowSixteen) {
    // 16 * 3 = 48 fits in 50; the 17th batch would make 51.
    race_and_check(50, 3, 16);
}

// 64 connections, each one call in its own transaction, every other one rolled back. The
// unlogged engine is transactional: the committed calls saw exactly 1..32 (a rolled-back call's
// count is undone, and the next call waits for it and counts from before it), exactly the first
// 10 of them allowed, and the count ends at 32. The memory engine is not: every call counts,
// they saw exactly 1..64, and the count ends at 64.
TEST_P(DropInEngineEndpoints, RolledBackCallsAreUndoneOnUnloggedAndKeptOnMemory) {
    constexpr int kLimit = 10;
    const std::string caller = user(8);
    const std::string endpoint = name("rollback");
    std::vector<IncrementResult> results(kClients);  // one slot per client
    std::vector<std::string> failures = run_parallel_clients(
        kClients, [&](int, PgConnection& conn) { prepare(conn); },
        [&](int client, PgConnection& conn) {
            conn.query("BEGIN");
            results[client] = increment(conn, caller, endpoint, kLimit, 1);
            conn.query(client % 2 == 0 ? "COMMIT" : "ROLLBACK");
        });
    ASSERT_TRUE(failures.empty()) << join_lines(failures);

    std::set<int> committed_seen;
    std::multiset<int> all_seen;
    int committed_allowed = 0;
    for (int client = 0; client < kClients; ++client) {
        const IncrementResult& r = results[client];
        SCOPED_TRACE("client " + std::to_string(client));
        ASSERT_TRUE(r.returned);
        EXPECT_EQ(r.allowed, r.current <= kLimit ? "true" : "false") << "current " << r.current;
        all_seen.insert(r.current);
        if (client % 2 == 0) {
            committed_seen.insert(r.current);
            committed_allowed += r.allowed == "true";
        }
    }
    const int committed = kClients / 2;
    int expected_count = kClients;
    if (is_memory()) {
        const std::set<int> every = multiples(kClients, 1);
        EXPECT_EQ(all_seen, std::multiset<int>(every.begin(), every.end()));
    } else {
        expected_count = committed;
        EXPECT_EQ(committed_seen, multiples(committed, 1));
        EXPECT_EQ(committed_allowed, kLimit);
        // A rolled-back call saw one more than the calls committed before it.
        for (int value : all_seen) {
            EXPECT_GE(value, 1);
            EXPECT_LE(value, committed + 1);
        }
        EXPECT_EQ(unlogged_rows(kEndpointSpace, caller),
                  "1 " + std::to_string(committed) + " " + std::to_string(committed));
    }
    EXPECT_EQ(increment(setup_, caller, endpoint, 1000000, 1).current, expected_count + 1);
}

// 32 connections x 500 users in shuffled orders, one call each, limit 10: every user's calls
// saw exactly 1..32, one serial order per user, and exactly 10 of them were allowed.
TEST_P(DropInEngineEndpoints, ThirtyTwoConnectionsOnFiveHundredUsersKeepEveryCountExact) {
    constexpr int kEndpointClients = 32;
    constexpr int kUsers = 500;
    constexpr int kLimit = 10;
    const std::string endpoint = name("sync-push");
    std::vector<std::string> user_ids;
    for (int n = 0; n < kUsers; ++n) {
        user_ids.push_back(user(1000 + n));
    }
    // Bit c of a user's mask: some call saw counter c. Written by every client, so atomic.
    std::vector<std::atomic<std::uint64_t>> seen(kUsers);
    for (std::atomic<std::uint64_t>& mask : seen) {
        mask.store(0);
    }
    std::atomic<int> repeated{0};
    std::atomic<int> wrong_results{0};

    std::vector<std::string> failures = run_parallel_clients(
        kEndpointClients, [&](int, PgConnection& conn) { prepare(conn); },
        [&](int client, PgConnection& conn) {
            std::mt19937 random(static_cast<unsigned>(client));
            std::vector<int> order(kUsers);
            for (int n = 0; n < kUsers; ++n) {
                order[n] = n;
            }
            std::shuffle(order.begin(), order.end(), random);
            for (int n : order) {
                const IncrementResult r = increment(conn, user_ids[n], endpoint, kLimit, 1);
                if (r.current < 1 || r.current > kEndpointClients ||
                    r.allowed != (r.current <= kLimit ? "true" : "false") ||
                    r.retry_after != (r.current <= kLimit ? 0 : kSecondsLeftInHour)) {
                    wrong_results.fetch_add(1);
                    continue;
                }
                const std::uint64_t bit = std::uint64_t{1} << r.current;
                if (seen[n].fetch_or(bit) & bit) {
                    repeated.fetch_add(1);
                }
            }
        });
    ASSERT_TRUE(failures.empty()) << join_lines(failures);

    EXPECT_EQ(wrong_results.load(), 0);
    EXPECT_EQ(repeated.load(), 0);
    const std::uint64_t every = ((std::uint64_t{1} << (kEndpointClients + 1)) - 1) & ~1ULL;
    std::string wrong_users;
    for (int n = 0; n < kUsers; ++n) {
        if (seen[n].load() != every) {
            wrong_users += user_ids[n] + "\n";
        }
    }
    EXPECT_TRUE(wrong_users.empty()) << "users whose calls did not see exactly 1..32:\n"
                                     << wrong_users;
    if (!is_memory()) {
        EXPECT_EQ(unlogged_rows(kEndpointSpace, token_.substr(0, 8)), "500 32 32");
    }
    std::string wrong_counts;
    for (const std::string& id : user_ids) {
        if (increment(setup_, id, endpoint, 1000000, 1).current != kEndpointClients + 1) {
            wrong_counts += id + "\n";
        }
    }
    EXPECT_TRUE(wrong_counts.empty()) << "users whose count was not 32:\n" << wrong_counts;
}

// ---- the sliding windows: check_rate_limit(p_key, ...), check_rate_limit_tiers ---------------

class DropInEngineSlidingWindow : public DropInEngineConcurrency {
  protected:
    // 64 connections x 5 calls on one key: exactly `limit` allowed, which saw 1..limit; every
    // denied call saw the full count and waits the whole window; only allowed calls counted.
    void one_key(int limit) {
        constexpr int kCallsEach = 5;
        const std::string key = "ip:" + name("hot-" + std::to_string(limit));
        // kCallsEach slots per client, each written by its own client only.
        std::vector<BucketResult> results(kClients * kCallsEach);
        std::vector<std::string> failures = run_parallel_clients(
            kClients, [&](int, PgConnection& conn) { prepare(conn); },
            [&](int client, PgConnection& conn) {
                for (int call = 0; call < kCallsEach; ++call) {
                    results[client * kCallsEach + call] = check_key(conn, key, limit);
                }
            });
        ASSERT_TRUE(failures.empty()) << join_lines(failures);

        std::multiset<int> allowed_counts;
        std::string wrong_denials;
        for (std::size_t i = 0; i < results.size(); ++i) {
            const BucketResult& r = results[i];
            ASSERT_TRUE(r.returned);
            if (r.allowed) {
                allowed_counts.insert(r.current_count);
                EXPECT_EQ(r.retry_after, 0) << "call " << i;
            } else if (r.current_count != limit || r.retry_after != 3600) {
                wrong_denials += "call " + std::to_string(i) + ": current_count " +
                                 std::to_string(r.current_count) + ", retry_after " +
                                 std::to_string(r.retry_after) + "\n";
            }
        }
        const std::set<int> expected = multiples(limit, 1);
        EXPECT_EQ(allowed_counts, std::multiset<int>(expected.begin(), expected.end()));
        EXPECT_TRUE(wrong_denials.empty()) << wrong_denials;
        if (!is_memory()) {
            const std::string n = std::to_string(limit);
            EXPECT_EQ(unlogged_rows(kBucketSpace, key), "1 " + n + " " + n);
        }
        // The count is exactly `limit`: one more fits a limit one higher, then nothing does.
        const BucketResult more = check_key(setup_, key, limit + 1);
        EXPECT_TRUE(more.allowed);
        EXPECT_EQ(more.current_count, limit + 1);
        const BucketResult full = check_key(setup_, key, limit + 1);
        EXPECT_FALSE(full.allowed);
        EXPECT_EQ(full.current_count, limit + 1);
        EXPECT_EQ(full.retry_after, 3600);
    }
};

TEST_P(DropInEngineSlidingWindow, ThreeHundredTwentyCallsOnOneKeyAllowExactlyFive) {
    one_key(5);
}

// A log longer than the memory engine keeps inside a key's slot.
TEST_P(DropInEngineSlidingWindow, ThreeHundredTwentyCallsOnOneKeyAllowExactlyAHundred) {
    one_key(100);
}

// 64 connections each calling 500 keys once, in shuffled orders, limit 7: every key allowed
// exactly 7 of its 64 calls, and every key's count is exactly 7.
TEST_P(DropInEngineSlidingWindow, SixtyFourConnectionsEachCallingFiveHundredKeys) {
    constexpr int kKeys = 500;
    constexpr int kLimit = 7;
    std::vector<std::string> keys;
    for (int n = 0; n < kKeys; ++n) {
        keys.push_back(name("k") + ":" + std::to_string(n));
    }
    // Written by every client, so atomic; read once the threads are joined.
    std::vector<std::atomic<int>> calls_per_key(kKeys);
    std::vector<std::atomic<int>> allowed_per_key(kKeys);
    for (int n = 0; n < kKeys; ++n) {
        calls_per_key[n].store(0);
        allowed_per_key[n].store(0);
    }
    std::atomic<int> wrong_results{0};

    std::vector<std::string> failures = run_parallel_clients(
        kClients, [&](int, PgConnection& conn) { prepare(conn); },
        [&](int client, PgConnection& conn) {
            std::mt19937 random(static_cast<unsigned>(client));
            std::vector<int> order(kKeys);
            for (int n = 0; n < kKeys; ++n) {
                order[n] = n;
            }
            std::shuffle(order.begin(), order.end(), random);
            for (int n : order) {
                const BucketResult r = check_key(conn, keys[n], kLimit);
                calls_per_key[n].fetch_add(1);
                if (r.allowed) {
                    allowed_per_key[n].fetch_add(1);
                    if (r.retry_after != 0 || r.current_count < 1 || r.current_count > kLimit) {
                        wrong_results.fetch_add(1);
                    }
                } else if (r.current_count != kLimit || r.retry_after != 3600) {
                    wrong_results.fetch_add(1);
                }
            }
        });
    ASSERT_TRUE(failures.empty()) << join_lines(failures);

    std::string wrong_keys;
    for (int n = 0; n < kKeys; ++n) {
        if (calls_per_key[n].load() != kClients || allowed_per_key[n].load() != kLimit) {
            wrong_keys += keys[n] + ": " + std::to_string(calls_per_key[n].load()) + " calls, " +
                          std::to_string(allowed_per_key[n].load()) + " allowed\n";
        }
    }
    EXPECT_TRUE(wrong_keys.empty()) << wrong_keys;
    EXPECT_EQ(wrong_results.load(), 0);
    if (!is_memory()) {
        EXPECT_EQ(unlogged_rows(kBucketSpace, name("k") + ":"), "500 7 7");
    }
    // Every key's count is exactly 7: a call under a limit of 8 is allowed and sees 8.
    const std::string key_array = text_array(keys);
    PgResult next = setup_.query_params(
        "SELECT count(*) FILTER (WHERE c.allowed AND c.current_count = 8), count(*)"
        " FROM unnest($1::text[]) AS k,"
        " LATERAL sliding_window.check_rate_limit(p_key => k, p_limit => 8,"
        " p_window_seconds => 3600) AS c",
        {key_array.c_str()});
    ASSERT_EQ(next.rows(), 1);
    EXPECT_EQ(next.value(0, 0) + " of " + next.value(0, 1), "500 of 500");
}

// One e-mail from 64 IPs at once: exactly 3 allowed (the e-mail tier's default limit), every
// other call denied by the e-mail tier, and a denied call charged no tier: the global tier and
// the e-mail counted 3, and only the allowed IPs were counted, once each.
TEST_P(DropInEngineSlidingWindow, TiersOneEmailFromSixtyFourIpsAllowThreeAndChargeNothingElse) {
    constexpr int kEmailLimit = 3;
    const std::string email = name("victim") + "@example.com";
    struct TierResult {
        bool returned = false;
        bool allowed = false;
        bool tier_null = false;
        std::string denied_tier;
        int retry_after = -1;
        int global_count = -1;
        int email_count = -1;
    };
    std::vector<TierResult> results(kClients);  // one slot per client
    auto ip_of = [](int client) { return "10.9." + std::to_string(client) + ".1"; };

    std::vector<std::string> failures = run_parallel_clients(
        kClients, [&](int, PgConnection& conn) { prepare(conn); },
        [&](int client, PgConnection& conn) {
            const std::string ip = ip_of(client);
            PgResult r = conn.query_params(
                "SELECT allowed, denied_tier, retry_after, global_count, email_count"
                " FROM sliding_window.check_rate_limit_tiers($1::text, $2::text)",
                {ip.c_str(), email.c_str()});
            if (r.rows() != 1 || r.columns() != 5 || r.is_null(0, 0) || r.is_null(0, 2) ||
                r.is_null(0, 3) || r.is_null(0, 4)) {
                throw std::runtime_error("check_rate_limit_tiers: " + r.describe());
            }
            TierResult& out = results[client];
            out.returned = true;
            out.allowed = r.value(0, 0) == "t";
            out.tier_null = r.is_null(0, 1);
            out.denied_tier = r.value(0, 1);
            out.retry_after = std::stoi(r.value(0, 2));
            out.global_count = std::stoi(r.value(0, 3));
            out.email_count = std::stoi(r.value(0, 4));
        });
    ASSERT_TRUE(failures.empty()) << join_lines(failures);

    std::multiset<int> allowed_global_counts;
    std::multiset<int> allowed_email_counts;
    int denied_by_email = 0;
    std::string allowed_ips;
    for (int client = 0; client < kClients; ++client) {
        const TierResult& r = results[client];
        SCOPED_TRACE("client " + std::to_string(client));
        ASSERT_TRUE(r.returned);
        if (r.allowed) {
            allowed_ips += (allowed_ips.empty() ? "" : ",") + ip_of(client);
            allowed_global_counts.insert(r.global_count);
            allowed_email_counts.insert(r.email_count);
            EXPECT_TRUE(r.tier_null) << r.denied_tier;
            EXPECT_EQ(r.retry_after, 0);
        } else {
            EXPECT_FALSE(r.tier_null);
            EXPECT_EQ(r.denied_tier, "email");
            denied_by_email += r.denied_tier == "email";
            // The e-mail's calls all fell in this second: the wait is its whole window.
            EXPECT_EQ(r.retry_after, 3600);
            EXPECT_EQ(r.email_count, kEmailLimit);
            EXPECT_EQ(r.global_count, kEmailLimit);
        }
    }
    // Serialized: the allowed calls saw 1, 2, 3 in both tiers.
    EXPECT_EQ(allowed_global_counts, (std::multiset<int>{1, 2, 3}));
    EXPECT_EQ(allowed_email_counts, (std::multiset<int>{1, 2, 3}));
    EXPECT_EQ(denied_by_email, kClients - kEmailLimit);

    if (!is_memory()) {
        // Denied calls left no row, not even for the IPs they saw first.
        EXPECT_EQ(unlogged_rows(kBucketSpace, "global"), "1 3 3");
        EXPECT_EQ(unlogged_rows(kBucketSpace, "email:"), "1 3 3");
        EXPECT_EQ(unlogged_rows(kBucketSpace, "ip:"), "3 1 1");
    }
    // What each tier holds, read back by calls on its key (the sliding-window check_rate_limit
    // shares the tiers' keys): the global key and the e-mail 3, each allowed IP 1, the others 0.
    PgResult global = setup_.query(
        "SELECT allowed, current_count FROM sliding_window.check_rate_limit(p_key => 'global',"
        " p_limit => 1000, p_window_seconds => 60, p_cost => 1)");
    EXPECT_EQ(global.value(0, 0) + " " + global.value(0, 1), "t 4");
    PgResult email_key = setup_.query_params(
        "SELECT allowed, current_count, retry_after FROM sliding_window.check_rate_limit("
        "p_key => 'email:' || encode(sha256(convert_to(lower($1::text), 'UTF8')), 'hex'),"
        " p_limit => 3,"
        " p_window_seconds => 3600, p_cost => 1)",
        {email.c_str()});
    EXPECT_EQ(email_key.value(0, 0) + " " + email_key.value(0, 1) + " " + email_key.value(0, 2),
              "f 3 3600");
    std::string every_ip;
    for (int client = 0; client < kClients; ++client) {
        every_ip += (every_ip.empty() ? "" : ",") + ip_of(client);
    }
    PgResult ips = setup_.query_params(
        "SELECT coalesce(string_agg(ip, ',' ORDER BY ip) FILTER (WHERE c.current_count = 2), ''),"
        " count(*) FILTER (WHERE c.current_count = 1), count(*) FILTER (WHERE c.allowed)"
        " FROM unnest(string_to_array($1, ',')) AS ip,"
        " LATERAL sliding_window.check_rate_limit("
        "p_key => 'ip:' || encode(sha256(convert_to(ip, 'UTF8')), 'hex'),"
        " p_limit => 5, p_window_seconds => 60, p_cost => 1) AS c",
        {every_ip.c_str()});
    std::vector<std::string> sorted_ips;
    for (int client = 0; client < kClients; ++client) {
        if (results[client].allowed) {
            sorted_ips.push_back(ip_of(client));
        }
    }
    std::sort(sorted_ips.begin(), sorted_ips.end());
    std::string expected_ips;
    for (const std::string& ip : sorted_ips) {
        expected_ips += (expected_ips.empty() ? "" : ",") + ip;
    }
    ASSERT_EQ(ips.rows(), 1);
    EXPECT_EQ(ips.value(0, 0), expected_ips) << "the IPs counted once";
    EXPECT_EQ(ips.value(0, 1), std::to_string(kClients - kEmailLimit)) << "the IPs never counted";
    EXPECT_EQ(ips.value(0, 2), std::to_string(kClients));
}

// ---- every isolation level ----------------------------------------------------------------------

// On the engines the drop-ins are decided, not refused, under REPEATABLE READ and SERIALIZABLE
// too (docs/migrating.md), and stay exact: 64 connections, a third each in READ COMMITTED,
// REPEATABLE READ and SERIALIZABLE transactions, each calling the per-RPC limit, the endpoint
// limit and the sliding window on one user or key and committing. No call and no commit fails;
// exactly the limits are allowed; every count is what the calls made.
TEST_P(DropInEngineConcurrency, EveryIsolationLevelDecidesExactlyWithoutRefusing) {
    static const char* const kLevels[] = {"READ COMMITTED", "REPEATABLE READ", "SERIALIZABLE"};
    const std::string caller = user(9);
    const std::string rpc = name("iso-rpc");
    const std::string endpoint = name("iso-endpoint");
    const std::string key = name("iso-key");
    std::atomic<int> rpc_allowed{0};
    std::vector<IncrementResult> increments(kClients);  // one slot per client
    std::vector<BucketResult> buckets(kClients);        // one slot per client

    std::vector<std::string> failures = run_parallel_clients(
        kClients, [&](int, PgConnection& conn) { prepare(conn); },
        [&](int client, PgConnection& conn) {
            conn.query(std::string("BEGIN ISOLATION LEVEL ") + kLevels[client % 3]);
            if (rpc_for_user(conn, caller, rpc, 10, 60)) {
                rpc_allowed.fetch_add(1);
            }
            increments[client] = increment(conn, caller, endpoint, 10, 1);
            buckets[client] = check_key(conn, key, 5);
            conn.query("COMMIT");
        });
    ASSERT_TRUE(failures.empty()) << join_lines(failures);

    EXPECT_EQ(rpc_allowed.load(), 10);
    std::set<int> increment_seen;
    std::multiset<int> bucket_allowed;
    for (int client = 0; client < kClients; ++client) {
        SCOPED_TRACE("client " + std::to_string(client));
        ASSERT_TRUE(increments[client].returned);
        ASSERT_TRUE(buckets[client].returned);
        increment_seen.insert(increments[client].current);
        EXPECT_EQ(increments[client].allowed, increments[client].current <= 10 ? "true" : "false");
        if (buckets[client].allowed) {
            bucket_allowed.insert(buckets[client].current_count);
        } else {
            EXPECT_EQ(buckets[client].current_count, 5);
        }
    }
    EXPECT_EQ(increment_seen, multiples(kClients, 1));
    EXPECT_EQ(bucket_allowed, (std::multiset<int>{1, 2, 3, 4, 5}));
    if (!is_memory()) {
        EXPECT_EQ(unlogged_rows(kRpcSpace, caller), "1 64 64");
        EXPECT_EQ(unlogged_rows(kEndpointSpace, caller), "1 64 64");
        EXPECT_EQ(unlogged_rows(kBucketSpace, key), "1 5 5");
    }
    EXPECT_TRUE(rpc_for_user(setup_, caller, rpc, 65, 60));
    EXPECT_FALSE(rpc_for_user(setup_, caller, rpc, 65, 60));
    EXPECT_EQ(increment(setup_, caller, endpoint, 1000000, 1).current, kClients + 1);
    EXPECT_EQ(check_key(setup_, key, 6).current_count, 6);
}

INSTANTIATE_TEST_SUITE_P(Engines, DropInEngineConcurrency, ::testing::Values("unlogged", "memory"),
                         engine_name);
INSTANTIATE_TEST_SUITE_P(Engines, DropInEngineEndpoints, ::testing::Values("unlogged", "memory"),
                         engine_name);
INSTANTIATE_TEST_SUITE_P(Engines, DropInEngineSlidingWindow,
                         ::testing::Values("unlogged", "memory"), engine_name);

}  // namespace
}  // namespace ratelimit_test
