// Brute-force reference models of the six algorithms, for the property tests in
// algorithms_test.cpp.
//
// Each model keeps the history of what it allowed (units at the instants they were counted, and
// the refunds), and answers every question from that history directly: how many units a window
// or span holds, what a bucket's level is. None of them uses the compact state encodings of the
// implementation (window start + amount, tokens + fraction, theoretical arrival time), so a
// decision that agrees with a model agrees with the contract rather than with a second copy of
// the same formulas. They are slow (every question rescans the history); sequences are short.
//
// Time: a model decides at t = max(now, the latest instant its state has recorded), which is how
// the contract defines "time standing still": peeks and denied calls record nothing, so they do
// not move the clock. Which instant counts as recorded is part of each algorithm's contract and
// is stated on each model. A refund is a write like an allowed consume: it records its own
// effective instant even when it gives nothing back (the contract leaves this open; recording
// only ever moves the clock forward, so a later call behind it is still held to what a stopped
// clock would allow).
#pragma once

#include <algorithm>
#include <cstdint>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "ratelimit/algorithms.hpp"

namespace ratelimit {
namespace models {

// Products of a limit, a period and an instant need up to ~90 bits.
using Wide = __int128;

// Floor and ceiling of a / b, for b > 0 and a of either sign.
inline Wide floor_div(Wide a, Wide b) {
    Wide q = a / b;
    return (a % b != 0 && a < 0) ? q - 1 : q;
}
inline Wide ceil_div(Wide a, Wide b) {
    Wide q = a / b;
    return (a % b != 0 && a > 0) ? q + 1 : q;
}

inline std::string wide_string(Wide value) {
    if (value == 0) {
        return "0";
    }
    bool negative = value < 0;
    std::string digits;
    while (value != 0) {
        int digit = static_cast<int>(value % 10);
        digits.push_back(static_cast<char>('0' + (digit < 0 ? -digit : digit)));
        value /= 10;
    }
    if (negative) {
        digits.push_back('-');
    }
    return std::string(digits.rbegin(), digits.rend());
}

// Units counted at one instant.
struct Call {
    Micros at = 0;
    std::int64_t units = 0;
};

// A refund takes back the most recently counted units first.
inline void remove_newest(std::vector<Call>& calls, std::int64_t units) {
    while (units > 0 && !calls.empty()) {
        Call& newest = calls.back();
        std::int64_t take = std::min(units, newest.units);
        newest.units -= take;
        units -= take;
        if (newest.units == 0) {
            calls.pop_back();
        }
    }
}

// The most units in any span [x, x + length) (or [x, x + length] when `closed`). The busiest
// span can always be slid right until it starts at a call, so only those starts are tried.
inline std::int64_t most_in_span(std::vector<Call> calls, Micros length, bool closed) {
    std::sort(calls.begin(), calls.end(), [](const Call& a, const Call& b) { return a.at < b.at; });
    std::int64_t most = 0;
    for (std::size_t i = 0; i < calls.size(); ++i) {
        std::int64_t total = 0;
        for (std::size_t j = i; j < calls.size(); ++j) {
            Micros gap = calls[j].at - calls[i].at;
            if (closed ? gap > length : gap >= length) {
                break;
            }
            total += calls[j].units;
        }
        most = std::max(most, total);
    }
    return most;
}

// What every model shares: the block, the shape of a decision and of a refund. Subclasses
// answer four questions at `now` (counted at their own effective time t) and record calls.
class Model {
  public:
    explicit Model(const Limit& limit) : limit_(limit) {}
    virtual ~Model() = default;

    Decision decide(Micros now, std::int64_t cost, Action action) {
        if (action == Action::kRefund) {
            give_back(now, cost);  // also while blocked: a block stops calls, not refunds
            return decide(now, 1, Action::kPeek);
        }
        Decision d;
        d.limit = capacity();
        if (now < blocked_until_) {
            // Nothing is recorded while blocked: the waits run to the block's end, then on to
            // what the count says at that instant.
            const Micros end = blocked_until_;
            const bool fits_at_end = cost == 0 || admits(end, cost);
            const Micros retry_from_end = fits_at_end ? 0 : admits_at(end, cost) - end;
            d.retry_after = end - now + retry_from_end;
            d.reset_after = end - now + std::max<Micros>(0, full_at(end) - end);
            return d;
        }
        d.allowed = cost == 0 || admits(now, cost);  // cost 0 fits whenever not blocked
        if (d.allowed && action == Action::kConsume && cost > 0) {
            record(now, cost);
        }
        d.remaining = remaining(now);
        d.retry_after = d.allowed ? 0 : std::max<Micros>(0, admits_at(now, cost) - now);
        d.reset_after = std::max<Micros>(0, full_at(now) - now);
        return d;
    }

