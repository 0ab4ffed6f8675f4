// Random policy calls for the property tests of the policy rules (policy_test.cpp) and of the
// decision's sequence (policy_decision_test.cpp): rules of every algorithm, overrides, a tier,
// lists, and some history on each key.
#pragma once

#include <algorithm>
#include <cstdint>
#include <iterator>
#include <optional>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "ratelimit/algorithms.hpp"
#include "ratelimit/policy.hpp"

namespace ratelimit {
namespace {

using Wide = __int128;

// 2026-01-01 00:00:00 UTC.
constexpr Micros kT0 = 1767225600LL * kMicrosPerSecond;
std::uint64_t draw(std::mt19937_64& rng, std::uint64_t low, std::uint64_t high) {
    return low + rng() % (high - low + 1);
}

bool is_bucket(Algorithm algorithm) {
    return algorithm == Algorithm::kTokenBucket || algorithm == Algorithm::kGcra;
}

struct Fraction {
    std::int64_t numerator = 1;
    std::int64_t denominator = 1;
};

const std::pair<const char*, Fraction> kMultipliers[] = {
    {"1", {1, 1}},          {"2", {2, 1}},        {"0.5", {1, 2}},        {"1.5", {3, 2}},
    {"0.333", {333, 1000}}, {"0.001", {1, 1000}}, {"1000", {1000, 1}},    {"2.75", {11, 4}},
    {"0.1", {1, 10}},       {"3.3", {33, 10}},    {"0.999", {999, 1000}},
};

// One random call: rules, overrides, tier, lists, and each policy's key state.
struct Scenario {
    std::vector<PolicyRule> rules;
    std::vector<std::optional<KeyOverrideRule>> overrides;
    std::vector<Fraction> override_fractions;
    std::optional<TierRule> tier;
    Fraction tier_fraction;
    std::vector<PolicyRequest> requests;
    std::vector<KeyState> states;  // per request
    std::int64_t cost = 1;
    Micros now = kT0;
};

Scenario draw_scenario(std::mt19937_64& rng) {
    static const Micros kPeriods[] = {kMinPeriod, kMicrosPerSecond, kMicrosPerMinute, kMicrosPerDay,
                                      kMaxWindow};
    static const Algorithm kAlgorithms[] = {
        Algorithm::kFixedWindow,          Algorithm::kRollingWindow, Algorithm::kSlidingWindow,
        Algorithm::kSlidingWindowCounter, Algorithm::kTokenBucket,   Algorithm::kGcra};
    Scenario s;
    s.now = kT0 + static_cast<Micros>(draw(rng, 0, kMicrosPerDay));
    const std::size_t n = draw(rng, 1, 6);
    s.rules.resize(n);
    s.overrides.resize(n);
    s.override_fractions.resize(n);
    s.states.resize(n);
    if (rng() % 3 != 0) {
        const auto& [text, fraction] = kMultipliers[rng() % std::size(kMultipliers)];
        s.tier = TierRule{"tier", Multiplier::parse("m", text), rng() % 8 == 0};
        s.tier_fraction = fraction;
    }
    s.cost = rng() % 8 == 0 ? static_cast<std::int64_t>(draw(rng, 0, 40))
                            : static_cast<std::int64_t>(draw(rng, 0, 2));
    for (std::size_t i = 0; i < n; ++i) {
        PolicyRule& rule = s.rules[i];
        rule.name = "p" + std::to_string(i);
        rule.algorithm = kAlgorithms[rng() % 6];
        rule.limit = static_cast<std::int64_t>(draw(rng, 1, 12));
        rule.period = kPeriods[rng() % std::size(kPeriods)];
        if (is_bucket(rule.algorithm) && rng() % 2) {
            // Within a year's refill as written; an override or multiplier may break it.
            const std::int64_t most = static_cast<std::int64_t>(
                std::min<Wide>(Wide(rule.limit) * kMaxWindow / rule.period, 30));
            rule.burst = static_cast<std::int64_t>(draw(rng, 1, static_cast<std::uint64_t>(most)));
        }
        rule.count_denied = rng() % 4 == 0;
        rule.shadow = rng() % 4 == 0;
        rule.log_denials = rng() % 3 == 0;
        if (rng() % 3 == 0) {
            KeyOverrideRule o;
            switch (rng() % 4) {
                case 0:
                    o.limit = static_cast<std::int64_t>(draw(rng, 1, 12));
                    break;
                case 1: {
                    const auto& [text, fraction] = kMultipliers[rng() % std::size(kMultipliers)];
                    o.multiplier = Multiplier::parse("m", text);
                    s.override_fractions[i] = fraction;
                    break;
                }
                case 2:
                    o.bypass = true;
                    break;
                default:
                    break;
            }
            if (rng() % 3 == 0)
                o.expires_at = s.now + static_cast<Micros>(draw(rng, 0, 2)) - 1;
            s.overrides[i] = o;
        }
        ListVerdict lists;
        if (rng() % 10 == 0) {
            lists.deny = true;
            if (rng() % 3)
                lists.deny_until = s.now + static_cast<Micros>(draw(rng, 1, kMicrosPerDay));
        }
        lists.allow = rng() % 8 == 0;
        // Some history on the key, under the policy's own limit.
        const Limit own{rule.algorithm, rule.limit, rule.period, rule.burst.value_or(rule.limit)};
        const int calls = static_cast<int>(draw(rng, 0, 12));
        for (int c = 0; c < calls; ++c) {
            const Micros at = s.now - static_cast<Micros>(draw(rng, 0, 3 * rule.period));
            decide(own, s.states[i], std::max<Micros>(at, 0), 1, Action::kConsume);
        }
        if (rng() % 10 == 0)
            block_until(s.states[i], s.now + static_cast<Micros>(draw(rng, 1, rule.period)));
        s.requests.push_back(PolicyRequest{nullptr, "key", nullptr, lists});
    }
    for (std::size_t i = 0; i < n; ++i) {
        s.requests[i].rule = &s.rules[i];
        s.requests[i].key_override = s.overrides[i] ? &*s.overrides[i] : nullptr;
    }
    return s;
}

}  // namespace
}  // namespace ratelimit
