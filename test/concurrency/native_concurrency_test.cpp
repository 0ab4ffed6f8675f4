// The native API (ratelimit.consume and ratelimit.peek) under real concurrency: 64 backends race
// on one key, for every algorithm and both engines, and the row lock per key must make the
// outcome exactly that of some serial order of the calls. Every connection freezes the clock
// (ratelimit.test_clock), so nothing refills or expires during a race and the number of allowed
// calls, the remaining values they report, their retry and reset times and the stored state are
// all known in advance from the semantics of each algorithm.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <mutex>
#include <ostream>
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

constexpr std::int64_t kMicrosPerSecond = 1000000;
constexpr std::int64_t kHour = 3600 * kMicrosPerSecond;

// 2026-01-01 00:00:00 UTC in µs since the Unix epoch: an hour boundary, so it starts the aligned
// one-hour windows of fixed_window and sliding_window_counter.
constexpr std::int64_t kMidnight = 1767225600LL * kMicrosPerSecond;

// Mid-window, so that an aligned window's start differs from the clock and a test that confused
// the two (fixed_window vs rolling_window) would see the wrong retry time and state.
constexpr char kFrozenClock[] = "2026-01-01 00:30:00+00";
constexpr std::int64_t kFrozenMicros = kMidnight + kHour / 2;

constexpr int kClients = 64;
constexpr int kLimit = 100;
constexpr char kPeriod[] = "1 hour";
constexpr std::int64_t kPeriodMicros = kHour;
constexpr char kHotKey[] = "native:hot";

enum class Algorithm {
    kFixedWindow,
    kRollingWindow,
    kSlidingWindow,
    kSlidingWindowCounter,
    kTokenBucket,
    kGcra,
};

struct AlgorithmCase {
    Algorithm algorithm;
    const char* name;  // the SQL spelling
    int stored;        // ratelimit.key_state.algorithm: part of the on-disk format
};

const std::vector<AlgorithmCase>& all_algorithms() {
    static const std::vector<AlgorithmCase> algorithms = {
        {Algorithm::kFixedWindow, "fixed_window", 1},
        {Algorithm::kRollingWindow, "rolling_window", 2},
        {Algorithm::kSlidingWindow, "sliding_window", 3},
        {Algorithm::kSlidingWindowCounter, "sliding_window_counter", 4},
        {Algorithm::kTokenBucket, "token_bucket", 5},
        {Algorithm::kGcra, "gcra", 6},
    };
    return algorithms;
}

struct EngineCase {
    const char* name;         // p_engine
    const char* table;        // where its state lives
    const char* other_table;  // must stay empty: a call never writes the other engine's table
};

const std::vector<EngineCase>& all_engines() {
    static const std::vector<EngineCase> engines = {
        {"table", "ratelimit.key_state", "ratelimit.key_state_unlogged"},
        {"unlogged", "ratelimit.key_state_unlogged", "ratelimit.key_state"},
    };
    return engines;
}

void PrintTo(const EngineCase& engine, std::ostream* out) {
    *out << engine.name;
}

struct Combination {
    AlgorithmCase algorithm;
    EngineCase engine;
};

// GoogleTest prints a failing test's parameter with this instead of its raw bytes.
void PrintTo(const Combination& combination, std::ostream* out) {
    *out << combination.algorithm.name << " on " << combination.engine.name;
}

std::vector<Combination> all_combinations() {
    std::vector<Combination> combinations;
    for (const AlgorithmCase& algorithm : all_algorithms()) {
        for (const EngineCase& engine : all_engines()) {
            combinations.push_back({algorithm, engine});
        }
    }
    return combinations;
}

std::string combination_name(const ::testing::TestParamInfo<Combination>& info) {
    return std::string(info.param.algorithm.name) + "_" + info.param.engine.name;
}

std::string engine_name(const ::testing::TestParamInfo<EngineCase>& info) {
    return info.param.name;
}

// ---- expectations from the semantics, for a clock frozen at `now` ---------------------------
//
// All the one-key races start from a fresh key with B = N and every allowed call at the same
// instant, so an algorithm's whole state is "used units" u, and what a call at `now` must report
// follows from u alone.