    void block(Micros until) { blocked_until_ = std::max(blocked_until_, until); }

    // The latest instant the state has recorded (-1 before anything was recorded).
    virtual Micros clock() const = 0;

    // Empty when the whole history honours the algorithm's guarantee, else what broke.
    virtual std::string guarantee_violation() const = 0;

    std::int64_t capacity() const {
        bool bucket =
            limit_.algorithm == Algorithm::kTokenBucket || limit_.algorithm == Algorithm::kGcra;
        return bucket ? limit_.burst : limit_.limit;
    }

  protected:
    // Whether `cost` units fit at `now`.
    virtual bool admits(Micros now, std::int64_t cost) const = 0;
    // The units a call could take at `now`.
    virtual std::int64_t remaining(Micros now) const = 0;
    // The first instant at which `cost` units fit, if nothing else happens (only asked when
    // they do not fit at `now`).
    virtual Micros admits_at(Micros now, std::int64_t cost) const = 0;
    // The instant at which the key is back to its full allowance, if nothing else happens.
    virtual Micros full_at(Micros now) const = 0;
    virtual void record(Micros now, std::int64_t cost) = 0;
    virtual void give_back(Micros now, std::int64_t cost) = 0;

    std::int64_t n() const { return limit_.limit; }
    Micros p() const { return limit_.period; }
    std::int64_t b() const { return limit_.burst; }

    Limit limit_;
    Micros blocked_until_ = 0;
};

// fixed_window: the units counted in the epoch-aligned window holding t. The recorded instant is
// that of the latest allowed call (its window is the state's window).
class FixedWindowModel final : public Model {
  public:
    using Model::Model;

    Micros clock() const override { return latest_; }

    std::string guarantee_violation() const override {
        std::map<Micros, std::int64_t> per_window;
        for (const Call& call : calls_) {
            per_window[window_of(call.at)] += call.units;
        }
        for (const auto& [start, units] : per_window) {
            if (units > n()) {
                std::ostringstream out;
                out << units << " units in the aligned window starting at " << start;
                return out.str();
            }
        }
        return {};
    }

  protected:
    bool admits(Micros now, std::int64_t cost) const override { return used(now) + cost <= n(); }
    std::int64_t remaining(Micros now) const override { return n() - used(now); }
    // Nothing counted leaves the window before it ends, and the next window starts empty.
    Micros admits_at(Micros now, std::int64_t) const override {
        return window_of(effective(now)) + p();
    }
    Micros full_at(Micros now) const override {
        return used(now) > 0 ? window_of(effective(now)) + p() : now;
    }
    void record(Micros now, std::int64_t cost) override {
        Micros t = effective(now);
        calls_.push_back({t, cost});
        latest_ = t;
    }
    void give_back(Micros now, std::int64_t cost) override {
        remove_newest(calls_, std::min(cost, used(now)));
        latest_ = effective(now);
    }

  private:
    Micros effective(Micros now) const { return std::max(now, latest_); }
    Micros window_of(Micros at) const { return at - at % p(); }
    std::int64_t used(Micros now) const {
        Micros window = window_of(effective(now));
        std::int64_t total = 0;
        for (const Call& call : calls_) {
            if (window_of(call.at) == window) {
                total += call.units;
            }
        }
        return total;
    }

    std::vector<Call> calls_;
    Micros latest_ = -1;
};

// rolling_window: a window opens at the first call after the previous one closed (or was
// emptied by refunds) and lasts P. The windows are found by replaying the history from the
// start on every question. The recorded instant is the opening of the current window.
class RollingWindowModel final : public Model {
  public:
    using Model::Model;

