// The table engines' storage: one row per key in ratelimit.key_state (logged) or
// ratelimit.key_state_unlogged, read and written through the heap and its primary key directly
// (no SQL, no plan), which is what makes a decision cheaper than the same logic in plpgsql.
//
// Locking rules:
//  - A decision that may write holds the key's row lock (FOR NO KEY UPDATE strength) from
//    reading the row until its transaction ends, so decisions on one key are serialized and
//    none is lost, under any isolation level.
//  - The row is read with a fresh snapshot taken after any wait, so the latest committed state
//    is what is decided on; if a concurrent writer changed or deleted the row while we waited
//    for its lock, we read again.
//  - A key with no row is created under a transaction-scoped advisory lock on the key's hash,
//    taken before reading again, so two first calls cannot both insert it.
//  - Cleanup is a plain DELETE: it waits for the row lock and re-checks expires_at on the
//    latest version, so it never removes a row a concurrent decision has just renewed.
//
// Only the primary key is indexed: every other column changes on each decision, and leaving
// them out of any index (with fillfactor room on each page) keeps updates HOT.
//
// Everything here is PostgreSQL code: call it inside call_postgres(). The structs hold plain
// values only, so they may be filled there.
#pragma once

#include <cstdint>

#include "pg/postgres.hpp"
#include "ratelimit/engine.hpp"

namespace ratelimit::pg {

// The key's row, as plain values. `log` holds `log_values` int8s: (at, units) pairs.
struct StoredKeyRow {
    bool found = false;
    ItemPointerData tid;
    std::int16_t algorithm = 0;
    std::int64_t instant = 0;
    std::int64_t amount = 0;
    std::int64_t carry = 0;
    int log_values = 0;
    std::int64_t* log = nullptr;
    std::int64_t blocked_until = 0;
    std::int64_t expires_at = 0;
};

struct KeyStateTable {
    Relation heap = nullptr;
    Relation primary_key = nullptr;
    LOCKMODE lock_mode = NoLock;
};

// Opens the engine's table, found in `schema` (the schema of the calling function). `writing`
// decides the table lock (ROW EXCLUSIVE vs ACCESS SHARE) and refuses read-only transactions.
void open_key_state_table(Oid schema, Engine engine, bool writing, const char* function_name,
                          KeyStateTable* table);

void close_key_state_table(KeyStateTable* table);

// Reads the key's row. With `lock`, the row is locked as described above, and when there is
// no row the key's advisory lock is held on return, so the caller may insert it.
void read_key_row(const KeyStateTable& table, Datum key, bool lock, StoredKeyRow* row);

// Inserts the row (row.found == false) or updates it in place, then makes it visible to the
// rest of the transaction.
void write_key_row(const KeyStateTable& table, Datum key, const StoredKeyRow& row);

// Deletes a row read with lock = true.
void delete_key_row(const KeyStateTable& table, const StoredKeyRow& row);

}  // namespace ratelimit::pg
