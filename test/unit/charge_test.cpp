// Charges (Action::kCharge): units counted whatever remains, the part past the limit carried
// forward as each algorithm's header comment says. Checked against small models: a charge that
// fits is exactly a consume; fixed_window against a ledger of windows, each starting with what
// the one before held past N; token_bucket and gcra decide alike; sliding_window,
// sliding_window_counter and rolling_window against their own arithmetic; and a charge never
// reports less than 0 remaining, never overflows, and never changes a state it does not write.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <map>
#include <random>

#include "ratelimit/algorithms.hpp"
#include "ratelimit/validation.hpp"

namespace ratelimit {
namespace {

constexpr Micros kStart = 1767225600LL * kMicrosPerSecond;  // aligned to every period below

constexpr Algorithm kAll[] = {Algorithm::kFixedWindow,   Algorithm::kRollingWindow,
                              Algorithm::kSlidingWindow, Algorithm::kSlidingWindowCounter,
                              Algorithm::kTokenBucket,   Algorithm::kGcra};

bool bucket(Algorithm algorithm) {
    return algorithm == Algorithm::kTokenBucket || algorithm == Algorithm::kGcra;
}

Limit limit_of(Algorithm algorithm, std::int64_t n, Micros p, std::int64_t b) {
    return Limit{algorithm, n, p, bucket(algorithm) ? b : n};
}

Decision probe(const Limit& limit, const KeyState& state, Micros now, std::int64_t cost,
               Action action = Action::kPeek) {
    KeyState copy = state;
    return decide(limit, copy, now, cost, action);
}

bool same(const Decision& a, const Decision& b) {
    return a.allowed == b.allowed && a.limit == b.limit && a.remaining == b.remaining &&
           a.retry_after == b.retry_after && a.reset_after == b.reset_after;
}

// Within what remains, a charge is a consume: the same state, and it reports what a one-unit
// peek says afterwards. Past it, it still counts; remaining never goes below 0.
TEST(Charge, WithinWhatRemainsItIsAConsume) {
    std::mt19937_64 rng(7);
    for (Algorithm algorithm : kAll) {
        SCOPED_TRACE(algorithm_name(algorithm));
        for (int sequence = 0; sequence < 3000; ++sequence) {
            const Limit limit = limit_of(algorithm, 1 + static_cast<std::int64_t>(rng() % 8),
                                         1000 * static_cast<Micros>(1 + rng() % 10),
                                         1 + static_cast<std::int64_t>(rng() % 10));
            KeyState state;
            Micros now = kStart + static_cast<Micros>(rng() % 5000);
            for (int step = 0; step < 30; ++step) {
                now += static_cast<Micros>(rng() % (limit.period / 2 + 1));
                const std::int64_t most = bucket(algorithm) ? limit.burst : limit.limit;
                const std::int64_t cost = static_cast<std::int64_t>(rng() % (most + 1));
                const int what = static_cast<int>(rng() % 4);
                if (what == 0) {
                    decide(limit, state, now, cost, Action::kConsume);
                } else if (what == 1) {
                    decide(limit, state, now, cost, Action::kRefund);
                } else {
                    const std::int64_t charge =
                        what == 2 ? cost : cost + static_cast<std::int64_t>(rng() % (3 * most));
                    // (A consume or peek of more than N is not a valid call.)
                    const bool fits =
                        charge <= most && probe(limit, state, now, charge, Action::kPeek).allowed;
                    KeyState consumed = state;
                    const Decision c =
                        fits ? decide(limit, consumed, now, charge, Action::kConsume) : Decision{};
                    KeyState before = state;
                    const Decision d = decide(limit, state, now, charge, Action::kCharge);
                    ASSERT_GE(d.remaining, 0);
                    ASSERT_EQ(d.state_changed, charge > 0);
                    if (charge == 0) {
                        ASSERT_EQ(state, before);
                    }
                    ASSERT_TRUE(same(d, probe(limit, state, now, 1)));
                    if (fits && charge > 0) {
                        ASSERT_TRUE(c.allowed);
                        ASSERT_EQ(state, consumed) << "a charge that fits is a consume";
                    }
                }
            }
        }
    }
}

// fixed_window against a ledger: each window's units, the first of them carried from the
// window before (what it held past N).
TEST(Charge, FixedWindowCarriesThePartPastTheLimitWindowByWindow) {
    std::mt19937_64 rng(11);
    for (int sequence = 0; sequence < 3000; ++sequence) {
        const std::int64_t n = 1 + static_cast<std::int64_t>(rng() % 6);
        const Micros p = 1000 * static_cast<Micros>(1 + rng() % 5);
        const Limit limit = limit_of(Algorithm::kFixedWindow, n, p, n);
        std::map<Micros, std::int64_t> ledger;  // window index -> units it holds
        auto held = [&](Micros window) {
            // Windows never written hold what the one before held past N.
            std::int64_t carried = 0;
            Micros from = ledger.empty() ? window : std::min(window, ledger.begin()->first);
            for (Micros w = from; w <= window; ++w) {
                const auto it = ledger.find(w);
                const std::int64_t units = it != ledger.end() ? it->second : carried;
                if (w == window)
                    return units;
                carried = std::max<std::int64_t>(0, units - n);
            }
            return carried;
        };
        KeyState state;
        Micros now = kStart;
        for (int step = 0; step < 40; ++step) {
            now += static_cast<Micros>(rng() % (2 * p));
            const Micros window = (now - kStart) / p;
            const std::int64_t units = held(window);
            const std::int64_t cost = static_cast<std::int64_t>(rng() % (3 * n + 1));
            const int what = static_cast<int>(rng() % 4);
            if (what == 0) {
                const std::int64_t c = std::min(cost, n);
                const Decision d = decide(limit, state, now, c, Action::kConsume);
                // A call of no units always fits.
                ASSERT_EQ(d.allowed, c == 0 || units + c <= n)
                    << "step " << step << " window " << window << " n " << n << " c " << c
                    << " state " << state.instant << "/" << state.amount << "/" << state.carry;
                ASSERT_EQ(d.remaining, std::max<std::int64_t>(0, n - units - (d.allowed ? c : 0)));
                if (d.allowed && c > 0)
                    ledger[window] = units + c;
            } else if (what == 1) {
                const std::int64_t c = std::min(cost, n);
                decide(limit, state, now, c, Action::kRefund);
                ledger[window] = std::max<std::int64_t>(0, units - c);
            } else if (what == 2) {
                const Decision d = decide(limit, state, now, cost, Action::kCharge);
                if (cost > 0)
                    ledger[window] = units + cost;
                ASSERT_EQ(d.remaining, std::max<std::int64_t>(0, n - held(window)));
            } else {
                const Decision d = probe(limit, state, now, 1);
                ASSERT_EQ(d.remaining, std::max<std::int64_t>(0, n - units)) << "step " << step;
                if (!d.allowed) {
                    // Denied until the first window with room for one unit more.
                    Micros w = window + 1;
                    while (held(w) + 1 > n)
                        ++w;
                    ASSERT_EQ(now + d.retry_after, kStart + w * p);
                    ASSERT_FALSE(probe(limit, state, kStart + w * p - 1, 1).allowed);
                    ASSERT_TRUE(probe(limit, state, kStart + w * p, 1).allowed);
                }
            }
        }
    }
}

// token_bucket and gcra decide alike, debts included.
TEST(Charge, TokenBucketAndGcraDecideAlike) {
    std::mt19937_64 rng(13);
    for (int sequence = 0; sequence < 3000; ++sequence) {
        const std::int64_t n = 1 + static_cast<std::int64_t>(rng() % 7);
        const std::int64_t b = 1 + static_cast<std::int64_t>(rng() % 9);
        const Micros p = 1000 * static_cast<Micros>(1 + rng() % 7);
        const Limit bucket_limit = limit_of(Algorithm::kTokenBucket, n, p, b);
        const Limit gcra_limit = limit_of(Algorithm::kGcra, n, p, b);
        KeyState tb;
        KeyState g;
        Micros now = kStart + static_cast<Micros>(rng() % 3000);
        for (int step = 0; step < 40; ++step) {
            now += static_cast<Micros>(rng() % p);
            const int what = static_cast<int>(rng() % 4);
            const Action action = what == 0   ? Action::kConsume
                                  : what == 1 ? Action::kRefund
                                  : what == 2 ? Action::kCharge
                                              : Action::kPeek;
            const std::int64_t most = action == Action::kCharge ? 4 * b : b;
            const std::int64_t cost = static_cast<std::int64_t>(rng() % (most + 1));
            const Decision a = decide(bucket_limit, tb, now, cost, action);
            const Decision c = decide(gcra_limit, g, now, cost, action);
            ASSERT_EQ(a.allowed, c.allowed) << "step " << step;
            ASSERT_EQ(a.remaining, c.remaining) << "step " << step;
            ASSERT_EQ(a.retry_after, c.retry_after) << "step " << step;
            ASSERT_EQ(a.reset_after, c.reset_after) << "step " << step;
        }
    }
}

// A debt is repaid by the refill: after a charge of c on a full bucket of B, the next unit
// fits once c - B + 1 tokens have dripped in at N per P.
TEST(Charge, BucketDebtIsRepaidByTheRefill) {
    for (Algorithm algorithm : {Algorithm::kTokenBucket, Algorithm::kGcra}) {
        for (std::int64_t c : {11, 15, 40}) {
            const Limit limit = limit_of(algorithm, 5, 1000000, 10);  // 5 a second, burst 10
            KeyState state;
            const Decision d = decide(limit, state, kStart, c, Action::kCharge);
            EXPECT_FALSE(d.allowed);
            EXPECT_EQ(d.remaining, 0);
            const Micros wait = (c - 10 + 1) * 1000000 / 5;
            EXPECT_EQ(d.retry_after, wait) << algorithm_name(algorithm) << " " << c;
            EXPECT_FALSE(probe(limit, state, kStart + wait - 1, 1).allowed);
            EXPECT_TRUE(probe(limit, state, kStart + wait, 1).allowed);
            EXPECT_EQ(d.reset_after, c * 1000000 / 5) << "full again once all c dripped back";
        }
    }
}

// sliding_window: a charge is a log entry counted for one period.
TEST(Charge, SlidingWindowCountsTheChargeForOnePeriod) {
    const Limit limit = limit_of(Algorithm::kSlidingWindow, 4, 10000, 4);
    KeyState state;
    decide(limit, state, kStart, 3, Action::kConsume);
    const Decision d = decide(limit, state, kStart + 2000, 9, Action::kCharge);
    EXPECT_FALSE(d.allowed);
    EXPECT_EQ(d.retry_after, 10000) << "the charge alone fills the window: it must leave";
    EXPECT_FALSE(probe(limit, state, kStart + 11999, 1).allowed);
    EXPECT_TRUE(probe(limit, state, kStart + 12000, 1).allowed);
    EXPECT_EQ(probe(limit, state, kStart + 12000, 1).remaining, 4);
}

// sliding_window_counter: the charged window's units weigh in the next window.
TEST(Charge, SlidingWindowCounterWeighsTheChargeInTheNextWindow) {
    const Micros p = 10000;
    const Limit limit = limit_of(Algorithm::kSlidingWindowCounter, 10, p, 10);
    KeyState state;
    decide(limit, state, kStart + 3000, 25, Action::kCharge);
    for (Micros e = 0; e < p; e += 250) {
        // One more unit fits when 25·(P - e)/P + 1 <= 10.
        const bool fits = 25 * (p - e) + p <= 10 * p;
        EXPECT_EQ(probe(limit, state, kStart + p + e, 1).allowed, fits) << "e=" << e;
    }
    EXPECT_EQ(probe(limit, state, kStart + 2 * p, 1).remaining, 10);
}

// rolling_window: the part past N opens the windows that follow, back to back.
TEST(Charge, RollingWindowCarriesIntoBackToBackWindows) {
    const Micros p = 10000;
    const Limit limit = limit_of(Algorithm::kRollingWindow, 10, p, 10);
    KeyState state;
    const Micros t0 = kStart + 1234;
    const Decision d = decide(limit, state, t0, 27, Action::kCharge);
    EXPECT_EQ(d.retry_after, 2 * p) << "17 then 7 carried: one unit fits in the third window";
    EXPECT_EQ(d.reset_after, 3 * p);
    EXPECT_EQ(probe(limit, state, t0 + p, 1).remaining, 0);
    EXPECT_EQ(probe(limit, state, t0 + 2 * p - 1, 1).remaining, 0);
    EXPECT_EQ(probe(limit, state, t0 + 2 * p, 1).remaining, 3);
    EXPECT_TRUE(decide(limit, state, t0 + 2 * p + 5, 3, Action::kConsume).allowed);
    EXPECT_FALSE(probe(limit, state, t0 + 2 * p + 6, 1).allowed);
    EXPECT_EQ(probe(limit, state, t0 + 3 * p, 1).remaining, 10);
}

// A state written under a higher limit may hold more than N: it carries nothing (only a
// charge's excess is carried), so lowering a limit decides as before.
TEST(Charge, OnlyAChargesExcessIsCarried) {
    for (Algorithm algorithm : {Algorithm::kFixedWindow, Algorithm::kRollingWindow}) {
        const Limit high = limit_of(algorithm, 8, 10000, 8);
        const Limit low = limit_of(algorithm, 2, 10000, 2);
        KeyState state;
        decide(high, state, kStart, 8, Action::kConsume);
        EXPECT_EQ(probe(low, state, kStart + 10000, 1).remaining, 2) << algorithm_name(algorithm);
        KeyState charged;
        decide(low, charged, kStart, 8, Action::kCharge);
        EXPECT_EQ(probe(low, charged, kStart + 10000, 1).remaining, 0) << algorithm_name(algorithm);
    }
}

// The largest charges on the smallest limits: bounded debts, no overflow, waits within about a
// year, and the key free again after them.
TEST(Charge, HugeChargesAreBounded) {
    for (Algorithm algorithm : kAll) {
        SCOPED_TRACE(algorithm_name(algorithm));
        const Limit limit = limit_of(algorithm, 1, kMinPeriod, 1);
        KeyState state;
        Decision d;
        for (int i = 0; i < 1000; ++i)
            d = decide(limit, state, kStart, 2147483647, Action::kCharge);
        EXPECT_FALSE(d.allowed);
        EXPECT_EQ(d.remaining, 0);
        EXPECT_GT(d.retry_after, 0);
        EXPECT_LE(d.reset_after, kMaxWindow + 2 * kMinPeriod);
        EXPECT_TRUE(probe(limit, state, kStart + d.reset_after, 1).allowed);
        EXPECT_LE(idle_from(limit, state), kStart + kMaxWindow + 2 * kMinPeriod);
    }
}

// A bucket's debt read under a slower limit: charged deep under N = 2^31 - 3 a year, read under 2
// a year, it owes at most what the slow limit works off in about a year, and its waits say so
// (the wait once overflowed 64 bits and came out meaningless).
TEST(Charge, BucketDebtsReadUnderASlowerLimitStayBounded) {
    const Micros year = 365LL * 24 * 3600 * kMicrosPerSecond;
    for (Algorithm algorithm : {Algorithm::kTokenBucket, Algorithm::kGcra}) {
        SCOPED_TRACE(algorithm_name(algorithm));
        const Limit fast = limit_of(algorithm, 2147483645, year, 2147483645);
        const Limit slow = limit_of(algorithm, 2, year, 2);
        KeyState charged;
        for (int i = 0; i < 4; ++i)
            decide(fast, charged, kStart, 2147483645, Action::kCharge);
        const Decision d = probe(slow, charged, kStart + kMicrosPerSecond, 1, Action::kPeek);
        EXPECT_FALSE(d.allowed);
        EXPECT_GT(d.retry_after, 0);
        EXPECT_LE(d.retry_after, kMaxWindow + slow.period);
        EXPECT_GE(d.reset_after, d.retry_after);
        EXPECT_LE(d.reset_after, kMaxWindow + slow.period);
        EXPECT_TRUE(probe(slow, charged, kStart + kMicrosPerSecond + d.retry_after, 1).allowed);
    }
}

// A window's debt read under another limit: charged under a small period, read under a long one,
// it owes at most what the long one works off in about a year; and a refund of a window written
// under a higher limit (past this one's N, but not by a charge) is not taken for a debt. Both
// once overflowed the instant of the wait.
TEST(Charge, DebtsReadUnderAnotherLimitStayBounded) {
    for (Algorithm algorithm : {Algorithm::kFixedWindow, Algorithm::kRollingWindow}) {
        SCOPED_TRACE(algorithm_name(algorithm));
        const Limit fast = limit_of(algorithm, 1000, kMinPeriod, 0);
        const Limit slow = limit_of(algorithm, 1, 300 * 24 * 3600 * kMicrosPerSecond, 0);
        KeyState charged;
        for (int i = 0; i < 100; ++i)
            decide(fast, charged, kStart, 2147483647, Action::kCharge);
        const Decision d = probe(slow, charged, kStart, 1, Action::kPeek);
        EXPECT_GE(d.reset_after, 0);
        EXPECT_LE(d.reset_after, kMaxWindow + 2 * slow.period);

        const Limit high = limit_of(algorithm, 1000000, kMicrosPerSecond, 0);
        KeyState written;
        decide(high, written, kStart, 900000, Action::kConsume);
        KeyState refunded = written;
        const Decision r = decide(slow, refunded, kStart + 1, 1, Action::kRefund);
        EXPECT_EQ(refunded.carry, 0) << "a refund never marks a window as a charge's";
        EXPECT_LE(r.reset_after, slow.period);
    }
}

}  // namespace
}  // namespace ratelimit
