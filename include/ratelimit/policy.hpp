// Deciding by policy, in the core: what a policy call checks (lists, then the key's override,
// then the caller's tier, multipliers rounded down), how several limits are decided as one
// (all or nothing), and what the answer says (the deciding policy, its reason and waits, shadow
// denials, count_denied blocks, outcomes for the counters). The PostgreSQL layer only finds the
// rows (src/pg/policies/policy_cache.cpp), hashes subjects and moves states to and from the
// engines.
//
// The rules, each written once here:
//  - Lists: a matching deny entry denies the call and charges nothing; deny wins over allow; a
//    matching allow entry skips that policy (counted as allowed). An entry matches when it is
//    for this policy or for every policy, has not expired, and names the caller's user, the
//    subject as given, or an IP range holding the caller's address.
//  - A key's unexpired override wins over the caller's tier: its bypass, its limit, or its
//    multiplier (an override with none of them undoes the tier). Without one, the tier's bypass
//    or multiplier applies.
//  - Multiplied limits and bursts are rounded down, never below 1 nor above 2^31 - 1.
//  - A cost the policy could never allow (above its limit, or its burst for the bucket
//    algorithms) is a denial (cost_exceeds_limit), not an error: a caller that fails open on
//    errors must not get an oversize batch through.
//  - Policies are looked at in the order given; the first deny-list entry or impossible cost
//    ends the call. The remaining limits are decided as one (decide_all_or_nothing): if any
//    enforced limit denies, none is charged. Shadow limits are charged when they allow and
//    only reported when they deny.
//  - The answer names the first denying policy in the order given, else the enforced policy
//    with the least remaining (the first of them on a tie), else the first checked. Its wait is
//    the longest among the denying policies; count_denied makes a denied key wait a full
//    period from now.
//  - Escalating penalties (penalty_blocks): a denial of an enforced policy by its limit earns
//    the key a penalty. Its level rises by one per penalty and drains by one per penalty_decay
//    (a token bucket of one unit per decay, as deep as there are steps, charged past empty so
//    that offences at the top keep it there); the key is blocked for the step of the level it
//    reached, the last step for every level past the end. A denial while the key is blocked
//    earns nothing more: it reports the level it is under. Either way the answer's reason is
//    'penalty' and its waits last at least until the block ends.
//  - Delay (max_delay, the bucket algorithms): a policy that admits the call for a later
//    instant counts as allowing it; an allowed answer's retry_after is the longest delay among
//    the enforced policies (reason 'delayed'), 0 when none delayed.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "ratelimit/algorithms.hpp"
#include "ratelimit/engine.hpp"
#include "ratelimit/time.hpp"

namespace ratelimit {

// ---- multipliers ----------------------------------------------------------------------------

// A positive decimal multiplier, kept as its exact digits ("1.5", "2", "0.333"), so that a
// multiplied limit is exactly floor(limit * multiplier) whatever the number of digits.
class Multiplier {
  public:
    Multiplier() = default;  // one
    // Throws ArgumentError (22023, naming `argument`) unless `decimal` is digits with an
    // optional fraction ("12", "1.50") and its value is greater than 0.
    static Multiplier parse(const std::string& argument, std::string_view decimal);

    // floor(value * multiplier), for 0 <= value <= 2^31 - 1; saturates at INT64_MAX.
    std::int64_t apply_floor(std::int64_t value) const noexcept;

    bool operator==(const Multiplier& other) const noexcept {
        return whole_ == other.whole_ && fraction_ == other.fraction_;
    }

  private:
    std::string whole_ = "1";  // digits, no leading zeros ("0" allowed)
    std::string fraction_;     // digits, no trailing zeros
};

// A limit or burst after a multiplier: floor(value * multiplier), clamped to [1, 2^31 - 1].
std::int64_t multiplied_limit(std::int64_t value, const Multiplier& multiplier) noexcept;

// ---- addresses and lists --------------------------------------------------------------------

// An IP address: IPv4 in bytes[0..3] (family 4) or IPv6 (family 6).
struct IpAddress {
    int family = 4;
    std::array<std::uint8_t, 16> bytes{};

