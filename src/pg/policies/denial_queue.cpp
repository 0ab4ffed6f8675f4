// The denial log's queue (see denial_queue.hpp for what it promises).
//
// Locking rules: every entry's state, and the cursor, change under the queue's one LWLock,
// held exclusively. An entry is free, held (by the transaction of the backend in holder_pid,
// which also writes its row), pending (for a worker), or taken (by the worker in holder_pid).
// The states sit apart from the entries' 2 kB bodies, in one small array, so that counting a
// database's entries (its share, below) reads a few cache lines, not the whole queue.
//
// Shares: a database may have at most ratelimit.denial_queue_database_share percent of the
// entries, and at most half of those held by its open transactions, so that neither one
// database's flood of denials nor a transaction kept open with many of them can leave another
// database's denials without room.
//
// The writers connect as the bootstrap superuser (a background worker has no other way in) but
// write as the denial log's owner, in a security-restricted operation with a pinned search_path
// and lock and statement timeouts: whatever the owner attached to the table (a trigger, a rule's
// function) runs with the owner's rights only, and a writer never waits forever.
//
// The launcher and the writers are background workers: their code calls PostgreSQL directly,
// keeps no C++ object with a destructor alive across a call that may raise, and reaches the
// C++ counters only through count_not_logged(), which catches everything.
#include "pg/policies/denial_queue.hpp"

#include <algorithm>
#include <cstring>
#include <string_view>
#include <vector>

#include "pg/bridge/clock.hpp"
#include "pg/bridge/extension_schema.hpp"
#include "pg/bridge/guard.hpp"
#include "pg/shared_memory/lwlock_scope.hpp"
#include "pg/policies/policy_counters.hpp"
#include "pg/bridge/settings.hpp"
#include "pg/shared_memory/shared_region.hpp"

extern "C" {
#include "access/xact.h"
#include "access/xlog.h"
#include "catalog/dependency.h"
#include "catalog/pg_class.h"
#include "commands/extension.h"
#include "executor/spi.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "port/atomics.h"
#include "postmaster/bgworker.h"
#include "postmaster/interrupt.h"
#include "storage/ipc.h"
#include "storage/latch.h"
#include "storage/proc.h"
#include "tcop/tcopprot.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/lsyscache.h"
#include "utils/snapmgr.h"
#include "utils/syscache.h"
#include "utils/timestamp.h"
#include "utils/wait_event.h"
}

extern "C" PGDLLEXPORT void ratelimit_denial_launcher_main(Datum);
extern "C" PGDLLEXPORT void ratelimit_denial_writer_main(Datum);

