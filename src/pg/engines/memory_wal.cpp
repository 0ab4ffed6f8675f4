// The memory engine in the WAL (pg/engines/memory_wal.hpp): the records, their replay, and the
// worker that keeps each checkpoint waiting until every key's state follows its redo pointer.
//
// The replay runs in the startup process and the worker is a background worker: neither has
// error recovery to unwind into, so this code creates no C++ object with a destructor and calls
// PostgreSQL directly; so does the insertion, which runs under a partition's LWLock inside a
// critical section.
#include "pg/engines/memory_wal.hpp"

#include <cstring>

#include "pg/bridge/clock.hpp"
#include "pg/bridge/settings.hpp"
#include "pg/compat/compat.hpp"
#include "pg/engines/memory_engine.hpp"
#include "pg/engines/memory_store_file.hpp"

extern "C" {
#include "access/xact.h"
#include "access/xlog.h"
#include "access/xlog_internal.h"
#include "access/xloginsert.h"
#include "catalog/pg_control.h"
#include "access/xlogreader.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "postmaster/bgworker.h"
#include "postmaster/interrupt.h"
#include "storage/ipc.h"
#include "storage/latch.h"
#include "storage/proc.h"
#include "tcop/tcopprot.h"
#include "utils/wait_event.h"
}

extern "C" PGDLLEXPORT void ratelimit_memory_wal_worker_main(Datum);

