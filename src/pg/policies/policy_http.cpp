#include "pg/policies/policy_http.hpp"

#include <cstring>
#include <stdexcept>
#include <utility>

#include "pg/bridge/arguments.hpp"
#include "pg/bridge/clock.hpp"
#include "pg/bridge/guard.hpp"
#include "pg/bridge/result_row.hpp"
#include "ratelimit/error.hpp"

extern "C" {
#include "access/htup_details.h"
#include "utils/jsonb.h"
#include "utils/numeric.h"
#include "utils/typcache.h"
}

namespace ratelimit::pg {
namespace {

// jsonb keeps an object's keys ordered by length, then by bytes, each key once. Members put in
// that order beforehand let the whole object be serialized in one pass from an in-memory tree
// (JsonbValueToJsonb), instead of pushJsonbValue sorting every object as it closes it.
bool key_before(const JsonMember& a, const JsonMember& b) {
    if (a.name.size() != b.name.size())
        return a.name.size() < b.name.size();
    return std::memcmp(a.name.data(), b.name.data(), a.name.size()) < 0;
}

// PostgreSQL code: call inside call_postgres(). The values point into `text`, which outlives
// the serialization.
void set_string(JsonbValue* v, const std::string& text) {
    v->type = jbvString;
    v->val.string.len = static_cast<int>(text.size());
    v->val.string.val = const_cast<char*>(text.data());
}

void set_object(JsonbValue* v, const std::vector<JsonMember>& members);

void set_value(JsonbValue* v, const JsonMember& member) {
    switch (member.kind) {
        case JsonMember::Kind::kNull:
            v->type = jbvNull;
            break;
        case JsonMember::Kind::kString:
            set_string(v, member.text);
            break;
        case JsonMember::Kind::kNumber:
            v->type = jbvNumeric;
            v->val.numeric = int64_to_numeric(member.number);
            break;
        case JsonMember::Kind::kNumericText:
            v->type = jbvNumeric;
            v->val.numeric = DatumGetNumeric(
                DirectFunctionCall3(numeric_in, CStringGetDatum(member.text.c_str()),
                                    ObjectIdGetDatum(InvalidOid), Int32GetDatum(-1)));
            break;
        case JsonMember::Kind::kBool:
            v->type = jbvBool;
            v->val.boolean = member.flag;
            break;
        case JsonMember::Kind::kStrings: {
            const std::size_t count = member.strings.size();
            v->type = jbvArray;
            v->val.array.rawScalar = false;
            v->val.array.nElems = static_cast<int>(count);
            v->val.array.elems = static_cast<JsonbValue*>(palloc(sizeof(JsonbValue) * (count + 1)));
            for (std::size_t i = 0; i < count; ++i)
                set_string(&v->val.array.elems[i], member.strings[i]);
            break;
        }
        case JsonMember::Kind::kObject:
            set_object(v, member.members);
            break;
    }
}

void set_object(JsonbValue* v, const std::vector<JsonMember>& members) {
    const std::size_t count = members.size();
    // The members' indexes in jsonb's key order (an insertion sort: objects hold a few keys);
    // equal keys stay in the order given.
    std::size_t* order = static_cast<std::size_t*>(palloc(sizeof(std::size_t) * (count + 1)));
    for (std::size_t i = 0; i < count; ++i) {
        std::size_t j = i;
        while (j > 0 && key_before(members[i], members[order[j - 1]])) {
            order[j] = order[j - 1];
            --j;
        }
        order[j] = i;
    }
    v->type = jbvObject;
    v->val.object.pairs = static_cast<JsonbPair*>(palloc(sizeof(JsonbPair) * (count + 1)));
    int pairs = 0;
    for (std::size_t k = 0; k < count; ++k) {
        const JsonMember& member = members[order[k]];
        // A key given twice keeps its last value, as jsonb_build_object does.
        if (k + 1 < count && !key_before(member, members[order[k + 1]]))
            continue;
        JsonbPair& pair = v->val.object.pairs[pairs];
        set_string(&pair.key, member.name);
        set_value(&pair.value, member);
        pair.order = static_cast<uint32>(pairs);
        ++pairs;
    }
    v->val.object.nPairs = pairs;
    pfree(order);
}

[[noreturn]] void raise_overflow(HttpOverflow overflow) {
    call_postgres([&] {
        if (overflow == HttpOverflow::kTimestamp)
            ereport(ERROR, (errcode(ERRCODE_DATETIME_VALUE_OUT_OF_RANGE),
                            errmsg("timestamp out of range")));
        ereport(ERROR,
                (errcode(ERRCODE_NUMERIC_VALUE_OUT_OF_RANGE), errmsg("integer out of range")));
    });
    throw std::logic_error("unreachable");
}

// The decision argument: a ratelimit.policy_decision row whose every field is NULL counts as
// NULL (as SQL's IS NULL says of a row).
DecisionView decision_argument(FunctionCallInfo fcinfo, int index) {
    if (PG_ARGISNULL(index))
        throw ArgumentError::null("p_decision");
    constexpr int kFields = 12;  // the last, penalty_level, is not in the headers
    Datum values[kFields];
    bool nulls[kFields];
    char* policy = nullptr;
    char* reason = nullptr;
    call_postgres([&] {
        if (!row_argument(fcinfo, index, kFields, values, nulls))
            elog(ERROR, "ratelimit: p_decision must be a ratelimit.policy_decision");
        if (!nulls[1])
            policy = TextDatumGetCString(values[1]);
        if (!nulls[8])
            reason = TextDatumGetCString(values[8]);
    });
    bool all_null = true;
    for (bool is_null : nulls)
        all_null = all_null && is_null;
    if (all_null)
        throw ArgumentError::null("p_decision");
    DecisionView d;
    if (!nulls[0])
        d.allowed = DatumGetBool(values[0]);
    if (policy != nullptr)
        d.policy = std::string(policy);
    if (!nulls[2])
        d.limit = DatumGetInt32(values[2]);
    if (!nulls[3])
        d.remaining = DatumGetInt32(values[3]);
    if (!nulls[4])
        d.retry_after_ms = DatumGetInt64(values[4]);
    if (!nulls[5])
        d.reset_after_ms = DatumGetInt64(values[5]);
    if (!nulls[6])
        d.period_ms = DatumGetInt64(values[6]);
    if (!nulls[7])
        d.cost = DatumGetInt32(values[7]);
    if (reason != nullptr)
        d.reason = std::string(reason);
    if (!nulls[10])
        d.decided_at = from_timestamptz(DatumGetTimestampTz(values[10]));
    return d;
}

Datum http_headers_body(FunctionCallInfo fcinfo) {
    const DecisionView decision = decision_argument(fcinfo, 0);
    const ResetFormat format =
        parse_reset_format("p_reset_format", name_argument(fcinfo, 1, "p_reset_format"));
    return headers_jsonb(decision, format);
}

Datum http_body_body(FunctionCallInfo fcinfo) {
    const DecisionView decision = decision_argument(fcinfo, 0);
    const BodyShape shape = parse_body_shape("p_shape", name_argument(fcinfo, 1, "p_shape"));
    bool is_null = false;
    const Datum body = body_jsonb(decision, shape, &is_null);
    if (is_null) {
        fcinfo->isnull = true;
        return static_cast<Datum>(0);
    }
    return body;
}

}  // namespace

Datum jsonb_object(const std::vector<JsonMember>& members) {
    Datum result = 0;
    call_postgres([&] {
        JsonbValue object;
        set_object(&object, members);
        result = JsonbPGetDatum(JsonbValueToJsonb(&object));
    });
    return result;
}

std::vector<JsonMember> headers_members(const DecisionView& decision, ResetFormat format) {
    HeaderList headers;
    const HttpOverflow overflow = rate_limit_headers(decision, format, &headers);
    if (overflow != HttpOverflow::kNone)
        raise_overflow(overflow);
    std::vector<JsonMember> members(headers.size());
    for (std::size_t i = 0; i < headers.size(); ++i) {
        members[i].name = std::move(headers[i].first);
        if (headers[i].second) {
            members[i].kind = JsonMember::Kind::kString;
            members[i].text = std::move(*headers[i].second);
        }
    }
    return members;
}

Datum headers_jsonb(const DecisionView& decision, ResetFormat format) {
    return jsonb_object(headers_members(decision, format));
}

std::vector<JsonMember> body_members(const DecisionView& decision, BodyShape shape, bool* is_null) {
    bool denied = false;
    std::vector<BodyField> fields;
    const HttpOverflow overflow = rate_limit_body(decision, shape, &denied, &fields);
    if (overflow != HttpOverflow::kNone)
        raise_overflow(overflow);
    *is_null = !denied;
    std::vector<JsonMember> members(denied ? fields.size() : 0);
    for (std::size_t i = 0; i < fields.size(); ++i) {
        members[i].name = fields[i].name;
        if (fields[i].text) {
            members[i].kind = JsonMember::Kind::kString;
            members[i].text = std::move(*fields[i].text);
        } else if (fields[i].number) {
            members[i].kind = JsonMember::Kind::kNumber;
            members[i].number = *fields[i].number;
        } else if (fields[i].strings) {
            members[i].kind = JsonMember::Kind::kStrings;
            members[i].strings = std::move(*fields[i].strings);
        }
    }
    return members;
}

Datum body_jsonb(const DecisionView& decision, BodyShape shape, bool* is_null) {
    std::vector<JsonMember> members = body_members(decision, shape, is_null);
    return *is_null ? static_cast<Datum>(0) : jsonb_object(members);
}

}  // namespace ratelimit::pg

RATELIMIT_SQL_FUNCTION(ratelimit_http_headers, ratelimit::pg::http_headers_body)
RATELIMIT_SQL_FUNCTION(ratelimit_http_body, ratelimit::pg::http_body_body)
