// The memory engine (p_engine => 'memory') under real connections. It proves that:
//  - 64 backends racing on one key get exactly the decisions of some serial order of their
//    calls, for every algorithm (the partition lock serialises them as the row lock does for
//    the table engines), and the engine's allowed/denied counters count every consume call;
//  - 64 backends on a thousand keys lose nothing on any key;
//  - a million keys through a 100,000-slot store told to evict when full
//    (ratelimit.memory_when_full = evict) evict least recently used keys only, account for every
//    slot they take, and never evict a key that is in constant use;
//  - decisions are not transactional: a rolled-back or failed transaction keeps its decision,
//    and read-only transactions can consume on the memory engine but not on the table engine.
//
// The store lives in shared memory for the server's lifetime and is shared by every test and
// every earlier run (DROP EXTENSION does not empty it), so each test uses keys no earlier run
// can have used, never assumes an empty store, and checks its counters as differences. Every
// connection freezes the decision clock (ratelimit.test_clock) in the year 2100: nothing refills
// or expires during a test, so every count is known in advance, and the background worker,
// which expires keys by the real clock, never touches the tests' keys.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <ostream>
#include <random>
#include <set>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "fresh_extension_fixture.hpp"
#include "parallel_clients.hpp"
#include "pg_connection.hpp"
#include "run_unique.hpp"

