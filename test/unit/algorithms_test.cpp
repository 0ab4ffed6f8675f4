#include "ratelimit/algorithms.hpp"
#include "ratelimit/validation.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "algorithm_models.hpp"
#include "ratelimit/error.hpp"

namespace ratelimit {
namespace {

using models::Model;

// 2026-01-01 00:00:00 UTC.
constexpr Micros kT0 = 1767225600LL * kMicrosPerSecond;
constexpr std::int64_t kMaxLimit = std::numeric_limits<std::int32_t>::max();

constexpr Algorithm kAlgorithms[] = {
    Algorithm::kFixedWindow,          Algorithm::kRollingWindow, Algorithm::kSlidingWindow,
    Algorithm::kSlidingWindowCounter, Algorithm::kTokenBucket,   Algorithm::kGcra,
};

// Random call sequences per algorithm: small limits and periods, so that a sequence of a few
// dozen calls crosses windows, fills and drains buckets many times.
constexpr int kSequences = 100000;
// Sequences with limits up to 2^31 - 1, periods up to a year and instants near both ends of
// the clock's range, where an overflow would show.
constexpr int kExtremeSequences = 5000;

bool is_bucket(Algorithm algorithm) {
    return algorithm == Algorithm::kTokenBucket || algorithm == Algorithm::kGcra;
}

std::int64_t capacity(const Limit& limit) {
    return is_bucket(limit.algorithm) ? limit.burst : limit.limit;
}

Limit limit_of(Algorithm algorithm, std::int64_t n, Micros period, std::int64_t burst = 0) {
    return Limit{algorithm, n, period, is_bucket(algorithm) && burst > 0 ? burst : n};
}

// `state` (a token_bucket or gcra state, last written under `limit`) as 0.5.0 would have kept
// it: without the measured limit, and for gcra as its theoretical arrival time (in 1/N µs).
KeyState written_before_measuring(const Limit& limit, const KeyState& state) {
    KeyState old = state;
    old.measured_limit = old.measured_period = 0;
    if (state.algorithm == Algorithm::kGcra) {
        const models::Wide level = models::Wide(state.amount) * limit.period + state.carry;
        const models::Wide tat = models::Wide(state.instant) * limit.limit +
                                 models::Wide(limit.burst) * limit.period - level;
        old.instant = static_cast<Micros>(tat / limit.limit);
        old.carry = static_cast<std::int64_t>(tat % limit.limit);
        old.amount = 0;
    }
    return old;
}

std::string show(const Decision& d) {
    std::ostringstream out;
    out << "{allowed=" << d.allowed << " limit=" << d.limit << " remaining=" << d.remaining
        << " retry_after=" << d.retry_after << " reset_after=" << d.reset_after << "}";
    return out.str();
}

bool same(const Decision& a, const Decision& b) {
    return a.allowed == b.allowed && a.limit == b.limit && a.remaining == b.remaining &&
           a.retry_after == b.retry_after && a.reset_after == b.reset_after;
}

::testing::AssertionResult SameDecision(const Decision& got, const Decision& want) {
    if (same(got, want)) {
        return ::testing::AssertionSuccess();
    }
    return ::testing::AssertionFailure() << "got " << show(got) << ", want " << show(want);
}

std::string show(const KeyState& s) {
    std::ostringstream out;
    out << "{algorithm=" << static_cast<int>(s.algorithm) << " instant=" << s.instant
        << " amount=" << s.amount << " carry=" << s.carry << " log=[";
    for (const LogEntry& e : s.log) {
        out << " " << e.at << ":" << e.units;
    }
    out << " ] blocked_until=" << s.blocked_until << "}";
    return out.str();
}

const char* action_name(Action action) {
    switch (action) {
        case Action::kConsume:
            return "consume";
        case Action::kPeek:
            return "peek";
        case Action::kRefund:
            return "refund";
        case Action::kCharge:
            return "charge";
    }
    return "?";
}

// A decision on a copy, so that the state under test is never touched by a probe.
Decision probe(const Limit& limit, const KeyState& state, Micros now, std::int64_t cost,
               Action action = Action::kPeek) {
    KeyState copy = state;
    return decide(limit, copy, now, cost, action);
}

std::uint64_t draw(std::mt19937_64& rng, std::uint64_t low, std::uint64_t high) {
    return low + rng() % (high - low + 1);
}

Micros clamp_instant(Micros at) {
    return std::min(std::max<Micros>(at, 0), kMaxInstant);
}

#define REQUIRE(condition, message)    \
    do {                               \
        if (!(condition)) {            \
            std::ostringstream failed; \
            failed << message;         \
            return failed.str();       \
        }                              \
    } while (0)

// One random call sequence on one key, checked call by call against the model and against the
// properties every decision must have. The scenario is drawn from the sequence's own seed, so a
// failing sequence reproduces alone.
class Sequence {
  public:
    Sequence(Algorithm algorithm, std::uint64_t seed, bool extreme)
        : rng_(seed), algorithm_(algorithm), extreme_(extreme) {}

    // Empty when every check held, else the first one that failed.
    std::string run();

    std::string trace() const {
        std::ostringstream out;
        out << "limit {algorithm=" << algorithm_name(limit_.algorithm) << " N=" << limit_.limit
            << " P=" << limit_.period << " B=" << limit_.burst << "}"
            << (backwards_ ? " backwards" : "") << (refunds_ ? " refunds" : "")
            << (blocks_ ? " blocks" : "") << (exact_ ? "" : " (decisions not compared)")
            << "\nstarting state " << show(initial_) << "\n";
        for (const Step& step : steps_) {
            if (step.block) {
                out << "  block_until(" << step.now << ")\n";
            } else {
                out << "  " << action_name(step.action) << "(now=" << step.now
                    << ", cost=" << step.cost << ") -> " << show(step.got) << "\n";
            }
        }
        return out.str();
    }

  private:
    struct Step {
        bool block;
        Action action;
        Micros now;
        std::int64_t cost;
        Decision got;
    };

    void draw_scenario();
    Micros next_instant(Micros now, const KeyState& state);
    std::int64_t draw_cost(Action action);
    std::string check_call(KeyState& state, Micros now, std::int64_t cost, Action action);
    std::string check_idle(const KeyState& state);

