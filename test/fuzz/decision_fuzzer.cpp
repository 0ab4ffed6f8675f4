// libFuzzer target over the core's decision functions (no PostgreSQL): the input is decoded into
// limits and a sequence of calls (consume, peek, refund, block, clock steps that may go
// backwards), played on a plain KeyState with decide() and on keys of a small MemoryStore
// checked against a model of plain KeyStates. Any broken invariant traps.
//
// What must always hold (include/ratelimit/algorithms.hpp, memory_store.hpp):
//  - make_limit either returns a limit inside the documented ranges or throws ArgumentError
//    naming p_limit, p_period or p_burst; require_non_negative_cost likewise for p_cost, and
//    the other argument checks (names, intervals, windows, key lengths, the clock) for theirs.
//  - 0 <= remaining <= limit (the burst for token_bucket and gcra); limit is that allowance.
//  - retry_after is 0 when allowed and > 0 when denied; calling again exactly retry_after later
//    is allowed and one microsecond earlier is not; reset_after >= 0, and at reset_after the key
//    has its whole allowance again.
//  - a peek never changes the state; a denied consume leaves it unchanged; a decision that says
//    it wrote nothing left the state as it was; an allowed consume takes exactly its cost.
//  - the same state never grants more at an earlier instant than at a later one (a clock going
//    back never grants more); a refund never lowers what remains.
//  - another algorithm than the state's reads it as fresh (only the block stays).
//  - from idle_from() on, the state decides exactly like a fresh key with the same block.
//  - a sliding_window log keeps at most kMaxSlidingLog entries; on long histories it never
//    allows what the exact log denies, and waits less than one grid cell longer than it.
//  - MemoryStore: every decision equals decide() on the model's KeyState, the stored state
//    equals the model's, expired keys are freed only when they decide like fresh ones, a key is
//    lost only by a counted eviction, the counters add up, every slot is plausible() and a
//    store restored from the saved slots decides like the model.
//  - a bucket limit edited between calls applies to the next call (every check above holds for
//    it, idle_from included), and after relaxing no call waits longer than the new limit can.
//  - Multiplier::parse takes exactly positive decimals and apply_floor is exact; a policy call
//    (plan_policies and its answers) answers as a transliteration of the plpgsql it replaces;
//    decide_all_or_nothing over fake engines acts as one atomic step (a denied call or a failing
//    engine charges nothing, an allowed call charges every tier that allows).
//
// Limits, bursts and costs are the 32-bit integers SQL passes. The core's types are 64-bit, but
// it is not built for values past 2^62 (sliding_window_counter adds current + cost in 64 bits),
// and no SQL call can reach them.
#include <fuzzer/FuzzedDataProvider.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <iterator>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "ratelimit/algorithms.hpp"
#include "ratelimit/engine.hpp"
#include "ratelimit/error.hpp"
#include "ratelimit/memory_store.hpp"
#include "ratelimit/policy.hpp"
#include "ratelimit/validation.hpp"

