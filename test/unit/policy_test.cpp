// Deciding by policy (ratelimit/policy.hpp) against simple models: multipliers against exact
// digit-string arithmetic, lists and overrides by their precedence, plans and answers against a
// transliteration of the plpgsql decide_policies they replace, and decide_all_or_nothing over
// fake engines (plain maps of KeyStates, undone by snapshot) against a model of one atomic call.
#include "ratelimit/policy.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <random>
#include <sstream>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "policy_scenarios.hpp"
#include "ratelimit/error.hpp"

namespace ratelimit {
namespace {

constexpr std::int64_t kMaxLimit = 2147483647;

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

// ---- multipliers: exact, against digit strings --------------------------------------------------

// Unsigned decimal digit strings, without leading zeros ("0" for zero).
std::string strip_zeros(const std::string& digits) {
    const std::size_t first = digits.find_first_not_of('0');
    return first == std::string::npos ? "0" : digits.substr(first);
}

std::string times(const std::string& digits, std::int64_t factor) {
    std::string out;
    Wide carry = 0;
    for (auto it = digits.rbegin(); it != digits.rend(); ++it) {
        const Wide product = Wide(*it - '0') * factor + carry;
        out.push_back(static_cast<char>('0' + static_cast<int>(product % 10)));
        carry = product / 10;
    }
    while (carry > 0) {
        out.push_back(static_cast<char>('0' + static_cast<int>(carry % 10)));
        carry /= 10;
    }
    std::reverse(out.begin(), out.end());
    return strip_zeros(out);
}

// a < b, for digit strings.
bool less(const std::string& a, const std::string& b) {
    const std::string x = strip_zeros(a);
    const std::string y = strip_zeros(b);
    return x.size() != y.size() ? x.size() < y.size() : x < y;
}

std::string random_digits(std::mt19937_64& rng, std::size_t count) {
    std::string digits;
    for (std::size_t i = 0; i < count; ++i)
        digits.push_back(static_cast<char>('0' + rng() % 10));
    return digits;
}

TEST(PolicyMultiplier, ParsesWhatNumericPrintsAndNormalises) {
    EXPECT_EQ(Multiplier::parse("m", "2"), Multiplier::parse("m", "2.000"));
    EXPECT_EQ(Multiplier::parse("m", "1.5"), Multiplier::parse("m", "001.50"));
    EXPECT_EQ(Multiplier::parse("m", "1"), Multiplier());
    EXPECT_EQ(Multiplier::parse("m", "0.333333333333333333333333").apply_floor(3), 0);
    EXPECT_EQ(Multiplier::parse("m", "0.333333333333333333333333").apply_floor(4), 1);
    EXPECT_FALSE(Multiplier::parse("m", "1.5") == Multiplier::parse("m", "1.05"));
    for (const char* bad : {"", "0", "0.0", "000.000", ".5", "5.", "-1", "+1", "1e3", "1,5", " 1",
                            "1 ", "NaN", "Infinity", "1.2.3", "0x10", "1..5"}) {
        SCOPED_TRACE(bad);
        expect_argument_error([&] { Multiplier::parse("p_multiplier", bad); }, "p_multiplier");
    }
}

// Short multipliers against exact rational arithmetic: m = digits / 10^k.
TEST(PolicyMultiplier, ShortDecimalsAreExact) {
    std::mt19937_64 rng(301);
    for (int i = 0; i < 200000; ++i) {
        const std::int64_t whole = static_cast<std::int64_t>(draw(rng, 0, 1000));
        const int places = static_cast<int>(draw(rng, 0, 4));
        std::int64_t scale = 1;
        for (int p = 0; p < places; ++p)
            scale *= 10;
        const std::int64_t fraction = places == 0 ? 0 : static_cast<std::int64_t>(rng() % scale);
        if (whole == 0 && fraction == 0)
            continue;
        std::string text = std::to_string(whole);
        if (places > 0) {
            std::string digits = std::to_string(fraction);
            text +=
                "." + std::string(static_cast<std::size_t>(places) - digits.size(), '0') + digits;
        }
        const Multiplier m = Multiplier::parse("m", text);
        const std::int64_t value = rng() % 4 == 0 ? static_cast<std::int64_t>(draw(rng, 0, 20))
                                                  : static_cast<std::int64_t>(rng() % kMaxLimit);
        const Wide exact = Wide(value) * (Wide(whole) * scale + fraction) / scale;
        ASSERT_EQ(m.apply_floor(value), static_cast<std::int64_t>(exact)) << text << " * " << value;
        const std::int64_t clamped =
            std::clamp<std::int64_t>(static_cast<std::int64_t>(exact), 1, kMaxLimit);
        ASSERT_EQ(multiplied_limit(value, m), clamped) << text << " * " << value;
    }
}

// Long fractions: floor(v * m) <= v * m < floor(v * m) + 1, checked on digit strings. With
// m = W + F / 10^k: r = result - v*W must satisfy r * 10^k <= v * F < (r + 1) * 10^k.
TEST(PolicyMultiplier, LongFractionsAreExact) {
    std::mt19937_64 rng(302);
    for (int i = 0; i < 20000; ++i) {
        const std::int64_t whole = static_cast<std::int64_t>(draw(rng, 0, 999));
        std::string fraction = random_digits(rng, draw(rng, 1, 60));
        if (rng() % 4 == 0)
            fraction = std::string(draw(rng, 1, 40), rng() % 2 ? '9' : '3');
        const std::string text = std::to_string(whole) + "." + fraction;
        if (whole == 0 && fraction.find_first_not_of('0') == std::string::npos)
            continue;
        const Multiplier m = Multiplier::parse("m", text);
        const std::int64_t value = rng() % 4 == 0 ? static_cast<std::int64_t>(draw(rng, 0, 20))
                                                  : static_cast<std::int64_t>(rng() % kMaxLimit);
        const std::int64_t got = m.apply_floor(value);
        const Wide r = Wide(got) - Wide(whole) * value;
        ASSERT_GE(r, 0) << text << " * " << value;
        ASSERT_LE(r, value) << text << " * " << value;
        const std::string scaled =
            std::to_string(static_cast<std::int64_t>(r)) + std::string(fraction.size(), '0');
        const std::string next =
            std::to_string(static_cast<std::int64_t>(r) + 1) + std::string(fraction.size(), '0');
        const std::string product = times(fraction, value);
        ASSERT_FALSE(less(product, scaled)) << text << " * " << value << " = " << got;
        ASSERT_TRUE(less(product, next)) << text << " * " << value << " = " << got;
    }
}

TEST(PolicyMultiplier, SaturatesAndClamps) {
    const Multiplier huge = Multiplier::parse("m", "123456789012345678901234567890.5");
    EXPECT_EQ(huge.apply_floor(0), 0);
    EXPECT_EQ(huge.apply_floor(1), INT64_MAX);
    EXPECT_EQ(multiplied_limit(1, huge), kMaxLimit);
    EXPECT_EQ(Multiplier::parse("m", "1000").apply_floor(kMaxLimit), 1000 * kMaxLimit);
    EXPECT_EQ(multiplied_limit(kMaxLimit, Multiplier::parse("m", "1000")), kMaxLimit);
    EXPECT_EQ(multiplied_limit(1, Multiplier::parse("m", "0.001")), 1);
    EXPECT_EQ(multiplied_limit(999, Multiplier::parse("m", "0.001")), 1);
    EXPECT_EQ(multiplied_limit(2000, Multiplier::parse("m", "0.001")), 2);
    EXPECT_EQ(multiplied_limit(10, Multiplier::parse("m", "0.15")), 1);
    EXPECT_EQ(multiplied_limit(10, Multiplier::parse("m", "1.5")), 15);
}

// ---- addresses ----------------------------------------------------------------------------------

IpAddress v4(std::uint8_t a, std::uint8_t b, std::uint8_t c, std::uint8_t d) {
    IpAddress address;
    address.bytes[0] = a;
    address.bytes[1] = b;
    address.bytes[2] = c;
    address.bytes[3] = d;
    return address;
}

TEST(PolicyAddresses, MappedIpv6IsItsIpv4Address) {
    IpAddress mapped;
    mapped.family = 6;
    mapped.bytes[10] = mapped.bytes[11] = 0xff;
    mapped.bytes[12] = 192;
    mapped.bytes[13] = 0;
    mapped.bytes[14] = 2;
    mapped.bytes[15] = 7;
    EXPECT_EQ(caller_address(mapped), v4(192, 0, 2, 7));
    IpAddress other = mapped;
    other.bytes[9] = 1;  // not ::ffff:0:0/96
    EXPECT_EQ(caller_address(other), other);
    EXPECT_EQ(caller_address(v4(10, 0, 0, 1)), v4(10, 0, 0, 1));
}

TEST(PolicyAddresses, NetworkContainsComparesTheLeadingBits) {
    std::mt19937_64 rng(303);
    for (int i = 0; i < 100000; ++i) {
        IpAddress a;
        IpAddress b;
        a.family = rng() % 2 ? 4 : 6;
        b.family = rng() % 8 == 0 ? 10 - a.family : a.family;
        const int width = a.family == 4 ? 32 : 128;
        for (int k = 0; k < width / 8; ++k)
            a.bytes[k] = static_cast<std::uint8_t>(rng());
        b.bytes = a.bytes;
        const int prefix = static_cast<int>(draw(rng, 0, static_cast<std::uint64_t>(width)));
        if (rng() % 2) {
            const int bit = static_cast<int>(rng() % width);  // flip one bit
            b.bytes[bit / 8] ^= static_cast<std::uint8_t>(0x80 >> (bit % 8));
        }
        bool same = a.family == b.family;
        for (int bit = 0; same && bit < prefix; ++bit) {
            const int mask = 0x80 >> (bit % 8);
            same = (a.bytes[bit / 8] & mask) == (b.bytes[bit / 8] & mask);
        }
        ASSERT_EQ(network_contains(IpNetwork{a, prefix}, b), same) << "prefix " << prefix;
    }
}

// ---- lists --------------------------------------------------------------------------------------

Uuid uuid(std::uint8_t n) {
    Uuid id{};
    id[15] = n;
    return id;
}

TEST(PolicyLists, DenyWinsOverAllowAndExpiredEntriesAreGone) {
    Caller caller{uuid(1), v4(10, 1, 2, 3)};
    AccessEntry allow_user;
    allow_user.user = uuid(1);
    AccessEntry deny_key;
    deny_key.deny = true;
    deny_key.key = "k";
    deny_key.expires_at = kT0 + 10;

    ListVerdict v = match_lists({allow_user, deny_key}, "p", "k", caller, kT0);
    EXPECT_TRUE(v.deny);
    EXPECT_TRUE(v.allow);
    EXPECT_EQ(v.deny_until, std::optional<Micros>(kT0 + 10));
    // Expired at its own instant.
    v = match_lists({allow_user, deny_key}, "p", "k", caller, kT0 + 10);
    EXPECT_FALSE(v.deny);
    EXPECT_TRUE(v.allow);
    // Another policy's entry; a key compared byte for byte.
    deny_key.policy = "other";
    EXPECT_FALSE(match_lists({deny_key}, "p", "k", caller, kT0).deny);
    EXPECT_TRUE(match_lists({deny_key}, "other", "k", caller, kT0).deny);
    EXPECT_FALSE(match_lists({deny_key}, "other", "K", caller, kT0).deny);
    EXPECT_FALSE(match_lists({deny_key}, "other", "k ", caller, kT0).deny);
    // A deny without an end denies for good, whatever the others say.
    AccessEntry deny_net;
    deny_net.deny = true;
    deny_net.ip = IpNetwork{v4(10, 0, 0, 0), 8};
    deny_key.policy.reset();
    v = match_lists({deny_key, deny_net}, "p", "k", caller, kT0);
    EXPECT_TRUE(v.deny);
    EXPECT_FALSE(v.deny_until);
    // No caller address, no user: only the key can match.
    v = match_lists({deny_net, allow_user}, "p", "k", Caller{}, kT0);
    EXPECT_FALSE(v.deny);
    EXPECT_FALSE(v.allow);
}

// Random lists against a model written as the SQL query is: filter, then aggregate.
TEST(PolicyLists, RandomListsAgreeWithTheQuery) {
    std::mt19937_64 rng(304);
    const char* policies[] = {"a", "b"};
    const char* keys[] = {"k1", "k2", "k1 "};
    for (int i = 0; i < 50000; ++i) {
        std::vector<AccessEntry> entries(draw(rng, 0, 6));
        for (AccessEntry& e : entries) {
            e.deny = rng() % 2;
            if (rng() % 2)
                e.policy = policies[rng() % 2];
            switch (rng() % 3) {
                case 0:
                    e.user = uuid(static_cast<std::uint8_t>(draw(rng, 1, 3)));
                    break;
                case 1:
                    e.key = keys[rng() % 3];
                    break;
                default:
                    e.ip = IpNetwork{v4(10, static_cast<std::uint8_t>(rng() % 2), 0, 0),
                                     static_cast<int>(draw(rng, 8, 32))};
            }
            if (rng() % 2)
                e.expires_at = kT0 + static_cast<Micros>(draw(rng, 0, 4)) - 2;
        }
        Caller caller;
        if (rng() % 4)
            caller.user = uuid(static_cast<std::uint8_t>(draw(rng, 1, 3)));
        if (rng() % 4)
            caller.ip = v4(10, static_cast<std::uint8_t>(rng() % 2), 0,
                           static_cast<std::uint8_t>(rng() % 3));
        const std::string policy = policies[rng() % 2];
        const std::string key = keys[rng() % 3];

        std::vector<const AccessEntry*> matching;
        for (const AccessEntry& e : entries) {
            const bool for_policy = !e.policy || *e.policy == policy;
            const bool live = !e.expires_at || *e.expires_at > kT0;
            bool names = false;
            if (e.user)
                names = caller.user && *caller.user == *e.user;
            if (e.key)
                names = *e.key == key;
            if (e.ip && caller.ip) {
                const int bits = e.ip->prefix_bits;
                std::uint32_t net = 0;
                std::uint32_t host = 0;
                for (int k = 0; k < 4; ++k) {
                    net = net << 8 | e.ip->address.bytes[k];
                    host = host << 8 | caller.ip->bytes[k];
                }
                const std::uint32_t mask = bits == 0 ? 0 : ~std::uint32_t{0} << (32 - bits);
                names = (net & mask) == (host & mask);
            }
            if (for_policy && live && names)
                matching.push_back(&e);
        }
        const bool deny = std::any_of(matching.begin(), matching.end(),
                                      [](const AccessEntry* e) { return e->deny; });
        const bool allow = std::any_of(matching.begin(), matching.end(),
                                       [](const AccessEntry* e) { return !e->deny; });
        std::optional<Micros> until;
        bool forever = false;
        for (const AccessEntry* e : matching) {
            if (!e->deny)
                continue;
            if (!e->expires_at)
                forever = true;
            else
                until = std::max(until.value_or(*e->expires_at), *e->expires_at);
        }
        if (forever)
            until.reset();

        const ListVerdict got = match_lists(entries, policy, key, caller, kT0);
        ASSERT_EQ(got.deny, deny) << "case " << i;
        ASSERT_EQ(got.allow, allow) << "case " << i;
        if (deny) {
            ASSERT_EQ(got.deny_until, until) << "case " << i;
        }
    }
}

// ---- effective limits ---------------------------------------------------------------------------

PolicyRule rule_of(Algorithm algorithm, std::int64_t limit, Micros period,
                   std::optional<std::int64_t> burst = std::nullopt) {
    PolicyRule rule;
    rule.name = "p";
    rule.algorithm = algorithm;
    rule.limit = limit;
    rule.period = period;
    rule.burst = burst;
    return rule;
}

TEST(PolicyEffectiveLimit, OverrideWinsOverTierUntilItExpires) {
    const PolicyRule rule = rule_of(Algorithm::kTokenBucket, 10, kMicrosPerMinute, 20);
    TierRule gold{"gold", Multiplier::parse("m", "2.5"), false};
    TierRule free_pass{"free", Multiplier(), true};
    bool bypass = true;

    Limit l = effective_limit(rule, nullptr, nullptr, kT0, &bypass);
    EXPECT_FALSE(bypass);
    EXPECT_EQ(l.limit, 10);
    EXPECT_EQ(l.burst, 20);
    l = effective_limit(rule, nullptr, &gold, kT0, &bypass);
    EXPECT_EQ(l.limit, 25);
    EXPECT_EQ(l.burst, 50);
    effective_limit(rule, nullptr, &free_pass, kT0, &bypass);
    EXPECT_TRUE(bypass);

    // An override with a limit: that limit, the burst as written.
    KeyOverrideRule own;
    own.limit = 3;
    own.expires_at = kT0 + 1;
    l = effective_limit(rule, &own, &gold, kT0, &bypass);
    EXPECT_FALSE(bypass);
    EXPECT_EQ(l.limit, 3);
    EXPECT_EQ(l.burst, 20);
    // Expired at its own instant: the tier again.
    l = effective_limit(rule, &own, &gold, kT0 + 1, &bypass);
    EXPECT_EQ(l.limit, 25);
    // An override with a multiplier: on the policy's limit and burst.
    KeyOverrideRule half;
    half.multiplier = Multiplier::parse("m", "0.5");
    l = effective_limit(rule, &half, &gold, kT0, &bypass);
    EXPECT_EQ(l.limit, 5);
    EXPECT_EQ(l.burst, 10);
    // An override that changes nothing undoes the tier, bypass included.
    KeyOverrideRule plain;
    l = effective_limit(rule, &plain, &gold, kT0, &bypass);
    EXPECT_EQ(l.limit, 10);
    EXPECT_EQ(l.burst, 20);
    effective_limit(rule, &plain, &free_pass, kT0, &bypass);
    EXPECT_FALSE(bypass);
    KeyOverrideRule skip;
    skip.bypass = true;
    effective_limit(rule, &skip, nullptr, kT0, &bypass);
    EXPECT_TRUE(bypass);
    // Without a burst, the burst is the effective limit.
    l = effective_limit(rule_of(Algorithm::kGcra, 7, kMicrosPerSecond), nullptr, &gold, kT0,
                        &bypass);
    EXPECT_EQ(l.limit, 17);
    EXPECT_EQ(l.burst, 17);
}

TEST(PolicyEffectiveLimit, ARefillLongerThanAYearIsRefusedUnlessBypassed) {
    const PolicyRule rule = rule_of(Algorithm::kTokenBucket, 1000, kMicrosPerDay, 1000);
    KeyOverrideRule own;
    own.limit = 1;  // a burst of 1000 at 1 a day: 1000 days to refill
    bool bypass = false;
    expect_argument_error([&] { effective_limit(rule, &own, nullptr, kT0, &bypass); }, "p_burst");
    own.bypass = true;
    EXPECT_NO_THROW(effective_limit(rule, &own, nullptr, kT0, &bypass));
    EXPECT_TRUE(bypass);
}

// ---- plans and answers against the plpgsql they replace -----------------------------------------

// A short multiplier as an exact fraction, for the model.
// Each checked policy's decision as decide_all_or_nothing reports it, computed directly: the
// call is allowed when every enforced policy allows; then every allowing policy is charged.
std::vector<Decision> decisions_for(const Scenario& s,
                                    const std::vector<std::pair<std::size_t, Limit>>& checked,
                                    const std::vector<bool>& enforced, bool* allowed) {
    std::vector<Decision> before;
    *allowed = true;
    for (std::size_t j = 0; j < checked.size(); ++j) {
        KeyState copy = s.states[checked[j].first];
        before.push_back(decide(checked[j].second, copy, s.now, s.cost, Action::kPeek));
        if (enforced[j] && !before.back().allowed)
            *allowed = false;
    }
    std::vector<Decision> reported = before;
    for (std::size_t j = 0; j < checked.size(); ++j) {
        if (*allowed && before[j].allowed) {
            KeyState copy = s.states[checked[j].first];
            reported[j] = decide(checked[j].second, copy, s.now, s.cost, Action::kConsume);
        }
    }
    return reported;
}

// floor(value * f), clamped to [1, 2^31 - 1], as numeric arithmetic does it.
std::int64_t model_multiplied(std::int64_t value, Fraction f) {
    const Wide exact = Wide(value) * f.numerator / f.denominator;
    return static_cast<std::int64_t>(std::min<Wide>(std::max<Wide>(exact, 1), kMaxLimit));
}

// decide_policies, transliterated: arrays counted from 1 where the plpgsql does.
struct ModelResult {
    bool refused = false;  // the plpgsql raised an error (a limit out of range)
    PolicyAnswer answer;
};

ModelResult model_decide_policies(const Scenario& s) {
    ModelResult result;
    PolicyAnswer& answer = result.answer;
    const std::size_t n = s.requests.size();
    answer.cost = s.cost;
    std::vector<std::size_t> outcome_policies;
    std::vector<PolicyOutcome> outcomes;
    bool allow_listed = false;
    std::vector<std::pair<std::size_t, Limit>> checked;
    std::vector<bool> checked_enforced;
    bool any_invalid = false;
    auto record = [&](std::vector<std::size_t> policies, std::vector<PolicyOutcome> values) {
        answer.outcomes.assign(n, PolicyOutcome::kNone);
        for (std::size_t k = 0; k < policies.size(); ++k)
            answer.outcomes[policies[k]] = values[k];
    };
    for (std::size_t i = 0; i < n; ++i) {
        const PolicyRule& pol = s.rules[i];
        const ListVerdict& listed = s.requests[i].lists;
        if (listed.deny) {
            answer.allowed = false;
            answer.policy = i;
            answer.limit = pol.limit;
            answer.remaining = 0;
            answer.period = pol.period;
            if (listed.deny_until)
                answer.retry_after = *listed.deny_until - s.now;
            answer.reset_after = answer.retry_after;
            answer.reason = PolicyReason::kDenyList;
            outcome_policies.push_back(i);
            outcomes.push_back(PolicyOutcome::kDenied);
            record(outcome_policies, outcomes);
            return result;
        }
        const std::optional<KeyOverrideRule>& o = s.overrides[i];
        const bool has_override = o && (!o->expires_at || *o->expires_at > s.now);
        const bool bypass = has_override ? o->bypass : (s.tier && s.tier->bypass);
        if (listed.allow || bypass) {
            allow_listed = allow_listed || listed.allow;
            outcome_policies.push_back(i);
            outcomes.push_back(PolicyOutcome::kAllowed);
            continue;
        }
        Fraction multiplier;
        if (has_override) {
            if (o->multiplier)
                multiplier = s.override_fractions[i];
        } else if (s.tier) {
            multiplier = s.tier_fraction;
        }
        std::int64_t limit = has_override && o->limit ? *o->limit : pol.limit;
        limit = model_multiplied(limit, multiplier);
        std::optional<std::int64_t> burst;
        if (pol.burst)
            burst = model_multiplied(*pol.burst, multiplier);
        const Limit effective{pol.algorithm, limit, pol.period, burst.value_or(limit)};
        const bool invalid = Wide(effective.burst) * effective.period > Wide(limit) * kMaxWindow;
        if (s.cost > (is_bucket(pol.algorithm) ? burst.value_or(limit) : limit)) {
            if (invalid) {
                result.refused = true;  // ratelimit.peek refuses it
                return result;
            }
            KeyState copy = s.states[i];
            const Decision d = decide(effective, copy, s.now, 1, Action::kPeek);
            answer.allowed = false;
            answer.policy = i;
            answer.limit = d.limit;
            answer.remaining = d.remaining;
            answer.period = pol.period;
            answer.reset_after = d.reset_after;
            answer.reason = PolicyReason::kCostExceedsLimit;
            record({i}, {PolicyOutcome::kDenied});
            return result;
        }
        any_invalid = any_invalid || invalid;
        checked.emplace_back(i, effective);
        checked_enforced.push_back(!pol.shadow);
    }
    if (checked.empty()) {
        answer.allowed = true;
        answer.reason = allow_listed ? PolicyReason::kAllowList : PolicyReason::kBypass;
        answer.retry_after = 0;
        answer.reset_after = 0;
        record(outcome_policies, outcomes);
        return result;
    }
    if (any_invalid) {
        result.refused = true;  // ratelimit.consume_all refuses it
        return result;
    }
    bool allowed = false;
    std::vector<Decision> decisions = decisions_for(s, checked, checked_enforced, &allowed);
    answer.allowed = allowed;
    std::size_t binding = 0;  // from 1; 0 is NULL
    for (std::size_t j = 1; j <= checked.size(); ++j) {
        Decision& d = decisions[j - 1];
        const PolicyRule& pol = s.rules[checked[j - 1].first];
        outcome_policies.push_back(checked[j - 1].first);
        if (!d.allowed && !checked_enforced[j - 1]) {
            outcomes.push_back(PolicyOutcome::kShadowDenied);
            answer.shadow_denied.push_back(checked[j - 1].first);
        } else if (!d.allowed) {
            outcomes.push_back(PolicyOutcome::kDenied);
            if (binding == 0 || decisions[binding - 1].allowed)
                binding = j;
            if (pol.count_denied) {
                answer.blocks.push_back(checked[j - 1].first);
                d.retry_after = std::max(d.retry_after, pol.period);
                d.reset_after = std::max(d.reset_after, d.retry_after);
            }
            answer.retry_after =
                answer.retry_after ? std::max(*answer.retry_after, d.retry_after) : d.retry_after;
        } else {
            outcomes.push_back(answer.allowed ? PolicyOutcome::kAllowed : PolicyOutcome::kNone);
            if (answer.allowed && checked_enforced[j - 1] &&
                (binding == 0 || d.remaining < decisions[binding - 1].remaining))
                binding = j;
        }
        if (!d.allowed && pol.log_denials)
            answer.logged.emplace_back(checked[j - 1].first, d.retry_after);
    }
    binding = binding == 0 ? 1 : binding;
    const Decision& d = decisions[binding - 1];
    answer.policy = checked[binding - 1].first;
    answer.limit = d.limit;
    answer.remaining = d.remaining;
    answer.reset_after = d.reset_after;
    answer.period = checked[binding - 1].second.period;
    if (answer.allowed) {
        answer.retry_after = 0;
        answer.reason = PolicyReason::kWithinLimits;
    } else {
        answer.reason = PolicyReason::kLimited;
    }
    record(outcome_policies, outcomes);
    return result;
}

template <typename T>
std::string show_optional(const std::optional<T>& value) {
    return value ? std::to_string(*value) : std::string("NULL");
}

std::string show(const PolicyAnswer& a) {
    std::ostringstream out;
    out << "{allowed=" << a.allowed << " policy=" << show_optional(a.policy)
        << " limit=" << show_optional(a.limit) << " remaining=" << show_optional(a.remaining)
        << " retry_after=" << show_optional(a.retry_after)
        << " reset_after=" << show_optional(a.reset_after) << " period=" << show_optional(a.period)
        << " cost=" << a.cost << " reason=" << reason_name(a.reason) << " shadow_denied=[";
    for (std::size_t i : a.shadow_denied)
        out << " " << i;
    out << " ] outcomes=[";
    for (PolicyOutcome o : a.outcomes)
        out << " " << static_cast<int>(o);
    out << " ] blocks=[";
    for (std::size_t i : a.blocks)
        out << " " << i;
    out << " ] logged=[";
    for (const auto& [i, wait] : a.logged)
        out << " " << i << ":" << wait;
    out << " ]}";
    return out.str();
}

bool same(const PolicyAnswer& a, const PolicyAnswer& b) {
    return a.allowed == b.allowed && a.policy == b.policy && a.limit == b.limit &&
           a.remaining == b.remaining && a.retry_after == b.retry_after &&
           a.reset_after == b.reset_after && a.period == b.period && a.cost == b.cost &&
           a.reason == b.reason && a.shadow_denied == b.shadow_denied && a.outcomes == b.outcomes &&
           a.blocks == b.blocks && a.logged == b.logged;
}

// The core's side: plan, decide (as decisions_for), answer.
PolicyAnswer core_decide_policies(const Scenario& s) {
    const TierRule* tier = s.tier ? &*s.tier : nullptr;
    const PolicyPlan plan = plan_policies(s.requests, tier, s.cost, s.now);
    switch (plan.kind) {
        case PolicyPlan::Kind::kSkipped:
            return answer_skipped(s.requests, plan, s.cost);
        case PolicyPlan::Kind::kDenyList:
            return answer_deny_list(s.requests, plan, s.cost, s.now);
        case PolicyPlan::Kind::kCostExceedsLimit: {
            KeyState copy = s.states[plan.stop];
            const Decision peek = decide(plan.stop_limit, copy, s.now, 1, Action::kPeek);
            return answer_cost_exceeds(s.requests, plan, peek, s.cost);
        }
        case PolicyPlan::Kind::kDecide:
            break;
    }
    std::vector<std::pair<std::size_t, Limit>> checked;
    std::vector<bool> enforced;
    for (const PolicyPlan::Checked& c : plan.checked) {
        checked.emplace_back(c.request, c.limit);
        enforced.push_back(c.enforced);
    }
    bool allowed = false;
    const std::vector<Decision> decisions = decisions_for(s, checked, enforced, &allowed);
    return answer_decided(s.requests, plan, decisions, allowed, s.cost);
}

TEST(PolicyPlans, RandomCallsAnswerAsTheSqlFunctionDid) {
    std::mt19937_64 rng(305);
    int refused = 0;
    int reasons[6] = {0, 0, 0, 0, 0, 0};
    for (int i = 0; i < 100000; ++i) {
        const Scenario s = draw_scenario(rng);
        const ModelResult want = model_decide_policies(s);
        if (want.refused) {
            ++refused;
            try {
                core_decide_policies(s);
                FAIL() << "case " << i << ": no error, the SQL function raised one";
            } catch (const ArgumentError& error) {
                ASSERT_EQ(error.argument(), "p_burst") << "case " << i;
            }
            continue;
        }
        const PolicyAnswer got = core_decide_policies(s);
        ASSERT_TRUE(same(got, want.answer))
            << "case " << i << "\n got " << show(got) << "\nwant " << show(want.answer);
        ++reasons[static_cast<int>(got.reason)];
    }
    // The scenarios reach every path.
    EXPECT_GT(refused, 0);
    for (int reason : reasons)
        EXPECT_GT(reason, 0);
}

TEST(PolicyPlans, TheFirstDenyListEntryEndsTheCallAndSkippedOnesCountAsAllowed) {
    const PolicyRule a = rule_of(Algorithm::kFixedWindow, 5, kMicrosPerMinute);
    const PolicyRule b = rule_of(Algorithm::kGcra, 7, kMicrosPerSecond, 9);
    const PolicyRule c = rule_of(Algorithm::kFixedWindow, 1, kMicrosPerMinute);
    std::vector<PolicyRequest> requests(3);
    requests[0] = PolicyRequest{&a, "x", nullptr, ListVerdict{false, true, std::nullopt}};
    requests[1] = PolicyRequest{&b, "x", nullptr, ListVerdict{true, true, kT0 + 1500}};
    requests[2] = PolicyRequest{&c, "x", nullptr, ListVerdict{true, false, std::nullopt}};
    const TierRule tier{"t", Multiplier::parse("m", "2"), false};
    const PolicyPlan plan = plan_policies(requests, &tier, 1, kT0);
    ASSERT_EQ(plan.kind, PolicyPlan::Kind::kDenyList);
    EXPECT_EQ(plan.stop, 1u);
    EXPECT_EQ(plan.skipped, std::vector<std::size_t>{0});
    const PolicyAnswer answer = answer_deny_list(requests, plan, 1, kT0);
    EXPECT_EQ(answer.limit, std::optional<std::int64_t>(7));  // as written, not tiered
    EXPECT_EQ(answer.retry_after, std::optional<Micros>(1500));
    EXPECT_EQ(answer.reason, PolicyReason::kDenyList);
    EXPECT_EQ(answer.outcomes,
              (std::vector<PolicyOutcome>{PolicyOutcome::kAllowed, PolicyOutcome::kDenied,
                                          PolicyOutcome::kNone}));
}

TEST(PolicyPlans, ALookedUpTierReplacesTheCallersForItsPolicyOnly) {
    const PolicyRule a = rule_of(Algorithm::kFixedWindow, 5, kMicrosPerMinute);
    const PolicyRule b = rule_of(Algorithm::kFixedWindow, 10, kMicrosPerMinute);
    const PolicyRule c = rule_of(Algorithm::kFixedWindow, 4, kMicrosPerMinute);
    const TierRule premium{"premium", Multiplier::parse("m", "2"), false};
    const TierRule staff{"staff", Multiplier::parse("m", "1"), true};
    std::vector<PolicyRequest> requests(3);
    requests[0] = PolicyRequest{&a, "x", nullptr, ListVerdict{false, false, std::nullopt}};
    requests[1] = PolicyRequest{&b, "x", nullptr, ListVerdict{false, false, std::nullopt}};
    requests[2] = PolicyRequest{&c, "x", nullptr, ListVerdict{false, false, std::nullopt}};
    // a: its lookup found no tier, so the caller's premium does not apply; b: no lookup, the
    // caller's tier applies; c: its lookup says staff, which bypasses it.
    requests[0].tier_looked_up = true;
    requests[2].tier_looked_up = true;
    requests[2].looked_up_tier = &staff;
    const PolicyPlan plan = plan_policies(requests, &premium, 1, kT0);
    ASSERT_EQ(plan.kind, PolicyPlan::Kind::kDecide);
    ASSERT_EQ(plan.checked.size(), 2u);
    EXPECT_EQ(plan.checked[0].request, 0u);
    EXPECT_EQ(plan.checked[0].limit.limit, 5);
    EXPECT_EQ(plan.checked[1].request, 1u);
    EXPECT_EQ(plan.checked[1].limit.limit, 20);
    EXPECT_EQ(plan.skipped, std::vector<std::size_t>{2});
    EXPECT_EQ(request_tier(requests[0], &premium), nullptr);
    EXPECT_EQ(request_tier(requests[1], &premium), &premium);
}

TEST(PolicyNearLimit, MoreThanTheRatioOfTheLimitUsedAfterTheCharge) {
    // limit 10, ratio 0.8: floor(8) units may be used without being near; 9 and 10 are near.
    EXPECT_FALSE(near_limit(10, 3, 0.8));  // 7 used
    EXPECT_FALSE(near_limit(10, 2, 0.8));  // 8 used
    EXPECT_TRUE(near_limit(10, 1, 0.8));   // 9 used
    EXPECT_TRUE(near_limit(10, 0, 0.8));
    // floor(3 x 0.5) = 1: two used is near.
    EXPECT_FALSE(near_limit(3, 2, 0.5));
    EXPECT_TRUE(near_limit(3, 1, 0.5));
    // 0 counts every charge; 1 none; no limit never.
    EXPECT_TRUE(near_limit(1000, 999, 0.0));
    EXPECT_FALSE(near_limit(1000, 0, 1.0));
    EXPECT_FALSE(near_limit(0, 0, 0.5));
}

TEST(PolicyNearLimit, AnAllowedCallReportsWhatEachChargedPolicyHasLeft) {
    const PolicyRule a = rule_of(Algorithm::kFixedWindow, 5, kMicrosPerMinute);
    const PolicyRule b = rule_of(Algorithm::kFixedWindow, 10, kMicrosPerMinute);
    std::vector<PolicyRequest> requests(2);
    requests[0] = PolicyRequest{&a, "x", nullptr, ListVerdict{false, false, std::nullopt}};
    requests[1] = PolicyRequest{&b, "x", nullptr, ListVerdict{false, false, std::nullopt}};
    const PolicyPlan plan = plan_policies(requests, nullptr, 1, kT0);
    ASSERT_EQ(plan.kind, PolicyPlan::Kind::kDecide);
    std::vector<Decision> decisions(2);
    decisions[0].allowed = true;
    decisions[0].limit = 5;
    decisions[0].remaining = 0;
    decisions[1].allowed = true;
    decisions[1].limit = 10;
    decisions[1].remaining = 6;
    const PolicyAnswer allowed = answer_decided(requests, plan, decisions, true, 1);
    ASSERT_EQ(allowed.charged.size(), 2u);
    EXPECT_EQ(allowed.charged[0].request, 0u);
    EXPECT_EQ(allowed.charged[0].limit, 5);
    EXPECT_EQ(allowed.charged[0].remaining, 0);
    EXPECT_EQ(allowed.charged[1].request, 1u);
    EXPECT_EQ(allowed.charged[1].remaining, 6);
    // Denied as a whole: nothing was charged, so nothing is near the limit.
    decisions[1].allowed = false;
    decisions[1].remaining = 0;
    decisions[1].retry_after = kMicrosPerSecond;
    const PolicyAnswer denied = answer_decided(requests, plan, decisions, false, 1);
    EXPECT_TRUE(denied.charged.empty());
}

// ---- all or nothing over fake engines
// -------------------------------------------------------------

// A fake engine: one map of states per engine it serves (keyed by the tier's key), undone by
// snapshot. Every call is written to a shared journal.
class FakeEngine final : public TierEngine {
  public:
    FakeEngine(std::string name, bool transactional, const std::vector<std::string>& keys,
               std::vector<std::string>& journal)
        : name_(std::move(name)), transactional_(transactional), keys_(keys), journal_(journal) {}

