// What a policy decision does to the server, for the core's sequence
// (ratelimit/policy_decision.hpp): the engines that decide and block each policy's keys (or, for
// a concurrency policy, the lease table), the denial log and the per-policy counters. The
// sequence is the core's; this file only carries out each step it asks for.
#pragma once

#include "pg/bridge/postgres.hpp"
#include "pg/engines/key_state_table.hpp"
#include "pg/policies/policy_arguments.hpp"
#include "ratelimit/algorithms.hpp"
#include "ratelimit/policy.hpp"

namespace ratelimit::pg {

// A concurrency policy's in-flight units, for decide_policy_subject: the lease table's side.
class InFlightLimit {
  public:
    virtual ~InFlightLimit() = default;
    // Takes `cost` of `limit` units for `key` when they fit beside its live leases; the
    // decision as a policy reports it (remaining = limit - in flight; when denied,
    // retry_after is the wait until the first lease reaches its maximum hold).
    virtual Decision take(const StateKey& key, const Limit& limit, std::int64_t cost,
                          Micros now) = 0;
    // The same, taking nothing (a cost the limit could never allow).
    virtual Decision look(const StateKey& key, const Limit& limit, Micros now) = 0;
};

// The call's plan (the core's plan_policy_call), each memory-engine limit checked against the
// engine this server has.
PolicyPlan plan_call(FunctionCallInfo fcinfo, Oid schema, const PolicyCall& call);

// Decides a call read and planned (the core's decide_planned_policy_call) on the engines of the
// extension's `schema`, or, with `in_flight`, its one concurrency policy on the lease table.
PolicyAnswer decide_planned(FunctionCallInfo fcinfo, Oid schema, const PolicyCall& call,
                            const PolicyPlan& plan, InFlightLimit* in_flight = nullptr);

// The namespace of a policy's penalty levels: its name and "/penalty". A policy name has no
// '/', so no policy's counters (nor the native keys, in '') can meet it.
Datum penalty_space(const std::string& policy);

// The answer as a ratelimit.policy_decision row, and that row type; both looked up once per
// call site.
Datum answer_datum(FunctionCallInfo fcinfo, const PolicyCall& call, const PolicyAnswer& answer);
Oid policy_decision_type(FunctionCallInfo fcinfo);

// The extension's schema, where the policy tables and the engines' tables are
// (extension_schema(), for C++ callers).
Oid policies_schema();

}  // namespace ratelimit::pg
