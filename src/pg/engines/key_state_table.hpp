// The table engines' storage: one row per key in ratelimit.key_state (logged) or
// ratelimit.key_state_unlogged, read and written through the heap and its primary key directly
// (no SQL, no plan), which is what makes a decision cheaper than the same logic in plpgsql.
//
// Concurrency rules:
//  - Every read takes a fresh snapshot, so a decision starts from the latest committed state.
//  - A decision that changes the key writes the row version it read. If another transaction
//    wrote that version in the meantime, the write waits for it to end and reports the change;
//    the caller then reads and decides again. A write that succeeds was therefore decided on
//    the latest state, and later writers wait for its transaction: decisions on one key are
//    serialized and none is lost, under any isolation level. No row lock is taken first, so
//    one decision costs one row write (and, for the logged table, one WAL record).
//  - A key with no row is created by speculative insertion, as INSERT ... ON CONFLICT does: when
//    two first calls meet, one row goes in and the other call reads it and decides again. No
//    lock is held for a created key, so one transaction can create any number of keys.
//  - A row is identified by (policy, key): the native API's keys have policy '', a policy's
//    subjects have its name, so no spelling of a key reaches another namespace's counter.
//  - Cleanup is a plain DELETE: it waits for a writer's transaction and re-checks expires_at on
//    the latest version, so it never removes a row a concurrent decision has just renewed.
//  - The look-up takes no SSI predicate lock: it scans with SnapshotAny and tests each version
//    against the fresh snapshot itself. Under SERIALIZABLE, the engine's read needs none (the
//    row write above serializes decisions on a key), and predicate locks on shared btree pages
//    would make distinct keys fail each other with 40001. The writes still check for conflicts
//    with the predicate locks of SQL that reads the tables, so that SQL keeps its protection.
//
// Only the primary key (policy, key) is indexed: every other column changes on each decision, and
// leaving them out of any index (with fillfactor room on each page) keeps updates HOT. An index
// the owner adds is maintained as INSERT and UPDATE would (every index on an insert or a non-HOT
// update, partial and expression indexes included); a trigger, a CHECK constraint, an exclusion
// constraint or a deferrable unique index, which the direct writes cannot honour, make a writing
// call fail with SQLSTATE 55000 before anything is written.
//
// Everything here is PostgreSQL code: call it inside call_postgres(). The structs hold plain
// values only, so they may be filled there.
#pragma once

#include <cstdint>

#include "pg/bridge/postgres.hpp"
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

// Which row: the namespace (a text datum: '' for the native API, else a policy's name) and the
// key within it (a text datum).
struct StateKey {
    Datum space = 0;
    Datum key = 0;
};

struct KeyStateTable {
    Relation heap = nullptr;
    Relation primary_key = nullptr;
    LOCKMODE lock_mode = NoLock;
    // Every index of the table when it has more than the primary key (writing calls only), else
    // none: only then do writes build index entries through an executor state.
    int index_count = 0;
    Relation* indexes = nullptr;
    // False for a table of a version before 0.6.0 (no policy column, primary key (key)): it
    // serves the native API's keys until ALTER EXTENSION ratelimit UPDATE.
    bool has_policy = true;
    // The unlogged table on a hot standby: only its empty init fork exists there, so it holds
    // no key, and it is not opened at all (reading it would fail as if storage were lost).
    bool empty_in_recovery = false;
};

// The relation `name` of the extension in `schema`; an ERROR (42P01, with a hint to reinstall)
// when it is missing. PostgreSQL code: call inside call_postgres().
Oid require_relation(const char* name, Oid schema);

// Opens the engine's table, found in `schema` (the schema of the calling function). `writing`
// decides the table lock (ROW EXCLUSIVE vs ACCESS SHARE) and refuses read-only transactions.
void open_key_state_table(Oid schema, Engine engine, bool writing, const char* function_name,
                          KeyStateTable* table);

void close_key_state_table(KeyStateTable* table);

// Reads the key's latest committed row (row->found says whether there is one).
void read_key_row(const KeyStateTable& table, const StateKey& key, StoredKeyRow* row);

// Inserts the row (row.found == false) or updates the version read, then makes it visible to
// the rest of the transaction. False when the version read was changed or deleted by another
// transaction meanwhile, or when another transaction created the key first: read and decide
// again.
bool write_key_row(const KeyStateTable& table, const StateKey& key, const StoredKeyRow& row);

// Deletes the version read; false as for write_key_row.
bool delete_key_row(const KeyStateTable& table, const StoredKeyRow& row);

}  // namespace ratelimit::pg
