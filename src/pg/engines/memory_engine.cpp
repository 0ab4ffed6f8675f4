// The memory engine's shared memory and locks (its file, saved and loaded across restarts, is
// src/pg/engines/memory_store_file.cpp).
//
// Locking rules:
//  - The store is split into kMemoryPartitions partitions, each guarded by one LWLock of the
//    tranche "ratelimit memory engine". A key's partition comes from its hash, so calls on
//    different keys rarely meet on a lock, and calls on one key are serialised on one lock:
//    that is what makes the counts exact under any number of connections.
//  - Every decision (consume, peek, refund), block and reset takes its partition's lock
//    exclusively: each of them writes, if only to stamp the key as just used.
//    The lock is held only while the core reads and writes the slot: no allocation, no I/O, no
//    PostgreSQL call happens under it.
//  - Stats and snapshots take each partition's lock shared, one partition at a time, so they
//    never hold more than one lock and never stop the whole store.
//  - The postmaster saves the store at shutdown without locks: by then every process that
//    could touch it has exited.
//
// Room. The store never forgets a key that has not expired on its own: when a new key finds no
// room, ratelimit.memory_when_full decides (deny: the consume is denied and nothing stored;
// error: the call fails with 53200; evict: the least recently used of a sample of the same
// database's keys goes). The first refusal or live eviction after a quiet minute logs a WARNING
// saying how many and what to raise.
//
// Nothing here is transactional: a decision is in shared memory the moment the lock is
// released, whatever the caller's transaction does next, and no WAL is written, so the engine
// works in read-only transactions and on hot standbys.
#include "pg/engines/memory_engine.hpp"

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "pg/bridge/clock.hpp"
#include "pg/bridge/guard.hpp"
#include "pg/shared_memory/lwlock_scope.hpp"
#include "pg/bridge/settings.hpp"
#include "pg/engines/memory_store_file.hpp"
#include "pg/engines/memory_wal.hpp"
#include "pg/shared_memory/shared_region.hpp"

extern "C" {
#include "storage/ipc.h"
#include "storage/lwlock.h"
}