    Micros clock() const override { return replay().open; }

    std::string guarantee_violation() const override {
        // Every consume lies inside the window it was counted in, and no window ever holds
        // more than N; the ledger (refunds taken from the newest units) holds at most 2N in
        // any span of length P.
        Window window;
        std::vector<Call> ledger;
        for (const Event& event : events_) {
            if (event.refund) {
                remove_newest(ledger, event.units);
            } else {
                ledger.push_back({event.at, event.units});
            }
            apply(window, event);
            if (!event.refund && (event.at < window.open || event.at >= window.open + p())) {
                return "a call counted outside its window";
            }
            if (window.amount > n()) {
                std::ostringstream out;
                out << window.amount << " units in the window opened at " << window.open;
                return out.str();
            }
        }
        if (most_in_span(ledger, p(), false) > 2 * n()) {
            return "more than 2N units in a span of length P";
        }
        return {};
    }

  protected:
    bool admits(Micros now, std::int64_t cost) const override { return used(now) + cost <= n(); }
    std::int64_t remaining(Micros now) const override { return n() - used(now); }
    // Units leave only when the whole window closes.
    Micros admits_at(Micros, std::int64_t) const override { return replay().open + p(); }
    Micros full_at(Micros now) const override {
        Window window = replay();
        return active(window, effective(window, now)) ? window.open + p() : now;
    }
    void record(Micros now, std::int64_t cost) override {
        events_.push_back({false, effective(replay(), now), cost});
    }
    void give_back(Micros now, std::int64_t cost) override {
        Window window = replay();
        Micros t = effective(window, now);
        if (active(window, t)) {
            events_.push_back({true, t, cost});
        }
    }

  private:
    struct Event {
        bool refund;
        Micros at;
        std::int64_t units;
    };
    struct Window {
        Micros open = -1;
        std::int64_t amount = 0;
    };

    bool active(const Window& window, Micros t) const {
        return window.amount > 0 && t < window.open + p();
    }
    static Micros effective(const Window& window, Micros now) { return std::max(now, window.open); }
    void apply(Window& window, const Event& event) const {
        if (event.refund) {
            if (active(window, event.at)) {
                window.amount = std::max<std::int64_t>(0, window.amount - event.units);
            }
        } else if (active(window, event.at)) {
            window.amount += event.units;
        } else {
            window = Window{event.at, event.units};
        }
    }
    Window replay() const {
        Window window;
        for (const Event& event : events_) {
            apply(window, event);
        }
        return window;
    }
    std::int64_t used(Micros now) const {
        Window window = replay();
        return active(window, effective(window, now)) ? window.amount : 0;
    }

    std::vector<Event> events_;
};

// sliding_window: the units counted in (t - P, t]. The recorded instant is that of the latest
// write, which is the newest call's unless a refund came later; a refund that takes back every
// unit still leaves the clock where it was (otherwise a clock stepping back after it would count
// new calls before units it has already counted). The state forgets calls that had left the span
// whenever it is written.
class SlidingWindowModel final : public Model {
  public:
    using Model::Model;

    Micros clock() const override { return clock_; }

    std::string guarantee_violation() const override {
        std::int64_t most = most_in_span(ledger_, p(), false);
        if (most > n()) {
            std::ostringstream out;
            out << most << " units in a span [x, x + P)";
            return out.str();
        }
        return {};
    }

  protected:
    bool admits(Micros now, std::int64_t cost) const override {
        return used_at(effective(now)) + cost <= n();
    }
    std::int64_t remaining(Micros now) const override { return n() - used_at(effective(now)); }
    // The count only drops when a call leaves the span, at its instant + P: try those in order.
    Micros admits_at(Micros now, std::int64_t cost) const override {
        Micros t = effective(now);
        for (const Call& call : visible_) {
            Micros leaves = call.at + p();
            if (leaves > t && used_at(leaves) + cost <= n()) {
                return leaves;
            }
        }
        return t;  // not reached: cost <= N fits once every call has left
    }
    Micros full_at(Micros now) const override {
        Micros t = effective(now);
        Micros last = now;
        for (const Call& call : visible_) {
            if (call.at > t - p()) {
                last = std::max(last, call.at + p());
            }
        }
        return last;
    }
    void record(Micros now, std::int64_t cost) override {
        Micros t = effective(now);
        forget_before(t);
        visible_.push_back({t, cost});
        ledger_.push_back({t, cost});
        clock_ = t;
    }
    void give_back(Micros now, std::int64_t cost) override {
        Micros t = effective(now);
        std::int64_t take = std::min(cost, used_at(t));
        forget_before(t);
        remove_newest(visible_, take);
        remove_newest(ledger_, take);
        clock_ = t;
    }

