// The memory engine inside the server: the core's MemoryStore (ratelimit/memory_store.hpp) in
// shared memory, its locks, its settings, and saving it across restarts. Only available when
// the library is in shared_preload_libraries; every call otherwise is an error saying so.
#pragma once

#include <cstdint>

#include "pg/postgres.hpp"
#include "ratelimit/algorithms.hpp"
#include "ratelimit/key_hash.hpp"
#include "ratelimit/memory_store.hpp"

namespace ratelimit::pg {

// Registers the ratelimit.memory_* settings; called from _PG_init in every process.
void define_memory_settings();

// Requests the shared memory and locks and registers the worker; called from _PG_init only
// while shared_preload_libraries is being processed.
void install_memory_engine();

// A key, hashed, and the partition that holds it. Throws (SQLSTATE 55000, with a hint naming
// shared_preload_libraries) when the engine is not available.
struct MemoryKey {
    KeyHash hash;
    int partition = 0;
};
MemoryKey memory_key(Datum key_text);

Decision memory_decide(const MemoryKey& key, const Limit& limit, Micros now, std::int64_t cost,
                       Action action);
Micros memory_block(const MemoryKey& key, Micros until, Micros now);
bool memory_reset(const MemoryKey& key);

// Summed over partitions, each read under its lock; `shared_bytes` is the store's block.
MemoryStats memory_stats(std::int64_t* shared_bytes);

// ---- for the worker (src/pg/memory_worker.cpp); plain C-style code, no C++ objects ----

// Frees every expired slot; returns how many.
std::int64_t memory_expire_all(Micros now);

// Writes the store to its file (temp file, then durable_rename); false, with a LOG message,
// when it could not.
bool memory_save();

// The worker's settings, in seconds (0 = never).
int memory_expire_interval_seconds();
int memory_snapshot_interval_seconds();

}  // namespace ratelimit::pg
