// Routing for ratelimit_router (sql/router/configuration.sql): the routing key of a key (its hash
// tag, ratelimit/routing_key.hpp) and the hash PL/Proxy's RUN ON masks into a partition,
// hashtext() of the routing key. The router computes them for every routed call, and for every
// key of a batch before PL/Proxy splits it, so they are one pass in C rather than a SQL
// expression per key.
#include <cstdint>
#include <string_view>

#include "pg/bridge/guard.hpp"
#include "pg/bridge/postgres.hpp"

extern "C" {
#include "catalog/pg_type.h"
#include "common/hashfn.h"
#include "utils/array.h"
}

#include "ratelimit/routing_key.hpp"

namespace ratelimit::pg {
namespace {

std::string_view routing_key_of(const text* key) {
    return routing_key(std::string_view(VARDATA_ANY(key), VARSIZE_ANY_EXHDR(key)));
}

// hashtext() of the routing key: the database's default collation is deterministic, so hashtext
// hashes the bytes, as here.
std::int32_t routing_hash_of(const text* key) {
    const std::string_view tag = routing_key_of(key);
    return DatumGetInt32(
        hash_any(reinterpret_cast<const unsigned char*>(tag.data()), static_cast<int>(tag.size())));
}

// routing_key(p_key text) RETURNS text, strict.
Datum routing_key_body(FunctionCallInfo fcinfo) {
    Datum result = 0;
    call_postgres([&] {
        const std::string_view tag = routing_key_of(PG_GETARG_TEXT_PP(0));
        result =
            PointerGetDatum(cstring_to_text_with_len(tag.data(), static_cast<int>(tag.size())));
    });
    return result;
}

// routing_hash(p_key text) RETURNS integer, strict.
Datum routing_hash_body(FunctionCallInfo fcinfo) {
    std::int32_t hash = 0;
    call_postgres([&] { hash = routing_hash_of(PG_GETARG_TEXT_PP(0)); });
    return Int32GetDatum(hash);
}

// routing_hashes(p_keys text[]) RETURNS integer[], strict: each key's routing_hash, in order; a
// NULL key's is NULL (the calls check their keys first).
Datum routing_hashes_body(FunctionCallInfo fcinfo) {
    Datum result = 0;
    call_postgres([&] {
        ArrayType* keys = PG_GETARG_ARRAYTYPE_P(0);
        Datum* elements = nullptr;
        bool* nulls = nullptr;
        int count = 0;
        deconstruct_array(keys, TEXTOID, -1, false, TYPALIGN_INT, &elements, &nulls, &count);
        for (int i = 0; i < count; ++i) {
            if (!nulls[i])
                elements[i] = Int32GetDatum(routing_hash_of(DatumGetTextPP(elements[i])));
        }
        int dims[1] = {count};
        int lower_bounds[1] = {1};
        result = PointerGetDatum(construct_md_array(elements, nulls, count > 0 ? 1 : 0, dims,
                                                    lower_bounds, INT4OID, 4, true, TYPALIGN_INT));
    });
    return result;
}

}  // namespace
}  // namespace ratelimit::pg

RATELIMIT_SQL_FUNCTION(ratelimit_router_routing_key, ratelimit::pg::routing_key_body)
RATELIMIT_SQL_FUNCTION(ratelimit_router_routing_hash, ratelimit::pg::routing_hash_body)
RATELIMIT_SQL_FUNCTION(ratelimit_router_routing_hashes, ratelimit::pg::routing_hashes_body)