    std::mt19937_64 rng_;
    Algorithm algorithm_;
    bool extreme_;
    Limit limit_;
    Micros start_ = 0;
    int calls_ = 0;
    bool backwards_ = false;
    bool refunds_ = false;
    bool blocks_ = false;
    bool foreign_ = false;
    bool exact_ = true;
    KeyState initial_;
    std::unique_ptr<Model> model_;
    Micros latest_ = -1;  // the latest now of the sequence: the reading of a stopped clock
    std::vector<Step> steps_;
};

void Sequence::draw_scenario() {
    std::int64_t n = 0;
    Micros period = 0;
    std::int64_t burst = 0;
    if (!extreme_) {
        n = static_cast<std::int64_t>(draw(rng_, 1, 8));
        period = static_cast<Micros>(draw(rng_, kMinPeriod, 5000));
        burst = rng_() % 2 == 0 ? n : static_cast<std::int64_t>(draw(rng_, 1, 10));
        start_ = kT0 + static_cast<Micros>(draw(rng_, 0, 10 * period));
        if (rng_() % 50 == 0) {
            start_ = static_cast<Micros>(draw(rng_, 0, period));  // backwards steps reach 0
        } else if (rng_() % 50 == 0) {
            start_ = kMaxInstant - static_cast<Micros>(draw(rng_, 0, 3 * period));
        }
        calls_ = static_cast<int>(draw(rng_, 10, 40));
    } else {
        switch (rng_() % 3) {
            case 0:
                n = kMaxLimit;
                break;
            case 1:
                n = static_cast<std::int64_t>(draw(rng_, 1, kMaxLimit));
                break;
            default:
                n = static_cast<std::int64_t>(draw(rng_, 1, 100));
        }
        switch (rng_() % 3) {
            case 0:
                period = kMaxWindow;
                break;
            case 1:
                period = static_cast<Micros>(draw(rng_, kMinPeriod, kMaxWindow));
                break;
            default:
                period = kMinPeriod;
        }
        // A burst is refilled within a year: B·P <= N·kMaxWindow.
        const std::int64_t deepest = static_cast<std::int64_t>(
            std::min<models::Wide>(kMaxLimit, models::Wide(n) * kMaxWindow / period));
        switch (rng_() % 4) {
            case 0:
                burst = n;
                break;
            case 1:
                burst = static_cast<std::int64_t>(draw(rng_, 1, static_cast<std::uint64_t>(n)));
                break;
            case 2:
                burst = deepest;
                break;
            default:
                burst = static_cast<std::int64_t>(
                    draw(rng_, static_cast<std::uint64_t>(n), static_cast<std::uint64_t>(deepest)));
        }
        switch (rng_() % 4) {
            case 0:
                start_ = static_cast<Micros>(draw(rng_, 0, 3 * period));
                break;
            case 1:
                start_ = kMaxInstant - static_cast<Micros>(draw(rng_, 0, 3 * period));
                break;
            case 2:
                start_ = kMaxInstant;
                break;
            default:
                start_ = static_cast<Micros>(draw(rng_, 0, kMaxInstant));
        }
        calls_ = static_cast<int>(draw(rng_, 5, 20));
    }
    limit_ = limit_of(algorithm_, n, period, burst);
    backwards_ = rng_() % 10 < 3;
    refunds_ = rng_() % 20 < 7;
    blocks_ = rng_() % 20 < 3;
    foreign_ = rng_() % 12 == 0;
    // GCRA has no clamp on the clock: once a refund has been made at a clock that stepped
    // back, its arrival time is no longer the stopped-clock bucket's, so such sequences are
    // held only to the per-call properties.
    exact_ = !(algorithm_ == Algorithm::kGcra && backwards_ && refunds_);
}

Micros Sequence::next_instant(Micros now, const KeyState& state) {
    const Micros p = limit_.period;
    std::uint64_t r = rng_() % 100;
    Micros next = now;
    if (backwards_ && r < 10) {
        next = now - static_cast<Micros>(draw(rng_, 1, 2 * p));
    } else if (r < 35) {
        next = now;  // several calls at one instant, as concurrent sessions make them
    } else if (r < 55) {
        next = now + static_cast<Micros>(draw(rng_, 1, std::max<Micros>(1, p / 8)));
    } else if (r < 75) {
        next = now + static_cast<Micros>(draw(rng_, 0, p));
    } else if (r < 85) {
        next = now + static_cast<Micros>(draw(rng_, p, 4 * p));
    } else if (r < 97) {
        // Just before, at or after an instant where the decision can change.
        std::vector<Micros> edges = {now - now % p + p, state.instant + p, state.instant + 2 * p,
                                     state.instant};
        for (const LogEntry& entry : state.log) {
            edges.push_back(entry.at + p);
        }
        next = edges[rng_() % edges.size()] + static_cast<Micros>(draw(rng_, 0, 2)) - 1;
        if (next < now && !backwards_) {
            next = now;
        }
    } else {
        next = now + static_cast<Micros>(draw(rng_, 4 * p, 20 * p));
    }
    return clamp_instant(next);
}

std::int64_t Sequence::draw_cost(Action action) {
    std::int64_t cap = capacity(limit_);
    std::uint64_t r = rng_() % 20;
    if (r < 2) {
        return 0;
    }
    if (r < 10 && action != Action::kRefund) {
        return 1;
    }
    if (extreme_ && r < 13) {
        return cap;
    }
    return static_cast<std::int64_t>(draw(rng_, 1, static_cast<std::uint64_t>(cap)));
}

std::string Sequence::run() {
    draw_scenario();
    require_valid_limit(limit_);
    KeyState state;
    if (foreign_) {
        // State left by another algorithm under the same key: read as fresh, its block kept.
        Algorithm other = algorithm_;
        while (other == algorithm_) {
            other = kAlgorithms[rng_() % 6];
        }
        Limit before = limit_of(other, limit_.limit, limit_.period, limit_.burst);
        int calls = static_cast<int>(draw(rng_, 1, 5));
        for (int i = 0; i < calls; ++i) {
            Micros at = clamp_instant(start_ - static_cast<Micros>(draw(rng_, 0, limit_.period)));
            decide(before, state, at, 1 + static_cast<std::int64_t>(rng_() % capacity(before)),
                   Action::kConsume);
        }
        if (rng_() % 3 == 0) {
            block_until(state, start_ + static_cast<Micros>(draw(rng_, 0, 2 * limit_.period)));
        }
    }
    initial_ = state;
    model_ = models::make_model(limit_);
    model_->block(state.blocked_until);

    Micros now = start_;
    for (int i = 0; i < calls_; ++i) {
        now = next_instant(now, state);
        std::uint64_t r = rng_() % 100;
        if (blocks_ && r < 5) {
            Micros until = now + static_cast<Micros>(draw(rng_, 0, 2 * limit_.period));
            Micros earlier = state.blocked_until;
            block_until(state, until);
            model_->block(until);
            steps_.push_back({true, Action::kConsume, until, 0, {}});
            REQUIRE(state.blocked_until == std::max(earlier, until),
                    "block_until(" << until << ") left blocked_until " << state.blocked_until);
            continue;
        }
        Action action = Action::kConsume;
        if (r >= 72 && r < 85) {
            action = Action::kPeek;
        } else if (r >= 85 && r < 95 && refunds_) {
            action = Action::kRefund;
            if (exact_) {
                // Checked before a refund too: taking units back could hide an excess.
                std::string violation = model_->guarantee_violation();
                REQUIRE(violation.empty(), "guarantee broken: " << violation);
            }
        }
        std::string failure = check_call(state, now, draw_cost(action), action);
        if (!failure.empty()) {
            return failure;
        }
        latest_ = std::max(latest_, now);
    }
    if (exact_) {
        std::string violation = model_->guarantee_violation();
        REQUIRE(violation.empty(), "guarantee broken: " << violation);
    }
    return check_idle(state);
}

std::string Sequence::check_call(KeyState& state, Micros now, std::int64_t cost, Action action) {
    const std::int64_t cap = capacity(limit_);
    const KeyState before = state;
    Decision d = decide(limit_, state, now, cost, action);
    steps_.push_back({false, action, now, cost, d});
    const bool blocked = now < state.blocked_until;

    // Against the model.
    if (exact_) {
        if (algorithm_ == Algorithm::kGcra && now < model_->clock()) {
            // GCRA decides at the real now: a clock behind the latest call may only allow what
            // the stopped clock would, and then counts the call exactly as it would.
            Decision stopped = model_->decide(now, cost, Action::kPeek);
            REQUIRE(!d.allowed || stopped.allowed,
                    "gcra allowed behind the clock what the stopped clock would not");
            REQUIRE(action != Action::kRefund, "no refunds in this scenario");
            if (d.allowed && action == Action::kConsume) {
                model_->decide(now, cost, action);
            }
        } else {
            Decision want = model_->decide(now, cost, action);
            REQUIRE(same(d, want), "model says " << show(want));
        }
    }
    REQUIRE(d.limit == cap, "limit field");

    // What must not change the state.
    if (action == Action::kPeek || (action == Action::kConsume && (!d.allowed || cost == 0))) {
        REQUIRE(state == before, "state changed from " << show(before) << " to " << show(state));
    }
    if (algorithm_ == Algorithm::kSlidingWindow && state.algorithm == algorithm_) {
        for (std::size_t i = 0; i < state.log.size(); ++i) {
            REQUIRE(state.log[i].units > 0, "empty log entry in " << show(state));
            REQUIRE(i == 0 || state.log[i - 1].at < state.log[i].at,
                    "log not strictly ordered: " << show(state));
        }
        REQUIRE(static_cast<std::int64_t>(state.log.size()) <= limit_.limit,
                "more than N log entries: " << show(state));
    }

    // remaining: exactly that many units fit now, one more does not. GCRA behind the clock is
    // held only to the stopped clock (below).
    const bool gcra_behind = algorithm_ == Algorithm::kGcra && now < latest_;
    if (!blocked && !gcra_behind) {
        REQUIRE(
            probe(limit_, state, now, d.remaining).allowed,
            (d.remaining == 0 ? "cost 0 denied while not blocked" : "remaining units do not fit"));
        if (d.remaining < cap) {
            REQUIRE(!probe(limit_, state, now, d.remaining + 1).allowed,
                    "more than remaining units fit");
        }
    } else if (blocked) {
        REQUIRE(d.remaining == 0 && !d.allowed, "a blocked key allowed or reported remaining");
    }

    // retry_after: with nothing else happening, the same call is still denied a microsecond
    // before it and allowed at it (a block reports only its own end).
    if (!d.allowed) {
        const std::int64_t asked = action == Action::kRefund ? 1 : cost;
        REQUIRE(d.retry_after >= 1, "denied with retry_after " << d.retry_after);
        Micros at = now + d.retry_after;
        REQUIRE(!probe(limit_, state, at - 1, asked).allowed, "allowed at now + retry_after - 1");
        if (!blocked && at <= kMaxInstant) {
            REQUIRE(probe(limit_, state, at, asked).allowed, "denied at now + retry_after");
        }
    } else {
        REQUIRE(d.retry_after == 0, "allowed with retry_after " << d.retry_after);
    }

    // reset_after: from then on the key decides like a fresh one; a microsecond earlier it is
    // not yet full (unless it already was).
    REQUIRE(d.reset_after >= 0, "negative reset_after");
    Micros reset_at = now + d.reset_after;
    if (reset_at <= kMaxInstant) {
        Decision full = probe(limit_, state, reset_at, 1);
        Decision fresh = probe(limit_, KeyState{}, reset_at, 1);
        REQUIRE(same(full, fresh),
                "at now + reset_after: " << show(full) << ", a fresh key " << show(fresh));
    }
    bool full_now = !blocked && d.remaining == cap;
    if (d.reset_after > 0 && !full_now) {
        Decision earlier = probe(limit_, state, reset_at - 1, 1);
        REQUIRE(!(earlier.allowed && earlier.remaining == cap),
                "already full at now + reset_after - 1");
    }

    // A clock behind the latest reading never allows more than the stopped clock would.
    if (now < latest_ && d.allowed && action != Action::kRefund) {
        REQUIRE(probe(limit_, before, latest_, cost).allowed,
                "allowed behind the clock but not at the stopped clock " << latest_);
    }
    return {};
}

// idle_from: from it on the state decides exactly like a fresh key (no count, no block),
// whatever is asked; and, for a state its own algorithm wrote, it is no later than the instant
// the key is full again, so cleanup is not held back. (A state left by another algorithm may get
// a later instant: engines only store states of the algorithm that wrote them.)
std::string Sequence::check_idle(const KeyState& state) {
    Micros idle = idle_from(limit_, state);
    if (state.algorithm == algorithm_ || state.algorithm == Algorithm::kNone) {
        Micros reference = std::max<Micros>(latest_, 0);
        Decision now = probe(limit_, state, reference, 1);
        REQUIRE(idle <= reference + now.reset_after,
                "idle_from " << idle << " is after the key is full again at "
                             << reference + now.reset_after);
    }
    KeyState aged = state;
    KeyState fresh;
    Micros at = std::max<Micros>(idle, 0);
    for (int i = 0; i < 4 && at <= kMaxInstant; ++i) {
        Action action = static_cast<Action>(rng_() % 3);
        std::int64_t cost = draw_cost(action);
        Decision a = decide(limit_, aged, at, cost, action);
        Decision f = decide(limit_, fresh, at, cost, action);
        REQUIRE(same(a, f), "idle_from " << idle << ": " << action_name(action) << "(now=" << at
                                         << ", cost=" << cost << ") gives " << show(a)
                                         << ", a fresh key " << show(f));
        at += static_cast<Micros>(draw(rng_, 0, 2 * limit_.period));
    }
    return {};
}

void check_sequences(Algorithm algorithm, std::uint64_t seed, int count, bool extreme) {
    for (int i = 0; i < count; ++i) {
        std::uint64_t sequence_seed = seed * 1000003 + static_cast<std::uint64_t>(i);
        Sequence sequence(algorithm, sequence_seed, extreme);
        std::string failure = sequence.run();
        if (!failure.empty()) {
            ADD_FAILURE() << algorithm_name(algorithm) << " sequence " << i << " (seed "
                          << sequence_seed << "): " << failure << "\n"
                          << sequence.trace();
            return;
        }
    }
}

TEST(AlgorithmProperties, FixedWindowRandomSequences) {
    check_sequences(Algorithm::kFixedWindow, 101, kSequences, false);
}
TEST(AlgorithmProperties, RollingWindowRandomSequences) {
    check_sequences(Algorithm::kRollingWindow, 102, kSequences, false);
}
TEST(AlgorithmProperties, SlidingWindowRandomSequences) {
    check_sequences(Algorithm::kSlidingWindow, 103, kSequences, false);
}
TEST(AlgorithmProperties, SlidingWindowCounterRandomSequences) {
    check_sequences(Algorithm::kSlidingWindowCounter, 104, kSequences, false);
}
TEST(AlgorithmProperties, TokenBucketRandomSequences) {
    check_sequences(Algorithm::kTokenBucket, 105, kSequences, false);
}
TEST(AlgorithmProperties, GcraRandomSequences) {
    check_sequences(Algorithm::kGcra, 106, kSequences, false);
}

TEST(AlgorithmProperties, ExtremeLimitsPeriodsAndInstants) {
    std::uint64_t seed = 200;
    for (Algorithm algorithm : kAlgorithms) {
        check_sequences(algorithm, ++seed, kExtremeSequences, true);
    }
}

// A refund gives back at most what it was asked and what had been taken (for the buckets: up to
// full), and a consume of exactly what came back is allowed and leaves the key where it was.
TEST(AlgorithmRefunds, RefundThenConsumeGivesBackExactlyWhatWasRefunded) {
    std::mt19937_64 rng(301);
    for (Algorithm algorithm : kAlgorithms) {
        for (int trial = 0; trial < 20000; ++trial) {
            std::int64_t n = static_cast<std::int64_t>(draw(rng, 1, 8));
            Micros period = static_cast<Micros>(draw(rng, kMinPeriod, 5000));
            Limit limit =
                limit_of(algorithm, n, period, static_cast<std::int64_t>(draw(rng, 1, 10)));
            const std::int64_t cap = capacity(limit);
            std::unique_ptr<Model> model = models::make_model(limit);
            KeyState state;
            Micros now = kT0 + static_cast<Micros>(draw(rng, 0, 10 * period));
            std::int64_t taken = 0;
            int calls = static_cast<int>(draw(rng, 0, 15));
            for (int i = 0; i < calls; ++i) {
                now += rng() % 3 == 0 ? 0 : static_cast<Micros>(draw(rng, 0, period));
                std::int64_t cost =
                    static_cast<std::int64_t>(draw(rng, 1, static_cast<std::uint64_t>(cap)));
                Decision d = decide(limit, state, now, cost, Action::kConsume);
                model->decide(now, cost, Action::kConsume);
                taken += d.allowed ? cost : 0;
            }
            now += rng() % 2 == 0 ? 0 : static_cast<Micros>(draw(rng, 0, period));
            std::int64_t before = probe(limit, state, now, 1).remaining;
            std::int64_t asked =
                static_cast<std::int64_t>(draw(rng, 1, static_cast<std::uint64_t>(cap)));
            Decision refunded = decide(limit, state, now, asked, Action::kRefund);
            ASSERT_TRUE(SameDecision(refunded, model->decide(now, asked, Action::kRefund)))
                << algorithm_name(algorithm) << " trial " << trial;
            std::int64_t given = refunded.remaining - before;
            ASSERT_GE(given, 0);
            ASSERT_LE(given, asked);
            ASSERT_LE(given, cap - before);
            if (!is_bucket(algorithm)) {
                ASSERT_LE(given, taken) << "gave back more than was ever taken";
            }
            if (algorithm != Algorithm::kSlidingWindowCounter) {
                // Everything counted against `remaining` can be given back (the counter also
                // counts the previous window's share, which is not).
                ASSERT_EQ(given, std::min(asked, cap - before)) << algorithm_name(algorithm);
            }
            Decision again = decide(limit, state, now, given, Action::kConsume);
            ASSERT_TRUE(again.allowed) << algorithm_name(algorithm) << " trial " << trial;
            ASSERT_EQ(again.remaining, before) << algorithm_name(algorithm) << " trial " << trial;
            ASSERT_TRUE(SameDecision(again, model->decide(now, given, Action::kConsume)));
        }
    }
}

TEST(AlgorithmBlocks, BlockDeniesUntilItsEndAndAllowsAtItsEnd) {
    for (Algorithm algorithm : kAlgorithms) {
        SCOPED_TRACE(algorithm_name(algorithm));
        Limit limit = limit_of(algorithm, 3, 2000);
        for (std::int64_t used : {0, 1}) {
            KeyState state;
            if (used > 0) {
                ASSERT_TRUE(decide(limit, state, kT0, used, Action::kConsume).allowed);
            }
            const Micros end = kT0 + 1500;
            block_until(state, end);
            EXPECT_EQ(state.blocked_until, end);
            block_until(state, end - 700);  // never shortened
            EXPECT_EQ(state.blocked_until, end);
            const KeyState blocked = state;
            Decision peek = probe(limit, state, kT0 + 10, 0);
            EXPECT_FALSE(peek.allowed);
            for (Action action : {Action::kConsume, Action::kPeek}) {
                Decision d = decide(limit, state, end - 1, 1, action);
                EXPECT_FALSE(d.allowed);
                EXPECT_EQ(d.remaining, 0);
                EXPECT_EQ(d.retry_after, 1);
                EXPECT_GE(d.reset_after, 1);
                EXPECT_EQ(state, blocked) << "a blocked call changed the state";
            }
            // At its end the key decides as if it had never been blocked.
            KeyState unblocked = state;
            unblocked.blocked_until = 0;
            Decision at_end = decide(limit, state, end, 1, Action::kConsume);
            EXPECT_TRUE(at_end.allowed);
            EXPECT_TRUE(SameDecision(at_end, probe(limit, unblocked, end, 1, Action::kConsume)));
        }
    }
}

TEST(AlgorithmBlocks, WaitsOfABlockedKeyCoverBothTheBlockAndTheCount) {
    for (Algorithm algorithm : kAlgorithms) {
        SCOPED_TRACE(algorithm_name(algorithm));
        Limit limit = limit_of(algorithm, 2, 10000);
        KeyState state;
        ASSERT_TRUE(decide(limit, state, kT0, 2, Action::kConsume).allowed);
        Micros full_at = kT0 + probe(limit, state, kT0, 1).reset_after;
        // The count still denies when the block ends: retry_after runs on to the count's wait.
        Decision unblocked_at_end = probe(limit, state, kT0 + 100, 1);
        ASSERT_FALSE(unblocked_at_end.allowed);
        block_until(state, kT0 + 100);
        Decision d = probe(limit, state, kT0 + 50, 1);
        EXPECT_EQ(d.retry_after, 50 + unblocked_at_end.retry_after);
        EXPECT_FALSE(probe(limit, state, kT0 + 50 + d.retry_after - 1, 1).allowed);
        EXPECT_TRUE(probe(limit, state, kT0 + 50 + d.retry_after, 1).allowed);
        EXPECT_EQ(d.reset_after, full_at - (kT0 + 50));
        block_until(state, full_at + 100);
        EXPECT_EQ(probe(limit, state, kT0 + 50, 1).reset_after, full_at + 100 - (kT0 + 50));
    }
}

// A key used by one algorithm and then asked about under another starts afresh, but keeps its
// block.
TEST(AlgorithmBlocks, AnotherAlgorithmReadsTheStateAsFreshAndKeepsTheBlock) {
    for (Algorithm first : kAlgorithms) {
        for (Algorithm second : kAlgorithms) {
            if (first == second) {
                continue;
            }
            SCOPED_TRACE(std::string(algorithm_name(first)) + " then " + algorithm_name(second));
            Limit before = limit_of(first, 3, 5000);
            Limit after = limit_of(second, 3, 5000);
            KeyState state;
            ASSERT_TRUE(decide(before, state, kT0, 3, Action::kConsume).allowed);
            EXPECT_TRUE(
                SameDecision(probe(after, state, kT0, 3), probe(after, KeyState{}, kT0, 3)));
            block_until(state, kT0 + 10);
            Decision blocked = probe(after, state, kT0 + 9, 1);
            EXPECT_FALSE(blocked.allowed);
            EXPECT_EQ(blocked.retry_after, 1);
            Decision d = decide(after, state, kT0 + 10, 3, Action::kConsume);
            EXPECT_TRUE(SameDecision(d, probe(after, KeyState{}, kT0 + 10, 3, Action::kConsume)));
            EXPECT_EQ(state.algorithm, second);
            EXPECT_EQ(state.blocked_until, kT0 + 10);
        }
    }
}

void expect_argument_error(const std::function<void()>& call, const std::string& argument) {
    try {
        call();
        ADD_FAILURE() << "no error, expected one naming " << argument;
    } catch (const ArgumentError& error) {
        EXPECT_EQ(error.kind(), ErrorKind::kInvalidArgument);
        EXPECT_EQ(error.argument(), argument);
        EXPECT_EQ(std::string(error.what()).rfind(argument, 0), 0u) << error.what();
    }
}

TEST(AlgorithmArguments, LimitsOutOfRangeNameTheirArgument) {
    for (Algorithm algorithm : kAlgorithms) {
        SCOPED_TRACE(algorithm_name(algorithm));
        auto check = [&](std::int64_t n, Micros period, std::int64_t burst) {
            return [=] { require_valid_limit(Limit{algorithm, n, period, burst}); };
        };
        expect_argument_error(check(0, 1000, 0), "p_limit");
        expect_argument_error(check(-1, 1000, -1), "p_limit");
        expect_argument_error(check(1, kMinPeriod - 1, 1), "p_period");
        expect_argument_error(check(1, 0, 1), "p_period");
        expect_argument_error(check(1, kMaxWindow + 1, 1), "p_period");
        EXPECT_NO_THROW(require_valid_limit(Limit{algorithm, kMaxLimit, kMaxWindow, kMaxLimit}));
        EXPECT_NO_THROW(require_valid_limit(Limit{algorithm, 1, kMinPeriod, 1}));
        if (is_bucket(algorithm)) {
            expect_argument_error(check(5, 1000, 0), "p_burst");
            expect_argument_error(check(5, 1000, -3), "p_burst");
            EXPECT_NO_THROW(require_valid_limit(Limit{algorithm, 5, 1000, 1}));
            EXPECT_NO_THROW(require_valid_limit(Limit{algorithm, 5, 1000, kMaxLimit}));
            // An empty bucket must refill within a year: B·P <= N·kMaxWindow.
            EXPECT_NO_THROW(require_valid_limit(Limit{algorithm, 3, kMaxWindow, 3}));
            expect_argument_error(check(3, kMaxWindow, 4), "p_burst");
            EXPECT_NO_THROW(require_valid_limit(Limit{algorithm, 1, kMaxWindow / 2, 2}));
            expect_argument_error(check(1, kMaxWindow / 2 + 1, 2), "p_burst");
            EXPECT_NO_THROW(make_limit(algorithm, 5, 1000, 9));
            EXPECT_EQ(make_limit(algorithm, 5, 1000, std::nullopt).burst, 5);
        } else {
            // The window algorithms have no burst: only N itself may be passed.
            expect_argument_error(check(5, 1000, 6), "p_burst");
            expect_argument_error(check(5, 1000, 4), "p_burst");
            expect_argument_error([&] { make_limit(algorithm, 5, 1000, 5); }, "p_burst");
            EXPECT_EQ(make_limit(algorithm, 5, 1000, std::nullopt).burst, 5);
        }
    }
}

// A negative cost is an error; a cost above what the key could ever allow (N, or B for the
// bucket algorithms) is a denial for good: nothing charged, no wait, the key as a peek sees it.
TEST(AlgorithmArguments, CostsThatCouldNeverBeAllowedAreDeniedForGood) {
    for (Algorithm algorithm : kAlgorithms) {
        SCOPED_TRACE(algorithm_name(algorithm));
        Limit limit = limit_of(algorithm, 4, 1000);
        expect_argument_error([&] { require_non_negative_cost("p_cost", -1); }, "p_cost");
        EXPECT_TRUE(cost_could_be_allowed(limit, 0));
        EXPECT_TRUE(cost_could_be_allowed(limit, 4));
        EXPECT_FALSE(cost_could_be_allowed(limit, 5));
        KeyState state;
        ASSERT_TRUE(decide(limit, state, kT0, 1, Action::kConsume).allowed);
        const KeyState before = state;
        for (Action action : {Action::kConsume, Action::kPeek}) {
            const Decision d = decide(limit, state, kT0, 5, action);
            EXPECT_FALSE(d.allowed);
            EXPECT_TRUE(d.never);
            EXPECT_EQ(d.retry_after, 0);
            EXPECT_EQ(d.remaining, 3);
            EXPECT_EQ(d.limit, 4);
            EXPECT_FALSE(d.state_changed);
            EXPECT_EQ(state, before) << "nothing charged";
        }
        EXPECT_FALSE(decide(limit, state, kT0, 4, Action::kPeek).never);
    }
    for (Algorithm algorithm : {Algorithm::kTokenBucket, Algorithm::kGcra}) {
        // Against the burst, not the rate; never delayed either.
        Limit deep = limit_of(algorithm, 2, 1000, 10);
        EXPECT_TRUE(cost_could_be_allowed(deep, 10));
        EXPECT_FALSE(cost_could_be_allowed(deep, 11));
        Limit shallow = limit_of(algorithm, 10, 1000, 2);
        shallow.max_delay = 1000000;
        EXPECT_TRUE(cost_could_be_allowed(shallow, 2));
        KeyState state;
        const Decision d = decide(shallow, state, kT0, 3, Action::kConsume);
        EXPECT_TRUE(d.never && !d.allowed);
        EXPECT_EQ(state, KeyState{}) << "not delayed, not charged";
    }
}

TEST(AlgorithmArguments, InstantsOutsideTheClockRangeAreRefused) {
    EXPECT_NO_THROW(require_valid_instant(0));
    EXPECT_NO_THROW(require_valid_instant(kMaxInstant));
    expect_argument_error([] { require_valid_instant(-1); }, "clock");
    expect_argument_error([] { require_valid_instant(kMaxInstant + 1); }, "clock");
}

TEST(AlgorithmNames, NamesRoundTripAndUnknownNamesNameTheArgument) {
    for (Algorithm algorithm : kAlgorithms) {
        EXPECT_EQ(parse_algorithm("p_algorithm", algorithm_name(algorithm)), algorithm);
    }
    EXPECT_STREQ(algorithm_name(Algorithm::kSlidingWindowCounter), "sliding_window_counter");
    EXPECT_STREQ(algorithm_name(Algorithm::kGcra), "gcra");
    expect_argument_error([] { parse_algorithm("p_algorithm", "leaky_bucket"); }, "p_algorithm");
    expect_argument_error([] { parse_algorithm("p_algorithm", ""); }, "p_algorithm");
    expect_argument_error([] { parse_algorithm("p_algorithm", "gcra "); }, "p_algorithm");
    // The numbers are stored on disk.
    EXPECT_EQ(static_cast<int>(Algorithm::kFixedWindow), 1);
    EXPECT_EQ(static_cast<int>(Algorithm::kGcra), 6);
}

struct Call {
    Action action;
    Micros now;
    std::int64_t cost;
};

// Runs the calls on a fresh key and on the model; returns the decisions after checking they
// agree.
std::vector<Decision> run_against_model(const Limit& limit, const std::vector<Call>& calls) {
    std::unique_ptr<Model> model = models::make_model(limit);
    KeyState state;
    std::vector<Decision> out;
    for (const Call& call : calls) {
        Decision d = decide(limit, state, call.now, call.cost, call.action);
        EXPECT_TRUE(SameDecision(d, model->decide(call.now, call.cost, call.action)))
            << algorithm_name(limit.algorithm) << " " << action_name(call.action)
            << "(now=" << call.now << ", cost=" << call.cost << ")";
        out.push_back(d);
    }
    return out;
}

Decision want(bool allowed, std::int64_t limit, std::int64_t remaining, Micros retry,
              Micros reset) {
    return Decision{allowed, limit, remaining, retry, reset};
}

TEST(AlgorithmEdges, FixedWindowAroundTheEndOfAWindowThatIsNotEpochAligned) {
    const Micros p = 6997;  // does not divide the epoch offset of kT0
    const Micros t0 = kT0 + 12345;
    const Micros w = t0 - t0 % p;
    ASSERT_NE(kT0 % p, 0);
    Limit limit = limit_of(Algorithm::kFixedWindow, 3, p);
    auto d = run_against_model(limit, {{Action::kConsume, w + p - 1, 3},
                                       {Action::kConsume, w + p - 1, 1},
                                       {Action::kConsume, w + p, 1},
                                       {Action::kPeek, w + 2 * p - 1, 1},
                                       {Action::kPeek, w + 2 * p, 1},
                                       {Action::kConsume, w + 2 * p + 1, 3}});
    EXPECT_TRUE(SameDecision(d[0], want(true, 3, 0, 0, 1)));
    EXPECT_TRUE(SameDecision(d[1], want(false, 3, 0, 1, 1)));
    EXPECT_TRUE(SameDecision(d[2], want(true, 3, 2, 0, p)));
    EXPECT_TRUE(SameDecision(d[3], want(true, 3, 2, 0, 1)));
    EXPECT_TRUE(SameDecision(d[4], want(true, 3, 3, 0, 0)));
    EXPECT_TRUE(SameDecision(d[5], want(true, 3, 0, 0, p - 1)));
}

TEST(AlgorithmEdges, FixedWindowOfAWeekStartsOnTheEpochsWeekday) {
    const Micros p = 7 * kMicrosPerDay;
    Limit limit = limit_of(Algorithm::kFixedWindow, 1, p);
    const Micros w = kT0 - kT0 % p;  // a Thursday, as 1970-01-01 was
    auto d = run_against_model(limit, {{Action::kConsume, kT0, 1},
                                       {Action::kConsume, w + p - 1, 1},
                                       {Action::kConsume, w + p, 1}});
    EXPECT_TRUE(SameDecision(d[0], want(true, 1, 0, 0, w + p - kT0)));
    EXPECT_TRUE(SameDecision(d[1], want(false, 1, 0, 1, 1)));
    EXPECT_TRUE(SameDecision(d[2], want(true, 1, 0, 0, p)));
}

TEST(AlgorithmEdges, RollingWindowClosesExactlyPAfterItOpened) {
    const Micros p = 7000;
    const Micros t0 = kT0 + 12345;
    Limit limit = limit_of(Algorithm::kRollingWindow, 2, p);
    auto d = run_against_model(limit, {{Action::kConsume, t0, 2},
                                       {Action::kConsume, t0 + p - 1, 1},
                                       {Action::kConsume, t0 + p, 1},
                                       {Action::kConsume, t0 + p + 1, 1},
                                       {Action::kConsume, t0 + 2 * p - 1, 1}});
    EXPECT_TRUE(SameDecision(d[0], want(true, 2, 0, 0, p)));
    EXPECT_TRUE(SameDecision(d[1], want(false, 2, 0, 1, 1)));
    EXPECT_TRUE(SameDecision(d[2], want(true, 2, 1, 0, p)));
    EXPECT_TRUE(SameDecision(d[3], want(true, 2, 0, 0, p - 1)));
    EXPECT_TRUE(SameDecision(d[4], want(false, 2, 0, 1, 1)));
}

TEST(AlgorithmEdges, SlidingWindowDropsACallExactlyPAfterIt) {
    const Micros p = 7000;
    const Micros t0 = kT0 + 12345;
    Limit limit = limit_of(Algorithm::kSlidingWindow, 2, p);
    auto d = run_against_model(limit, {{Action::kConsume, t0, 1},
                                       {Action::kConsume, t0 + 10, 1},
                                       {Action::kConsume, t0 + p - 1, 1},
                                       {Action::kConsume, t0 + p, 1},
                                       {Action::kConsume, t0 + p + 5, 1},
                                       {Action::kConsume, t0 + p + 10, 1}});
    EXPECT_TRUE(SameDecision(d[0], want(true, 2, 1, 0, p)));
    EXPECT_TRUE(SameDecision(d[1], want(true, 2, 0, 0, p)));
    EXPECT_TRUE(SameDecision(d[2], want(false, 2, 0, 1, 11)));
    EXPECT_TRUE(SameDecision(d[3], want(true, 2, 0, 0, p)));
    EXPECT_TRUE(SameDecision(d[4], want(false, 2, 0, 5, p - 5)));
    EXPECT_TRUE(SameDecision(d[5], want(true, 2, 0, 0, p)));
}

TEST(AlgorithmEdges, SlidingWindowRetryWaitsForEnoughUnitsToLeave) {
    const Micros p = 5000;
    Limit limit = limit_of(Algorithm::kSlidingWindow, 5, p);
    // 2 units at t0, 1 at t0 + 100, 2 at t0 + 200; a cost of 4 needs the first two instants
    // gone (2 + 1 = 3 leave, 2 stay: 2 + 4 > 5 until t0 + 200 + P).
    auto d = run_against_model(limit, {{Action::kConsume, kT0, 2},
                                       {Action::kConsume, kT0 + 100, 1},
                                       {Action::kConsume, kT0 + 200, 2},
                                       {Action::kPeek, kT0 + 300, 4},
                                       {Action::kPeek, kT0 + 300, 3},
                                       {Action::kPeek, kT0 + 300, 1}});
    EXPECT_TRUE(SameDecision(d[3], want(false, 5, 0, p - 100, p - 100)));
    EXPECT_TRUE(SameDecision(d[4], want(false, 5, 0, p - 200, p - 100)));
    EXPECT_TRUE(SameDecision(d[5], want(false, 5, 0, p - 300, p - 100)));
}

// ---- sliding_window: the bounded log ----------------------------------------------------------

std::string show_log(const std::vector<LogEntry>& log) {
    std::ostringstream out;
    out << "[";
    for (const LogEntry& e : log) {
        out << " " << e.at << ":" << e.units;
    }
    out << " ] (" << log.size() << " entries)";
    return out.str();
}

// What the exact log decides at `now` on the history the bounded one made.
Decision exact_decision(const Limit& limit, const models::ExactSlidingLog& exact, Micros now,
                        std::int64_t cost) {
    Decision d;
    d.limit = limit.limit;
    d.allowed = exact.admits(now, cost);
    d.remaining = limit.limit - exact.used(now);
    d.retry_after = d.allowed ? 0 : exact.admits_at(now, cost) - now;
    d.reset_after = std::max<Micros>(0, exact.full_at(now) - now);
    return d;
}

// How far the bounded log strayed from the exact one, over all histories.
struct BoundedTally {
    long exact_steps = 0;   // decided on a log equal to the exact one
    long merged_steps = 0;  // decided on a merged log
    long longer_waits = 0;  // denied calls told to wait longer than the exact log would
    long denied_only_bounded = 0;
};

// One long history on one key with a large limit: many distinct instants in a period, so the
// log is merged again and again. The exact log follows what the bounded one allowed. Checked
// at every call: the same decision while the stored log is the exact one (it stays so while
// the exact log has at most kMaxSlidingLog entries); otherwise never allowed where the exact
// log denies, never more remaining, waits no shorter and longer by less than one grid cell;
// and at the end at most N units in any span of length P. Some histories start from a state
// stored before the bound (a log of thousands of entries).
std::string check_bounded_history(std::uint64_t seed, BoundedTally& tally, std::string& trace) {
    std::mt19937_64 rng(seed);
    std::int64_t n = 0;
    switch (rng() % 5) {
        case 0:
            n = static_cast<std::int64_t>(draw(rng, 65, 3000));
            break;
        case 1:
            n = 1000;
            break;
        case 2:
            n = 100000;
            break;
        case 3:
            n = 1000000;
            break;
        default:
            n = kMaxLimit;
    }
    Micros period = 0;
    switch (rng() % 4) {
        case 0:
            period = kMinPeriod;
            break;
        case 1:
            period = static_cast<Micros>(draw(rng, kMinPeriod, 1000000));
            break;
        case 2:
            period = kMicrosPerMinute;
            break;
        default:
            period = kMaxWindow;
    }
    const Limit limit = limit_of(Algorithm::kSlidingWindow, n, period);
    const Micros cell = sliding_log_cell(period);
    // Costs of about N/400 fill the window in a few hundred calls, of 1 never (when N is large).
    const bool unit_costs = rng() % 2 == 0;
    const bool refunds = rng() % 2 == 0;
    const bool legacy = rng() % 4 == 0;
    const int calls = static_cast<int>(draw(rng, 200, 900));
    std::ostringstream log_of_calls;
    log_of_calls << "N=" << n << " P=" << period << " cell=" << cell << "\n";

    models::ExactSlidingLog exact(limit);
    KeyState state;
    Micros now = kT0 + static_cast<Micros>(draw(rng, 0, static_cast<std::uint64_t>(period)));
    if (legacy) {
        // As the unbounded log stored it: one entry per distinct instant, up to N of them.
        const int old_calls = static_cast<int>(draw(rng, 100, 3000));
        for (int i = 0; i < old_calls; ++i) {
            now += static_cast<Micros>(draw(rng, 1, static_cast<std::uint64_t>(period / 2000 + 1)));
            if (exact.admits(now, 1)) {
                exact.record(now, 1);
            }
        }
        state.algorithm = Algorithm::kSlidingWindow;
        state.log = exact.log();
        state.instant = exact.clock();
        log_of_calls << "stored log of " << state.log.size() << " entries\n";
    }
    auto draw_cost = [&]() -> std::int64_t {
        if (unit_costs || rng() % 4 == 0) {
            return 1;
        }
        const std::uint64_t r = rng() % 10;
        if (r == 0) {
            return static_cast<std::int64_t>(draw(rng, 1, static_cast<std::uint64_t>(n)));
        }
        return static_cast<std::int64_t>(draw(rng, 1, static_cast<std::uint64_t>(n / 200 + 1)));
    };
    for (int i = 0; i < calls; ++i) {
        // Mostly steps far below P/kMaxSlidingLog, so that a period holds hundreds of calls.
        const std::uint64_t r = rng() % 1000;
        const std::uint64_t p = static_cast<std::uint64_t>(period);
        if (r < 200) {
            // several calls at one instant
        } else if (r < 850) {
            now += static_cast<Micros>(draw(rng, 1, p / 256 + 1));
        } else if (r < 930) {
            now += static_cast<Micros>(draw(rng, 1, p / 32 + 1));
        } else if (r < 960) {
            now -= static_cast<Micros>(draw(rng, 1, p / 32 + 1));  // a clock stepping back
        } else if (r < 995 && !state.log.empty()) {
            // Where an entry leaves the window (merged or not), mostly the oldest.
            const std::size_t k = rng() % 4 == 0 ? rng() % state.log.size() : 0;
            now = state.log[k].at + period + static_cast<Micros>(draw(rng, 0, 2)) - 1;
        } else {
            now += static_cast<Micros>(draw(rng, p, 3 * p));
        }
        now = clamp_instant(now);
        Action action = Action::kConsume;
        const std::uint64_t a = rng() % 100;
        if (a < 10) {
            action = Action::kPeek;
        } else if (a < 18 && refunds) {
            action = Action::kRefund;
        }
        const std::int64_t cost = draw_cost();
        const bool same_log = state.log == exact.log();
        const Micros t = exact.effective(now);
        Decision want;
        if (action == Action::kRefund) {
            exact.give_back(now, cost);
            want = exact_decision(limit, exact, now, 1);
        } else {
            want = exact_decision(limit, exact, now, cost);
        }
        const Decision got = decide(limit, state, now, cost, action);
        if (action == Action::kConsume && got.allowed && cost > 0) {
            exact.record(now, cost);
            if (want.allowed) {
                // The exact log's answer after counting the same call.
                want.remaining = n - exact.used(now);
                want.reset_after = std::max<Micros>(0, exact.full_at(now) - now);
            }
        }
        log_of_calls << action_name(action) << "(now=" << now << ", cost=" << cost << ") -> "
                     << show(got) << ", exact " << show(want) << "\n";
        trace = log_of_calls.str();
        REQUIRE(got.retry_after >= 0 && got.reset_after >= 0, "negative wait");
        if (same_log) {
            ++tally.exact_steps;
            REQUIRE(same(got, want), "differs from the exact log it holds");
        } else {
            ++tally.merged_steps;
        }
        const bool asked = action != Action::kRefund && cost > 0;
        REQUIRE(!(asked && got.allowed && !want.allowed), "allowed what the exact log denies");
        REQUIRE(got.remaining <= want.remaining, "more remaining than the exact log");
        if (!got.allowed) {
            const Micros exact_at = want.allowed ? t : now + want.retry_after;
            REQUIRE(got.retry_after >= want.retry_after, "a shorter wait than the exact log's");
            REQUIRE(now + got.retry_after <= exact_at + cell - 1,
                    "waits " << now + got.retry_after - exact_at
                             << " µs longer than the exact log, a cell is " << cell);
            tally.longer_waits += now + got.retry_after > exact_at ? 1 : 0;
            tally.denied_only_bounded += want.allowed ? 1 : 0;
        }
        REQUIRE(got.reset_after >= want.reset_after, "full again before the exact log");
        REQUIRE(now + got.reset_after <= std::max(now + want.reset_after, t) + cell - 1,
                "full again more than a cell after the exact log");
        if (got.state_changed) {
            REQUIRE(static_cast<int>(state.log.size()) <= kMaxSlidingLog,
                    "written log " << show_log(state.log));
            for (std::size_t j = 0; j < state.log.size(); ++j) {
                REQUIRE(state.log[j].units > 0, "empty entry in " << show_log(state.log));
                REQUIRE(j == 0 || state.log[j - 1].at < state.log[j].at,
                        "log out of order: " << show_log(state.log));
            }
            const std::vector<LogEntry> exact_log = exact.log();
            if (same_log && static_cast<int>(exact_log.size()) <= kMaxSlidingLog) {
                REQUIRE(state.log == exact_log, "merged a log of "
                                                    << exact_log.size()
                                                    << " entries: " << show_log(state.log));
            }
        }
        // Later too, the stored log counts at least what the exact one does.
        const Micros later = now + static_cast<Micros>(draw(rng, 0, 2 * p));
        if (later <= kMaxInstant) {
            REQUIRE(probe(limit, state, later, 1).remaining <= n - exact.used(later),
                    "more remaining than the exact log at " << later);
        }
    }
    const std::int64_t most = models::most_in_span(exact.ledger(), period, false);
    REQUIRE(most <= n, most << " units in a span of length P");
    return {};
}

TEST(AlgorithmSlidingLog, BoundedLogAgainstTheExactLogOnLongHistories) {
    BoundedTally tally;
    for (std::uint64_t i = 0; i < 400; ++i) {
        std::string trace;
        const std::uint64_t seed = 7001ULL * 1000003 + i;
        const std::string failure = check_bounded_history(seed, tally, trace);
        if (!failure.empty()) {
            const std::size_t keep = 6000;
            ADD_FAILURE() << "seed " << seed << ": " << failure << "\n"
                          << (trace.size() > keep ? trace.substr(trace.size() - keep) : trace);
            return;
        }
    }
    // Both regimes were exercised, and merging did change some answers.
    EXPECT_GT(tally.exact_steps, 10000);
    EXPECT_GT(tally.merged_steps, 10000);
    EXPECT_GT(tally.longer_waits, 0);
    std::printf(
        "bounded log: %ld calls on the exact log, %ld on a merged one, %ld longer waits, %ld "
        "denied only by merging\n",
        tally.exact_steps, tally.merged_steps, tally.longer_waits, tally.denied_only_bounded);
}

// The grid holds a whole period in at most kMaxSlidingLog cells, for every accepted period.
TEST(AlgorithmSlidingLog, APeriodSpansAtMostTheBoundOfCells) {
    for (Micros period : {kMinPeriod, kMinPeriod + 1, Micros{62999}, Micros{63000}, Micros{63001},
                          kMicrosPerMinute, kMaxWindow - 1, kMaxWindow}) {
        const Micros cell = sliding_log_cell(period);
        EXPECT_GE(cell * (kMaxSlidingLog - 1), period) << period;
        EXPECT_LT((cell - 1) * (kMaxSlidingLog - 1), period) << period;
        // Entries in (t - P, t]: cells floor((t - P + 1) / cell) .. floor(t / cell).
        for (Micros t : {Micros{0} + period, kT0, kT0 + cell - 1, kT0 + 1}) {
            EXPECT_LE(t / cell - (t - period + 1) / cell + 1, kMaxSlidingLog) << period;
        }
    }
}

// A steady stream at a large limit: the row keeps at most kMaxSlidingLog entries, every call
// at its own microsecond, and a full window is denied exactly as long as it must be.
TEST(AlgorithmSlidingLog, ASteadyStreamKeepsTheLogBounded) {
    const Micros p = kMicrosPerMinute;
    const Limit limit = limit_of(Algorithm::kSlidingWindow, 1000000, p);
    KeyState state;
    Micros now = kT0;
    for (int i = 0; i < 20000; ++i) {
        now += 7;
        ASSERT_TRUE(decide(limit, state, now, 1, Action::kConsume).allowed);
        ASSERT_LE(state.log.size(), static_cast<std::size_t>(kMaxSlidingLog));
    }
    std::int64_t units = 0;
    for (const LogEntry& e : state.log) {
        units += e.units;
    }
    EXPECT_EQ(units, 20000);
    EXPECT_EQ(state.log.back().at, now);  // the newest instant is never moved
    // Filled to the limit: denied until the oldest units leave, at most a cell late.
    ASSERT_TRUE(decide(limit, state, now, 1000000 - 20000, Action::kConsume).allowed);
    const Decision denied = decide(limit, state, now, 1, Action::kConsume);
    ASSERT_FALSE(denied.allowed);
    EXPECT_GE(now + denied.retry_after, kT0 + 7 + p);
    EXPECT_LT(now + denied.retry_after, kT0 + 7 + p + sliding_log_cell(p));
}

TEST(AlgorithmEdges, SlidingWindowCounterWeighsThePreviousWindow) {
    const Micros p = 1000;
    const Micros w = kT0;  // aligned
    Limit limit = limit_of(Algorithm::kSlidingWindowCounter, 4, p);
    auto d = run_against_model(limit, {{Action::kConsume, w, 4},
                                       {Action::kPeek, w + p, 1},
                                       {Action::kConsume, w + p + 249, 1},
                                       {Action::kConsume, w + p + 250, 1},
                                       {Action::kPeek, w + 3 * p - 1, 1},
                                       {Action::kPeek, w + 3 * p, 1}});
    EXPECT_TRUE(SameDecision(d[0], want(true, 4, 0, 0, 2 * p)));
    // Previous window 4 units, fully weighted at the start of the next one.
    EXPECT_TRUE(SameDecision(d[1], want(false, 4, 0, 250, p)));
    EXPECT_TRUE(SameDecision(d[2], want(false, 4, 0, 1, p - 249)));
    // 4 * 750 / 1000 = 3 units of weight left, plus this one.
    EXPECT_TRUE(SameDecision(d[3], want(true, 4, 0, 0, 2 * p - 250)));
    EXPECT_TRUE(SameDecision(d[4], want(true, 4, 3, 0, 1)));
    EXPECT_TRUE(SameDecision(d[5], want(true, 4, 4, 0, 0)));
}

TEST(AlgorithmEdges, BucketsWithABurstAboveTheRate) {
    for (Algorithm algorithm : {Algorithm::kTokenBucket, Algorithm::kGcra}) {
        SCOPED_TRACE(algorithm_name(algorithm));
        Limit limit = limit_of(algorithm, 2, 1000, 5);  // 5 at once, then 2 per ms
        auto d = run_against_model(limit, {{Action::kConsume, kT0, 5},
                                           {Action::kConsume, kT0, 1},
                                           {Action::kConsume, kT0 + 499, 1},
                                           {Action::kConsume, kT0 + 500, 1},
                                           {Action::kConsume, kT0 + 1000, 3},
                                           {Action::kPeek, kT0 + 2500, 5},
                                           {Action::kPeek, kT0 + 3000, 5}});
        EXPECT_TRUE(SameDecision(d[0], want(true, 5, 0, 0, 2500)));
        EXPECT_TRUE(SameDecision(d[1], want(false, 5, 0, 500, 2500)));
        EXPECT_TRUE(SameDecision(d[2], want(false, 5, 0, 1, 2001)));
        EXPECT_TRUE(SameDecision(d[3], want(true, 5, 0, 0, 2500)));
        // One token at kT0 + 1000; three need another 1000 µs.
        EXPECT_TRUE(SameDecision(d[4], want(false, 5, 1, 1000, 2000)));
        EXPECT_TRUE(SameDecision(d[5], want(false, 5, 4, 500, 500)));
        EXPECT_TRUE(SameDecision(d[6], want(true, 5, 5, 0, 0)));
    }
}

TEST(AlgorithmEdges, BucketsWithABurstBelowTheRate) {
    for (Algorithm algorithm : {Algorithm::kTokenBucket, Algorithm::kGcra}) {
        SCOPED_TRACE(algorithm_name(algorithm));
        Limit limit = limit_of(algorithm, 10, 1000, 2);  // 2 at once, one per 100 µs
        auto d = run_against_model(limit, {{Action::kConsume, kT0, 2},
                                           {Action::kConsume, kT0 + 1, 1},
                                           {Action::kConsume, kT0 + 100, 1},
                                           {Action::kPeek, kT0 + 10000, 2}});
        EXPECT_TRUE(SameDecision(d[0], want(true, 2, 0, 0, 200)));
        EXPECT_TRUE(SameDecision(d[1], want(false, 2, 0, 99, 199)));
        EXPECT_TRUE(SameDecision(d[2], want(true, 2, 0, 0, 200)));
        EXPECT_TRUE(SameDecision(d[3], want(true, 2, 2, 0, 0)));
    }
}

// The first and last instants of the clock's range, where a window or a refill reaches past
// kMaxInstant.
TEST(AlgorithmEdges, AtBothEndsOfTheClock) {
    for (Algorithm algorithm : kAlgorithms) {
        SCOPED_TRACE(algorithm_name(algorithm));
        Limit limit = limit_of(algorithm, 3, 1000);
        auto at_zero = run_against_model(limit, {{Action::kConsume, 0, 3},
                                                 {Action::kConsume, 0, 1},
                                                 {Action::kRefund, 0, 1},
                                                 {Action::kConsume, 999, 2}});
        EXPECT_TRUE(at_zero[0].allowed);
        EXPECT_FALSE(at_zero[1].allowed);
        auto at_end = run_against_model(limit, {{Action::kConsume, kMaxInstant - 1, 1},
                                                {Action::kConsume, kMaxInstant - 1, 2},
                                                {Action::kConsume, kMaxInstant, 1},
                                                {Action::kPeek, kMaxInstant, 3},
                                                {Action::kRefund, kMaxInstant, 3}});
        // kMaxInstant starts a millisecond window: only the fixed window has room again.
        EXPECT_EQ(at_end[2].allowed, algorithm == Algorithm::kFixedWindow);
        EXPECT_FALSE(at_end[3].allowed);
        EXPECT_GT(at_end[3].retry_after, 0);
        EXPECT_GT(at_end[3].reset_after, 0);
    }
    // Known values at 0: the counter needs two thirds of the next window to pass; the buckets
    // refill one token per 334 µs.
    const Micros retry[] = {1000, 1000, 1000, 1334, 334, 334};
    const Micros reset[] = {1000, 1000, 1000, 2000, 1000, 1000};
    for (int i = 0; i < 6; ++i) {
        Limit limit = limit_of(kAlgorithms[i], 3, 1000);
        KeyState state;
        decide(limit, state, 0, 3, Action::kConsume);
        EXPECT_TRUE(SameDecision(probe(limit, state, 0, 1), want(false, 3, 0, retry[i], reset[i])))
            << algorithm_name(kAlgorithms[i]);
    }
}

// The largest limit and period together: every intermediate product is ~2^76.
TEST(AlgorithmEdges, LargestLimitWithTheLongestPeriod) {
    for (Algorithm algorithm : kAlgorithms) {
        SCOPED_TRACE(algorithm_name(algorithm));
        Limit limit = limit_of(algorithm, kMaxLimit, kMaxWindow);
        for (Micros start : {Micros{0}, kT0, kMaxInstant - kMaxWindow, kMaxInstant}) {
            SCOPED_TRACE(start);
            auto at = [&](Micros offset) { return std::min(start + offset, kMaxInstant); };
            auto d = run_against_model(limit, {{Action::kConsume, start, kMaxLimit},
                                               {Action::kConsume, start, 1},
                                               {Action::kConsume, at(kMaxWindow / 2), kMaxLimit},
                                               {Action::kConsume, at(kMaxWindow / 2), 1000},
                                               {Action::kRefund, at(kMaxWindow / 2), 7},
                                               {Action::kPeek, at(kMaxWindow - 1), kMaxLimit},
                                               {Action::kConsume, at(kMaxWindow), kMaxLimit},
                                               {Action::kConsume, at(3 * kMaxWindow), 1}});
            EXPECT_TRUE(d[0].allowed);
            EXPECT_EQ(d[0].remaining, 0);
            EXPECT_FALSE(d[1].allowed);
            EXPECT_GT(d[1].retry_after, 0);
            EXPECT_LE(d[1].retry_after, 2 * kMaxWindow);
            EXPECT_GT(d[0].reset_after, 0);
            EXPECT_LE(d[0].reset_after, 2 * kMaxWindow);
        }
        // The buckets refill one token per P / N = 14685.0... µs.
        if (is_bucket(algorithm)) {
            KeyState state;
            decide(limit, state, kT0, kMaxLimit, Action::kConsume);
            EXPECT_EQ(probe(limit, state, kT0, 1).retry_after, 14686);
            EXPECT_EQ(probe(limit, state, kT0, 1).reset_after, kMaxWindow);
        }
    }
}

// The header's promise for GCRA, checked directly: under a monotone clock it decides exactly as
// the token bucket with the same N, P and B, call for call (refunds and blocks included).
TEST(AlgorithmProperties, GcraDecidesLikeTheTokenBucketUnderAMonotoneClock) {
    std::mt19937_64 rng(107);
    for (int sequence = 0; sequence < 20000; ++sequence) {
        std::int64_t n = static_cast<std::int64_t>(draw(rng, 1, 8));
        Micros period = static_cast<Micros>(draw(rng, kMinPeriod, 5000));
        std::int64_t burst = static_cast<std::int64_t>(draw(rng, 1, 10));
        Limit bucket = limit_of(Algorithm::kTokenBucket, n, period, burst);
        Limit gcra = limit_of(Algorithm::kGcra, n, period, burst);
        KeyState a;
        KeyState b;
        Micros now = kT0 + static_cast<Micros>(draw(rng, 0, period));
        for (int i = 0; i < 30; ++i) {
            now += rng() % 3 == 0 ? 0 : static_cast<Micros>(draw(rng, 0, 2 * period));
            if (rng() % 40 == 0) {
                Micros until = now + static_cast<Micros>(draw(rng, 0, period));
                block_until(a, until);
                block_until(b, until);
                continue;
            }
            Action action = static_cast<Action>(rng() % 10 < 7 ? 0 : rng() % 3);
            std::int64_t cost =
                static_cast<std::int64_t>(draw(rng, 0, static_cast<std::uint64_t>(burst)));
            Decision x = decide(bucket, a, now, cost, action);
            Decision y = decide(gcra, b, now, cost, action);
            ASSERT_TRUE(SameDecision(y, x))
                << "sequence " << sequence << " call " << i << ": " << action_name(action)
                << "(now=" << now << ", cost=" << cost << ") N=" << n << " P=" << period
                << " B=" << burst;
        }
    }
}

// One rule for both buckets: token_bucket and gcra decide alike call for call on any clock,
// through limit, period and burst changes, charges and delays, so an edited limit never makes
// them part.
TEST(AlgorithmProperties, GcraAndTheTokenBucketAgreeThroughLimitChanges) {
    std::mt19937_64 rng(131);
    for (int sequence = 0; sequence < 20000; ++sequence) {
        KeyState a;
        KeyState b;
        Micros now = kT0 + static_cast<Micros>(draw(rng, 0, 1000000));
        Limit bucket;
        Limit gcra;
        for (int i = 0; i < 30; ++i) {
            if (i == 0 || rng() % 5 == 0) {
                // A new limit: N, P and B each may change, or stay.
                const std::int64_t n = static_cast<std::int64_t>(draw(rng, 1, 200));
                const Micros period = static_cast<Micros>(draw(rng, kMinPeriod, 100000));
                const std::int64_t burst = static_cast<std::int64_t>(draw(rng, 1, 200));
                bucket = limit_of(Algorithm::kTokenBucket, n, period, burst);
                if (rng() % 4 == 0)
                    bucket.max_delay = static_cast<Micros>(draw(rng, 0, 2 * period));
                gcra = bucket;
                gcra.algorithm = Algorithm::kGcra;
            }
            const std::uint64_t step = rng() % 10;
            now += step < 3   ? 0
                   : step < 9 ? static_cast<Micros>(draw(rng, 0, bucket.period))
                              : -static_cast<Micros>(draw(rng, 0, bucket.period));
            if (rng() % 40 == 0) {
                const Micros until = now + static_cast<Micros>(draw(rng, 0, bucket.period));
                block_until(a, until);
                block_until(b, until);
                continue;
            }
            const Action action = static_cast<Action>(rng() % 10 < 6 ? 0 : rng() % 4);
            const std::int64_t cost =
                static_cast<std::int64_t>(draw(rng, 0, static_cast<std::uint64_t>(bucket.burst)));
            const Decision x = decide(bucket, a, now, cost, action);
            const Decision y = decide(gcra, b, now, cost, action);
            ASSERT_TRUE(SameDecision(y, x))
                << "sequence " << sequence << " call " << i << ": " << action_name(action)
                << "(now=" << now << ", cost=" << cost << ") N=" << bucket.limit
                << " P=" << bucket.period << " B=" << bucket.burst;
            ASSERT_EQ(idle_from(gcra, b), idle_from(bucket, a));
        }
    }
}

// The reported case: 95 of 100 used, then the limit becomes 10 a period. Both buckets keep the
// 5 units still available, so the next call is allowed and leaves 4.
TEST(AlgorithmLimitChanges, ALoweredLimitKeepsTheUnitsStillAvailableForBothBuckets) {
    for (Algorithm algorithm : {Algorithm::kTokenBucket, Algorithm::kGcra}) {
        SCOPED_TRACE(algorithm_name(algorithm));
        const Micros nine_seconds = 9 * kMicrosPerSecond;
        KeyState state;
        const Decision first =
            decide(limit_of(algorithm, 100, nine_seconds), state, kT0, 95, Action::kConsume);
        EXPECT_TRUE(first.allowed);
        EXPECT_EQ(first.remaining, 5);
        const Decision next =
            decide(limit_of(algorithm, 10, nine_seconds), state, kT0, 1, Action::kConsume);
        EXPECT_TRUE(SameDecision(next, want(true, 10, 4, 0, 5400000)));
    }
}

// A 0.5.0 gcra state (an arrival time) decides as the bucket state it stands for, and the first
// write keeps the bucket's form.
TEST(AlgorithmLimitChanges, AnArrivalTimeStateReadsAsTheBucketItStandsFor) {
    std::mt19937_64 rng(132);
    for (int sequence = 0; sequence < 5000; ++sequence) {
        const std::int64_t n = static_cast<std::int64_t>(draw(rng, 1, 50));
        const Micros period = static_cast<Micros>(draw(rng, kMinPeriod, 100000));
        const Limit limit = limit_of(Algorithm::kGcra, n, period, draw(rng, 1, 50));
        KeyState state;
        Micros now = kT0;
        for (int i = 0; i < 5; ++i) {
            now += static_cast<Micros>(draw(rng, 0, period));
            decide(limit, state, now, static_cast<std::int64_t>(rng() % (limit.burst + 1)),
                   Action::kConsume);
        }
        KeyState old = written_before_measuring(limit, state);
        const Micros at = now + static_cast<Micros>(draw(rng, 0, 2 * period));
        const std::int64_t cost = static_cast<std::int64_t>(rng() % (limit.burst + 1));
        const Decision from_old = decide(limit, old, at, cost, Action::kConsume);
        ASSERT_TRUE(SameDecision(from_old, decide(limit, state, at, cost, Action::kConsume)));
        if (from_old.state_changed) {
            ASSERT_EQ(old, state);
        }
    }
}

// A refund that empties a sliding window's log still leaves the clock where the key has seen
// it: a call behind it is counted at that instant, not at its own, so the clock stepping back
// grants no more than a stopped one.
TEST(AlgorithmClock, SlidingWindowKeepsItsClockWhenARefundEmptiesTheLog) {
    Limit limit = limit_of(Algorithm::kSlidingWindow, 1, 1000);
    KeyState state;
    ASSERT_TRUE(decide(limit, state, kT0 + 5000, 1, Action::kConsume).allowed);
    decide(limit, state, kT0 + 5000, 1, Action::kRefund);
    Decision behind = decide(limit, state, kT0 + 100, 1, Action::kConsume);
    EXPECT_TRUE(SameDecision(behind, want(true, 1, 0, 0, 5900)));  // counted at kT0 + 5000
    // A stopped clock would read kT0 + 5000 here, with that unit still counted.
    EXPECT_FALSE(decide(limit, state, kT0 + 1500, 1, Action::kConsume).allowed);
}

// Behind the clock the counter weighs the previous window as at the start of the state's
// window, which can exceed N; a call of cost 0 is still allowed, as everywhere else.
TEST(AlgorithmClock, CostZeroIsAllowedBehindTheClock) {
    Limit limit = limit_of(Algorithm::kSlidingWindowCounter, 2, 1000);
    KeyState state;
    ASSERT_TRUE(decide(limit, state, 1000, 2, Action::kConsume).allowed);
    ASSERT_TRUE(decide(limit, state, 2500, 1, Action::kConsume).allowed);
    Decision d = probe(limit, state, 2000, 0);
    EXPECT_TRUE(d.allowed);
    EXPECT_EQ(d.remaining, 0);
    EXPECT_FALSE(probe(limit, state, 2000, 1).allowed);
}

// idle_from must not be earlier than the instant a clamping algorithm decides at: a state that
// counts nothing still holds calls behind its instant to that instant.
TEST(AlgorithmClock, IdleFromIsNotBeforeTheInstantTheStateDecidesAt) {
    for (Algorithm algorithm : kAlgorithms) {
        SCOPED_TRACE(algorithm_name(algorithm));
        Limit limit = limit_of(algorithm, 1, 1000);
        KeyState state;
        ASSERT_TRUE(decide(limit, state, kT0 + 5500, 1, Action::kConsume).allowed);
        decide(limit, state, kT0 + 5500, 1, Action::kRefund);
        Micros idle = idle_from(limit, state);
        KeyState fresh;
        for (Micros at : {idle, idle + 1, idle + 400, idle + 1000}) {
            if (at < 0) {
                continue;
            }
            EXPECT_TRUE(SameDecision(decide(limit, state, at, 1, Action::kConsume),
                                     decide(limit, fresh, at, 1, Action::kConsume)))
                << "at idle_from + " << at - idle;
        }
    }
}

// ---- a changed limit or period applies to the next call ---------------------------------------

// The reported case: one call under 1 a day, then the limit becomes 100 a minute. Five minutes
// later the key is allowed by both buckets (gcra used to wait out the rest of the day).
TEST(AlgorithmLimitChanges, ADailyLimitRaisedToAMinuteLimitAppliesToTheNextCall) {
    for (Algorithm algorithm : {Algorithm::kTokenBucket, Algorithm::kGcra}) {
        SCOPED_TRACE(algorithm_name(algorithm));
        const Limit day = limit_of(algorithm, 1, kMicrosPerDay);
        const Limit minute = limit_of(algorithm, 100, kMicrosPerMinute);
        KeyState state;
        ASSERT_TRUE(decide(day, state, kT0, 1, Action::kConsume).allowed);
        EXPECT_EQ(state.measured_limit, 1);
        EXPECT_EQ(state.measured_period, kMicrosPerDay);
        const Micros later = kT0 + 5 * kMicrosPerMinute;
        EXPECT_TRUE(SameDecision(probe(minute, state, later, 1), want(true, 100, 100, 0, 0)));
        const Decision d = decide(minute, state, later, 1, Action::kConsume);
        EXPECT_TRUE(SameDecision(d, want(true, 100, 99, 0, 600000)));
        EXPECT_EQ(state.measured_limit, 100);
        EXPECT_EQ(state.measured_period, kMicrosPerMinute);
        // And back: the units still available (99) are kept, at most the day's one.
        const Decision back = probe(day, state, later, 1);
        EXPECT_TRUE(back.allowed);
        EXPECT_EQ(back.remaining, 1);
    }
}

// A state written before the measured limit was kept (0, 0) reads as measured in the limit
// asked for, and a state that records it decides exactly as one that does not.
TEST(AlgorithmLimitChanges, TheMeasuredLimitChangesNothingWhileTheLimitStaysTheSame) {
    std::mt19937_64 rng(108);
    for (Algorithm algorithm : {Algorithm::kTokenBucket, Algorithm::kGcra}) {
        for (int sequence = 0; sequence < 5000; ++sequence) {
            const std::int64_t n = static_cast<std::int64_t>(draw(rng, 1, 8));
            const Micros period = static_cast<Micros>(draw(rng, kMinPeriod, 5000));
            const Limit limit = limit_of(algorithm, n, period, draw(rng, 1, 10));
            KeyState state;
            Micros now = kT0;
            for (int i = 0; i < 20; ++i) {
                now += static_cast<Micros>(draw(rng, 0, period));
                const Action action = static_cast<Action>(rng() % 10 < 7 ? 0 : rng() % 3);
                decide(limit, state, now, static_cast<std::int64_t>(rng() % (limit.burst + 1)),
                       action);
                KeyState unknown = written_before_measuring(limit, state);
                // A 0.5.0 gcra state is an arrival time, which no clock behind its write reads
                // as the bucket does (that clamps such a call to the write's instant).
                const Micros back = algorithm == Algorithm::kGcra ? 0 : period / 2;
                const Micros at = now + static_cast<Micros>(draw(rng, 0, period)) - back;
                const std::int64_t cost = static_cast<std::int64_t>(rng() % (limit.burst + 1));
                ASSERT_TRUE(
                    SameDecision(probe(limit, unknown, at, cost), probe(limit, state, at, cost)));
                ASSERT_EQ(idle_from(limit, unknown), idle_from(limit, state));
            }
        }
    }
}

// The longest a call that fits the limit can ever wait under it, with the clock going forward.
Micros longest_wait(const Limit& limit) {
    switch (limit.algorithm) {
        case Algorithm::kSlidingWindowCounter:
            return 2 * limit.period;  // the current window's units weigh on the next one
        case Algorithm::kTokenBucket:
        case Algorithm::kGcra:
            return static_cast<Micros>(
                models::ceil_div(models::Wide(limit.burst) * limit.period, limit.limit));
        default:
            return limit.period;
    }
}

// Empty when `calls` (all allowed under `limit`) keep the algorithm's guarantee.
std::string guarantee_violation(const Limit& limit, const std::vector<models::Call>& calls) {
    const std::int64_t n = limit.limit;
    const Micros p = limit.period;
    std::ostringstream out;
    switch (limit.algorithm) {
        case Algorithm::kFixedWindow:
        case Algorithm::kSlidingWindowCounter: {
            std::map<Micros, std::int64_t> per_window;
            for (const models::Call& call : calls)
                per_window[call.at / p] += call.units;
            for (const auto& [window, units] : per_window) {
                if (units > n)
                    out << units << " units in the aligned window " << window;
            }
            if (limit.algorithm == Algorithm::kSlidingWindowCounter &&
                models::most_in_span(calls, p, false) > 2 * n)
                out << "more than 2N in a span P";
            break;
        }
        case Algorithm::kRollingWindow:
            if (models::most_in_span(calls, p, false) > 2 * n)
                out << "more than 2N in a span P";
            break;
        case Algorithm::kSlidingWindow:
            if (models::most_in_span(calls, p, false) > n)
                out << "more than N in a span P";
            break;
        default:
            for (std::size_t i = 0; i < calls.size(); ++i) {
                std::int64_t units = 0;
                for (std::size_t j = i; j < calls.size(); ++j) {
                    units += calls[j].units;
                    const models::Wide refill = models::Wide(n) * (calls[j].at - calls[i].at) / p;
                    if (units > limit.burst + refill)
                        out << units << " units from " << calls[i].at << " to " << calls[j].at;
                }
            }
    }
    return out.str();
}

// Random history under one limit, then another: looser ("relax": no lower limit or burst, no
// longer period), tighter, or anything. After the change every decision is exact for the new
// limit (its waits come true, its remaining never passes the new allowance), the units allowed
// from then on keep the new limit's guarantee, and after relaxing no call waits longer than the
// new limit could ever make it.
TEST(AlgorithmLimitChanges, RelaxThenTightenEveryAlgorithm) {
    std::mt19937_64 rng(109);
    const Micros kPeriods[] = {kMinPeriod, 1500, 4000, 10000};
    for (Algorithm algorithm : kAlgorithms) {
        SCOPED_TRACE(algorithm_name(algorithm));
        for (int sequence = 0; sequence < 20000; ++sequence) {
            auto draw_limit = [&] {
                const std::int64_t n = static_cast<std::int64_t>(draw(rng, 1, 6));
                return limit_of(algorithm, n, kPeriods[rng() % 4],
                                static_cast<std::int64_t>(draw(rng, 1, 8)));
            };
            Limit first = draw_limit();
            Limit second = draw_limit();
            const int mode = static_cast<int>(rng() % 3);  // relax, tighten, anything
            if (mode < 2) {
                Limit low = first;
                Limit high = second;
                low.limit = std::min(first.limit, second.limit);
                high.limit = std::max(first.limit, second.limit);
                low.period = std::max(first.period, second.period);
                high.period = std::min(first.period, second.period);
                low.burst = std::min(first.burst, second.burst);
                high.burst = std::max(first.burst, second.burst);
                if (!is_bucket(algorithm)) {
                    low.burst = low.limit;
                    high.burst = high.limit;
                }
                first = mode == 0 ? low : high;
                second = mode == 0 ? high : low;
            }
            std::ostringstream trace;
            trace << "sequence " << sequence << " mode " << mode << ": N=" << first.limit
                  << " P=" << first.period << " B=" << first.burst << " then N=" << second.limit
                  << " P=" << second.period << " B=" << second.burst;
            SCOPED_TRACE(trace.str());

            KeyState state;
            Micros now = kT0 + static_cast<Micros>(draw(rng, 0, 20000));
            const int before = static_cast<int>(draw(rng, 0, 25));
            for (int i = 0; i < before; ++i) {
                now += rng() % 3 == 0 ? 0 : static_cast<Micros>(draw(rng, 0, first.period));
                const Action action = static_cast<Action>(rng() % 10 < 7 ? 0 : rng() % 3);
                decide(first, state, now, static_cast<std::int64_t>(draw(rng, 1, capacity(first))),
                       action);
            }

            now += static_cast<Micros>(draw(rng, 0, first.period / 2));
            const std::int64_t cost = static_cast<std::int64_t>(draw(rng, 1, capacity(second)));
            if (mode == 0) {
                const Decision next = probe(second, state, now, cost);
                ASSERT_LE(next.retry_after, longest_wait(second));
                ASSERT_TRUE(probe(second, state, now + longest_wait(second), cost).allowed);
            }

            std::vector<models::Call> allowed;
            const int after = static_cast<int>(draw(rng, 1, 25));
            for (int i = 0; i < after; ++i) {
                if (i > 0)
                    now += rng() % 3 == 0 ? 0 : static_cast<Micros>(draw(rng, 0, second.period));
                const std::int64_t c =
                    i == 0 ? cost : static_cast<std::int64_t>(draw(rng, 0, capacity(second)));
                const Action action = rng() % 5 == 0 ? Action::kPeek : Action::kConsume;
                const KeyState was = state;
                const Decision d = decide(second, state, now, c, action);
                ASSERT_LE(d.remaining, capacity(second)) << "call " << i;
                ASSERT_GE(d.remaining, 0) << "call " << i;
                if (d.allowed && action == Action::kConsume && c > 0)
                    allowed.push_back(models::Call{now, c});
                // The waits come true on the state as it was left.
                if (!d.allowed) {
                    ASSERT_TRUE(probe(second, state, now + d.retry_after, c).allowed)
                        << "call " << i << " retry_after " << d.retry_after;
                    ASSERT_FALSE(probe(second, state, now + d.retry_after - 1, c).allowed)
                        << "call " << i << " retry_after " << d.retry_after;
                    ASSERT_EQ(state, was);
                }
                const Decision full = probe(second, state, now + d.reset_after, 1);
                const Decision fresh = probe(second, KeyState{}, now + d.reset_after, 1);
                ASSERT_TRUE(SameDecision(full, fresh)) << "call " << i << " at reset_after";
            }
            const std::string violation = guarantee_violation(second, allowed);
            ASSERT_TRUE(violation.empty()) << violation;

            // From idle_from on, the state decides like a fresh key under the new limit.
            const Micros idle = std::max(idle_from(second, state), now);
            for (Micros at : {idle, idle + 1, idle + second.period}) {
                ASSERT_TRUE(SameDecision(probe(second, state, at, 1, Action::kConsume),
                                         probe(second, KeyState{}, at, 1, Action::kConsume)))
                    << "at idle_from + " << at - idle;
            }
        }
    }
}

}  // namespace
}  // namespace ratelimit
