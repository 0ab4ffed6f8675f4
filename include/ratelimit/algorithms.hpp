// The six algorithms of the native API. Each has one small state and one decision function,
// in exact integer arithmetic on microseconds; products that could exceed 64 bits are done in
// 128 bits. N is the limit, P the period, B the burst (token bucket and GCRA; B = N unless
// given), c the cost of a call.
//
// Time that goes backwards is treated as time standing still: every algorithm decides at
// max(now, the latest instant its state has seen), so a clock stepping back never grants more
// than a clock that stopped. Retry-after and reset-after are measured from the real `now`, so
// they stay true when the clock steps back.
//
// Guarantees (checked against brute-force models in test/unit/algorithms_test.cpp):
//  fixed_window            at most N units in each epoch-aligned window [kP, (k+1)P), or in
//                          each calendar window (Limit::window_start, window_end).
//  rolling_window          at most N units in each window, which opens at the first call after
//                          the previous one closed and lasts P (so at most 2N in any span P).
//  sliding_window          at most N units in any span of length P. The log holds one entry per
//                          distinct instant with allowed units, exact while that is at most
//                          kMaxSlidingLog entries; beyond, entries are merged (see below), which
//                          only ever counts units for longer, so it never allows more.
//  sliding_window_counter  at most N units in each aligned window, and the previous window's
//                          units weighted by the part of it still inside the sliding span, plus
//                          the current window's, never exceed N (at most 2N in any span P).
//  token_bucket            at most B + floor(N·d/P) units in any span of length d: a bucket of B
//                          tokens refilled continuously at N per P.
//  gcra                    the token bucket's decisions with the same N, P and B, its state
//                          and its rule for a changed limit: GCRA's theoretical arrival time is
//                          the bucket seen from the other side, and a key keeps one of them.
//
// A charge (Action::kCharge) counts units whatever remains, for work already done (tokens an
// answer used, bytes sent); what goes past the limit is carried forward, so that the calls that
// follow are denied until it is worked off:
//  fixed_window            the window may hold more than N; each following window starts with
//                          what is left of it after N a window (max(0, units - k·N) in the k-th
//                          window after). Consumes never leave more than N, so nothing they
//                          decide changes.
//  rolling_window          the same, the following windows opening back to back from the
//                          charged window's end.
//  sliding_window          a log entry at now, counted for P; the units of one entry beyond N
//                          are dropped (while the entry counts, the key is full anyway).
//  sliding_window_counter  the current window's units, which then weigh in the next window as
//                          the previous window's.
//  token_bucket            the tokens go below zero (a debt the refill repays first).
//  gcra                    the same (its arrival time moves ahead past the tolerance).
// What a key may owe beyond a full allowance is bounded by what it works off in kMaxWindow; a
// charge beyond is forgotten. `remaining` is never reported below 0.
//
// Delay instead of deny (Limit::max_delay, token_bucket and gcra only): a consume that would be
// denied is admitted for a later instant, now + its wait, when that wait is at most max_delay.
// It is charged at once (the charge above), together with what the bucket would refill past
// full before its go instant (less than a microsecond's refill: the wait is rounded up), so that
// from the go instant on the key is exactly what a consume arriving then would leave; the calls
// after it wait behind it, and the instants at which admitted calls may go hold the token
// bucket's guarantee, as if each call had arrived at its go instant. A peek reports the same and
// writes nothing. Only the bucket algorithms delay: their state is a schedule, so a charge now
// takes exactly the slot at the later instant, whereas a window algorithm would count the
// delayed call in the window it was asked in, not the one it goes in, and admit too much. A
// delay whose charge the bound above would cut is not given: the call is denied.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

#include "ratelimit/time.hpp"