namespace ratelimit::pg {
namespace {

constexpr std::size_t kPolicyBytes = 64;
constexpr std::size_t kMessageBytes = 192;
constexpr std::size_t kEntryBytes = 2048;
// A writer takes this many entries per transaction.
constexpr int kBatch = 64;
// A writer stops once its database's queue has been empty this long.
constexpr long kWriterIdleMs = 1000;
// Queued denials that found no writer for this long (no worker slot, a database that cannot
// be connected to) are counted as not logged and dropped.
constexpr TimestampTz kGiveUpAfter = 30 * USECS_PER_SEC;
// The most writers ratelimit.denial_log_writers allows; the others wait for a writer to stop.
constexpr int kMaxWriters = 8;
// A writer's statements give up after these (an owner's lock on the log, a slow trigger):
// the batch is then counted as not logged.
constexpr const char* kWriterLockTimeout = "5s";
constexpr const char* kWriterStatementTimeout = "30s";

enum EntryState : std::uint32_t { kFree = 0, kHeld = 1, kPending = 2, kTaken = 3 };

// An entry's state, kept apart from its body (see the locking rules).
struct SlotState {
    std::uint32_t state;
    Oid database;
    int holder_pid;
};

struct EntryHead {
    TimestampTz pending_since;  // real time it became pending
    TimestampTz logged_at;
    std::int32_t log_size;
    bool enforced;
    std::uint16_t policy_bytes;
    std::uint16_t message_bytes;
    std::uint16_t data_bytes;
    char policy[kPolicyBytes];
    char message[kMessageBytes];
};

constexpr std::size_t kDataBytes = kEntryBytes - sizeof(EntryHead);

struct Entry : EntryHead {
    char data[kDataBytes];
};
static_assert(sizeof(Entry) == kEntryBytes, "a queued denial is 2 kB");

struct QueueHeader {
    std::int32_t capacity;
    std::int32_t cursor;       // where the next free entry is looked for
    Latch* launcher_latch;     // the launcher's, once it runs
    pg_atomic_uint64 full;     // denials the queue could not hold
    pg_atomic_uint64 written;  // rows the writers wrote
};

std::size_t header_bytes() {
    return MAXALIGN(sizeof(QueueHeader));
}

std::size_t states_bytes() {
    return MAXALIGN(sizeof(SlotState) * static_cast<std::size_t>(setting::denial_queue_size));
}

std::size_t queue_bytes() {
    return header_bytes() + states_bytes() +
           sizeof(Entry) * static_cast<std::size_t>(setting::denial_queue_size);
}

void create_queue(void* block) {
    std::memset(block, 0, queue_bytes());
    auto* header = static_cast<QueueHeader*>(block);
    header->capacity = setting::denial_queue_size;
    pg_atomic_init_u64(&header->full, 0);
    pg_atomic_init_u64(&header->written, 0);
}

SharedRegion region("ratelimit denial queue", 1, "the denial queue", queue_bytes, create_queue);

QueueHeader& header() {
    return *static_cast<QueueHeader*>(region.table());
}

SlotState* states() {
    return reinterpret_cast<SlotState*>(static_cast<char*>(region.table()) + header_bytes());
}

Entry* entries() {
    return reinterpret_cast<Entry*>(static_cast<char*>(region.table()) + header_bytes() +
                                    states_bytes());
}

LWLock* queue_lock() {
    return region.lock(0);
}

void wake_launcher() {
    // Read without the lock: a latch pointer is written once, when the launcher starts.
    Latch* latch = header().launcher_latch;
    if (latch != nullptr)
        SetLatch(latch);
}

// Counts a denial of `policy` in `database` as not logged, from code that must not throw.
void count_not_logged(Oid database, const char* policy) noexcept {
    try {
        count_unlogged_denial_in(database, policy);
    } catch (...) {
        // The counters' lock could not be taken: nothing else to count with.
    }
}

// ---- what this backend's transaction holds --------------------------------------------------

struct HeldEntry {
    int index;
    SubTransactionId subtransaction;
};
// A denial the transaction wrote itself but the queue could not hold: if the write rolls back,
// it is counted as not logged.
struct UnqueuedEntry {
    pg_atomic_uint64* not_logged;
    SubTransactionId subtransaction;
};

std::vector<HeldEntry>* held = nullptr;
std::vector<UnqueuedEntry>* unqueued = nullptr;
bool callbacks_registered = false;

// Entries of this backend's transaction from `from` on (a savepoint rolled back, or all of
// them): dropped when the transaction committed (its rows are in the log), handed to the
// writers when it rolled back. Runs in transaction callbacks: nothing here may raise.
void settle_held(SubTransactionId from, bool committed) {
    if (held == nullptr)
        return;
    bool handed = false;
    std::size_t kept = 0;
    if (!held->empty()) {
        LWLockAcquire(queue_lock(), LW_EXCLUSIVE);
        const TimestampTz now = GetCurrentTimestamp();
        for (const HeldEntry& mine : *held) {
            if (mine.subtransaction < from) {
                (*held)[kept++] = mine;
                continue;
            }
            SlotState& slot = states()[mine.index];
            if (slot.state != kHeld || slot.holder_pid != MyProcPid)
                continue;
            if (committed) {
                slot.state = kFree;
            } else {
                slot.state = kPending;
                slot.holder_pid = 0;
                entries()[mine.index].pending_since = now;
                handed = true;
            }
        }
        LWLockRelease(queue_lock());
        held->resize(kept);
    }
    kept = 0;
    for (const UnqueuedEntry& lost : *unqueued) {
        if (lost.subtransaction < from) {
            (*unqueued)[kept++] = lost;
            continue;
        }
        if (!committed && lost.not_logged != nullptr)
            pg_atomic_fetch_add_u64(lost.not_logged, 1);
    }
    unqueued->resize(kept);
    if (handed)
        wake_launcher();
}

void on_transaction_end(XactEvent event, void*) {
    switch (event) {
        case XACT_EVENT_COMMIT:
        case XACT_EVENT_PARALLEL_COMMIT:
        case XACT_EVENT_PREPARE:
            settle_held(InvalidSubTransactionId, true);
            break;
        case XACT_EVENT_ABORT:
        case XACT_EVENT_PARALLEL_ABORT:
            settle_held(InvalidSubTransactionId, false);
            break;
        default:
            break;
    }
}

void on_savepoint_end(SubXactEvent event, SubTransactionId mine, SubTransactionId, void*) {
    if (event == SUBXACT_EVENT_ABORT_SUB)
        settle_held(mine, false);
}

void prepare_backend() {
    if (!callbacks_registered) {
        held = new std::vector<HeldEntry>();
        unqueued = new std::vector<UnqueuedEntry>();
        call_postgres([] {
            RegisterXactCallback(on_transaction_end, nullptr);
            RegisterSubXactCallback(on_savepoint_end, nullptr);
        });
        callbacks_registered = true;
    }
}

// Copies `text` into a fixed field; false when it does not fit.
template <std::size_t N>
bool copy_field(char (&field)[N], std::uint16_t* bytes, const std::string& text) {
    if (text.size() > N)
        return false;
    std::memcpy(field, text.data(), text.size());
    *bytes = static_cast<std::uint16_t>(text.size());
    return true;
}

// The entries one database may have: its share of the queue, at least one.
int database_share(int capacity) {
    return std::max(1, static_cast<int>(static_cast<std::int64_t>(capacity) *
                                        setting::denial_queue_database_share / 100));
}

}  // namespace

bool denial_queue_available() {
    return region.available();
}

std::size_t denial_queue_event_bytes() {
    return kDataBytes;
}

bool queue_denial(const DenialRecord& record, bool written_here) {
    bool recovery = false;
    call_postgres([&] { recovery = RecoveryInProgress(); });
    if (recovery) {
        // A standby cannot write the log, and a promoted one starts with an empty queue.
        count_unlogged_denial(record.policy);
        return false;
    }
    if (!region.available()) {
        if (!written_here)
            count_unlogged_denial(record.policy);
        return false;
    }
    prepare_backend();
    SubTransactionId subtransaction = InvalidSubTransactionId;
    call_postgres([&] { subtransaction = GetCurrentSubTransactionId(); });
    held->reserve(held->size() + 1);
    unqueued->reserve(unqueued->size() + 1);
    Entry entry;
    std::memset(static_cast<void*>(&entry), 0, sizeof entry);
    const bool fits = copy_field(entry.policy, &entry.policy_bytes, record.policy) &&
                      copy_field(entry.message, &entry.message_bytes, record.message) &&
                      copy_field(entry.data, &entry.data_bytes, record.event_data);
    entry.logged_at = to_timestamptz(record.logged_at);
    entry.log_size = record.log_size;
    entry.enforced = record.enforced;
    entry.pending_since = written_here ? 0 : GetCurrentTimestamp();
    const int index = !fits ? -1 : with_lwlock(queue_lock(), LW_EXCLUSIVE, [&] {
        QueueHeader& queue = header();
        // This database's entries, and those its open transactions hold, against its shares.
        const int share = database_share(queue.capacity);
        int used = 0;
        int held_here = 0;
        int free_at = -1;
        for (int probe = 0; probe < queue.capacity; ++probe) {
            const int i = (queue.cursor + probe) % queue.capacity;
            const SlotState& slot = states()[i];
            if (slot.state == kFree) {
                if (free_at < 0)
                    free_at = i;
                continue;
            }
            if (slot.database != MyDatabaseId)
                continue;
            ++used;
            held_here += slot.state == kHeld ? 1 : 0;
        }
        if (free_at < 0 || used >= share || (written_here && held_here >= std::max(1, share / 2)))
            return -1;
        std::memcpy(static_cast<void*>(&entries()[free_at]), &entry, sizeof entry);
        SlotState& slot = states()[free_at];
        slot.database = MyDatabaseId;
        slot.state = written_here ? kHeld : kPending;
        slot.holder_pid = written_here ? MyProcPid : 0;
        queue.cursor = (free_at + 1) % queue.capacity;
        return free_at;
    });
    if (index < 0) {
        pg_atomic_fetch_add_u64(&header().full, 1);
        if (written_here)
            unqueued->push_back(
                UnqueuedEntry{denials_not_logged_counter(record.policy), subtransaction});
        else
            count_unlogged_denial(record.policy);
        return false;
    }
    if (written_here)
        held->push_back(HeldEntry{index, subtransaction});
    else
        wake_launcher();
    return true;
}

DenialQueueStats denial_queue_stats() {
    DenialQueueStats stats;
    if (!region.available())
        return stats;
    stats.capacity = header().capacity;
    stats.full = static_cast<std::int64_t>(pg_atomic_read_u64(&header().full));
    stats.written = static_cast<std::int64_t>(pg_atomic_read_u64(&header().written));
    stats.queued = with_lwlock(queue_lock(), LW_SHARED, [&] {
        std::int64_t queued = 0;
        for (int i = 0; i < header().capacity; ++i)
            queued += states()[i].state != kFree ? 1 : 0;
        return queued;
    });
    return stats;
}

void install_denial_queue() {
    region.install();
    BackgroundWorker worker;
    memset(&worker, 0, sizeof worker);
    worker.bgw_flags = BGWORKER_SHMEM_ACCESS;
    // A standby has nothing to write: the launcher starts once the server accepts writes.
    worker.bgw_start_time = BgWorkerStart_RecoveryFinished;
    worker.bgw_restart_time = 10;
    snprintf(worker.bgw_library_name, BGW_MAXLEN, "ratelimit");
    snprintf(worker.bgw_function_name, BGW_MAXLEN, "ratelimit_denial_launcher_main");
    snprintf(worker.bgw_name, BGW_MAXLEN, "ratelimit denial log launcher");
    snprintf(worker.bgw_type, BGW_MAXLEN, "ratelimit denial log launcher");
    RegisterBackgroundWorker(&worker);
}

}  // namespace ratelimit::pg

