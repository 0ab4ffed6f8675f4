// Returning rows from a function declared RETURNS TABLE(...); one row is the shape PostgREST
// turns into a one-element JSON array.
#pragma once

#include <string_view>

#include "pg/bridge/postgres.hpp"

namespace ratelimit::pg {

// Starts the materialized result set of a function declared RETURNS TABLE(...) (or SETOF a
// row type): rows go into the returned store with tuplestore_putvalues(store, *desc, ...).
// PostgreSQL code: call inside call_postgres().
Tuplestorestate* begin_result_rows(FunctionCallInfo fcinfo, TupleDesc* desc);

// Hands `values` back as the function's only row. PostgreSQL code: call inside call_postgres().
Datum return_single_row(FunctionCallInfo fcinfo, Datum* values, bool* nulls);

// A text datum holding `value` (palloc'd in the current memory context).
Datum text_datum(std::string_view value);

// The descriptor of the row type the calling function returns, or of the rows in the array it
// returns. Looked up once per session, not per statement (fn_extra only lasts one execution of
// the calling statement), and dropped when any function or that row type changes. Use it at
// once: a call that may take a lock or read the catalog may drop it. PostgreSQL code: call
// inside call_postgres().
TupleDesc returned_row_descriptor(FunctionCallInfo fcinfo);

// Writes row `index`'s column values into `values` and marks its NULL columns in `nulls`
// (desc->natts of each; `nulls` comes all false).
using RowValues = void (*)(const void* rows, int index, Datum* values, bool* nulls);

// An array of `count` rows of `desc`, the same bytes as construct_array() over heap_form_tuple()
// rows, written in place in one allocation when every column is fixed-length and no row has a
// NULL (`may_hold_nulls` false: the decision rows, as a rule): nothing is allocated or copied per
// row. PostgreSQL code: call inside call_postgres().
Datum row_array(TupleDesc desc, int count, RowValues fill, const void* rows, bool may_hold_nulls);

// Deforms the composite argument `index` (not NULL) into `values` and `nulls`, `count` fields;
// false, and nothing written, when its row type has another number of fields. PostgreSQL code:
// call inside call_postgres().
bool row_argument(FunctionCallInfo fcinfo, int index, int count, Datum* values, bool* nulls);

}  // namespace ratelimit::pg
