#include "ratelimit/algorithms.hpp"

#include <algorithm>
#include <cstddef>
#include <tuple>
#include <utility>

#include "ratelimit/error.hpp"

namespace ratelimit {
namespace {

using Wide = __int128;

// Floor division for a non-negative divisor (C++ division truncates toward zero).
Micros floor_div(Micros value, Micros divisor) noexcept {
    Micros quotient = value / divisor;
    if (value % divisor != 0 && value < 0)
        --quotient;
    return quotient;
}

Wide ceil_div(Wide value, Wide divisor) noexcept {
    Wide quotient = value / divisor;
    if (value % divisor != 0 && value > 0)
        ++quotient;
    return quotient;
}

Micros window_start(Micros t, Micros period) noexcept {
    return floor_div(t, period) * period;
}

// What one algorithm decided, before the block and the real clock are applied: instants are
// absolute, in the algorithm's own (possibly clamped) time.
struct Outcome {
    bool allowed = false;
    std::int64_t remaining = 0;
    Micros retry_at = 0;  // meaningful only when denied
    Micros reset_at = 0;
    bool cut = false;  // a charge went past most_owed, and its excess was forgotten
};

bool is_bucket(Algorithm algorithm) noexcept {
    return algorithm == Algorithm::kTokenBucket || algorithm == Algorithm::kGcra;
}

// ---- charges past the limit (Action::kCharge) -----------------------------------------------

// The most units a charge leaves a key owing beyond a full allowance: what the key works off in
// kMaxWindow (and at most 2^40, so that sums stay far from 64 bits), so that every instant a
// state implies stays within about a year of its last write, whatever is charged.
std::int64_t most_owed(const Limit& l) noexcept {
    const Wide owed = Wide(l.limit) * kMaxWindow / l.period;
    return static_cast<std::int64_t>(std::min<Wide>(owed, Wide(1) << 40));
}

// A charged window's `used` units carried into the windows that follow it, N a window: the
// number of windows (1: the next one) until the window that leaves room for `fits` more units.
// Used within N (all a consume ever leaves), it is always the next window.
std::int64_t windows_until(std::int64_t used, std::int64_t fits, std::int64_t limit) noexcept {
    const std::int64_t over = used - fits;
    return over <= limit ? 1 : (over + limit - 1) / limit;
}

// What a fixed or rolling window `windows` windows after a state's window counts from it:
// nothing unless a charge left that window past N, which the state marks with carry = 1 (a
// consume never does; a state written under a higher limit may hold more than N unmarked, and
// carries nothing).
std::int64_t carried_units(const Limit& l, const KeyState& s, std::int64_t windows) noexcept {
    const std::int64_t amount = s.amount;
    if (s.carry == 0 || amount <= l.limit || windows < 1)
        return 0;
    const Wide left = Wide(amount) - Wide(windows) * l.limit;
    return left > 0 ? static_cast<std::int64_t>(left) : 0;
}

// Whether a fixed or rolling window's `used` units are a charge's, carried into the windows
// that follow (and marks the state when this call wrote it): used past N after a charge, or
// carried from one. Only a charge sets the mark; any write of N or less clears it. (A consume or
// refund of a window written under a higher limit may leave it past N unmarked: it carries
// nothing, as before charges existed.)
bool owes_windows(const Limit& l, KeyState& s, Action action, bool allowed, std::int64_t cost,
                  std::int64_t used) noexcept {
    const bool charge = action == Action::kCharge && cost > 0;
    const bool wrote =
        (action == Action::kConsume && allowed && cost > 0) || action == Action::kRefund || charge;
    if (wrote && (charge || s.carry != 0))
        s.carry = used > l.limit ? 1 : 0;
    return s.carry != 0 && used > l.limit;
}

// used + cost for a charge, bounded by most_owed.
std::int64_t charged(const Limit& l, std::int64_t used, std::int64_t cost) noexcept {
    return static_cast<std::int64_t>(
        std::min<Wide>(Wide(used) + cost, Wide(l.limit) + most_owed(l)));
}

// A charged window's units as this limit reads them: a state charged under another limit or
// period may owe more windows of this one than most_owed allows, and is read as owing the most,
// so that the instants its waits imply stay within about a year.
std::int64_t owed_within_bound(const Limit& l, const KeyState& s, std::int64_t used) noexcept {
    if (s.carry == 0)
        return used;
    return static_cast<std::int64_t>(std::min<Wide>(used, Wide(l.limit) + most_owed(l)));
}

// ---- fixed_window ---------------------------------------------------------------------------

// The calendar window holding t, for a state whose window starts at `state_start`. The caller
// gave the window holding now; t lies beyond it only when the clock stepped back behind a
// later state or at the end of a block, and then the next window is taken to start at the
// state's window (or this one's end) and to last as long as this one.
std::pair<Micros, Micros> calendar_window(const Limit& l, Micros t, Micros state_start) noexcept {
    if (t < l.window_end)
        return {l.window_start, l.window_end};
    const Micros start = std::max(state_start, l.window_end);
    return {start, start + (l.window_end - l.window_start)};
}

Outcome fixed_window(const Limit& l, KeyState& s, Micros now, std::int64_t cost, Action action) {
    const Micros t = std::max(now, s.instant);
    Micros w = 0;
    Micros end = 0;
    if (l.window_end != 0) {
        std::tie(w, end) = calendar_window(l, t, s.instant);
    } else {
        w = window_start(t, l.period);
        end = w + l.period;
    }
    std::int64_t used = s.instant == w ? s.amount : 0;
    const Micros length = end - w;
    if (s.instant < w && s.carry != 0) {
        // The windows since the charged one, rounded to the nearest: exact for windows aligned
        // to the epoch, and right for calendar windows, whose lengths differ by far less.
        used = carried_units(l, s, (w - s.instant + length / 2) / length);
    }
    used = owed_within_bound(l, s, used);
    Outcome out;
    out.allowed = used + cost <= l.limit;
    if (action == Action::kConsume && out.allowed && cost > 0) {
        used += cost;
        s.instant = w;
        s.amount = used;
    } else if (action == Action::kRefund) {
        used = std::max<std::int64_t>(0, used - cost);
        s.instant = w;
        s.amount = used;
    } else if (action == Action::kCharge && cost > 0) {
        used = charged(l, used, cost);
        s.instant = w;
        s.amount = used;
    }
    const bool owing = owes_windows(l, s, action, out.allowed, cost, used);
    out.remaining = std::max<std::int64_t>(0, l.limit - used);
    out.retry_at = end + (owing ? windows_until(used, l.limit - cost, l.limit) - 1 : 0) * length;
    out.reset_at =
        used > 0 ? end + (owing ? windows_until(used, 0, l.limit) - 1 : 0) * length : now;
    return out;
}

// ---- rolling_window -------------------------------------------------------------------------

Outcome rolling_window(const Limit& l, KeyState& s, Micros now, std::int64_t cost, Action action) {
    const Micros t = std::max(now, s.instant);
    Micros start = s.instant;
    std::int64_t amount = s.amount;
    if (s.carry != 0 && amount > l.limit && t >= start + l.period) {
        // A window a charge left past N: its excess opens the windows that follow it, back to
        // back, N a window.
        const std::int64_t windows = (t - start) / l.period;
        amount = carried_units(l, s, windows);
        start += windows * l.period;
    }
    bool active = amount > 0 && t < start + l.period;
    std::int64_t used = active ? owed_within_bound(l, s, amount) : 0;
    Outcome out;
    out.allowed = used + cost <= l.limit;
    if (action == Action::kConsume && out.allowed && cost > 0) {
        if (!active) {
            start = t;
            active = true;
        }
        used += cost;
        s.instant = start;
        s.amount = used;
    } else if (action == Action::kRefund && active) {
        used = std::max<std::int64_t>(0, used - cost);
        s.instant = start;
        s.amount = used;
        active = used > 0;
    } else if (action == Action::kCharge && cost > 0) {
        if (!active) {
            start = t;
            active = true;
        }
        used = charged(l, used, cost);
        s.instant = start;
        s.amount = used;
    }
    const bool owing = owes_windows(l, s, action, out.allowed, cost, used);
    out.remaining = std::max<std::int64_t>(0, l.limit - used);
    out.retry_at = start + (owing ? windows_until(used, l.limit - cost, l.limit) : 1) * l.period;
    out.reset_at = active ? start + (owing ? windows_until(used, 0, l.limit) : 1) * l.period : now;
    return out;
}

// ---- sliding_window (log, bounded) ----------------------------------------------------------

// Brings a log whose entries all lie in (t - P, t] down to kMaxSlidingLog entries by moving
// units later within their grid cell (algorithms.hpp). One write adds at most one entry, so
// usually one merge is enough: of the same-cell pairs, the one that moves the fewest
// unit-microseconds (gap times the older entry's units; the oldest on a tie), so that a large
// entry is not dragged along a steady stream of calls. A longer log (stored before the bound) has
// every cell collapsed into its latest entry in one pass instead, so that its first write stays
// linear.
void compact_log(std::vector<LogEntry>& log, Micros period) {
    const std::size_t most = kMaxSlidingLog;
    if (log.size() <= most)
        return;
    const Micros cell = sliding_log_cell(period);
    auto cell_of = [cell](Micros at) { return floor_div(at, cell); };
    if (log.size() > 2 * most) {
        std::size_t kept = 0;
        for (std::size_t i = 0; i < log.size(); ++i) {
            if (kept > 0 && cell_of(log[kept - 1].at) == cell_of(log[i].at)) {
                log[kept - 1] = LogEntry{log[i].at, log[kept - 1].units + log[i].units};
            } else {
                log[kept++] = log[i];
            }
        }
        log.resize(kept);
    }
    // The unit-microseconds a merge of entry i into entry i + 1 moves.
    auto moved = [&log](std::size_t i) { return Wide(log[i + 1].at - log[i].at) * log[i].units; };
    while (log.size() > most) {
        std::size_t best = log.size();
        for (std::size_t i = 0; i + 1 < log.size(); ++i) {
            if (cell_of(log[i].at) != cell_of(log[i + 1].at))
                continue;
            if (best == log.size() || moved(i) < moved(best))
                best = i;
        }
        // Not reached while every entry lies within one period (at most kMaxSlidingLog cells);
        // merging the oldest pair keeps the bound and the guarantee if it ever were.
        if (best == log.size())
            best = 0;
        log[best + 1].units += log[best].units;
        log.erase(log.begin() + static_cast<std::ptrdiff_t>(best));
    }
}

Outcome sliding_window(const Limit& l, KeyState& s, Micros now, std::int64_t cost, Action action) {
    // The newest entry, or the last write when a refund emptied the log, is the latest instant
    // this state has seen.
    Micros t = std::max(now, s.instant);
    if (!s.log.empty())
        t = std::max(t, s.log.back().at);
    // Entries at or before t - P no longer count.
    const Micros cutoff = t - l.period;
    auto first_counted = std::find_if(s.log.begin(), s.log.end(),
                                      [cutoff](const LogEntry& e) { return e.at > cutoff; });
    std::int64_t used = 0;
    for (auto it = first_counted; it != s.log.end(); ++it)
        used += it->units;

    Outcome out;
    out.allowed = used + cost <= l.limit;
    bool write = false;
    if (action == Action::kConsume && out.allowed && cost > 0) {
        write = true;
        used += cost;
    } else if (action == Action::kRefund || (action == Action::kCharge && cost > 0)) {
        write = true;
    }
    if (write) {
        s.instant = t;
        s.log.erase(s.log.begin(), first_counted);
        if (action == Action::kConsume) {
            if (!s.log.empty() && s.log.back().at == t)
                s.log.back().units += cost;
            else
                s.log.push_back(LogEntry{t, cost});
        } else if (action == Action::kCharge) {
            // Units of one entry beyond N change no decision (while it counts, the key is
            // full), so an entry keeps at most N and the log's sums stay small.
            if (s.log.empty() || s.log.back().at != t)
                s.log.push_back(LogEntry{t, 0});
            const std::int64_t added =
                std::min(cost, std::max<std::int64_t>(0, l.limit - s.log.back().units));
            s.log.back().units += added;
            used += added;
        } else {
            std::int64_t to_return = cost;
            while (to_return > 0 && !s.log.empty()) {
                const std::int64_t taken = std::min(to_return, s.log.back().units);
                s.log.back().units -= taken;
                to_return -= taken;
                used -= taken;
                if (s.log.back().units == 0)
                    s.log.pop_back();
            }
        }
        compact_log(s.log, l.period);
        first_counted = s.log.begin();
    }
    out.remaining = std::max<std::int64_t>(0, l.limit - used);
    if (!out.allowed) {
        // The call fits once enough of the oldest entries have left the window.
        std::int64_t still_counted = used;
        for (auto it = first_counted; it != s.log.end(); ++it) {
            still_counted -= it->units;
            if (still_counted + cost <= l.limit) {
                out.retry_at = it->at + l.period;
                break;
            }
        }
    }
    out.reset_at = used > 0 ? s.log.back().at + l.period : now;
    return out;
}

// ---- sliding_window_counter -----------------------------------------------------------------

Outcome sliding_window_counter(const Limit& l, KeyState& s, Micros now, std::int64_t cost,
                               Action action) {
    const Micros p = l.period;
    const Micros t = std::max(now, s.instant);
    const Micros w = window_start(t, p);
    std::int64_t current = 0;
    std::int64_t previous = 0;
    if (s.instant == w) {
        current = s.amount;
        previous = s.carry;
    } else if (s.instant == w - p) {
        previous = s.amount;
    }
    const Micros elapsed = t - w;
    // The previous window's units, weighted by the part of it still inside the sliding span,
    // plus the current window's; everything scaled by P to stay in integers.
    auto weighted = [&](std::int64_t cur) {
        return Wide(previous) * (p - elapsed) + Wide(cur) * p;
    };
    const Wide capacity = Wide(l.limit) * p;
    Outcome out;
    out.allowed = weighted(current) + Wide(cost) * p <= capacity;
    if ((action == Action::kConsume && out.allowed && cost > 0) || action == Action::kRefund ||
        (action == Action::kCharge && cost > 0)) {
        // A charge may leave the window past N: next window, its units weigh as the previous.
        current = action == Action::kConsume  ? current + cost
                  : action == Action::kCharge ? charged(l, current, cost)
                                              : std::max<std::int64_t>(0, current - cost);
        s.instant = w;
        s.amount = current;
        s.carry = previous;
    }
    const Wide left = capacity - weighted(current);
    out.remaining = left <= 0 ? 0 : static_cast<std::int64_t>(left / p);
    // A refund's or charge's outcome is replaced by a peek (decide()), so it needs no retry
    // instant; and its cost, compared before the write, must not reach the divisions below.
    if (!out.allowed && action != Action::kRefund && action != Action::kCharge) {
        if (current + cost <= l.limit) {
            // Fits in this window once enough of the previous one has slid out.
            const Wide room = Wide(l.limit - current - cost) * p;
            out.retry_at = w + p - static_cast<Micros>(room / previous);
        } else {
            // Fits in the next window, where this window's units become the weighted ones.
            const Wide room = Wide(l.limit - cost) * p;
            out.retry_at = w + p + p - static_cast<Micros>(room / current);
        }
    }
    out.reset_at = current > 0 ? w + 2 * p : previous > 0 ? w + p : now;
    return out;
}

// ---- token_bucket ---------------------------------------------------------------------------

// The limit and period a bucket state was measured in (a state written before they were kept
// reads as measured in the limit asked for).
std::int64_t measured_limit(const Limit& l, const KeyState& s) noexcept {
    return s.measured_limit > 0 ? s.measured_limit : l.limit;
}
Micros measured_period(const Limit& l, const KeyState& s) noexcept {
    return s.measured_period > 0 ? s.measured_period : l.period;
}
bool measured_otherwise(const Limit& l, const KeyState& s) noexcept {
    return measured_limit(l, s) != l.limit || measured_period(l, s) != l.period;
}

// A token bucket's tokens and fraction (in 1/P) at its last refill, in the units of `l`: the
// whole tokens are kept up to the new burst, the fraction is rescaled rounding down, so a
// changed limit never grants a token the old one had not refilled. The refill since then runs
// at the new rate.
void bucket_level(const Limit& l, const KeyState& s, std::int64_t* tokens,
                  std::int64_t* fraction) noexcept {
    *tokens = s.amount;
    *fraction = s.carry;
    if (!measured_otherwise(l, s))
        return;
    if (*tokens >= l.burst) {
        *tokens = l.burst;
        *fraction = 0;
    } else if (*tokens < -most_owed(l)) {
        // A debt charged under a faster limit is kept only up to what this one works off in
        // kMaxWindow, as a charge under it would have been cut: its waits stay within about a
        // year, and their instants within 64 bits.
        *tokens = -most_owed(l);
        *fraction = 0;
    } else {
        *fraction = static_cast<std::int64_t>(Wide(s.carry) * l.period / measured_period(l, s));
    }
}

// `go`, for a charge: the instant the charged call goes, when it is later than now (a delay,
// Limit::max_delay); 0 otherwise.
Outcome token_bucket(const Limit& l, KeyState& s, Micros now, std::int64_t cost, Action action,
                     bool fresh, Micros go) {
    const Micros p = l.period;
    Micros t = now;
    std::int64_t tokens = l.burst;
    std::int64_t fraction = 0;  // of a token, in 1/P
    if (!fresh) {
        std::int64_t stored = 0;
        std::int64_t carry = 0;
        bucket_level(l, s, &stored, &carry);
        t = std::max(now, s.instant);
        const Wide total = Wide(carry) + Wide(t - s.instant) * l.limit;
        const Wide refilled = Wide(stored) + total / p;
        if (refilled >= l.burst) {
            tokens = l.burst;
        } else {
            tokens = static_cast<std::int64_t>(refilled);
            fraction = static_cast<std::int64_t>(total % p);
        }
    }
    Outcome out;
    out.allowed = tokens >= cost;
    bool write = false;
    if (action == Action::kConsume && out.allowed && cost > 0) {
        tokens -= cost;
        write = true;
    } else if (action == Action::kRefund) {
        if (Wide(tokens) + cost >= l.burst) {
            tokens = l.burst;
            fraction = 0;
        } else {
            tokens += cost;
        }
        write = true;
    } else if (action == Action::kCharge && cost > 0) {
        // Charged whatever is left: the bucket goes into debt, repaid by the refill.
        Wide level = Wide(tokens) * p + fraction - Wide(cost) * p;  // in 1/P tokens
        if (go > t) {
            // A call that goes later also gives up what the bucket would have refilled past
            // full by then (at most a microsecond's refill, the wait being rounded up to whole
            // microseconds): a consume at that instant would find the bucket capped at B.
            const Wide past_full =
                Wide(tokens) * p + fraction + Wide(go - t) * l.limit - Wide(l.burst) * p;
            if (past_full > 0)
                level -= past_full;
        }
        Wide whole = level / p;  // floor: the fraction stays in [0, P)
        if (level % p != 0 && level < 0)
            --whole;
        out.cut = whole < -most_owed(l);
        if (out.cut) {
            tokens = -most_owed(l);
        } else {
            tokens = static_cast<std::int64_t>(whole);
            fraction = static_cast<std::int64_t>(level - whole * p);
        }
        write = true;
    }
    if (write) {
        s.instant = t;
        s.amount = tokens;
        s.carry = fraction;
        s.measured_limit = l.limit;
        s.measured_period = p;
    }
    out.remaining = std::max<std::int64_t>(0, tokens);
    // Time for the missing tokens to drip in at N per P.
    auto wait_for = [&](std::int64_t wanted) -> Micros {
        const Wide missing = Wide(wanted - tokens) * p - fraction;
        return missing <= 0 ? 0 : static_cast<Micros>(ceil_div(missing, l.limit));
    };
    out.retry_at = t + wait_for(cost);
    out.reset_at = tokens >= l.burst ? now : t + wait_for(l.burst);
    return out;
}

// ---- gcra -----------------------------------------------------------------------------------

// GCRA is the token bucket kept as a theoretical arrival time: for the same N, P and B the two
// allow exactly the same calls. Since 0.6.0 a gcra key keeps the bucket's own state (the level
// at its last write), so that one rule, the bucket's, converts a key whose limit changed: the
// units still available are kept (bucket_level). A 0.5.0 state (measured_limit 0) holds the
// arrival time itself, in instant and carry (1/N µs); it is read in the limit asked for.

// Whether `s` is a gcra state as 0.5.0 wrote it.
bool arrival_time_state(const KeyState& s) noexcept {
    return s.algorithm == Algorithm::kGcra && s.measured_limit == 0;
}

// A 0.5.0 gcra state as the bucket state it stands for at `now`: what the arrival time leaves
// available then, at most B, written at `now` in the units of `l`.
KeyState bucket_state_of_arrival(const Limit& l, const KeyState& s, Micros now) noexcept {
    const Wide tat = Wide(s.instant) * l.limit + s.carry;
    const Wide debt = std::max<Wide>(0, tat - Wide(now) * l.limit);
    const Wide level =
        std::max<Wide>(Wide(-most_owed(l)) * l.period, Wide(l.burst) * l.period - debt);
    Wide whole = level / l.period;  // floor: the fraction stays in [0, P)
    if (level % l.period != 0 && level < 0)
        --whole;
    KeyState bucket = s;
    bucket.instant = now;
    bucket.amount = static_cast<std::int64_t>(whole);
    bucket.carry = static_cast<std::int64_t>(level - whole * l.period);
    bucket.measured_limit = l.limit;
    bucket.measured_period = l.period;
    return bucket;
}

// One algorithm's decision on `working` (the state, or a fresh one standing for it); `go` as
// token_bucket() says.
Outcome decide_algorithm(const Limit& limit, KeyState& working, Micros now, std::int64_t cost,
                         Action action, bool fresh, Micros go = 0) {
    switch (limit.algorithm) {
        case Algorithm::kFixedWindow:
            return fixed_window(limit, working, now, cost, action);
        case Algorithm::kRollingWindow:
            return rolling_window(limit, working, now, cost, action);
        case Algorithm::kSlidingWindow:
            return sliding_window(limit, working, now, cost, action);
        case Algorithm::kSlidingWindowCounter:
            return sliding_window_counter(limit, working, now, cost, action);
        case Algorithm::kTokenBucket:
        case Algorithm::kGcra:
            return token_bucket(limit, working, now, cost, action, fresh, go);
        case Algorithm::kNone:
            break;
    }
    throw ArgumentError::invalid("p_algorithm", "must name an algorithm");
}

// The same limit, never delaying: for the peeks that say how a key stands (after a refund, a
// charge or a delay, at the end of a block), which must not be delays themselves.
Limit without_delay(const Limit& limit) noexcept {
    Limit plain = limit;
    plain.max_delay = 0;
    return plain;
}

// A bucket's consume or peek that would be denied, admitted `wait` from now instead
// (Limit::max_delay): its cost is charged at once, as Action::kCharge charges it (with what the
// bucket would refill past full before the go instant, see token_bucket()), so that the bucket
// from the go instant on is the one a consume at that instant would leave, and the calls after
// it wait behind it. The charge is made on a copy; a consume keeps it, a peek
// only reports it. False, and nothing changed, when the charge would be cut by most_owed: part
// of the slot would be forgotten, so the call is denied instead.
bool delay(const Limit& limit, KeyState& state, const KeyState& working, bool fresh, Micros now,
           std::int64_t cost, Action action, Micros wait, Decision* decision) {
    KeyState charged = working;
    if (decide_algorithm(limit, charged, now, cost, Action::kCharge, fresh, now + wait).cut)
        return false;
    // The waits after the charge: reset_after is what a one-unit peek would say.
    *decision = decide(without_delay(limit), charged, now, 1, Action::kPeek);
    decision->allowed = true;
    decision->remaining = 0;
    decision->retry_after = wait;
    decision->blocked = false;
    decision->state_changed = action == Action::kConsume;
    if (action == Action::kConsume)
        state = std::move(charged);
    return true;
}

}  // namespace

Decision decide(const Limit& limit, KeyState& state, Micros now, std::int64_t cost, Action action) {
    if ((action == Action::kConsume || action == Action::kPeek) &&
        !cost_could_be_allowed(limit, cost)) {
        // Denied for good, nothing charged or delayed: what a key stands at, and no wait.
        KeyState unchanged = state;
        Decision denied = decide(without_delay(limit), unchanged, now, 0, Action::kPeek);
        denied.allowed = false;
        denied.retry_after = 0;
        denied.never = true;
        denied.state_changed = false;
        return denied;
    }
    const bool fresh = state.algorithm != limit.algorithm;
    const bool arrival = !fresh && arrival_time_state(state);
    // The algorithms edit the state only when they write, so they work on the caller's state
    // directly (no copy on every decision); a state read as fresh, or a 0.5.0 gcra state read
    // as the bucket's, is replaced instead, and only once something is written, so a peek or a
    // denied call leaves it as it was.
    KeyState replacement;
    if (arrival)
        replacement = bucket_state_of_arrival(limit, state, now);
    else
        replacement.blocked_until = state.blocked_until;
    KeyState& working = fresh || arrival ? replacement : state;
    working.algorithm = limit.algorithm;

    const bool blocked = now < working.blocked_until;
    // A blocked key is only looked at: the decision is a peek, then overridden below.
    const Action effective = blocked && action == Action::kConsume ? Action::kPeek : action;

    Outcome out = decide_algorithm(limit, working, now, cost, effective, fresh);
    if (!blocked && !out.allowed && cost > 0 && limit.max_delay > 0 && is_bucket(limit.algorithm) &&
        (action == Action::kConsume || action == Action::kPeek) &&
        out.retry_at - now <= limit.max_delay) {
        // Admitted for later instead of denied, unless the charge would be cut (then the slot
        // could not be kept, and the call is denied as before).
        Decision decision;
        if (delay(limit, state, working, fresh, now, cost, action, out.retry_at - now, &decision))
            return decision;
    }

    const bool written = action == Action::kRefund || (action == Action::kCharge && cost > 0) ||
                         (effective == Action::kConsume && out.allowed && cost > 0);
    if (written && (fresh || arrival))
        state = std::move(replacement);
    if (action == Action::kRefund || action == Action::kCharge) {
        // Report what a one-unit peek would say after the refund or charge.
        Decision after = decide(without_delay(limit), state, now, 1, Action::kPeek);
        after.state_changed = written;
        return after;
    }

    // A call of no units takes nothing, so it fits whenever the key is not blocked (the
    // algorithms may judge a clamped past instant as over the limit).
    if (cost == 0)
        out.allowed = true;

    Decision decision;
    decision.limit = is_bucket(limit.algorithm) ? limit.burst : limit.limit;
    if (blocked) {
        // Nothing changes while blocked, so the waits are the block's rest plus what the key
        // will say when the block ends.
        KeyState at_end = fresh ? KeyState{} : working;
        at_end.blocked_until = 0;
        const Decision later =
            decide(without_delay(limit), at_end, working.blocked_until, cost, Action::kPeek);
        decision.allowed = false;
        decision.blocked = true;
        decision.remaining = 0;
        decision.retry_after = working.blocked_until - now + later.retry_after;
        decision.reset_after = working.blocked_until - now + later.reset_after;
        return decision;
    }
    decision.allowed = out.allowed;
    decision.remaining = out.remaining;
    decision.retry_after = out.allowed ? 0 : std::max<Micros>(0, out.retry_at - now);
    decision.reset_after = std::max<Micros>(0, out.reset_at - now);
    decision.state_changed = written;
    return decision;
}

void block_until(KeyState& state, Micros until) noexcept {
    state.blocked_until = std::max(state.blocked_until, until);
}

Micros idle_from(const Limit& limit, const KeyState& state) {
    Micros idle = 0;
    const Micros p = limit.period;
    switch (state.algorithm) {
        case Algorithm::kNone:
            break;
        case Algorithm::kFixedWindow:
            if (state.carry != 0 && state.amount > limit.limit) {
                // A charge's excess counts in the windows that follow; calendar windows are
                // counted twice as long as the current one, longer than any that follows.
                idle = state.instant + (limit.window_end != 0 ? 2 : 1) *
                                           windows_until(state.amount, 0, limit.limit) * p;
                break;
            }
            if (limit.window_end != 0 && state.amount > 0) {
                // A state of another window than the one holding now counts nothing now; one
                // of a later window (a clock stepped back) is kept two windows long, longer
                // than any calendar window that follows it.
                idle = state.instant == limit.window_start ? limit.window_end
                       : state.instant < limit.window_start
                           ? state.instant
                           : state.instant + 2 * (limit.window_end - limit.window_start);
                break;
            }
            idle = state.amount > 0 ? state.instant + p : 0;
            break;
        case Algorithm::kRollingWindow:
            if (state.carry != 0 && state.amount > limit.limit) {
                idle = state.instant + windows_until(state.amount, 0, limit.limit) * p;
                break;
            }
            idle = state.amount > 0 ? state.instant + p : 0;
            break;
        case Algorithm::kSlidingWindow:
            idle = state.log.empty() ? 0 : state.log.back().at + p;
            break;
        case Algorithm::kSlidingWindowCounter:
            idle = state.amount > 0  ? state.instant + 2 * p
                   : state.carry > 0 ? state.instant + p
                                     : 0;
            break;
        case Algorithm::kGcra:
            if (arrival_time_state(state)) {
                idle = static_cast<Micros>(
                    ceil_div(Wide(state.instant) * limit.limit + state.carry, limit.limit));
                break;
            }
            [[fallthrough]];
        case Algorithm::kTokenBucket: {
            std::int64_t tokens = 0;
            std::int64_t fraction = 0;
            bucket_level(limit, state, &tokens, &fraction);
            const Wide missing = (Wide(limit.burst) - tokens) * p - fraction;
            idle = missing <= 0
                       ? 0
                       : state.instant + static_cast<Micros>(ceil_div(missing, limit.limit));
            break;
        }
    }
    // Calls behind the clock are decided at the state's latest instant, so it is not fresh
    // before then (a 0.5.0 arrival time already bounds itself).
    if (state.algorithm != Algorithm::kNone && !arrival_time_state(state))
        idle = std::max(idle, state.instant);
    return std::max(idle, state.blocked_until);
}

}  // namespace ratelimit
