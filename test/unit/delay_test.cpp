// Delay instead of deny (Limit::max_delay): a token_bucket or gcra call that would be denied is
// admitted for now + its wait when that wait is at most max_delay, and charged at once.
//
// Checked against a model that knows nothing of debts or arrival times: it keeps the admitted
// calls at their go instants (the instant each may go), as consumes of a token bucket that
// arrived then, and answers every question from that schedule: a call goes at the first
// instant, no earlier than now nor than the last go instant, at which the schedule's bucket
// holds its cost. Then, over random sequences:
//  (a) a call with max_delay 0 decides exactly as before (and as the same call would without
//      its max_delay, whenever it is not delayed);
//  (b) a call is delayed exactly when the model's wait lies in (0, max_delay];
//  (c) the go instants never hold more than B + floor(N·d/P) units in any span [t, t + d];
//  (d) token_bucket and gcra decide alike;
//  (e) a peek with max_delay reports what the consume would, and changes nothing;
//  (f) `blocked` is set exactly when a block denies the call;
// and (g) require_valid_limit refuses a delay for the window algorithms and out of range.
// A delay that is not charged shows at once: two calls get the same go instant, the model and
// (c) disagree, and DelayedCallsQueueBehindEachOther counts them.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <limits>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "algorithm_models.hpp"
#include "ratelimit/algorithms.hpp"
#include "ratelimit/error.hpp"

namespace ratelimit {
namespace {

using Wide = __int128;

// 2026-01-01 00:00:00 UTC.
constexpr Micros kT0 = 1767225600LL * kMicrosPerSecond;

constexpr Algorithm kBuckets[] = {Algorithm::kTokenBucket, Algorithm::kGcra};
constexpr Algorithm kWindows[] = {Algorithm::kFixedWindow, Algorithm::kRollingWindow,
                                  Algorithm::kSlidingWindow, Algorithm::kSlidingWindowCounter};

constexpr int kSequences = 20000;

Wide ceil_div(Wide a, Wide b) {
    Wide q = a / b;
    return (a % b != 0 && a > 0) ? q + 1 : q;
}

std::string show(const Decision& d) {
    std::ostringstream out;
    out << "{allowed=" << d.allowed << " limit=" << d.limit << " remaining=" << d.remaining
        << " retry_after=" << d.retry_after << " reset_after=" << d.reset_after
        << " blocked=" << d.blocked << "}";
    return out.str();
}

bool same(const Decision& a, const Decision& b) {
    return a.allowed == b.allowed && a.limit == b.limit && a.remaining == b.remaining &&
           a.retry_after == b.retry_after && a.reset_after == b.reset_after &&
           a.blocked == b.blocked;
}

::testing::AssertionResult SameDecision(const Decision& got, const Decision& want) {
    if (same(got, want))
        return ::testing::AssertionSuccess();
    return ::testing::AssertionFailure() << "got " << show(got) << ", want " << show(want);
}

bool delayed(const Decision& d) {
    return d.allowed && d.retry_after > 0;
}

// Units at a go instant.
struct Go {
    Micros at = 0;
    std::int64_t units = 0;
};

// (c): over every span between two go instants, at most B + floor(N·d/P) units. Empty when it
// holds, else the span that breaks it.
std::string schedule_violation(std::vector<Go> goes, const Limit& limit) {
    std::sort(goes.begin(), goes.end(), [](const Go& a, const Go& b) { return a.at < b.at; });
    for (std::size_t i = 0; i < goes.size(); ++i) {
        Wide units = 0;
        for (std::size_t j = i; j < goes.size(); ++j) {
            units += goes[j].units;
            const Micros d = goes[j].at - goes[i].at;
            if (units > Wide(limit.burst) + Wide(limit.limit) * d / limit.period) {
                std::ostringstream out;
                out << models::wide_string(units) << " units go in [" << goes[i].at << ", "
                    << goes[j].at << "]";
                return out.str();
            }
        }
    }
    return {};
}

// The schedule model. Calls come with a clock that never goes back (token_bucket and gcra
// decide alike under such a clock; see algorithm_models.hpp).
class ScheduleModel {
  public:
    explicit ScheduleModel(const Limit& limit) : limit_(limit) {}

