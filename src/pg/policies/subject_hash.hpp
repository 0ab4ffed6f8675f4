// Subjects kept as their SHA-256, so that no IP or e-mail is stored in clear: one digest for the
// policies' hash_key and the orphaned-user cleanup's tiers.
#pragma once

#include "pg/bridge/postgres.hpp"

namespace ratelimit::pg {

// A text datum "<prefix>:<64 lowercase hex digits>" (just the digits when `prefix` is null) of
// the SHA-256 of `length` bytes. PostgreSQL code: call inside call_postgres().
Datum sha256_hex(const char* prefix, const char* bytes, int length);

}  // namespace ratelimit::pg