namespace ratelimit::pg {
namespace {

// A record holds up to this many bytes of keys (about 60 counters, or a few long logs); more
// keys go in further records.
constexpr std::size_t kRecordBytes = 8 * (kSavedSlotFixedBytes + kMaxSlidingLog * sizeof(LogEntry));

// The record being built by this process (one at a time: WalKeys are never nested).
char record_buffer[kRecordBytes];

std::size_t saved_bytes(const SavedSlot& saved) {
    return kSavedSlotFixedBytes + static_cast<std::size_t>(saved.log_count) * sizeof(LogEntry);
}

const char* record_name(std::uint8_t info) {
    switch (info & XLR_RMGR_INFO_MASK) {
        case kWalStates:
            return "STATES";
        case kWalSnapshot:
            return "SNAPSHOT";
        default:
            return nullptr;
    }
}

// ---- replay ----------------------------------------------------------------------------------

// A server that replays this WAL with ratelimit.memory_wal off (a standby set up without it, or
// a primary restarted with it off after a crash) hashes keys with a key of its own, so it could
// not find the replayed states: it ignores them, and says so once per recovery.
void ignore_records_without_setting() {
    static bool warned = false;
    if (warned)
        return;
    warned = true;
    // LOG, not WARNING: in the server's log, LOG ranks above WARNING.
    ereport(LOG,
            (errmsg("ratelimit: the memory engine's WAL records are ignored: ratelimit.memory_wal "
                    "is off on this server"),
             errdetail("Its memory engine keeps its own counts, not those of the server that "
                       "wrote the WAL."),
             errhint("Set ratelimit.memory_wal = on on every server that replays the WAL of a "
                     "server where it is on, standbys included.")));
}

void redo(XLogReaderState* record) {
    if (!setting::memory_wal) {
        ignore_records_without_setting();
        return;
    }
    const char* data = XLogRecGetData(record);
    const std::size_t length = XLogRecGetDataLen(record);
    // Plain data: the startup process has no error recovery to unwind.
    static SavedSlot saved;
    std::size_t at = 0;
    while (at + kSavedSlotFixedBytes <= length) {
        std::memcpy(static_cast<void*>(&saved), data + at, kSavedSlotFixedBytes);
        const std::size_t bytes = saved_bytes(saved);
        if (saved.log_count > kMaxSlidingLog || at + bytes > length)
            elog(PANIC, "ratelimit: a memory engine WAL record is damaged");
        std::memcpy(static_cast<void*>(saved.log), data + at + kSavedSlotFixedBytes,
                    bytes - kSavedSlotFixedBytes);
        memory_replay(saved);
        at += bytes;
    }
}

void describe(StringInfo buffer, XLogReaderState* record) {
    const std::size_t length = XLogRecGetDataLen(record);
    const char* data = XLogRecGetData(record);
    int keys = 0, forgotten = 0;
    SavedSlot fixed;
    for (std::size_t at = 0; at + kSavedSlotFixedBytes <= length;) {
        std::memcpy(static_cast<void*>(&fixed), data + at, kSavedSlotFixedBytes);
        ++keys;
        if (fixed.algorithm == kForgotten)
            ++forgotten;
        at += saved_bytes(fixed);
    }
    appendStringInfo(buffer, "keys %d, forgotten %d", keys, forgotten);
}

const char* identify(uint8 info) {
    return record_name(info);
}

// The end of redo, in the startup process, before the end-of-recovery checkpoint: the store as
// recovery rebuilt it goes to a file of its own, because that checkpoint moves the redo
// pointer past every record replayed, and the worker, which writes every key after it, starts
// only once recovery is over. A crash before the worker's first pass rebuilds the store from
// this file and the WAL after that checkpoint (load_store_file()).
void recovery_done() {
    if (setting::memory_wal)
        memory_save(true);
}

RmgrData memory_rmgr;

// ---- the worker: announces the WAL, holds the checkpoints -------------------------------------

// How often the worker looks for a new redo pointer and for WAL to announce, in milliseconds.
constexpr long kWorkerTickMs = 10;

// The end of the WAL inserted so far. GetXLogInsertRecPtr() is where the next record will start,
// which at the start of a page is past the page's header, where no WAL is yet: asked to flush
// that far, the WAL writer would PANIC.
XLogRecPtr inserted_end() {
    const XLogRecPtr next = GetXLogInsertRecPtr();
    const XLogRecPtr header = XLogSegmentOffset(next, wal_segment_size) < XLOG_BLCKSZ
                                  ? SizeOfXLogLongPHD
                                  : SizeOfXLogShortPHD;
    return next % XLOG_BLCKSZ == header ? next - header : next;
}

// Asks the WAL writer to write and flush the WAL inserted so far, as an asynchronous commit does,
// if it grew since `announced`. A decision inserts its record without this: asking costs a
// spinlock shared by every backend and, while the WAL writer is behind, a signal that wakes it,
// which on every call cost more than the record itself. Asked once a tick instead, the WAL writer
// still has each record within a tick, and flushes it within wal_writer_delay.
void announce_inserted(XLogRecPtr& announced) {
    const XLogRecPtr inserted = inserted_end();
    if (inserted <= announced)
        return;
    XLogSetAsyncXactLSN(inserted);
    announced = inserted;
}

void register_wal_worker() {
    BackgroundWorker worker;
    memset(&worker, 0, sizeof worker);
    // A connection (to no database) gives it a virtual transaction id, which is what a
    // checkpoint waits on.
    worker.bgw_flags = BGWORKER_SHMEM_ACCESS | BGWORKER_BACKEND_DATABASE_CONNECTION;
    worker.bgw_start_time = BgWorkerStart_RecoveryFinished;
    worker.bgw_restart_time = 1;
    snprintf(worker.bgw_library_name, BGW_MAXLEN, "ratelimit");
    snprintf(worker.bgw_function_name, BGW_MAXLEN, "ratelimit_memory_wal_worker_main");
    snprintf(worker.bgw_name, BGW_MAXLEN, "ratelimit memory engine WAL");
    snprintf(worker.bgw_type, BGW_MAXLEN, "ratelimit memory engine WAL");
    RegisterBackgroundWorker(&worker);
}

}  // namespace

void install_memory_wal() {
    memory_rmgr.rm_name = "ratelimit";
    memory_rmgr.rm_redo = redo;
    memory_rmgr.rm_desc = describe;
    memory_rmgr.rm_identify = identify;
    memory_rmgr.rm_cleanup = recovery_done;
    RegisterCustomRmgr(kMemoryWalRmgrId, &memory_rmgr);
    if (setting::memory_wal)
        register_wal_worker();
}

bool memory_wal_logging() {
    return setting::memory_wal && !RecoveryInProgress();
}

HashSecret memory_wal_secret() {
    // SipHash of the nonce under a fixed key: the nonce itself never leaves pg_control.
    const char* nonce = GetMockAuthenticationNonce();
    const KeyHash hash = hash_key(HashSecret{0x726174656c696d69ULL, 0x74206d656d6f7279ULL}, nonce,
                                  MOCK_AUTH_NONCE_LEN);
    return HashSecret{hash.low, hash.high};
}

void WalKeys::add(const MemoryStore& store, int partition, const KeyHash& key) noexcept {
    static SavedSlot saved;
    if (!store.saved(partition, key, saved)) {
        std::memset(static_cast<void*>(&saved), 0, kSavedSlotFixedBytes);
        saved.key = key;
        saved.algorithm = kForgotten;
    }
    add(saved);
}

void WalKeys::add(const SavedSlot& saved) noexcept {
    const std::size_t bytes = saved_bytes(saved);
    if (used_ + bytes > kRecordBytes)
        insert();
    std::memcpy(record_buffer + used_, &saved, kSavedSlotFixedBytes);
    std::memcpy(record_buffer + used_ + kSavedSlotFixedBytes, saved.log,
                bytes - kSavedSlotFixedBytes);
    used_ += bytes;
    ++count_;
}

void WalKeys::insert() noexcept {
    if (count_ == 0)
        return;
    // The record is not the calling transaction's (a decision is not transactional): its commit
    // must not ask the WAL writer to flush it, which costs a call as much as the WAL writer's
    // wake-ups do (announce_inserted() asks once a tick). So the transaction's last WAL position
    // stays where the transaction's own records left it; those it writes later still cover this.
    const XLogRecPtr transaction_end = XactLastRecEnd;
    START_CRIT_SECTION();
    XLogBeginInsert();
    XLogRegisterData(record_buffer, static_cast<uint32>(used_));
    (void)XLogInsert(kMemoryWalRmgrId, kind_);
    END_CRIT_SECTION();
    XactLastRecEnd = transaction_end;
    used_ = 0;
    count_ = 0;
}

}  // namespace ratelimit::pg