// ---- the launcher -----------------------------------------------------------------------------

namespace {

using namespace ratelimit::pg;

struct Writer {
    Oid database;
    BackgroundWorkerHandle* handle;
    pid_t pid;
};

// The writers that may run at once (ratelimit.denial_log_writers).
int writer_limit() {
    return std::clamp(setting::denial_log_writers, 1, kMaxWriters);
}

bool start_writer(Oid database, Writer* writer) {
    BackgroundWorker worker;
    memset(&worker, 0, sizeof worker);
    worker.bgw_flags = BGWORKER_SHMEM_ACCESS | BGWORKER_BACKEND_DATABASE_CONNECTION;
    worker.bgw_start_time = BgWorkerStart_RecoveryFinished;
    worker.bgw_restart_time = BGW_NEVER_RESTART;
    snprintf(worker.bgw_library_name, BGW_MAXLEN, "ratelimit");
    snprintf(worker.bgw_function_name, BGW_MAXLEN, "ratelimit_denial_writer_main");
    snprintf(worker.bgw_name, BGW_MAXLEN, "ratelimit denial log writer");
    snprintf(worker.bgw_type, BGW_MAXLEN, "ratelimit denial log writer");
    worker.bgw_main_arg = ObjectIdGetDatum(database);
    worker.bgw_notify_pid = MyProcPid;
    BackgroundWorkerHandle* handle = nullptr;
    if (!RegisterDynamicBackgroundWorker(&worker, &handle))
        return false;
    writer->database = database;
    writer->handle = handle;
    writer->pid = 0;
    return true;
}

// One pass: forgets stopped writers (handing back what they had taken), starts a writer for
// each database with pending denials, and gives up on denials that waited too long.
void launch_pass(Writer* writers, int* writer_count) {
    for (int i = 0; i < *writer_count;) {
        pid_t pid = 0;
        const BgwHandleStatus status = GetBackgroundWorkerPid(writers[i].handle, &pid);
        if (status == BGWH_STOPPED) {
            pfree(writers[i].handle);
            writers[i] = writers[--*writer_count];
            continue;
        }
        writers[i].pid = status == BGWH_STARTED ? pid : 0;
        ++i;
    }
    const TimestampTz now = GetCurrentTimestamp();
    Oid wanted[kMaxWriters];
    int wanted_count = 0;
    LWLockAcquire(queue_lock(), LW_EXCLUSIVE);
    QueueHeader& queue = header();
    for (int i = 0; i < queue.capacity; ++i) {
        SlotState& slot = states()[i];
        Entry& entry = entries()[i];
        if (slot.state == kTaken) {
            bool live = false;
            for (int w = 0; w < *writer_count; ++w)
                live = live || writers[w].pid == slot.holder_pid;
            if (!live) {
                // Its writer stopped before finishing: it goes to the next one.
                slot.state = kPending;
                slot.holder_pid = 0;
            }
        }
        if (slot.state != kPending)
            continue;
        bool served = false;
        for (int w = 0; w < *writer_count; ++w)
            served = served || writers[w].database == slot.database;
        for (int w = 0; w < wanted_count; ++w)
            served = served || wanted[w] == slot.database;
        if (served)
            continue;
        if (now - entry.pending_since >= kGiveUpAfter) {
            // No writer could be started for its database in all that time.
            slot.state = kFree;
            char policy[kPolicyBytes + 1];
            memcpy(policy, entry.policy, entry.policy_bytes);
            policy[entry.policy_bytes] = '\0';
            const Oid database = slot.database;
            LWLockRelease(queue_lock());
            count_not_logged(database, policy);
            LWLockAcquire(queue_lock(), LW_EXCLUSIVE);
            continue;
        }
        if (*writer_count + wanted_count < writer_limit())
            wanted[wanted_count++] = slot.database;
    }
    LWLockRelease(queue_lock());
    for (int w = 0; w < wanted_count; ++w) {
        if (start_writer(wanted[w], &writers[*writer_count]))
            ++*writer_count;
    }
}

// ---- a writer -----------------------------------------------------------------------------------

// $1 ring size, $2 logged_at, $3 status, $4 message, $5 event data, $6 the denial log's
// sequence. Every name is qualified: the statements run under a search_path of pg_catalog only.
constexpr const char* kInsert =
    "INSERT INTO %s.denial_log AS l (slot, logged_at, event_type, severity, source, status, "
    "error_message, event_data) VALUES ((pg_catalog.nextval($6) OPERATOR(pg_catalog.%%) $1)::int, "
    "$2, "
    "'rate_limit_violation', 'warning', 'ratelimit', $3, $4, $5::pg_catalog.jsonb) "
    "ON CONFLICT (slot) DO UPDATE SET logged_at = EXCLUDED.logged_at, "
    "event_type = EXCLUDED.event_type, severity = EXCLUDED.severity, source = EXCLUDED.source, "
    "status = EXCLUDED.status, error_message = EXCLUDED.error_message, "
    "event_data = EXCLUDED.event_data";

constexpr const char* kTrim = "DELETE FROM %s.denial_log WHERE slot OPERATOR(pg_catalog.>=) $1";

// Takes up to kBatch pending entries of this database, copied into `batch`.
int take_batch(Entry* batch, int* indexes) {
    int taken = 0;
    LWLockAcquire(queue_lock(), LW_EXCLUSIVE);
    for (int i = 0; i < header().capacity && taken < kBatch; ++i) {
        SlotState& slot = states()[i];
        if (slot.state != kPending || slot.database != MyDatabaseId)
            continue;
        slot.state = kTaken;
        slot.holder_pid = MyProcPid;
        memcpy(static_cast<void*>(&batch[taken]), &entries()[i], sizeof(Entry));
        indexes[taken++] = i;
    }
    LWLockRelease(queue_lock());
    return taken;
}

void free_batch(const int* indexes, int count) {
    LWLockAcquire(queue_lock(), LW_EXCLUSIVE);
    for (int i = 0; i < count; ++i) {
        SlotState& slot = states()[indexes[i]];
        if (slot.state == kTaken && slot.holder_pid == MyProcPid)
            slot.state = kFree;
    }
    LWLockRelease(queue_lock());
}

text* text_of(const char* bytes, int length) {
    return cstring_to_text_with_len(bytes, length);
}

// The denial log of this database's ratelimit: the table denial_log and the sequence
// denial_log_position in the extension's schema (pg/bridge/extension_schema.hpp), both members of
// the extension, the table an ordinary table. False when there is none (the extension dropped, or
// created by a transaction that rolled back): nothing to write to. Another relation named
// denial_log, wherever it is and whatever it belongs to, is never written.
bool find_denial_log(Oid* table, Oid* sequence, Oid* owner) {
    const Oid extension = get_extension_oid("ratelimit", true);
    if (!OidIsValid(extension))
        return false;
    const Oid schema = extension_schema_if_exists();
    if (!OidIsValid(schema))
        return false;
    *table = get_relname_relid("denial_log", schema);
    *sequence = get_relname_relid("denial_log_position", schema);
    if (!OidIsValid(*table) || !OidIsValid(*sequence) ||
        getExtensionOfObject(RelationRelationId, *table) != extension ||
        getExtensionOfObject(RelationRelationId, *sequence) != extension ||
        get_rel_relkind(*table) != RELKIND_RELATION ||
        get_rel_relkind(*sequence) != RELKIND_SEQUENCE)
        return false;
    HeapTuple row = SearchSysCache1(RELOID, ObjectIdGetDatum(*table));
    if (!HeapTupleIsValid(row))
        return false;
    *owner = reinterpret_cast<Form_pg_class>(GETSTRUCT(row))->relowner;
    ReleaseSysCache(row);
    return true;
}

// Sets a setting for the rest of the writer's transaction.
void set_for_transaction(const char* name, const char* value) {
    (void)set_config_option(name, value, PGC_SUSET, PGC_S_SESSION, GUC_ACTION_SAVE, true, 0, false);
}

// Writes the batch in one transaction, as the log's owner; false when there is no log to write
// to (find_denial_log).
bool write_batch(const Entry* batch, int count) {
    bool found = false;
    StartTransactionCommand();
    if (SPI_connect() != SPI_OK_CONNECT)
        elog(ERROR, "ratelimit: SPI_connect failed");
    PushActiveSnapshot(GetTransactionSnapshot());
    pgstat_report_activity(STATE_RUNNING, "writing the denial log");
    Oid table = InvalidOid;
    Oid sequence = InvalidOid;
    Oid owner = InvalidOid;
    if (find_denial_log(&table, &sequence, &owner)) {
        found = true;
        // The owner's rights, nothing more: a trigger the owner put on the log runs as the owner
        // (the caller's own write does the same, pg/policies/denial_log.cpp). The settings set
        // here go with the transaction, whatever a trigger sets for the session.
        Oid saved_user = InvalidOid;
        int saved_context = 0;
        GetUserIdAndSecContext(&saved_user, &saved_context);
        SetUserIdAndSecContext(
            owner, saved_context | SECURITY_LOCAL_USERID_CHANGE | SECURITY_RESTRICTED_OPERATION);
        const int nest_level = NewGUCNestLevel();
        set_for_transaction("search_path", "pg_catalog, pg_temp");
        set_for_transaction("lock_timeout", kWriterLockTimeout);
        set_for_transaction("statement_timeout", kWriterStatementTimeout);
        const char* quoted = quote_identifier(get_namespace_name(get_rel_namespace(table)));
        Oid insert_types[6] = {INT4OID, TIMESTAMPTZOID, TEXTOID, TEXTOID, TEXTOID, REGCLASSOID};
        Oid trim_types[1] = {INT4OID};
        SPIPlanPtr insert = SPI_prepare(psprintf(kInsert, quoted), 6, insert_types);
        SPIPlanPtr trim = SPI_prepare(psprintf(kTrim, quoted), 1, trim_types);
        if (insert == nullptr || trim == nullptr)
            elog(ERROR, "ratelimit: preparing the denial log's statements failed");
        for (int i = 0; i < count; ++i) {
            const Entry& entry = batch[i];
            Datum values[6] = {
                Int32GetDatum(entry.log_size),
                TimestampTzGetDatum(entry.logged_at),
                PointerGetDatum(cstring_to_text(entry.enforced ? "blocked" : "shadow")),
                PointerGetDatum(text_of(entry.message, entry.message_bytes)),
                PointerGetDatum(text_of(entry.data, entry.data_bytes)),
                ObjectIdGetDatum(sequence)};
            if (SPI_execute_plan(insert, values, nullptr, false, 0) != SPI_OK_INSERT)
                elog(ERROR, "ratelimit: writing the denial log failed");
            Datum size[1] = {Int32GetDatum(entry.log_size)};
            if (SPI_execute_plan(trim, size, nullptr, false, 0) != SPI_OK_DELETE)
                elog(ERROR, "ratelimit: trimming the denial log failed");
        }
        AtEOXact_GUC(false, nest_level);
        SetUserIdAndSecContext(saved_user, saved_context);
    }
    SPI_finish();
    PopActiveSnapshot();
    CommitTransactionCommand();
    pgstat_report_activity(STATE_IDLE, nullptr);
    return found;
}

}  // namespace