namespace ratelimit {

// Stored as a smallint: the numbers are part of the on-disk format and never change.
enum class Algorithm : std::int16_t {
    kNone = 0,  // a key with no algorithm state (fresh, or only blocked)
    kFixedWindow = 1,
    kRollingWindow = 2,
    kSlidingWindow = 3,
    kSlidingWindowCounter = 4,
    kTokenBucket = 5,
    kGcra = 6,
};

// The SQL spelling: fixed_window, rolling_window, sliding_window, sliding_window_counter,
// token_bucket, gcra.
const char* algorithm_name(Algorithm algorithm) noexcept;

// Throws ArgumentError (22023, naming `argument`) for an unknown name.
Algorithm parse_algorithm(const char* argument, std::string_view name);

// The instants the clock may read: from the Unix epoch to the year 10000. Bounding now keeps
// every instant the algorithms compute (now + a few periods) far from overflow.
constexpr Micros kMaxInstant = 253402300800LL * kMicrosPerSecond;

// Periods are at least a millisecond (decisions report milliseconds) and at most kMaxWindow.
constexpr Micros kMinPeriod = 1000;

struct Limit {
    Algorithm algorithm = Algorithm::kFixedWindow;
    std::int64_t limit = 1;  // N >= 1
    Micros period = 0;       // P, kMinPeriod..kMaxWindow
    std::int64_t burst = 1;  // B >= 1, B·P/N <= kMaxWindow; token_bucket and gcra only (else N)
    // A calendar window (fixed_window only): the window holding now, [window_start,
    // window_end), from one local midnight to the next day, week or month, as the caller
    // computed it for this call (P is then its length). 0 and 0: windows aligned to the epoch.
    Micros window_start = 0;
    Micros window_end = 0;
    // The longest a consume or peek that would be denied may instead be admitted for later
    // (token_bucket and gcra only, 0..kMaxWindow; see above). 0: never delayed.
    Micros max_delay = 0;
};

// Throws ArgumentError naming the argument (p_limit, p_period, p_burst, p_max_wait) unless
// `limit` is within the ranges above and its burst and delay are used only by the bucket
// algorithms.
void require_valid_limit(const Limit& limit);

// Throws ArgumentError naming `argument` unless `max_delay` is 0..kMaxWindow, and 0 for an
// algorithm other than token_bucket and gcra (the delay rule of require_valid_limit, which
// checks p_max_wait with it; a policy's max_delay column is checked with it too).
void require_valid_max_delay(const char* argument, Algorithm algorithm, Micros max_delay);

// Throws ArgumentError (p_algorithm) unless `algorithm` counts calendar windows: fixed_window.
void require_calendar_algorithm(Algorithm algorithm);

// A checked Limit from the SQL arguments; `burst` is empty when not given (B = N).
Limit make_limit(Algorithm algorithm, std::int64_t limit, Micros period,
                 std::optional<std::int64_t> burst);

// Whether a call of `cost` could ever be allowed: cost <= N, or <= B for the bucket algorithms.
// A consume or peek of a cost that could not is denied for good (Decision::never), as the peers
// (redis-cell, Gubernator, Upstash, rate-limiter-flexible) and the policy calls answer it.
bool cost_could_be_allowed(const Limit& limit, std::int64_t cost) noexcept;

// The most one call can take: B for the bucket algorithms, N otherwise; and the argument that
// sets it ("p_burst" or "p_limit").
std::int64_t allowance(const Limit& limit) noexcept;
const char* allowance_argument(const Limit& limit) noexcept;

// Throws ArgumentError (clock) unless 0 <= now <= kMaxInstant.
void require_valid_instant(Micros now);

// One distinct instant of the sliding window's log and the units allowed at it.
struct LogEntry {
    Micros at = 0;
    std::int64_t units = 0;