std::int64_t ceil_div(std::int64_t value, std::int64_t divisor) {
    return value <= 0 ? value / divisor : (value + divisor - 1) / divisor;
}

// Decisions report milliseconds, the µs rounded up.
std::int64_t to_ms(std::int64_t micros) {
    return ceil_div(micros, 1000);
}

std::int64_t window_start(std::int64_t now, std::int64_t period) {
    return now / period * period;
}

// reset_after_ms once `used` units are taken at `now` (everything consumed at `now`).
std::int64_t expected_reset_ms(Algorithm algorithm, std::int64_t limit, std::int64_t period,
                               std::int64_t now, std::int64_t used) {
    const std::int64_t w = window_start(now, period);
    std::int64_t reset_at = now;
    switch (algorithm) {
        case Algorithm::kFixedWindow:
            reset_at = used > 0 ? w + period : now;
            break;
        case Algorithm::kRollingWindow:
        case Algorithm::kSlidingWindow:
            // The window opened, and the log's only entry was written, at `now`.
            reset_at = used > 0 ? now + period : now;
            break;
        case Algorithm::kSlidingWindowCounter:
            reset_at = used > 0 ? w + 2 * period : now;
            break;
        case Algorithm::kTokenBucket:
        case Algorithm::kGcra:
            // The missing `used` tokens drip back at N per P (the GCRA's TAT is now + used·P/N).
            reset_at = now + ceil_div(used * period, limit);
            break;
    }
    return to_ms(reset_at - now);
}

// retry_after_ms of a call of `cost` denied when `used` units are taken at `now`.
std::int64_t expected_retry_ms(Algorithm algorithm, std::int64_t limit, std::int64_t period,
                               std::int64_t now, std::int64_t used, std::int64_t cost) {
    const std::int64_t w = window_start(now, period);
    std::int64_t retry_at = now;
    switch (algorithm) {
        case Algorithm::kFixedWindow:
            retry_at = w + period;
            break;
        case Algorithm::kRollingWindow:
        case Algorithm::kSlidingWindow:
            // The window, or the log's one entry, leaves at now + P and takes every unit along.
            retry_at = now + period;
            break;
        case Algorithm::kSlidingWindowCounter:
            // No previous window, so the call waits for the next one, where the current window's
            // `used` units weigh less and less: w + 2P - floor((N - c)·P / cur).
            retry_at = w + 2 * period - (limit - cost) * period / used;
            break;
        case Algorithm::kTokenBucket:
        case Algorithm::kGcra:
            retry_at = now + ceil_div((cost - (limit - used)) * period, limit);
            break;
    }
    return to_ms(retry_at - now);
}

// The columns of the key's state row once `used` units were consumed at `now` (column name ->
// its text). Only the columns an algorithm is specified to use are listed.
std::map<std::string, std::string> expected_state(const AlgorithmCase& algorithm,
                                                  std::int64_t limit, std::int64_t period,
                                                  std::int64_t now, std::int64_t used) {
    const std::int64_t w = window_start(now, period);
    std::map<std::string, std::string> columns = {
        {"algorithm", std::to_string(algorithm.stored)},
        // Never blocked; NULL and 0 both say so.
        {"blocked_until", "0"},
    };
    switch (algorithm.algorithm) {
        case Algorithm::kFixedWindow:
            columns["instant"] = std::to_string(w);
            columns["amount"] = std::to_string(used);
            break;
        case Algorithm::kRollingWindow:
            columns["instant"] = std::to_string(now);
            columns["amount"] = std::to_string(used);
            break;
        case Algorithm::kSlidingWindow:
            // Every allowed call was at the same instant, so they merged into one entry.
            columns["log"] = "{" + std::to_string(now) + "," + std::to_string(used) + "}";
            break;
        case Algorithm::kSlidingWindowCounter:
            columns["instant"] = std::to_string(w);
            columns["amount"] = std::to_string(used);
            columns["carry"] = "0";
            break;
        case Algorithm::kTokenBucket:
        case Algorithm::kGcra:
            // gcra keeps the bucket's state: the tokens left at the last call.
            columns["instant"] = std::to_string(now);
            columns["amount"] = std::to_string(limit - used);
            columns["carry"] = "0";
            break;
    }
    return columns;
}

