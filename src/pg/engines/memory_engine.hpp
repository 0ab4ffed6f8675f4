// The memory engine inside the server: the core's MemoryStore (ratelimit/memory_store.hpp) in
// shared memory (a SharedRegion), its locks, and saving it across restarts. Only available when
// the library is in shared_preload_libraries; every call otherwise is an error saying so.
#pragma once

#include <cstdint>
#include <string>

#include "pg/engines/key_state_table.hpp"
#include "pg/bridge/postgres.hpp"
#include "ratelimit/algorithms.hpp"
#include "ratelimit/key_hash.hpp"
#include "ratelimit/memory_store.hpp"

namespace ratelimit::pg {

// Requests the shared memory and locks and registers the worker; called from _PG_init only
// while shared_preload_libraries is being processed.
void install_memory_engine();

// A key, hashed, and the partition that holds it. Throws (SQLSTATE 55000, with a hint naming
// shared_preload_libraries) when the engine is not available.
struct MemoryKey {
    KeyHash hash;
    int partition = 0;
};
MemoryKey memory_key(const StateKey& key);

// Whether the memory engine exists (the library was preloaded).
bool memory_engine_available();

// Raises 55000 unless the memory engine exists, naming `what` chose it (a policy, a setting)
// and saying what to do `instead`; memory_key() raises the same for p_engine.
void require_memory_engine(const std::string& what, const std::string& instead);

// `room_clock` (when not -1) is the real clock when `now` runs ahead of it: room for a new key
// is made at that instant (see Tenant::clock).
Decision memory_decide(const MemoryKey& key, const Limit& limit, Micros now, std::int64_t cost,
                       Action action, Micros room_clock = -1);
// Decides each of `count` keys on its own, as memory_decide() would one after the other
// (decisions[i] for keys[i]; a key given twice is decided twice, in order). The keys are
// taken partition by partition, each partition's lock once for a run of its keys, with the
// next keys' buckets and slots fetched into the cache while one is decided.
void memory_decide_each(const MemoryKey* keys, std::size_t count, const Limit& limit, Micros now,
                        std::int64_t cost, Action action, Decision* decisions);
Micros memory_block(const MemoryKey& key, Micros until, Micros now);
bool memory_reset(const MemoryKey& key);

// One key of an all-or-nothing decision over several keys (ratelimit.consume_all).
struct MemoryTierCall {
    MemoryKey key;
    Limit limit;
    bool enforced = true;  // a denial here denies the whole call (false: shadow, only reported)
    Decision before;       // what a peek says, before anything is charged
    Decision result;       // the consume's decision, when `charged`
    bool charged = false;
};

// Decides `calls` as one: every partition they live in is locked for the whole decision (in
// partition order, so two such decisions cannot deadlock). If every enforced call would be
// allowed, and room can be made for every charge (a new key's slot, a log's block), each call
// that would be allowed is charged and true is returned; otherwise nothing changes and false
// is returned (a call that found no room reports the denial in `before`). With `charge` false, only
// the peeks are made (to report the keys when another engine's tier has already denied). No two
// calls may have the same key.
bool memory_consume_all(MemoryTierCall* calls, int count, Micros now, std::int64_t cost,
                        bool charge);

// Summed over partitions, each read under its lock; `shared_bytes` is the store's block.
MemoryStats memory_stats(std::int64_t* shared_bytes);

// The rows of the store's database table in use, into `rows` (kMaxMemoryDatabases of them);
// returns how many. `share_limit` is the most keys one database may hold now.
int memory_database_stats(MemoryDatabaseStats* rows, std::int64_t* share_limit);

// ---- for the worker (src/pg/engines/memory_worker.cpp); plain C-style code, no C++ objects ----

// ---- for the WAL (src/pg/engines/memory_wal.cpp); plain C-style code, no C++ objects ----

// Replays a key's state from the WAL (or forgets the key): the startup process's redo.
void memory_replay(const SavedSlot& saved);

// Writes every key's state to the WAL (SNAPSHOT records), partition by partition.
void memory_log_all();

// What memory_save() wrote.
struct StoreSaved {
    std::int64_t keys = 0;
    std::int64_t bytes = 0;
};

// Frees every expired slot; returns how many.
std::int64_t memory_expire_all(Micros now);

// Writes the store to its file (temp file, then durable_rename); false, with a LOG message,
// when it could not. `checkpoint`: to the logged store's checkpoint file (ratelimit.memory_wal;
// see memory_store_file.hpp), leaving out the keys that have expired, and, in a process that
// runs beside backends, holding a partition's lock for a run of slots at a time, so that a
// decision waits for one run at most. `saved`, when given, gets what was written.
bool memory_save(bool checkpoint = false, StoreSaved* saved = nullptr);

// The worker's settings, in seconds (0 = never).
int memory_expire_interval_seconds();
int memory_snapshot_interval_seconds();

}  // namespace ratelimit::pg
