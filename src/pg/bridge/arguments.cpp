#include "pg/bridge/arguments.hpp"

#include <utility>

#include "pg/compat/compat.hpp"
#include "pg/bridge/guard.hpp"

extern "C" {
#include "utils/array.h"
#include "utils/arrayaccess.h"
}
#include "ratelimit/error.hpp"
#include "ratelimit/validation.hpp"

namespace ratelimit::pg {

namespace {

void require_not_null(FunctionCallInfo fcinfo, int index, const char* name) {
    if (PG_ARGISNULL(index)) {
        throw ArgumentError::null(name);
    }
}

// Each scalar argument and the array that holds one per element.
constexpr std::pair<const char*, const char*> kArrays[] = {
    {"p_key", "p_keys"},        {"p_limit", "p_limits"},         {"p_period", "p_periods"},
    {"p_burst", "p_bursts"},    {"p_algorithm", "p_algorithms"}, {"p_engine", "p_engines"},
    {"p_subject", "p_subjects"}};

// A varlena argument or array element as a readable value. A value the client sent, or one an
// array holds, is never compressed or stored out of line, so the common case calls no
// PostgreSQL code; the test is pg_detoast_datum_packed's own.
Datum packed_value(Datum value) {
    const struct varlena* pointer = reinterpret_cast<const struct varlena*>(DatumGetPointer(value));
    if (!VARATT_IS_COMPRESSED(pointer) && !VARATT_IS_EXTERNAL(pointer))
        return value;
    Datum detoasted = 0;
    call_postgres([&] { detoasted = PointerGetDatum(PG_DETOAST_DATUM_PACKED(value)); });
    return detoasted;
}

const char* array_of(const std::string& scalar) {
    for (const auto& [one, many] : kArrays) {
        if (scalar == one)
            return many;
    }
    return nullptr;
}

}  // namespace

Datum key_argument(FunctionCallInfo fcinfo, int index, const char* name) {
    require_not_null(fcinfo, index, name);
    const Datum key = packed_value(PG_GETARG_DATUM(index));
    require_key(name, VARSIZE_ANY_EXHDR(DatumGetPointer(key)));
    return key;
}

std::int32_t int32_argument(FunctionCallInfo fcinfo, int index, const char* name) {
    require_not_null(fcinfo, index, name);
    return PG_GETARG_INT32(index);
}

Datum uuid_argument(FunctionCallInfo fcinfo, int index, const char* name) {
    require_not_null(fcinfo, index, name);
    return PG_GETARG_DATUM(index);
}

std::string_view text_bytes(Datum value) {
    const text* t = reinterpret_cast<const text*>(DatumGetPointer(value));
    return std::string_view(VARDATA_ANY(t), VARSIZE_ANY_EXHDR(t));
}

std::string_view name_argument(FunctionCallInfo fcinfo, int index, const char* name) {
    require_not_null(fcinfo, index, name);
    const text* value =
        reinterpret_cast<const text*>(DatumGetPointer(packed_value(PG_GETARG_DATUM(index))));
    return std::string_view(VARDATA_ANY(value), VARSIZE_ANY_EXHDR(value));
}

Micros interval_argument(FunctionCallInfo fcinfo, int index, const char* name) {
    require_not_null(fcinfo, index, name);
    return interval_value(name, PG_GETARG_INTERVAL_P(index));
}

void require_finite_interval(const char* name, const Interval* span) {
    if (!compat::interval_is_finite(span))
        throw ArgumentError::invalid(name, "must be finite");
}

Micros interval_value(const char* name, const Interval* span) {
    require_finite_interval(name, span);
    return interval_length(name, span->month, span->day, span->time);
}

ArrayArgument array_argument(FunctionCallInfo fcinfo, int index, const char* name, Oid element,
                             bool required) {
    ArrayArgument array;
    if (PG_ARGISNULL(index)) {
        if (required)
            throw ArgumentError::null(name);
        return array;
    }
    array.given = true;
    int dimensions = 0;
    call_postgres([&] {
        ArrayType* value = PG_GETARG_ARRAYTYPE_P(index);
        dimensions = ARR_NDIM(value);
        if (dimensions <= 1) {
            int16 length = 0;
            bool by_value = false;
            char align = 0;
            get_typlenbyvalalign(element, &length, &by_value, &align);
            deconstruct_array(value, element, length, by_value, align, &array.values, &array.nulls,
                              &array.count);
        }
    });
    if (dimensions > 1)
        throw ArgumentError::invalid(name, "must be a one-dimensional array");
    return array;
}

std::string element_name(const char* array, int index) {
    return std::string(array) + "[" + std::to_string(index + 1) + "]";
}

void rethrow_for_element(const ArgumentError& error, int index) {
    const char* array = array_of(error.argument());
    if (array == nullptr)
        throw error;
    const std::string name = element_name(array, index);
    const std::string detail = std::string(error.what()).substr(error.argument().size());
    throw ArgumentError(error.kind(), name, name + detail);
}

std::vector<Datum> key_array_argument(FunctionCallInfo fcinfo, int index, const char* element) {
    const char* name = array_of(element);
    if (PG_ARGISNULL(index))
        throw ArgumentError::null(name);
    // Read in place, flat or expanded (a plpgsql array variable): nothing is copied or
    // deconstructed first. The parameter is text[], whose elements are all laid out as text.
    AnyArrayType* array = nullptr;
    call_postgres([&] { array = PG_GETARG_ANY_ARRAY_P(index); });
    const int dimensions = AARR_NDIM(array);
    if (dimensions > 1)
        throw ArgumentError::invalid(name, "must be a one-dimensional array");
    const int count = dimensions == 0 ? 0 : AARR_DIMS(array)[0];
    require_batch_size(name, static_cast<std::size_t>(count));
    std::vector<Datum> keys(count);
    array_iter iterator;
    array_iter_setup(&iterator, array);
    for (int i = 0; i < count; ++i) {
        bool null = false;
        const Datum value = array_iter_next(&iterator, &null, i, -1, false, TYPALIGN_INT);
        try {
            if (null)
                throw ArgumentError::null(element);
            keys[i] = packed_value(value);
            require_key(element, VARSIZE_ANY_EXHDR(DatumGetPointer(keys[i])));
        } catch (const ArgumentError& error) {
            rethrow_for_element(error, i);
        }
    }
    return keys;
}

}  // namespace ratelimit::pg
