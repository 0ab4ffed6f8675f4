// The denial log's queue: every logged denial also goes to a bounded queue in shared memory, so
// that it reaches ratelimit.denial_log even when the caller's transaction does not commit (a
// PostgREST denial raises its error and rolls back) or cannot write (a read-only transaction).
//
//  - A denial written to the log by the caller's own transaction is queued as held by it: the
//    commit drops the queued copy (the row is there), a rollback of the transaction or of the
//    savepoint that wrote it hands the copy to the queue's workers.
//  - A denial the transaction cannot write (read only) is queued for the workers at once.
//  - A worker per database with queued denials (started by the queue's launcher, a background
//    worker of its own) writes them, in transactions of its own, within about a second; it stops
//    once its database's queue has been empty for a second, so it never keeps a database busy.
//  - A denial the queue cannot hold, and one a worker cannot write (the extension is gone, an
//    error), is counted in its policy's denials_not_logged instead: never lost silently.
//  - A hot standby cannot write the table: its denials are counted as not logged.
// Without shared_preload_libraries there is no queue: denials are written by the caller's
// transaction only, and go with its rollback.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "pg/bridge/postgres.hpp"
#include "ratelimit/time.hpp"

namespace ratelimit::pg {

// One row of the denial log, as the caller's transaction writes it.
struct DenialRecord {
    std::string policy;
    Micros logged_at = 0;
    bool enforced = true;  // status 'blocked'; false: 'shadow'
    int log_size = 0;      // the ring's size in the session that denied (ratelimit.denial_log_size)
    std::string message;
    std::string event_data;  // jsonb, as text
};

// Queues `record`. `written_here`: the caller's transaction writes the row itself (see above).
// Returns false, having counted the denial as not logged when it cannot reach the log, if there
// is no queue (not preloaded) or it is full; true otherwise.
bool queue_denial(const DenialRecord& record, bool written_here);

// Whether the queue exists (the library was preloaded).
bool denial_queue_available();

// The most bytes of event data (jsonb, as text) an entry holds; a denial's event data is made to
// fit (pg/policies/denial_log.cpp).
std::size_t denial_queue_event_bytes();

// The queue's figures for metrics(): its size, what it holds now, and since the server
// started the denials it could not hold and the rows its workers wrote.
struct DenialQueueStats {
    std::int64_t capacity = 0;
    std::int64_t queued = 0;
    std::int64_t full = 0;
    std::int64_t written = 0;
};
DenialQueueStats denial_queue_stats();

// From _PG_init while the library is being preloaded: the queue and its launcher.
void install_denial_queue();

}  // namespace ratelimit::pg
