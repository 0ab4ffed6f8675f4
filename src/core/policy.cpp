#include "ratelimit/policy.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <stdexcept>
#include <string>
#include <utility>

#include "ratelimit/error.hpp"

namespace ratelimit {
namespace {

constexpr std::int64_t kMaxLimit = 2147483647;

bool is_digit(char c) noexcept {
    return c >= '0' && c <= '9';
}

bool unexpired(const std::optional<Micros>& expires_at, Micros now) noexcept {
    return !expires_at || *expires_at > now;
}

// The outcomes every answer starts from: the requests skipped before the plan ended were let
// through, the others not looked at.
std::vector<PolicyOutcome> skipped_outcomes(const std::vector<PolicyRequest>& requests,
                                            const PolicyPlan& plan) {
    std::vector<PolicyOutcome> outcomes(requests.size(), PolicyOutcome::kNone);
    for (std::size_t index : plan.skipped)
        outcomes.at(index) = PolicyOutcome::kAllowed;
    return outcomes;
}

// effective_limit() without the range check.
Limit unchecked_limit(const PolicyRule& rule, const KeyOverrideRule* key_override,
                      const TierRule* tier, Micros now, bool* bypass) {
    std::int64_t base = rule.limit;
    Multiplier multiplier;
    *bypass = false;
    if (key_override != nullptr && unexpired(key_override->expires_at, now)) {
        // The override wins over the tier, even when it changes nothing itself.
        *bypass = key_override->bypass;
        if (key_override->limit)
            base = *key_override->limit;
        else if (key_override->multiplier)
            multiplier = *key_override->multiplier;
    } else if (tier != nullptr) {
        *bypass = tier->bypass;
        multiplier = tier->multiplier;
    }
    Limit limit;
    limit.algorithm = rule.algorithm;
    limit.period = rule.period;
    limit.window_start = rule.window_start;
    limit.window_end = rule.window_end;
    limit.limit = multiplied_limit(base, multiplier);
    limit.burst = rule.burst ? multiplied_limit(*rule.burst, multiplier) : limit.limit;
    limit.max_delay = rule.max_delay;
    return limit;
}

}  // namespace

// ---- multipliers ----------------------------------------------------------------------------

Multiplier Multiplier::parse(const std::string& argument, std::string_view decimal) {
    const std::size_t point = decimal.find('.');
    const std::string_view whole = decimal.substr(0, point);
    const std::string_view fraction =
        point == std::string_view::npos ? std::string_view() : decimal.substr(point + 1);
    // The forms numeric output prints for a positive value: "2", "1.50", "0.333".
    const bool digits_only = std::all_of(whole.begin(), whole.end(), is_digit) &&
                             std::all_of(fraction.begin(), fraction.end(), is_digit);
    if (whole.empty() || !digits_only || (point != std::string_view::npos && fraction.empty()))
        throw ArgumentError::invalid(argument, "must be a decimal number such as 2 or 1.5 (got \"" +
                                                   std::string(decimal.substr(0, 64)) + "\")");
    Multiplier multiplier;
    const std::size_t first = whole.find_first_not_of('0');
    multiplier.whole_ = first == std::string_view::npos ? "0" : std::string(whole.substr(first));
    const std::size_t last = fraction.find_last_not_of('0');
    multiplier.fraction_ =
        last == std::string_view::npos ? std::string() : std::string(fraction.substr(0, last + 1));
    if (multiplier.whole_ == "0" && multiplier.fraction_.empty())
        throw ArgumentError::invalid(argument, "must be greater than zero");
    return multiplier;
}

std::int64_t Multiplier::apply_floor(std::int64_t value) const noexcept {
    if (value <= 0)
        return 0;  // not a limit; and floor(0 * m) is 0
    // The whole part, saturating: a multiplier that large saturates any positive value anyway.
    std::int64_t whole = 0;
    bool saturated = false;
    for (char digit : whole_) {
        if (__builtin_mul_overflow(whole, 10, &whole) ||
            __builtin_add_overflow(whole, digit - '0', &whole)) {
            saturated = true;
            break;
        }
    }
    std::int64_t product = 0;
    if (saturated || __builtin_mul_overflow(whole, value, &product))
        return INT64_MAX;
    // floor(value * 0.f1...fk), from the last digit back: c = floor((value * f_i + c) / 10).
    // floor((a + floor(x)) / 10) = floor((a + x) / 10) for an integer a, so nesting the floors
    // loses nothing; c stays below value, so value * 9 + c fits.
    std::int64_t carry = 0;
    for (auto digit = fraction_.rbegin(); digit != fraction_.rend(); ++digit)
        carry = (value * (*digit - '0') + carry) / 10;
    std::int64_t total = 0;
    if (__builtin_add_overflow(product, carry, &total))
        return INT64_MAX;
    return total;
}

std::int64_t multiplied_limit(std::int64_t value, const Multiplier& multiplier) noexcept {
    return std::clamp<std::int64_t>(multiplier.apply_floor(value), 1, kMaxLimit);
}

// ---- addresses and lists --------------------------------------------------------------------

IpAddress caller_address(const IpAddress& address) noexcept {
    static const std::uint8_t kMappedPrefix[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
    if (address.family != 6 ||
        std::memcmp(address.bytes.data(), kMappedPrefix, sizeof(kMappedPrefix)) != 0)
        return address;
    IpAddress v4;
    v4.family = 4;
    std::copy(address.bytes.begin() + 12, address.bytes.end(), v4.bytes.begin());
    return v4;
}

bool network_contains(const IpNetwork& network, const IpAddress& address) noexcept {
    if (network.address.family != address.family)
        return false;
    const int width = address.family == 4 ? 32 : 128;
    const int bits = std::clamp(network.prefix_bits, 0, width);
    const int whole_bytes = bits / 8;
    if (std::memcmp(network.address.bytes.data(), address.bytes.data(),
                    static_cast<std::size_t>(whole_bytes)) != 0)
        return false;
    const int rest = bits % 8;
    if (rest == 0)
        return true;
    const auto mask = static_cast<std::uint8_t>(0xff << (8 - rest));
    return (network.address.bytes[whole_bytes] & mask) == (address.bytes[whole_bytes] & mask);
}

ListVerdict match_lists(const std::vector<AccessEntry>& entries, std::string_view policy_name,
                        std::string_view key, const Caller& caller, Micros now) {
    ListVerdict verdict;
    bool denied_for_good = false;
    for (const AccessEntry& entry : entries) {
        if (entry.policy && *entry.policy != policy_name)
            continue;
        if (!unexpired(entry.expires_at, now))
            continue;
        const bool matches = (entry.user && caller.user && *entry.user == *caller.user) ||
                             (entry.key && *entry.key == key) ||
                             (entry.ip && caller.ip && network_contains(*entry.ip, *caller.ip));
        if (!matches)
            continue;
        if (!entry.deny) {
            verdict.allow = true;
            continue;
        }
        verdict.deny = true;
        if (!entry.expires_at)
            denied_for_good = true;
        else if (!verdict.deny_until || *entry.expires_at > *verdict.deny_until)
            verdict.deny_until = entry.expires_at;
    }
    if (denied_for_good)
        verdict.deny_until.reset();
    return verdict;
}

// ---- policies, tiers, overrides ---------------------------------------------------------------

Limit effective_limit(const PolicyRule& rule, const KeyOverrideRule* key_override,
                      const TierRule* tier, Micros now, bool* bypass) {
    bool bypassed = false;
    const Limit limit = unchecked_limit(rule, key_override, tier, now, &bypassed);
    if (bypass != nullptr)
        *bypass = bypassed;
    // Only a multiplied burst against a replaced limit can leave the ranges a policy row was
    // checked against; the error names the scalar argument for the PostgreSQL layer to rename.
    // A bypassed policy is never decided, so never refused.
    if (!bypassed)
        require_valid_limit(limit);
    return limit;
}

const char* reason_name(PolicyReason reason) noexcept {
    switch (reason) {
        case PolicyReason::kLimited:
            return "limited";
        case PolicyReason::kWithinLimits:
            return "within_limits";
        case PolicyReason::kDenyList:
            return "deny_list";
        case PolicyReason::kCostExceedsLimit:
            return "cost_exceeds_limit";
        case PolicyReason::kAllowList:
            return "allow_list";
        case PolicyReason::kBypass:
            return "bypass";
        case PolicyReason::kPenalty:
            return "penalty";
        case PolicyReason::kDelayed:
            return "delayed";
    }
    return "limited";
}

// ---- penalties --------------------------------------------------------------------------------

void require_valid_penalties(const std::string& where, const std::vector<Micros>& blocks,
                             Micros decay) {
    auto refuse = [&](const char* column, const std::string& detail) {
        const std::string message = std::string(column) + " " + detail;
        return ArgumentError(ErrorKind::kInvalidArgument, column,
                             where.empty() ? message : where + " " + message);
    };
    if (blocks.empty() || blocks.size() > kMaxPenaltySteps)
        throw refuse("penalty_blocks", "must have 1 to " + std::to_string(kMaxPenaltySteps) +
                                           " steps (got " + std::to_string(blocks.size()) + ")");
    // As periods are: at least a millisecond, at most 365 days.
    auto require_span = [&](const char* column, Micros span) {
        if (span < kMinPeriod)
            throw refuse(column, "must be at least 1 millisecond");
        if (span > kMaxWindow)
            throw refuse(column, "must be at most 365 days");
    };
    for (const Micros block : blocks)
        require_span("penalty_blocks", block);
    require_span("penalty_decay", decay);
    // The level's counter drains a full ladder in steps x decay, a limit's longest span.
    if (decay > kMaxWindow / static_cast<Micros>(blocks.size()))
        throw refuse("penalty_decay", "times the number of penalty_blocks (" +
                                          std::to_string(blocks.size()) +
                                          ") must be at most 365 days");
}

Limit penalty_counter(const PolicyRule& rule) {
    Limit counter;
    counter.algorithm = Algorithm::kTokenBucket;
    counter.limit = 1;
    counter.period = rule.penalty_decay;
    counter.burst = static_cast<std::int64_t>(rule.penalty_blocks.size());
    return counter;
}

std::int64_t penalty_level(const PolicyRule& rule, const Decision& counter) noexcept {
    const auto steps = static_cast<std::int64_t>(rule.penalty_blocks.size());
    return std::clamp<std::int64_t>(steps - counter.remaining, 0, steps);
}

Micros penalty_block(const PolicyRule& rule, std::int64_t level) noexcept {
    if (rule.penalty_blocks.empty() || level < 1)
        return 0;
    const auto step =
        std::min<std::size_t>(static_cast<std::size_t>(level), rule.penalty_blocks.size());
    return rule.penalty_blocks[step - 1];
}

void apply_penalty(PolicyAnswer& answer, std::int64_t level, Micros block) noexcept {
    if (level < 1 || answer.allowed)
        return;
    answer.reason = PolicyReason::kPenalty;
    answer.penalty_level = std::max(answer.penalty_level.value_or(0), level);
    if (block > 0) {
        answer.retry_after = std::max(answer.retry_after.value_or(block), block);
        answer.reset_after = std::max(answer.reset_after.value_or(block), block);
    }
}

PolicyPlan plan_policies(const std::vector<PolicyRequest>& requests, const TierRule* tier,
                         std::int64_t cost, Micros now) {
    PolicyPlan plan;
    // A limit out of range is refused only once the call gets to decide the limits: a deny
    // entry or an impossible cost further on still answers first.
    std::optional<ArgumentError> refused;
    for (std::size_t i = 0; i < requests.size(); ++i) {
        const PolicyRequest& request = requests[i];
        if (request.lists.deny) {
            plan.kind = PolicyPlan::Kind::kDenyList;
            plan.stop = i;
            plan.deny_until = request.lists.deny_until;
            return plan;
        }
        if (request.lists.allow) {
            plan.allow_listed = true;
            plan.skipped.push_back(i);
            continue;
        }
        bool bypass = false;
        const Limit limit = unchecked_limit(*request.rule, request.key_override,
                                            request_tier(request, tier), now, &bypass);
        std::optional<ArgumentError> invalid;
        if (!bypass) {
            try {
                require_valid_limit(limit);
            } catch (const ArgumentError& error) {
                invalid = error;
                if (!refused)
                    refused = error;
            }
        }
        if (bypass) {
            plan.skipped.push_back(i);
            continue;
        }
        if (cost > allowance(limit)) {
            // Answering needs a peek under this limit, which refuses it as well.
            if (invalid)
                throw *invalid;
            plan.kind = PolicyPlan::Kind::kCostExceedsLimit;
            plan.stop = i;
            plan.stop_limit = limit;
            return plan;
        }
        plan.checked.push_back(PolicyPlan::Checked{i, limit, !request.rule->shadow});
    }
    if (refused)
        throw *refused;
    plan.kind = plan.checked.empty() ? PolicyPlan::Kind::kSkipped : PolicyPlan::Kind::kDecide;
    return plan;
}

PolicyAnswer answer_skipped(const std::vector<PolicyRequest>& requests, const PolicyPlan& plan,
                            std::int64_t cost) {
    PolicyAnswer answer;
    answer.allowed = true;
    answer.retry_after = 0;
    answer.reset_after = 0;
    answer.cost = cost;
    answer.reason = plan.allow_listed ? PolicyReason::kAllowList : PolicyReason::kBypass;
    answer.outcomes = skipped_outcomes(requests, plan);
    return answer;
}

PolicyAnswer answer_deny_list(const std::vector<PolicyRequest>& requests, const PolicyPlan& plan,
                              std::int64_t cost, Micros now) {
    const PolicyRule& rule = *requests.at(plan.stop).rule;
    PolicyAnswer answer;
    answer.allowed = false;
    answer.policy = plan.stop;
    answer.limit = rule.limit;  // as written: the lists come before any tier or override
    answer.remaining = 0;
    answer.period = rule.period;
    if (plan.deny_until)
        answer.retry_after = *plan.deny_until - now;
    answer.reset_after = answer.retry_after;
    answer.cost = cost;
    answer.reason = PolicyReason::kDenyList;
    answer.outcomes = skipped_outcomes(requests, plan);
    answer.outcomes[plan.stop] = PolicyOutcome::kDenied;
    return answer;
}

PolicyAnswer answer_cost_exceeds(const std::vector<PolicyRequest>& requests, const PolicyPlan& plan,
                                 const Decision& peek, std::int64_t cost) {
    PolicyAnswer answer;
    answer.allowed = false;
    answer.policy = plan.stop;
    answer.limit = peek.limit;
    answer.remaining = peek.remaining;
    answer.period = plan.stop_limit.period;
    answer.reset_after = peek.reset_after;
    answer.cost = cost;
    answer.reason = PolicyReason::kCostExceedsLimit;
    // Only the refused policy is counted: the ones skipped before it were never let through.
    answer.outcomes.assign(requests.size(), PolicyOutcome::kNone);
    answer.outcomes.at(plan.stop) = PolicyOutcome::kDenied;
    return answer;
}

bool near_limit(std::int64_t limit, std::int64_t remaining, double ratio) noexcept {
    if (limit <= 0 || !(ratio < 1.0))
        return false;
    const std::int64_t used = limit - std::max<std::int64_t>(remaining, 0);
    const double threshold = std::floor(static_cast<double>(limit) * std::max(ratio, 0.0));
    return static_cast<double>(used) > threshold;
}

PolicyAnswer answer_decided(const std::vector<PolicyRequest>& requests, const PolicyPlan& plan,
                            const std::vector<Decision>& decisions, bool allowed,
                            std::int64_t cost) {
    if (decisions.size() != plan.checked.size() || plan.checked.empty())
        throw std::invalid_argument("ratelimit: one decision per checked policy is needed");
    PolicyAnswer answer;
    answer.allowed = allowed;
    answer.cost = cost;
    answer.outcomes = skipped_outcomes(requests, plan);
    std::vector<Decision> reported = decisions;
    std::optional<std::size_t> binding;  // into plan.checked
    Micros delay = 0;                    // allowed: the longest wait before the call may go
    for (std::size_t j = 0; j < plan.checked.size(); ++j) {
        const PolicyPlan::Checked& checked = plan.checked[j];
        const PolicyRule& rule = *requests.at(checked.request).rule;
        Decision& d = reported[j];
        if (!d.allowed && !checked.enforced) {
            answer.outcomes[checked.request] = PolicyOutcome::kShadowDenied;
            answer.shadow_denied.push_back(checked.request);
        } else if (!d.allowed) {
            answer.outcomes[checked.request] = PolicyOutcome::kDenied;
            if (!binding)
                binding = j;  // the first denying policy
            if (rule.count_denied) {
                // The attempt counts: the key stays denied a full period from now, and the
                // answer's waits say so.
                answer.blocks.push_back(checked.request);
                d.retry_after = std::max(d.retry_after, checked.limit.period);
                d.reset_after = std::max(d.reset_after, d.retry_after);
            }
            answer.retry_after =
                std::max(answer.retry_after.value_or(d.retry_after), d.retry_after);
            if (!rule.penalty_blocks.empty())
                (d.blocked ? answer.penalty_reads : answer.penalized).push_back(checked.request);
        } else {
            // Allowed here; when the call as a whole was denied, nothing was taken.
            answer.outcomes[checked.request] =
                allowed ? PolicyOutcome::kAllowed : PolicyOutcome::kNone;
            if (allowed)
                answer.charged.push_back({checked.request, d.limit, d.remaining});
            // A policy with max_delay may have admitted the call for later: it goes when the
            // last of them has come round.
            if (allowed && checked.enforced)
                delay = std::max(delay, d.retry_after);
            if (allowed && checked.enforced &&
                (!binding || d.remaining < reported[*binding].remaining))
                binding = j;  // the enforced policy with the least remaining
        }
        if (!d.allowed && rule.log_denials)
            answer.logged.emplace_back(checked.request, d.retry_after);
    }
    // Only shadow policies were checked: report the first of them.
    const std::size_t b = binding.value_or(0);
    const Decision& d = reported[b];
    answer.policy = plan.checked[b].request;
    answer.limit = d.limit;
    answer.remaining = d.remaining;
    answer.reset_after = d.reset_after;
    answer.period = plan.checked[b].limit.period;
    if (allowed) {
        answer.retry_after = delay;
        answer.reason = delay > 0 ? PolicyReason::kDelayed : PolicyReason::kWithinLimits;
    } else {
        answer.reason = PolicyReason::kLimited;
    }
    return answer;
}

// ---- all or nothing ---------------------------------------------------------------------------

bool decide_all_or_nothing(std::vector<TierCall>& tiers, TierEngine* const engines[3], Micros now,
                           std::int64_t cost) {
    constexpr Engine kOrder[] = {Engine::kTable, Engine::kUnlogged, Engine::kMemory};
    // Each engine's tiers, in the order given.
    std::vector<TierCall*> groups[3];
    for (TierCall& tier : tiers) {
        const int e = static_cast<int>(tier.engine);
        if (e < 0 || e > 2 || engines[e] == nullptr)
            throw std::invalid_argument("ratelimit: a tier names an engine that is not served");
        tier.charged = false;
        groups[e].push_back(&tier);
    }
    // The transactional engine objects used so far, each once, in the order first used.
    std::vector<TierEngine*> used;
    // Undoes every transactional engine of used[0..count), the last used first; the tiers they
    // had charged are charged no more.
    auto abandon_used = [&](std::size_t count) noexcept {
        for (std::size_t k = count; k-- > 0;)
            used[k]->abandon();
        for (TierCall& tier : tiers) {
            TierEngine* served_by = engines[static_cast<int>(tier.engine)];
            if (std::find(used.begin(), used.begin() + count, served_by) != used.begin() + count)
                tier.charged = false;
        }
    };

    bool allowed = true;  // every enforced tier decided so far allowed
    try {
        for (bool transactional : {true, false}) {
            for (Engine engine : kOrder) {
                const int e = static_cast<int>(engine);
                TierEngine* served_by = engines[e];
                if (groups[e].empty() || served_by->transactional() != transactional)
                    continue;
                if (transactional && std::find(used.begin(), used.end(), served_by) == used.end())
                    used.push_back(served_by);
                // What cannot be undone is charged only once everything before allowed.
                served_by->decide(groups[e].data(), groups[e].size(), now, cost,
                                  transactional || allowed);
                for (const TierCall* tier : groups[e]) {
                    if (tier->enforced && !tier->before.allowed)
                        allowed = false;
                }
            }
        }
    } catch (...) {
        abandon_used(used.size());
        throw;
    }

    for (std::size_t k = used.size(); k-- > 0;) {
        try {
            if (allowed) {
                used[k]->keep();
            } else {
                used[k]->undo();
                for (TierCall& tier : tiers) {
                    if (engines[static_cast<int>(tier.engine)] == used[k])
                        tier.charged = false;
                }
            }
        } catch (...) {
            abandon_used(k + 1);
            throw;
        }
    }
    return allowed;
}

}  // namespace ratelimit