    bool operator==(const IpAddress& other) const noexcept {
        return family == other.family && bytes == other.bytes;
    }
};

// The caller's address as it is matched: an IPv4-mapped IPv6 address (::ffff:a.b.c.d) is the
// IPv4 address it carries. (A netmask on the caller's address never widens what it matches:
// the PostgreSQL layer passes the address only.)
IpAddress caller_address(const IpAddress& address) noexcept;

// An IP range (cidr): `prefix_bits` leading bits of `address` (0..32 for IPv4, 0..128 IPv6).
struct IpNetwork {
    IpAddress address;
    int prefix_bits = 32;
};

// True if `address` lies in `network` (same family, same leading prefix_bits bits).
bool network_contains(const IpNetwork& network, const IpAddress& address) noexcept;

using Uuid = std::array<std::uint8_t, 16>;

// A row of ratelimit.access_list. Exactly one of user, key and ip is set (the table checks).
struct AccessEntry {
    bool deny = false;                  // false: allow
    std::optional<std::string> policy;  // empty: every policy
    std::optional<Uuid> user;
    std::optional<std::string> key;
    std::optional<IpNetwork> ip;
    std::optional<Micros> expires_at;  // empty: until removed
};

// Who is calling, as the lists see it.
struct Caller {
    std::optional<Uuid> user;
    std::optional<IpAddress> ip;  // already caller_address()
};

// What the lists say of one policy for one subject.
struct ListVerdict {
    bool deny = false;
    bool allow = false;
    // When deny: the latest end among the matching deny entries; empty when one of them has no
    // end (denied for good: no retry time).
    std::optional<Micros> deny_until;
};

// Looks at every entry of `entries` (in any order) for `policy_name`, `key` and `caller` at `now`.
ListVerdict match_lists(const std::vector<AccessEntry>& entries, std::string_view policy_name,
                        std::string_view key, const Caller& caller, Micros now);

// ---- policies, tiers, overrides ---------------------------------------------------------------

// A row of ratelimit.policies.
struct PolicyRule {
    std::string name;
    Algorithm algorithm = Algorithm::kFixedWindow;
    std::int64_t limit = 1;
    Micros period = 0;
    // A calendar period's window holding now (Limit::window_start, window_end), set by the
    // caller for each call; period is then its length. 0 and 0: windows aligned to the epoch.
    Micros window_start = 0;
    Micros window_end = 0;
    std::optional<std::int64_t> burst;  // as written (before any multiplier); empty: = limit
    Engine engine = Engine::kTable;
    bool count_denied = false;
    bool shadow = false;
    bool hash_key = false;
    bool log_denials = false;
    // Escalating penalties: the block after the key's 1st, 2nd, ... penalty, the last one for
    // every penalty after (1 to kMaxPenaltySteps steps); empty: no penalties.
    std::vector<Micros> penalty_blocks;
    Micros penalty_decay = 0;  // the level drains by one per penalty_decay
    // Delay instead of deny (token_bucket and gcra; Limit::max_delay): 0 never delays.
    Micros max_delay = 0;
    // quota_unit 'concurrent-requests': a limit of units in flight, decided by leases only.
    bool concurrency = false;
};

// The most steps a policy's penalties have.
constexpr std::size_t kMaxPenaltySteps = 16;

// Throws ArgumentError (22023) naming penalty_blocks or penalty_decay, its message after
// `where` (a row's name; may be empty), unless `blocks` (1 to kMaxPenaltySteps steps, each
// kMinPeriod..kMaxWindow) and `decay` (kMinPeriod..kMaxWindow, and steps x decay at most
// kMaxWindow, so that the level's counter is a valid limit) make a penalty ladder.
void require_valid_penalties(const std::string& where, const std::vector<Micros>& blocks,
                             Micros decay);

// The counter that keeps a key's penalty level under `rule`: a token bucket of one unit per
// penalty_decay, as deep as the ladder has steps. A penalty charges it one unit; the level is
// what it lacks of full.
Limit penalty_counter(const PolicyRule& rule);

// The level the counter's decision (a charge's, or a one-unit peek's) says: 0 to the steps.
std::int64_t penalty_level(const PolicyRule& rule, const Decision& counter) noexcept;

// The block of a penalty that reached `level` (1 or more): its step, the last past the end.
Micros penalty_block(const PolicyRule& rule, std::int64_t level) noexcept;

// A row of ratelimit.tiers.
struct TierRule {
    std::string name;
    Multiplier multiplier;
    bool bypass = false;
};

// A row of ratelimit.key_overrides (for one policy and one key).
struct KeyOverrideRule {
    std::optional<std::int64_t> limit;
    std::optional<Multiplier> multiplier;
    bool bypass = false;
    std::optional<Micros> expires_at;  // empty: until removed
};

// One policy of a call: the rule, the subject as the caller gave it (lists and overrides match
// it), and what the PostgreSQL layer found for it.
struct PolicyRequest {
    const PolicyRule* rule = nullptr;
    std::string_view key;
    const KeyOverrideRule* key_override = nullptr;  // the row for (policy, key), expired or not
    ListVerdict lists;
    // A policy with a tier lookup decides with the tier its lookup gave for the key (null: no
    // tier), never with the call's: the caller cannot choose it.
    bool tier_looked_up = false;
    const TierRule* looked_up_tier = nullptr;
};

// The tier `request` decides with: its lookup's, or else the call's `tier`.
inline const TierRule* request_tier(const PolicyRequest& request, const TierRule* tier) noexcept {
    return request.tier_looked_up ? request.looked_up_tier : tier;
}

// The effective limit of `rule` under `key_override` (if it applies at `now`) or else `tier`
// (either may be null): multipliers on limit and burst, rounded down, within [1, 2^31 - 1].
// `bypass` is set when the override or the tier bypasses the policy.
Limit effective_limit(const PolicyRule& rule, const KeyOverrideRule* key_override,
                      const TierRule* tier, Micros now, bool* bypass);

// How the call ended for one policy, for the per-policy counters. kNone: not counted (the call
// ended before this policy was looked at, or the call was denied elsewhere and this policy was
// not charged).
enum class PolicyOutcome { kNone, kAllowed, kDenied, kShadowDenied };

// 'limited', 'within_limits', 'deny_list', 'cost_exceeds_limit', 'allow_list', 'bypass',
// 'penalty', 'delayed' (allowed, to go after retry_after: max_delay).
enum class PolicyReason {
    kLimited,
    kWithinLimits,
    kDenyList,
    kCostExceedsLimit,
    kAllowList,
    kBypass,
    kPenalty,
    kDelayed
};
const char* reason_name(PolicyReason reason) noexcept;

// What is decided after the lists, overrides and tiers, before any key is touched.
struct PolicyPlan {
    enum class Kind {
        kDecide,            // `checked` are decided as one
        kSkipped,           // nothing to check: every policy allow-listed or bypassed
        kDenyList,          // requests[stop] is denied by a list
        kCostExceedsLimit,  // requests[stop] could never allow the cost: peek it for the answer
    };
    Kind kind = Kind::kDecide;
    std::size_t stop = 0;
    std::optional<Micros> deny_until;  // kDenyList: see ListVerdict
    Limit stop_limit;                  // kCostExceedsLimit: the effective limit to peek
    bool allow_listed = false;         // some policy was skipped by an allow entry
    struct Checked {
        std::size_t request = 0;  // index into the requests
        Limit limit;              // effective
        bool enforced = true;     // false: shadow
    };
    std::vector<Checked> checked;  // in the order given
    // The requests looked at before the plan ended, skipped by a list, override or tier:
    // counted as allowed.
    std::vector<std::size_t> skipped;
};

// Builds the plan for `requests` (in the caller's order) under `tier` (may be null).
PolicyPlan plan_policies(const std::vector<PolicyRequest>& requests, const TierRule* tier,
                         std::int64_t cost, Micros now);

// The answer of a policy call (ratelimit.policy_decision).
struct PolicyAnswer {
    bool allowed = false;
    std::optional<std::size_t> policy;  // index into the requests; empty when none was checked
    std::optional<std::int64_t> limit;  // empty when no limit was checked
    std::optional<std::int64_t> remaining;
    std::optional<Micros> retry_after;  // empty when no wait will do
    std::optional<Micros> reset_after;
    std::optional<Micros> period;
    std::int64_t cost = 0;
    PolicyReason reason = PolicyReason::kWithinLimits;
    std::vector<std::size_t> shadow_denied;  // indices into the requests, in the order given
    // The penalty level the denial is under (the highest among its penalized policies); empty
    // unless the answer's reason is 'penalty'.
    std::optional<std::int64_t> penalty_level;

