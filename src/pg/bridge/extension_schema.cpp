#include "pg/bridge/extension_schema.hpp"

extern "C" {
#include "catalog/namespace.h"
#include "utils/inval.h"
#include "utils/syscache.h"
}

namespace ratelimit::pg {
namespace {

// The one place the schema's name is written (sql/install/schema_and_clock.sql creates it).
constexpr const char* kSchemaName = "ratelimit";

// Plain values only: the callback may run wherever invalidations are taken in.
Oid cached_schema = InvalidOid;
bool callback_registered = false;

// Any change to pg_namespace (a schema dropped, created or renamed) forgets the schema: the
// next call looks it up again.
void on_namespace_invalidation(Datum, int, uint32) {
    cached_schema = InvalidOid;
}

Oid lookup() {
    if (!callback_registered) {
        CacheRegisterSyscacheCallback(NAMESPACEOID, on_namespace_invalidation, 0);
        callback_registered = true;
    }
    if (!OidIsValid(cached_schema))
        cached_schema = get_namespace_oid(kSchemaName, true);
    return cached_schema;
}

}  // namespace

Oid extension_schema() {
    const Oid schema = lookup();
    if (!OidIsValid(schema))
        ereport(ERROR, (errcode(ERRCODE_UNDEFINED_SCHEMA),
                        errmsg("schema \"%s\" does not exist", kSchemaName),
                        errhint("The extension ratelimit is not installed in this database: "
                                "CREATE EXTENSION ratelimit creates it.")));
    return schema;
}

Oid extension_schema_if_exists() {
    return lookup();
}

}  // namespace ratelimit::pg
