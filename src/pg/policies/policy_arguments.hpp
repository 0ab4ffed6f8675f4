// A policy call's arguments, read and checked before anything is decided, in the order the SQL
// layer always has: the arrays, their sizes, the cost, the tier, then each policy and its
// subject (the policy found in this backend's cache, policy_cache.hpp; the subject hashed when
// the policy hashes its keys; the key's override and the lists' verdicts found). The result is
// the core's PolicyCallInput (ratelimit/policy_decision.hpp) and, beside it, what the
// PostgreSQL layer needs to carry the decision out: each policy's counter key as datums.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "pg/bridge/postgres.hpp"
#include "pg/engines/key_state_table.hpp"
#include "pg/policies/policy_cache.hpp"
#include "ratelimit/policy.hpp"
#include "ratelimit/http_fields.hpp"
#include "ratelimit/policy_decision.hpp"

namespace ratelimit::pg {

// More policies would only hold more partition locks at once; real checks use two to four.
inline constexpr int kMaxPolicies = 16;

// The quota unit that makes a policy a concurrency limit, decided by leases only.
inline constexpr const char* kConcurrentRequests = "concurrent-requests";

// The argument names a call reports errors with: check has scalars, the others arrays.
struct ArgumentNames {
    std::string policies;
    std::string keys;
    bool scalar = false;
    // acquire_policy: the policy must be a concurrency policy; every other call refuses one.
    bool leases = false;

    std::string policy(int i) const {
        return scalar ? policies : policies + "[" + std::to_string(i + 1) + "]";
    }
    std::string key(int i) const {
        return scalar ? keys : keys + "[" + std::to_string(i + 1) + "]";
    }
};

// A text[] argument's elements (detoasted), or a scalar text as one element.
struct TextList {
    std::vector<Datum> values;
    std::vector<bool> nulls;
};
TextList text_list(FunctionCallInfo fcinfo, int index, bool scalar, const std::string& name);

// One policy of the call, resolved.
struct ResolvedPolicy {
    const PolicyRule* rule = nullptr;
    Datum key = 0;      // the subject as given
    Datum subject = 0;  // the state's key: the subject, or its SHA-256 when the policy hashes
    Datum space = 0;    // the policy's name: the state's namespace

    StateKey state_key() const { return StateKey{space, subject}; }
};

// A call's arguments and everything resolved from them before any key is touched.
struct PolicyCall {
    PolicyCallInput input;  // what the core decides from
    std::vector<ResolvedPolicy> policies;
    std::string tier_name;
    Caller caller;
    ArgumentNames names;
    // The call's copies of its policies whose rule differs from the cache's: a calendar
    // policy's with the window holding now set, a looked-up limit's. The policies' rule points
    // here instead of the cache.
    std::vector<std::unique_ptr<PolicyRule>> calendar_rules;
};

// Reads the call from `fcinfo` (p_cost third, p_tier fourth, p_ip fifth, p_user sixth);
// `policies` and `keys` are the first two arguments, already read (check_many passes one subject
// at a time).
PolicyCall read_policy_call(FunctionCallInfo fcinfo, const ArgumentNames& names,
                            const PolicyCatalog& catalog, Micros now, const TextList& policies,
                            const TextList& keys);

// read_policy_call with the first two arguments read from `fcinfo` as `names` says.
PolicyCall read_policy_call(FunctionCallInfo fcinfo, const ArgumentNames& names,
                            const PolicyCatalog& catalog, Micros now);

// check_many's subjects, each read as check(p_policy, subject, ...) reads its one and handed to
// `read` (which plans it) before the next is read.
std::vector<PolicyCall> read_check_many(FunctionCallInfo fcinfo, const PolicyCatalog& catalog,
                                        Micros now,
                                        const std::function<void(const PolicyCall&)>& read);

// check_http's p_reset_format and p_body_shape (its seventh and eighth arguments).
struct HttpFormats {
    ResetFormat reset;
    BodyShape body;
};
HttpFormats read_http_formats(FunctionCallInfo fcinfo);

// SHA-256 of the subject's UTF-8 bytes, as 64 lowercase hex digits (ratelimit.hash_subject).
Datum hashed_subject(Datum subject);

// The first `count` characters of UTF-8 text, as SQL's left(text, count).
std::string first_characters(std::string_view text, int count);

// The concurrency policy `name` (p_policy), with the errors every policy call gives: 22023 for
// an unknown policy (quoting 64 characters of the name) and for a policy that is not a
// concurrency policy.
const PolicyRule& concurrency_policy(const PolicyCatalog& catalog, std::string_view name);

}  // namespace ratelimit::pg
