// Reading SQL arguments: a NULL where a value is required is an ArgumentError naming the
// parameter, never a silent NULL result (the functions are not STRICT on purpose).
#pragma once

#include <cstdint>

#include "pg/postgres.hpp"

namespace ratelimit::pg {

// A text key argument, detoasted and checked against the key rules (non-empty, bounded).
Datum key_argument(FunctionCallInfo fcinfo, int index, const char* name);

std::int32_t int32_argument(FunctionCallInfo fcinfo, int index, const char* name);

Datum uuid_argument(FunctionCallInfo fcinfo, int index, const char* name);

}  // namespace ratelimit::pg