void ratelimit_denial_launcher_main(Datum) {
    pqsignal(SIGHUP, SignalHandlerForConfigReload);
    pqsignal(SIGTERM, SignalHandlerForShutdownRequest);
    BackgroundWorkerUnblockSignals();
    LWLockAcquire(queue_lock(), LW_EXCLUSIVE);
    header().launcher_latch = MyLatch;
    LWLockRelease(queue_lock());

    Writer writers[kMaxWriters];
    int writer_count = 0;
    for (;;) {
        launch_pass(writers, &writer_count);
        (void)WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH, 1000,
                        PG_WAIT_EXTENSION);
        ResetLatch(MyLatch);
        CHECK_FOR_INTERRUPTS();
        if (ShutdownRequestPending) {
            LWLockAcquire(queue_lock(), LW_EXCLUSIVE);
            header().launcher_latch = nullptr;
            LWLockRelease(queue_lock());
            proc_exit(0);
        }
        if (ConfigReloadPending) {
            ConfigReloadPending = false;
            ProcessConfigFile(PGC_SIGHUP);
        }
    }
}

void ratelimit_denial_writer_main(Datum argument) {
    pqsignal(SIGTERM, SignalHandlerForShutdownRequest);
    BackgroundWorkerUnblockSignals();
    BackgroundWorkerInitializeConnectionByOid(DatumGetObjectId(argument), InvalidOid, 0);

    Entry* batch = static_cast<Entry*>(palloc(sizeof(Entry) * kBatch));
    int indexes[kBatch];
    TimestampTz idle_since = GetCurrentTimestamp();
    for (;;) {
        CHECK_FOR_INTERRUPTS();
        if (ShutdownRequestPending)
            proc_exit(0);  // what it took goes back to the queue (the launcher sees it stop)
        // volatile: read after the PG_TRY block below (gcc 15 warns of a longjmp clobbering it).
        const volatile int count = take_batch(batch, indexes);
        if (count == 0) {
            if (GetCurrentTimestamp() - idle_since >= kWriterIdleMs * 1000)
                proc_exit(0);
            (void)WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH, 100,
                            PG_WAIT_EXTENSION);
            ResetLatch(MyLatch);
            continue;
        }
        volatile bool logged = false;
        PG_TRY();
        { logged = write_batch(batch, count); }
        PG_CATCH();
        {
            // Reported, and the batch counted as not logged; the next batch is tried afresh.
            EmitErrorReport();
            FlushErrorState();
            AbortCurrentTransaction();
            logged = false;
        }
        PG_END_TRY();
        MemoryContextSwitchTo(TopMemoryContext);
        if (logged) {
            pg_atomic_fetch_add_u64(&header().written, static_cast<std::uint64_t>(count));
        } else {
            for (int i = 0; i < count; ++i) {
                char policy[kPolicyBytes + 1];
                memcpy(policy, batch[i].policy, batch[i].policy_bytes);
                policy[batch[i].policy_bytes] = '\0';
                count_not_logged(MyDatabaseId, policy);
            }
        }
        free_batch(indexes, count);
        idle_since = GetCurrentTimestamp();
    }
}
