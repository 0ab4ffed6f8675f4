// Module entry: the library's magic block and _PG_init, which only asks each part to register
// what it owns.
#include "pg/clock.hpp"
#include "pg/denial_queue.hpp"
#include "pg/drop_in_rules.hpp"
#include "pg/jwt_caller.hpp"
#include "pg/leases.hpp"
#include "pg/memory_engine.hpp"
#include "pg/policy_counters.hpp"
#include "pg/postgres.hpp"
#include "pg/pre_request.hpp"
#include "pg/reservations.hpp"

extern "C" {
PG_MODULE_MAGIC;

void _PG_init(void);

void _PG_init(void) {
    ratelimit::pg::define_clock_settings();
    ratelimit::pg::define_denial_queue_settings();
    ratelimit::pg::define_drop_in_settings();
    ratelimit::pg::define_jwt_settings();
    ratelimit::pg::define_lease_settings();
    ratelimit::pg::define_memory_settings();
    ratelimit::pg::define_policy_settings();
    ratelimit::pg::define_pre_request_settings();
    ratelimit::pg::define_reservation_settings();
    // The memory engine's shared memory can only be requested while the postmaster loads
    // shared_preload_libraries; loaded later, the library serves the table engines and the
    // memory engine answers every call with an error naming that setting.
    if (process_shared_preload_libraries_in_progress) {
        ratelimit::pg::install_memory_engine();
        ratelimit::pg::install_denial_queue();
        ratelimit::pg::install_leases();
        ratelimit::pg::install_policy_counters();
        ratelimit::pg::install_reservations();
    }
    MarkGUCPrefixReserved("ratelimit");
}
}
