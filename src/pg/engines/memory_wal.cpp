// The memory engine in the WAL (pg/engines/memory_wal.hpp): the records, their replay, and the
// worker that keeps each checkpoint waiting until the store is in the checkpoint file.
//
// The replay runs in the startup process and the worker is a background worker: neither has
// error recovery to unwind into, so this code creates no C++ object with a destructor and calls
// PostgreSQL directly; so does the insertion, which runs under a partition's LWLock inside a
// critical section.
#include "pg/engines/memory_wal.hpp"

#include <cerrno>
#include <csignal>
#include <algorithm>
#include <cstring>

#include "pg/bridge/clock.hpp"
#include "pg/bridge/guard.hpp"
#include "pg/bridge/settings.hpp"
#include "pg/compat/compat.hpp"
#include "pg/engines/memory_engine.hpp"
#include "pg/engines/memory_store_file.hpp"
#include "pg/shared_memory/shared_region.hpp"

extern "C" {
#include "access/xact.h"
#include "access/xlog.h"
#include "access/xlog_internal.h"
#include "access/xloginsert.h"
#include "catalog/pg_control.h"
#include "access/xlogreader.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "port/atomics.h"
#include "postmaster/bgworker.h"
#include "postmaster/interrupt.h"
#include "replication/syncrep.h"
#include "storage/ipc.h"
#include "storage/latch.h"
#include "storage/proc.h"
#include "tcop/tcopprot.h"
#include "utils/wait_event.h"
}

extern "C" PGDLLEXPORT void ratelimit_memory_wal_worker_main(Datum);

