// Reading SQL arguments: a NULL where a value is required is an ArgumentError naming the
// parameter, never a silent NULL result (the functions are not STRICT on purpose).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "pg/bridge/postgres.hpp"
#include "ratelimit/error.hpp"
#include "ratelimit/time.hpp"

namespace ratelimit::pg {

// A text key argument, detoasted and checked against the key rules (non-empty, bounded).
Datum key_argument(FunctionCallInfo fcinfo, int index, const char* name);

std::int32_t int32_argument(FunctionCallInfo fcinfo, int index, const char* name);

Datum uuid_argument(FunctionCallInfo fcinfo, int index, const char* name);

// The bytes of a text datum (detoasted, or short-header packed).
std::string_view text_bytes(Datum value);

// A text argument naming something (an algorithm, an engine), as a view of its bytes; valid
// while the argument is (the rest of the call).
std::string_view name_argument(FunctionCallInfo fcinfo, int index, const char* name);

// An interval argument as core microseconds (see interval_length: no months, > 0, <= 365 days).
Micros interval_argument(FunctionCallInfo fcinfo, int index, const char* name);

// An interval refused when infinite, as `name`: from PostgreSQL 17 'infinity' and '-infinity'
// are intervals, which no limit, duration or wait can be.
void require_finite_interval(const char* name, const Interval* span);

// An interval value as core microseconds, as interval_argument reads an argument.
Micros interval_value(const char* name, const Interval* span);

// One array argument, deconstructed: `values` and `nulls` live in the call's memory. A NULL
// array is an error when `required`, else `given` stays false. More than one dimension is
// refused (22023 naming the argument).
struct ArrayArgument {
    Datum* values = nullptr;
    bool* nulls = nullptr;
    int count = 0;
    bool given = false;
};

ArrayArgument array_argument(FunctionCallInfo fcinfo, int index, const char* name, Oid element,
                             bool required);

// The element's name in messages: p_limits[2] for the second limit (SQL arrays count from 1).
std::string element_name(const char* array, int index);

// Re-raises a core error about a scalar argument (p_limit) as one about the array element it
// came from (p_limits[2]), keeping the rest of the message.
[[noreturn]] void rethrow_for_element(const ArgumentError& error, int index);

// The keys of a batch call (p_keys of consume_many, p_subjects of check_many), each checked as
// key_argument checks one key, all before any is used: one dimension, 1 to kMaxBatchElements
// elements, none NULL; an error names the element (p_keys[7]). `element` is the scalar's
// name (p_key, p_subject). The datums are detoasted and live in the call's memory.
std::vector<Datum> key_array_argument(FunctionCallInfo fcinfo, int index, const char* element);

}  // namespace ratelimit::pg
