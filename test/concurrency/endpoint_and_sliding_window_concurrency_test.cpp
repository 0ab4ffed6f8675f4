// The hourly endpoint limits and the sliding-window limits under real concurrency.
// increment_rate_limit counts every call, allowed or not, on one row per (user, endpoint, window);
// the sliding-window check_rate_limit records only allowed calls in per-second buckets, and
// check_rate_limit_tiers decides three tiers all or nothing. Many backends race on the same rows
// and keys, and the counts must stay exact.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <random>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

#include "fresh_extension_fixture.hpp"
#include "parallel_clients.hpp"
#include "pg_connection.hpp"

namespace ratelimit_test {
namespace {

constexpr char kUser[] = "9d2f4b6a-3c5e-4a7b-8c9d-0e1f2a3b4c5d";

// The endpoint limits' windows are aligned to multiples of their length, so a run that crossed an
// hour boundary would split the calls over two rows. The test clock, frozen mid-window, rules that
// out: the denied calls' retryAfter is then exactly the 1800 s left in the window.
constexpr char kFrozenClock[] = "2025-10-28 07:30:00+00";
constexpr char kFrozenWindowStart[] = "2025-10-28 07:00:00+00";
constexpr int kSecondsLeftInWindow = 1800;

void freeze_clock(PgConnection& conn) {
    conn.query(std::string("SET ratelimit.test_clock = '") + kFrozenClock + "'");
    if (!conn.query(std::string("SELECT ratelimit.clock_now() = '") + kFrozenClock +
                    "'::timestamptz")
             .single_bool()) {
        throw std::runtime_error("ratelimit.test_clock did not freeze the clock");
    }
}

// One increment_rate_limit call's jsonb result, as the client sees it.
struct IncrementResult {
    bool returned = false;
    std::string allowed;
    int current = -1;
    int limit = -1;
    int retry_after = -1;
};

IncrementResult increment(PgConnection& conn, int limit, int increment) {
    const std::string limit_text = std::to_string(limit);
    const std::string increment_text = std::to_string(increment);
    PgResult result = conn.query_params(
        "SELECT r->>'allowed', (r->>'current')::integer, (r->>'limit')::integer,"
        " (r->>'retryAfter')::integer"
        " FROM increment_rate_limit($1::uuid, 'generate-image', $2::integer, 3600,"
        " $3::integer) AS r",
        {kUser, limit_text.c_str(), increment_text.c_str()});
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
    bool allowed = false;
    int current_count = -1;
    int retry_after = -1;
};

BucketResult check_key(PgConnection& conn, const std::string& key, int limit) {
    const std::string limit_text = std::to_string(limit);
    // Positional, with the cost; in its own schema, beside the per-RPC one in public.
    PgResult result = conn.query_params(
        "SELECT allowed, current_count, retry_after"
        " FROM sliding_window.check_rate_limit($1::text, $2::integer, $3::integer, $4::integer)",
        {key.c_str(), limit_text.c_str(), "3600", "1"});
    if (result.rows() != 1 || result.columns() != 3 || result.is_null(0, 0) ||
        result.is_null(0, 1) || result.is_null(0, 2)) {
        throw std::runtime_error("check_rate_limit(" + key + "): " + result.describe());
    }
    return BucketResult{result.value(0, 0) == "t", std::stoi(result.value(0, 1)),
                        std::stoi(result.value(0, 2))};
}

class EndpointLimitsConcurrency : public FreshExtensionTest {
  protected:
    // Each of `clients` connections calls increment_rate_limit once with `batch`; returns the
    // results by client.
    std::vector<IncrementResult> race_increments(int clients, int limit, int batch) {
        std::vector<IncrementResult> results(clients);  // one slot per client
        std::vector<std::string> failures = run_parallel_clients(
            clients, [](int, PgConnection& conn) { freeze_clock(conn); },
            [&](int client, PgConnection& conn) {
                results[client] = increment(conn, limit, batch);
            });
        EXPECT_TRUE(failures.empty()) << join_lines(failures);
        return results;
    }

