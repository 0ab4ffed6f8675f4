#include "pg/arguments.hpp"

#include <utility>

#include "pg/guard.hpp"

extern "C" {
#include "utils/array.h"
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
    text* key = nullptr;
    call_postgres([&] { key = PG_GETARG_TEXT_PP(index); });
    require_key(name, VARSIZE_ANY_EXHDR(key));
    return PointerGetDatum(key);
}

std::int32_t int32_argument(FunctionCallInfo fcinfo, int index, const char* name) {
    require_not_null(fcinfo, index, name);
    return PG_GETARG_INT32(index);
}

Datum uuid_argument(FunctionCallInfo fcinfo, int index, const char* name) {
    require_not_null(fcinfo, index, name);
    return PG_GETARG_DATUM(index);
}

std::string_view name_argument(FunctionCallInfo fcinfo, int index, const char* name) {
    require_not_null(fcinfo, index, name);
    text* value = nullptr;
    call_postgres([&] { value = PG_GETARG_TEXT_PP(index); });
    return std::string_view(VARDATA_ANY(value), VARSIZE_ANY_EXHDR(value));
}

Micros interval_argument(FunctionCallInfo fcinfo, int index, const char* name) {
    require_not_null(fcinfo, index, name);
    const Interval* span = PG_GETARG_INTERVAL_P(index);
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
    const ArrayArgument array = array_argument(fcinfo, index, name, TEXTOID, true);
    require_batch_size(name, static_cast<std::size_t>(array.count));
    std::vector<Datum> keys(array.count);
    for (int i = 0; i < array.count; ++i) {
        try {
            if (array.nulls[i])
                throw ArgumentError::null(element);
            call_postgres(
                [&] { keys[i] = PointerGetDatum(PG_DETOAST_DATUM_PACKED(array.values[i])); });
            require_key(element, VARSIZE_ANY_EXHDR(DatumGetPointer(keys[i])));
        } catch (const ArgumentError& error) {
            rethrow_for_element(error, i);
        }
    }
    return keys;
}

}  // namespace ratelimit::pg
