// The memory engine in the WAL (ratelimit.memory_wal = on): each change to a key is written to
// the WAL as the key's whole state, while its partition's lock is held, without waiting for the
// flush (no transaction id). A worker (ratelimit memory engine WAL) asks the WAL writer every
// 10 ms to flush what was inserted, as an asynchronous commit does, and the WAL writer flushes it
// within wal_writer_delay. Crash recovery and every standby replay the records into their store,
// through the resource manager "ratelimit" (RmgrId kMemoryWalRmgrId).
//
// Recovery starts at the last checkpoint's redo pointer, so every key's state must be found
// after it, or in a store it starts from. The worker keeps each checkpoint waiting, as
// PostgreSQL lets a backend do (DELAY_CHKPT_START), until it has written the store to the
// checkpoint file (pg_stat/ratelimit_memory.checkpoint), then inserts a SAVED record. Recovery
// loads that file and replays the WAL after the redo pointer onto it. Each record holds a key's
// whole state, and a key changed after the redo pointer has a record after it, so the last
// record of a key is its state, and a key with none after it is as the file holds it: the file
// may be read at any instant after the redo pointer. A standby that replays a SAVED record
// writes its own store to its own file the same way, before the checkpoint record that its
// restartpoint will start from.
//
// Why a file and not the WAL: the keys nobody touches would otherwise be written to the WAL at
// every checkpoint (about 80 bytes a key), archived and sent to every standby, and a pass larger
// than half of max_wal_size would itself start the next checkpoint. The file costs the local
// disk the same bytes, and the WAL one small record. Should the file not be written (a full
// disk), the worker removes the old one and writes the keys to the WAL instead (SNAPSHOT).
//
// Records: STATES (a decision's keys), SAVED (the store is in the checkpoint file: the keys and
// bytes written), SNAPSHOT (the keys after a checkpoint's redo pointer, when the file could not
// be written); each starts with its format's number (one byte, kWalFormat). STATES and SNAPSHOT
// then hold keys in the saved form (SavedSlot: its fixed part, then its sliding_window log
// entries); a key with no state (reset) has algorithm kForgotten.
#pragma once

#include <cstddef>
#include <cstdint>

#include "pg/bridge/postgres.hpp"
#include "ratelimit/key_hash.hpp"
#include "ratelimit/memory_store.hpp"

namespace ratelimit::pg {

// The resource manager's id, one of the ids PostgreSQL leaves to extensions (128 to 255; 128 is
// for development). Once a WAL holds records of it, every server that replays that WAL must
// load this library under the same id.
inline constexpr int kMemoryWalRmgrId = 209;

// The record kinds (the high bits of the record's info byte).
inline constexpr std::uint8_t kWalStates = 0x00;
inline constexpr std::uint8_t kWalSnapshot = 0x10;
inline constexpr std::uint8_t kWalSaved = 0x20;

// The records' layout. A server that meets a record of another format (a standby on another
// ratelimit version than its primary) stops with an error that says so, instead of misreading it.
// 2: the store as of a checkpoint is in the checkpoint file (SAVED).
inline constexpr std::uint8_t kWalFormat = 2;

// A key whose slot is gone (reset) is written with this algorithm.
inline constexpr std::int16_t kForgotten = -1;

// Registers the resource manager (always, when the library is preloaded: a WAL may hold its
// records from before the setting was turned off) and, with ratelimit.memory_wal on, the worker
// that holds the checkpoints.
void install_memory_wal();

// True when this process writes the memory engine's changes to the WAL now: ratelimit.memory_wal
// is on and the server is not in recovery (a hot standby's own decisions stay its own).
bool memory_wal_logging();

// The WAL side as memory_stats() and metrics() show it.
struct MemoryWalStatus {
    bool enabled = false;         // ratelimit.memory_wal
    bool worker_running = false;  // its worker runs now
    std::int64_t worker_starts = 0;
    std::int64_t replay_unplaced = 0;  // replayed keys the store had no room for
};
MemoryWalStatus memory_wal_status();

// From the replay, for `keys` keys lost to this server (a replayed key the store had no room
// for, live keys evicted to make room): counted, and logged once per recovery.
void count_unplaced_replay(std::int64_t keys);

// The store's hash key when the engine is logged: derived from the cluster's own random nonce
// (pg_control), so that the server after a crash and every standby made from it hash keys
// alike, and no client can know it.
HashSecret memory_wal_secret();

// The keys of one record, gathered under their partitions' locks and inserted with them held.
// Plain data in a per-process buffer: nothing allocates, nothing throws; a WAL insertion that
// fails is a PANIC (a critical section), because the state is already in shared memory.
class WalKeys {
  public:
    explicit WalKeys(std::uint8_t kind) noexcept : kind_(kind) {}
    // Adds `key`'s state as the store holds it now (or its absence).
    void add(const MemoryStore& store, int partition, const KeyHash& key) noexcept;
    // Adds a state already read.
    void add(const SavedSlot& saved) noexcept;
    // Inserts what was added, if anything.
    void insert() noexcept;

  private:
    std::uint8_t kind_;
    std::size_t used_ = 1;  // the format's byte
    int count_ = 0;
};

}  // namespace ratelimit::pg
