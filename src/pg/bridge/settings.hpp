// Every ratelimit.* setting. They are defined in one place, src/pg/module/settings.cpp, from
// _PG_init, which then reserves the prefix; the part a setting tunes reads its value here. A hook
// that checks a value belongs to the part that reads it and is declared in that part's header.
#pragma once

#include "pg/bridge/postgres.hpp"

namespace ratelimit::pg {

// ratelimit.memory_when_full: what the memory engine does with a new key when there is no room.
enum WhenFull { kWhenFullDeny, kWhenFullError, kWhenFullEvict };

// ratelimit.dropin_engine: this value keeps the apps' own tables; any other is an Engine + 1.
constexpr int kDropInAppTables = 0;

// Each value, named as its setting without the prefix. Those that size shared memory
// (PGC_POSTMASTER) are defined only while the library is preloaded; otherwise they keep the
// defaults they are initialised with.
namespace setting {

extern char* test_clock;  // the clock (pg/bridge/clock.cpp)

extern int memory_capacity;  // the memory engine (pg/engines/memory_engine.cpp)
extern int memory_log_blocks;
extern int memory_expire_interval;
extern int memory_snapshot_interval;
extern int memory_when_full;  // a WhenFull
extern int memory_database_share;
extern bool memory_wal;  // pg/engines/memory_wal.cpp
extern int memory_wal_first_save_delay;
extern bool memory_wal_commit_wait;

extern int
    policy_counters;  // the policy counters and the denial log (pg/policies/policy_counters.cpp)
extern int policy_counters_database_share;
extern int denial_log_size;
extern double denial_log_sample_rate;
extern double near_limit_ratio;
extern int denial_queue_size;  // pg/policies/denial_queue.cpp
extern int denial_queue_database_share;
extern int denial_log_writers;

extern int lease_capacity;        // pg/native/leases.cpp
extern int reservation_capacity;  // pg/native/reservations.cpp

extern int dropin_caller_limits;  // a CallerLimits (pg/drop_ins/drop_in_rules.cpp)
extern bool dropin_require_policy;
extern int dropin_engine;  // kDropInAppTables or an Engine + 1

extern char* jwt_roles;         // pg/postgrest/jwt_caller.cpp
extern char* client_ip_header;  // pg/postgrest/pre_request.cpp
extern int client_ip_trusted_proxies;

}  // namespace setting

// Defines every setting and reserves the prefix; called once, from _PG_init.
void define_settings();

}  // namespace ratelimit::pg