constexpr char kStateColumns[] =
    "algorithm::text AS algorithm, instant::text AS instant, amount::text AS amount,"
    " carry::text AS carry, log::text AS log,"
    " coalesce(blocked_until, 0)::text AS blocked_until";
const std::vector<std::string> kStateColumnNames = {"algorithm", "instant", "amount",
                                                    "carry",     "log",     "blocked_until"};

// "" when `row` of `result` (selected with kStateColumns after the key) matches.
std::string state_mismatch(const PgResult& result, int row,
                           const std::map<std::string, std::string>& expected) {
    std::string mismatch;
    for (std::size_t column = 0; column < kStateColumnNames.size(); ++column) {
        auto wanted = expected.find(kStateColumnNames[column]);
        if (wanted == expected.end()) {
            continue;
        }
        const int index = static_cast<int>(column) + 1;
        const std::string actual = result.is_null(row, index) ? "NULL" : result.value(row, index);
        if (actual != wanted->second) {
            mismatch += " " + wanted->first + "=" + actual + " (expected " + wanted->second + ")";
        }
    }
    return mismatch;
}

// ---- calls ----------------------------------------------------------------------------------

void freeze_clock(PgConnection& conn, const std::string& clock) {
    conn.query("SET ratelimit.test_clock = '" + clock + "'");
    if (!conn.query_params("SELECT ratelimit.clock_now() = $1::timestamptz", {clock.c_str()})
             .single_bool()) {
        throw std::runtime_error("ratelimit.test_clock did not freeze the clock at " + clock);
    }
}

// One ratelimit.decision as the client sees it.
struct Decision {
    bool returned = false;
    int cost = 0;
    bool allowed = false;
    std::int64_t limit = -1;
    std::int64_t remaining = -1;
    std::int64_t retry_ms = -1;
    std::int64_t reset_ms = -1;
};

std::string describe(const Decision& d) {
    return std::string(d.allowed ? "allowed" : "denied") + " cost " + std::to_string(d.cost) +
           ", limit " + std::to_string(d.limit) + ", remaining " + std::to_string(d.remaining) +
           ", retry_after_ms " + std::to_string(d.retry_ms) + ", reset_after_ms " +
           std::to_string(d.reset_ms);
}

// One statement, so one transaction in autocommit, as an application calls it.
Decision call_native(PgConnection& conn, const char* function, const std::string& key,
                     const Combination& combination, int cost, int limit = kLimit) {
    const std::string limit_text = std::to_string(limit);
    const std::string cost_text = std::to_string(cost);
    PgResult result = conn.query_params(
        std::string("SELECT allowed, \"limit\", remaining, retry_after_ms, reset_after_ms"
                    " FROM ratelimit.") +
            function + "($1::text, $2::integer, $3::interval, $4::integer, $5::text, $6::text)",
        {key.c_str(), limit_text.c_str(), kPeriod, cost_text.c_str(), combination.algorithm.name,
         combination.engine.name});
    if (result.rows() != 1 || result.columns() != 5) {
        throw std::runtime_error(std::string("ratelimit.") + function + ": " + result.describe());
    }
    for (int column = 0; column < 5; ++column) {
        if (result.is_null(0, column)) {
            throw std::runtime_error(std::string("ratelimit.") + function +
                                     ": a NULL field in its decision");
        }
    }
    Decision d;
    d.returned = true;
    d.cost = cost;
    d.allowed = result.value(0, 0) == "t";
    d.limit = std::stoll(result.value(0, 1));
    d.remaining = std::stoll(result.value(0, 2));
    d.retry_ms = std::stoll(result.value(0, 3));
    d.reset_ms = std::stoll(result.value(0, 4));
    return d;
}

// A barrier used once per round, so that every call of round r has returned before any call of
// round r + 1 is sent. A client that fails stops arriving; the timeout turns the others' wait
// into a failure instead of a hung test.
class RoundBarrier {
  public:
    explicit RoundBarrier(int parties) : parties_(parties) {}

