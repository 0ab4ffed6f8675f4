#include "pg/bridge/result_row.hpp"

#include "pg/bridge/guard.hpp"

extern "C" {
#include "access/htup_details.h"
#include "utils/array.h"
#include "utils/inval.h"
#include "utils/syscache.h"
#include "utils/typcache.h"
}

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

namespace {

// The session's returned-row descriptors, one per function (a handful of functions return rows).
struct ReturnedRow {
    Oid function;
    Oid relation;  // the row type's pg_class entry, whose invalidation drops the descriptor
    TupleDesc desc;
};
constexpr int kMaxReturnedRows = 32;
ReturnedRow returned_rows[kMaxReturnedRows];
int returned_row_count = 0;
bool invalidation_registered = false;

void forget_returned_rows() {
    for (int i = 0; i < returned_row_count; ++i)
        FreeTupleDesc(returned_rows[i].desc);
    returned_row_count = 0;
}

// A function replaced or dropped (its oid may come back with another return type).
void on_function_change(Datum, int, uint32) {
    forget_returned_rows();
}

// A row type altered (ALTER TYPE ... ADD ATTRIBUTE), or every relation at once.
void on_relation_change(Datum, Oid relation) {
    for (int i = 0; i < returned_row_count; ++i) {
        if (relation == InvalidOid || returned_rows[i].relation == relation) {
            forget_returned_rows();
            return;
        }
    }
}

}  // namespace

TupleDesc returned_row_descriptor(FunctionCallInfo fcinfo) {
    const Oid function = fcinfo->flinfo->fn_oid;
    for (int i = 0; i < returned_row_count; ++i) {
        if (returned_rows[i].function == function)
            return returned_rows[i].desc;
    }
    if (!invalidation_registered) {
        CacheRegisterSyscacheCallback(PROCOID, on_function_change, static_cast<Datum>(0));
        CacheRegisterRelcacheCallback(on_relation_change, static_cast<Datum>(0));
        invalidation_registered = true;
    }
    Oid type = get_func_rettype(function);
    const Oid element = get_element_type(type);
    if (OidIsValid(element))
        type = element;
    if (get_typtype(type) != TYPTYPE_COMPOSITE)
        elog(ERROR, "ratelimit: the function must return a row type");
    const Oid relation = get_typ_typrelid(type);
    MemoryContext caller = MemoryContextSwitchTo(TopMemoryContext);
    TupleDesc desc = BlessTupleDesc(lookup_rowtype_tupdesc_copy(type, -1));
    MemoryContextSwitchTo(caller);
    if (returned_row_count == kMaxReturnedRows)
        forget_returned_rows();
    returned_rows[returned_row_count++] = ReturnedRow{function, relation, desc};
    return desc;
}

Datum row_array(TupleDesc desc, int count, RowValues fill, const void* rows, bool may_hold_nulls) {
    const int natts = desc->natts;
    Datum* values = static_cast<Datum*>(palloc(sizeof(Datum) * natts));
    bool* nulls = static_cast<bool*>(palloc0(sizeof(bool) * natts));
    bool fixed = true;
    for (int a = 0; a < natts; ++a) {
        const Form_pg_attribute attribute = TupleDescAttr(desc, a);
        if (attribute->attlen <= 0 || attribute->attisdropped)
            fixed = false;
    }
    if (!fixed || count == 0 || may_hold_nulls) {
        Datum* elements = static_cast<Datum*>(palloc(sizeof(Datum) * (count > 0 ? count : 1)));
        for (int i = 0; i < count; ++i) {
            memset(nulls, 0, sizeof(bool) * natts);
            fill(rows, i, values, nulls);
            elements[i] = HeapTupleGetDatum(heap_form_tuple(desc, values, nulls));
        }
        return PointerGetDatum(
            construct_array(elements, count, desc->tdtypeid, -1, false, TYPALIGN_DOUBLE));
    }
    // Every row has the same size, so row i sits at a fixed stride, aligned as construct_array
    // aligns a composite element. The first row is heap_form_tuple's own; every other row gets
    // a copy of its header (type, version and flags included) and its own columns.
    fill(rows, 0, values, nulls);
    const HeapTuple first = heap_form_tuple(desc, values, nulls);
    const Size row_bytes = first->t_len;
    const Size header_bytes = first->t_data->t_hoff;
    const Size stride = att_align_nominal(row_bytes, TYPALIGN_DOUBLE);
    const Size data_offset = ARR_OVERHEAD_NONULLS(1);
    const Size total = data_offset + stride * static_cast<Size>(count);
    if (!AllocSizeIsValid(total))
        ereport(ERROR, (errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
                        errmsg("array size exceeds the maximum allowed (%d)",
                               static_cast<int>(MaxAllocSize))));
    auto* array = static_cast<ArrayType*>(palloc0(total));
    SET_VARSIZE(array, total);
    array->ndim = 1;
    array->dataoffset = 0;
    array->elemtype = desc->tdtypeid;
    ARR_DIMS(array)[0] = count;
    ARR_LBOUND(array)[0] = 1;
    char* data = ARR_DATA_PTR(array);
    memcpy(data, first->t_data, row_bytes);
    for (int i = 1; i < count; ++i) {
        fill(rows, i, values, nulls);
        char* row = data + stride * static_cast<Size>(i);
        memcpy(row, first->t_data, header_bytes);
        heap_fill_tuple(desc, values, nulls, row + header_bytes, row_bytes - header_bytes,
                        &reinterpret_cast<HeapTupleHeader>(row)->t_infomask, nullptr);
    }
    heap_freetuple(first);
    return PointerGetDatum(array);
}

bool row_argument(FunctionCallInfo fcinfo, int index, int count, Datum* values, bool* nulls) {
    HeapTupleHeader row = PG_GETARG_HEAPTUPLEHEADER(index);
    TupleDesc desc =
        lookup_rowtype_tupdesc(HeapTupleHeaderGetTypeId(row), HeapTupleHeaderGetTypMod(row));
    HeapTupleData tuple;
    tuple.t_len = HeapTupleHeaderGetDatumLength(row);
    ItemPointerSetInvalid(&tuple.t_self);
    tuple.t_tableOid = InvalidOid;
    tuple.t_data = row;
    const bool fits = desc->natts == count;
    if (fits)
        heap_deform_tuple(&tuple, desc, values, nulls);
    ReleaseTupleDesc(desc);
    return fits;
}

}  // namespace ratelimit::pg
