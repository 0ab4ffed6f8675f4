// Module entry: the library's magic block and _PG_init, which defines the settings and asks each
// part that lives in shared memory to register it.
#include "pg/policies/denial_queue.hpp"
#include "pg/native/leases.hpp"
#include "pg/engines/memory_engine.hpp"
#include "pg/policies/policy_counters.hpp"
#include "pg/bridge/postgres.hpp"
#include "pg/native/reservations.hpp"
#include "pg/bridge/settings.hpp"

extern "C" {
PG_MODULE_MAGIC;

void _PG_init(void);

void _PG_init(void) {
    ratelimit::pg::define_settings();
    // Shared memory can only be requested while the postmaster loads shared_preload_libraries;
    // loaded later, the library serves the table engines, and what lives in shared memory
    // answers every call with an error naming that setting.
    if (process_shared_preload_libraries_in_progress) {
        ratelimit::pg::install_memory_engine();
        ratelimit::pg::install_denial_queue();
        ratelimit::pg::install_leases();
        ratelimit::pg::install_policy_counters();
        ratelimit::pg::install_reservations();
    }
}
}