    void arrive_and_wait() {
        std::unique_lock<std::mutex> lock(mutex_);
        const long generation = generation_;
        if (++arrived_ == parties_) {
            arrived_ = 0;
            ++generation_;
            released_cv_.notify_all();
            return;
        }
        if (!released_cv_.wait_for(lock, std::chrono::seconds(30),
                                   [&] { return generation_ != generation; })) {
            throw std::runtime_error("round barrier: another client never arrived");
        }
    }

  private:
    std::mutex mutex_;
    std::condition_variable released_cv_;
    const int parties_;
    int arrived_ = 0;
    long generation_ = 0;
};

// ---- one key, 64 connections, every algorithm x engine --------------------------------------

class NativeOneKey : public FreshExtensionTest, public ::testing::WithParamInterface<Combination> {
  protected:
    const AlgorithmCase& algorithm() const { return GetParam().algorithm; }
    const EngineCase& engine() const { return GetParam().engine; }

    // `calls_per_client` calls from each of kClients connections on kHotKey, the clock frozen
    // at kFrozenClock, with costs from `cost_of(client, call)`; results by client, then call.
    std::vector<Decision> race(int calls_per_client, int (*cost_of)(int client, int call)) {
        std::vector<Decision> results(kClients * calls_per_client);  // each slot: one client's
        const Combination combination = GetParam();
        std::vector<std::string> failures = run_parallel_clients(
            kClients, [](int, PgConnection& conn) { freeze_clock(conn, kFrozenClock); },
            [&](int client, PgConnection& conn) {
                for (int call = 0; call < calls_per_client; ++call) {
                    results[client * calls_per_client + call] =
                        call_native(conn, "consume", kHotKey, combination, cost_of(client, call));
                }
            });
        EXPECT_TRUE(failures.empty()) << join_lines(failures);
        return results;
    }

    // The key's row holds exactly `used` units, in the algorithm's own representation, and the
    // other engine's table was never written.
    void expect_state(std::int64_t used) {
        PgResult row =
            setup_.query(std::string("SELECT key, ") + kStateColumns + " FROM " + engine().table);
        ASSERT_EQ(row.rows(), 1) << row.describe();
        EXPECT_EQ(row.value(0, 0), kHotKey);
        EXPECT_EQ(
            state_mismatch(row, 0,
                           expected_state(algorithm(), kLimit, kPeriodMicros, kFrozenMicros, used)),
            "");
        EXPECT_EQ(scalar(std::string("SELECT count(*) FROM ") + engine().other_table), "0");
    }

    Decision peek(int cost) {
        freeze_clock(setup_, kFrozenClock);
        return call_native(setup_, "peek", kHotKey, GetParam(), cost);
    }
};

// B = N = 100 and 320 calls of cost 1: with the clock frozen nothing comes back, so every
// algorithm allows exactly 100, and the allowed calls, serialized on the key's row lock, saw
// the remaining values 99, 98, ..., 0 once each.
TEST_P(NativeOneKey, SixtyFourClientsFiveCallsEachAllowExactlyTheLimit) {
    constexpr int kCallsEach = 5;
    std::vector<Decision> results = race(kCallsEach, [](int, int) { return 1; });
    ASSERT_FALSE(HasFailure());

    std::multiset<std::int64_t> allowed_remaining;
    std::string wrong;
    for (int client = 0; client < kClients; ++client) {
        bool denied_before = false;
        for (int call = 0; call < kCallsEach; ++call) {
            const Decision& d = results[client * kCallsEach + call];
            const std::string where =
                "client " + std::to_string(client) + " call " + std::to_string(call) + ": ";
            if (!d.returned) {
                wrong += where + "no result\n";
                continue;
            }
            const std::int64_t used_after = kLimit - d.remaining;
            const std::int64_t reset_ms = expected_reset_ms(
                algorithm().algorithm, kLimit, kPeriodMicros, kFrozenMicros, used_after);
            bool ok = d.limit == kLimit && d.reset_ms == reset_ms;
            if (d.allowed) {
                allowed_remaining.insert(d.remaining);
                // The clock stands still: once denied, a client is never allowed again.
                ok = ok && d.retry_ms == 0 && !denied_before;
            } else {
                denied_before = true;
                ok = ok && d.remaining == 0 &&
                     d.retry_ms == expected_retry_ms(algorithm().algorithm, kLimit, kPeriodMicros,
                                                     kFrozenMicros, kLimit, 1);
            }
            if (!ok) {
                wrong += where + describe(d) + "\n";
            }
        }
    }
    EXPECT_TRUE(wrong.empty()) << wrong;
    EXPECT_EQ(allowed_remaining.size(), static_cast<std::size_t>(kLimit));
    std::multiset<std::int64_t> permutation;
    for (int remaining = 0; remaining < kLimit; ++remaining) {
        permutation.insert(remaining);
    }
    EXPECT_EQ(allowed_remaining, permutation);

    // None lost: the key is full, and a peek says so without changing it.
    Decision after = peek(1);
    EXPECT_FALSE(after.allowed) << describe(after);
    EXPECT_EQ(after.remaining, 0);
    EXPECT_EQ(after.retry_ms, expected_retry_ms(algorithm().algorithm, kLimit, kPeriodMicros,
                                                kFrozenMicros, kLimit, 1));
    expect_state(kLimit);
}