namespace ratelimit_test {
namespace {

constexpr std::int64_t kMicrosPerSecond = 1000000;
constexpr std::int64_t kHour = 3600 * kMicrosPerSecond;

// 2100-01-01 00:00:00 UTC in µs since the Unix epoch: an hour boundary, so it starts the aligned
// one-hour windows of fixed_window and sliding_window_counter.
constexpr std::int64_t kMidnight = 4102444800LL * kMicrosPerSecond;

// Mid-window, so that aligned windows (which end at 01:00) and windows opened by the first call
// (which end at 01:30) give different retry and reset times.
constexpr char kFrozenClock[] = "2100-01-01 00:30:00+00";
constexpr std::int64_t kFrozenMicros = kMidnight + kHour / 2;

constexpr int kClients = 64;
constexpr char kPeriod[] = "1 hour";
constexpr std::int64_t kPeriodMicros = kHour;

enum class Algorithm {
    kFixedWindow,
    kRollingWindow,
    kSlidingWindow,
    kSlidingWindowCounter,
    kTokenBucket,
    kGcra,
};

// One limit as the SQL call spells it.
struct LimitCase {
    Algorithm algorithm;
    const char* name;  // p_algorithm
    int limit;         // p_limit, N
    int burst;         // p_burst, B; 0 = not passed (B = N)
    const char* label;
};

bool is_bucket(Algorithm algorithm) {
    return algorithm == Algorithm::kTokenBucket || algorithm == Algorithm::kGcra;
}

// What a fresh key allows at once, and what the decisions report as their limit: B for the
// bucket algorithms, N for the windows.
std::int64_t allowance(const LimitCase& c) {
    return is_bucket(c.algorithm) && c.burst > 0 ? c.burst : c.limit;
}

void PrintTo(const LimitCase& c, std::ostream* out) {
    *out << c.label;
}

std::string case_name(const ::testing::TestParamInfo<LimitCase>& info) {
    return info.param.label;
}

// Every algorithm, and the bucket algorithms once more with a burst below the limit. The memory
// engine keeps a sliding_window log inside its slot, so that algorithm takes limits up to 6.
const std::vector<LimitCase>& one_key_cases() {
    static const std::vector<LimitCase> cases = {
        {Algorithm::kFixedWindow, "fixed_window", 100, 0, "fixed_window"},
        {Algorithm::kRollingWindow, "rolling_window", 100, 0, "rolling_window"},
        {Algorithm::kSlidingWindow, "sliding_window", 6, 0, "sliding_window"},
        {Algorithm::kSlidingWindowCounter, "sliding_window_counter", 100, 0,
         "sliding_window_counter"},
        {Algorithm::kTokenBucket, "token_bucket", 100, 0, "token_bucket"},
        {Algorithm::kGcra, "gcra", 100, 0, "gcra"},
        {Algorithm::kTokenBucket, "token_bucket", 100, 40, "token_bucket_burst40"},
        {Algorithm::kGcra, "gcra", 100, 40, "gcra_burst40"},
    };
    return cases;
}

// ---- expectations, for a fresh key and every call at kFrozenMicros ----------------------------
//
// With the clock frozen, a key's whole state is the units `used` so far, and a decision follows
// from it: remaining = allowance - used, and the retry and reset waits below.

std::int64_t ceil_div(std::int64_t value, std::int64_t divisor) {
    return value <= 0 ? value / divisor : (value + divisor - 1) / divisor;
}

// Decisions report milliseconds, the µs rounded up.
std::int64_t to_ms(std::int64_t micros) {
    return ceil_div(micros, 1000);
}

constexpr std::int64_t kWindowStart = kFrozenMicros / kPeriodMicros * kPeriodMicros;

// reset_after_ms once `used` units are taken.
std::int64_t expected_reset_ms(const LimitCase& c, std::int64_t used) {
    if (used == 0) {
        return 0;
    }
    switch (c.algorithm) {
        case Algorithm::kFixedWindow:
            return to_ms(kWindowStart + kPeriodMicros - kFrozenMicros);
        case Algorithm::kRollingWindow:
        case Algorithm::kSlidingWindow:
            // The window, or the log's one entry, started now.
            return to_ms(kPeriodMicros);
        case Algorithm::kSlidingWindowCounter:
            // This window's units weigh until the end of the next one.
            return to_ms(kWindowStart + 2 * kPeriodMicros - kFrozenMicros);
        case Algorithm::kTokenBucket:
        case Algorithm::kGcra:
            // The `used` tokens drip back at N per P.
            return to_ms(ceil_div(used * kPeriodMicros, c.limit));
    }
    return -1;
}

// retry_after_ms of a call of `cost` denied when `used` units are taken.
std::int64_t expected_retry_ms(const LimitCase& c, std::int64_t used, std::int64_t cost) {
    switch (c.algorithm) {
        case Algorithm::kFixedWindow:
            return to_ms(kWindowStart + kPeriodMicros - kFrozenMicros);
        case Algorithm::kRollingWindow:
        case Algorithm::kSlidingWindow:
            return to_ms(kPeriodMicros);
        case Algorithm::kSlidingWindowCounter:
            // No previous window, so the call waits for the next one, where this window's `used`
            // units weigh less and less: w + 2P - floor((N - c)·P / used).
            return to_ms(kWindowStart + 2 * kPeriodMicros -
                         (c.limit - cost) * kPeriodMicros / used - kFrozenMicros);
        case Algorithm::kTokenBucket:
        case Algorithm::kGcra:
            return to_ms(ceil_div((cost - (allowance(c) - used)) * kPeriodMicros, c.limit));
    }
    return -1;
}

// ---- calls ----------------------------------------------------------------------------------

void freeze_clock(PgConnection& conn) {
    conn.query(std::string("SET ratelimit.test_clock = '") + kFrozenClock + "'");
    if (!conn.query_params("SELECT ratelimit.clock_now() = $1::timestamptz", {kFrozenClock})
             .single_bool()) {
        throw std::runtime_error(std::string("ratelimit.test_clock did not freeze the clock at ") +
                                 kFrozenClock);
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

Decision decision_of(const PgResult& result, const std::string& what, int cost) {
    if (!result.ok() || result.rows() != 1 || result.columns() != 5) {
        throw std::runtime_error(what + ": " + result.describe());
    }
    for (int column = 0; column < 5; ++column) {
        if (result.is_null(0, column)) {
            throw std::runtime_error(what + ": a NULL field in its decision");
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

// One statement, so one transaction in autocommit (or a statement of the caller's open one).
// `function` is consume or peek.
Decision call_memory(PgConnection& conn, const char* function, const std::string& key,
                     const LimitCase& c, int cost) {
    const std::string limit_text = std::to_string(c.limit);
    const std::string cost_text = std::to_string(cost);
    const std::string burst_text = std::to_string(c.burst);
    PgResult result = conn.exec_params(
        std::string("SELECT allowed, \"limit\", remaining, retry_after_ms, reset_after_ms"
                    " FROM ratelimit.") +
            function +
            "($1::text, $2::integer, $3::interval, $4::integer, $5::text, 'memory', $6::integer)",
        {key.c_str(), limit_text.c_str(), kPeriod, cost_text.c_str(), c.name,
         c.burst > 0 ? burst_text.c_str() : nullptr});
    return decision_of(result, std::string("ratelimit.") + function + "('" + key + "')", cost);
}

// The engine's counters (ratelimit.memory_stats). They are global to the server, so tests
// compare them before and after; no other test of this binary runs meanwhile.
struct Stats {
    std::int64_t entries = 0;
    std::int64_t capacity = 0;
    std::int64_t evictions = 0;
    std::int64_t expired = 0;
    std::int64_t allowed = 0;
    std::int64_t denied = 0;

    // Every slot a key took is still held, was evicted or was freed as expired (the background
    // worker may free expired slots at any moment, which moves one from entries to expired), so
    // between two readings this grows by exactly the number of keys given a slot. Only
    // ratelimit.reset frees a slot without counting it, and no test here resets.
    std::int64_t slots_taken() const { return entries + evictions + expired; }
};

Stats read_stats(PgConnection& conn) {
    PgResult row = conn.query(
        "SELECT entries, capacity, evictions, expired, allowed, denied FROM "
        "ratelimit.memory_stats");
    if (row.rows() != 1 || row.columns() != 6) {
        throw std::runtime_error("ratelimit.memory_stats: " + row.describe());
    }
    Stats stats;
    stats.entries = std::stoll(row.value(0, 0));
    stats.capacity = std::stoll(row.value(0, 1));
    stats.evictions = std::stoll(row.value(0, 2));
    stats.expired = std::stoll(row.value(0, 3));
    stats.allowed = std::stoll(row.value(0, 4));
    stats.denied = std::stoll(row.value(0, 5));
    return stats;
}

// A prefix no earlier run can have used: the store keeps every run's keys, and a key met again
// would not start fresh.
std::string unique_prefix() {
    const ::testing::TestInfo* test = ::testing::UnitTest::GetInstance()->current_test_info();
    return std::string("memtest:") + test->test_suite_name() + "." + test->name() + ":" +
           run_unique_hex() + ":";
}

// Checks that `decisions`, every consume call made on one fresh key (in any order), are those of
// one serial order of the calls under a clock standing still. Returns what is wrong ("" if
// nothing) and sets `used` to the units the allowed calls took.
//
// Serialized, the allowed calls form one chain allowance -> allowance - c1 -> ... with every
// step the cost of its call, so their remaining values are all different; every denied call saw
// one of the chain's states and its cost did not fit there.
std::string serial_order_mismatch(const LimitCase& c, const std::vector<Decision>& decisions,
                                  std::int64_t* used) {
    const std::int64_t full = allowance(c);
    std::string wrong;
    std::vector<Decision> allowed;
    std::vector<Decision> denied;
    for (const Decision& d : decisions) {
        if (!d.returned) {
            wrong += "a call returned nothing\n";
            continue;
        }
        const std::int64_t used_then = full - d.remaining;
        bool ok = d.limit == full && d.remaining >= 0 && d.remaining <= full &&
                  d.reset_ms == expected_reset_ms(c, used_then);
        if (d.allowed) {
            ok = ok && d.retry_ms == 0;
            allowed.push_back(d);
        } else {
            ok = ok && d.cost > d.remaining && used_then > 0 &&
                 d.retry_ms == expected_retry_ms(c, used_then, d.cost);
            denied.push_back(d);
        }
        if (!ok) {
            wrong += describe(d) + "\n";
        }
    }
    std::sort(allowed.begin(), allowed.end(),
              [](const Decision& a, const Decision& b) { return a.remaining > b.remaining; });
    std::set<std::int64_t> states = {full};
    std::int64_t before = full;
    for (const Decision& d : allowed) {
        if (before - d.cost != d.remaining) {
            wrong += "an allowed call breaks the chain at " + std::to_string(before) + ": " +
                     describe(d) + "\n";
        }
        before = d.remaining;
        states.insert(d.remaining);
    }
    for (const Decision& d : denied) {
        if (states.count(d.remaining) == 0) {
            wrong += "a denied call saw a state no serial order reaches: " + describe(d) + "\n";
        }
    }
    *used = full - before;
    return wrong;
}

// Every test: a fresh extension, the memory engine available, the setup connection's clock
// frozen, and a key prefix of its own.
class MemoryEngineTest : public FreshExtensionTest {
  protected:
    void SetUp() override {
        FreshExtensionTest::SetUp();
        if (HasFatalFailure()) {
            return;
        }
        PgResult stats = setup_.exec("SELECT capacity FROM ratelimit.memory_stats");
        ASSERT_TRUE(stats.ok()) << "the memory engine needs shared_preload_libraries = "
                                   "'ratelimit': "
                                << stats.describe();
        freeze_clock(setup_);
        prefix_ = unique_prefix();
    }

    std::string prefix_;
};

// ---- one key, 64 connections, every algorithm -----------------------------------------------

class MemoryEngineOneKey : public MemoryEngineTest,
                           public ::testing::WithParamInterface<LimitCase> {};

// Phase 1: 64 connections x 5 consume calls of random cost 1..5 (seeded per client, so a failure
// reruns the same way). Phase 2: 64 new connections x 2 calls of cost 1, 128 units, more than
// the whole allowance, so whatever phase 1 left is taken unit by unit: in total exactly the
// allowance (N for the windows, B for the buckets) is allowed, however the calls interleaved.
TEST_P(MemoryEngineOneKey, SixtyFourClientsGetExactlyTheAllowanceInOneSerialOrder) {
    constexpr int kMixedCalls = 5;
    constexpr int kUnitCalls = 2;
    constexpr int kCallsEach = kMixedCalls + kUnitCalls;
    const LimitCase c = GetParam();
    const std::int64_t full = allowance(c);
    const std::string key = prefix_ + "hot";
    ASSERT_GE(kClients * kUnitCalls, full) << "phase 2 must be able to drain the whole allowance";

    Decision fresh = call_memory(setup_, "peek", key, c, 0);
    ASSERT_TRUE(fresh.allowed && fresh.remaining == full && fresh.reset_ms == 0)
        << "the key must be new: " << describe(fresh);
    const Stats before = read_stats(setup_);

    // Slots by client, then call: phase 1's calls, then phase 2's; each written by its client.
    std::vector<Decision> results(kClients * kCallsEach);
    auto freeze = [](int, PgConnection& conn) { freeze_clock(conn); };
    std::vector<std::string> failures =
        run_parallel_clients(kClients, freeze, [&](int client, PgConnection& conn) {
            std::mt19937 random(static_cast<unsigned>(client * 7919 + 17));
            std::uniform_int_distribution<int> cost(1, 5);
            for (int call = 0; call < kMixedCalls; ++call) {
                results[client * kCallsEach + call] =
                    call_memory(conn, "consume", key, c, cost(random));
            }
        });
    ASSERT_TRUE(failures.empty()) << join_lines(failures);
    failures = run_parallel_clients(kClients, freeze, [&](int client, PgConnection& conn) {
        for (int call = kMixedCalls; call < kCallsEach; ++call) {
            results[client * kCallsEach + call] = call_memory(conn, "consume", key, c, 1);
        }
    });
    ASSERT_TRUE(failures.empty()) << join_lines(failures);

    // A client's later calls come later in the serial order: its remaining never goes up.
    std::string wrong;
    for (int client = 0; client < kClients; ++client) {
        for (int call = 1; call < kCallsEach; ++call) {
            const Decision& earlier = results[client * kCallsEach + call - 1];
            const Decision& later = results[client * kCallsEach + call];
            if (later.remaining > earlier.remaining) {
                wrong += "client " + std::to_string(client) + " call " + std::to_string(call) +
                         ": " + describe(later) + " after " + describe(earlier) + "\n";
            }
        }
    }
    EXPECT_TRUE(wrong.empty()) << wrong;

    std::int64_t used = -1;
    EXPECT_EQ(serial_order_mismatch(c, results, &used), "");
    EXPECT_EQ(used, full) << "exactly the allowance, no more, no less";

    const auto allowed_calls =
        std::count_if(results.begin(), results.end(), [](const Decision& d) { return d.allowed; });
    const std::int64_t denied_calls = static_cast<std::int64_t>(results.size()) - allowed_calls;
    EXPECT_GT(denied_calls, 0) << "320 calls averaging 3 units must overrun any allowance";

    // Nothing lost: the key is empty, and peeks say so without counting as consume calls.
    Decision after = call_memory(setup_, "peek", key, c, 1);
    EXPECT_FALSE(after.allowed) << describe(after);
    EXPECT_EQ(after.remaining, 0) << describe(after);
    EXPECT_EQ(after.retry_ms, expected_retry_ms(c, full, 1)) << describe(after);
    EXPECT_EQ(after.reset_ms, expected_reset_ms(c, full)) << describe(after);
    Decision after_zero = call_memory(setup_, "peek", key, c, 0);
    EXPECT_TRUE(after_zero.allowed) << describe(after_zero);
    EXPECT_EQ(after_zero.remaining, 0) << describe(after_zero);

    const Stats now = read_stats(setup_);
    EXPECT_EQ(now.allowed - before.allowed, allowed_calls);
    EXPECT_EQ(now.denied - before.denied, denied_calls);
    // The one key took one slot, whatever else happened to other keys meanwhile.
    EXPECT_EQ(now.slots_taken() - before.slots_taken(), 1);
}

INSTANTIATE_TEST_SUITE_P(MemoryEngine, MemoryEngineOneKey, ::testing::ValuesIn(one_key_cases()),
                         case_name);

// ---- many keys, 64 connections --------------------------------------------------------------

// 64 connections each make 1000 consume calls of random cost 1..3 on random keys among 10,000, so
// calls on different keys of one partition and on the same key meet constantly. Key k uses
// limit case k % 8 (every algorithm, buckets also with a burst), with allowances of 6 to 20
// units, so some keys fill up and others do not. Every key's calls must form a serial order,
// and a peek must then show exactly the units its allowed calls took.
class MemoryEngineManyKeys : public MemoryEngineTest {};

TEST_F(MemoryEngineManyKeys, SixtyFourClientsOnTenThousandKeysKeepEveryKeysCountExact) {
    constexpr int kKeys = 10000;
    constexpr int kCallsEach = 1000;
    const std::vector<LimitCase> cases = {
        {Algorithm::kFixedWindow, "fixed_window", 20, 0, "fixed_window"},
        {Algorithm::kRollingWindow, "rolling_window", 20, 0, "rolling_window"},
        {Algorithm::kSlidingWindow, "sliding_window", 6, 0, "sliding_window"},
        {Algorithm::kSlidingWindowCounter, "sliding_window_counter", 20, 0,
         "sliding_window_counter"},
        {Algorithm::kTokenBucket, "token_bucket", 20, 0, "token_bucket"},
        {Algorithm::kGcra, "gcra", 20, 0, "gcra"},
        {Algorithm::kTokenBucket, "token_bucket", 20, 12, "token_bucket_burst12"},
        {Algorithm::kGcra, "gcra", 20, 12, "gcra_burst12"},
    };
    std::vector<std::string> keys;
    for (int key = 0; key < kKeys; ++key) {
        keys.push_back(prefix_ + std::to_string(key));
    }
    auto case_of = [&](int key) -> const LimitCase& { return cases[key % cases.size()]; };

    const Stats before = read_stats(setup_);
    struct Call {
        int key = -1;
        Decision decision;
    };
    std::vector<Call> calls(kClients * kCallsEach);  // each slot: one client's
    std::vector<std::string> failures = run_parallel_clients(
        kClients, [](int, PgConnection& conn) { freeze_clock(conn); },
        [&](int client, PgConnection& conn) {
            std::mt19937 random(static_cast<unsigned>(client * 104729 + 3));
            std::uniform_int_distribution<int> pick_key(0, kKeys - 1);
            std::uniform_int_distribution<int> pick_cost(1, 3);
            for (int call = 0; call < kCallsEach; ++call) {
                Call& slot = calls[client * kCallsEach + call];
                slot.key = pick_key(random);
                slot.decision = call_memory(conn, "consume", keys[slot.key], case_of(slot.key),
                                            pick_cost(random));
            }
        });
    ASSERT_TRUE(failures.empty()) << join_lines(failures);

    std::vector<std::vector<Decision>> by_key(kKeys);
    std::int64_t allowed_calls = 0;
    for (const Call& call : calls) {
        ASSERT_GE(call.key, 0);
        by_key[call.key].push_back(call.decision);
        allowed_calls += call.decision.allowed ? 1 : 0;
    }
    const std::int64_t denied_calls = static_cast<std::int64_t>(calls.size()) - allowed_calls;

    std::string wrong;
    int keys_used = 0;
    int keys_full = 0;
    for (int key = 0; key < kKeys; ++key) {
        const LimitCase& c = case_of(key);
        std::int64_t used = -1;
        const std::string mismatch = serial_order_mismatch(c, by_key[key], &used);
        if (!mismatch.empty()) {
            wrong += keys[key] + " (" + c.label + "):\n" + mismatch;
        }
        keys_used += used > 0 ? 1 : 0;
        keys_full += used == allowance(c) ? 1 : 0;
        // A cost-0 peek reports what is left without asking for anything.
        const Decision peek = call_memory(setup_, "peek", keys[key], c, 0);
        if (!peek.allowed || peek.remaining != allowance(c) - used ||
            peek.reset_ms != expected_reset_ms(c, used)) {
            wrong += keys[key] + " (" + c.label + "): " + std::to_string(used) +
                     " units allowed, but peek says " + describe(peek) + "\n";
        }
    }
    EXPECT_TRUE(wrong.empty()) << wrong;
    // The race must have been one: many keys used, some of them filled.
    EXPECT_GT(keys_used, kKeys / 2);
    EXPECT_GT(keys_full, 0);

    const Stats now = read_stats(setup_);
    EXPECT_EQ(now.allowed - before.allowed, allowed_calls);
    EXPECT_EQ(now.denied - before.denied, denied_calls);
    // Only keys with an allowed call took a slot (a fresh key's first call always fits, so that
    // is every key called), one each.
    EXPECT_EQ(now.slots_taken() - before.slots_taken(), keys_used);
}

// consume_many on the memory engine decides its keys partition by partition, a run of a
// partition's keys under one lock: 64 connections each make 40 calls of 100 keys drawn from
// 2,000 (a key may be drawn twice in one call), limit 20 per key. Every key must be allowed
// exactly min(calls, 20) times with the remainders 19, 18, ..., 0 each once (one serial order
// across all connections), a key drawn twice in one call must be decided in the order given,
// and a peek must then show what is left.
TEST_F(MemoryEngineManyKeys, SixtyFourClientsBatchingOnTwoThousandKeysKeepEveryKeysCountExact) {
    constexpr int kKeys = 2000;
    constexpr int kCallsEach = 40;
    constexpr int kBatch = 100;
    constexpr int kLimit = 20;
    struct Entry {
        int key = -1;
        bool allowed = false;
        int remaining = -1;
    };
    std::vector<std::vector<Entry>> batches(kClients * kCallsEach);
    std::vector<std::string> failures = run_parallel_clients(
        kClients, [](int, PgConnection& conn) { freeze_clock(conn); },
        [&](int client, PgConnection& conn) {
            std::mt19937 random(static_cast<unsigned>(client * 7919 + 11));
            std::uniform_int_distribution<int> pick_key(0, kKeys - 1);
            for (int call = 0; call < kCallsEach; ++call) {
                std::vector<Entry>& batch = batches[client * kCallsEach + call];
                std::string keys = "ARRAY[";
                for (int i = 0; i < kBatch; ++i) {
                    Entry entry;
                    entry.key = pick_key(random);
                    batch.push_back(entry);
                    keys += (i ? ",'" : "'") + prefix_ + std::to_string(entry.key) + "'";
                }
                keys += "]";
                PgResult result =
                    conn.query("SELECT d.allowed, d.remaining FROM unnest(ratelimit.consume_many(" +
                               keys + ", " + std::to_string(kLimit) +
                               ", '1 hour', p_engine => 'memory')) WITH ORDINALITY AS d "
                               "ORDER BY d.ordinality");
                if (result.rows() != kBatch)
                    throw std::runtime_error("expected one decision per key: " + result.describe());
                for (int i = 0; i < kBatch; ++i) {
                    batch[i].allowed = result.value(i, 0) == "t";
                    batch[i].remaining = std::stoi(result.value(i, 1));
                }
            }
        });
    ASSERT_TRUE(failures.empty()) << join_lines(failures);

    std::vector<int> calls(kKeys, 0);
    std::vector<std::vector<int>> remainders(kKeys);
    std::string wrong;
    for (const std::vector<Entry>& batch : batches) {
        std::vector<int> last_remaining(kKeys, kLimit);
        for (const Entry& entry : batch) {
            ++calls[entry.key];
            if (!entry.allowed)
                continue;
            remainders[entry.key].push_back(entry.remaining);
            // A repeat within the call is decided after the earlier one.
            if (entry.remaining >= last_remaining[entry.key])
                wrong += prefix_ + std::to_string(entry.key) + ": decided out of order in a call\n";
            last_remaining[entry.key] = entry.remaining;
        }
    }
    int keys_full = 0;
    for (int key = 0; key < kKeys; ++key) {
        std::vector<int>& got = remainders[key];
        std::sort(got.begin(), got.end());
        const int allowed = std::min(calls[key], kLimit);
        std::vector<int> expected;
        for (int r = kLimit - allowed; r < kLimit; ++r)
            expected.push_back(r);
        if (got != expected)
            wrong += prefix_ + std::to_string(key) + ": " + std::to_string(got.size()) +
                     " allowed of " + std::to_string(calls[key]) + " calls, not one serial order\n";
        keys_full += allowed == kLimit ? 1 : 0;
        const std::string left =
            setup_
                .query("SELECT remaining FROM ratelimit.peek('" + prefix_ + std::to_string(key) +
                       "', " + std::to_string(kLimit) + ", '1 hour', 0, p_engine => 'memory')")
                .single_value();
        if (std::stoi(left) != kLimit - allowed)
            wrong += prefix_ + std::to_string(key) + ": peek says " + left + " left\n";
    }
    EXPECT_TRUE(wrong.empty()) << wrong;
    // 256,000 decisions over 2,000 keys: the race filled keys, in calls that met.
    EXPECT_GT(keys_full, kKeys / 2);
}

// ---- eviction -------------------------------------------------------------------------------

// One connection consumes on 1,000,000 new keys, ten statements of 100,000 calls each, into a
// store of 100,000 slots, while another consumes on one hot key every 10 ms.
//
// The clock is frozen at 2100-01-01 00:30 for both, not real: with the real clock, a run across
// an hour boundary would end the one-hour fixed windows of the keys inserted before it, so a
// full partition would free them as expired instead of evicting them (breaking the bound on
// evictions), and the hot key's count would restart. Frozen, none of the test's keys can expire
// during the test (their windows end at 01:00), and since the worker expires by the real clock,
// it never frees them either.
class MemoryEngineEviction : public MemoryEngineTest {};

TEST_F(MemoryEngineEviction, MillionKeysEvictTheLeastRecentlyUsedAndNeverTheHotKey) {
    constexpr std::int64_t kKeys = 1000000;
    constexpr std::int64_t kChunk = 100000;
    constexpr std::int64_t kHotLimit = 1000000000;
    const std::string inserted_prefix = prefix_ + "k";
    const std::string hot_key = prefix_ + "hot";
    const LimitCase hot = {Algorithm::kFixedWindow, "fixed_window", kHotLimit, 0, "fixed_window"};

    const Stats before = read_stats(setup_);
    // test/run.sh sizes the store at 100,000 keys, the size this test fills ten times over.
    ASSERT_EQ(before.capacity, 100000);
    // By default a full store refuses new keys; this test is about eviction.
    setup_.query("SET ratelimit.memory_when_full = evict");

    PgConnection hot_conn;
    ASSERT_TRUE(hot_conn.connected()) << hot_conn.error_message();
    freeze_clock(hot_conn);
    // The hot key enters the store first, so it is the least recently used of its partition
    // unless its calls keep moving it to the front: without them it would be the first to go.
    Decision first = call_memory(hot_conn, "consume", hot_key, hot, 1);
    ASSERT_TRUE(first.allowed && first.remaining == kHotLimit - 1) << describe(first);

    // Every 10 ms, and once more after the inserter is done, one hot call, which must take one
    // more unit from the same count: an evicted key would start over at kHotLimit - 1. Written
    // by the hot thread only, read once it is joined.
    std::atomic<bool> inserting{true};
    std::int64_t hot_calls = 1;
    std::string hot_wrong;
    std::thread hot_thread([&] {
        try {
            for (bool last = false; !last;) {
                std::this_thread::sleep_for(std::chrono::milliseconds(10));
                last = !inserting.load();
                const Decision d = call_memory(hot_conn, "consume", hot_key, hot, 1);
                ++hot_calls;
                if (!d.allowed || d.remaining != kHotLimit - hot_calls) {
                    hot_wrong = "hot call " + std::to_string(hot_calls) + ": " + describe(d);
                    return;
                }
            }
        } catch (const std::exception& e) {
            hot_wrong = e.what();
        }
    });

    // Every one of the million calls must be allowed (a new key, limit 1,000,000) and none may
    // fail: a full store evicts, it never refuses.
    std::string insert_wrong;
    for (std::int64_t from = 1; from <= kKeys && insert_wrong.empty(); from += kChunk) {
        const std::string first_g = std::to_string(from);
        const std::string last_g = std::to_string(from + kChunk - 1);
        PgResult count = setup_.exec_params(
            "SELECT count(*) FROM generate_series($1::int, $2::int) AS g,"
            " LATERAL ratelimit.consume($3::text || g, 1000000, '1 hour',"
            " p_engine => 'memory') AS d WHERE d.allowed",
            {first_g.c_str(), last_g.c_str(), inserted_prefix.c_str()});
        if (!count.ok() || count.rows() != 1 || count.value(0, 0) != std::to_string(kChunk)) {
            insert_wrong = "keys " + first_g + ".." + last_g + ": " + count.describe() +
                           (count.ok() && count.rows() == 1 ? ", allowed " + count.value(0, 0)
                                                            : std::string());
        }
    }
    inserting.store(false);
    hot_thread.join();
    ASSERT_EQ(insert_wrong, "");
    ASSERT_EQ(hot_wrong, "");

    const Stats after = read_stats(setup_);
    // Every partition received far more new keys (about 7,800) than it has slots (781 or 782),
    // so the store ends full, and never fuller.
    EXPECT_LE(after.entries, after.capacity);
    EXPECT_EQ(after.entries, after.capacity);
    // Every insertion is accounted for: the new keys (and the hot key) are held, or made room by
    // an eviction or by freeing expired slots (only keys older than this test can have expired).
    const std::int64_t new_keys = kKeys + 1;
    EXPECT_EQ((after.evictions - before.evictions) + (after.expired - before.expired),
              new_keys - (after.entries - before.entries));
    EXPECT_GE(after.evictions - before.evictions, kKeys - after.capacity);
    EXPECT_EQ(after.allowed - before.allowed, kKeys + hot_calls);
    EXPECT_EQ(after.denied - before.denied, 0);

    // The hot key kept its whole count.
    const Decision hot_after = call_memory(setup_, "peek", hot_key, hot, 0);
    EXPECT_EQ(hot_after.remaining, kHotLimit - hot_calls) << describe(hot_after);

    // Least recently used first: each partition kept exactly its newest keys. This database's
    // older keys (from earlier tests) were all pushed out, so it holds the hot key and the new
    // keys; a kept key shows its one unit used, an evicted one is fresh.
    // Checked with peeks, which change no count.
    auto kept_and_forgotten = [&](std::int64_t from, std::int64_t to) {
        const std::string first_g = std::to_string(from);
        const std::string last_g = std::to_string(to);
        PgResult counts = setup_.query_params(
            "SELECT count(*) FILTER (WHERE d.remaining = 999999),"
            " count(*) FILTER (WHERE d.remaining = 1000000)"
            " FROM generate_series($1::int, $2::int) AS g,"
            " LATERAL ratelimit.peek($3::text || g, 1000000, '1 hour', p_engine => 'memory') AS d",
            {first_g.c_str(), last_g.c_str(), inserted_prefix.c_str()});
        return std::pair<std::int64_t, std::int64_t>(std::stoll(counts.value(0, 0)),
                                                     std::stoll(counts.value(0, 1)));
    };
    std::int64_t kept = 0;
    std::int64_t forgotten = 0;
    for (std::int64_t from = 1; from <= kKeys; from += kChunk) {
        const auto counts = kept_and_forgotten(from, from + kChunk - 1);
        kept += counts.first;
        forgotten += counts.second;
    }
    EXPECT_EQ(kept + forgotten, kKeys) << "every key is either kept or fresh";
    // Eviction takes only this database's keys: the slots other databases hold (earlier suites'
    // keys, on their frozen clocks) stay theirs.
    const std::int64_t own_entries =
        std::stoll(setup_
                       .query("SELECT entries FROM ratelimit.memory_stats_by_database()"
                              " WHERE database = current_database()")
                       .value(0, 0));
    EXPECT_EQ(kept, own_entries - 1);
    // The first 10,000 keys were followed by about 7,700 more in each partition: all evicted.
    // The last 10,000 are about 80 per partition, well within its 781 newest: all kept.
    EXPECT_EQ(kept_and_forgotten(1, 10000), std::make_pair(std::int64_t{0}, std::int64_t{10000}));
    EXPECT_EQ(kept_and_forgotten(kKeys - 9999, kKeys),
              std::make_pair(std::int64_t{10000}, std::int64_t{0}));

    // The kept keys count until 2100 on the frozen clock: give their slots back, so that the
    // tests after this one find room for their new keys.
    for (std::int64_t from = 1; from <= kKeys; from += kChunk) {
        const std::string first_g = std::to_string(from);
        const std::string last_g = std::to_string(from + kChunk - 1);
        setup_.query_params(
            "SELECT count(*) FROM generate_series($1::int, $2::int) AS g"
            " WHERE ratelimit.reset($3::text || g, 'memory')",
            {first_g.c_str(), last_g.c_str(), inserted_prefix.c_str()});
    }
    setup_.query_params("SELECT ratelimit.reset($1::text, 'memory')", {hot_key.c_str()});
}

// ---- transactions ---------------------------------------------------------------------------

// The memory engine writes no table and no WAL: a decision is final when the call returns. So
// a rolled-back or failed transaction keeps its decisions, another backend sees them at once,
// and a read-only transaction can consume, while the table engine, which writes a row, refuses
// in the same read-only transaction.
class MemoryEngineTransactions : public MemoryEngineTest {};

TEST_F(MemoryEngineTransactions, RolledBackAndReadOnlyTransactionsKeepTheirDecisions) {
    const LimitCase c = {Algorithm::kFixedWindow, "fixed_window", 10, 0, "fixed_window"};
    const std::string key = prefix_ + "tx";
    PgConnection a;
    ASSERT_TRUE(a.connected()) << a.error_message();
    freeze_clock(a);
    // The other connection, setup_, checks with peeks, which change nothing.
    auto remaining_seen_elsewhere = [&] {
        return call_memory(setup_, "peek", key, c, 0).remaining;
    };
    const Stats before = read_stats(setup_);

    // Rolled back: seen by another backend before and after the rollback.
    a.query("BEGIN");
    Decision d = call_memory(a, "consume", key, c, 1);
    EXPECT_TRUE(d.allowed && d.remaining == 9) << describe(d);
    EXPECT_EQ(remaining_seen_elsewhere(), 9) << "visible before the transaction ends";
    a.query("ROLLBACK");
    EXPECT_EQ(remaining_seen_elsewhere(), 9) << "kept by ROLLBACK";

    // Failed: the transaction aborts after the call, and the decision stays.
    a.query("BEGIN");
    d = call_memory(a, "consume", key, c, 1);
    EXPECT_TRUE(d.allowed && d.remaining == 8) << describe(d);
    PgResult failed = a.exec("SELECT 1 / 0");
    EXPECT_EQ(failed.sqlstate(), "22012") << failed.describe();
    a.query("ROLLBACK");
    EXPECT_EQ(remaining_seen_elsewhere(), 8) << "kept by a failed transaction";

    // Read only, committed.
    a.query("BEGIN READ ONLY");
    d = call_memory(a, "consume", key, c, 1);
    EXPECT_TRUE(d.allowed && d.remaining == 7) << describe(d);
    d = call_memory(a, "peek", key, c, 1);
    EXPECT_TRUE(d.allowed && d.remaining == 7) << describe(d);
    PgResult commit = a.exec("COMMIT");
    EXPECT_TRUE(commit.ok()) << commit.describe();
    EXPECT_EQ(a.transaction_status(), PQTRANS_IDLE);
    EXPECT_EQ(remaining_seen_elsewhere(), 7);

    // Read only, and the table engine's consume in it fails: the transaction ends in a rollback,
    // the memory engine's decision made before stays, and the table got nothing.
    a.query("BEGIN READ ONLY");
    d = call_memory(a, "consume", key, c, 1);
    EXPECT_TRUE(d.allowed && d.remaining == 6) << describe(d);
    PgResult table = a.exec_params(
        "SELECT allowed FROM ratelimit.consume($1::text, 10, '1 hour', p_engine => 'table')",
        {key.c_str()});
    EXPECT_EQ(table.status(), PGRES_FATAL_ERROR) << table.describe();
    EXPECT_EQ(table.sqlstate(), "25006") << table.describe();
    EXPECT_EQ(a.transaction_status(), PQTRANS_INERROR);
    a.query("COMMIT");  // in a failed transaction, this rolls back
    EXPECT_EQ(a.transaction_status(), PQTRANS_IDLE);
    EXPECT_EQ(remaining_seen_elsewhere(), 6);
    EXPECT_EQ(scalar("SELECT count(*) FROM ratelimit.key_state"), "0");

    const Stats now = read_stats(setup_);
    EXPECT_EQ(now.allowed - before.allowed, 4);
    EXPECT_EQ(now.denied - before.denied, 0);
    EXPECT_EQ(now.slots_taken() - before.slots_taken(), 1);
}

}  // namespace
}  // namespace ratelimit_test
