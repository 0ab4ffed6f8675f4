// Returning one row from a function declared RETURNS TABLE(...), the shape PostgREST turns
// into a one-element JSON array.
#pragma once

#include "pg/postgres.hpp"

namespace ratelimit::pg {

// Hands `values` back as the function's only row. PostgreSQL code: call inside call_postgres().
Datum return_single_row(FunctionCallInfo fcinfo, Datum* values, bool* nulls);

}  // namespace ratelimit::pg
