// The schema of the extension ratelimit: fixed (the extension is not relocatable and its script
// creates the schema ratelimit), looked up once per backend and kept until a change to
// pg_namespace invalidates it, so that DROP EXTENSION and CREATE EXTENSION in one session find
// the new schema. It is where the extension's tables are, whichever schema the calling function
// was declared in (ratelimit_router's, an app's drop-ins').
#pragma once

#include "pg/bridge/postgres.hpp"

namespace ratelimit::pg {

// The schema's OID; ERROR (3F000, with a hint) when the extension's schema does not exist.
// PostgreSQL code: call it inside call_postgres().
Oid extension_schema();

// The schema's OID, or InvalidOid when it does not exist (an extension not installed in this
// database). PostgreSQL code: call it inside call_postgres().
Oid extension_schema_if_exists();

}  // namespace ratelimit::pg