    void block(Micros until) { blocked_until_ = std::max(blocked_until_, until); }

    // The wait of a call of `cost` at `now` (not blocked): 0 when it may go at once.
    Micros wait(Micros now, std::int64_t cost) const { return first_go(now, cost) - now; }

    Decision decide(Micros now, std::int64_t cost, Micros max_delay, bool consume) {
        Decision d;
        d.limit = limit_.burst;
        if (now < blocked_until_) {
            // Nothing is scheduled while blocked: the waits run to the block's end, then on to
            // what the schedule says at that instant.
            const Micros end = blocked_until_;
            d.blocked = true;
            d.retry_after = end - now + (cost == 0 ? 0 : wait(end, cost));
            d.reset_after = end - now + std::max<Micros>(0, full_at(end) - end);
            return d;
        }
        const Micros w = cost == 0 ? 0 : wait(now, cost);
        if (w == 0 || w <= max_delay) {
            d.allowed = true;
            d.retry_after = w;
            // A peek admitted at once takes nothing (as before); a delayed one reports what
            // the consume would.
            if (cost > 0 && (consume || w > 0)) {
                std::vector<Go> scheduled = goes_;
                scheduled.push_back({now + w, cost});
                d.remaining = remaining(scheduled, now);
                d.reset_after = std::max<Micros>(0, full_at(scheduled, now) - now);
                if (consume)
                    goes_ = scheduled;
                return d;
            }
        } else {
            d.retry_after = w;
        }
        d.remaining = remaining(goes_, now);
        d.reset_after = std::max<Micros>(0, full_at(goes_, now) - now);
        return d;
    }

    const std::vector<Go>& goes() const { return goes_; }

  private:
    // The first instant x >= max(now, the last go instant) at which the bucket of the schedule
    // holds `cost`. Its level at x, scaled by P, is the least over the moments it could last
    // have been full (x itself, just before each go instant) of B·P plus the refill since,
    // minus what went since; each term grows with x, so the first x is where the last of them
    // reaches cost·P.
    Micros first_go(Micros now, std::int64_t cost) const {
        Micros x = std::max(now, last_go());
        Wide since = 0;  // units going at or after goes_[i]
        for (std::size_t i = goes_.size(); i-- > 0;) {
            since += goes_[i].units;
            const Wide short_by = Wide(limit_.period) * (cost + since - limit_.burst);
            x = std::max(x, goes_[i].at + static_cast<Micros>(ceil_div(short_by, limit_.limit)));
        }
        return x;
    }
    Micros full_at(Micros now) const { return full_at(goes_, now); }
    Micros full_at(const std::vector<Go>& goes, Micros now) const {
        Micros x = now;
        Wide since = 0;
        for (std::size_t i = goes.size(); i-- > 0;) {
            since += goes[i].units;
            x = std::max(x, goes[i].at + static_cast<Micros>(
                                             ceil_div(Wide(limit_.period) * since, limit_.limit)));
        }
        return x;
    }
    // Whole units at `now`: none while a call is still to go.
    std::int64_t remaining(const std::vector<Go>& goes, Micros now) const {
        if (!goes.empty() && goes.back().at > now)
            return 0;
        Wide level = Wide(limit_.burst) * limit_.period;
        Wide since = 0;
        for (std::size_t i = goes.size(); i-- > 0;) {
            since += goes[i].units;
            level = std::min(level, Wide(limit_.burst) * limit_.period +
                                        Wide(limit_.limit) * (now - goes[i].at) -
                                        Wide(limit_.period) * since);
        }
        return static_cast<std::int64_t>(std::max<Wide>(0, level / limit_.period));
    }
    Micros last_go() const { return goes_.empty() ? 0 : goes_.back().at; }

