// The memory engine's file (src/pg/engines/memory_store_file.cpp): the store saved in pg_stat/
// at a clean shutdown or as a snapshot, and loaded back at start. For the postmaster and the
// worker only: plain C-style code, no C++ object with a destructor, problems logged, never
// raised. The locks are the caller's (src/pg/engines/memory_engine.cpp).
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdio>

#include "pg/bridge/postgres.hpp"

extern "C" {
#include "port/pg_crc32c.h"
}
#include "ratelimit/key_hash.hpp"
#include "ratelimit/memory_store.hpp"
#include "ratelimit/time.hpp"

namespace ratelimit::pg {

// Whether the server last stopped cleanly (the control file says "shut down"); a store in
// shared memory after a crash or an immediate stop may be half-written.
bool stopped_cleanly();

// Fills `block`, a store just created empty with `log_blocks` log blocks (and the capacity
// ratelimit.memory_capacity sets), from the file of the last clean shutdown or snapshot, when
// there is one that may be used. In the postmaster, at start.
void load_store_file(void* block, std::int64_t log_blocks);

// The file being written: a temp file, renamed over the file once complete. Plain data.
struct StoreFileWriter {
    const char* path;       // the file
    const char* temp_path;  // written first, then renamed over it
    FILE* file;
    HashSecret secret;  // the store's: the saved keys are hashed with it
    Micros saved_at;
    std::int64_t count;  // keys written
    std::int64_t bytes;  // the file's, header included
    pg_crc32c crc;       // of the keys written
    bool written;        // false once a write failed: the rest is skipped
};

// Opens the temp file for a store hashed with `secret`; false, with a LOG line, when it cannot.
// `checkpoint`: the logged store's file (ratelimit.memory_wal), the store as of the last
// checkpoint, which load_store_file() reads at every start and the WAL after that checkpoint
// completes (pg/engines/memory_wal.hpp).
bool begin_store_file(StoreFileWriter* writer, const HashSecret& secret, bool checkpoint = false);

// Appends one key, as MemoryStore::for_each_oldest_first gives it.
void write_store_file_slot(StoreFileWriter* writer, const SavedSlot& saved);

// Appends `count` keys already in the saved form, one after another in `bytes` (`length` of
// them): what a run of slots read under its partition's lock gave, written once it is released.
void write_store_file_keys(StoreFileWriter* writer, const char* bytes, std::size_t length,
                           std::int64_t count);

// Completes the file (its header, then durable_rename over the last one); false, with a LOG line
// and the temp file removed, when any write failed.
bool finish_store_file(StoreFileWriter* writer);

// Deletes the logged store's file (ratelimit.memory_wal) when a newer one could not be written:
// an older one would bring back states the WAL after the checkpoint no longer holds. Durable.
void forget_checkpoint_store_file();

}  // namespace ratelimit::pg
