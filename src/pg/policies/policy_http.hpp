// Policy decisions over HTTP, as jsonb: the headers and 429 bodies of ratelimit/http_fields.hpp
// built with PostgreSQL's jsonb builder, for ratelimit.http_headers, http_body and check_http.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "pg/bridge/postgres.hpp"
#include "ratelimit/http_fields.hpp"

namespace ratelimit::pg {

// One member of a jsonb object under construction: a string, a number, a boolean, an array of
// strings, a nested object or JSON null.
struct JsonMember {
    enum class Kind {
        kNull,
        kString,
        kNumber,
        kNumericText,  // `text` is a decimal number ("1.000"), kept with its scale
        kBool,
        kStrings,
        kObject  // `members`, built in the same pass as the object holding it
    } kind = Kind::kNull;
    std::string name;
    std::string text;
    std::int64_t number = 0;
    bool flag = false;
    std::vector<std::string> strings;
    std::vector<JsonMember> members;
};

// The jsonb object of `members` (in any order), in the caller's memory context.
Datum jsonb_object(const std::vector<JsonMember>& members);

// http_headers(decision) and http_body(decision) as jsonb (a decision row alone: no pk, no qu,
// one policy) (the body is SQL NULL, `*is_null`,
// when the decision allowed). Raise 22008/22003 for waits and counts past what SQL holds.
Datum headers_jsonb(const DecisionView& decision, ResetFormat format);
std::vector<JsonMember> headers_members(const DecisionView& decision, ResetFormat format);
std::vector<JsonMember> body_members(const DecisionView& decision, BodyShape shape, bool* is_null);
Datum body_jsonb(const DecisionView& decision, BodyShape shape, bool* is_null);

}  // namespace ratelimit::pg
