// Returning rows from a function declared RETURNS TABLE(...); one row is the shape PostgREST
// turns into a one-element JSON array.
#pragma once

#include <string_view>

#include "pg/postgres.hpp"

namespace ratelimit::pg {

// Starts the materialized result set of a function declared RETURNS TABLE(...) (or SETOF a
// row type): rows go into the returned store with tuplestore_putvalues(store, *desc, ...).
// PostgreSQL code: call inside call_postgres().
Tuplestorestate* begin_result_rows(FunctionCallInfo fcinfo, TupleDesc* desc);

// Hands `values` back as the function's only row. PostgreSQL code: call inside call_postgres().
Datum return_single_row(FunctionCallInfo fcinfo, Datum* values, bool* nulls);

// A text datum holding `value` (palloc'd in the current memory context).
Datum text_datum(std::string_view value);

}  // namespace ratelimit::pg