// Costs 1..5 at random (seeded per client, so a failure reruns the same way). Serialized, the
// allowed calls form one chain 100 -> 100 - c1 -> ... -> final remaining; every denied call saw
// one of those states and really could not fit in it.
TEST_P(NativeOneKey, SixtyFourClientsWithRandomCostsNeverOverspendAndLoseNothing) {
    constexpr int kCallsEach = 5;
    std::vector<Decision> results = race(kCallsEach, [](int client, int call) {
        std::mt19937 random(static_cast<unsigned>(client * 7919 + call));
        return std::uniform_int_distribution<int>(1, 5)(random);
    });
    ASSERT_FALSE(HasFailure());

    std::vector<Decision> allowed;
    std::vector<Decision> denied;
    std::string wrong;
    for (int client = 0; client < kClients; ++client) {
        std::int64_t last_remaining = kLimit;
        for (int call = 0; call < kCallsEach; ++call) {
            const Decision& d = results[client * kCallsEach + call];
            const std::string where =
                "client " + std::to_string(client) + " call " + std::to_string(call) + ": ";
            if (!d.returned) {
                wrong += where + "no result\n";
                continue;
            }
            (d.allowed ? allowed : denied).push_back(d);
            // A client's later calls come later in the serial order, and nothing comes back.
            if (d.remaining > last_remaining || d.limit != kLimit ||
                (d.allowed && d.retry_ms != 0)) {
                wrong += where + describe(d) + "\n";
            }
            last_remaining = d.remaining;
        }
    }
    ASSERT_TRUE(wrong.empty()) << wrong;

    // The chain of allowed calls, in the order the row lock serialized them.
    std::sort(allowed.begin(), allowed.end(),
              [](const Decision& a, const Decision& b) { return a.remaining > b.remaining; });
    std::set<std::int64_t> states = {kLimit};
    std::int64_t before = kLimit;
    std::int64_t allowed_units = 0;
    for (const Decision& d : allowed) {
        if (before - d.cost != d.remaining) {
            wrong += "allowed call breaks the chain at " + std::to_string(before) + ": " +
                     describe(d) + "\n";
        }
        if (d.reset_ms != expected_reset_ms(algorithm().algorithm, kLimit, kPeriodMicros,
                                            kFrozenMicros, kLimit - d.remaining)) {
            wrong += "allowed call with a wrong reset: " + describe(d) + "\n";
        }
        before = d.remaining;
        states.insert(d.remaining);
        allowed_units += d.cost;
    }
    EXPECT_TRUE(wrong.empty()) << wrong;
    EXPECT_LE(allowed_units, kLimit);

    // Every denied call (so each client's first denied call too) was decided on a real state of
    // the chain, and its cost did not fit there.
    ASSERT_FALSE(denied.empty()) << "320 calls averaging 3 units must overrun 100";
    for (const Decision& d : denied) {
        const std::int64_t used = kLimit - d.remaining;
        if (states.count(d.remaining) == 0 || d.remaining >= d.cost ||
            d.retry_ms != expected_retry_ms(algorithm().algorithm, kLimit, kPeriodMicros,
                                            kFrozenMicros, used, d.cost) ||
            d.reset_ms != expected_reset_ms(algorithm().algorithm, kLimit, kPeriodMicros,
                                            kFrozenMicros, used)) {
            wrong += "denied call: " + describe(d) + "\n";
        }
    }
    EXPECT_TRUE(wrong.empty()) << wrong;

    // None lost: what is left is exactly what the allowed calls did not take. A cost-0 peek is
    // allowed and reports the remaining units without asking for any.
    Decision after = peek(0);
    EXPECT_TRUE(after.allowed) << describe(after);
    EXPECT_EQ(after.remaining, before) << describe(after);
    EXPECT_EQ(allowed_units, kLimit - after.remaining);
    expect_state(allowed_units);
}

