#include "pg/key_state_table.hpp"

extern "C" {
#include "access/heapam.h"
#include "access/htup_details.h"
#include "access/stratnum.h"
#include "access/table.h"
#include "access/tableam.h"
#include "access/genam.h"
#include "catalog/index.h"
#include "storage/lock.h"
#include "tcop/utility.h"
#include "utils/array.h"
#include "utils/fmgroids.h"
#include "utils/rel.h"
#include "utils/snapmgr.h"
}

namespace ratelimit::pg {
namespace {

// The columns of ratelimit.key_state and key_state_unlogged, in order.
enum Column {
    kKey = 0,
    kAlgorithm,
    kInstant,
    kAmount,
    kCarry,
    kLog,
    kBlockedUntil,
    kExpiresAt,
    kPolicy,  // added in 0.6.0, hence last
    kColumnCount
};

constexpr Oid kColumnTypes[kColumnCount] = {TEXTOID,      INT2OID, INT8OID, INT8OID, INT8OID,
                                            INT8ARRAYOID, INT8OID, INT8OID, TEXTOID};

// First key of the two-part advisory locks taken when a key's row is created ("RLKS"), so
// they stay apart from an application's own advisory locks.
constexpr std::int32_t kKeyStateLockClass = 0x524C4B53;

const char* table_name(Engine engine) {
    return engine == Engine::kUnlogged ? "key_state_unlogged" : "key_state";
}

const char* primary_key_name(Engine engine) {
    return engine == Engine::kUnlogged ? "key_state_unlogged_pkey" : "key_state_pkey";
}

Oid require_relation(const char* name, Oid schema) {
    Oid relid = get_relname_relid(name, schema);
    if (!OidIsValid(relid)) {
        ereport(ERROR, (errcode(ERRCODE_UNDEFINED_TABLE),
                        errmsg("ratelimit: relation \"%s\" is missing from schema \"%s\"", name,
                               get_namespace_name(schema)),
                        errhint("Reinstall the extension: DROP EXTENSION ratelimit; CREATE "
                                "EXTENSION ratelimit;")));
    }
    return relid;
}

// The table is written without SQL, so its shape is checked instead of trusted. A table of a
// version before 0.6.0 lacks the last column; true when the table has it.
bool check_shape(Relation heap) {
    TupleDesc desc = RelationGetDescr(heap);
    const bool has_policy = desc->natts == kColumnCount;
    const int columns = has_policy ? kColumnCount : kPolicy;
    bool ok = desc->natts == columns;
    for (int i = 0; ok && i < columns; ++i) {
        Form_pg_attribute attribute = TupleDescAttr(desc, i);
        ok = !attribute->attisdropped && attribute->atttypid == kColumnTypes[i];
    }
    if (!ok) {
        ereport(ERROR,
                (errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
                 errmsg("ratelimit: table \"%s\" has been altered", RelationGetRelationName(heap)),
                 errhint("Reinstall the extension to restore it.")));
    }
    return has_policy;
}

std::int64_t int8_column(Datum* values, bool* nulls, int column) {
    return nulls[column] ? 0 : DatumGetInt64(values[column]);
}

void fill_row(TupleDesc desc, HeapTuple tuple, StoredKeyRow* row) {
    Datum values[kColumnCount];
    bool nulls[kColumnCount];
    heap_deform_tuple(tuple, desc, values, nulls);
    row->found = true;
    row->tid = tuple->t_self;
    row->algorithm = nulls[kAlgorithm] ? 0 : DatumGetInt16(values[kAlgorithm]);
    row->instant = int8_column(values, nulls, kInstant);
    row->amount = int8_column(values, nulls, kAmount);
    row->carry = int8_column(values, nulls, kCarry);
    row->blocked_until = int8_column(values, nulls, kBlockedUntil);
    row->expires_at = int8_column(values, nulls, kExpiresAt);
    row->log_values = 0;
    row->log = nullptr;
    if (!nulls[kLog]) {
        ArrayType* array = DatumGetArrayTypeP(values[kLog]);
        Datum* elements = nullptr;
        bool* element_nulls = nullptr;
        int count = 0;
        deconstruct_array(array, INT8OID, sizeof(int64), FLOAT8PASSBYVAL, TYPALIGN_DOUBLE,
                          &elements, &element_nulls, &count);
        row->log = static_cast<std::int64_t*>(palloc(sizeof(std::int64_t) * (count + 1)));
        for (int i = 0; i < count; ++i) {
            row->log[i] = element_nulls[i] ? 0 : DatumGetInt64(elements[i]);
        }
        row->log_values = count;
    }
}

// One look-up of the key through the primary key, with a snapshot taken now. With `row`, the
// version found is read into it.
bool find_row(const KeyStateTable& table, const StateKey& key, ItemPointer tid, StoredKeyRow* row) {
    ScanKeyData scan_keys[2];
    int count = 0;
    if (table.has_policy) {
        ScanKeyEntryInitialize(&scan_keys[count], 0, kPolicy + 1, BTEqualStrategyNumber, InvalidOid,
                               table.primary_key->rd_indcollation[count], F_TEXTEQ, key.space);
        ++count;
    }
    ScanKeyEntryInitialize(&scan_keys[count], 0, kKey + 1, BTEqualStrategyNumber, InvalidOid,
                           table.primary_key->rd_indcollation[count], F_TEXTEQ, key.key);
    ++count;
    Snapshot snapshot = RegisterSnapshot(GetLatestSnapshot());
    SysScanDesc scan = systable_beginscan(table.heap, RelationGetRelid(table.primary_key), true,
                                          snapshot, count, scan_keys);
    HeapTuple tuple = systable_getnext(scan);
    bool found = HeapTupleIsValid(tuple);
    if (found) {
        *tid = tuple->t_self;
        // Read in place: fill_row copies every value out while the scan still pins the page.
        if (row != nullptr)
            fill_row(RelationGetDescr(table.heap), tuple, row);
    }
    systable_endscan(scan);
    UnregisterSnapshot(snapshot);
    return found;
}

void lock_key_for_insert(const StateKey& key) {
    text* key_text = DatumGetTextPP(key.key);
    text* space_text = DatumGetTextPP(key.space);
    uint32 hash = hash_bytes(reinterpret_cast<const unsigned char*>(VARDATA_ANY(key_text)),
                             static_cast<int>(VARSIZE_ANY_EXHDR(key_text)));
    if (VARSIZE_ANY_EXHDR(space_text) > 0) {
        hash = hash_combine(
            hash, hash_bytes(reinterpret_cast<const unsigned char*>(VARDATA_ANY(space_text)),
                             static_cast<int>(VARSIZE_ANY_EXHDR(space_text))));
    }
    LOCKTAG tag;
    SET_LOCKTAG_ADVISORY(tag, MyDatabaseId, static_cast<uint32>(kKeyStateLockClass), hash, 2);
    (void)LockAcquire(&tag, ExclusiveLock, false, false);
}

HeapTuple form_row(const KeyStateTable& table, const StateKey& key, const StoredKeyRow& row) {
    Datum values[kColumnCount];
    bool nulls[kColumnCount] = {false};
    values[kKey] = key.key;
    if (table.has_policy)
        values[kPolicy] = key.space;
    values[kAlgorithm] = Int16GetDatum(row.algorithm);
    values[kInstant] = Int64GetDatum(row.instant);
    values[kAmount] = Int64GetDatum(row.amount);
    values[kCarry] = Int64GetDatum(row.carry);
    if (row.log_values > 0) {
        Datum* elements = static_cast<Datum*>(palloc(sizeof(Datum) * row.log_values));
        for (int i = 0; i < row.log_values; ++i)
            elements[i] = Int64GetDatum(row.log[i]);
        values[kLog] = PointerGetDatum(construct_array(
            elements, row.log_values, INT8OID, sizeof(int64), FLOAT8PASSBYVAL, TYPALIGN_DOUBLE));
    } else {
        nulls[kLog] = true;
        values[kLog] = static_cast<Datum>(0);
    }
    values[kBlockedUntil] = Int64GetDatum(row.blocked_until);
    values[kExpiresAt] = Int64GetDatum(row.expires_at);
    return heap_form_tuple(RelationGetDescr(table.heap), values, nulls);
}

}  // namespace

void open_key_state_table(Oid schema, Engine engine, bool writing, const char* function_name,
                          KeyStateTable* table) {
    if (writing) {
        PreventCommandIfReadOnly(function_name);
        PreventCommandIfParallelMode(function_name);
    }
    table->lock_mode = writing ? RowExclusiveLock : AccessShareLock;
    table->heap = table_open(require_relation(table_name(engine), schema), table->lock_mode);
    table->has_policy = check_shape(table->heap);
    table->primary_key =
        index_open(require_relation(primary_key_name(engine), schema), table->lock_mode);
}

void close_key_state_table(KeyStateTable* table) {
    if (table->primary_key != nullptr)
        index_close(table->primary_key, table->lock_mode);
    if (table->heap != nullptr)
        table_close(table->heap, table->lock_mode);
    table->primary_key = nullptr;
    table->heap = nullptr;
}

void read_key_row(const KeyStateTable& table, const StateKey& key, bool create, StoredKeyRow* row) {
    row->found = false;
    ItemPointerData tid;
    if (find_row(table, key, &tid, row) || !create)
        return;
    // Serialize the key's creation, then look again: a concurrent first call may have inserted
    // and committed the row while we were not looking.
    lock_key_for_insert(key);
    (void)find_row(table, key, &tid, row);
}

bool write_key_row(const KeyStateTable& table, const StateKey& key, const StoredKeyRow& row) {
    HeapTuple tuple = form_row(table, key, row);
    const CommandId command = GetCurrentCommandId(true);
    if (row.found) {
        ItemPointerData tid = row.tid;
        TM_FailureData failure;
        LockTupleMode lock_mode;
#if PG_VERSION_NUM >= 160000
        TU_UpdateIndexes update_indexes;
        TM_Result result = heap_update(table.heap, &tid, tuple, command, InvalidSnapshot, true,
                                       &failure, &lock_mode, &update_indexes);
#else
        TM_Result result = heap_update(table.heap, &tid, tuple, command, InvalidSnapshot, true,
                                       &failure, &lock_mode);
#endif
        if (result == TM_Updated || result == TM_Deleted) {
            heap_freetuple(tuple);
            return false;
        }
        if (result != TM_Ok) {
            elog(ERROR, "ratelimit: unexpected result %d updating a key_state row",
                 static_cast<int>(result));
        }
    } else {
        heap_insert(table.heap, tuple, command, 0, nullptr);
    }
    // A HOT update (the usual case: only the key is indexed and it never changes) needs no new
    // index entry.
    if (!HeapTupleIsHeapOnly(tuple)) {
        Datum values[2] = {key.space, key.key};
        bool nulls[2] = {false, false};
        if (!table.has_policy)
            values[0] = key.key;
        index_insert(table.primary_key, values, nulls, &tuple->t_self, table.heap, UNIQUE_CHECK_YES,
                     false, BuildIndexInfo(table.primary_key));
    }
    heap_freetuple(tuple);
    CommandCounterIncrement();
    return true;
}

bool delete_key_row(const KeyStateTable& table, const StoredKeyRow& row) {
    ItemPointerData tid = row.tid;
    TM_FailureData failure;
    TM_Result result = heap_delete(table.heap, &tid, GetCurrentCommandId(true), InvalidSnapshot,
                                   true, &failure, false);
    if (result == TM_Updated || result == TM_Deleted)
        return false;
    if (result != TM_Ok) {
        elog(ERROR, "ratelimit: unexpected result %d deleting a key_state row",
             static_cast<int>(result));
    }
    CommandCounterIncrement();
    return true;
}

}  // namespace ratelimit::pg