  private:
    Micros effective(Micros now) const { return std::max(now, clock()); }
    std::int64_t used_at(Micros t) const {
        std::int64_t total = 0;
        for (const Call& call : visible_) {
            if (call.at > t - p() && call.at <= t) {
                total += call.units;
            }
        }
        return total;
    }
    void forget_before(Micros t) {
        visible_.erase(std::remove_if(visible_.begin(), visible_.end(),
                                      [&](const Call& call) { return call.at <= t - p(); }),
                       visible_.end());
    }

    std::vector<Call> visible_;  // what the state can still see, oldest first
    std::vector<Call> ledger_;   // every allowed unit not refunded, for the guarantee
    Micros clock_ = -1;
};

// sliding_window_counter: the previous aligned window's units weighted by the part of it still
// inside (t - P, t], plus the current window's, both counted from the history. The recorded
// instant is the start of the window of the latest write.
class SlidingWindowCounterModel final : public Model {
  public:
    using Model::Model;

    Micros clock() const override { return window_; }

    std::string guarantee_violation() const override {
        std::map<Micros, std::int64_t> per_window;
        for (const Call& call : calls_) {
            per_window[window_of(call.at)] += call.units;
        }
        for (const auto& [start, units] : per_window) {
            if (units > n()) {
                std::ostringstream out;
                out << units << " units in the aligned window starting at " << start;
                return out.str();
            }
        }
        if (most_in_span(calls_, p(), false) > 2 * n()) {
            return "more than 2N units in a span of length P";
        }
        return {};
    }

  protected:
    bool admits(Micros now, std::int64_t cost) const override {
        View v = view(now);
        return weight(v, v.t) + Wide(cost) * p() <= Wide(n()) * p();
    }
    // A clock behind the latest call reads the weight at the start of the state's window, which
    // can exceed N: nothing fits then, and remaining is 0, not negative.
    std::int64_t remaining(Micros now) const override {
        View v = view(now);
        Wide left = floor_div(Wide(n()) * p() - weight(v, v.t), p());
        return static_cast<std::int64_t>(std::max<Wide>(0, left));
    }
    // The weight never grows while nothing is counted: search the first instant it lets `cost`
    // in. Two windows later nothing is left.
    Micros admits_at(Micros now, std::int64_t cost) const override {
        View v = view(now);
        return first_instant(v, [&](Wide w) { return w + Wide(cost) * p() <= Wide(n()) * p(); });
    }
    Micros full_at(Micros now) const override {
        View v = view(now);
        if (weight(v, v.t) == 0) {
            return now;
        }
        return first_instant(v, [](Wide w) { return w == 0; });
    }
    void record(Micros now, std::int64_t cost) override {
        Micros t = effective(now);
        calls_.push_back({t, cost});
        window_ = window_of(t);
    }
    void give_back(Micros now, std::int64_t cost) override {
        View v = view(now);
        std::int64_t take = std::min<std::int64_t>(cost, static_cast<std::int64_t>(v.current));
        remove_newest(calls_, take);
        window_ = v.window;
    }

  private:
    struct View {
        Micros t;
        Micros window;  // start of the window holding t
        Wide previous;  // units counted in the window before
        Wide current;   // units counted in the window holding t
    };