    Limit limit_;
    std::vector<Go> goes_;  // admitted calls, in the order (and so the instants) they go
    Micros blocked_until_ = 0;
};

Limit bucket_limit(Algorithm algorithm, std::int64_t n, Micros period, std::int64_t burst,
                   Micros max_delay = 0) {
    Limit limit{algorithm, n, period, burst};
    limit.max_delay = max_delay;
    return limit;
}

Limit with_delay(Limit limit, Micros max_delay) {
    limit.max_delay = max_delay;
    return limit;
}

// Random sequences of consumes, peeks and blocks at random instants (often the same instant,
// so that calls pile up), random costs and random max_delay, on both bucket algorithms side
// by side and the model: (a) to (f).
TEST(Delay, RandomSequencesFollowTheScheduleModel) {
    std::mt19937_64 rng(20260301);
    int delays = 0, denials = 0, blocked_calls = 0;
    for (int sequence = 0; sequence < kSequences; ++sequence) {
        const std::int64_t n = 1 + static_cast<std::int64_t>(rng() % 6);
        const Micros period = 1000 * static_cast<Micros>(1 + rng() % 20);
        const std::int64_t burst = 1 + static_cast<std::int64_t>(rng() % 6);
        const Limit base[2] = {bucket_limit(Algorithm::kTokenBucket, n, period, burst),
                               bucket_limit(Algorithm::kGcra, n, period, burst)};
        KeyState states[2];
        ScheduleModel model(base[0]);
        std::vector<Go> goes[2];
        Micros now = kT0 + static_cast<Micros>(rng() % 1000000);
        for (int step = 0; step < 40; ++step) {
            const int gap = static_cast<int>(rng() % 4);
            if (gap == 1)
                now += static_cast<Micros>(rng() % (period / std::max<std::int64_t>(1, n) + 1));
            else if (gap == 2)
                now += static_cast<Micros>(rng() % (3 * period + 1));
            const std::int64_t cost = static_cast<std::int64_t>(rng() % (burst + 1));
            const int which = static_cast<int>(rng() % 4);
            const Micros max_delay = which == 0   ? 0
                                     : which == 1 ? static_cast<Micros>(1 + rng() % period)
                                     : which == 2 ? static_cast<Micros>(1 + rng() % (8 * period))
                                                  : static_cast<Micros>(1000 * (1 + rng() % 4));
            const int what = static_cast<int>(rng() % 10);
            SCOPED_TRACE(::testing::Message()
                         << "sequence " << sequence << " step " << step << " N=" << n
                         << " P=" << period << " B=" << burst << " cost=" << cost
                         << " max_delay=" << max_delay << " now=" << now);
            if (what == 0) {
                const Micros until = now + static_cast<Micros>(rng() % (2 * period));
                for (KeyState& state : states)
                    block_until(state, until);
                model.block(until);
                continue;
            }
            const bool consume = what >= 3;
            const Action action = consume ? Action::kConsume : Action::kPeek;
            const bool was_blocked = now < states[0].blocked_until;
            const Micros model_wait = was_blocked || cost == 0 ? 0 : model.wait(now, cost);
            const Decision want = model.decide(now, cost, max_delay, consume);
            Decision got[2];
            for (int a = 0; a < 2; ++a) {
                SCOPED_TRACE(algorithm_name(base[a].algorithm));
                const Limit limit = with_delay(base[a], max_delay);
                // (a), (e): the same call without a delay, the consume and the peek, on copies.
                KeyState plain = states[a];
                const Decision undelayed = decide(base[a], plain, now, cost, action);
                KeyState consumed = states[a];
                const Decision would = decide(limit, consumed, now, cost, Action::kConsume);
                KeyState peeked = states[a];
                const Decision peek = decide(limit, peeked, now, cost, Action::kPeek);
                ASSERT_EQ(peeked, states[a]) << "a peek changes nothing";
                ASSERT_FALSE(peek.state_changed);
                ASSERT_EQ(delayed(peek), delayed(would));
                if (delayed(would)) {
                    ASSERT_TRUE(SameDecision(peek, would)) << "a peek reports what consume would";
                }

                const KeyState before = states[a];
                got[a] = decide(limit, states[a], now, cost, action);
                ASSERT_TRUE(SameDecision(got[a], want));
                if (!consume) {
                    ASSERT_EQ(states[a], before);
                }
                // (b)
                const bool model_delays =
                    !was_blocked && cost > 0 && model_wait > 0 && model_wait <= max_delay;
                ASSERT_EQ(delayed(got[a]), model_delays) << "model wait " << model_wait;
                // (a): not delayed, it is exactly the call without a delay.
                if (!delayed(got[a])) {
                    ASSERT_TRUE(SameDecision(got[a], undelayed));
                    if (consume) {
                        ASSERT_EQ(states[a], plain);
                    }
                } else {
                    ASSERT_FALSE(undelayed.allowed);
                    ASSERT_EQ(got[a].remaining, 0);
                    ASSERT_EQ(got[a].state_changed, consume);
                    if (consume) {
                        ASSERT_NE(states[a], before) << "a delayed consume is charged";
                    }
                }
                // (f)
                ASSERT_EQ(got[a].blocked, was_blocked);
                if (got[a].blocked) {
                    ASSERT_FALSE(got[a].allowed);
                }
                if (consume && got[a].allowed && cost > 0)
                    goes[a].push_back({now + got[a].retry_after, cost});
            }
            // (d)
            ASSERT_TRUE(SameDecision(got[1], got[0]));
            if (delayed(got[0]))
                ++delays;
            if (!got[0].allowed)
                ++denials;
            if (got[0].blocked)
                ++blocked_calls;
        }
        // (c)
        for (int a = 0; a < 2; ++a) {
            ASSERT_EQ(schedule_violation(goes[a], base[a]), "")
                << algorithm_name(base[a].algorithm) << " sequence " << sequence;
        }
    }
    // The sequences reach every case.
    EXPECT_GT(delays, kSequences);
    EXPECT_GT(denials, kSequences);
    EXPECT_GT(blocked_calls, kSequences / 10);
}

// With max_delay 0 throughout, the decisions are those of the brute-force token bucket of the
// algorithms' own tests (algorithm_models.hpp), as before delays existed.
TEST(Delay, NoDelayDecidesAsTheTokenBucketModel) {
    std::mt19937_64 rng(17);
    for (Algorithm algorithm : kBuckets) {
        SCOPED_TRACE(algorithm_name(algorithm));
        for (int sequence = 0; sequence < 5000; ++sequence) {
            const std::int64_t n = 1 + static_cast<std::int64_t>(rng() % 6);
            const Micros period = 1000 * static_cast<Micros>(1 + rng() % 20);
            const std::int64_t burst = 1 + static_cast<std::int64_t>(rng() % 6);
            const Limit limit = bucket_limit(algorithm, n, period, burst, 0);
            auto model = models::make_model(limit);
            KeyState state;
            Micros now = kT0;
            for (int step = 0; step < 30; ++step) {
                now += static_cast<Micros>(rng() % (period + 1));
                const std::int64_t cost = static_cast<std::int64_t>(rng() % (burst + 1));
                const Action action = rng() % 3 == 0 ? Action::kPeek : Action::kConsume;
                const Decision got = decide(limit, state, now, cost, action);
                const Decision want = model->decide(now, cost, action);
                ASSERT_EQ(got.allowed, want.allowed);
                ASSERT_EQ(got.remaining, want.remaining);
                ASSERT_EQ(got.retry_after, want.retry_after);
                ASSERT_EQ(got.reset_after, want.reset_after);
                ASSERT_FALSE(got.blocked);
            }
        }
    }
}

// One unit a second, a burst of 1, and calls piling up at one instant: each goes a second after
// the one before, until the wait passes max_delay; the one denied is charged nothing. Without
// the charge, every call after the first would be told the same second.
TEST(Delay, DelayedCallsQueueBehindEachOther) {
    for (Algorithm algorithm : kBuckets) {
        SCOPED_TRACE(algorithm_name(algorithm));
        const Limit limit = bucket_limit(algorithm, 1, kMicrosPerSecond, 1, 10 * kMicrosPerSecond);
        KeyState state;
        for (int call = 0; call <= 10; ++call) {
            const Decision d = decide(limit, state, kT0, 1, Action::kConsume);
            ASSERT_TRUE(d.allowed) << call;
            EXPECT_EQ(d.retry_after, call * kMicrosPerSecond) << call;
            EXPECT_EQ(d.remaining, 0);
            // Full again a second after the last one goes.
            EXPECT_EQ(d.reset_after, (call + 1) * kMicrosPerSecond);
            EXPECT_TRUE(d.state_changed);
        }
        const KeyState before = state;
        const Decision refused = decide(limit, state, kT0, 1, Action::kConsume);
        EXPECT_FALSE(refused.allowed);
        EXPECT_EQ(refused.retry_after, 11 * kMicrosPerSecond);
        EXPECT_FALSE(refused.state_changed);
        EXPECT_EQ(state, before) << "a call whose wait exceeds max_delay is charged nothing";
        // Half a second later the queue has moved up by half a second.
        const Decision later = decide(limit, state, kT0 + kMicrosPerSecond / 2, 1, Action::kPeek);
        EXPECT_FALSE(later.allowed);
        EXPECT_EQ(later.retry_after, 10 * kMicrosPerSecond + kMicrosPerSecond / 2);
        const Decision within = decide(with_delay(limit, 11 * kMicrosPerSecond), state,
                                       kT0 + kMicrosPerSecond / 2, 1, Action::kConsume);
        EXPECT_TRUE(within.allowed);
        EXPECT_EQ(within.retry_after, 10 * kMicrosPerSecond + kMicrosPerSecond / 2);
    }
}

// A call that waits for a full bucket's worth goes at the first whole microsecond the bucket
// holds it, when it has refilled a little past full; what it refilled past full is lost, as it
// would be for a call arriving then, so the next full bucket comes a microsecond later than the
// debt alone would say. (3 per 2 ms, a burst of 5: 5 units every 3333.33 µs.)
TEST(Delay, RefillPastFullIsNotCarriedIntoTheNextCall) {
    for (Algorithm algorithm : kBuckets) {
        SCOPED_TRACE(algorithm_name(algorithm));
        const Limit limit = bucket_limit(algorithm, 3, 2000, 5, kMicrosPerSecond);
        KeyState state;
        EXPECT_EQ(decide(limit, state, kT0, 5, Action::kConsume).retry_after, 0);
        const Decision second = decide(limit, state, kT0 + 1, 5, Action::kConsume);
        EXPECT_EQ(second.retry_after, 3333);  // goes at kT0 + 3334 (3333.33 rounded up)
        // A consume at kT0 + 3334 would leave an empty bucket, full again 3334 µs later.
        EXPECT_EQ(second.reset_after, 3334 + 3334 - 1);
        const Decision third = decide(limit, state, kT0 + 1, 5, Action::kConsume);
        EXPECT_EQ(third.retry_after, 3333 + 3334);
        std::vector<Go> goes = {{kT0, 5}, {kT0 + 3334, 5}, {kT0 + 1 + third.retry_after, 5}};
        EXPECT_EQ(schedule_violation(goes, limit), "");
    }
}

// A cost of several units waits for all of them; a cost of 0 is admitted at once, never
// delayed, and charged nothing.
TEST(Delay, CostsWaitForAllTheirUnits) {
    for (Algorithm algorithm : kBuckets) {
        SCOPED_TRACE(algorithm_name(algorithm));
        // 10 a second (one every 100 ms), a burst of 5.
        const Limit limit = bucket_limit(algorithm, 10, kMicrosPerSecond, 5, 750000);
        KeyState state;
        EXPECT_EQ(decide(limit, state, kT0, 4, Action::kConsume).retry_after, 0);
        const Decision three = decide(limit, state, kT0, 3, Action::kConsume);
        EXPECT_TRUE(three.allowed);
        EXPECT_EQ(three.retry_after, 200000);  // 1 left, 2 more in 200 ms
        const KeyState before = state;
        const Decision none = decide(limit, state, kT0, 0, Action::kConsume);
        EXPECT_TRUE(none.allowed);
        EXPECT_EQ(none.retry_after, 0);
        EXPECT_EQ(state, before);
        const Decision five = decide(limit, state, kT0, 5, Action::kConsume);
        EXPECT_TRUE(five.allowed);
        EXPECT_EQ(five.retry_after, 700000);
        const Decision one = decide(limit, state, kT0, 1, Action::kConsume);
        EXPECT_FALSE(one.allowed) << "800 ms is past max_delay (750 ms)";
        EXPECT_EQ(one.retry_after, 800000);
    }
}

// A blocked key is denied, never delayed, whatever max_delay; the waits run to the block's end
// and on behind the calls already delayed.
TEST(Delay, ABlockedKeyIsDeniedNotDelayed) {
    for (Algorithm algorithm : kBuckets) {
        SCOPED_TRACE(algorithm_name(algorithm));
        const Limit limit = bucket_limit(algorithm, 1, kMicrosPerSecond, 1, 60 * kMicrosPerSecond);
        KeyState state;
        decide(limit, state, kT0, 1, Action::kConsume);
        EXPECT_EQ(decide(limit, state, kT0, 1, Action::kConsume).retry_after, kMicrosPerSecond);
        block_until(state, kT0 + kMicrosPerSecond / 2);
        const KeyState before = state;
        const Decision d = decide(limit, state, kT0, 1, Action::kConsume);
        EXPECT_FALSE(d.allowed);
        EXPECT_TRUE(d.blocked);
        EXPECT_EQ(d.retry_after, 2 * kMicrosPerSecond);
        EXPECT_EQ(state, before);
        const Decision after =
            decide(limit, state, kT0 + kMicrosPerSecond / 2, 1, Action::kConsume);
        EXPECT_TRUE(after.allowed);
        EXPECT_FALSE(after.blocked);
        EXPECT_EQ(after.retry_after, kMicrosPerSecond + kMicrosPerSecond / 2);
    }
}

// (f) on every algorithm: `blocked` says that a block denied the call, nothing else does.
TEST(Delay, BlockedIsSetExactlyWhenABlockDenies) {
    std::mt19937_64 rng(5);
    const Algorithm all[] = {Algorithm::kFixedWindow,   Algorithm::kRollingWindow,
                             Algorithm::kSlidingWindow, Algorithm::kSlidingWindowCounter,
                             Algorithm::kTokenBucket,   Algorithm::kGcra};
    for (Algorithm algorithm : all) {
        SCOPED_TRACE(algorithm_name(algorithm));
        const bool bucket = algorithm == Algorithm::kTokenBucket || algorithm == Algorithm::kGcra;
        for (int sequence = 0; sequence < 2000; ++sequence) {
            const std::int64_t n = 1 + static_cast<std::int64_t>(rng() % 4);
            const Micros period = 1000 * static_cast<Micros>(1 + rng() % 10);
            const Limit limit = bucket_limit(algorithm, n, period, n,
                                             bucket ? static_cast<Micros>(rng() % period) : 0);
            KeyState state;
            Micros now = kT0;
            for (int step = 0; step < 30; ++step) {
                now += static_cast<Micros>(rng() % (period / 2 + 1));
                if (rng() % 6 == 0)
                    block_until(state, now + static_cast<Micros>(rng() % (2 * period)));
                const std::int64_t cost = static_cast<std::int64_t>(rng() % (n + 1));
                const Action action = rng() % 2 == 0 ? Action::kPeek : Action::kConsume;
                const bool is_blocked = now < state.blocked_until;
                const Decision d = decide(limit, state, now, cost, action);
                ASSERT_EQ(d.blocked, is_blocked);
                if (is_blocked) {
                    ASSERT_FALSE(d.allowed);
                }
            }
        }
    }
}

// A delay is never given when its charge would be cut short by the most a key may owe
// (algorithms.hpp): with 2^31 - 1 units a millisecond, a key owes at most 2^40 units, about
// half a second, so calls piling up are delayed for about that long and then denied, well
// within max_delay; the go instants never break the guarantee.
TEST(Delay, NoDelayPastWhatAKeyMayOwe) {
    constexpr std::int64_t kMax = std::numeric_limits<std::int32_t>::max();
    for (Algorithm algorithm : kBuckets) {
        SCOPED_TRACE(algorithm_name(algorithm));
        const Limit limit = bucket_limit(algorithm, kMax, kMinPeriod, kMax, kMaxWindow);
        KeyState state;
        std::vector<Go> goes;
        Micros last_wait = -1;
        int admitted = 0;
        for (int call = 0; call < 1000; ++call) {
            const KeyState before = state;
            const Decision d = decide(limit, state, kT0, kMax, Action::kConsume);
            if (!d.allowed) {
                EXPECT_LT(d.retry_after, kMaxWindow);
                EXPECT_EQ(state, before);
                break;
            }
            ++admitted;
            EXPECT_GT(d.retry_after, last_wait);
            last_wait = d.retry_after;
            goes.push_back({kT0 + d.retry_after, kMax});
        }
        EXPECT_GT(admitted, 400);
        EXPECT_LT(admitted, 1000);
        EXPECT_EQ(schedule_violation(goes, limit), "");
    }
}

// (g): a delay only for token_bucket and gcra, and within 0..365 days.
void expect_max_wait_error(const Limit& limit) {
    try {
        require_valid_limit(limit);
        ADD_FAILURE() << "no error for max_delay " << limit.max_delay << " on "
                      << algorithm_name(limit.algorithm);
    } catch (const ArgumentError& error) {
        EXPECT_EQ(error.kind(), ErrorKind::kInvalidArgument);
        EXPECT_EQ(error.argument(), "p_max_wait");
        EXPECT_EQ(std::string(error.what()).rfind("p_max_wait ", 0), 0u) << error.what();
    }
}

TEST(Delay, RequireValidLimitRefusesDelaysItCannotKeep) {
    for (Algorithm algorithm : kWindows) {
        SCOPED_TRACE(algorithm_name(algorithm));
        Limit limit{algorithm, 5, kMicrosPerSecond, 5};
        EXPECT_NO_THROW(require_valid_limit(limit));
        limit.max_delay = 1;
        expect_max_wait_error(limit);
        limit.max_delay = kMaxWindow;
        expect_max_wait_error(limit);
        limit.max_delay = -1;
        expect_max_wait_error(limit);
    }
    for (Algorithm algorithm : kBuckets) {
        SCOPED_TRACE(algorithm_name(algorithm));
        Limit limit{algorithm, 5, kMicrosPerSecond, 7};
        for (Micros ok : {Micros{0}, Micros{1}, kMicrosPerSecond, kMaxWindow}) {
            limit.max_delay = ok;
            EXPECT_NO_THROW(require_valid_limit(limit)) << ok;
        }
        for (Micros bad :
             {Micros{-1}, -kMaxWindow, kMaxWindow + 1, std::numeric_limits<Micros>::max(),
              std::numeric_limits<Micros>::min()}) {
            limit.max_delay = bad;
            expect_max_wait_error(limit);
        }
    }
    // A window algorithm's limit passes its other checks first: the error names p_max_wait
    // only when the rest is valid.
    Limit bad_burst{Algorithm::kFixedWindow, 5, kMicrosPerSecond, 6};
    bad_burst.max_delay = kMicrosPerSecond;
    try {
        require_valid_limit(bad_burst);
        ADD_FAILURE() << "no error";
    } catch (const ArgumentError& error) {
        EXPECT_EQ(error.argument(), "p_burst");
    }
}

}  // namespace
}  // namespace ratelimit