    // The calls are serialized on the row lock, so the counters they saw are exactly
    // batch, 2 * batch, ..., clients * batch, and a call is allowed iff its counter fits.
    void expect_serialized(const std::vector<IncrementResult>& results, int limit, int batch) {
        std::set<int> seen;
        for (std::size_t client = 0; client < results.size(); ++client) {
            const IncrementResult& r = results[client];
            SCOPED_TRACE("client " + std::to_string(client));
            ASSERT_TRUE(r.returned);
            seen.insert(r.current);
            EXPECT_EQ(r.limit, limit);
            if (r.current <= limit) {
                EXPECT_EQ(r.allowed, "true") << "current " << r.current;
                EXPECT_EQ(r.retry_after, 0);
            } else {
                EXPECT_EQ(r.allowed, "false") << "current " << r.current;
                EXPECT_EQ(r.retry_after, kSecondsLeftInWindow);
            }
        }
        std::set<int> expected;
        for (std::size_t call = 1; call <= results.size(); ++call) {
            expected.insert(static_cast<int>(call) * batch);
        }
        EXPECT_EQ(seen, expected);
    }

    void expect_one_row_with_counter(int counter) {
        EXPECT_EQ(scalar("SELECT count(*) FROM rate_limits"), "1");
        PgResult row = setup_.query_params(
            "SELECT counter, window_start = $2::timestamptz FROM rate_limits"
            " WHERE user_id = $1::uuid AND endpoint = 'generate-image'",
            {kUser, kFrozenWindowStart});
        ASSERT_EQ(row.rows(), 1) << row.describe();
        EXPECT_EQ(row.value(0, 0), std::to_string(counter));
        EXPECT_EQ(row.value(0, 1), "t");
    }
};

TEST_F(EndpointLimitsConcurrency, SixtyFourParallelCallsWithLimitTenAllowExactlyTenAndCountAll) {
    constexpr int kClients = 64;
    constexpr int kLimit = 10;
    std::vector<IncrementResult> results = race_increments(kClients, kLimit, 1);
    ASSERT_FALSE(HasFailure());

    int allowed = 0;
    for (const IncrementResult& r : results) {
        allowed += r.allowed == "true";
    }
    EXPECT_EQ(allowed, kLimit);
    expect_serialized(results, kLimit, 1);
    // Denied calls count too, as in the original function: one row, every call in it.
    expect_one_row_with_counter(kClients);
}

TEST_F(EndpointLimitsConcurrency, SixtyFourParallelBatchesOfThreeWithLimitFiftyAllowSixteen) {
    constexpr int kClients = 64;
    constexpr int kLimit = 50;
    constexpr int kBatch = 3;
    std::vector<IncrementResult> results = race_increments(kClients, kLimit, kBatch);
    ASSERT_FALSE(HasFailure());

    int allowed = 0;
    for (const IncrementResult& r : results) {
        allowed += r.allowed == "true";
    }
    // 16 * 3 = 48 fits in 50; the 17th batch would make 51.
    EXPECT_EQ(allowed, 16);
    expect_serialized(results, kLimit, kBatch);
    expect_one_row_with_counter(kClients * kBatch);
}

// The sliding window runs on the real clock: windows of 3600 s cannot expire during a test,
// and the calls spread over several one-second buckets, which the sums must add up exactly.
class SlidingWindowLimitsConcurrency : public FreshExtensionTest {};

TEST_F(SlidingWindowLimitsConcurrency, ThreeHundredTwentyCallsOnOneKeyAllowExactlyFive) {
    constexpr int kClients = 64;
    constexpr int kCallsEach = 5;
    constexpr int kLimit = 5;
    // kCallsEach slots per client, each written by its own client only.
    std::vector<BucketResult> results(kClients * kCallsEach);

    std::vector<std::string> failures =
        run_parallel_clients(kClients, nullptr, [&](int client, PgConnection& conn) {
            for (int call = 0; call < kCallsEach; ++call) {
                results[client * kCallsEach + call] = check_key(conn, "ip:hot", kLimit);
            }
        });
    ASSERT_TRUE(failures.empty()) << join_lines(failures);

    int allowed = 0;
    std::multiset<int> allowed_counts;
    std::string wrong_denials;
    for (std::size_t i = 0; i < results.size(); ++i) {
        const BucketResult& r = results[i];
        if (r.allowed) {
            ++allowed;
            allowed_counts.insert(r.current_count);
            EXPECT_EQ(r.retry_after, 0) << "call " << i;
        } else if (r.retry_after < 1 || r.retry_after > 3600 || r.current_count != kLimit) {
            // A denied call waits for the oldest bucket to leave the 3600 s window, and saw
            // every allowed call.
            wrong_denials += "call " + std::to_string(i) + ": current_count " +
                             std::to_string(r.current_count) + ", retry_after " +
                             std::to_string(r.retry_after) + "\n";
        }
    }
    EXPECT_EQ(allowed, kLimit);
    // Serialized on the key's lock, the allowed calls saw 1, 2, ..., 5.
    EXPECT_EQ(allowed_counts, (std::multiset<int>{1, 2, 3, 4, 5}));
    EXPECT_TRUE(wrong_denials.empty()) << wrong_denials;
    // Only allowed calls are recorded.
    EXPECT_EQ(
        scalar("SELECT sum(count) FROM sliding_window.rate_limit_buckets WHERE key = 'ip:hot'"),
        "5");
    EXPECT_EQ(scalar("SELECT count(DISTINCT key) FROM sliding_window.rate_limit_buckets"), "1");
}

TEST_F(SlidingWindowLimitsConcurrency,
       SixtyFourConnectionsEachCallingAThousandKeysInShuffledOrder) {
    constexpr int kClients = 64;
    constexpr int kKeys = 1000;
    constexpr int kLimit = 7;

    std::vector<std::string> keys;
    for (int key = 0; key < kKeys; ++key) {
        keys.push_back("k:" + std::to_string(key));
    }
    // Written by every client, so atomic; read once the threads are joined.
    std::vector<std::atomic<int>> calls_per_key(kKeys);
    std::vector<std::atomic<int>> allowed_per_key(kKeys);
    for (int key = 0; key < kKeys; ++key) {
        calls_per_key[key].store(0);
        allowed_per_key[key].store(0);
    }
    std::atomic<int> wrong_results{0};

    std::vector<std::string> failures =
        run_parallel_clients(kClients, nullptr, [&](int client, PgConnection& conn) {
            // Each client walks every key once, in its own order (seeded, so a failure
            // reruns the same way).
            std::mt19937 random(static_cast<unsigned>(client));
            std::vector<int> order(kKeys);
            for (int key = 0; key < kKeys; ++key) {
                order[key] = key;
            }
            std::shuffle(order.begin(), order.end(), random);
            for (int key : order) {
                BucketResult r = check_key(conn, keys[key], kLimit);
                calls_per_key[key].fetch_add(1);
                if (r.allowed) {
                    allowed_per_key[key].fetch_add(1);
                    if (r.retry_after != 0 || r.current_count < 1 || r.current_count > kLimit) {
                        wrong_results.fetch_add(1);
                    }
                } else if (r.current_count != kLimit || r.retry_after < 1 || r.retry_after > 3600) {
                    wrong_results.fetch_add(1);
                }
            }
        });
    ASSERT_TRUE(failures.empty()) << join_lines(failures);

    // Every key was called well past its limit, so every key must have reached it exactly.
    std::string wrong_keys;
    int allowed_total = 0;
    for (int key = 0; key < kKeys; ++key) {
        int calls = calls_per_key[key].load();
        int allowed = allowed_per_key[key].load();
        allowed_total += allowed;
        if (calls != kClients || allowed != kLimit) {
            wrong_keys += keys[key] + ": " + std::to_string(calls) + " calls, " +
                          std::to_string(allowed) + " allowed\n";
        }
    }
    EXPECT_TRUE(wrong_keys.empty()) << wrong_keys;
    EXPECT_EQ(allowed_total, kKeys * kLimit);
    EXPECT_EQ(wrong_results.load(), 0);

    PgResult sums =
        setup_.query("SELECT key, sum(count) FROM sliding_window.rate_limit_buckets GROUP BY key");
    ASSERT_EQ(sums.rows(), kKeys) << sums.describe();
    std::set<std::string> seen_keys;
    std::string wrong_sums;
    for (int row = 0; row < sums.rows(); ++row) {
        seen_keys.insert(sums.value(row, 0));
        if (sums.value(row, 1) != std::to_string(kLimit)) {
            wrong_sums += sums.value(row, 0) + ": " + sums.value(row, 1) + "\n";
        }
    }
    EXPECT_EQ(seen_keys, std::set<std::string>(keys.begin(), keys.end()));
    EXPECT_TRUE(wrong_sums.empty()) << wrong_sums;
}

TEST_F(SlidingWindowLimitsConcurrency,
       TiersOneEmailFromSixtyFourIpsAllowThreeAndChargeNothingElse) {
    constexpr int kClients = 64;
    constexpr int kEmailLimit = 3;  // the default email tier: 3 per 3600 s

    struct TierResult {
        bool returned = false;
        bool allowed = false;
        bool tier_null = false;
        std::string denied_tier;
        int retry_after = -1;
        int email_count = -1;
    };
    std::vector<TierResult> results(kClients);  // one slot per client
    auto ip_of = [](int client) {
        return "10.0." + std::to_string(client / 256) + "." + std::to_string(client % 256);
    };

    std::vector<std::string> failures =
        run_parallel_clients(kClients, nullptr, [&](int client, PgConnection& conn) {
            const std::string ip = ip_of(client);
            PgResult r = conn.query_params(
                "SELECT allowed, denied_tier, retry_after, email_count"
                " FROM sliding_window.check_rate_limit_tiers($1::text, $2::text)",
                {ip.c_str(), "victim@example.com"});
            if (r.rows() != 1 || r.columns() != 4 || r.is_null(0, 0) || r.is_null(0, 2) ||
                r.is_null(0, 3)) {
                throw std::runtime_error("check_rate_limit_tiers: " + r.describe());
            }
            TierResult& out = results[client];
            out.returned = true;
            out.allowed = r.value(0, 0) == "t";
            out.tier_null = r.is_null(0, 1);
            out.denied_tier = r.value(0, 1);
            out.retry_after = std::stoi(r.value(0, 2));
            out.email_count = std::stoi(r.value(0, 3));
        });
    ASSERT_TRUE(failures.empty()) << join_lines(failures);

    int allowed = 0;
    int denied_by_email = 0;
    std::string allowed_ips;
    for (int client = 0; client < kClients; ++client) {
        const TierResult& r = results[client];
        SCOPED_TRACE("client " + std::to_string(client));
        ASSERT_TRUE(r.returned);
        if (r.allowed) {
            ++allowed;
            allowed_ips += (allowed_ips.empty() ? "" : ",") + ip_of(client);
            EXPECT_TRUE(r.tier_null) << r.denied_tier;
            EXPECT_EQ(r.retry_after, 0);
        } else {
            EXPECT_FALSE(r.tier_null);
            EXPECT_EQ(r.denied_tier, "email");
            denied_by_email += r.denied_tier == "email";
            EXPECT_GE(r.retry_after, 1);
            EXPECT_LE(r.retry_after, 3600);
            EXPECT_EQ(r.email_count, kEmailLimit);
        }
    }
    EXPECT_EQ(allowed, kEmailLimit);
    EXPECT_EQ(denied_by_email, kClients - kEmailLimit);

    // A denied call charged no tier: the global tier and the email counted the allowed calls
    // only, and only the allowed IPs have buckets.
    EXPECT_EQ(
        scalar("SELECT sum(count) FROM sliding_window.rate_limit_buckets WHERE key = 'global'"),
        "3");
    EXPECT_EQ(
        scalar("SELECT sum(count) FROM sliding_window.rate_limit_buckets WHERE key LIKE 'email:%'"),
        "3");
    EXPECT_EQ(scalar("SELECT count(DISTINCT key) FROM sliding_window.rate_limit_buckets"
                     " WHERE key LIKE 'email:%'"),
              "1");
    EXPECT_EQ(scalar("SELECT count(DISTINCT key) FROM sliding_window.rate_limit_buckets"
                     " WHERE key LIKE 'ip:%'"),
              "3");
    EXPECT_EQ(
        scalar("SELECT sum(count) FROM sliding_window.rate_limit_buckets WHERE key LIKE 'ip:%'"),
        "3");
    // The IP keys are the SHA-256 digests of exactly the allowed clients' IPs.
    EXPECT_EQ(
        scalar("SELECT count(*) FROM (SELECT DISTINCT key FROM sliding_window.rate_limit_buckets"
               " WHERE key LIKE 'ip:%') AS b"
               " WHERE key IN (SELECT 'ip:' || encode(sha256(convert_to(ip, 'UTF8')), 'hex')"
               " FROM unnest(string_to_array($1, ',')) AS ip)",
               {allowed_ips.c_str()}),
        "3");
}

TEST_F(SlidingWindowLimitsConcurrency, RepeatableReadAndSerializableAreRefusedAndWriteNothing) {
    constexpr int kClients = 16;
    // One slot per client, each written by its own thread only.
    std::vector<std::string> check_states(kClients);
    std::vector<std::string> check_messages(kClients);
    std::vector<std::string> tier_states(kClients);
    std::vector<std::string> tier_messages(kClients);
    std::vector<int> read_committed_results(kClients, -1);

    std::vector<std::string> failures =
        run_parallel_clients(kClients, nullptr, [&](int client, PgConnection& conn) {
            const std::string level = client % 2 == 0 ? "REPEATABLE READ" : "SERIALIZABLE";
            const std::string ip = "10.1.0." + std::to_string(client);

            conn.query("BEGIN ISOLATION LEVEL " + level);
            PgResult check = conn.exec(
                "SELECT * FROM sliding_window.check_rate_limit(p_key => 'ip:iso', p_limit => 100,"
                " p_window_seconds => 3600, p_cost => 1)");
            check_states[client] = check.sqlstate();
            check_messages[client] = check.error_message();
            // COMMIT, not ROLLBACK: had the call written anything, this would keep it (after
            // the error, COMMIT rolls back).
            conn.query("COMMIT");

            conn.query("BEGIN ISOLATION LEVEL " + level);
            PgResult tiers = conn.exec_params(
                "SELECT * FROM sliding_window.check_rate_limit_tiers($1::text, 'iso@example.com')",
                {ip.c_str()});
            tier_states[client] = tiers.sqlstate();
            tier_messages[client] = tiers.error_message();
            conn.query("COMMIT");

            // The backend stays usable: the same call in READ COMMITTED is allowed.
            read_committed_results[client] = check_key(conn, "ip:after", kClients).allowed;
        });
    ASSERT_TRUE(failures.empty()) << join_lines(failures);

    for (int client = 0; client < kClients; ++client) {
        SCOPED_TRACE("client " + std::to_string(client));
        EXPECT_EQ(check_states[client], "0A000") << check_messages[client];
        EXPECT_NE(check_messages[client].find("READ COMMITTED"), std::string::npos)
            << check_messages[client];
        EXPECT_EQ(tier_states[client], "0A000") << tier_messages[client];
        EXPECT_EQ(read_committed_results[client], 1);
    }
    // The refused calls wrote nothing; only the READ COMMITTED calls were recorded.
    EXPECT_EQ(
        scalar("SELECT count(*) FROM sliding_window.rate_limit_buckets WHERE key <> 'ip:after'"),
        "0");
    EXPECT_EQ(
        scalar("SELECT sum(count) FROM sliding_window.rate_limit_buckets WHERE key = 'ip:after'"),
        "16");
}

}  // namespace
}  // namespace ratelimit_test