    Micros effective(Micros now) const { return std::max(now, window_); }
    Micros window_of(Micros at) const { return at - at % p(); }
    View view(Micros now) const {
        View v{effective(now), 0, 0, 0};
        v.window = window_of(v.t);
        for (const Call& call : calls_) {
            Micros w = window_of(call.at);
            if (w == v.window) {
                v.current += call.units;
            } else if (w == v.window - p()) {
                v.previous += call.units;
            }
        }
        return v;
    }
    // The weighted count at x >= v.t, with nothing counted after v.t.
    Wide weight(const View& v, Micros x) const {
        if (x < v.window + p()) {
            return v.previous * (v.window + p() - x) + v.current * p();
        }
        if (x < v.window + 2 * p()) {
            return v.current * (v.window + 2 * p() - x);
        }
        return 0;
    }
    template <typename Fits>
    Micros first_instant(const View& v, Fits fits) const {
        Micros low = v.t;                  // does not fit
        Micros high = v.window + 2 * p();  // fits
        while (high - low > 1) {
            Micros middle = low + (high - low) / 2;
            if (fits(weight(v, middle))) {
                high = middle;
            } else {
                low = middle;
            }
        }
        return high;
    }

    std::vector<Call> calls_;  // allowed units not refunded, at the instants they were counted
    Micros window_ = -1;
};

// token_bucket (and gcra under a monotone clock): the level, in tokens scaled by P, is the
// least over every moment the bucket could last have been full of B*P plus the refill since,
// minus what was taken since. Those moments are: t itself, just before each call, and just
// after each refund (a refund tops the bucket up to at most full). The recorded instant is the
// latest write.
class TokenBucketModel final : public Model {
  public:
    using Model::Model;

    Micros clock() const override { return clock_; }

    // In any closed span [s, s + d]: taken - refunded <= B + floor(N*d/P).
    std::string guarantee_violation() const override {
        // Events are in time order (the model's clock never goes back); spans start at the
        // first event of an instant and end after the last event of one.
        for (std::size_t i = 0; i < events_.size(); ++i) {
            if (i > 0 && events_[i - 1].at == events_[i].at) {
                continue;
            }
            Wide net = 0;
            for (std::size_t j = i; j < events_.size(); ++j) {
                net += events_[j].refund ? -events_[j].units : events_[j].units;
                if (j + 1 < events_.size() && events_[j + 1].at == events_[j].at) {
                    continue;
                }
                Micros d = events_[j].at - events_[i].at;
                if (net > Wide(b()) + floor_div(Wide(n()) * d, p())) {
                    std::ostringstream out;
                    out << wide_string(net) << " units in [" << events_[i].at << ", "
                        << events_[j].at << "]";
                    return out.str();
                }
            }
        }
        return {};
    }

  protected:
    bool admits(Micros now, std::int64_t cost) const override {
        return level(effective(now)) >= Wide(cost) * p();
    }
    std::int64_t remaining(Micros now) const override {
        return static_cast<std::int64_t>(floor_div(level(effective(now)), p()));
    }
    // With nothing taken, the level rises by N per microsecond (scaled) until full.
    Micros admits_at(Micros now, std::int64_t cost) const override {
        Micros t = effective(now);
        return t + static_cast<Micros>(ceil_div(Wide(cost) * p() - level(t), n()));
    }
    Micros full_at(Micros now) const override {
        // A full bucket is full now, even when the clock is behind the state's.
        Micros t = effective(now);
        Wide missing = Wide(b()) * p() - level(t);
        return missing <= 0 ? now : t + static_cast<Micros>(ceil_div(missing, n()));
    }
    void record(Micros now, std::int64_t cost) override {
        Micros t = effective(now);
        events_.push_back({t, cost, false});
        clock_ = t;
    }
    void give_back(Micros now, std::int64_t cost) override {
        Micros t = effective(now);
        events_.push_back({t, cost, true});  // tops up to at most full
        clock_ = t;
    }

  private:
    struct Event {
        Micros at;
        std::int64_t units;
        bool refund;
    };

    Micros effective(Micros now) const { return std::max(now, clock_); }
    Wide level(Micros t) const {
        const Wide full = Wide(b()) * p();
        Wide best = full;  // full at t
        Wide taken = 0;    // taken minus refunded from the moment considered up to t
        for (std::size_t i = events_.size(); i-- > 0;) {
            const Event& event = events_[i];
            Wide since = full + Wide(n()) * (t - event.at);
            if (event.refund) {
                best = std::min(best, since - Wide(p()) * taken);  // full just after it
                taken -= event.units;
            } else {
                taken += event.units;
            }
            best = std::min(best, since - Wide(p()) * taken);  // full just before it
        }
        return best;
    }