namespace ratelimit::pg {
namespace {

// A record holds up to this many bytes (its format's byte, then about 60 counters, or a few long
// logs); more keys go in further records.
constexpr std::size_t kRecordBytes =
    1 + 8 * (kSavedSlotFixedBytes + kMaxSlidingLog * sizeof(LogEntry));

// The record being built by this process (one at a time: WalKeys are never nested).
char record_buffer[kRecordBytes];

// What every process sees of the WAL side: whether the worker runs, and what replay could not
// place. Atomics only; no lock.
struct WalState {
    pg_atomic_uint32 worker_pid;       // the worker's, 0 while none runs
    pg_atomic_uint64 worker_starts;    // since the server started (or restarted after a crash)
    pg_atomic_uint64 replay_unplaced;  // replayed keys the store had no room for
};

std::size_t wal_state_bytes() {
    return sizeof(WalState);
}

void create_wal_state(void* block) {
    auto* state = static_cast<WalState*>(block);
    pg_atomic_init_u32(&state->worker_pid, 0);
    pg_atomic_init_u64(&state->worker_starts, 0);
    pg_atomic_init_u64(&state->replay_unplaced, 0);
}

SharedRegion wal_region("ratelimit memory engine WAL", 1, "the memory engine's WAL state",
                        wal_state_bytes, create_wal_state);

WalState* wal_state() {
    return wal_region.available() ? static_cast<WalState*>(wal_region.table()) : nullptr;
}

// SIGTERM to the worker: from the postmaster, the server is shutting down and the worker stops;
// from anyone else (pg_terminate_backend), it stays, since no checkpoint would wait for the keys
// while it is gone, and says so. SIGINT (pg_cancel_backend) is ignored: it has no query.
volatile sig_atomic_t shutdown_requested = 0;
volatile sig_atomic_t terminate_refused = 0;

void on_sigterm(int, siginfo_t* info, void*) {
    const int saved_errno = errno;
    if (info != nullptr && info->si_pid == PostmasterPid)
        shutdown_requested = 1;
    else
        terminate_refused = 1;
    SetLatch(MyLatch);
    errno = saved_errno;
}

// The end of this backend's last decision record in the current transaction, for
// ratelimit.memory_wal_commit_wait; invalid when there is none.
XLogRecPtr decided_end = InvalidXLogRecPtr;
bool commit_callback_registered = false;

// Before the deciding transaction commits, with ratelimit.memory_wal_commit_wait on: its
// decisions' records are flushed, and sent to synchronous standbys, as synchronous_commit asks
// for a commit's. A decision has no transaction id, so its transaction's commit would not wait
// for them by itself. Runs in a transaction callback: PostgreSQL code only.
void wait_for_decisions(XactEvent event, void*) {
    switch (event) {
        case XACT_EVENT_PRE_COMMIT:
        case XACT_EVENT_PARALLEL_PRE_COMMIT:
            if (setting::memory_wal_commit_wait && !XLogRecPtrIsInvalid(decided_end) &&
                synchronous_commit > SYNCHRONOUS_COMMIT_OFF) {
                XLogFlush(decided_end);
                SyncRepWaitForLSN(decided_end, true);
            }
            decided_end = InvalidXLogRecPtr;
            break;
        case XACT_EVENT_ABORT:
        case XACT_EVENT_PARALLEL_ABORT:
        case XACT_EVENT_COMMIT:
        case XACT_EVENT_PARALLEL_COMMIT:
            decided_end = InvalidXLogRecPtr;
            break;
        default:
            break;
    }
}

// The worker's exit, however it comes (shutdown, an ERROR): the others see it gone.
void worker_gone(int, Datum) {
    if (WalState* state = wal_state())
        pg_atomic_write_u32(&state->worker_pid, 0);
}

std::size_t saved_bytes(const SavedSlot& saved) {
    return kSavedSlotFixedBytes + static_cast<std::size_t>(saved.log_count) * sizeof(LogEntry);
}

const char* record_name(std::uint8_t info) {
    switch (info & XLR_RMGR_INFO_MASK) {
        case kWalStates:
            return "STATES";
        case kWalSnapshot:
            return "SNAPSHOT";
        case kWalSaved:
            return "SAVED";
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

// A SAVED record's data after its format's byte: what the checkpoint file holds.
struct SavedRecord {
    std::int64_t keys;
    std::int64_t bytes;
};

// A SAVED record replayed (a standby, or recovery after a crash): this server's own store goes
// to its own checkpoint file, before the checkpoint record that a restartpoint will start from.
// Should it not be written, the older file goes: it would bring back states that the WAL after
// that checkpoint no longer holds (stricter ones too), where without it the keys are forgiven.
void save_replayed_store() {
    if (!memory_save(true))
        forget_checkpoint_store_file();
}

// The format a record says it is in (its first byte), -1 for an empty record.
int record_format(const char* data, std::size_t length) {
    return length < 1 ? -1 : static_cast<int>(static_cast<std::uint8_t>(data[0]));
}

void redo(XLogReaderState* record) {
    if (!setting::memory_wal) {
        ignore_records_without_setting();
        return;
    }
    const char* data = XLogRecGetData(record);
    const std::size_t length = XLogRecGetDataLen(record);
    const std::uint8_t kind = XLogRecGetInfo(record) & XLR_RMGR_INFO_MASK;
    if (record_format(data, length) != kWalFormat || kind > kWalSaved)
        ereport(PANIC,
                (errmsg("ratelimit: a memory engine WAL record of format %d, where this ratelimit "
                        "reads format %d",
                        record_format(data, length), static_cast<int>(kWalFormat)),
                 errhint("Every server that replays this WAL (a standby, a server restored "
                         "from it) needs the ratelimit version of the server that wrote it.")));
    // Whether this server's checkpoint file has been dropped since the last SAVED record.
    static bool file_forgotten = false;
    if (kind == kWalSaved) {
        save_replayed_store();
        file_forgotten = false;
        return;
    }
    // SNAPSHOT records mean the primary could not write its file and carries the keys in the
    // WAL instead: this server's file, older than them, goes too, as the primary's did.
    if (kind == kWalSnapshot && !file_forgotten) {
        forget_checkpoint_store_file();
        file_forgotten = true;
    }
    // Plain data: the startup process has no error recovery to unwind.
    static SavedSlot saved;
    std::size_t at = 1;
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
    if (record_format(data, length) != kWalFormat) {
        appendStringInfo(buffer, "format %d", record_format(data, length));
        return;
    }
    if ((XLogRecGetInfo(record) & XLR_RMGR_INFO_MASK) == kWalSaved) {
        SavedRecord saved{};
        std::memcpy(&saved, data + 1, std::min(length - 1, sizeof saved));
        appendStringInfo(buffer, "keys %lld, bytes %lld", static_cast<long long>(saved.keys),
                         static_cast<long long>(saved.bytes));
        return;
    }
    for (std::size_t at = 1; at + kSavedSlotFixedBytes <= length;) {
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
// recovery rebuilt it goes to the checkpoint file, because that checkpoint moves the redo
// pointer past every record replayed, and the worker, which holds checkpoints, starts only once
// recovery is over. Nothing changes the store between the two, so the file is the store as of
// that checkpoint.
void recovery_done() {
    if (setting::memory_wal)
        save_replayed_store();
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

// The store as of the checkpoint whose redo pointer has just been fixed (this worker holds it):
// to the checkpoint file, then a SAVED record, which a standby replays by saving its own. Should
// the file not be written (a full disk), the older one goes and every key's state goes to the
// WAL after the redo pointer instead.
void save_at_checkpoint() {
    StoreSaved saved;
    if (!memory_save(true, &saved)) {
        forget_checkpoint_store_file();
        memory_log_all();
        return;
    }
    const SavedRecord record{saved.keys, saved.bytes};
    record_buffer[0] = static_cast<char>(kWalFormat);
    std::memcpy(record_buffer + 1, &record, sizeof record);
    XLogBeginInsert();
    XLogRegisterData(record_buffer, static_cast<uint32>(1 + sizeof record));
    (void)XLogInsert(kMemoryWalRmgrId, kWalSaved);
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
    // Without its worker the engine would log decisions that no checkpoint waits for: a server
    // that cannot run it does not start.
    if (!compat::background_worker_registered("ratelimit", "ratelimit_memory_wal_worker_main"))
        ereport(ERROR, (errcode(ERRCODE_CONFIGURATION_LIMIT_EXCEEDED),
                        errmsg("ratelimit.memory_wal = on needs a background worker, and "
                               "max_worker_processes (%d) has no slot left for it",
                               max_worker_processes),
                        errhint("Raise max_worker_processes, or set ratelimit.memory_wal = off.")));
}

}  // namespace

void install_memory_wal() {
    memory_rmgr.rm_name = "ratelimit";
    memory_rmgr.rm_redo = redo;
    memory_rmgr.rm_desc = describe;
    memory_rmgr.rm_identify = identify;
    memory_rmgr.rm_cleanup = recovery_done;
    RegisterCustomRmgr(kMemoryWalRmgrId, &memory_rmgr);
    wal_region.install();
    if (setting::memory_wal)
        register_wal_worker();
}

bool memory_wal_logging() {
    if (!setting::memory_wal || RecoveryInProgress())
        return false;
    if (setting::memory_wal_commit_wait && !commit_callback_registered) {
        call_postgres([] { RegisterXactCallback(wait_for_decisions, nullptr); });
        commit_callback_registered = true;
    }
    // The worker gone (terminated, or failed) and not back yet: until it is, a checkpoint does
    // not wait for the keys, so say so, once per backend each time (it comes back within about
    // a second, and writes every key again).
    static std::uint64_t warned_at_starts = 0;
    WalState* state = wal_state();
    if (state != nullptr && pg_atomic_read_u32(&state->worker_pid) == 0) {
        const std::uint64_t starts = pg_atomic_read_u64(&state->worker_starts);
        if (starts > 0 && starts != warned_at_starts) {
            warned_at_starts = starts;
            call_postgres([] {
                ereport(WARNING,
                        (errmsg("ratelimit: the memory engine's WAL worker is not running"),
                         errdetail("Until it is back (it restarts within about a second), a "
                                   "checkpoint does not wait for the memory engine's keys: a "
                                   "crash in that time can forgive units spent before it."),
                         errhint("See memory_stats.wal_worker_running; the server's log says "
                                 "what ended it.")));
            });
        }
    }
    return true;
}

MemoryWalStatus memory_wal_status() {
    MemoryWalStatus status;
    status.enabled = setting::memory_wal;
    if (WalState* state = wal_state()) {
        status.worker_running = pg_atomic_read_u32(&state->worker_pid) != 0;
        status.worker_starts = static_cast<std::int64_t>(pg_atomic_read_u64(&state->worker_starts));
        status.replay_unplaced =
            static_cast<std::int64_t>(pg_atomic_read_u64(&state->replay_unplaced));
    }
    return status;
}

void count_unplaced_replay(std::int64_t keys) {
    if (WalState* state = wal_state())
        pg_atomic_fetch_add_u64(&state->replay_unplaced, static_cast<std::uint64_t>(keys));
    // Once per recovery: the startup process replays every record.
    static bool logged = false;
    if (logged)
        return;
    logged = true;
    ereport(LOG,
            (errmsg("ratelimit: the memory engine's store has no room for a replayed key: this "
                    "server's store is smaller than the one whose WAL it replays"),
             errdetail("Keys replay could not place, and those it evicted to make room, are "
                       "counted in memory_stats.replay_unplaced; a failover to this server "
                       "forgives them."),
             errhint("Give this server the ratelimit.memory_capacity and "
                     "ratelimit.memory_log_blocks of the server that wrote the WAL.")));
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
    record_buffer[0] = static_cast<char>(kWalFormat);
    // The record is not the calling transaction's (a decision is not transactional): its commit
    // must not ask the WAL writer to flush it, which costs a call as much as the WAL writer's
    // wake-ups do (announce_inserted() asks once a tick). So the transaction's last WAL position
    // stays where the transaction's own records left it; those it writes later still cover this.
    const XLogRecPtr transaction_end = XactLastRecEnd;
    START_CRIT_SECTION();
    XLogBeginInsert();
    XLogRegisterData(record_buffer, static_cast<uint32>(used_));
    const XLogRecPtr end = XLogInsert(kMemoryWalRmgrId, kind_);
    END_CRIT_SECTION();
    if (kind_ == kWalStates)
        decided_end = end;
    XactLastRecEnd = transaction_end;
    used_ = 1;
    count_ = 0;
}

}  // namespace ratelimit::pg

// The worker: every tick, asks the WAL writer to flush the records inserted since the last one.
// Its pid is in shared memory while it runs (memory_stats.wal_worker_running); a decision made
// while it is gone warns. It stops only for the server's shutdown (on_sigterm); an ERROR ends
// it with exit code 1, and the postmaster starts it again a second later (bgw_restart_time),
// when its first pass writes every key again.
// It holds every checkpoint (DELAY_CHKPT_START on its virtual transaction) until it has
// written the store to the checkpoint file after that checkpoint's redo pointer was fixed, then
// lets it go by ending its transaction and holds the next one with a new one. A checkpoint takes at
// least one of its own 10 ms sleeps to notice, and cannot begin the next until it has finished, so
// the worker holds again long before another redo pointer is fixed; if one was fixed meanwhile
// anyway, the worker saves the store again at once.
void ratelimit_memory_wal_worker_main(Datum) {
    using namespace ratelimit::pg;
    pqsignal(SIGHUP, SignalHandlerForConfigReload);
    pqsignal(SIGINT, SIG_IGN);
    struct sigaction terminate;
    memset(&terminate, 0, sizeof terminate);
    terminate.sa_sigaction = on_sigterm;
    terminate.sa_flags = SA_SIGINFO | SA_RESTART;
    sigemptyset(&terminate.sa_mask);
    sigaction(SIGTERM, &terminate, nullptr);
    BackgroundWorkerUnblockSignals();
    BackgroundWorkerInitializeConnection(nullptr, nullptr, 0);
    if (WalState* state = wal_state()) {
        before_shmem_exit(worker_gone, 0);
        pg_atomic_write_u32(&state->worker_pid, static_cast<std::uint32_t>(MyProcPid));
        pg_atomic_fetch_add_u64(&state->worker_starts, 1);
    }
    // Its transaction takes no snapshot and no transaction id, so it holds back no vacuum and
    // no snapshot; it reports no start time, so it never looks like a long transaction.
    StartTransactionCommand();
    pgstat_report_xact_timestamp(0);
    MyProc->delayChkptFlags |= DELAY_CHKPT_START;
    if (setting::memory_wal_first_save_delay > 0)
        pg_usleep(static_cast<long>(setting::memory_wal_first_save_delay) * 1000L);
    // A checkpoint may have finished before this worker started, unheld (a CHECKPOINT right
    // after the start, the one PostgreSQL requests at a promotion): the store is saved for the
    // current redo pointer now.
    XLogRecPtr written_after = GetRedoRecPtr();
    save_at_checkpoint();
    XLogFlush(inserted_end());
    XLogRecPtr announced = inserted_end();
    for (;;) {
        (void)WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH, kWorkerTickMs,
                        PG_WAIT_EXTENSION);
        ResetLatch(MyLatch);
        CHECK_FOR_INTERRUPTS();
        if (shutdown_requested) {
            MyProc->delayChkptFlags &= ~DELAY_CHKPT_START;
            proc_exit(0);
        }
        if (terminate_refused) {
            terminate_refused = 0;
            ereport(LOG,
                    (errmsg("ratelimit: the memory engine's WAL worker does not stop for "
                            "pg_terminate_backend"),
                     errdetail("It holds each checkpoint until the memory engine's keys are in "
                               "the WAL after it; without it a crash could forgive them."),
                     errhint("To stop it, set ratelimit.memory_wal = off and restart the "
                             "server.")));
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
        save_at_checkpoint();
        written_after = redo;
        // Ending the transaction also clears the flag (PostgreSQL clears it at every end of a
        // transaction): the new one sets it again.
        CommitTransactionCommand();
        StartTransactionCommand();
        pgstat_report_xact_timestamp(0);
        MyProc->delayChkptFlags |= DELAY_CHKPT_START;
    }
}
