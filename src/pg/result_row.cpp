#include "pg/result_row.hpp"

#include "pg/guard.hpp"

namespace ratelimit::pg {

Tuplestorestate* begin_result_rows(FunctionCallInfo fcinfo, TupleDesc* desc) {
    auto* rsinfo = reinterpret_cast<ReturnSetInfo*>(fcinfo->resultinfo);
    if (rsinfo == nullptr || !IsA(rsinfo, ReturnSetInfo) ||
        (rsinfo->allowedModes & SFRM_Materialize) == 0) {
        ereport(ERROR, (errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
                        errmsg("set-valued function called in context that cannot accept a set")));
    }
    TupleDesc tupdesc = nullptr;
    if (get_call_result_type(fcinfo, nullptr, &tupdesc) != TYPEFUNC_COMPOSITE) {
        elog(ERROR, "ratelimit: return type must be a row type");
    }
    MemoryContext caller_context = MemoryContextSwitchTo(rsinfo->econtext->ecxt_per_query_memory);
    *desc = CreateTupleDescCopy(tupdesc);
    Tuplestorestate* store = tuplestore_begin_heap(true, false, work_mem);
    MemoryContextSwitchTo(caller_context);
    rsinfo->returnMode = SFRM_Materialize;
    rsinfo->setResult = store;
    rsinfo->setDesc = *desc;
    return store;
}

Datum return_single_row(FunctionCallInfo fcinfo, Datum* values, bool* nulls) {
    TupleDesc desc = nullptr;
    Tuplestorestate* store = begin_result_rows(fcinfo, &desc);
    tuplestore_putvalues(store, desc, values, nulls);
    return static_cast<Datum>(0);
}

Datum text_datum(std::string_view value) {
    Datum result = 0;
    call_postgres([&] {
        result =
            PointerGetDatum(cstring_to_text_with_len(value.data(), static_cast<int>(value.size())));
    });
    return result;
}

}  // namespace ratelimit::pg