    std::vector<Event> events_;
    Micros clock_ = -1;
};

// sliding_window with no bound on its log: every allowed unit at the instant it was counted,
// for the tests of the bounded log on long histories. Linear in the log per question (the
// Model above rescans it for every instant it tries). It counts what it is told was allowed
// (`record`), so that it follows the history the implementation made; `admits` says whether
// the exact log would have allowed a call.
class ExactSlidingLog {
  public:
    explicit ExactSlidingLog(const Limit& limit) : limit_(limit) {}

    Micros clock() const { return clock_; }
    Micros effective(Micros now) const { return std::max(now, clock_); }
    const std::vector<Call>& calls() const { return calls_; }
    const std::vector<Call>& ledger() const { return ledger_; }

    std::int64_t used(Micros now) const {
        const Micros t = effective(now);
        std::int64_t total = 0;
        for (const Call& call : calls_) {
            if (call.at > t - limit_.period) {
                total += call.units;
            }
        }
        return total;
    }
    bool admits(Micros now, std::int64_t cost) const {
        return cost == 0 || used(now) + cost <= limit_.limit;
    }
    // The first instant at which `cost` units fit: once enough of the oldest counted units
    // have left the span, each at its instant + P.
    Micros admits_at(Micros now, std::int64_t cost) const {
        const Micros t = effective(now);
        std::int64_t counted = used(now);
        if (counted + cost <= limit_.limit) {
            return t;
        }
        for (const Call& call : calls_) {
            if (call.at <= t - limit_.period) {
                continue;
            }
            counted -= call.units;
            if (counted + cost <= limit_.limit) {
                return call.at + limit_.period;
            }
        }
        return t;  // not reached: cost <= N
    }
    // The instant the key is full again.
    Micros full_at(Micros now) const {
        return used(now) > 0 ? calls_.back().at + limit_.period : now;
    }
    // The log as the unbounded algorithm stores it: one entry per distinct instant.
    std::vector<LogEntry> log() const {
        std::vector<LogEntry> entries;
        for (const Call& call : calls_) {
            if (!entries.empty() && entries.back().at == call.at) {
                entries.back().units += call.units;
            } else {
                entries.push_back(LogEntry{call.at, call.units});
            }
        }
        return entries;
    }

    void record(Micros now, std::int64_t cost) {
        const Micros t = effective(now);
        forget_before(t);
        calls_.push_back({t, cost});
        ledger_.push_back({t, cost});
        clock_ = t;
    }
    void give_back(Micros now, std::int64_t cost) {
        const Micros t = effective(now);
        forget_before(t);
        const std::int64_t take = std::min(cost, used(t));
        remove_newest(calls_, take);
        remove_newest(ledger_, take);
        clock_ = t;
    }

  private:
    void forget_before(Micros t) {
        calls_.erase(std::remove_if(calls_.begin(), calls_.end(),
                                    [&](const Call& call) { return call.at <= t - limit_.period; }),
                     calls_.end());
    }

    Limit limit_;
    std::vector<Call> calls_;   // counted units still in the span at the last write, oldest first
    std::vector<Call> ledger_;  // every allowed unit not refunded, for the guarantee
    Micros clock_ = -1;
};

inline std::unique_ptr<Model> make_model(const Limit& limit) {
    switch (limit.algorithm) {
        case Algorithm::kFixedWindow:
            return std::make_unique<FixedWindowModel>(limit);
        case Algorithm::kRollingWindow:
            return std::make_unique<RollingWindowModel>(limit);
        case Algorithm::kSlidingWindow:
            return std::make_unique<SlidingWindowModel>(limit);
        case Algorithm::kSlidingWindowCounter:
            return std::make_unique<SlidingWindowCounterModel>(limit);
        case Algorithm::kTokenBucket:
        case Algorithm::kGcra:
            return std::make_unique<TokenBucketModel>(limit);
        case Algorithm::kNone:
            break;
    }
    return nullptr;
}

}  // namespace models
}  // namespace ratelimit
