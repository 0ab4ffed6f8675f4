// The memory engine's shared memory, locks and file.
//
// Locking rules:
//  - The store is split into kMemoryPartitions partitions, each guarded by one LWLock of the
//    tranche "ratelimit memory engine". A key's partition comes from its hash, so calls on
//    different keys rarely meet on a lock, and calls on one key are serialised on one lock:
//    that is what makes the counts exact under any number of connections.
//  - Every decision (consume, peek, refund), block and reset takes its partition's lock
//    exclusively: each of them writes, if only to move the key to the front of the LRU list.
//    The lock is held only while the core reads and writes the slot: no allocation, no I/O, no
//    PostgreSQL call happens under it.
//  - Stats and snapshots take each partition's lock shared, one partition at a time, so they
//    never hold more than one lock and never stop the whole store.
//  - The postmaster saves the store at shutdown without locks: by then every process that
//    could touch it has exited.
//
// Nothing here is transactional: a decision is in shared memory the moment the lock is
// released, whatever the caller's transaction does next, and no WAL is written, so the engine
// works in read-only transactions and on hot standbys.
//
// The file. At a clean shutdown the postmaster writes the store to pg_stat/ (a temp file, then
// durable_rename); at start it reads it back, checks its magic, version, sizes and CRC, and
// restores the keys that have not expired, oldest first, so the LRU order survives too. The
// states hold absolute instants of the server clock (microseconds since the Unix epoch), so
// restoring them needs no translation: a key whose window ended while the server was down
// decides as fresh, and a clock that went back is time standing still, as everywhere else.
// With ratelimit.memory_snapshot_interval set, the worker also writes the file every so many
// seconds and the file is kept after loading, so a crash loses at most that interval;
// otherwise the file is deleted once loaded and a crash starts empty.
#include "pg/memory_engine.hpp"

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <stdexcept>

#include "pg/clock.hpp"
#include "pg/guard.hpp"

extern "C" {
#include "catalog/pg_control.h"
#include "common/controldata_utils.h"
#include "port/pg_crc32c.h"
#include "storage/fd.h"
#include "storage/ipc.h"
#include "storage/lwlock.h"
#include "storage/shmem.h"
}

