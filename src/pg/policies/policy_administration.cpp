// For administrators: ratelimit.reset_policy_key and block_policy_key (a policy's counters are
// reachable through the policy only, never through a native key), and
// validate_policy_options, the policies table's check of its penalty and delay columns.
#include <string>
#include <string_view>
#include <vector>

#include "pg/bridge/arguments.hpp"
#include "pg/bridge/clock.hpp"
#include "pg/bridge/guard.hpp"
#include "pg/engines/state_engines.hpp"
#include "pg/policies/policy_arguments.hpp"
#include "pg/policies/policy_cache.hpp"
#include "pg/policies/policy_effects.hpp"

extern "C" {
#include "utils/array.h"
}

#include "ratelimit/error.hpp"
#include "ratelimit/policy.hpp"
#include "ratelimit/validation.hpp"

namespace ratelimit::pg {
namespace {

// The policy and subject of reset_policy_key and block_policy_key: a policy's counters are
// reachable through the policy only, never through a native key.
ResolvedPolicy policy_key_arguments(FunctionCallInfo fcinfo, const PolicyCatalog& catalog) {
    const std::string_view name = name_argument(fcinfo, 0, "p_policy");
    ResolvedPolicy resolved;
    resolved.rule = catalog.policy(name);
    if (resolved.rule == nullptr)
        throw ArgumentError(ErrorKind::kInvalidArgument, "p_policy",
                            "p_policy: unknown policy \"" + first_characters(name, 64) + "\"");
    resolved.key = key_argument(fcinfo, 1, "p_key");
    resolved.subject = resolved.rule->hash_key ? hashed_subject(resolved.key) : resolved.key;
    call_postgres([&] { resolved.space = PointerGetDatum(PG_GETARG_TEXT_PP(0)); });
    return resolved;
}

// ratelimit.reset_policy_key(p_policy, p_key): forgets what the policy counted for the subject.
Datum reset_policy_key_body(FunctionCallInfo fcinfo) {
    const Oid schema = policies_schema();
    const ResolvedPolicy resolved = policy_key_arguments(fcinfo, policy_catalog(schema));
    EngineStorage storage;
    StateEngine& engine =
        state_engine(resolved.rule->engine, schema, "ratelimit.reset_policy_key()", storage);
    // The penalty level goes too: a reset key starts over at the first step.
    const bool level_reset =
        !resolved.rule->penalty_blocks.empty() &&
        engine.reset(StateKey{penalty_space(resolved.rule->name), resolved.subject});
    return BoolGetDatum(engine.reset(StateKey{resolved.space, resolved.subject}) || level_reset);
}

// ratelimit.block_policy_key(p_policy, p_key, p_duration): denies the subject under the policy
// until now + p_duration (an earlier block is never shortened); returns the block's end.
Datum block_policy_key_body(FunctionCallInfo fcinfo) {
    const Oid schema = policies_schema();
    const ResolvedPolicy resolved = policy_key_arguments(fcinfo, policy_catalog(schema));
    const Micros duration = interval_argument(fcinfo, 2, "p_duration");
    EngineStorage storage;
    StateEngine& engine =
        state_engine(resolved.rule->engine, schema, "ratelimit.block_policy_key()", storage);
    const Micros now = clock_now_checked();
    return TimestampTzGetDatum(to_timestamptz(
        engine.block(StateKey{resolved.space, resolved.subject}, now + duration, now)));
}

// ratelimit.validate_policy_options(p_algorithm, p_penalty_blocks, p_penalty_decay,
// p_max_delay): the policies table's check of its penalty and delay columns, with the core's
// rules (require_valid_penalties, require_valid_limit).
Datum validate_policy_options_body(FunctionCallInfo fcinfo) {
    const Algorithm algorithm =
        parse_algorithm("p_algorithm", name_argument(fcinfo, 0, "p_algorithm"));
    if (!PG_ARGISNULL(1)) {
        const ArrayArgument blocks = array_argument(fcinfo, 1, "penalty_blocks", INTERVALOID, true);
        std::vector<Micros> lengths;
        for (int i = 0; i < blocks.count; ++i) {
            if (blocks.nulls[i])
                throw ArgumentError::null("penalty_blocks");
            const Interval* span = DatumGetIntervalP(blocks.values[i]);
            lengths.push_back(interval_value("penalty_blocks", span));
        }
        if (PG_ARGISNULL(2))
            throw ArgumentError::invalid("penalty_decay", "must be given with penalty_blocks");
        require_valid_penalties("", lengths, interval_argument(fcinfo, 2, "penalty_decay"));
    } else if (!PG_ARGISNULL(2)) {
        throw ArgumentError::invalid("penalty_decay", "needs penalty_blocks");
    }
    if (!PG_ARGISNULL(3)) {
        const Micros max_delay = interval_argument(fcinfo, 3, "max_delay");
        require_valid_max_delay("max_delay", algorithm, max_delay);
    }
    PG_RETURN_VOID();
}

}  // namespace
}  // namespace ratelimit::pg

RATELIMIT_SQL_FUNCTION(ratelimit_reset_policy_key, ratelimit::pg::reset_policy_key_body)
RATELIMIT_SQL_FUNCTION(ratelimit_block_policy_key, ratelimit::pg::block_policy_key_body)
RATELIMIT_SQL_FUNCTION(ratelimit_validate_policy_options,
                       ratelimit::pg::validate_policy_options_body)