namespace ratelimit::pg {

void register_memory_worker();  // src/pg/engines/memory_worker.cpp

namespace {

constexpr const char* kTrancheName = "ratelimit memory engine";
// A pressure WARNING at most this often.
constexpr TimestampTz kPressureWarningInterval = 60 * USECS_PER_SEC;

// The region's table: this header, then the store's block.
struct SharedState {
    std::int64_t store_bytes;
    // The last pressure WARNING (0: none yet), and the refusals and evictions counted then.
    pg_atomic_uint64 warned_at;
    pg_atomic_uint64 refusals_warned;
    pg_atomic_uint64 evictions_warned;
};

// Set in the postmaster when its region starts and inherited by every process it forks; null
// when the library was not preloaded.
SharedState* shared = nullptr;

std::size_t table_bytes();
void create_table(void* block);
void started(void* block, bool created);

SharedRegion region(kTrancheName, kMemoryPartitions, "memory engine keys", table_bytes,
                    create_table, started);

std::int64_t log_blocks() {
    return setting::memory_log_blocks < 0 ? default_memory_log_blocks(setting::memory_capacity)
                                          : setting::memory_log_blocks;
}

std::size_t table_bytes() {
    return MAXALIGN(sizeof(SharedState)) +
           MemoryStore::bytes_needed(setting::memory_capacity, log_blocks());
}

void* store_block() {
    return reinterpret_cast<char*>(shared) + MAXALIGN(sizeof(SharedState));
}

LWLock* partition_lock(int partition) {
    return region.lock(partition);
}

HashSecret fresh_secret() {
    HashSecret secret;
    if (!pg_strong_random(&secret, sizeof secret))
        ereport(FATAL, (errmsg("ratelimit: could not generate the memory engine's hash key")));
    return secret;
}

void save_at_shutdown(int code, Datum) {
    // After a crash or an immediate stop the store may be half-written: keep the last good
    // file (a snapshot) instead. An immediate stop exits with code 0, so the control file
    // decides.
    if (code != 0 || shared == nullptr || !stopped_cleanly())
        return;
    // A logged store's older checkpoint file would otherwise be loaded at the next start, with
    // no WAL after the shutdown checkpoint to bring it up to date.
    if (!memory_save(setting::memory_wal) && setting::memory_wal)
        forget_checkpoint_store_file();
}

// Lays out an empty store, in the postmaster, under the region's setup lock.
void create_table(void* block) {
    auto* state = static_cast<SharedState*>(block);
    state->store_bytes = static_cast<std::int64_t>(region.bytes());
    pg_atomic_init_u64(&state->warned_at, 0);
    pg_atomic_init_u64(&state->refusals_warned, 0);
    pg_atomic_init_u64(&state->evictions_warned, 0);
    // A logged store hashes with the key its WAL's every reader derives alike.
    MemoryStore::create(reinterpret_cast<char*>(block) + MAXALIGN(sizeof(SharedState)),
                        setting::memory_capacity, log_blocks(),
                        setting::memory_wal ? memory_wal_secret() : fresh_secret());
}

// Once the store is there: the postmaster saves it at shutdown, and fills a store it has just
// made from the file of the last clean shutdown or snapshot.
void started(void* block, bool created) {
    shared = static_cast<SharedState*>(block);
    if (!IsUnderPostmaster) {
        on_shmem_exit(save_at_shutdown, 0);
        if (created)
            load_store_file(store_block(), log_blocks());
    }
}

// `what` names what chose the memory engine, as the caller wrote it.
[[noreturn]] void not_available(const std::string& what = "p_engine \"memory\"",
                                const std::string& instead =
                                    "use p_engine => 'table' or "
                                    "'unlogged'") {
    call_postgres([&] {
        ereport(ERROR,
                (errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
                 errmsg("%s is not available: ratelimit is not in shared_preload_libraries",
                        what.c_str()),
                 errdetail("The memory engine keeps its counters in shared memory, which only a "
                           "library loaded at server start can set up."),
                 errhint("Add ratelimit to shared_preload_libraries in postgresql.conf (for "
                         "example shared_preload_libraries = 'ratelimit') and restart the "
                         "server, or %s.",
                         instead.c_str())));
    });
    throw std::logic_error("unreachable");
}

// A decision's scratch state, reused by every call of this backend so that a decision
// allocates nothing: a sliding_window log never grows past kMaxSlidingLog + 1.
KeyState& scratch_state() {
    static KeyState scratch = [] {
        KeyState state;
        state.log.reserve(kMaxSlidingLog + 1);
        return state;
    }();
    return scratch;
}

// This backend's database in the store (its row found once: a backend never changes
// database), its share, and the choice when full, as the settings stand now.
Tenant current_tenant() {
    static int database = -1;
    if (database < 0)
        database = MemoryStore::attach(store_block()).database_index(MyDatabaseId);
    Tenant tenant;
    tenant.database = database;
    if (setting::memory_database_share < 100)
        tenant.share =
            std::max<std::int64_t>(1, static_cast<std::int64_t>(setting::memory_capacity) *
                                          setting::memory_database_share / 100);
    tenant.evict = setting::memory_when_full == kWhenFullEvict;
    return tenant;
}

const char* shortage_setting(Shortage shortage) {
    switch (shortage) {
        case Shortage::kShareFull:
            return "ratelimit.memory_database_share";
        case Shortage::kLogPoolFull:
            return "ratelimit.memory_log_blocks";
        default:
            return "ratelimit.memory_capacity";
    }
}

const char* shortage_text(Shortage shortage) {
    switch (shortage) {
        case Shortage::kShareFull:
            return "This database holds its share of the store "
                   "(ratelimit.memory_database_share)";
        case Shortage::kLogPoolFull:
            return "Every sliding_window log block of the key's partition holds a key that "
                   "still counts";
        default:
            return "Every slot of the key's partition holds a key that still counts";
    }
}

// After a call that refused or evicted: a WARNING when the last one is a minute old (one
// process wins the race to write it), with the counts since, and the error when the choice is
// `error`. Called with no lock held.
void after_pressure(const RoomReport& room) {
    if (!room.refused && room.evicted == 0)
        return;
    const TimestampTz now = GetCurrentTimestamp();
    std::uint64_t last = pg_atomic_read_u64(&shared->warned_at);
    if (now - static_cast<TimestampTz>(last) >= kPressureWarningInterval &&
        pg_atomic_compare_exchange_u64(&shared->warned_at, &last,
                                       static_cast<std::uint64_t>(now))) {
        MemoryStore store = MemoryStore::attach(store_block());
        std::int64_t refusals = 0;
        std::int64_t evictions = 0;
        for (int d = 0; d < kMaxMemoryDatabases; ++d) {
            const MemoryDatabaseStats row = store.database_stats(d);
            refusals += row.refusals;
            evictions += row.evictions;
        }
        const auto new_refusals =
            static_cast<long long>(refusals - static_cast<std::int64_t>(pg_atomic_exchange_u64(
                                                  &shared->refusals_warned, refusals)));
        const auto new_evictions =
            static_cast<long long>(evictions - static_cast<std::int64_t>(pg_atomic_exchange_u64(
                                                   &shared->evictions_warned, evictions)));
        const char* to_raise = shortage_setting(room.shortage);
        const char* why = shortage_text(room.shortage);
        const int capacity = setting::memory_capacity;
        call_postgres([&] {
            ereport(WARNING,
                    (errmsg("ratelimit: the memory engine is full: %lld calls refused and %lld "
                            "keys evicted before they expired since the last warning",
                            new_refusals, new_evictions),
                     errdetail("%s; ratelimit.memory_when_full decides what happens then.", why),
                     errhint("Raise %s (ratelimit.memory_capacity is %d keys), or see "
                             "ratelimit.memory_stats_by_database() for who holds the keys.",
                             to_raise, capacity)));
        });
    }
    if (room.refused && setting::memory_when_full == kWhenFullError) {
        const char* to_raise = shortage_setting(room.shortage);
        const char* why = shortage_text(room.shortage);
        call_postgres([&] {
            ereport(ERROR, (errcode(ERRCODE_OUT_OF_MEMORY),
                            errmsg("ratelimit: the memory engine has no room for a new key"),
                            errdetail("%s, and ratelimit.memory_when_full is error.", why),
                            errhint("Raise %s, or set ratelimit.memory_when_full to deny or evict.",
                                    to_raise)));
        });
    }
}

// Writes the key's state to the WAL (ratelimit.memory_wal), under its partition's lock.
void log_key(const MemoryStore& store, const MemoryKey& key) {
    WalKeys record(kWalStates);
    record.add(store, key.partition, key.hash);
    record.insert();
}

// Runs `work` on the store under `partition`'s lock.
template <typename Work>
auto with_partition(int partition, LWLockMode mode, Work&& work) {
    return with_lwlock(partition_lock(partition), mode, [&] {
        MemoryStore store = MemoryStore::attach(store_block());
        return work(store);
    });
}

}  // namespace

void install_memory_engine() {
    region.install();
    // The WAL's worker first: with few max_worker_processes, the one whose absence would lose
    // keys gets a slot before the others.
    install_memory_wal();
    register_memory_worker();
}

bool memory_engine_available() {
    return shared != nullptr;
}

void require_memory_engine(const std::string& what, const std::string& instead) {
    if (shared == nullptr)
        not_available(what, instead);
}

MemoryKey memory_key(const StateKey& state_key) {
    if (shared == nullptr)
        not_available();
    const text* key = reinterpret_cast<const text*>(DatumGetPointer(state_key.key));
    const text* space = reinterpret_cast<const text*>(DatumGetPointer(state_key.space));
    // Keys belong to their database, as the table engines' rows do: each database hashes with
    // its own variant of the secret, so equal keys in two databases are two keys.
    HashSecret secret = MemoryStore::attach(store_block()).secret();
    secret.k1 ^= MyDatabaseId;
    MemoryKey result;
    const std::size_t space_bytes = VARSIZE_ANY_EXHDR(space);
    if (space_bytes == 0) {
        result.hash = hash_key(secret, VARDATA_ANY(key), VARSIZE_ANY_EXHDR(key));
    } else {
        // A policy's subjects hash under another variant of the secret, as "policy\0subject":
        // no text holds a NUL, so no native key and no other policy's subject hashes the same.
        constexpr std::size_t kMaxBytes = 128 + 1 + 1024;
        char joined[kMaxBytes];
        const std::size_t key_bytes = VARSIZE_ANY_EXHDR(key);
        if (space_bytes + 1 + key_bytes > kMaxBytes)
            throw std::length_error("ratelimit: memory engine key too long");
        std::memcpy(joined, VARDATA_ANY(space), space_bytes);
        joined[space_bytes] = '\0';
        std::memcpy(joined + space_bytes + 1, VARDATA_ANY(key), key_bytes);
        secret.k0 ^= 0x706f6c6963790000ULL;  // "policy"
        result.hash = hash_key(secret, joined, space_bytes + 1 + key_bytes);
    }
    result.partition = MemoryStore::partition_of(result.hash);
    return result;
}

namespace {

// The key this backend's store last refused for lack of room, and the statement that asked: a
// count_denied lockout that follows the refusal in the same statement (ratelimit.check) cannot
// be stored either, and must not turn that denial into an error.
struct LastRefusal {
    KeyHash key;
    TimestampTz statement = 0;
};
LastRefusal last_refusal;

void note_refusal(const KeyHash& key) {
    last_refusal.key = key;
    last_refusal.statement = GetCurrentStatementStartTimestamp();
}

bool refused_in_this_statement(const KeyHash& key) {
    return last_refusal.statement == GetCurrentStatementStartTimestamp() && last_refusal.key == key;
}

}  // namespace

Decision memory_decide(const MemoryKey& key, const Limit& limit, Micros now, std::int64_t cost,
                       Action action, Micros room_clock) {
    // The key's bucket is fetched while the lock is taken.
    MemoryStore::attach(store_block()).prefetch_bucket(key.partition, key.hash);
    KeyState& scratch = scratch_state();
    Tenant tenant = current_tenant();
    tenant.clock = room_clock;
    RoomReport room;
    const bool logged = action != Action::kPeek && memory_wal_logging();
    const Decision decision = with_partition(key.partition, LW_EXCLUSIVE, [&](MemoryStore& store) {
        const Decision decided =
            store.decide(key.partition, key.hash, limit, now, cost, action, scratch, tenant);
        room = store.last_room();
        if (logged)
            log_key(store, key);
        return decided;
    });
    if (room.refused)
        note_refusal(key.hash);
    after_pressure(room);
    return decision;
}

void memory_decide_each(const MemoryKey* keys, std::size_t count, const Limit& limit, Micros now,
                        std::int64_t cost, Action action, Decision* decisions) {
    // The keys' positions ordered by partition (a counting sort: stable, so one key's repeats
    // keep their order).
    std::vector<std::uint32_t> order(count);
    {
        std::uint32_t starts[kMemoryPartitions + 1] = {0};
        for (std::size_t i = 0; i < count; ++i)
            ++starts[keys[i].partition + 1];
        for (int p = 0; p < kMemoryPartitions; ++p)
            starts[p + 1] += starts[p];
        for (std::size_t i = 0; i < count; ++i)
            order[starts[keys[i].partition]++] = static_cast<std::uint32_t>(i);
    }
    // A run holds its partition's lock for at most this many decisions, so that other sessions
    // wait no longer for a batch than for a few single calls.
    constexpr std::size_t kRun = 32;
    // How far ahead the cache is asked for: a bucket head, then the slot it names, each a few
    // decisions before it is needed.
    constexpr std::size_t kBucketAhead = 6, kSlotAhead = 4;
    KeyState& scratch = scratch_state();
    const Tenant tenant = current_tenant();
    const bool logged = action != Action::kPeek && memory_wal_logging();
    MemoryStore hints = MemoryStore::attach(store_block());
    for (std::size_t i = 0; i < std::min(count, kBucketAhead); ++i)
        hints.prefetch_bucket(keys[order[i]].partition, keys[order[i]].hash);
    std::size_t next = 0;
    while (next < count) {
        const int partition = keys[order[next]].partition;
        std::size_t end = next;
        while (end < count && end - next < kRun && keys[order[end]].partition == partition)
            ++end;
        RoomReport room;
        std::size_t refused = count;  // the position whose key found no room, if one did
        next = with_partition(partition, LW_EXCLUSIVE, [&](MemoryStore& store) {
            WalKeys record(kWalStates);
            std::size_t at = next;
            while (at < end) {
                if (at + kBucketAhead < count)
                    store.prefetch_bucket(keys[order[at + kBucketAhead]].partition,
                                          keys[order[at + kBucketAhead]].hash);
                if (at + kSlotAhead < end)
                    store.prefetch_slot(partition, keys[order[at + kSlotAhead]].hash);
                const std::uint32_t i = order[at++];
                decisions[i] = store.decide(partition, keys[i].hash, limit, now, cost, action,
                                            scratch, tenant);
                room = store.last_room();
                if (logged)
                    record.add(store, partition, keys[i].hash);
                // What a full store asks for (a warning, an error) is done with the lock
                // released, before the next key, as between single calls.
                if (room.refused || room.evicted != 0) {
                    if (room.refused)
                        refused = i;
                    break;
                }
            }
            record.insert();
            return at;
        });
        if (refused != count)
            note_refusal(keys[refused].hash);
        after_pressure(room);
    }
}

Micros memory_block(const MemoryKey& key, Micros until, Micros now) {
    KeyState& scratch = scratch_state();
    const Tenant tenant = current_tenant();
    RoomReport room;
    const Micros blocked = with_partition(key.partition, LW_EXCLUSIVE, [&](MemoryStore& store) {
        const Micros end = store.block(key.partition, key.hash, until, now, scratch, tenant);
        room = store.last_room();
        if (memory_wal_logging())
            log_key(store, key);
        return end;
    });
    after_pressure(room);
    if (blocked < 0 && refused_in_this_statement(key.hash))
        return now;  // a count_denied lockout of a key just denied for lack of room
    if (blocked < 0) {
        // Blocking is an administrator's act: with deny too, a block that cannot be stored is
        // an error rather than a silent no-op.
        const char* to_raise = shortage_setting(room.shortage);
        const char* why = shortage_text(room.shortage);
        call_postgres([&] {
            ereport(ERROR,
                    (errcode(ERRCODE_OUT_OF_MEMORY),
                     errmsg("ratelimit: the memory engine has no room to block a new key"),
                     errdetail("%s.", why),
                     errhint("Raise %s, or set ratelimit.memory_when_full to evict.", to_raise)));
        });
    }
    return blocked;
}

bool memory_reset(const MemoryKey& key) {
    const bool found = with_partition(key.partition, LW_EXCLUSIVE, [&](MemoryStore& store) {
        const bool reset = store.reset(key.partition, key.hash);
        if (reset && memory_wal_logging())
            log_key(store, key);
        return reset;
    });
    return found;
}

bool memory_consume_all(MemoryTierCall* calls, int count, Micros now, std::int64_t cost,
                        bool charge) {
    int partitions[kMemoryPartitions];
    int locked = 0;
    for (int i = 0; i < count; ++i)
        partitions[locked++] = calls[i].key.partition;
    std::sort(partitions, partitions + locked);
    locked = static_cast<int>(std::unique(partitions, partitions + locked) - partitions);
    // The keys of the call: room is made for them, never from them.
    std::vector<KeyHash> keep(static_cast<std::size_t>(count));
    for (int i = 0; i < count; ++i)
        keep[static_cast<std::size_t>(i)] = calls[i].key.hash;
    const Tenant tenant = current_tenant();
    RoomReport room;
    std::optional<KeyHash> refused;
    int held = 0;
    bool allowed = true;
    try {
        for (; held < locked; ++held) {
            LWLock* lock = partition_lock(partitions[held]);
            call_postgres([&] { LWLockAcquire(lock, LW_EXCLUSIVE); });
        }
        MemoryStore store = MemoryStore::attach(store_block());
        KeyState& scratch = scratch_state();
        for (int i = 0; i < count; ++i) {
            MemoryTierCall& call = calls[i];
            call.before = store.decide(call.key.partition, call.key.hash, call.limit, now, cost,
                                       Action::kPeek, scratch, tenant);
            if (call.enforced && !call.before.allowed)
                allowed = false;
        }
        if (charge && allowed) {
            // Room for every charge first, so that none can be refused half-way: a key that
            // cannot have it denies the whole decision.
            for (int k = 0; k < locked && allowed; ++k) {
                const int p = partitions[k];
                MemoryStore::Need need;
                int first = -1;
                for (int i = 0; i < count; ++i) {
                    if (calls[i].key.partition != p || !calls[i].before.allowed)
                        continue;
                    const MemoryStore::Need one =
                        store.need_for_consume(p, calls[i].key.hash, calls[i].limit, cost);
                    if ((one.slots > 0 || one.blocks > 0) && first < 0)
                        first = i;
                    need.slots += one.slots;
                    need.blocks += one.blocks;
                }
                if (first >= 0 && !store.reserve(p, now, tenant, need, keep.data(), count)) {
                    calls[first].before =
                        store.refusal(p, calls[first].limit, calls[first].before, now);
                    refused = calls[first].key.hash;
                    allowed = false;
                }
            }
            room = store.last_room();
        }
        const bool logged = charge && allowed && memory_wal_logging();
        WalKeys record(kWalStates);
        for (int i = 0; charge && allowed && i < count; ++i) {
            MemoryTierCall& call = calls[i];
            if (!call.before.allowed)
                continue;
            call.result = store.decide(call.key.partition, call.key.hash, call.limit, now, cost,
                                       Action::kConsume, scratch, tenant);
            call.charged = true;
            if (logged)
                record.add(store, call.key.partition, call.key.hash);
        }
        record.insert();
        for (int k = 0; k < locked; ++k)
            store.release(partitions[k], tenant);
        while (held > 0)
            LWLockRelease(partition_lock(partitions[--held]));
    } catch (...) {
        MemoryStore store = MemoryStore::attach(store_block());
        for (int k = 0; k < held; ++k)
            store.release(partitions[k], tenant);
        while (held > 0)
            LWLockRelease(partition_lock(partitions[--held]));
        throw;
    }
    if (refused)
        note_refusal(*refused);
    after_pressure(room);
    return allowed;
}

int memory_database_stats(MemoryDatabaseStats* rows, std::int64_t* share_limit) {
    if (shared == nullptr)
        not_available();
    MemoryStore store = MemoryStore::attach(store_block());
    int count = 0;
    for (int d = 0; d < kMaxMemoryDatabases; ++d) {
        const MemoryDatabaseStats row = store.database_stats(d);
        if (row.oid != 0 || row.entries != 0 || row.refusals != 0 || row.evictions != 0)
            rows[count++] = row;
    }
    *share_limit =
        static_cast<std::int64_t>(setting::memory_capacity) * setting::memory_database_share / 100;
    return count;
}

MemoryStats memory_stats(std::int64_t* shared_bytes) {
    if (shared == nullptr)
        not_available();
    MemoryStats total;
    for (int p = 0; p < kMemoryPartitions; ++p) {
        total += with_partition(p, LW_SHARED, [&](MemoryStore& store) { return store.stats(p); });
    }
    *shared_bytes = shared->store_bytes;
    return total;
}

std::int64_t memory_expire_all(Micros now) {
    std::int64_t freed = 0;
    MemoryStore store = MemoryStore::attach(store_block());
    for (int p = 0; p < kMemoryPartitions; ++p) {
        LWLockAcquire(partition_lock(p), LW_EXCLUSIVE);
        freed += store.expire(p, now);
        LWLockRelease(partition_lock(p));
    }
    return freed;
}

namespace {

// Room to order one partition's keys, taken once per process before any lock: nothing that goes
// through a store's keys under a partition's lock allocates, so running out of memory there
// cannot end a process that holds the lock (which would restart the whole server). Null when
// there is no memory for it.
std::uint32_t* partition_order() {
    static std::uint32_t* order = nullptr;
    if (order == nullptr) {
        const MemoryStore store = MemoryStore::attach(store_block());
        order = static_cast<std::uint32_t*>(std::malloc(
            sizeof(std::uint32_t) * std::max<std::uint32_t>(1, store.partition_slots())));
    }
    return order;
}

}  // namespace

// A partition's lock is held for a run of this many slots at a time by the passes over the
// whole store that run beside backends (the checkpoint file, the WAL's SNAPSHOT records).
constexpr std::uint32_t kRunSlots = 64;

namespace {

// One run's keys in their saved form, copied under the partition's lock and written to the file
// once it is released, so that no decision waits for the file. Plain data.
char run_buffer[kRunSlots * (kSavedSlotFixedBytes + kMaxSlidingLog * sizeof(LogEntry))];

// The checkpoint file in runs of slots; keys that have expired decide like no key, and are
// left out.
void save_in_runs(MemoryStore& store, StoreFileWriter* writer) {
    const Micros now = clock_now();
    for (int p = 0; p < kMemoryPartitions && writer->written; ++p) {
        const std::uint32_t slots = store.slots_of(p);
        for (std::uint32_t from = 0; from < slots && writer->written; from += kRunSlots) {
            std::size_t used = 0;
            std::int64_t keys = 0;
            LWLockAcquire(partition_lock(p), LW_SHARED);
            store.for_each_in_slots(
                p, from, std::min(kRunSlots, slots - from), [&](const SavedSlot& saved) {
                    if (saved.expires_at <= now)
                        return;
                    const std::size_t bytes =
                        kSavedSlotFixedBytes +
                        static_cast<std::size_t>(saved.log_count) * sizeof(LogEntry);
                    std::memcpy(run_buffer + used, &saved, bytes);
                    used += bytes;
                    ++keys;
                });
            LWLockRelease(partition_lock(p));
            write_store_file_keys(writer, run_buffer, used, keys);
        }
    }
}

}  // namespace

bool memory_save(bool checkpoint, StoreSaved* saved) {
    MemoryStore store = MemoryStore::attach(store_block());
    // The postmaster saves after every other process has exited, and has no PGPROC to wait
    // on a lock with; the worker saves while backends run and must lock. The checkpoint file
    // is saved beside backends in runs, which need no order of use.
    const bool lock = IsUnderPostmaster;
    const bool in_runs = checkpoint && lock;
    std::uint32_t* order = in_runs ? nullptr : partition_order();
    if (!in_runs && order == nullptr) {
        ereport(LOG, (errmsg("ratelimit: the memory engine's store was not saved: out of memory")));
        return false;
    }
    StoreFileWriter writer;
    if (!begin_store_file(&writer, store.secret(), checkpoint))
        return false;
    if (in_runs) {
        save_in_runs(store, &writer);
    } else {
        for (int p = 0; p < kMemoryPartitions && writer.written; ++p) {
            if (lock)
                LWLockAcquire(partition_lock(p), LW_SHARED);
            store.for_each_oldest_first(
                p, order, [&](const SavedSlot& slot) { write_store_file_slot(&writer, slot); });
            if (lock)
                LWLockRelease(partition_lock(p));
        }
    }
    if (saved != nullptr) {
        saved->keys = writer.count;
        saved->bytes = writer.bytes;
    }
    return finish_store_file(&writer);
}

void memory_replay(const SavedSlot& saved) {
    const int partition = MemoryStore::partition_of(saved.key);
    LWLockAcquire(partition_lock(partition), LW_EXCLUSIVE);
    MemoryStore store = MemoryStore::attach(store_block());
    // A state that has expired decides like no state.
    const Micros now = clock_now();
    // A key the store has no room for, and the live keys it evicted to make room, are lost
    // to this server: counted.
    std::int64_t lost = 0;
    if (saved.algorithm == kForgotten || saved.expires_at <= now) {
        store.reset(partition, saved.key);
    } else {
        lost = store.restore(saved, now) ? 0 : 1;
        lost += store.last_room().evicted;
    }
    LWLockRelease(partition_lock(partition));
    if (lost > 0)
        count_unplaced_replay(lost);
}

void memory_log_all() {
    MemoryStore store = MemoryStore::attach(store_block());
    WalKeys record(kWalSnapshot);
    // A key whose state has expired decides like a key never seen: replay without it decides
    // the same, so it is not carried.
    const Micros now = clock_now();
    // A partition's lock is held for a run of slots at a time, so that a decision on it waits
    // for one run at most, never for the whole pass.
    for (int p = 0; p < kMemoryPartitions; ++p) {
        const std::uint32_t slots = store.slots_of(p);
        for (std::uint32_t from = 0; from < slots; from += kRunSlots) {
            // Shared: no change to the run's keys can come between a key's state read here and
            // its record, so the WAL keeps each key's changes in order. A key changed between
            // runs has a record of its own after the checkpoint's redo pointer, since the pass
            // starts after it: the run that reads it later writes the same state again.
            LWLockAcquire(partition_lock(p), LW_SHARED);
            store.for_each_in_slots(p, from, std::min(kRunSlots, slots - from),
                                    [&](const SavedSlot& saved) {
                                        if (saved.expires_at > now)
                                            record.add(saved);
                                    });
            record.insert();
            LWLockRelease(partition_lock(p));
        }
    }
}

int memory_expire_interval_seconds() {
    return setting::memory_expire_interval;
}

int memory_snapshot_interval_seconds() {
    // A logged store has its checkpoint file instead: a snapshot would add nothing.
    return setting::memory_wal ? 0 : setting::memory_snapshot_interval;
}

}  // namespace ratelimit::pg
