// In-flight leases (ratelimit/lease_table.hpp) in shared memory: ratelimit.acquire, release and
// in_flight. A transaction's leases end with it (commit, rollback, or the rollback of the
// savepoint they were taken under); a session's end with its backend, however it exits. A
// backend killed outright makes the postmaster reinitialize shared memory, leases included.
#pragma once

namespace ratelimit::pg {

// Requests the lease table's shared memory; called while shared_preload_libraries loads.
void install_leases();

}  // namespace ratelimit::pg