// Five rounds of 64 clients x 3 calls of cost 1 (192 calls, more than any round can allow), with
// every connection moving its clock to the same instant between rounds. What each round allows
// follows from the semantics; N = 100 per hour, so a GCRA or token bucket unit drips back every
// 36 s, and the rounds are at (offsets from 00:00):
//   00:30  fresh key: 100 for everyone.
//   00:45  same aligned window, rolling window and log entry still in force: 0; 15 min of refill
//          is 25 tokens (the GCRA's TAT is 01:30, so 25 more fit in its one-hour tolerance).
//   01:15  new aligned window: fixed_window 100; sliding_window_counter weighs the previous
//          window's 100 by 3/4, leaving 25; rolling window (until 01:30) and the 00:30 log entry
//          still count: 0; 30 min of refill: 50.
//   01:30  the rolling window and the log entry end exactly now (half-open spans): 100; the
//          fixed window is full: 0; sliding_window_counter: 100·1/2 + 25 leaves 25; refill 25.
//   03:30  everything has long expired; 2 h of refill is capped at B = 100: 100 everywhere.
struct Round {
    const char* clock;
    std::int64_t micros;
    std::map<Algorithm, int> allowed;
};

const std::vector<Round>& rounds() {
    static const std::vector<Round> all = {
        {"2026-01-01 00:30:00+00",
         kMidnight + kHour / 2,
         {{Algorithm::kFixedWindow, 100},
          {Algorithm::kRollingWindow, 100},
          {Algorithm::kSlidingWindow, 100},
          {Algorithm::kSlidingWindowCounter, 100},
          {Algorithm::kTokenBucket, 100},
          {Algorithm::kGcra, 100}}},
        {"2026-01-01 00:45:00+00",
         kMidnight + kHour * 3 / 4,
         {{Algorithm::kFixedWindow, 0},
          {Algorithm::kRollingWindow, 0},
          {Algorithm::kSlidingWindow, 0},
          {Algorithm::kSlidingWindowCounter, 0},
          {Algorithm::kTokenBucket, 25},
          {Algorithm::kGcra, 25}}},
        {"2026-01-01 01:15:00+00",
         kMidnight + kHour * 5 / 4,
         {{Algorithm::kFixedWindow, 100},
          {Algorithm::kRollingWindow, 0},
          {Algorithm::kSlidingWindow, 0},
          {Algorithm::kSlidingWindowCounter, 25},
          {Algorithm::kTokenBucket, 50},
          {Algorithm::kGcra, 50}}},
        {"2026-01-01 01:30:00+00",
         kMidnight + kHour * 3 / 2,
         {{Algorithm::kFixedWindow, 0},
          {Algorithm::kRollingWindow, 100},
          {Algorithm::kSlidingWindow, 100},
          {Algorithm::kSlidingWindowCounter, 25},
          {Algorithm::kTokenBucket, 25},
          {Algorithm::kGcra, 25}}},
        {"2026-01-01 03:30:00+00",
         kMidnight + kHour * 7 / 2,
         {{Algorithm::kFixedWindow, 100},
          {Algorithm::kRollingWindow, 100},
          {Algorithm::kSlidingWindow, 100},
          {Algorithm::kSlidingWindowCounter, 100},
          {Algorithm::kTokenBucket, 100},
          {Algorithm::kGcra, 100}}},
    };
    return all;
}

