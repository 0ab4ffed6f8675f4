// Every ratelimit.* setting, defined once (pg/bridge/settings.hpp says which part reads each).
#include "pg/bridge/settings.hpp"

#include "pg/bridge/clock.hpp"
#include "pg/postgrest/jwt_caller.hpp"
#include "pg/postgrest/pre_request.hpp"
#include "ratelimit/drop_in_limits.hpp"
#include "ratelimit/engine.hpp"
#include "ratelimit/lease_table.hpp"
#include "ratelimit/memory_store.hpp"
#include "ratelimit/reservation_table.hpp"

namespace ratelimit::pg {
namespace setting {

char* test_clock = nullptr;

int memory_capacity = 100000;
int memory_log_blocks = -1;
int memory_expire_interval = 60;
int memory_snapshot_interval = 0;
int memory_when_full = kWhenFullDeny;
int memory_database_share = 100;
bool memory_wal = false;
int memory_wal_first_save_delay = 0;
bool memory_wal_commit_wait = false;

int policy_counters = 4096;
int policy_counters_database_share = 50;
int denial_log_size = 10000;
double denial_log_sample_rate = 1.0;
double near_limit_ratio = 0.8;
int denial_queue_size = 1024;
int denial_queue_database_share = 50;
int denial_log_writers = 2;

int lease_capacity = 10000;
int reservation_capacity = 10000;

int dropin_caller_limits = static_cast<int>(CallerLimits::kIgnore);
bool dropin_require_policy = false;
int dropin_engine = kDropInAppTables;

char* jwt_roles = nullptr;
char* client_ip_header = nullptr;
int client_ip_trusted_proxies = 1;

}  // namespace setting

namespace {

const config_enum_entry kWhenFullOptions[] = {
    {"deny", kWhenFullDeny, false},
    {"error", kWhenFullError, false},
    {"evict", kWhenFullEvict, false},
    {nullptr, 0, false},
};

const config_enum_entry kCallerLimitsOptions[] = {
    {"ignore", static_cast<int>(CallerLimits::kIgnore), false},
    {"must_match", static_cast<int>(CallerLimits::kMustMatch), false},
    {nullptr, 0, false}};

const config_enum_entry kDropInEngineOptions[] = {
    {"table", kDropInAppTables, false},
    {"unlogged", static_cast<int>(Engine::kUnlogged) + 1, false},
    {"memory", static_cast<int>(Engine::kMemory) + 1, false},
    {nullptr, 0, false}};

// The settings that size shared memory: PGC_POSTMASTER, so they can only be defined while the
// postmaster loads the library, and without preloading there is nothing for them to size.
void define_shared_memory_settings() {
    DefineCustomIntVariable(
        "ratelimit.memory_capacity",
        "Keys the memory engine can track at once (about 124 bytes of shared memory each).",
        "A full store frees expired keys first; then ratelimit.memory_when_full decides.",
        &setting::memory_capacity, 100000, static_cast<int>(kMinMemoryCapacity),
        static_cast<int>(kMaxMemoryCapacity), PGC_POSTMASTER, 0, nullptr, nullptr, nullptr);
    DefineCustomIntVariable(
        "ratelimit.memory_log_blocks",
        "Blocks for sliding_window logs longer than a slot holds (1 kB each; -1: one per "
        "32 keys of ratelimit.memory_capacity, at least 1024).",
        "A key whose log needs a block when none is free is treated as a new key in a full "
        "store (ratelimit.memory_when_full).",
        &setting::memory_log_blocks, -1, -1, static_cast<int>(kMaxMemoryLogBlocks), PGC_POSTMASTER,
        0, nullptr, nullptr, nullptr);
    DefineCustomBoolVariable(
        "ratelimit.memory_wal",
        "Writes the memory engine's changes to the WAL, so that crash recovery and standbys "
        "replay them.",
        "Each change is written as the key's whole state, without waiting for the flush: a crash "
        "keeps every decision made more than about wal_writer_delay before it, and a standby "
        "decides from the primary's counts.",
        &setting::memory_wal, false, PGC_POSTMASTER, 0, nullptr, nullptr, nullptr);
    DefineCustomBoolVariable(
        "ratelimit.memory_wal_commit_wait",
        "Makes a transaction that decided on the memory engine wait, before it commits, until "
        "its decisions' WAL is flushed and on the synchronous standbys.",
        "As synchronous_commit asks for a commit (off: no wait). Off by default: a decision's "
        "record is flushed within about wal_writer_delay, as an asynchronous commit's.",
        &setting::memory_wal_commit_wait, false, PGC_USERSET, 0, nullptr, nullptr, nullptr);
    // A developer option, as PostgreSQL's post_auth_delay: the tests make the window before the
    // WAL worker's first save long enough to crash in it.
    DefineCustomIntVariable(
        "ratelimit.memory_wal_first_save_delay",
        "Milliseconds the memory engine's WAL worker waits before its first save (for tests).",
        nullptr, &setting::memory_wal_first_save_delay, 0, 0, 60000, PGC_SIGHUP,
        GUC_UNIT_MS | GUC_NOT_IN_SAMPLE | GUC_NO_SHOW_ALL, nullptr, nullptr, nullptr);
    DefineCustomIntVariable(
        "ratelimit.policy_counters",
        "Per-policy counters (policy_stats, metrics()) the server keeps, for all databases.",
        "Each (database, policy) pair takes one from its first call until "
        "reset_policy_stats, or until its policy or database is gone and the room is needed.",
        &setting::policy_counters, 4096, 64, 1048576, PGC_POSTMASTER, 0, nullptr, nullptr, nullptr);
    DefineCustomIntVariable(
        "ratelimit.denial_queue_size",
        "Denials the denial log's queue holds for its writers (2 kB each).",
        "A denial it cannot hold, when the transaction that denied does not write it, is counted "
        "in policy_stats.denials_not_logged.",
        &setting::denial_queue_size, 1024, 16, 1048576, PGC_POSTMASTER, 0, nullptr, nullptr,
        nullptr);
    DefineCustomIntVariable(
        "ratelimit.denial_queue_database_share",
        "Percent of ratelimit.denial_queue_size one database's denials may hold, and half of that "
        "for the denials its open transactions hold.",
        "A denial past its database's share is counted in policy_stats.denials_not_logged when "
        "its transaction does not write it.",
        &setting::denial_queue_database_share, 50, 1, 100, PGC_SIGHUP, 0, nullptr, nullptr,
        nullptr);
    DefineCustomIntVariable(
        "ratelimit.denial_log_writers",
        "Background workers that write queued denials at once, one per database (from "
        "max_worker_processes).",
        "Databases beyond it wait for a writer to finish; the queue's launcher takes one more.",
        &setting::denial_log_writers, 2, 1, 8, PGC_SIGHUP, 0, nullptr, nullptr, nullptr);
    DefineCustomIntVariable(
        "ratelimit.lease_capacity",
        "Leases (ratelimit.acquire) that can be held at once, over all keys (56 bytes of "
        "shared memory each).",
        "They are spread over 64 partitions by key; an acquire finding its partition full "
        "fails with SQLSTATE 53200.",
        &setting::lease_capacity, 10000, static_cast<int>(kMinLeaseCapacity),
        static_cast<int>(kMaxLeaseCapacity), PGC_POSTMASTER, 0, nullptr, nullptr, nullptr);
    DefineCustomIntVariable(
        "ratelimit.reservation_capacity",
        "Reservations (ratelimit.reserve, reserve_policy) that can be open at once, over all keys "
        "(440 bytes "
        "of shared memory each).",
        "A reserve finding every slot held fails with SQLSTATE 53200; an expired reservation's "
        "slot is taken again.",
        &setting::reservation_capacity, 10000, static_cast<int>(kMinReservationCapacity),
        static_cast<int>(kMaxReservationCapacity), PGC_POSTMASTER, 0, nullptr, nullptr, nullptr);
}

}  // namespace

void define_settings() {
    if (process_shared_preload_libraries_in_progress)
        define_shared_memory_settings();

    DefineCustomStringVariable(
        "ratelimit.test_clock",
        "Freezes the rate limiter's clock at this timestamp (tests only; empty = real clock).",
        "Superuser only. Lets tests move time without sleeping.", &setting::test_clock, "",
        PGC_SUSET, 0, check_test_clock, assign_test_clock, nullptr);

    DefineCustomIntVariable(
        "ratelimit.memory_expire_interval",
        "How often the memory engine's worker frees the keys whose state has expired.", nullptr,
        &setting::memory_expire_interval, 60, 1, 86400, PGC_SIGHUP, GUC_UNIT_S, nullptr, nullptr,
        nullptr);
    DefineCustomIntVariable(
        "ratelimit.memory_snapshot_interval",
        "How often the memory engine's worker saves the store to disk (0 = only at shutdown).",
        "A crash loses at most this much of the memory engine's state.",
        &setting::memory_snapshot_interval, 0, 0, 86400, PGC_SIGHUP, GUC_UNIT_S, nullptr, nullptr,
        nullptr);
    // Superuser-set, so that ALTER DATABASE and ALTER ROLE can choose it and the callers it
    // limits cannot.
    DefineCustomEnumVariable(
        "ratelimit.memory_when_full",
        "What the memory engine does with a new key when there is no room for it: deny, error "
        "or evict.",
        "deny: the call is denied and nothing is stored; error: the call fails (SQLSTATE "
        "53200); evict: the least recently used of 64 keys of the same database is forgotten. Keys "
        "that have expired are always reclaimed first.",
        &setting::memory_when_full, kWhenFullDeny, kWhenFullOptions, PGC_SUSET, 0, nullptr, nullptr,
        nullptr);
    DefineCustomIntVariable(
        "ratelimit.memory_database_share",
        "The percentage of ratelimit.memory_capacity one database's keys may hold.",
        "A database at its share is treated as a full store for its new keys "
        "(ratelimit.memory_when_full).",
        &setting::memory_database_share, 100, 1, 100, PGC_SIGHUP, 0, nullptr, nullptr, nullptr);

    DefineCustomIntVariable(
        "ratelimit.policy_counters_database_share",
        "Percent of ratelimit.policy_counters, and of the 128 top offenders, that one database's "
        "policies may hold.",
        nullptr, &setting::policy_counters_database_share, 50, 1, 100, PGC_SIGHUP, 0, nullptr,
        nullptr, nullptr);
    DefineCustomIntVariable(
        "ratelimit.denial_log_size",
        "Rows the denial log keeps: a ring, the newest denial overwriting the oldest.", nullptr,
        &setting::denial_log_size, 10000, 0, 10000000, PGC_SUSET, 0, nullptr, nullptr, nullptr);
    DefineCustomRealVariable(
        "ratelimit.denial_log_sample_rate",
        "Fraction of the denials of policies with log_denials that the denial log records.",
        nullptr, &setting::denial_log_sample_rate, 1.0, 0.0, 1.0, PGC_SUSET, 0, nullptr, nullptr,
        nullptr);
    DefineCustomRealVariable(
        "ratelimit.near_limit_ratio",
        "An allowed charge counts as near the limit when it leaves more than this fraction of "
        "the limit used (policy_stats.near_limit, ratelimit.metrics()).",
        nullptr, &setting::near_limit_ratio, 0.8, 0.0, 1.0, PGC_SUSET, 0, nullptr, nullptr,
        nullptr);

    // Superuser only, like ratelimit.jwt_roles: the roles these settings restrain must not be
    // able to change them.
    DefineCustomEnumVariable(
        "ratelimit.dropin_caller_limits",
        "When a policy exists for a drop-in's name: ignore the caller's limit and window, or "
        "refuse a call whose values differ (must_match).",
        nullptr, &setting::dropin_caller_limits, static_cast<int>(CallerLimits::kIgnore),
        kCallerLimitsOptions, PGC_SUSET, 0, nullptr, nullptr, nullptr);
    DefineCustomBoolVariable(
        "ratelimit.dropin_require_policy",
        "Refuses a drop-in call without a policy for its name, except from service_role, "
        "superusers and the extension's owner.",
        nullptr, &setting::dropin_require_policy, false, PGC_SUSET, 0, nullptr, nullptr, nullptr);
    // Superuser only too: the API roles whose calls it governs must not move their own counts
    // to an engine that forgets them (unlogged after a crash) or back.
    DefineCustomEnumVariable(
        "ratelimit.dropin_engine",
        "Where the drop-in functions keep their counts: the apps' own tables (table), or the "
        "unlogged or memory engine.",
        "On unlogged or memory the apps' tables are not written; the decisions are the same.",
        &setting::dropin_engine, kDropInAppTables, kDropInEngineOptions, PGC_SUSET, 0, nullptr,
        nullptr, nullptr);

    // Superuser only: a role that could change it could leave the JWT roles.
    DefineCustomStringVariable(
        "ratelimit.jwt_roles",
        "Roles PostgREST switches to for a request: without a JWT sub they may act on no user id.",
        "A comma-separated list of role names.", &setting::jwt_roles, "anon,authenticated",
        PGC_SUSET, GUC_LIST_INPUT, check_jwt_roles, nullptr, nullptr);

    DefineCustomStringVariable(
        "ratelimit.client_ip_header",
        "The request header ratelimit.pre_request() takes a client's address from.",
        "Lower case, as PostgREST publishes request.headers; empty: no address (routes keyed by "
        "ip count every request as ip:unknown).",
        &setting::client_ip_header, "x-forwarded-for", PGC_SUSET, 0, check_client_ip_header,
        nullptr, nullptr);
    // Superuser only, as the header: a role that could change it could choose its address.
    DefineCustomIntVariable(
        "ratelimit.client_ip_trusted_proxies",
        "The proxies in front of PostgREST that append to ratelimit.client_ip_header: the "
        "client's address is the hop that many in from the right.",
        "1 (the default): the rightmost hop, which the proxy nearest PostgREST added. 0: the "
        "first hop, which the client itself can write (only behind a proxy that replaces the "
        "header). A header with fewer hops gives no address.",
        &setting::client_ip_trusted_proxies, 1, 0, 32, PGC_SUSET, 0, nullptr, nullptr, nullptr);

    MarkGUCPrefixReserved("ratelimit");
}

}  // namespace ratelimit::pg