    bool transactional() const override { return transactional_; }

    void decide(TierCall* const* tiers, std::size_t count, Micros now, std::int64_t cost,
                bool charge) override {
        std::ostringstream entry;
        entry << name_ << ".decide(" << charge << ":";
        for (std::size_t i = 0; i < count; ++i)
            entry << " " << tiers[i]->index;
        entry << ")";
        journal_.push_back(entry.str());
        if (!open_) {
            snapshot_ = states_;
            open_ = true;
        }
        bool group_allows = true;
        for (std::size_t i = 0; i < count; ++i) {
            if (fail_in_ == 1)
                throw std::runtime_error("fake engine failure");
            fail_in_ = std::max(0, fail_in_ - 1);
            TierCall& tier = *tiers[i];
            KeyState copy = state_of(tier);
            tier.before = ratelimit::decide(tier.limit, copy, now, cost, Action::kPeek);
            tier.charged = false;
            if (tier.enforced && !tier.before.allowed)
                group_allows = false;
            if (transactional_ && charge && tier.before.allowed)
                charge_tier(tier, now, cost);
        }
        // Not transactional: the group is charged only as a whole.
        if (!transactional_ && charge && group_allows) {
            for (std::size_t i = 0; i < count; ++i) {
                if (tiers[i]->before.allowed)
                    charge_tier(*tiers[i], now, cost);
            }
        }
        if (!transactional_)
            open_ = false;
    }
    void undo() override {
        journal_.push_back(name_ + ".undo");
        states_ = snapshot_;
        open_ = false;
    }
    void keep() override {
        journal_.push_back(name_ + ".keep");
        open_ = false;
    }
    void abandon() noexcept override {
        journal_.push_back(name_ + ".abandon");
        states_ = snapshot_;
        open_ = false;
    }