    bool operator==(const LogEntry& other) const noexcept {
        return at == other.at && units == other.units;
    }
};

// The most entries a sliding_window log keeps, so that a key's row stays small (1 kB of log)
// and a call costs the same whatever the limit. A write that would keep more merges two
// adjacent entries of the same cell of a fixed grid of sliding_log_cell(P) µs (the pair that
// moves the fewest unit-microseconds; the older units are counted at the later instant). A log
// within (t - P, t] touches at most kMaxSlidingLog cells, so such a pair always exists. A unit is
// only ever moved later within its own cell, so the merged log counts every unit the exact one
// counts, and at most sliding_log_cell(P) - 1 µs longer: a denied call's wait exceeds the exact
// log's by less than a cell, and the wait reported is exact for the log as stored. A log written
// longer than this (before the bound) is read as it is and compacted on its next write.
constexpr int kMaxSlidingLog = 64;

// The cell of that grid: ceil(P / (kMaxSlidingLog - 1)) µs.
constexpr Micros sliding_log_cell(Micros period) noexcept {
    return (period + kMaxSlidingLog - 2) / (kMaxSlidingLog - 1);
}

// The state of one key, as the engines store it. Which fields an algorithm uses:
//  fixed_window, rolling_window   instant = window start,        amount = units used,
//                                 carry = 1 when a charge left them past N (see above)
//  sliding_window_counter         instant = current window start, amount = its units,
//                                 carry = the previous window's units
//  token_bucket                   instant = last refill,          amount = whole tokens,
//                                 carry = fraction of a token, in 1/P
//  gcra                           as token_bucket (a 0.5.0 state, measured_limit 0:
//                                 instant = theoretical arrival time in whole µs,
//                                 carry = its fraction, in 1/N µs)
//  sliding_window                 log, oldest first
// A state whose algorithm differs from the one asked for is read as fresh (its block stays).
struct KeyState {
    Algorithm algorithm = Algorithm::kNone;
    Micros instant = 0;
    std::int64_t amount = 0;
    std::int64_t carry = 0;
    std::vector<LogEntry> log;
    Micros blocked_until = 0;  // denied while now < blocked_until; 0 = never blocked
    // token_bucket and gcra: the limit (N) and period (P) the state was measured in; 0 when
    // unknown (a state written before they were kept), read as the limit asked for. A state
    // measured under another N or P is converted before deciding, as it stood at its last
    // write: the units still available then (whole tokens, the fraction rounded against the
    // caller) are kept, capped at the new burst, and refill at the new rate from then on, so an
    // edited limit applies to the very next call in both directions, alike for both algorithms.
    std::int64_t measured_limit = 0;
    Micros measured_period = 0;

    bool operator==(const KeyState& other) const noexcept {
        return algorithm == other.algorithm && instant == other.instant && amount == other.amount &&
               carry == other.carry && log == other.log && blocked_until == other.blocked_until &&
               measured_limit == other.measured_limit && measured_period == other.measured_period;
    }
    bool operator!=(const KeyState& other) const noexcept { return !(*this == other); }
};

struct Decision {
    bool allowed = false;
    std::int64_t limit = 0;      // N (B for the bucket algorithms): what a full key allows at once
    std::int64_t remaining = 0;  // units a call could take right now, after this decision
    // Allowed: the delay before the call may go (0 when admitted at once; see max_delay).
    // Denied: the wait until this call would be allowed.
    Micros retry_after = 0;
    Micros reset_after = 0;      // the wait until the key is back to its full allowance
    bool state_changed = false;  // the call wrote the key's state: the engine must store it
    bool blocked = false;        // denied because the key is blocked (now < blocked_until)
    // Denied for good: the cost is more than the key could ever allow (N, or B for the bucket
    // algorithms), so there is no time to wait for (retry_after is 0 and means nothing).
    bool never = false;
};

// What a caller can do to a key under a limit. A denied consume changes nothing (a delayed one
// is allowed, and charged); a peek never changes anything; a refund gives back up to `cost` units
// consumed earlier; a charge counts `cost` units whatever remains (any cost from 0 to 2^31 - 1, see
// above). A refund and a charge report what a one-unit peek would say afterwards.
enum class Action { kConsume, kPeek, kRefund, kCharge };

// Decides `action` for a call of `cost` at `now`, updating `state` in place. The arguments
// must have passed the require_valid_* checks.
Decision decide(const Limit& limit, KeyState& state, Micros now, std::int64_t cost, Action action);

// Blocks the key until `until`; an earlier block is never shortened.
void block_until(KeyState& state, Micros until) noexcept;

// The instant from which `state` decides exactly like a fresh key (nothing counted, no block):
// rows older than this can be deleted by cleanup without changing any decision.
Micros idle_from(const Limit& limit, const KeyState& state);

}  // namespace ratelimit
