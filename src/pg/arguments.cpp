#include "pg/arguments.hpp"

#include "pg/guard.hpp"
#include "ratelimit/error.hpp"
#include "ratelimit/validation.hpp"

namespace ratelimit::pg {

namespace {

void require_not_null(FunctionCallInfo fcinfo, int index, const char* name) {
    if (PG_ARGISNULL(index)) {
        throw ArgumentError::null(name);
    }
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

}  // namespace ratelimit::pg