namespace ratelimit::pg {

void register_memory_worker();  // src/pg/memory_worker.cpp

namespace {

constexpr const char* kTrancheName = "ratelimit memory engine";
constexpr const char* kStateFile = "pg_stat/ratelimit_memory.state";
constexpr const char* kStateTempFile = "pg_stat/ratelimit_memory.state.tmp";
constexpr std::uint32_t kFileMagic = 0x524C4D53;  // "RLMS"
// Still 1: the state words added to a slot since (a bucket's measured limit and period, gcra's
// last write) are zero in older files, which the core reads as "measured in the limit asked
// for", so those files load as they are.
constexpr std::uint32_t kFileVersion = 1;

struct FileHeader {
    std::uint32_t magic;
    std::uint32_t version;
    std::uint32_t slot_bytes;
    std::uint32_t partitions;
    HashSecret secret;
    Micros saved_at;
    std::int64_t count;
    std::uint32_t entries_crc;  // CRC-32C of the `count` SavedSlots that follow
    std::uint32_t reserved;
};

int capacity_setting = 100000;
int expire_interval_setting = 60;
int snapshot_interval_setting = 0;

shmem_request_hook_type previous_shmem_request_hook = nullptr;
shmem_startup_hook_type previous_shmem_startup_hook = nullptr;

// In shared memory: the partition locks, then the store's block.
struct SharedState {
    LWLockPadded* locks;
    std::int64_t store_bytes;
};

// Set in the postmaster by the startup hook and inherited by every process it forks; null
// when the library was not preloaded.
SharedState* shared = nullptr;

std::size_t shared_size() {
    return MAXALIGN(sizeof(SharedState)) + MemoryStore::bytes_needed(capacity_setting);
}

void* store_block() {
    return reinterpret_cast<char*>(shared) + MAXALIGN(sizeof(SharedState));
}

LWLock* partition_lock(int partition) {
    return &shared->locks[partition].lock;
}

void request_shared_memory() {
    if (previous_shmem_request_hook != nullptr)
        previous_shmem_request_hook();
    RequestAddinShmemSpace(shared_size());
    RequestNamedLWLockTranche(kTrancheName, kMemoryPartitions);
}

HashSecret fresh_secret() {
    HashSecret secret;
    if (!pg_strong_random(&secret, sizeof secret))
        ereport(FATAL, (errmsg("ratelimit: could not generate the memory engine's hash key")));
    return secret;
}

// Whether the server last stopped cleanly: the shutdown checkpoint marks the control file
// "shut down" (or "shut down in recovery" on a standby). An immediate stop or a crash leaves it
// "in production" or "in recovery", and then the store in shared memory may have been
// half-written by a backend killed under its partition lock.
bool stopped_cleanly() {
    bool crc_ok = false;
    ControlFileData* control = get_controlfile(DataDir, &crc_ok);
    const bool clean =
        crc_ok && (control->state == DB_SHUTDOWNED || control->state == DB_SHUTDOWNED_IN_RECOVERY);
    pfree(control);
    return clean;
}

// Reads the saved store into the (just created, empty) block. Any problem with the file is
// logged and leaves the store empty: a bad file must never stop the server from starting.
// After a clean stop the file is what that stop saved. After a crash it can only be a
// snapshot, and it is used only while snapshots are on: one left from when they were on must
// not bring back old counts.
void load_saved_state() {
    if (snapshot_interval_setting == 0 && !stopped_cleanly()) {
        if (unlink(kStateFile) == 0)
            ereport(LOG, (errmsg("ratelimit: the server did not stop cleanly and snapshots are "
                                 "off: the memory engine starts empty")));
        return;
    }
    FILE* file = AllocateFile(kStateFile, PG_BINARY_R);
    if (file == nullptr) {
        if (errno != ENOENT)
            ereport(LOG, (errcode_for_file_access(),
                          errmsg("ratelimit: could not read \"%s\": %m", kStateFile)));
        return;
    }
    const char* problem = nullptr;
    FileHeader header;
    SavedSlot saved;
    if (fread(&header, sizeof header, 1, file) != 1 || header.magic != kFileMagic) {
        problem = "not a ratelimit memory engine file";
    } else if (header.version != kFileVersion || header.slot_bytes != sizeof(SavedSlot) ||
               header.partitions != kMemoryPartitions || header.count < 0) {
        problem = "written by another version";
    } else {
        // First pass: the whole file must be intact before anything from it is used.
        pg_crc32c crc;
        INIT_CRC32C(crc);
        std::int64_t read = 0;
        while (read < header.count && fread(&saved, sizeof saved, 1, file) == 1) {
            COMP_CRC32C(crc, &saved, sizeof saved);
            ++read;
        }
        FIN_CRC32C(crc);
        if (read != header.count || fgetc(file) != EOF)
            problem = "its length does not match its header";
        else if (!EQ_CRC32C(crc, header.entries_crc))
            problem = "its checksum does not match";
    }
    if (problem != nullptr) {
        ereport(LOG, (errmsg("ratelimit: ignoring \"%s\": %s; the memory engine starts empty",
                             kStateFile, problem)));
        FreeFile(file);
        unlink(kStateFile);
        return;
    }
    // The keys were hashed with the saved secret: the store must keep using it.
    MemoryStore store = MemoryStore::create(store_block(), capacity_setting, header.secret);
    const Micros now = clock_now();
    std::int64_t restored = 0;
    if (fseeko(file, static_cast<off_t>(sizeof header), SEEK_SET) == 0) {
        for (std::int64_t i = 0; i < header.count && fread(&saved, sizeof saved, 1, file) == 1;
             ++i) {
            if (store.restore(saved, now))
                ++restored;
        }
    }
    FreeFile(file);
    if (snapshot_interval_setting == 0)
        unlink(kStateFile);
    ereport(LOG, (errmsg("ratelimit: memory engine restored %lld of %lld saved keys",
                         static_cast<long long>(restored), static_cast<long long>(header.count))));
}

void save_at_shutdown(int code, Datum) {
    // After a crash or an immediate stop the store may be half-written: keep the last good
    // file (a snapshot) instead. An immediate stop exits with code 0, so the control file
    // decides.
    if (code != 0 || shared == nullptr || !stopped_cleanly())
        return;
    memory_save();
}

void start_shared_memory() {
    if (previous_shmem_startup_hook != nullptr)
        previous_shmem_startup_hook();
    bool found = false;
    LWLockAcquire(AddinShmemInitLock, LW_EXCLUSIVE);
    shared = static_cast<SharedState*>(ShmemInitStruct(kTrancheName, shared_size(), &found));
    if (!found) {
        shared->locks = GetNamedLWLockTranche(kTrancheName);
        shared->store_bytes = static_cast<std::int64_t>(shared_size());
        MemoryStore::create(store_block(), capacity_setting, fresh_secret());
    }
    LWLockRelease(AddinShmemInitLock);
    if (!IsUnderPostmaster) {
        on_shmem_exit(save_at_shutdown, 0);
        if (!found)
            load_saved_state();
    }
}

[[noreturn]] void not_available() {
    call_postgres([] {
        ereport(ERROR,
                (errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
                 errmsg("p_engine \"memory\" is not available: ratelimit is not in "
                        "shared_preload_libraries"),
                 errdetail("The memory engine keeps its counters in shared memory, which only a "
                           "library loaded at server start can set up."),
                 errhint("Add ratelimit to shared_preload_libraries in postgresql.conf (for "
                         "example shared_preload_libraries = 'ratelimit') and restart the "
                         "server, or use p_engine => 'table' or 'unlogged'.")));
    });
    throw std::logic_error("unreachable");
}

// A decision's scratch state, reused by every call of this backend so that a decision
// allocates nothing: a sliding_window log never grows past kMemoryLogCapacity + 1.
KeyState& scratch_state() {
    static KeyState scratch = [] {
        KeyState state;
        state.log.reserve(kMemoryLogCapacity + 1);
        return state;
    }();
    return scratch;
}

// Runs `work` on the store under `partition`'s lock. LWLockRelease cannot fail for a lock
// this backend holds, so it is called directly, also when the core throws.
template <typename Work>
auto with_partition(int partition, LWLockMode mode, Work&& work) {
    LWLock* lock = partition_lock(partition);
    call_postgres([&] { LWLockAcquire(lock, mode); });
    MemoryStore store = MemoryStore::attach(store_block());
    try {
        auto result = work(store);
        LWLockRelease(lock);
        return result;
    } catch (...) {
        LWLockRelease(lock);
        throw;
    }
}

}  // namespace

void define_memory_settings() {
    // A PGC_POSTMASTER setting can only be defined while the postmaster loads the library;
    // without preloading there is no store to size.
    if (process_shared_preload_libraries_in_progress)
        DefineCustomIntVariable(
            "ratelimit.memory_capacity",
            "Keys the memory engine can track at once (about 124 bytes of shared memory each).",
            "A full store frees expired keys first, then evicts the least recently used.",
            &capacity_setting, 100000, static_cast<int>(kMinMemoryCapacity),
            static_cast<int>(kMaxMemoryCapacity), PGC_POSTMASTER, 0, nullptr, nullptr, nullptr);
    DefineCustomIntVariable(
        "ratelimit.memory_expire_interval",
        "How often the memory engine's worker frees the keys whose state has expired.", nullptr,
        &expire_interval_setting, 60, 1, 86400, PGC_SIGHUP, GUC_UNIT_S, nullptr, nullptr, nullptr);
    DefineCustomIntVariable(
        "ratelimit.memory_snapshot_interval",
        "How often the memory engine's worker saves the store to disk (0 = only at shutdown).",
        "A crash loses at most this much of the memory engine's state.", &snapshot_interval_setting,
        0, 0, 86400, PGC_SIGHUP, GUC_UNIT_S, nullptr, nullptr, nullptr);
}

void install_memory_engine() {
    previous_shmem_request_hook = shmem_request_hook;
    shmem_request_hook = request_shared_memory;
    previous_shmem_startup_hook = shmem_startup_hook;
    shmem_startup_hook = start_shared_memory;
    register_memory_worker();
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

Decision memory_decide(const MemoryKey& key, const Limit& limit, Micros now, std::int64_t cost,
                       Action action) {
    KeyState& scratch = scratch_state();
    return with_partition(key.partition, LW_EXCLUSIVE, [&](MemoryStore& store) {
        return store.decide(key.partition, key.hash, limit, now, cost, action, scratch);
    });
}

Micros memory_block(const MemoryKey& key, Micros until, Micros now) {
    KeyState& scratch = scratch_state();
    return with_partition(key.partition, LW_EXCLUSIVE, [&](MemoryStore& store) {
        return store.block(key.partition, key.hash, until, now, scratch);
    });
}

bool memory_reset(const MemoryKey& key) {
    return with_partition(key.partition, LW_EXCLUSIVE,
                          [&](MemoryStore& store) { return store.reset(key.partition, key.hash); });
}

bool memory_consume_all(MemoryTierCall* calls, int count, Micros now, std::int64_t cost,
                        bool charge) {
    int partitions[kMemoryPartitions];
    int locked = 0;
    for (int i = 0; i < count; ++i)
        partitions[locked++] = calls[i].key.partition;
    std::sort(partitions, partitions + locked);
    locked = static_cast<int>(std::unique(partitions, partitions + locked) - partitions);
    int held = 0;
    try {
        for (; held < locked; ++held) {
            LWLock* lock = partition_lock(partitions[held]);
            call_postgres([&] { LWLockAcquire(lock, LW_EXCLUSIVE); });
        }
        MemoryStore store = MemoryStore::attach(store_block());
        KeyState& scratch = scratch_state();
        bool allowed = true;
        for (int i = 0; i < count; ++i) {
            MemoryTierCall& call = calls[i];
            call.before = store.decide(call.key.partition, call.key.hash, call.limit, now, cost,
                                       Action::kPeek, scratch);
            if (call.enforced && !call.before.allowed)
                allowed = false;
        }
        for (int i = 0; charge && allowed && i < count; ++i) {
            MemoryTierCall& call = calls[i];
            if (!call.before.allowed)
                continue;
            call.result = store.decide(call.key.partition, call.key.hash, call.limit, now, cost,
                                       Action::kConsume, scratch);
            call.charged = true;
        }
        while (held > 0)
            LWLockRelease(partition_lock(partitions[--held]));
        return allowed;
    } catch (...) {
        while (held > 0)
            LWLockRelease(partition_lock(partitions[--held]));
        throw;
    }
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

bool memory_save() {
    FILE* file = AllocateFile(kStateTempFile, PG_BINARY_W);
    if (file == nullptr) {
        ereport(LOG, (errcode_for_file_access(),
                      errmsg("ratelimit: could not write \"%s\": %m", kStateTempFile)));
        return false;
    }
    MemoryStore store = MemoryStore::attach(store_block());
    // The postmaster saves after every other process has exited, and has no PGPROC to wait
    // on a lock with; the worker saves while backends run and must lock.
    const bool lock = IsUnderPostmaster;
    FileHeader header{};
    header.magic = kFileMagic;
    header.version = kFileVersion;
    header.slot_bytes = sizeof(SavedSlot);
    header.partitions = kMemoryPartitions;
    header.secret = store.secret();
    header.saved_at = clock_now();
    bool written = fwrite(&header, sizeof header, 1, file) == 1;
    pg_crc32c crc;
    INIT_CRC32C(crc);
    for (int p = 0; p < kMemoryPartitions && written; ++p) {
        if (lock)
            LWLockAcquire(partition_lock(p), LW_SHARED);
        store.for_each_oldest_first(p, [&](const SavedSlot& saved) {
            if (written && fwrite(&saved, sizeof saved, 1, file) == 1) {
                COMP_CRC32C(crc, &saved, sizeof saved);
                ++header.count;
            } else {
                written = false;
            }
        });
        if (lock)
            LWLockRelease(partition_lock(p));
    }
    FIN_CRC32C(crc);
    header.entries_crc = crc;
    written = written && fseeko(file, 0, SEEK_SET) == 0 &&
              fwrite(&header, sizeof header, 1, file) == 1 && fflush(file) == 0;
    if (FreeFile(file) != 0)
        written = false;
    if (!written) {
        ereport(LOG, (errcode_for_file_access(),
                      errmsg("ratelimit: could not write \"%s\": %m", kStateTempFile)));
        unlink(kStateTempFile);
        return false;
    }
    return durable_rename(kStateTempFile, kStateFile, LOG) == 0;
}

int memory_expire_interval_seconds() {
    return expire_interval_setting;
}

int memory_snapshot_interval_seconds() {
    return snapshot_interval_setting;
}

}  // namespace ratelimit::pg
