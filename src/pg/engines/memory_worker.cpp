// The memory engine's background worker: frees expired keys every
// ratelimit.memory_expire_interval seconds, so that a full store rarely has to look for room,
// and, when ratelimit.memory_snapshot_interval is set, saves the store that often so a crash
// loses at most that much.
//
// It runs in every server that preloads the library, primaries and standbys alike (it needs
// shared memory only, no database). The loop waits on its latch, exits with the postmaster,
// rereads the configuration on SIGHUP, stops quietly on SIGTERM and is restarted by the postmaster
// if it ever fails. Its code calls PostgreSQL directly and creates no C++ object with a destructor:
// an ERROR here ends the process (a worker has no error recovery), it never unwinds C++ frames.
#include <algorithm>

#include "pg/bridge/clock.hpp"
#include "pg/engines/memory_engine.hpp"
#include "pg/bridge/postgres.hpp"

extern "C" {
#include "pgstat.h"
#include "postmaster/bgworker.h"
#include "postmaster/interrupt.h"
#include "storage/ipc.h"
#include "storage/latch.h"
#include "tcop/tcopprot.h"
#include "utils/wait_event.h"
}

extern "C" PGDLLEXPORT void ratelimit_memory_worker_main(Datum);

namespace ratelimit::pg {

void register_memory_worker() {
    BackgroundWorker worker;
    memset(&worker, 0, sizeof worker);
    worker.bgw_flags = BGWORKER_SHMEM_ACCESS;
    worker.bgw_start_time = BgWorkerStart_PostmasterStart;
    worker.bgw_restart_time = 10;
    snprintf(worker.bgw_library_name, BGW_MAXLEN, "ratelimit");
    snprintf(worker.bgw_function_name, BGW_MAXLEN, "ratelimit_memory_worker_main");
    snprintf(worker.bgw_name, BGW_MAXLEN, "ratelimit memory engine");
    snprintf(worker.bgw_type, BGW_MAXLEN, "ratelimit memory engine");
    RegisterBackgroundWorker(&worker);
}

namespace {

// Milliseconds until `last` + `interval_s` seconds, at least 0.
long due_in_ms(TimestampTz now, TimestampTz last, int interval_s) {
    const TimestampTz due = last + static_cast<TimestampTz>(interval_s) * USECS_PER_SEC;
    return due <= now ? 0 : static_cast<long>((due - now + 999) / 1000);
}

}  // namespace
}  // namespace ratelimit::pg

void ratelimit_memory_worker_main(Datum) {
    using namespace ratelimit::pg;
    pqsignal(SIGHUP, SignalHandlerForConfigReload);
    pqsignal(SIGTERM, SignalHandlerForShutdownRequest);
    BackgroundWorkerUnblockSignals();

    TimestampTz last_expire = GetCurrentTimestamp();
    TimestampTz last_snapshot = last_expire;
    for (;;) {
        const TimestampTz now = GetCurrentTimestamp();
        long wait_ms = due_in_ms(now, last_expire, memory_expire_interval_seconds());
        if (memory_snapshot_interval_seconds() > 0)
            wait_ms = std::min(wait_ms,
                               due_in_ms(now, last_snapshot, memory_snapshot_interval_seconds()));
        if (wait_ms > 0) {
            (void)WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH, wait_ms,
                            PG_WAIT_EXTENSION);
            ResetLatch(MyLatch);
        }
        CHECK_FOR_INTERRUPTS();
        // Shutting down: the postmaster saves the store once every process has exited.
        if (ShutdownRequestPending)
            proc_exit(0);
        if (ConfigReloadPending) {
            ConfigReloadPending = false;
            ProcessConfigFile(PGC_SIGHUP);
        }
        const TimestampTz woke = GetCurrentTimestamp();
        if (due_in_ms(woke, last_expire, memory_expire_interval_seconds()) == 0) {
            memory_expire_all(clock_now());
            last_expire = woke;
        }
        if (memory_snapshot_interval_seconds() > 0 &&
            due_in_ms(woke, last_snapshot, memory_snapshot_interval_seconds()) == 0) {
            memory_save();
            last_snapshot = woke;
        }
    }
}