TEST_P(NativeOneKey, ClockAdvancingBetweenRoundsAllowsWhatTheAlgorithmRefills) {
    constexpr int kCallsEach = 3;
    const std::vector<Round>& all_rounds = rounds();
    const int round_count = static_cast<int>(all_rounds.size());
    const int per_round = kClients * kCallsEach;
    // Slots by round, client, call; each written by its own client only.
    std::vector<Decision> results(round_count * per_round);
    RoundBarrier barrier(kClients);
    const Combination combination = GetParam();

    std::vector<std::string> failures =
        run_parallel_clients(kClients, nullptr, [&](int client, PgConnection& conn) {
            for (int round = 0; round < round_count; ++round) {
                // The clock is per session, so moving it before the barrier cannot affect the
                // calls of the previous round that other clients are still making.
                freeze_clock(conn, all_rounds[round].clock);
                barrier.arrive_and_wait();
                for (int call = 0; call < kCallsEach; ++call) {
                    results[round * per_round + client * kCallsEach + call] =
                        call_native(conn, "consume", kHotKey, combination, 1);
                }
            }
        });
    ASSERT_TRUE(failures.empty()) << join_lines(failures);

    for (int round = 0; round < round_count; ++round) {
        SCOPED_TRACE(std::string("round at ") + all_rounds[round].clock);
        const int expected = all_rounds[round].allowed.at(algorithm().algorithm);
        std::multiset<std::int64_t> allowed_remaining;
        std::string wrong;
        for (int slot = 0; slot < per_round; ++slot) {
            const Decision& d = results[round * per_round + slot];
            if (!d.returned) {
                wrong += "slot " + std::to_string(slot) + ": no result\n";
            } else if (d.allowed) {
                allowed_remaining.insert(d.remaining);
                if (d.retry_ms != 0) {
                    wrong += describe(d) + "\n";
                }
            } else if (d.remaining != 0 || d.retry_ms < 1) {
                // The round overran the key, which stays full while the clock stands still.
                wrong += describe(d) + "\n";
            }
        }
        EXPECT_TRUE(wrong.empty()) << wrong;
        // Exactly the round's allowance, handed out as remaining expected - 1, ..., 0.
        std::multiset<std::int64_t> permutation;
        for (int remaining = 0; remaining < expected; ++remaining) {
            permutation.insert(remaining);
        }
        EXPECT_EQ(allowed_remaining, permutation);
    }

    freeze_clock(setup_, all_rounds.back().clock);
    Decision after = call_native(setup_, "peek", kHotKey, combination, 1);
    EXPECT_FALSE(after.allowed) << describe(after);
    EXPECT_EQ(after.remaining, 0) << describe(after);
    EXPECT_EQ(scalar(std::string("SELECT count(*) FROM ") + engine().table), "1");
    EXPECT_EQ(scalar(std::string("SELECT count(*) FROM ") + engine().other_table), "0");
}

INSTANTIATE_TEST_SUITE_P(AllAlgorithmsAndEngines, NativeOneKey,
                         ::testing::ValuesIn(all_combinations()), combination_name);

// ---- many keys, 64 connections, per engine --------------------------------------------------

// 64 connections over 10,000 keys: each key is called once by each of 16 clients (client c
// takes the keys k with k % 4 == c % 4), every client in its own order, so many rows are locked
// and inserted concurrently. Key k uses algorithm k % 6, so one run covers every algorithm;
// limit 10 < 16 calls, so every key must end exactly full.
class NativeManyKeys : public FreshExtensionTest,
                       public ::testing::WithParamInterface<EngineCase> {};