namespace {

using namespace ratelimit;
using Wide = __int128;

[[noreturn]] void broken(const char* what, int line) {
    std::fprintf(stderr, "decision_fuzzer: invariant broken at line %d: %s\n", line, what);
    __builtin_trap();
}

#define REQUIRE(condition)                \
    do {                                  \
        if (!(condition))                 \
            broken(#condition, __LINE__); \
    } while (false)

constexpr int kMaxOperations = 96;
constexpr int kMaxLimits = 3;
constexpr int kMaxStoreKeys = 48;  // most in one partition of 32 slots: evictions happen

bool is_bucket(Algorithm algorithm) {
    return algorithm == Algorithm::kTokenBucket || algorithm == Algorithm::kGcra;
}

// The model's own reading of what a key may ever allow, kept apart from the code under test.
std::int64_t model_allowance(const Limit& limit) {
    return is_bucket(limit.algorithm) ? limit.burst : limit.limit;
}

// An integer near the edges the code cares about, or anything at all.
std::int64_t interesting_integer(FuzzedDataProvider& in) {
    static const std::int64_t kEdges[] = {0,
                                          1,
                                          2,
                                          3,
                                          6,
                                          7,
                                          -1,
                                          INT32_MAX,
                                          static_cast<std::int64_t>(INT32_MAX) + 1,
                                          INT32_MIN,
                                          INT64_MAX,
                                          INT64_MIN,
                                          kMinPeriod - 1,
                                          kMinPeriod,
                                          kMicrosPerSecond,
                                          kMicrosPerMinute,
                                          kMicrosPerDay,
                                          kMaxWindow - 1,
                                          kMaxWindow,
                                          kMaxWindow + 1,
                                          kMaxInstant};
    switch (in.ConsumeIntegralInRange<int>(0, 3)) {
        case 0:
            return in.ConsumeIntegralInRange<std::int64_t>(0, 16);
        case 1: {
            // Wrapping, so that INT64_MAX + 1 is INT64_MIN rather than undefined.
            const std::int64_t edge =
                kEdges[in.ConsumeIntegralInRange<std::size_t>(0, std::size(kEdges) - 1)];
            const std::int64_t step = in.ConsumeIntegralInRange<std::int64_t>(-2, 2);
            return static_cast<std::int64_t>(static_cast<std::uint64_t>(edge) +
                                             static_cast<std::uint64_t>(step));
        }
        case 2:
            return in.ConsumeIntegralInRange<std::int64_t>(INT32_MIN, INT32_MAX);
        default:
            return in.ConsumeIntegral<std::int64_t>();
    }
}

// A period: mostly plausible spans, sometimes anything.
Micros interesting_period(FuzzedDataProvider& in) {
    switch (in.ConsumeIntegralInRange<int>(0, 3)) {
        case 0:
            return in.ConsumeIntegralInRange<Micros>(kMinPeriod, 10 * kMicrosPerSecond);
        case 1:
            return in.ConsumeIntegralInRange<Micros>(kMinPeriod, kMaxWindow);
        default:
            return interesting_integer(in);
    }
}

// The limit arguments as SQL passes them: integer limit and burst (the type itself refuses
// anything wider), a period of any length.
std::optional<Limit> read_limit(FuzzedDataProvider& in) {
    Algorithm algorithm = Algorithm::kFixedWindow;
    if (in.ConsumeBool()) {
        algorithm = static_cast<Algorithm>(in.ConsumeIntegralInRange<int>(1, 6));
    } else {
        // By name, as the SQL layer does; an unknown name is an ArgumentError.
        const std::string name = in.ConsumeRandomLengthString(32);
        try {
            algorithm = parse_algorithm("p_algorithm", name);
            REQUIRE(name == algorithm_name(algorithm));
        } catch (const ArgumentError& error) {
            REQUIRE(error.kind() == ErrorKind::kInvalidArgument);
            REQUIRE(error.argument() == "p_algorithm");
            algorithm = static_cast<Algorithm>(in.ConsumeIntegralInRange<int>(1, 6));
        }
    }
    const auto limit = static_cast<std::int32_t>(interesting_integer(in));
    const Micros period = interesting_period(in);
    std::optional<std::int64_t> burst;
    if (in.ConsumeIntegralInRange<int>(0, 2) == 0)
        burst = static_cast<std::int32_t>(interesting_integer(in));
    try {
        const Limit made = make_limit(algorithm, limit, period, burst);
        REQUIRE(made.algorithm == algorithm);
        REQUIRE(made.limit == limit && made.limit >= 1);
        REQUIRE(made.period == period && made.period >= kMinPeriod && made.period <= kMaxWindow);
        REQUIRE(made.burst >= 1);
        REQUIRE(is_bucket(algorithm) || (!burst && made.burst == made.limit));
        REQUIRE(made.burst == burst.value_or(limit));
        REQUIRE(Wide(made.burst) * made.period <= Wide(made.limit) * kMaxWindow);
        return made;
    } catch (const ArgumentError& error) {
        REQUIRE(error.kind() == ErrorKind::kInvalidArgument);
        REQUIRE(error.argument() == "p_limit" || error.argument() == "p_period" ||
                error.argument() == "p_burst");
        // Refused only when something is out of range.
        const bool in_range = limit >= 1 && period >= kMinPeriod && period <= kMaxWindow &&
                              (!burst || (is_bucket(algorithm) && *burst >= 1 &&
                                          Wide(*burst) * period <= Wide(limit) * kMaxWindow));
        REQUIRE(!in_range);
        return std::nullopt;
    }
}

// A cost as SQL passes it (an integer), checked as the SQL layer does; empty when refused.
std::optional<std::int64_t> read_cost(FuzzedDataProvider& in, const Limit& limit) {
    std::int64_t cost = 0;
    switch (in.ConsumeIntegralInRange<int>(0, 3)) {
        case 0:
            cost = 1;
            break;
        case 1:
            cost = in.ConsumeIntegralInRange<std::int64_t>(0, model_allowance(limit));
            break;
        default:
            cost = static_cast<std::int32_t>(interesting_integer(in));
    }
    try {
        require_non_negative_cost("p_cost", cost);
        REQUIRE(cost >= 0);
    } catch (const ArgumentError& error) {
        REQUIRE(error.kind() == ErrorKind::kInvalidArgument && error.argument() == "p_cost");
        REQUIRE(cost < 0);
        return std::nullopt;
    }
    // A cost above the allowance is a denial for good (Decision::never), not a call to model.
    REQUIRE(cost_could_be_allowed(limit, cost) == (cost <= model_allowance(limit)));
    if (!cost_could_be_allowed(limit, cost))
        return std::nullopt;
    return cost;
}

Micros clamp_instant(Wide t) {
    if (t < 0)
        return 0;
    if (t > kMaxInstant)
        return kMaxInstant;
    return static_cast<Micros>(t);
}

// The next instant: small steps either way, big jumps, exact edges of the last decision.
Micros next_instant(FuzzedDataProvider& in, Micros now, const Decision& last) {
    switch (in.ConsumeIntegralInRange<int>(0, 7)) {
        case 0:
            return now;
        case 1:
            return clamp_instant(Wide(now) + in.ConsumeIntegralInRange<Micros>(1, 2000));
        case 2:
            return clamp_instant(Wide(now) - in.ConsumeIntegralInRange<Micros>(1, 2000));
        case 3:
            return clamp_instant(Wide(now) +
                                 in.ConsumeIntegralInRange<Micros>(-kMaxWindow, 2 * kMaxWindow));
        case 4:
            return clamp_instant(Wide(now) + last.retry_after +
                                 in.ConsumeIntegralInRange<Micros>(-1, 1));
        case 5:
            return clamp_instant(Wide(now) + last.reset_after +
                                 in.ConsumeIntegralInRange<Micros>(-1, 1));
        case 6:
            return in.ConsumeIntegralInRange<Micros>(0, kMaxInstant);
        default:
            return clamp_instant(Wide(now) + in.ConsumeIntegralInRange<Micros>(0, kMicrosPerDay));
    }
}

bool same_decision(const Decision& a, const Decision& b) {
    return a.allowed == b.allowed && a.limit == b.limit && a.remaining == b.remaining &&
           a.retry_after == b.retry_after && a.reset_after == b.reset_after &&
           a.state_changed == b.state_changed;
}

Decision peek(const Limit& limit, const KeyState& state, Micros at, std::int64_t cost) {
    KeyState copy = state;
    const Decision decision = decide(limit, copy, at, cost, Action::kPeek);
    REQUIRE(copy == state);
    REQUIRE(!decision.state_changed);
    return decision;
}

// The checks every decision must pass, whatever the action.
void check_shape(const Limit& limit, const Decision& d) {
    REQUIRE(d.limit == model_allowance(limit));
    REQUIRE(d.remaining >= 0 && d.remaining <= d.limit);
    REQUIRE(d.retry_after >= 0);
    REQUIRE(d.reset_after >= 0);
    REQUIRE(d.allowed ? d.retry_after == 0 : d.retry_after > 0);
}

// retry_after is exact: the same call on the same state is allowed that much later, and not a
// microsecond before; at reset_after the key is full again.
void check_waits(const Limit& limit, const KeyState& state, Micros now, std::int64_t cost,
                 const Decision& d) {
    if (!d.allowed && Wide(now) + d.retry_after <= kMaxInstant) {
        REQUIRE(peek(limit, state, now + d.retry_after, cost).allowed);
        REQUIRE(!peek(limit, state, now + d.retry_after - 1, cost).allowed);
    }
    if (Wide(now) + d.reset_after <= kMaxInstant) {
        const Decision full = peek(limit, state, now + d.reset_after, 0);
        REQUIRE(full.allowed);
        REQUIRE(full.remaining == model_allowance(limit));
    }
}

// Later never grants less than earlier, for the same state.
void check_monotone(const Limit& limit, const KeyState& state, Micros earlier, Micros later,
                    std::int64_t cost) {
    if (later < earlier)
        std::swap(earlier, later);
    const Decision first = peek(limit, state, earlier, cost);
    const Decision second = peek(limit, state, later, cost);
    REQUIRE(!first.allowed || second.allowed);
    REQUIRE(first.remaining <= second.remaining);
}

// From idle_from() on the state decides like a fresh key that keeps only the block.
void check_idle(const Limit& limit, const KeyState& state, Micros at, std::int64_t cost) {
    const Micros idle = idle_from(limit, state);
    REQUIRE(idle >= state.blocked_until);
    if (at < idle)
        return;
    KeyState fresh;
    fresh.blocked_until = state.blocked_until;
    for (Action action : {Action::kPeek, Action::kConsume, Action::kRefund}) {
        KeyState a = state;
        KeyState b = fresh;
        const Decision da = decide(limit, a, at, cost, action);
        const Decision db = decide(limit, b, at, cost, action);
        REQUIRE(da.allowed == db.allowed && da.limit == db.limit && da.remaining == db.remaining &&
                da.retry_after == db.retry_after && da.reset_after == db.reset_after);
    }
}

// One call on a plain KeyState, with every invariant around it.
Decision play(const Limit& limit, KeyState& state, Micros now, std::int64_t cost, Action action) {
    const KeyState before = state;
    const bool blocked = now < state.blocked_until;
    const bool fresh = state.algorithm != limit.algorithm;
    const Decision looked = peek(limit, before, now, cost);
    const Decision unit = peek(limit, before, now, 1);

    const Decision d = decide(limit, state, now, cost, action);
    check_shape(limit, d);
    if (!d.state_changed)
        REQUIRE(state == before);
    REQUIRE(state.blocked_until == before.blocked_until);

    // Another algorithm's state reads as fresh, with its block.
    if (fresh) {
        KeyState clean;
        clean.blocked_until = before.blocked_until;
        const Decision d_clean = decide(limit, clean, now, cost, action);
        REQUIRE(same_decision(d, d_clean));
        if (d.state_changed)
            REQUIRE(clean == state);
    }

    switch (action) {
        case Action::kPeek:
            REQUIRE(state == before);
            REQUIRE(same_decision(d, looked));
            // Without a block, a call fits exactly when what remains covers it.
            if (!blocked)
                REQUIRE(d.allowed == (d.remaining >= cost));
            else
                REQUIRE(!d.allowed && d.remaining == 0);
            check_waits(limit, state, now, cost, d);
            break;
        case Action::kConsume:
            REQUIRE(d.allowed == looked.allowed);
            if (!d.allowed) {
                REQUIRE(state == before);
                REQUIRE(!d.state_changed);
                REQUIRE(d.remaining == looked.remaining);
                check_waits(limit, state, now, cost, d);
            } else if (cost > 0) {
                REQUIRE(d.state_changed);
                REQUIRE(d.remaining == looked.remaining - cost);
                REQUIRE(state.algorithm == limit.algorithm);
                check_waits(limit, state, now, cost, d);
            } else {
                REQUIRE(!d.state_changed);
            }
            break;
        case Action::kRefund: {
            REQUIRE(d.state_changed);
            REQUIRE(state.algorithm == limit.algorithm);
            // Reported as a one-unit peek afterwards; a refund never takes anything away.
            REQUIRE(same_decision(
                peek(limit, state, now, 1),
                Decision{d.allowed, d.limit, d.remaining, d.retry_after, d.reset_after, false}));
            REQUIRE(d.remaining >= unit.remaining);
            REQUIRE(!unit.allowed || d.allowed);
            check_waits(limit, state, now, 1, d);
            break;
        }
        case Action::kCharge:
            // Not chosen by this fuzzer; the unit tests check charges against a model.
            break;
    }
    return d;
}

// A long history on one sliding_window key with a limit above kMaxSlidingLog: up to hundreds of
// calls, mostly at distinct instants a fraction of a grid cell apart, so the log is merged
// again and again. Besides play()'s checks: the bounded log never allows what the exact log
// (every allowed unit at its own instant, fed the same history) denies, decides as it does
// while it holds the same entries, keeps at most kMaxSlidingLog entries, and a denied call
// waits at least as long as the exact log says and less than one grid cell longer.
void check_bounded_log(FuzzedDataProvider& in, Micros start) {
    const std::int64_t n = in.ConsumeIntegralInRange<std::int64_t>(kMaxSlidingLog + 1, INT32_MAX);
    const Micros period = interesting_period(in);
    const Limit limit{Algorithm::kSlidingWindow, n, period, n};
    try {
        require_valid_limit(limit);
    } catch (const ArgumentError&) {
        return;
    }
    const Micros cell = sliding_log_cell(period);
    const Micros step = in.ConsumeIntegralInRange<Micros>(1, cell);
    const int calls = in.ConsumeIntegralInRange<int>(kMaxSlidingLog, 400);
    KeyState state;
    std::vector<LogEntry> exact;  // the allowed units in the span at the last write, oldest first
    Micros clock = -1;
    Micros now = start;
    for (int i = 0; i < calls; ++i) {
        now = clamp_instant(Wide(now) + in.ConsumeIntegralInRange<Micros>(-step, 4 * step));
        const int kind = in.ConsumeIntegralInRange<int>(0, 7);
        const Action action = kind == 0   ? Action::kPeek
                              : kind == 1 ? Action::kRefund
                                          : Action::kConsume;
        const std::int64_t cost =
            in.ConsumeBool() ? 1 : in.ConsumeIntegralInRange<std::int64_t>(0, n);
        const Micros t = std::max(now, clock);
        std::int64_t used = 0;
        for (const LogEntry& e : exact)
            used += e.at > t - period ? e.units : 0;
        const bool admits = cost == 0 || used + cost <= n;
        Wide exact_at = t;  // the first instant the exact log admits the call
        if (!admits) {
            std::int64_t counted = used;
            for (const LogEntry& e : exact) {
                if (e.at <= t - period)
                    continue;
                counted -= e.units;
                if (counted + cost <= n) {
                    exact_at = Wide(e.at) + period;
                    break;
                }
            }
        }
        const bool same_log = state.log == exact;
        const Decision d = play(limit, state, now, cost, action);
        if (action != Action::kRefund) {
            REQUIRE(!d.allowed || admits);
            if (same_log)
                REQUIRE(d.allowed == admits);
            if (!d.allowed) {
                REQUIRE(Wide(now) + d.retry_after >= (admits ? Wide(now) : exact_at));
                REQUIRE(Wide(now) + d.retry_after <= exact_at + cell - 1);
            }
        }
        if (d.state_changed) {
            REQUIRE(state.log.size() <= static_cast<std::size_t>(kMaxSlidingLog));
            exact.erase(std::remove_if(exact.begin(), exact.end(),
                                       [&](const LogEntry& e) { return e.at <= t - period; }),
                        exact.end());
            clock = t;
            if (action == Action::kConsume) {
                if (!exact.empty() && exact.back().at == t)
                    exact.back().units += cost;
                else
                    exact.push_back(LogEntry{t, cost});
            } else {
                std::int64_t back = cost;
                while (back > 0 && !exact.empty()) {
                    const std::int64_t taken = std::min(back, exact.back().units);
                    exact.back().units -= taken;
                    back -= taken;
                    if (exact.back().units == 0)
                        exact.pop_back();
                }
            }
        }
    }
}

// ---- the memory store and its model ------------------------------------------------------------

struct ModelKey {
    KeyHash hash;
    int limit = 0;  // which of the input's limits this key is always called with
    bool present = false;
    KeyState state;
    std::uint64_t last_used = 0;  // when the store last touched the key: its LRU order
};

// The store's keys, all of one database, told to evict when full: the model is LRU. A log
// block for every slot, so that only slots ever run short.
Tenant evicting_tenant() {
    Tenant tenant;
    tenant.evict = true;
    return tenant;
}
constexpr std::int64_t kStoreLogBlocks = kMinMemoryCapacity;

struct StoreHarness {
    static std::size_t words() {
        return MemoryStore::bytes_needed(kMinMemoryCapacity, kStoreLogBlocks) / 8 + 1;
    }

    std::vector<std::uint64_t> block = std::vector<std::uint64_t>(words());
    std::vector<std::uint64_t> restored_block = std::vector<std::uint64_t>(words());
    MemoryStore store =
        MemoryStore::create(block.data(), kMinMemoryCapacity, kStoreLogBlocks, HashSecret{7, 11});
    KeyState scratch;
};

StoreHarness& harness() {
    static StoreHarness* instance = new StoreHarness();
    return *instance;
}

int partition_of(const ModelKey& key) {
    return MemoryStore::partition_of(key.hash);
}

MemoryStats totals(const MemoryStore& store) {
    MemoryStats total;
    for (int p = 0; p < kMemoryPartitions; ++p)
        total += store.stats(p);
    return total;
}

KeyState state_of(const SavedSlot& saved) {
    KeyState state;
    load_saved_state(saved, state);
    return state;
}

// After a store call: the keys the store holds in `partition` are exactly those the model
// holds, in the order the model last used them, less the ones freed because they had expired
// (which must decide like fresh keys) and at most `evictions` evicted ones, each older than every
// key that stayed; every stored state is the model's.
void reconcile(MemoryStore& store, std::vector<ModelKey>& keys, const std::vector<Limit>& limits,
               int partition, Micros now, std::int64_t evictions) {
    std::vector<SavedSlot> held;
    store.for_each_oldest_first(partition, [&](const SavedSlot& saved) { held.push_back(saved); });
    std::uint64_t previous_use = 0;
    std::uint64_t oldest_held = UINT64_MAX;
    for (const SavedSlot& saved : held) {
        ModelKey* key = nullptr;
        for (ModelKey& candidate : keys) {
            if (candidate.hash == saved.key)
                key = &candidate;
        }
        REQUIRE(key != nullptr && key->present && partition_of(*key) == partition);
        REQUIRE(key->last_used > previous_use);
        previous_use = key->last_used;
        oldest_held = std::min(oldest_held, key->last_used);
        REQUIRE(MemoryStore::plausible(saved));
        REQUIRE(state_of(saved) == key->state);
        REQUIRE(saved.expires_at == idle_from(limits[key->limit], key->state));
        // A key is evicted only when no expired one could be freed instead (the key this call
        // wrote, the most recently used, may have expired at once: a refund can empty it).
        REQUIRE(evictions == 0 || saved.expires_at > now || &saved == &held.back());
    }
    std::int64_t lost = 0;
    for (ModelKey& key : keys) {
        if (partition_of(key) != partition || !key.present)
            continue;
        bool held_now = false;
        for (const SavedSlot& saved : held)
            held_now = held_now || saved.key == key.hash;
        if (held_now)
            continue;
        if (idle_from(limits[key.limit], key.state) > now) {
            ++lost;  // evicted while still counting: it must have been the least recently used
            REQUIRE(key.last_used < oldest_held);
        }
        key.present = false;
        key.state = KeyState{};
    }
    REQUIRE(lost <= evictions);
    REQUIRE(store.stats(partition).entries == static_cast<std::int64_t>(held.size()));
}

// One decision on `key` in the store and on the model; both must agree.
void store_decide(MemoryStore& store, KeyState& scratch, ModelKey& key, const Limit& limit,
                  Micros now, std::int64_t cost, Action action, std::uint64_t& clock) {
    const int partition = partition_of(key);
    const MemoryStats before = store.stats(partition);
    KeyState model = key.present ? key.state : KeyState{};
    const Decision expected = decide(limit, model, now, cost, action);
    const Decision got =
        store.decide(partition, key.hash, limit, now, cost, action, scratch, evicting_tenant());
    // A new key's state that decides like no state, or a refund's, is kept only when a slot is
    // free (never worth an eviction): then the store forgets it and so does the model.
    const bool dropped = expected.state_changed && !got.state_changed;
    if (dropped)
        REQUIRE(!key.present && (action != Action::kConsume || idle_from(limit, model) <= now));
    Decision compared = got;
    compared.state_changed = expected.state_changed;
    REQUIRE(same_decision(compared, expected));
    // A key the store holds, or is given, becomes its most recently used.
    if (key.present || (expected.state_changed && !dropped))
        key.last_used = ++clock;
    if (expected.state_changed && !dropped) {
        key.state = model;
        key.present = true;
    }
    const MemoryStats after = store.stats(partition);
    REQUIRE(after.allowed - before.allowed == (action == Action::kConsume && got.allowed ? 1 : 0));
    REQUIRE(after.denied - before.denied == (action == Action::kConsume && !got.allowed ? 1 : 0));
}

// After any store call on `partition`: the counters moved as they may, and the store holds what
// the model says.
void check_partition(MemoryStore& store, std::vector<ModelKey>& keys,
                     const std::vector<Limit>& limits, int partition, const MemoryStats& before,
                     Micros now) {
    const MemoryStats after = store.stats(partition);
    REQUIRE(after.evictions >= before.evictions && after.evictions - before.evictions <= 1);
    REQUIRE(after.expired >= before.expired);
    REQUIRE(after.entries <= after.capacity);
    reconcile(store, keys, limits, partition, now, after.evictions - before.evictions);
}

void store_call(FuzzedDataProvider& in, MemoryStore& store, KeyState& scratch,
                std::vector<ModelKey>& keys, const std::vector<Limit>& limits, Micros now,
                std::uint64_t& clock) {
    const std::size_t index = in.ConsumeIntegralInRange<std::size_t>(0, keys.size() - 1);
    ModelKey& key = keys[index];
    const Limit& limit = limits[key.limit];
    const int partition = partition_of(key);
    const MemoryStats before = store.stats(partition);
    switch (in.ConsumeIntegralInRange<int>(0, 6)) {
        case 0:
        case 1:
        case 2: {
            const Action action = static_cast<Action>(in.ConsumeIntegralInRange<int>(0, 2));
            if (const std::optional<std::int64_t> cost = read_cost(in, limit))
                store_decide(store, scratch, key, limit, now, *cost, action, clock);
            break;
        }
        case 3: {
            const Micros until =
                clamp_instant(Wide(now) + in.ConsumeIntegralInRange<Micros>(1, kMaxWindow));
            if (!key.present) {
                key.state = KeyState{};
                key.present = true;
            }
            block_until(key.state, until);
            key.last_used = ++clock;
            REQUIRE(store.block(partition, key.hash, until, now, scratch, evicting_tenant()) ==
                    key.state.blocked_until);
            break;
        }
        case 4:
            REQUIRE(store.reset(partition, key.hash) == key.present);
            key.present = false;
            key.state = KeyState{};
            break;
        case 5:
            // One unit on every key from this one on: fills partitions past their slots, so
            // that expired keys are freed and the least recently used evicted.
            for (std::size_t k = index; k < keys.size(); ++k) {
                ModelKey& each = keys[k];
                const int each_partition = partition_of(each);
                const MemoryStats each_before = store.stats(each_partition);
                store_decide(store, scratch, each, limits[each.limit], now, 1, Action::kConsume,
                             clock);
                check_partition(store, keys, limits, each_partition, each_before, now);
            }
            return;
        default:
            store.expire(partition, now);
            REQUIRE(store.stats(partition).evictions == before.evictions);
            break;
    }
    check_partition(store, keys, limits, partition, before, now);
}

// The saved slots, restored into another store (as at start-up), decide like the model.
void check_restore(StoreHarness& h, const std::vector<ModelKey>& keys,
                   const std::vector<Limit>& limits, Micros now) {
    MemoryStore restored = MemoryStore::create(h.restored_block.data(), kMinMemoryCapacity,
                                               kStoreLogBlocks, h.store.secret());
    for (int p = 0; p < kMemoryPartitions; ++p)
        h.store.for_each_oldest_first(p, [&](const SavedSlot& saved) {
            REQUIRE(MemoryStore::plausible(saved));
            restored.restore(saved, now);
        });
    for (const ModelKey& key : keys) {
        const Limit& limit = limits[key.limit];
        const KeyState model = key.present ? key.state : KeyState{};
        for (std::int64_t cost : {std::int64_t{0}, std::int64_t{1}}) {
            KeyState copy = model;
            const Decision expected = decide(limit, copy, now, cost, Action::kPeek);
            const Decision got = restored.decide(partition_of(key), key.hash, limit, now, cost,
                                                 Action::kPeek, h.scratch);
            REQUIRE(same_decision(got, expected));
        }
    }
}

// The argument checks in front of every decision: each either returns a value inside its range
// or throws ArgumentError naming the argument, whatever it is given.
void check_arguments(FuzzedDataProvider& in) {
    const std::string name = in.ConsumeRandomLengthString(16);
    try {
        REQUIRE(name == engine_name(parse_engine("p_engine", name)));
    } catch (const ArgumentError& error) {
        REQUIRE(error.kind() == ErrorKind::kInvalidArgument && error.argument() == "p_engine");
    }
    // An SQL interval: months, days, microseconds.
    const auto months = in.ConsumeIntegral<std::int32_t>();
    const auto days = in.ConsumeIntegral<std::int32_t>();
    const Micros micros = interesting_integer(in);
    try {
        const Micros span = interval_length("p_period", months, days, micros);
        REQUIRE(months == 0 && span > 0 && span <= kMaxWindow);
        REQUIRE(Wide(days) * kMicrosPerDay + micros == span);
    } catch (const ArgumentError& error) {
        REQUIRE(error.kind() == ErrorKind::kInvalidArgument && error.argument() == "p_period");
        const Wide total = Wide(days) * kMicrosPerDay + micros;
        REQUIRE(months != 0 || total <= 0 || total > kMaxWindow);
    }
    // A window counted in seconds or minutes, as the drop-in functions take it.
    const auto count = static_cast<std::int32_t>(interesting_integer(in));
    const Micros unit = in.ConsumeBool() ? kMicrosPerSecond : kMicrosPerMinute;
    try {
        const Micros window = window_length("p_window_seconds", count, unit);
        REQUIRE(count > 0 && window == count * unit && window <= kMaxWindow);
    } catch (const ArgumentError& error) {
        REQUIRE(error.argument() == "p_window_seconds");
        REQUIRE(count <= 0 || Wide(count) * unit > kMaxWindow);
    }
    const auto length = in.ConsumeIntegralInRange<std::size_t>(0, 2 * kMaxKeyBytes);
    try {
        require_key("p_key", length);
        REQUIRE(length >= 1 && length <= kMaxKeyBytes);
    } catch (const ArgumentError& error) {
        REQUIRE(error.argument() == "p_key" && (length == 0 || length > kMaxKeyBytes));
    }
    const Micros instant = interesting_integer(in);
    try {
        require_valid_instant(instant);
        REQUIRE(instant >= 0 && instant <= kMaxInstant);
    } catch (const ArgumentError& error) {
        REQUIRE(error.argument() == "clock" && (instant < 0 || instant > kMaxInstant));
    }
}

// ---- multipliers, policies and all-or-nothing decisions
// ------------------------------------------

// Multiplier::parse takes exactly what numeric output prints for a positive value, and
// apply_floor is exact: checked against 128-bit rationals when the digits fit.
void check_multiplier(FuzzedDataProvider& in) {
    std::string text = in.ConsumeRandomLengthString(40);
    if (in.ConsumeBool()) {
        // Mostly well formed: digits, a point, digits.
        text.clear();
        const int whole = in.ConsumeIntegralInRange<int>(0, 6);
        const int fraction = in.ConsumeIntegralInRange<int>(-1, 24);
        for (int i = 0; i < whole; ++i)
            text.push_back(static_cast<char>('0' + in.ConsumeIntegralInRange<int>(0, 9)));
        if (fraction >= 0)
            text.push_back('.');
        for (int i = 0; i < fraction; ++i)
            text.push_back(static_cast<char>('0' + in.ConsumeIntegralInRange<int>(0, 9)));
    }
    const std::size_t point = text.find('.');
    const std::string whole = text.substr(0, point);
    const std::string fraction = point == std::string::npos ? "" : text.substr(point + 1);
    auto digits = [](const std::string& s) {
        return std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
    };
    const bool zero = whole.find_first_not_of('0') == std::string::npos &&
                      fraction.find_first_not_of('0') == std::string::npos;
    const bool valid = !whole.empty() && digits(whole) && digits(fraction) &&
                       (point == std::string::npos || !fraction.empty()) && !zero;
    try {
        const Multiplier m = Multiplier::parse("p_multiplier", text);
        REQUIRE(valid);
        // Leading and trailing zeros change nothing.
        const std::string padded = "00" + text + (point == std::string::npos ? "." : "") + "0";
        REQUIRE(m == Multiplier::parse("p_multiplier", padded));
        const std::int64_t value = in.ConsumeIntegralInRange<std::int64_t>(0, INT32_MAX);
        const std::int64_t got = m.apply_floor(value);
        const std::string w = whole.substr(std::min(whole.find_first_not_of('0'), whole.size()));
        if (w.size() + fraction.size() <= 25) {
            Wide numerator = 0;
            Wide scale = 1;
            for (char c : w + fraction)
                numerator = numerator * 10 + (c - '0');
            for (std::size_t i = 0; i < fraction.size(); ++i)
                scale *= 10;
            const Wide exact = Wide(value) * numerator / scale;
            REQUIRE(got == (exact > INT64_MAX ? INT64_MAX : static_cast<std::int64_t>(exact)));
        }
        const std::int64_t limit = multiplied_limit(value, m);
        REQUIRE(limit >= 1 && limit <= INT32_MAX);
        REQUIRE(limit == std::clamp<std::int64_t>(got, 1, INT32_MAX));
    } catch (const ArgumentError& error) {
        REQUIRE(error.kind() == ErrorKind::kInvalidArgument && error.argument() == "p_multiplier");
        REQUIRE(!valid);
    }
}

// A short multiplier, with its value as an exact fraction for the model.
struct ModelMultiplier {
    const char* text;
    std::int64_t numerator;
    std::int64_t denominator;
};
constexpr ModelMultiplier kModelMultipliers[] = {
    {"1", 1, 1},        {"2", 2, 1},       {"0.5", 1, 2},        {"1.5", 3, 2},
    {"0.001", 1, 1000}, {"1000", 1000, 1}, {"0.333", 333, 1000}, {"2.75", 11, 4},
};

std::int64_t model_multiplied(std::int64_t value, const ModelMultiplier& m) {
    const Wide exact = Wide(value) * m.numerator / m.denominator;
    return static_cast<std::int64_t>(std::min<Wide>(std::max<Wide>(exact, 1), INT32_MAX));
}

bool same_answer(const PolicyAnswer& a, const PolicyAnswer& b) {
    return a.allowed == b.allowed && a.policy == b.policy && a.limit == b.limit &&
           a.remaining == b.remaining && a.retry_after == b.retry_after &&
           a.reset_after == b.reset_after && a.period == b.period && a.cost == b.cost &&
           a.reason == b.reason && a.shadow_denied == b.shadow_denied && a.outcomes == b.outcomes &&
           a.blocks == b.blocks && a.logged == b.logged;
}

// One policy call, decided by the core and by a transliteration of the plpgsql decide_policies
// it replaces; the keys' decisions are made directly (every enforced one allows, or none is
// charged). Both must refuse the same calls and give the same answers.
void check_policy_call(FuzzedDataProvider& in, const std::vector<Limit>& limits) {
    const std::size_t n = in.ConsumeIntegralInRange<std::size_t>(1, 4);
    std::vector<PolicyRule> rules(n);
    std::vector<std::optional<KeyOverrideRule>> overrides(n);
    std::vector<const ModelMultiplier*> override_multipliers(n, &kModelMultipliers[0]);
    std::vector<KeyState> states(n);
    std::vector<PolicyRequest> requests(n);
    const Micros now = in.ConsumeIntegralInRange<Micros>(kMaxWindow, kMaxInstant - kMaxWindow);
    std::optional<TierRule> tier;
    const ModelMultiplier* tier_multiplier = &kModelMultipliers[0];
    if (in.ConsumeBool()) {
        tier_multiplier = &kModelMultipliers[in.ConsumeIntegralInRange<std::size_t>(
            0, std::size(kModelMultipliers) - 1)];
        tier = TierRule{"t", Multiplier::parse("m", tier_multiplier->text),
                        in.ConsumeIntegralInRange<int>(0, 7) == 0};
    }
    const std::int64_t cost = in.ConsumeIntegralInRange<int>(0, 3) == 0
                                  ? in.ConsumeIntegralInRange<std::int64_t>(0, INT32_MAX)
                                  : in.ConsumeIntegralInRange<std::int64_t>(0, 2);
    for (std::size_t i = 0; i < n; ++i) {
        const Limit& own = limits[i % limits.size()];
        PolicyRule& rule = rules[i];
        rule.name = "p" + std::to_string(i);
        rule.algorithm = own.algorithm;
        rule.limit = own.limit;
        rule.period = own.period;
        if (is_bucket(own.algorithm) && (own.burst != own.limit || in.ConsumeBool()))
            rule.burst = own.burst;
        rule.count_denied = in.ConsumeBool();
        rule.shadow = in.ConsumeIntegralInRange<int>(0, 3) == 0;
        rule.log_denials = in.ConsumeBool();
        if (in.ConsumeIntegralInRange<int>(0, 2) == 0) {
            KeyOverrideRule o;
            switch (in.ConsumeIntegralInRange<int>(0, 3)) {
                case 0:
                    o.limit = in.ConsumeIntegralInRange<std::int64_t>(1, INT32_MAX);
                    break;
                case 1:
                    override_multipliers[i] =
                        &kModelMultipliers[in.ConsumeIntegralInRange<std::size_t>(
                            0, std::size(kModelMultipliers) - 1)];
                    o.multiplier = Multiplier::parse("m", override_multipliers[i]->text);
                    break;
                case 2:
                    o.bypass = true;
                    break;
                default:
                    break;
            }
            if (in.ConsumeBool())
                o.expires_at = now + in.ConsumeIntegralInRange<Micros>(-1, 1);
            overrides[i] = o;
        }
        ListVerdict& lists = requests[i].lists;
        lists.deny = in.ConsumeIntegralInRange<int>(0, 5) == 0;
        if (lists.deny && in.ConsumeBool())
            lists.deny_until = now + in.ConsumeIntegralInRange<Micros>(1, kMaxWindow);
        lists.allow = in.ConsumeIntegralInRange<int>(0, 5) == 0;
        const int calls = in.ConsumeIntegralInRange<int>(0, 4);
        for (int c = 0; c < calls; ++c)
            decide(own, states[i], now - in.ConsumeIntegralInRange<Micros>(0, own.period), 1,
                   Action::kConsume);
        requests[i].rule = &rules[i];
        requests[i].key = "key";
        requests[i].key_override = overrides[i] ? &*overrides[i] : nullptr;
    }

    // Each checked policy's decision, made directly.
    auto decisions_for = [&](const std::vector<std::pair<std::size_t, Limit>>& checked,
                             const std::vector<bool>& enforced, bool* allowed) {
        std::vector<Decision> reported;
        *allowed = true;
        for (std::size_t j = 0; j < checked.size(); ++j) {
            KeyState copy = states[checked[j].first];
            reported.push_back(decide(checked[j].second, copy, now, cost, Action::kPeek));
            *allowed = *allowed && (!enforced[j] || reported.back().allowed);
        }
        for (std::size_t j = 0; j < checked.size(); ++j) {
            if (*allowed && reported[j].allowed) {
                KeyState copy = states[checked[j].first];
                reported[j] = decide(checked[j].second, copy, now, cost, Action::kConsume);
            }
        }
        return reported;
    };

    // The model.
    std::optional<PolicyAnswer> want;  // empty: refused
    {
        PolicyAnswer answer;
        answer.cost = cost;
        answer.outcomes.assign(n, PolicyOutcome::kNone);
        bool allow_listed = false;
        bool invalid_checked = false;
        std::vector<std::pair<std::size_t, Limit>> checked;
        std::vector<bool> enforced;
        bool done = false;
        for (std::size_t i = 0; i < n && !done; ++i) {
            const PolicyRule& pol = rules[i];
            if (requests[i].lists.deny) {
                answer.policy = i;
                answer.limit = pol.limit;
                answer.remaining = 0;
                answer.period = pol.period;
                if (requests[i].lists.deny_until)
                    answer.retry_after = *requests[i].lists.deny_until - now;
                answer.reset_after = answer.retry_after;
                answer.reason = PolicyReason::kDenyList;
                answer.outcomes[i] = PolicyOutcome::kDenied;
                want = answer;
                done = true;
                break;
            }
            const std::optional<KeyOverrideRule>& o = overrides[i];
            const bool has_override = o && (!o->expires_at || *o->expires_at > now);
            if (requests[i].lists.allow || (has_override ? o->bypass : (tier && tier->bypass))) {
                allow_listed = allow_listed || requests[i].lists.allow;
                answer.outcomes[i] = PolicyOutcome::kAllowed;
                continue;
            }
            const ModelMultiplier& m =
                has_override ? (o->multiplier ? *override_multipliers[i] : kModelMultipliers[0])
                             : *tier_multiplier;
            const std::int64_t limit =
                model_multiplied(has_override && o->limit ? *o->limit : pol.limit, m);
            const std::optional<std::int64_t> burst =
                pol.burst ? std::optional<std::int64_t>(model_multiplied(*pol.burst, m))
                          : std::nullopt;
            const Limit effective{pol.algorithm, limit, pol.period, burst.value_or(limit)};
            const bool invalid = Wide(effective.burst) * pol.period > Wide(limit) * kMaxWindow;
            if (cost > (is_bucket(pol.algorithm) ? effective.burst : limit)) {
                done = true;
                if (invalid)
                    break;  // the peek refuses it
                KeyState copy = states[i];
                const Decision d = decide(effective, copy, now, 1, Action::kPeek);
                PolicyAnswer refused_cost;
                refused_cost.cost = cost;
                refused_cost.policy = i;
                refused_cost.limit = d.limit;
                refused_cost.remaining = d.remaining;
                refused_cost.period = pol.period;
                refused_cost.reset_after = d.reset_after;
                refused_cost.reason = PolicyReason::kCostExceedsLimit;
                refused_cost.outcomes.assign(n, PolicyOutcome::kNone);
                refused_cost.outcomes[i] = PolicyOutcome::kDenied;
                want = refused_cost;
                break;
            }
            invalid_checked = invalid_checked || invalid;
            checked.emplace_back(i, effective);
            enforced.push_back(!pol.shadow);
        }
        if (!done && checked.empty()) {
            answer.allowed = true;
            answer.reason = allow_listed ? PolicyReason::kAllowList : PolicyReason::kBypass;
            answer.retry_after = 0;
            answer.reset_after = 0;
            want = answer;
        } else if (!done && !invalid_checked) {
            bool allowed = false;
            std::vector<Decision> d = decisions_for(checked, enforced, &allowed);
            answer.allowed = allowed;
            std::size_t binding = 0;  // counted from 1, 0 is NULL
            for (std::size_t j = 1; j <= checked.size(); ++j) {
                const std::size_t i = checked[j - 1].first;
                if (!d[j - 1].allowed && !enforced[j - 1]) {
                    answer.outcomes[i] = PolicyOutcome::kShadowDenied;
                    answer.shadow_denied.push_back(i);
                } else if (!d[j - 1].allowed) {
                    answer.outcomes[i] = PolicyOutcome::kDenied;
                    if (binding == 0 || d[binding - 1].allowed)
                        binding = j;
                    if (rules[i].count_denied) {
                        answer.blocks.push_back(i);
                        d[j - 1].retry_after = std::max(d[j - 1].retry_after, rules[i].period);
                        d[j - 1].reset_after = std::max(d[j - 1].reset_after, d[j - 1].retry_after);
                    }
                    answer.retry_after = std::max(answer.retry_after.value_or(d[j - 1].retry_after),
                                                  d[j - 1].retry_after);
                } else {
                    answer.outcomes[i] = allowed ? PolicyOutcome::kAllowed : PolicyOutcome::kNone;
                    if (allowed && enforced[j - 1] &&
                        (binding == 0 || d[j - 1].remaining < d[binding - 1].remaining))
                        binding = j;
                }
                if (!d[j - 1].allowed && rules[i].log_denials)
                    answer.logged.emplace_back(i, d[j - 1].retry_after);
            }
            binding = binding == 0 ? 1 : binding;
            answer.policy = checked[binding - 1].first;
            answer.limit = d[binding - 1].limit;
            answer.remaining = d[binding - 1].remaining;
            answer.reset_after = d[binding - 1].reset_after;
            answer.period = checked[binding - 1].second.period;
            answer.retry_after = allowed ? std::optional<Micros>(0) : answer.retry_after;
            answer.reason = allowed ? PolicyReason::kWithinLimits : PolicyReason::kLimited;
            want = answer;
        }
    }

    // The core.
    std::optional<PolicyAnswer> got;
    try {
        const PolicyPlan plan = plan_policies(requests, tier ? &*tier : nullptr, cost, now);
        switch (plan.kind) {
            case PolicyPlan::Kind::kSkipped:
                got = answer_skipped(requests, plan, cost);
                break;
            case PolicyPlan::Kind::kDenyList:
                got = answer_deny_list(requests, plan, cost, now);
                break;
            case PolicyPlan::Kind::kCostExceedsLimit: {
                KeyState copy = states[plan.stop];
                const Decision peek = decide(plan.stop_limit, copy, now, 1, Action::kPeek);
                got = answer_cost_exceeds(requests, plan, peek, cost);
                break;
            }
            case PolicyPlan::Kind::kDecide: {
                std::vector<std::pair<std::size_t, Limit>> checked;
                std::vector<bool> enforced;
                for (const PolicyPlan::Checked& c : plan.checked) {
                    REQUIRE(c.limit.limit >= 1 && c.limit.limit <= INT32_MAX);
                    REQUIRE(c.limit.burst >= 1 && c.limit.burst <= INT32_MAX);
                    REQUIRE(cost_could_be_allowed(c.limit, cost));  // checked in the plan
                    checked.emplace_back(c.request, c.limit);
                    enforced.push_back(c.enforced);
                }
                bool allowed = false;
                const std::vector<Decision> d = decisions_for(checked, enforced, &allowed);
                got = answer_decided(requests, plan, d, allowed, cost);
                break;
            }
        }
    } catch (const ArgumentError& error) {
        REQUIRE(error.kind() == ErrorKind::kInvalidArgument && error.argument() == "p_burst");
    }
    REQUIRE(got.has_value() == want.has_value());
    if (got)
        REQUIRE(same_answer(*got, *want));
}

// A fake engine over plain KeyStates, undone by snapshot, that can be told to fail.
class FakeEngine final : public TierEngine {
  public:
    FakeEngine(bool transactional, const std::vector<int>& keys)
        : transactional_(transactional), keys_(keys) {}

    bool transactional() const override { return transactional_; }
    void decide(TierCall* const* tiers, std::size_t count, Micros now, std::int64_t cost,
                bool charge) override {
        ++decides_;
        if (!open_)
            snapshot_ = states_;
        open_ = transactional_;
        bool group_allows = true;
        for (std::size_t i = 0; i < count; ++i) {
            if (fail_in_ > 0 && --fail_in_ == 0)
                throw std::runtime_error("fake engine failure");
            TierCall& tier = *tiers[i];
            KeyState copy = state(tier);
            tier.before = ratelimit::decide(tier.limit, copy, now, cost, Action::kPeek);
            tier.charged = false;
            group_allows = group_allows && (!tier.enforced || tier.before.allowed);
            if (transactional_ && charge && tier.before.allowed)
                charge_tier(tier, now, cost);
        }
        if (!transactional_ && charge && group_allows) {
            for (std::size_t i = 0; i < count; ++i) {
                if (tiers[i]->before.allowed)
                    charge_tier(*tiers[i], now, cost);
            }
        }
    }
    void undo() override { finish(false); }
    void keep() override { finish(true); }
    void abandon() noexcept override {
        ++abandons_;
        states_ = snapshot_;
        open_ = false;
    }
    void start() { decides_ = finishes_ = abandons_ = 0; }

    std::vector<std::pair<std::pair<int, int>, KeyState>> states_;  // ((engine, key), state)
    int fail_in_ = 0;
    int decides_ = 0;
    int finishes_ = 0;
    int abandons_ = 0;

    KeyState* find(int engine, int key) {
        for (auto& [id, s] : states_) {
            if (id == std::make_pair(engine, key))
                return &s;
        }
        return nullptr;
    }

  private:
    void finish(bool keep) {
        REQUIRE(transactional_ && open_);
        ++finishes_;
        if (!keep)
            states_ = snapshot_;
        open_ = false;
    }
    KeyState state(const TierCall& tier) {
        KeyState* s = find(static_cast<int>(tier.engine), keys_[tier.index]);
        return s != nullptr ? *s : KeyState{};
    }
    void charge_tier(TierCall& tier, Micros now, std::int64_t cost) {
        KeyState* s = find(static_cast<int>(tier.engine), keys_[tier.index]);
        if (s == nullptr) {
            states_.push_back({{static_cast<int>(tier.engine), keys_[tier.index]}, KeyState{}});
            s = &states_.back().second;
        }
        tier.result = ratelimit::decide(tier.limit, *s, now, cost, Action::kConsume);
        tier.charged = true;
    }

    bool transactional_;
    const std::vector<int>& keys_;
    std::vector<std::pair<std::pair<int, int>, KeyState>> snapshot_;
    bool open_ = false;
};

// Several calls of decide_all_or_nothing over fake engines (the table engines sharing one
// object or not), against a model in which a call is one atomic step: a denied call changes
// nothing, an allowed one charges every tier that allows, and a failing engine leaves no charge.
void check_all_or_nothing(FuzzedDataProvider& in, const std::vector<Limit>& limits) {
    std::vector<int> keys;
    FakeEngine table(true, keys);
    FakeEngine unlogged(true, keys);
    FakeEngine memory(false, keys);
    const bool shared = in.ConsumeBool();
    TierEngine* const engines[3] = {&table, shared ? &table : &unlogged, &memory};
    FakeEngine* const fakes[3] = {&table, &unlogged, &memory};
    auto state_of = [&](int engine, int key) {
        FakeEngine& holder = engine == 1 && shared ? table : *fakes[engine];
        const KeyState* s = holder.find(engine, key);
        return s != nullptr ? *s : KeyState{};
    };
    Micros now = in.ConsumeIntegralInRange<Micros>(0, kMaxInstant);
    const int calls = in.ConsumeIntegralInRange<int>(1, 8);
    for (int call = 0; call < calls && in.remaining_bytes() > 0; ++call) {
        now = clamp_instant(Wide(now) + in.ConsumeIntegralInRange<Micros>(-1000, kMicrosPerDay));
        const std::size_t count = in.ConsumeIntegralInRange<std::size_t>(1, 5);
        std::vector<TierCall> tiers(count);
        keys.assign(count, 0);
        std::int64_t most = INT64_MAX;
        for (std::size_t i = 0; i < count; ++i) {
            TierCall& tier = tiers[i];
            tier.index = i;
            tier.engine = static_cast<Engine>(in.ConsumeIntegralInRange<int>(0, 2));
            tier.enforced = in.ConsumeIntegralInRange<int>(0, 4) != 0;
            tier.limit = limits[in.ConsumeIntegralInRange<std::size_t>(0, limits.size() - 1)];
            most = std::min(most, model_allowance(tier.limit));
            int key = in.ConsumeIntegralInRange<int>(0, 5);
            for (std::size_t j = 0; j < i; ++j) {
                if (tiers[j].engine == tier.engine && keys[j] == key) {
                    key = 6 + static_cast<int>(i);  // each key once per engine
                    break;
                }
            }
            keys[i] = key;
        }
        const std::int64_t cost =
            in.ConsumeIntegralInRange<std::int64_t>(0, std::min<std::int64_t>(most, 3));
        std::vector<Decision> before(count);
        bool allowed = true;
        for (std::size_t i = 0; i < count; ++i) {
            KeyState copy = state_of(static_cast<int>(tiers[i].engine), keys[i]);
            before[i] = decide(tiers[i].limit, copy, now, cost, Action::kPeek);
            allowed = allowed && (!tiers[i].enforced || before[i].allowed);
        }
        const int failing = in.ConsumeIntegralInRange<int>(0, 9);
        if (failing < 3)
            fakes[failing]->fail_in_ = in.ConsumeIntegralInRange<int>(1, 3);
        std::vector<KeyState> was(count);
        for (std::size_t i = 0; i < count; ++i)
            was[i] = state_of(static_cast<int>(tiers[i].engine), keys[i]);
        for (FakeEngine* fake : fakes)
            fake->start();
        bool got = false;
        bool threw = false;
        try {
            got = decide_all_or_nothing(tiers, engines, now, cost);
        } catch (const std::runtime_error&) {
            threw = true;
        }
        const bool failed_to_fail = failing < 3 && fakes[failing]->fail_in_ > 0;
        for (FakeEngine* fake : fakes)
            fake->fail_in_ = 0;
        REQUIRE(threw == (failing < 3 && !failed_to_fail));
        REQUIRE(memory.finishes_ == 0 && memory.abandons_ == 0);
        if (threw) {
            // Nothing charged, every transactional engine used abandoned and none finished.
            for (std::size_t i = 0; i < count; ++i)
                REQUIRE(state_of(static_cast<int>(tiers[i].engine), keys[i]) == was[i]);
            for (FakeEngine* fake : {&table, &unlogged})
                REQUIRE(fake->finishes_ == 0 && fake->abandons_ == (fake->decides_ > 0 ? 1 : 0));
            continue;
        }
        REQUIRE(got == allowed);
        for (FakeEngine* fake : {&table, &unlogged})
            REQUIRE(fake->abandons_ == 0 && fake->finishes_ == (fake->decides_ > 0 ? 1 : 0));
        for (std::size_t i = 0; i < count; ++i) {
            REQUIRE(same_decision(tiers[i].before, before[i]));
            REQUIRE(tiers[i].charged == (allowed && before[i].allowed));
            KeyState expected = was[i];
            if (allowed && before[i].allowed) {
                const Decision d = decide(tiers[i].limit, expected, now, cost, Action::kConsume);
                REQUIRE(same_decision(reported_decision(tiers[i], allowed), d));
            } else {
                REQUIRE(same_decision(reported_decision(tiers[i], allowed), before[i]));
            }
            const KeyState stored = state_of(static_cast<int>(tiers[i].engine), keys[i]);
            REQUIRE(stored == expected || (stored.algorithm == Algorithm::kNone &&
                                           expected.algorithm == Algorithm::kNone));
        }
    }
}

// The current bucket limit edited (its N, P or B): the edit applies to the next call, which
// play() then checks like any other. After relaxing (no lower N or B, no longer P than the limit
// that wrote the state), with the clock past every call and no block, no call waits longer than
// the new limit could ever make it (for gcra, when N or P changed: an unconverted debt may
// still hold what a larger burst let in before).
void edit_limit(FuzzedDataProvider& in, std::vector<Limit>& limits, int& current,
                const KeyState& state, int writer, Micros latest, Micros now) {
    const Limit old = limits[current];
    if (!is_bucket(old.algorithm) || limits.size() >= 12)
        return;
    const std::int64_t n = in.ConsumeBool() ? in.ConsumeIntegralInRange<std::int64_t>(1, 16)
                                            : in.ConsumeIntegralInRange<std::int64_t>(1, INT32_MAX);
    const Micros period = in.ConsumeBool() ? old.period : interesting_period(in);
    std::optional<std::int64_t> burst;
    if (in.ConsumeBool())
        burst = in.ConsumeIntegralInRange<std::int64_t>(1, 64);
    try {
        limits.push_back(make_limit(old.algorithm, n, period, burst));
    } catch (const ArgumentError& error) {
        REQUIRE(error.argument() == "p_period" || error.argument() == "p_burst");
        return;
    }
    current = static_cast<int>(limits.size()) - 1;
    const Limit& edited = limits.back();
    if (writer < 0 || state.algorithm != old.algorithm || now < latest || now < state.blocked_until)
        return;
    const Limit& wrote = limits[writer];
    const bool relaxed =
        edited.limit >= wrote.limit && edited.period <= wrote.period && edited.burst >= wrote.burst;
    const bool converted = edited.limit != wrote.limit || edited.period != wrote.period;
    if (!relaxed || (old.algorithm == Algorithm::kGcra && !converted))
        return;
    const std::int64_t cost = in.ConsumeIntegralInRange<std::int64_t>(1, edited.burst);
    const Wide longest = (Wide(edited.burst) * edited.period + edited.limit - 1) / edited.limit;
    REQUIRE(peek(edited, state, now, cost).retry_after <= longest);
    if (Wide(now) + longest <= kMaxInstant)
        REQUIRE(peek(edited, state, now + static_cast<Micros>(longest), cost).allowed);
}

void fuzz(FuzzedDataProvider& in) {
    if (in.ConsumeIntegralInRange<int>(0, 3) == 0)
        check_arguments(in);
    if (in.ConsumeIntegralInRange<int>(0, 3) == 0)
        check_multiplier(in);

    std::vector<Limit> limits;
    limits.reserve(16);  // edited limits are appended during the run
    const int wanted = in.ConsumeIntegralInRange<int>(1, kMaxLimits);
    for (int i = 0; i < wanted && in.remaining_bytes() > 0; ++i) {
        if (std::optional<Limit> limit = read_limit(in))
            limits.push_back(*limit);
    }
    if (limits.empty())
        return;
    switch (in.ConsumeIntegralInRange<int>(0, 5)) {
        case 0:
            check_policy_call(in, limits);
            break;
        case 1:
            check_all_or_nothing(in, limits);
            break;
        default:
            break;
    }

    // Keys of the store: crowded into two partitions, optionally into two bucket chains,
    // each always called with one limit the memory engine accepts.
    StoreHarness& h = harness();
    std::vector<int> memory_limits;
    for (int i = 0; i < static_cast<int>(limits.size()); ++i) {
        try {
            require_memory_limit(limits[i]);
            memory_limits.push_back(i);
        } catch (const ArgumentError& error) {
            REQUIRE(error.argument() == "p_limit" &&
                    limits[i].algorithm == Algorithm::kSlidingWindow &&
                    limits[i].limit > kMemoryLogCapacity);
        }
    }
    std::vector<ModelKey> keys;
    bool restore_at_end = false;
    if (!memory_limits.empty() && in.ConsumeBool()) {
        h.store = MemoryStore::create(h.block.data(), kMinMemoryCapacity, kStoreLogBlocks,
                                      HashSecret{7, 11});
        restore_at_end = in.ConsumeBool();
        const int count = in.ConsumeIntegralInRange<int>(1, kMaxStoreKeys);
        const bool one_chain = in.ConsumeBool();
        const std::uint64_t home = in.ConsumeIntegral<std::uint8_t>();
        for (int k = 0; k < count; ++k) {
            ModelKey key;
            // Seven in eight in the home partition, the others in the next one.
            key.hash.high = home + kMemoryPartitions * static_cast<std::uint64_t>(k) +
                            static_cast<std::uint64_t>(k % 8 == 7);
            key.hash.low = one_chain ? static_cast<std::uint64_t>(k) * 32 + 5 * (k % 2)
                                     : static_cast<std::uint64_t>(k) * 7919;
            key.limit = memory_limits[static_cast<std::size_t>(k) % memory_limits.size()];
            keys.push_back(key);
        }
    }

    std::uint64_t uses = 0;  // the store's clock of use, for its LRU order
    KeyState state;
    int current = 0;
    int writer = -1;     // the limit that last wrote `state`: idle_from reads it with that one
    Micros latest = -1;  // the latest instant a call was played on `state`
    Micros now = in.ConsumeIntegralInRange<Micros>(0, kMaxInstant);
    Decision last;
    for (int op = 0; op < kMaxOperations && in.remaining_bytes() > 0; ++op) {
        const Limit& limit = limits[current];
        switch (in.ConsumeIntegralInRange<int>(0, 10)) {
            case 0:
            case 1:
            case 2: {
                const Action action = static_cast<Action>(in.ConsumeIntegralInRange<int>(0, 2));
                if (const std::optional<std::int64_t> cost = read_cost(in, limit)) {
                    last = play(limit, state, now, *cost, action);
                    latest = std::max(latest, now);
                    if (last.state_changed)
                        writer = current;
                    // A bucket state measured under another limit is converted by idle_from
                    // as by decide.
                    if (writer == current || state.algorithm == Algorithm::kNone ||
                        (is_bucket(limit.algorithm) && state.algorithm == limit.algorithm))
                        check_idle(limit, state, next_instant(in, now, last), *cost);
                }
                break;
            }
            case 3: {
                // A block of 1 microsecond to 365 days from now (as ratelimit.block() allows); an
                // earlier end never shortens it.
                const Micros until =
                    clamp_instant(Wide(now) + in.ConsumeIntegralInRange<Micros>(1, kMaxWindow));
                const Micros previous = state.blocked_until;
                KeyState expected = state;
                expected.blocked_until = std::max(previous, until);
                block_until(state, until);
                REQUIRE(state == expected);
                break;
            }
            case 4:
                now = next_instant(in, now, last);
                break;
            case 5:
                current = in.ConsumeIntegralInRange<int>(0, static_cast<int>(limits.size()) - 1);
                break;
            case 6: {
                if (const std::optional<std::int64_t> cost = read_cost(in, limit))
                    check_monotone(limit, state, now, next_instant(in, now, last), *cost);
                break;
            }
            case 10:
                edit_limit(in, limits, current, state, writer, latest, now);
                break;
            case 9:
                // Without store keys this operation did nothing before; now it plays a long
                // bounded-log history, so that older inputs keep their meaning.
                if (keys.empty()) {
                    check_bounded_log(in, now);
                    break;
                }
                store_call(in, h.store, h.scratch, keys, limits, now, uses);
                break;
            default:
                if (!keys.empty())
                    store_call(in, h.store, h.scratch, keys, limits, now, uses);
                break;
        }
    }
    if (!keys.empty()) {
        REQUIRE(totals(h.store).entries <= kMinMemoryCapacity);
        if (restore_at_end)
            check_restore(h, keys, limits, now);
    }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    FuzzedDataProvider in(data, size);
    try {
        fuzz(in);
    } catch (const ArgumentError& error) {
        // Every expected refusal is caught where it is made; one escaping is a bug.
        std::fprintf(stderr, "decision_fuzzer: unexpected ArgumentError: %s\n", error.what());
        __builtin_trap();
    } catch (const std::exception& error) {
        std::fprintf(stderr, "decision_fuzzer: unexpected exception: %s\n", error.what());
        __builtin_trap();
    }
    return 0;
}
