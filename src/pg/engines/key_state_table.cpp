#include "pg/engines/key_state_table.hpp"

#include "pg/compat/compat.hpp"

extern "C" {
#include "access/heapam.h"
#include "access/htup_details.h"
#include "access/stratnum.h"
#include "access/table.h"
#include "access/tableam.h"
#include "access/xlog.h"
#include "access/genam.h"
#include "catalog/index.h"
#include "executor/executor.h"
#include "nodes/pg_list.h"
#include "storage/lmgr.h"
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

const char* table_name(Engine engine) {
    return engine == Engine::kUnlogged ? "key_state_unlogged" : "key_state";
}

const char* primary_key_name(Engine engine) {
    return engine == Engine::kUnlogged ? "key_state_unlogged_pkey" : "key_state_pkey";
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

// The primary key's scan keys for `key`; returns how many (two, or one on a table before 0.6.0).
int primary_key_scan_keys(const KeyStateTable& table, const StateKey& key, ScanKeyData* scan_keys) {
    int count = 0;
    if (table.has_policy) {
        ScanKeyEntryInitialize(&scan_keys[count], 0, kPolicy + 1, BTEqualStrategyNumber, InvalidOid,
                               table.primary_key->rd_indcollation[count], F_TEXTEQ, key.space);
        ++count;
    }
    ScanKeyEntryInitialize(&scan_keys[count], 0, kKey + 1, BTEqualStrategyNumber, InvalidOid,
                           table.primary_key->rd_indcollation[count], F_TEXTEQ, key.key);
    return count + 1;
}

// Whether another version of the key stands in the way of inserting its first row, looked up
// with a dirty snapshot (committed and in-progress versions both count), as INSERT ... ON
// CONFLICT's arbiter check does. `own` is our own speculative version, skipped.
//  - kWaitAlways: a version whose transaction is still in progress is waited for, then the key
//    is looked up again; the answer is a committed (or our own) version, or none.
//  - kAfterInsert, once our version is in: an in-progress version is waited for only when it is
//    speculative and ours began first (our transaction id precedes its), else it is a conflict
//    at once. Two first calls that meet therefore never both back off forever: the younger one
//    gives way to the older's insertion.
enum class ConflictWait { kWaitAlways, kAfterInsert };

bool key_conflict(const KeyStateTable& table, const StateKey& key, ItemPointer own,
                  ConflictWait wait) {
    for (;;) {
        // Each round waits for another transaction or follows one that changed the key: a
        // cancel or statement_timeout is honoured between rounds.
        CHECK_FOR_INTERRUPTS();
        ScanKeyData scan_keys[2];
        const int count = primary_key_scan_keys(table, key, scan_keys);
        SnapshotData dirty;
        InitDirtySnapshot(dirty);
        // A dirty snapshot is not an MVCC one, so the scan takes no SSI predicate lock either.
        SysScanDesc scan = systable_beginscan(table.heap, RelationGetRelid(table.primary_key), true,
                                              &dirty, count, scan_keys);
        HeapTuple tuple;
        bool conflict = false;
        TransactionId xwait = InvalidTransactionId;
        std::uint32_t token = 0;
        ItemPointerData other;
        while (HeapTupleIsValid(tuple = systable_getnext(scan))) {
            if (own != nullptr && ItemPointerEquals(&tuple->t_self, own))
                continue;
            const TransactionId in_progress =
                TransactionIdIsValid(dirty.xmin) ? dirty.xmin : dirty.xmax;
            if (TransactionIdIsValid(in_progress) &&
                (wait == ConflictWait::kWaitAlways ||
                 (dirty.speculativeToken != 0 &&
                  TransactionIdPrecedes(GetCurrentTransactionId(), in_progress)))) {
                xwait = in_progress;
                token = dirty.speculativeToken;
                other = tuple->t_self;
            } else {
                conflict = true;
            }
            break;
        }
        systable_endscan(scan);
        if (!TransactionIdIsValid(xwait))
            return conflict;
        if (token != 0)
            SpeculativeInsertionWait(xwait, token);
        else
            XactLockTableWait(xwait, table.heap, &other, XLTW_InsertIndex);
    }
}

// One look-up of the key through the primary key, with a snapshot taken now. With `row`, the
// version found is read into it.
bool find_row(const KeyStateTable& table, const StateKey& key, ItemPointer tid, StoredKeyRow* row) {
    ScanKeyData scan_keys[2];
    const int count = primary_key_scan_keys(table, key, scan_keys);
    // SnapshotAny takes no SSI predicate lock (see the concurrency rules); the visibility test
    // against the fresh snapshot then keeps the one version it would have returned.
    Snapshot snapshot = RegisterSnapshot(GetLatestSnapshot());
    SysScanDesc scan = systable_beginscan(table.heap, RelationGetRelid(table.primary_key), true,
                                          SnapshotAny, count, scan_keys);
    bool found = false;
    HeapTuple tuple;
    while (!found && HeapTupleIsValid(tuple = systable_getnext(scan))) {
        if (!table_tuple_satisfies_snapshot(table.heap, scan->slot, snapshot))
            continue;
        found = true;
        *tid = tuple->t_self;
        // Read in place: fill_row copies every value out while the scan still pins the page.
        if (row != nullptr)
            fill_row(RelationGetDescr(table.heap), tuple, row);
    }
    systable_endscan(scan);
    UnregisterSnapshot(snapshot);
    return found;
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

void refuse_unmaintained(Relation heap, const char* what, const char* name, const char* hint) {
    ereport(ERROR, (errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
                    errmsg("ratelimit: ratelimit.%s has %s (\"%s\") the engine does not maintain",
                           RelationGetRelationName(heap), what, name),
                    errhint("%s", hint)));
}

// The writes bypass the executor, so what only the executor honours is refused up front, before
// anything is written. Cheap: the relcache holds all of it.
void check_writable(Relation heap) {
    if (heap->trigdesc != nullptr && heap->trigdesc->numtriggers > 0) {
        refuse_unmaintained(heap, "a trigger", heap->trigdesc->triggers[0].tgname,
                            "Drop the trigger: the engine writes rows without firing triggers.");
    }
    TupleConstr* constr = RelationGetDescr(heap)->constr;
    if (constr != nullptr && constr->num_check > 0) {
        refuse_unmaintained(heap, "a check constraint", constr->check[0].ccname,
                            "Drop the constraint: the engine writes rows without checking it.");
    }
}

// Opens every index of the table when there is more than the primary key, refusing those the
// engine cannot maintain.
void open_other_indexes(KeyStateTable* table) {
    List* ids = RelationGetIndexList(table->heap);
    if (list_length(ids) <= 1) {
        list_free(ids);
        return;
    }
    table->indexes = static_cast<Relation*>(palloc0(sizeof(Relation) * list_length(ids)));
    ListCell* cell;
    foreach (cell, ids) {
        Relation index = index_open(lfirst_oid(cell), table->lock_mode);
        table->indexes[table->index_count++] = index;
        Form_pg_index form = index->rd_index;
        if (form->indisexclusion) {
            refuse_unmaintained(table->heap, "an exclusion constraint",
                                RelationGetRelationName(index),
                                "Drop it: the engine cannot check exclusion constraints.");
        }
        if (form->indisunique && !form->indimmediate) {
            refuse_unmaintained(table->heap, "a deferrable unique index",
                                RelationGetRelationName(index),
                                "Drop it: the engine checks uniqueness immediately only.");
        }
    }
    list_free(ids);
}

using compat::IndexUpdate;

// Adds the entries of the new version `tuple` to every index, as ExecInsertIndexTuples does:
// partial indexes by their predicate, expression indexes by evaluating it. The primary key's
// entry gets `primary_key_check`; the answer of that check is returned (false only for
// UNIQUE_CHECK_PARTIAL when the key may already have another version).
bool insert_index_entries(const KeyStateTable& table, HeapTuple tuple, IndexUpdate update,
                          IndexUniqueCheck primary_key_check) {
    bool unique = true;
    EState* estate = CreateExecutorState();
    TupleTableSlot* slot = MakeSingleTupleTableSlot(RelationGetDescr(table.heap), &TTSOpsHeapTuple);
    ExecStoreHeapTuple(tuple, slot, false);
    ExprContext* econtext = GetPerTupleExprContext(estate);
    econtext->ecxt_scantuple = slot;
    for (int i = 0; i < table.index_count; ++i) {
        Relation index = table.indexes[i];
        IndexInfo* info = BuildIndexInfo(index);
        if (!info->ii_ReadyForInserts)
            continue;
        if (update == IndexUpdate::kSummarizing && !compat::index_is_summarizing(info))
            continue;
        if (info->ii_Predicate != NIL &&
            !ExecQual(ExecPrepareQual(info->ii_Predicate, estate), econtext)) {
            continue;
        }
        Datum values[INDEX_MAX_KEYS];
        bool nulls[INDEX_MAX_KEYS];
        FormIndexDatum(info, slot, estate, values, nulls);
        const bool primary = RelationGetRelid(index) == RelationGetRelid(table.primary_key);
        const IndexUniqueCheck check = primary                        ? primary_key_check
                                       : index->rd_index->indisunique ? UNIQUE_CHECK_YES
                                                                      : UNIQUE_CHECK_NO;
        const bool answer =
            index_insert(index, values, nulls, &tuple->t_self, table.heap, check, false, info);
        if (primary)
            unique = answer;
        ResetExprContext(econtext);
    }
    ExecDropSingleTupleTableSlot(slot);
    FreeExecutorState(estate);
    return unique;
}

// The index entries a new version needs (see insert_index_entries).
bool add_index_entries(const KeyStateTable& table, const StateKey& key, HeapTuple tuple,
                       IndexUpdate update, IndexUniqueCheck primary_key_check) {
    if (update == IndexUpdate::kNone)
        return true;
    if (table.index_count > 0)
        return insert_index_entries(table, tuple, update, primary_key_check);
    if (update != IndexUpdate::kAll)
        return true;
    // Only the primary key: its columns are the key itself, no executor state needed.
    Datum values[2] = {key.space, key.key};
    bool nulls[2] = {false, false};
    if (!table.has_policy)
        values[0] = key.key;
    return index_insert(table.primary_key, values, nulls, &tuple->t_self, table.heap,
                        primary_key_check, false, BuildIndexInfo(table.primary_key));
}

// The key's first row, inserted speculatively as INSERT ... ON CONFLICT DO NOTHING does, so
// creating a key holds no lock once it is in: a transaction may create any number of keys.
// The heap version goes in marked with a token, its primary key entry is checked without
// waiting, and a duplicate found then (a concurrent first call of the same key) kills our
// version, which nobody else ever saw as live. False when another transaction's row of the
// key committed first: read and decide again.
bool insert_row(const KeyStateTable& table, const StateKey& key, HeapTuple tuple,
                CommandId command) {
    for (;;) {
        if (key_conflict(table, key, nullptr, ConflictWait::kWaitAlways))
            return false;
        const TransactionId xid = GetCurrentTransactionId();
        const std::uint32_t token = SpeculativeInsertionLockAcquire(xid);
        HeapTupleHeaderSetSpeculativeToken(tuple->t_data, token);
        heap_insert(table.heap, tuple, command, HEAP_INSERT_SPECULATIVE, nullptr);
        bool alone = add_index_entries(table, key, tuple, IndexUpdate::kAll, UNIQUE_CHECK_PARTIAL);
        if (!alone)
            alone = !key_conflict(table, key, &tuple->t_self, ConflictWait::kAfterInsert);
        if (alone)
            heap_finish_speculative(table.heap, &tuple->t_self);
        else
            heap_abort_speculative(table.heap, &tuple->t_self);
        SpeculativeInsertionLockRelease(xid);
        if (alone)
            return true;
        // The other first call is either still in progress (the look-up above waits for it) or
        // committed (then we return false and the caller reads its row).
    }
}

// A new version of the row read; false when another transaction changed or deleted it first.
bool update_row(const KeyStateTable& table, const StateKey& key, const StoredKeyRow& row,
                HeapTuple tuple, CommandId command) {
    ItemPointerData tid = row.tid;
    TM_FailureData failure;
    LockTupleMode lock_mode;
    IndexUpdate update = IndexUpdate::kAll;
    TM_Result result =
        compat::heap_update_row(table.heap, &tid, tuple, command, &failure, &lock_mode, &update);
    if (result == TM_Updated || result == TM_Deleted)
        return false;
    if (result != TM_Ok) {
        elog(ERROR, "ratelimit: unexpected result %d updating a key_state row",
             static_cast<int>(result));
    }
    // Which indexes need an entry for the new version: all of them on a non-HOT update, none on
    // a HOT one (PostgreSQL decides HOT from the columns of every index).
    (void)add_index_entries(table, key, tuple, update, UNIQUE_CHECK_YES);
    return true;
}

}  // namespace

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

void open_key_state_table(Oid schema, Engine engine, bool writing, const char* function_name,
                          KeyStateTable* table) {
    if (writing) {
        PreventCommandIfReadOnly(function_name);
        PreventCommandIfParallelMode(function_name);
    }
    table->lock_mode = writing ? RowExclusiveLock : AccessShareLock;
    if (engine == Engine::kUnlogged && RecoveryInProgress()) {
        // A standby answers what it can: an unlogged key is empty there (see the header).
        (void)require_relation(table_name(engine), schema);
        table->empty_in_recovery = true;
        return;
    }
    table->heap = table_open(require_relation(table_name(engine), schema), table->lock_mode);
    table->has_policy = check_shape(table->heap);
    table->primary_key =
        index_open(require_relation(primary_key_name(engine), schema), table->lock_mode);
    if (writing) {
        // Indexes first: a deferrable unique constraint also has a trigger, and its index is the
        // clearer thing to name.
        open_other_indexes(table);
        check_writable(table->heap);
    }
}

void close_key_state_table(KeyStateTable* table) {
    for (int i = 0; i < table->index_count; ++i)
        index_close(table->indexes[i], table->lock_mode);
    table->index_count = 0;
    table->indexes = nullptr;
    if (table->primary_key != nullptr)
        index_close(table->primary_key, table->lock_mode);
    if (table->heap != nullptr)
        table_close(table->heap, table->lock_mode);
    table->primary_key = nullptr;
    table->heap = nullptr;
}

void read_key_row(const KeyStateTable& table, const StateKey& key, StoredKeyRow* row) {
    // A decision reads again whenever another transaction wrote the key first: the retries
    // stay cancellable.
    CHECK_FOR_INTERRUPTS();
    row->found = false;
    if (table.empty_in_recovery)
        return;
    ItemPointerData tid;
    (void)find_row(table, key, &tid, row);
}

bool write_key_row(const KeyStateTable& table, const StateKey& key, const StoredKeyRow& row) {
    HeapTuple tuple = form_row(table, key, row);
    const CommandId command = GetCurrentCommandId(true);
    const bool written = row.found ? update_row(table, key, row, tuple, command)
                                   : insert_row(table, key, tuple, command);
    heap_freetuple(tuple);
    if (written)
        CommandCounterIncrement();
    return written;
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