TEST_P(NativeManyKeys, SixtyFourClientsOnTenThousandKeysFillEveryKeyExactly) {
    constexpr int kKeys = 10000;
    constexpr int kKeyLimit = 10;
    constexpr int kClientGroups = 4;
    constexpr int kCallsPerKey = kClients / kClientGroups;
    const EngineCase engine = GetParam();
    const std::vector<AlgorithmCase>& algorithms = all_algorithms();

    std::vector<std::string> keys;
    std::vector<Combination> combinations;
    for (int key = 0; key < kKeys; ++key) {
        keys.push_back("native:k" + std::to_string(key));
        combinations.push_back({algorithms[key % algorithms.size()], engine});
    }
    // Written by every client, so atomic; read once the threads are joined. A key's bit r is
    // set by the allowed call that reported remaining r: each must be set exactly once.
    std::vector<std::atomic<int>> calls_per_key(kKeys);
    std::vector<std::atomic<int>> allowed_per_key(kKeys);
    std::vector<std::atomic<std::uint64_t>> remaining_seen(kKeys);
    for (int key = 0; key < kKeys; ++key) {
        calls_per_key[key].store(0);
        allowed_per_key[key].store(0);
        remaining_seen[key].store(0);
    }
    std::atomic<int> wrong_results{0};

    std::vector<std::string> failures = run_parallel_clients(
        kClients, [](int, PgConnection& conn) { freeze_clock(conn, kFrozenClock); },
        [&](int client, PgConnection& conn) {
            std::mt19937 random(static_cast<unsigned>(client));
            std::vector<int> order;
            for (int key = client % kClientGroups; key < kKeys; key += kClientGroups) {
                order.push_back(key);
            }
            std::shuffle(order.begin(), order.end(), random);
            for (int key : order) {
                Decision d =
                    call_native(conn, "consume", keys[key], combinations[key], 1, kKeyLimit);
                calls_per_key[key].fetch_add(1);
                if (d.allowed) {
                    allowed_per_key[key].fetch_add(1);
                    const bool in_range = d.remaining >= 0 && d.remaining < kKeyLimit;
                    const std::uint64_t bit = std::uint64_t{1} << (in_range ? d.remaining : 63);
                    if (!in_range || d.retry_ms != 0 ||
                        (remaining_seen[key].fetch_or(bit) & bit) != 0) {
                        wrong_results.fetch_add(1);
                    }
                } else if (d.remaining != 0 || d.retry_ms < 1) {
                    wrong_results.fetch_add(1);
                }
            }
        });
    ASSERT_TRUE(failures.empty()) << join_lines(failures);

    std::string wrong_keys;
    const std::uint64_t all_remaining = (std::uint64_t{1} << kKeyLimit) - 1;
    for (int key = 0; key < kKeys; ++key) {
        if (calls_per_key[key].load() != kCallsPerKey || allowed_per_key[key].load() != kKeyLimit ||
            remaining_seen[key].load() != all_remaining) {
            wrong_keys += keys[key] + " (" + combinations[key].algorithm.name +
                          "): " + std::to_string(calls_per_key[key].load()) + " calls, " +
                          std::to_string(allowed_per_key[key].load()) + " allowed\n";
        }
    }
    EXPECT_TRUE(wrong_keys.empty()) << wrong_keys;
    EXPECT_EQ(wrong_results.load(), 0);

    // One row per key, none lost or duplicated, each exactly full in its algorithm's terms.
    PgResult rows = setup_.query(std::string("SELECT key, ") + kStateColumns + " FROM " +
                                 engine.table + " ORDER BY key");
    ASSERT_EQ(rows.rows(), kKeys) << rows.describe();
    std::map<std::string, int> index_of;
    for (int key = 0; key < kKeys; ++key) {
        index_of[keys[key]] = key;
    }
    std::set<std::string> seen_keys;
    std::string wrong_rows;
    for (int row = 0; row < rows.rows(); ++row) {
        const std::string key = rows.value(row, 0);
        seen_keys.insert(key);
        auto found = index_of.find(key);
        if (found == index_of.end()) {
            wrong_rows += "unexpected key " + key + "\n";
            continue;
        }
        const std::string mismatch =
            state_mismatch(rows, row,
                           expected_state(combinations[found->second].algorithm, kKeyLimit,
                                          kPeriodMicros, kFrozenMicros, kKeyLimit));
        if (!mismatch.empty()) {
            wrong_rows += key + ":" + mismatch + "\n";
        }
    }
    EXPECT_EQ(seen_keys.size(), static_cast<std::size_t>(kKeys));
    EXPECT_TRUE(wrong_rows.empty()) << wrong_rows;
    EXPECT_EQ(scalar(std::string("SELECT count(*) FROM ") + engine.other_table), "0");
}

INSTANTIATE_TEST_SUITE_P(BothEngines, NativeManyKeys, ::testing::ValuesIn(all_engines()),
                         engine_name);

}  // namespace
}  // namespace ratelimit_test