    // For the PostgreSQL layer to carry out:
    std::vector<PolicyOutcome> outcomes;  // one per request
    std::vector<std::size_t> blocks;      // count_denied requests to block for a full period
    // Requests of policies with penalties denied by their limit: each earns a penalty (charge
    // its counter, block the key: apply_penalty). Those denied while blocked: read their level
    // (a one-unit peek of the counter: apply_penalty with no block).
    std::vector<std::size_t> penalized;
    std::vector<std::size_t> penalty_reads;
    // Requests whose denial (enforced or shadow) goes to the denial log (log_denials), with the
    // wait to log (after count_denied): pairs of (request, retry_after).
    std::vector<std::pair<std::size_t, Micros>> logged;
    // Requests charged by an allowed call, with the limit and what remained after the charge:
    // (request, limit, remaining), for the near-limit counter.
    struct Charged {
        std::size_t request = 0;
        std::int64_t limit = 0;
        std::int64_t remaining = 0;
    };
    std::vector<Charged> charged;
    // A decided plan's decision for each of plan.checked, in its order (after the charge when
    // allowed, as the key stands when denied): what the HTTP fields report of every policy.
    std::vector<Decision> checked;
};

// Whether an allowed charge left its key near the limit: more than floor(limit x ratio) of the
// limit used (ratelimit.near_limit_ratio; 0 counts every charge, 1 none).
bool near_limit(std::int64_t limit, std::int64_t remaining, double ratio) noexcept;

// The answers for each kind of plan. `decisions[i]` is plan.checked[i]'s decision as returned
// by decide_all_or_nothing (after the charge when allowed, as the key stands when denied).
PolicyAnswer answer_skipped(const std::vector<PolicyRequest>& requests, const PolicyPlan& plan,
                            std::int64_t cost);
PolicyAnswer answer_deny_list(const std::vector<PolicyRequest>& requests, const PolicyPlan& plan,
                              std::int64_t cost, Micros now);
PolicyAnswer answer_cost_exceeds(const std::vector<PolicyRequest>& requests, const PolicyPlan& plan,
                                 const Decision& peek, std::int64_t cost);
PolicyAnswer answer_decided(const std::vector<PolicyRequest>& requests, const PolicyPlan& plan,
                            const std::vector<Decision>& decisions, bool allowed,
                            std::int64_t cost);

// Reports a penalty of `request` at `level` in `answer` (the PostgreSQL layer read or charged
// its counter): reason 'penalty' when the level is 1 or more, the highest level, and waits of
// at least `block` (the block it set from now; 0 when it only read the level).
void apply_penalty(PolicyAnswer& answer, std::int64_t level, Micros block) noexcept;

// ---- all or nothing ---------------------------------------------------------------------------

// One limit of an all-or-nothing decision. `key` is the engine's business (the PostgreSQL
// layer's text datum, a test's string); the core only orders and reports.
struct TierCall {
    std::size_t index = 0;  // position in the caller's list
    Engine engine = Engine::kTable;
    Limit limit;
    bool enforced = true;
    Decision before;  // the key as it stands, before this call charges anything
    Decision result;  // what the call did to it, when `charged`
    bool charged = false;
};

// One engine's side of an all-or-nothing decision. One object may serve several engines (the
// two table engines share one subtransaction): undo, keep and abandon are called once per
// distinct object, the last used first.
class TierEngine {
  public:
    virtual ~TierEngine() = default;
    // Undone on a denial (a subtransaction) rather than decided under locks held together.
    virtual bool transactional() const = 0;
    // Decides each of `tiers` (all on this engine, in the order given): fills `before`, and
    // when `charge` is true and the tier allows, charges it (`result`, `charged`). A
    // non-transactional engine decides the group atomically and charges only if every enforced
    // tier of the group allows.
    virtual void decide(TierCall* const* tiers, std::size_t count, Micros now, std::int64_t cost,
                        bool charge) = 0;
    // Undoes every charge made by decide() in this decision (transactional engines).
    virtual void undo() = 0;
    // Keeps them (transactional engines).
    virtual void keep() = 0;
    // After an error anywhere in the decision: undo without raising (transactional engines).
    virtual void abandon() noexcept = 0;
};

// Decides `tiers` as one. The transactional engines' tiers go first (table, then unlogged;
// each engine's tiers in the order given: the caller sorts them by key, so that two calls take
// their rows in the same order and cannot deadlock), then the others, which are charged only if
// everything before allowed. If any enforced tier denies, every charge is undone and false is
// returned. `engines[static_cast<int>(engine)]` serves each engine a tier uses. An exception
// from an engine abandons every transactional engine used, then travels on.
bool decide_all_or_nothing(std::vector<TierCall>& tiers, TierEngine* const engines[3], Micros now,
                           std::int64_t cost);

// The decision to report for a tier after decide_all_or_nothing returned `allowed`.
inline const Decision& reported_decision(const TierCall& tier, bool allowed) noexcept {
    return allowed && tier.charged ? tier.result : tier.before;
}

}  // namespace ratelimit
