// Reading SQL arguments: a NULL where a value is required is an ArgumentError naming the
// parameter, never a silent NULL result (the functions are not STRICT on purpose).
#pragma once

#include <cstdint>
#include <string_view>

#include "pg/postgres.hpp"
#include "ratelimit/time.hpp"

namespace ratelimit::pg {

// A text key argument, detoasted and checked against the key rules (non-empty, bounded).
Datum key_argument(FunctionCallInfo fcinfo, int index, const char* name);

std::int32_t int32_argument(FunctionCallInfo fcinfo, int index, const char* name);

Datum uuid_argument(FunctionCallInfo fcinfo, int index, const char* name);

// A text argument naming something (an algorithm, an engine), as a view of its bytes; valid
// while the argument is (the rest of the call).
std::string_view name_argument(FunctionCallInfo fcinfo, int index, const char* name);

// An interval argument as core microseconds (see interval_length: no months, > 0, <= 365 days).
Micros interval_argument(FunctionCallInfo fcinfo, int index, const char* name);

}  // namespace ratelimit::pg