    std::map<std::string, KeyState> states_;
    int fail_in_ = 0;  // throws at this tier (counted from 1 over the engine's life); 0: never

  private:
    std::string key_of(const TierCall& tier) const {
        return engine_name(tier.engine) + std::string("/") + keys_.at(tier.index);
    }
    KeyState state_of(const TierCall& tier) const {
        auto it = states_.find(key_of(tier));
        return it == states_.end() ? KeyState{} : it->second;
    }
    void charge_tier(TierCall& tier, Micros now, std::int64_t cost) {
        KeyState& state = states_[key_of(tier)];
        tier.result = ratelimit::decide(tier.limit, state, now, cost, Action::kConsume);
        tier.charged = true;
    }

    std::string name_;
    bool transactional_;
    const std::vector<std::string>& keys_;
    std::vector<std::string>& journal_;
    std::map<std::string, KeyState> snapshot_;
    bool open_ = false;
};

bool same_decision(const Decision& a, const Decision& b) {
    return a.allowed == b.allowed && a.limit == b.limit && a.remaining == b.remaining &&
           a.retry_after == b.retry_after && a.reset_after == b.reset_after &&
           a.state_changed == b.state_changed;
}

TEST(PolicyAllOrNothing, RandomCallsOverFakeEnginesAreAtomic) {
    std::mt19937_64 rng(306);
    const Algorithm kAlgorithms[] = {Algorithm::kFixedWindow, Algorithm::kSlidingWindow,
                                     Algorithm::kTokenBucket, Algorithm::kGcra};
    for (int run = 0; run < 400; ++run) {
        std::vector<std::string> journal;
        std::vector<std::string> keys;
        const bool shared = rng() % 2;  // the table engines share one object
        FakeEngine table("table", true, keys, journal);
        FakeEngine unlogged("unlogged", true, keys, journal);
        FakeEngine memory("memory", false, keys, journal);
        TierEngine* const engines[3] = {&table, shared ? &table : &unlogged, &memory};
        // The model: every key's state, by engine and key, as a call that is all or nothing.
        std::map<std::string, KeyState> model;
        auto states_of = [&] {
            std::map<std::string, KeyState> all = table.states_;
            for (const auto& [key, state] : unlogged.states_)
                all[key] = state;
            for (const auto& [key, state] : memory.states_)
                all[key] = state;
            return all;
        };
        Micros now = kT0;
        for (int call = 0; call < 60; ++call) {
            now += static_cast<Micros>(draw(rng, 0, 400 * 1000));
            const std::int64_t cost = static_cast<std::int64_t>(draw(rng, 0, 2));
            const std::size_t count = draw(rng, 1, 5);
            std::vector<TierCall> tiers(count);
            keys.clear();
            std::vector<std::string> bases;
            for (std::size_t i = 0; i < count; ++i) {
                TierCall& tier = tiers[i];
                tier.index = i;
                tier.engine = static_cast<Engine>(rng() % 3);
                tier.enforced = rng() % 5 != 0;
                const Algorithm algorithm = kAlgorithms[rng() % 4];
                const std::int64_t n = static_cast<std::int64_t>(draw(rng, 2, 4));
                tier.limit = Limit{algorithm, n, kMicrosPerSecond, n};
                // Distinct keys per engine, from a small pool so that calls meet again.
                std::string base;
                do {
                    base = "k" + std::to_string(rng() % 6);
                } while (std::find(bases.begin(), bases.end(), engine_name(tier.engine) + base) !=
                         bases.end());
                bases.push_back(engine_name(tier.engine) + base);
                // A key keeps one limit for life, so its model state always reads the same.
                keys.push_back(base + "/" + algorithm_name(algorithm) + std::to_string(n));
            }
            // The model's answer.
            std::vector<Decision> before(count);
            bool allowed = true;
            for (std::size_t i = 0; i < count; ++i) {
                const std::string k = engine_name(tiers[i].engine) + std::string("/") + keys[i];
                KeyState copy = model.count(k) ? model[k] : KeyState{};
                before[i] = decide(tiers[i].limit, copy, now, cost, Action::kPeek);
                if (tiers[i].enforced && !before[i].allowed)
                    allowed = false;
            }
            const bool fail = rng() % 10 == 0;
            if (fail) {
                FakeEngine* victim = rng() % 3 == 0 ? &memory : rng() % 2 == 0 ? &table : &unlogged;
                victim->fail_in_ = static_cast<int>(draw(rng, 1, 3));
            }
            const std::map<std::string, KeyState> states_before = states_of();
            journal.clear();
            bool got = false;
            bool threw = false;
            try {
                got = decide_all_or_nothing(tiers, engines, now, cost);
            } catch (const std::runtime_error&) {
                threw = true;
            }
            table.fail_in_ = unlogged.fail_in_ = memory.fail_in_ = 0;
            std::ostringstream trace;
            trace << "run " << run << " call " << call << " journal:";
            for (const std::string& line : journal)
                trace << " " << line;
            SCOPED_TRACE(trace.str());

            // The journal: the transactional engines first, table then unlogged, then memory;
            // each object finished once, the last used first.
            std::vector<std::string> decides;
            for (const std::string& line : journal) {
                if (line.find(".decide(") != std::string::npos)
                    decides.push_back(line.substr(0, line.find('.')));
            }
            for (std::size_t k = 1; k < decides.size(); ++k)
                ASSERT_TRUE(decides[k - 1] != "memory") << "memory decided before another engine";
            if (threw) {
                // Nothing charged anywhere, every transactional object abandoned.
                ASSERT_EQ(states_of(), states_before);
                for (const TierCall& tier : tiers) {
                    if (tier.engine != Engine::kMemory) {
                        ASSERT_FALSE(tier.charged);
                    }
                }
                for (const std::string& line : journal) {
                    ASSERT_EQ(line.find(".keep"), std::string::npos);
                    ASSERT_EQ(line.find(".undo"), std::string::npos);
                }
                if (std::find(decides.begin(), decides.end(), "table") != decides.end()) {
                    ASSERT_NE(std::find(journal.begin(), journal.end(), "table.abandon"),
                              journal.end());
                }
                continue;
            }
            ASSERT_EQ(got, allowed);
            for (std::size_t i = 0; i < count; ++i) {
                ASSERT_TRUE(same_decision(tiers[i].before, before[i])) << "tier " << i;
                // Everything that allows is charged when the call is allowed; nothing otherwise.
                ASSERT_EQ(tiers[i].charged, allowed && before[i].allowed) << "tier " << i;
                const std::string k = engine_name(tiers[i].engine) + std::string("/") + keys[i];
                if (allowed && before[i].allowed) {
                    KeyState& state = model[k];
                    const Decision charged =
                        decide(tiers[i].limit, state, now, cost, Action::kConsume);
                    ASSERT_TRUE(same_decision(reported_decision(tiers[i], true), charged));
                } else {
                    ASSERT_TRUE(same_decision(reported_decision(tiers[i], allowed), before[i]));
                }
            }
            std::map<std::string, KeyState> expected;
            for (const auto& [key, state] : model) {
                if (state.algorithm != Algorithm::kNone || state.blocked_until != 0)
                    expected[key] = state;
            }
            std::map<std::string, KeyState> stored;
            for (const auto& [key, state] : states_of()) {
                if (state.algorithm != Algorithm::kNone || state.blocked_until != 0)
                    stored[key] = state;
            }
            ASSERT_EQ(stored, expected);
            if (!allowed) {
                ASSERT_EQ(states_of(), states_before);
            }
            // keep or undo once per transactional object used, the last used first.
            std::vector<std::string> finished;
            for (const std::string& line : journal) {
                if (line.find(".keep") != std::string::npos ||
                    line.find(".undo") != std::string::npos)
                    finished.push_back(line);
            }
            std::vector<std::string> used;
            for (const std::string& name : decides) {
                if (name != "memory" && std::find(used.begin(), used.end(), name) == used.end())
                    used.push_back(name);
            }
            std::vector<std::string> want;
            for (auto it = used.rbegin(); it != used.rend(); ++it)
                want.push_back(*it + (allowed ? ".keep" : ".undo"));
            ASSERT_EQ(finished, want);
        }
    }
}

// The memory engine is charged only when everything before it allowed, and is told so.
TEST(PolicyAllOrNothing, NonTransactionalEnginesAreChargedOnlyAfterTheOthersAllowed) {
    std::vector<std::string> journal;
    std::vector<std::string> keys = {"a", "b"};
    FakeEngine table("table", true, keys, journal);
    FakeEngine memory("memory", false, keys, journal);
    TierEngine* const engines[3] = {&table, &table, &memory};
    const Limit one{Algorithm::kFixedWindow, 1, kMicrosPerMinute, 1};
    std::vector<TierCall> tiers(2);
    tiers[0].index = 0;
    tiers[0].engine = Engine::kMemory;
    tiers[0].limit = one;
    tiers[1].index = 1;
    tiers[1].engine = Engine::kTable;
    tiers[1].limit = one;
    EXPECT_TRUE(decide_all_or_nothing(tiers, engines, kT0, 1));
    EXPECT_EQ(journal, (std::vector<std::string>{"table.decide(1: 1)", "memory.decide(1: 0)",
                                                 "table.keep"}));
    journal.clear();
    EXPECT_FALSE(decide_all_or_nothing(tiers, engines, kT0, 1));
    EXPECT_EQ(journal, (std::vector<std::string>{"table.decide(1: 1)", "memory.decide(0: 0)",
                                                 "table.undo"}));
    EXPECT_FALSE(tiers[0].charged);
    EXPECT_FALSE(tiers[1].charged);
    // A shadow tier's denial does not deny the call.
    tiers[1].enforced = false;
    tiers[0].enforced = false;
    journal.clear();
    EXPECT_TRUE(decide_all_or_nothing(tiers, engines, kT0, 1));
}

// ---- escalating penalties ----------------------------------------------------------------------

PolicyRule ladder_rule(std::vector<Micros> blocks, Micros decay) {
    PolicyRule rule = rule_of(Algorithm::kFixedWindow, 2, 10 * kMicrosPerSecond);
    rule.penalty_blocks = std::move(blocks);
    rule.penalty_decay = decay;
    return rule;
}

// The level against a model in whole microseconds: the counter holds C, the decay's
// microseconds per level; a penalty adds one decay to it, time drains it (never below 0), and
// the level is ceil(C / decay), at most the number of steps. Offences come in bursts at one
// instant and after gaps of a fraction of a decay to several decays.
TEST(PolicyPenalties, TheLevelRisesByOnePerPenaltyAndDrainsByOnePerDecay) {
    std::mt19937_64 rng(2026);
    for (int round = 0; round < 300; ++round) {
        const auto steps = static_cast<std::size_t>(draw(rng, 1, kMaxPenaltySteps));
        std::vector<Micros> blocks;
        for (std::size_t i = 0; i < steps; ++i)
            blocks.push_back(static_cast<Micros>(draw(rng, 1, 3600)) * kMicrosPerSecond);
        const Micros decay = static_cast<Micros>(draw(rng, 1000, 86400000)) * 1000 /
                             static_cast<Micros>(draw(rng, 1, 1000));
        if (decay < kMinPeriod)
            continue;
        const PolicyRule rule = ladder_rule(blocks, decay);
        ASSERT_NO_THROW(require_valid_penalties("", rule.penalty_blocks, rule.penalty_decay));
        const Limit counter = penalty_counter(rule);
        KeyState state;
        Wide content = 0;  // C
        Micros now = kT0;
        Micros last = kT0;
        for (int offence = 0; offence < 40; ++offence) {
            const std::uint64_t gap = draw(rng, 0, 5);
            if (gap > 0)
                now += static_cast<Micros>(static_cast<Wide>(decay) *
                                           static_cast<Wide>(draw(rng, 0, 3000)) / 1000);
            // A peek first: what a denial while blocked reads.
            KeyState before = state;
            const Decision peeked = decide(counter, state, now, 1, Action::kPeek);
            ASSERT_EQ(state, before);
            const Wide drained = std::max<Wide>(0, content - (now - last));
            const auto expected_before = static_cast<std::int64_t>(
                std::min<Wide>(static_cast<Wide>(steps), (drained + decay - 1) / decay));
            ASSERT_EQ(penalty_level(rule, peeked), expected_before) << "round " << round;
            const Decision charged = decide(counter, state, now, 1, Action::kCharge);
            content = drained + decay;
            last = now;
            const auto expected = static_cast<std::int64_t>(
                std::min<Wide>(static_cast<Wide>(steps), (content + decay - 1) / decay));
            ASSERT_EQ(penalty_level(rule, charged), expected)
                << "round " << round << " offence " << offence;
            ASSERT_GE(expected, 1);
            EXPECT_EQ(penalty_block(rule, expected),
                      blocks[static_cast<std::size_t>(expected) - 1]);
        }
    }
}

TEST(PolicyPenalties, PastTheLastStepTheLastStepAgain) {
    const PolicyRule rule =
        ladder_rule({kMicrosPerMinute, 5 * kMicrosPerMinute}, (60 * kMicrosPerMinute));
    EXPECT_EQ(penalty_block(rule, 0), 0);
    EXPECT_EQ(penalty_block(rule, 1), kMicrosPerMinute);
    EXPECT_EQ(penalty_block(rule, 2), 5 * kMicrosPerMinute);
    EXPECT_EQ(penalty_block(rule, 9), 5 * kMicrosPerMinute);
    // A run of offences at one instant climbs one step each, then stays at the top.
    KeyState state;
    std::vector<std::int64_t> levels;
    for (int i = 0; i < 4; ++i)
        levels.push_back(
            penalty_level(rule, decide(penalty_counter(rule), state, kT0, 1, Action::kCharge)));
    EXPECT_EQ(levels, (std::vector<std::int64_t>{1, 2, 2, 2}));
    // The offences at the top were counted: two decays on, the level is still at the top.
    const Decision later =
        decide(penalty_counter(rule), state, kT0 + 2 * (60 * kMicrosPerMinute), 1, Action::kPeek);
    EXPECT_EQ(penalty_level(rule, later), 2);
}

TEST(PolicyPenalties, BadLaddersAreRefusedNamingTheColumn) {
    expect_argument_error([] { require_valid_penalties("", {}, (60 * kMicrosPerMinute)); },
                          "penalty_blocks");
    expect_argument_error(
        [] {
            require_valid_penalties("", std::vector<Micros>(kMaxPenaltySteps + 1, kMicrosPerMinute),
                                    (60 * kMicrosPerMinute));
        },
        "penalty_blocks");
    expect_argument_error([] { require_valid_penalties("", {0}, (60 * kMicrosPerMinute)); },
                          "penalty_blocks");
    expect_argument_error(
        [] { require_valid_penalties("", {kMaxWindow + 1}, (60 * kMicrosPerMinute)); },
        "penalty_blocks");
    expect_argument_error([] { require_valid_penalties("", {kMicrosPerMinute}, 999); },
                          "penalty_decay");
    expect_argument_error(
        [] {
            require_valid_penalties("", {kMicrosPerMinute, kMicrosPerMinute}, 200 * kMicrosPerDay);
        },
        "penalty_decay");
    EXPECT_NO_THROW(require_valid_penalties("",
                                            std::vector<Micros>(kMaxPenaltySteps, kMicrosPerMinute),
                                            kMaxWindow / kMaxPenaltySteps));
}

// Which denials earn a penalty: an enforced policy's, by its limit. A blocked key's denial only
// reads its level; a shadow policy's denial and an allowed policy's earn nothing.
TEST(PolicyPenalties, OnlyAnEnforcedDenialByTheLimitEarnsAPenalty) {
    PolicyRule strict = ladder_rule({kMicrosPerMinute}, (60 * kMicrosPerMinute));
    strict.name = "strict";
    PolicyRule blocked = ladder_rule({kMicrosPerMinute}, (60 * kMicrosPerMinute));
    blocked.name = "blocked";
    PolicyRule shadow = ladder_rule({kMicrosPerMinute}, (60 * kMicrosPerMinute));
    shadow.name = "shadow";
    shadow.shadow = true;
    PolicyRule calm = ladder_rule({kMicrosPerMinute}, (60 * kMicrosPerMinute));
    calm.name = "calm";
    std::vector<PolicyRequest> requests(4);
    const PolicyRule* rules[] = {&strict, &blocked, &shadow, &calm};
    for (std::size_t i = 0; i < 4; ++i)
        requests[i] =
            PolicyRequest{rules[i], "x", nullptr, ListVerdict{false, false, std::nullopt}};
    const PolicyPlan plan = plan_policies(requests, nullptr, 1, kT0);
    ASSERT_EQ(plan.kind, PolicyPlan::Kind::kDecide);
    std::vector<Decision> decisions(4);
    for (Decision& d : decisions) {
        d.limit = 2;
        d.retry_after = kMicrosPerSecond;
    }
    decisions[1].blocked = true;
    decisions[3].allowed = true;
    decisions[3].retry_after = 0;
    decisions[3].remaining = 1;
    PolicyAnswer answer = answer_decided(requests, plan, decisions, false, 1);
    EXPECT_EQ(answer.penalized, (std::vector<std::size_t>{0}));
    EXPECT_EQ(answer.penalty_reads, (std::vector<std::size_t>{1}));
    EXPECT_EQ(answer.reason, PolicyReason::kLimited);
    EXPECT_FALSE(answer.penalty_level.has_value());
    // The layer charged request 0 to level 2 (block 5 minutes) and read level 1 for request 1.
    apply_penalty(answer, 2, 5 * kMicrosPerMinute);
    apply_penalty(answer, 1, 0);
    EXPECT_EQ(answer.reason, PolicyReason::kPenalty);
    EXPECT_EQ(answer.penalty_level, 2);
    EXPECT_EQ(answer.retry_after, 5 * kMicrosPerMinute);
    EXPECT_GE(answer.reset_after.value_or(0), 5 * kMicrosPerMinute);
    EXPECT_STREQ(reason_name(answer.reason), "penalty");
    // A level of 0 (a block set by hand) changes nothing.
    PolicyAnswer unpenalized = answer_decided(requests, plan, decisions, false, 1);
    apply_penalty(unpenalized, 0, 0);
    EXPECT_EQ(unpenalized.reason, PolicyReason::kLimited);
    EXPECT_FALSE(unpenalized.penalty_level.has_value());
}

}  // namespace
}  // namespace ratelimit
