// The sequence of a policy call (ratelimit/policy_decision.hpp), without a server: over random
// calls (policy_scenarios.hpp, with penalties and blocks added), decide_policy_call against the
// sequence the PostgreSQL layer ran before it moved into the core (transliterated below as the
// model), effect by effect; and its properties on their own: what a denied call leaves, what is
// counted, logged and blocked, and in which order.
#include "ratelimit/policy_decision.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "policy_scenarios.hpp"
#include "ratelimit/error.hpp"

namespace ratelimit {
namespace {

// The world a call acts on, as plain data: each request's key state and penalty counter, and
// every effect in the order it happened.
class FakeEffects final : public PolicyEffects {
  public:
    explicit FakeEffects(const Scenario& s) : states(s.states), penalties(s.states.size()) {}

    std::vector<KeyState> states;     // each request's counter
    std::vector<KeyState> penalties;  // each request's penalty counter
    std::vector<std::string> log;     // the effects, in order
    bool refuse_memory = false;       // accept() refuses a memory-engine limit, as a server
                                      // without the engine does

    void accept(const PolicyCallInput&, const PolicyPlan& plan) override {
        log.push_back("accept");
        if (refuse_memory && !plan.checked.empty())
            throw ArgumentError::invalid("p_engine", "the memory engine is not loaded");
    }
    Decision peek(const PolicyCallInput& call, std::size_t request, const Limit& limit) override {
        log.push_back("peek " + std::to_string(request));
        KeyState copy = states[request];
        return ratelimit::decide(limit, copy, call.now, 1, Action::kPeek);
    }
    // All or nothing, as decide_all_or_nothing does it: every limit looked at, the call allowed
    // when every enforced one allows, then each allowing limit charged.
    bool decide(const PolicyCallInput& call, const PolicyPlan& plan,
                std::vector<Decision>* decisions) override {
        log.push_back("decide");
        bool allowed = true;
        for (std::size_t k = 0; k < plan.checked.size(); ++k) {
            KeyState copy = states[plan.checked[k].request];
            (*decisions)[k] =
                ratelimit::decide(plan.checked[k].limit, copy, call.now, call.cost, Action::kPeek);
            if (plan.checked[k].enforced && !(*decisions)[k].allowed)
                allowed = false;
        }
        for (std::size_t k = 0; allowed && k < plan.checked.size(); ++k) {
            if ((*decisions)[k].allowed)
                (*decisions)[k] =
                    ratelimit::decide(plan.checked[k].limit, states[plan.checked[k].request],
                                      call.now, call.cost, Action::kConsume);
        }
        return allowed;
    }
    Decision penalty_counter(const PolicyCallInput& call, std::size_t request, const Limit& counter,
                             bool charge) override {
        log.push_back((charge ? "penalty " : "level ") + std::to_string(request));
        return ratelimit::decide(counter, penalties[request], call.now, 1,
                                 charge ? Action::kCharge : Action::kPeek);
    }
    void block(const PolicyCallInput&, std::size_t request, Micros until) override {
        log.push_back("block " + std::to_string(request) + " " + std::to_string(until));
        block_until(states[request], until);
    }
    void log_denial(const PolicyCallInput&, std::size_t request, std::int64_t limit,
                    Micros retry_after, bool enforced) override {
        log.push_back("log " + std::to_string(request) + " " + std::to_string(limit) + " " +
                      std::to_string(retry_after) + (enforced ? "" : " shadow"));
    }
    void count(const PolicyCallInput&, std::size_t request, PolicyOutcome outcome,
               bool near) override {
        log.push_back("count " + std::to_string(request) + " " +
                      std::to_string(static_cast<int>(outcome)) + (near ? " near" : ""));
    }
};

// The sequence as the PostgreSQL layer ran it (src/pg/policies/policy_api.cpp, 0.7.0 before
// the rooms: plan_call, decide_planned, apply_penalties, apply_answer), on the same effects.
PolicyAnswer model_sequence(const PolicyCallInput& call, FakeEffects& effects) {
    PolicyPlan plan;
    try {
        plan = plan_policies(call.requests, call.tier, call.cost, call.now);
        effects.accept(call, plan);
    } catch (const ArgumentError& error) {
        const std::string where = call.tier != nullptr ? "p_tier" : call.policies_argument;
        throw ArgumentError(error.kind(), where,
                            where + ": the limit it gives is refused: " + error.what());
    }
    PolicyAnswer answer;
    switch (plan.kind) {
        case PolicyPlan::Kind::kSkipped:
            answer = answer_skipped(call.requests, plan, call.cost);
            break;
        case PolicyPlan::Kind::kDenyList:
            answer = answer_deny_list(call.requests, plan, call.cost, call.now);
            break;
        case PolicyPlan::Kind::kCostExceedsLimit: {
            const Decision peek = effects.peek(call, plan.stop, plan.stop_limit);
            answer = answer_cost_exceeds(call.requests, plan, peek, call.cost);
            break;
        }
        case PolicyPlan::Kind::kDecide: {
            std::vector<Decision> decisions(plan.checked.size());
            const bool allowed = effects.decide(call, plan, &decisions);
            answer = answer_decided(call.requests, plan, decisions, allowed, call.cost);
            answer.checked = decisions;
            auto settle_level = [&](std::size_t request, bool earned) {
                const PolicyRule& rule = *call.requests[request].rule;
                const Decision level_decision =
                    effects.penalty_counter(call, request, penalty_counter(rule), earned);
                const std::int64_t level = penalty_level(rule, level_decision);
                Micros block = 0;
                if (earned) {
                    block = penalty_block(rule, level);
                    effects.block(call, request, call.now + block);
                }
                apply_penalty(answer, level, block);
            };
            for (std::size_t request : answer.penalized)
                settle_level(request, true);
            for (std::size_t request : answer.penalty_reads)
                settle_level(request, false);
            break;
        }
    }
    for (std::size_t request : answer.blocks)
        effects.block(call, request, call.now + call.requests[request].rule->period);
    for (const auto& [request, retry_after] : answer.logged) {
        const PolicyRequest& r = call.requests[request];
        bool bypass = false;
        const std::int64_t limit =
            effective_limit(*r.rule, r.key_override, call.tier, call.now, &bypass).limit;
        effects.log_denial(call, request, limit, retry_after, !r.rule->shadow);
    }
    for (std::size_t i = 0; i < answer.outcomes.size(); ++i) {
        if (answer.outcomes[i] == PolicyOutcome::kNone)
            continue;
        bool near = false;
        for (const PolicyAnswer::Charged& charged : answer.charged) {
            if (charged.request == i)
                near = near_limit(charged.limit, charged.remaining, call.near_limit_ratio);
        }
        effects.count(call, i, answer.outcomes[i], near);
    }
    return answer;
}

// A random call with penalties on some policies (a level already reached, a block in force on
// some keys) and a random near-limit ratio.
struct DecisionCase {
    Scenario scenario;
    PolicyCallInput call;
    std::vector<KeyState> penalty_states;
};

DecisionCase draw_case(std::mt19937_64& rng) {
    DecisionCase c{draw_scenario(rng), {}, {}};
    Scenario& s = c.scenario;
    c.penalty_states.resize(s.rules.size());
    for (std::size_t i = 0; i < s.rules.size(); ++i) {
        PolicyRule& rule = s.rules[i];
        if (rng() % 3 != 0)
            continue;
        const std::size_t steps = draw(rng, 1, 4);
        for (std::size_t k = 0; k < steps; ++k)
            rule.penalty_blocks.push_back(static_cast<Micros>(draw(rng, 1, 600)) *
                                          kMicrosPerSecond);
        rule.penalty_decay = static_cast<Micros>(draw(rng, 1, 3600)) * kMicrosPerSecond;
        const int earlier = static_cast<int>(draw(rng, 0, 5));
        for (int k = 0; k < earlier; ++k)
            ratelimit::decide(penalty_counter(rule), c.penalty_states[i], s.now, 1,
                              Action::kCharge);
    }
    c.call.requests = s.requests;
    c.call.tier = s.tier ? &*s.tier : nullptr;
    c.call.cost = s.cost;
    c.call.now = s.now;
    c.call.policies_argument = rng() % 2 ? "p_policies" : "p_policy";
    static const double kRatios[] = {0, 0.5, 0.8, 1};
    c.call.near_limit_ratio = kRatios[rng() % 4];
    return c;
}

FakeEffects effects_for(const DecisionCase& c) {
    FakeEffects effects(c.scenario);
    effects.penalties = c.penalty_states;
    return effects;
}

std::string joined(const std::vector<std::string>& lines) {
    std::ostringstream out;
    for (const std::string& line : lines)
        out << "  " << line << "\n";
    return out.str();
}

bool same_answer(const PolicyAnswer& a, const PolicyAnswer& b) {
    auto same_decisions = [](const std::vector<Decision>& x, const std::vector<Decision>& y) {
        if (x.size() != y.size())
            return false;
        for (std::size_t i = 0; i < x.size(); ++i) {
            if (x[i].allowed != y[i].allowed || x[i].limit != y[i].limit ||
                x[i].remaining != y[i].remaining || x[i].retry_after != y[i].retry_after ||
                x[i].reset_after != y[i].reset_after)
                return false;
        }
        return true;
    };
    return a.allowed == b.allowed && a.policy == b.policy && a.limit == b.limit &&
           a.remaining == b.remaining && a.retry_after == b.retry_after &&
           a.reset_after == b.reset_after && a.period == b.period && a.cost == b.cost &&
           a.reason == b.reason && a.shadow_denied == b.shadow_denied &&
           a.penalty_level == b.penalty_level && a.outcomes == b.outcomes && a.blocks == b.blocks &&
           a.penalized == b.penalized && a.penalty_reads == b.penalty_reads &&
           a.logged == b.logged && same_decisions(a.checked, b.checked);
}

TEST(PolicyDecision, RandomCallsDoWhatTheServerSequenceDid) {
    std::mt19937_64 rng(3107);
    int refused = 0, penalties = 0, logged = 0, blocked = 0, near = 0;
    for (int i = 0; i < 50000; ++i) {
        const DecisionCase c = draw_case(rng);
        FakeEffects got_effects = effects_for(c);
        FakeEffects want_effects = effects_for(c);
        PolicyAnswer got, want;
        std::string got_error, want_error;
        try {
            got = decide_policy_call(c.call, got_effects);
        } catch (const ArgumentError& error) {
            got_error = error.argument() + " " + error.what();
        }
        try {
            want = model_sequence(c.call, want_effects);
        } catch (const ArgumentError& error) {
            want_error = error.argument() + " " + error.what();
        }
        ASSERT_EQ(got_error, want_error) << "case " << i;
        ASSERT_EQ(got_effects.log, want_effects.log) << "case " << i << "\ngot\n"
                                                     << joined(got_effects.log) << "want\n"
                                                     << joined(want_effects.log);
        if (!want_error.empty()) {
            ++refused;
            continue;
        }
        ASSERT_TRUE(same_answer(got, want)) << "case " << i;
        penalties += got.reason == PolicyReason::kPenalty;
        logged += !got.logged.empty();
        blocked += !got.blocks.empty();
        for (const std::string& line : got_effects.log)
            near += line.find(" near") != std::string::npos;
    }
    // The calls reach every step.
    EXPECT_GT(refused, 0);
    EXPECT_GT(penalties, 0);
    EXPECT_GT(logged, 0);
    EXPECT_GT(blocked, 0);
    EXPECT_GT(near, 0);
}

// What the sequence promises, checked on its own rather than against the model.
TEST(PolicyDecision, EachStepHappensOnceInItsOrder) {
    std::mt19937_64 rng(3108);
    for (int i = 0; i < 30000; ++i) {
        const DecisionCase c = draw_case(rng);
        FakeEffects effects = effects_for(c);
        PolicyAnswer answer;
        PolicyPlan plan;
        try {
            answer = decide_policy_call(c.call, effects, &plan);
        } catch (const ArgumentError&) {
            // Refused before any key is touched.
            for (const std::string& line : effects.log)
                ASSERT_EQ(line, "accept") << "case " << i;
            continue;
        }
        const std::vector<std::string>& log = effects.log;
        ASSERT_FALSE(log.empty());
        EXPECT_EQ(log[0], "accept") << "case " << i;
        // Steps in order: accept, the decision (peek or decide), penalties, blocks, logs, counts.
        auto rank = [](const std::string& line) {
            if (line == "accept")
                return 0;
            if (line.rfind("peek", 0) == 0 || line == "decide")
                return 1;
            if (line.rfind("penalty", 0) == 0 || line.rfind("level", 0) == 0)
                return 2;
            if (line.rfind("block", 0) == 0)
                return 3;
            if (line.rfind("log", 0) == 0)
                return 4;
            return 5;
        };
        // A penalty's block follows its counter; count_denied blocks come after every penalty.
        for (std::size_t k = 1; k < log.size(); ++k) {
            const int before = rank(log[k - 1]), now = rank(log[k]);
            const bool penalty_block = before == 2 && now == 3;
            const bool next_penalty = before == 3 && now == 2;
            EXPECT_TRUE(before <= now || penalty_block || next_penalty)
                << "case " << i << ": " << log[k - 1] << " before " << log[k];
        }
        // Each request with an outcome is counted once, in order, near as near_limit says.
        std::vector<std::string> counts;
        for (const std::string& line : log)
            if (line.rfind("count", 0) == 0)
                counts.push_back(line);
        std::vector<std::string> want_counts;
        for (std::size_t r = 0; r < answer.outcomes.size(); ++r) {
            if (answer.outcomes[r] == PolicyOutcome::kNone)
                continue;
            bool near = false;
            for (const PolicyAnswer::Charged& charged : answer.charged)
                if (charged.request == r)
                    near = near_limit(charged.limit, charged.remaining, c.call.near_limit_ratio);
            want_counts.push_back("count " + std::to_string(r) + " " +
                                  std::to_string(static_cast<int>(answer.outcomes[r])) +
                                  (near ? " near" : ""));
        }
        EXPECT_EQ(counts, want_counts) << "case " << i;
        // Only policies with log_denials are logged, each with the limit it decided under.
        for (const auto& [request, retry_after] : answer.logged) {
            const PolicyRequest& r = c.call.requests[request];
            EXPECT_TRUE(r.rule->log_denials) << "case " << i;
            bool bypass = false;
            const std::int64_t limit =
                effective_limit(*r.rule, r.key_override, c.call.tier, c.call.now, &bypass).limit;
            const std::string line = "log " + std::to_string(request) + " " +
                                     std::to_string(limit) + " " + std::to_string(retry_after) +
                                     (r.rule->shadow ? " shadow" : "");
            EXPECT_EQ(std::count(log.begin(), log.end(), line), 1) << "case " << i << ": " << line;
        }
        // A denied call charges no counter: every key stands as it did, but for its block.
        if (!answer.allowed) {
            for (std::size_t r = 0; r < c.scenario.states.size(); ++r) {
                KeyState after = effects.states[r];
                after.blocked_until = c.scenario.states[r].blocked_until;
                EXPECT_TRUE(after == c.scenario.states[r]) << "case " << i << " request " << r;
            }
        }
        // A penalty earned blocks its key for its step; the answer reports the highest level.
        if (answer.reason == PolicyReason::kPenalty) {
            ASSERT_TRUE(answer.penalty_level.has_value());
            EXPECT_GE(*answer.penalty_level, 1);
        }
        for (std::size_t request : answer.penalized) {
            const auto earned =
                std::find(log.begin(), log.end(), "penalty " + std::to_string(request));
            ASSERT_NE(earned, log.end()) << "case " << i;
            ASSERT_NE(earned + 1, log.end());
            EXPECT_EQ((earned + 1)->rfind("block " + std::to_string(request) + " ", 0), 0u)
                << "case " << i;
        }
    }
}

TEST(PolicyDecision, ARefusedLimitIsReportedAgainstTheTierOrThePolicies) {
    PolicyRule rule;
    rule.name = "api";
    rule.limit = 10;
    rule.period = kMicrosPerMinute;
    rule.engine = Engine::kMemory;
    Scenario s;
    s.rules.push_back(rule);
    s.states.resize(1);
    PolicyCallInput call;
    call.requests.push_back(PolicyRequest{&s.rules[0], "key", nullptr, {}});
    call.cost = 1;
    call.now = kT0;
    call.policies_argument = "p_policies";
    FakeEffects effects(s);
    effects.refuse_memory = true;
    try {
        decide_policy_call(call, effects);
        FAIL() << "no error";
    } catch (const ArgumentError& error) {
        EXPECT_EQ(error.argument(), "p_policies");
        EXPECT_EQ(std::string(error.what()),
                  "p_policies: the limit it gives is refused: p_engine the memory engine is not "
                  "loaded");
    }
    const TierRule tier{"gold", Multiplier::parse("m", "2"), false};
    call.tier = &tier;
    try {
        decide_policy_call(call, effects);
        FAIL() << "no error";
    } catch (const ArgumentError& error) {
        EXPECT_EQ(error.argument(), "p_tier");
    }
    // Nothing was decided, blocked, logged or counted.
    EXPECT_EQ(effects.log, (std::vector<std::string>{"accept", "accept"}));
}

}  // namespace
}  // namespace ratelimit
