// Reservations (ratelimit/reservation_table.hpp) in shared memory: ratelimit.reserve, settle
// and cancel. A reserve consumes the estimate as ratelimit.consume would and remembers the
// reservation; a settle charges or refunds the difference to the actual cost. The registry
// follows the transactions: a reservation whose reserve rolls back is dropped with it; a settle
// that rolls back leaves the reservation open again (on the table engines its adjustment rolls
// back with it). The memory engine's counters are never transactional, so there the registry
// follows them instead: a memory-engine settle is final as soon as its adjustment is made.
// A server restart forgets every open reservation, as their expiry would: each stays charged
// its estimate.
#pragma once

namespace ratelimit::pg {

// Requests the registry's shared memory; called while shared_preload_libraries loads.
void install_reservations();

}  // namespace ratelimit::pg