// The worker: every tick, asks the WAL writer to flush the records inserted since the last one.
// It holds every checkpoint (DELAY_CHKPT_START on its virtual transaction) until it
// has written every key after that checkpoint's redo pointer, then lets it go by ending its
// transaction and holds the next one with a new one. A checkpoint takes at least one of its own
// 10 ms sleeps to notice, and cannot begin the next until it has finished, so the worker holds
// again long before another redo pointer is fixed; if one was fixed meanwhile anyway, the worker
// writes every key again at once.
void ratelimit_memory_wal_worker_main(Datum) {
    using namespace ratelimit::pg;
    pqsignal(SIGHUP, SignalHandlerForConfigReload);
    pqsignal(SIGTERM, SignalHandlerForShutdownRequest);
    BackgroundWorkerUnblockSignals();
    BackgroundWorkerInitializeConnection(nullptr, nullptr, 0);
    // Its transaction takes no snapshot and no transaction id, so it holds back no vacuum and
    // no snapshot; it reports no start time, so it never looks like a long transaction.
    StartTransactionCommand();
    pgstat_report_xact_timestamp(0);
    MyProc->delayChkptFlags |= DELAY_CHKPT_START;
    // A checkpoint may have finished before this worker started (the end of recovery): every key
    // goes after the current redo pointer now.
    XLogRecPtr written_after = GetRedoRecPtr();
    memory_log_all();
    // The store as the last recovery left it may go once those records are on disk.
    XLogFlush(inserted_end());
    forget_recovered_store_file();
    XLogRecPtr announced = inserted_end();
    for (;;) {
        (void)WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH, kWorkerTickMs,
                        PG_WAIT_EXTENSION);
        ResetLatch(MyLatch);
        CHECK_FOR_INTERRUPTS();
        if (ShutdownRequestPending) {
            MyProc->delayChkptFlags &= ~DELAY_CHKPT_START;
            proc_exit(0);
        }
        if (ConfigReloadPending) {
            ConfigReloadPending = false;
            ProcessConfigFile(PGC_SIGHUP);
        }
        announce_inserted(announced);
        const XLogRecPtr redo = GetRedoRecPtr();
        if (redo == written_after)
            continue;
        // A checkpoint has fixed its redo pointer, and waits for this transaction.
        memory_log_all();
        written_after = redo;
        // Ending the transaction also clears the flag (PostgreSQL clears it at every end of a
        // transaction): the new one sets it again.
        CommitTransactionCommand();
        StartTransactionCommand();
        pgstat_report_xact_timestamp(0);
        MyProc->delayChkptFlags |= DELAY_CHKPT_START;
    }
}
