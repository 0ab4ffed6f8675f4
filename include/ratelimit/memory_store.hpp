// The memory engine's store: every tracked key's state in one fixed block of memory (shared
// memory, in the server), so that a decision is a hash lookup and a few stores, with no
// allocation and no I/O.
//
// Layout. The block holds a header, kMemoryPartitions partition headers, then `capacity` slots
// and `capacity` bucket heads. Partition p owns a contiguous run of slots and buckets; a key
// lives in the partition its hash picks, chained from one of that partition's buckets. Each
// partition keeps its own free list and its own LRU list (most recently used first), so
// nothing is shared between partitions and each can be locked on its own.
//
// Locking is the caller's (src/pg/memory_engine.cpp): every method that takes a partition
// needs that partition's lock, exclusive for anything that writes (every decision writes,
// because using a key moves it to the front of the LRU), shared for stats().
//
// Keys are stored as their 128-bit keyed hash (ratelimit/key_hash.hpp), never as text: a slot
// has a fixed size whatever the key's length. Two keys share a slot only if their hashes
// collide, which, the hash being keyed with a secret, callers cannot arrange.
//
// Room. A full partition first frees every slot whose state has expired (decides exactly like a
// fresh key: no change in behaviour), then, if none had, evicts its least recently used slot
// and counts it. A call never fails for lack of room.
#pragma once

#include <cstddef>
#include <cstdint>

#include "ratelimit/algorithms.hpp"
#include "ratelimit/key_hash.hpp"
#include "ratelimit/time.hpp"

namespace ratelimit {

constexpr int kMemoryPartitions = 128;

// A sliding_window log is kept inside the slot, so the memory engine takes sliding_window only
// for limits up to this many units (each allowed unit may need its own entry).
constexpr int kMemoryLogCapacity = 6;

// The smallest and largest store: enough slots per partition that the fixed headers stay a
// few bytes per key; slot numbers fit 32 bits.
constexpr std::int64_t kMinMemoryCapacity = 4096;
constexpr std::int64_t kMaxMemoryCapacity = 1LL << 30;

constexpr std::uint32_t kNoSlot = UINT32_MAX;

// The state words of a slot: the counter algorithms use `counter`, sliding_window `log`.
union SlotState {
    struct {
        Micros instant;
        std::int64_t amount;
        std::int64_t carry;
        std::int64_t measured_limit;  // token_bucket and gcra (see KeyState); else 0
        Micros measured_period;
    } counter;
    struct {
        Micros instant;  // the latest instant the log has seen (see KeyState)
        Micros at[kMemoryLogCapacity];
        std::int16_t units[kMemoryLogCapacity];  // at most the limit, so at most the capacity
    } log;
};

struct MemorySlot {
    KeyHash key;
    std::uint32_t newer;       // LRU neighbour towards the most recently used, or kNoSlot
    std::uint32_t older;       // LRU neighbour towards the least recently used, or kNoSlot
    std::uint32_t chain_next;  // next slot of the same bucket (or of the free list), or kNoSlot
    std::int16_t algorithm;    // Algorithm, as stored
    std::uint8_t log_count;
    std::uint8_t in_use;
    Micros blocked_until;
    Micros expires_at;  // idle_from(): from then on the slot decides like no slot
    SlotState state;
};
static_assert(sizeof(MemorySlot) == 120, "a slot plus its bucket head must stay within 128 bytes");

// Counters of one partition, or summed over all.
struct MemoryStats {
    std::int64_t entries = 0;
    std::int64_t capacity = 0;
    std::int64_t evictions = 0;  // slots taken from keys that had not expired
    std::int64_t expired = 0;    // slots freed because their state had expired
    std::int64_t allowed = 0;    // consume calls allowed
    std::int64_t denied = 0;     // consume calls denied

    MemoryStats& operator+=(const MemoryStats& other) noexcept {
        entries += other.entries;
        capacity += other.capacity;
        evictions += other.evictions;
        expired += other.expired;
        allowed += other.allowed;
        denied += other.denied;
        return *this;
    }
};

// What one partition's slots look like from outside, for saving: the state of one key.
struct SavedSlot {
    KeyHash key;
    std::int16_t algorithm = 0;
    std::uint8_t log_count = 0;
    std::uint8_t reserved[5] = {0, 0, 0, 0, 0};
    Micros blocked_until = 0;
    Micros expires_at = 0;
    SlotState state{};
};

class MemoryStore {
  public:
    // Bytes of the block for `capacity` slots (kMinMemoryCapacity..kMaxMemoryCapacity).
    static std::size_t bytes_needed(std::int64_t capacity) noexcept;

    // Lays out an empty store in `block` (bytes_needed(capacity) bytes, 8-byte aligned).
    static MemoryStore create(void* block, std::int64_t capacity,
                              const HashSecret& secret) noexcept;

    // A store laid out earlier by create() in `block` (by this or another process).
    static MemoryStore attach(void* block) noexcept;

    const HashSecret& secret() const noexcept;
    std::int64_t capacity() const noexcept;
    static int partition_of(const KeyHash& key) noexcept;

    // ---- the caller holds `partition`'s lock exclusively ----

    // Decides `action` on `key` like decide() on the key's state, and stores the result. A key
    // without a slot is fresh; it gets a slot only when the decision writes state. `scratch`
    // is reused across calls so that a decision allocates nothing once warm.
    Decision decide(int partition, const KeyHash& key, const Limit& limit, Micros now,
                    std::int64_t cost, Action action, KeyState& scratch);

    // Blocks `key` until `until` (an earlier block is never shortened); returns the block's end.
    Micros block(int partition, const KeyHash& key, Micros until, Micros now, KeyState& scratch);

    // Forgets `key`; true if it had a slot.
    bool reset(int partition, const KeyHash& key) noexcept;

    // Frees every slot of `partition` whose state expired by `now`; returns how many. Cheap
    // when none can have: the partition knows the earliest expiry among its slots.
    std::int64_t expire(int partition, Micros now) noexcept;

    // Restores one saved key as the most recently used of its partition (call them oldest
    // first); expired or invalid ones are skipped. True if restored.
    bool restore(const SavedSlot& saved, Micros now);

    // ---- the caller holds `partition`'s lock, shared or exclusive ----

    MemoryStats stats(int partition) const noexcept;

    // Calls `visit(const SavedSlot&)` for each key of `partition`, least recently used first.
    template <typename Visit>
    void for_each_oldest_first(int partition, Visit&& visit) const {
        for (std::uint32_t i = oldest_index(partition); i != kNoSlot; i = slots_[i].newer)
            visit(saved_form(slots_[i]));
    }

    // True if `saved` is a state this version could have written (checked before restoring
    // anything read from disk).
    static bool plausible(const SavedSlot& saved) noexcept;

  private:
    struct Header;
    struct PartitionHeader;

    explicit MemoryStore(void* block) noexcept;

    std::uint32_t oldest_index(int partition) const noexcept;

    PartitionHeader& partition_header(int partition) noexcept;
    const PartitionHeader& partition_header(int partition) const noexcept;
    std::uint32_t& bucket_of(const PartitionHeader& header, const KeyHash& key) noexcept;
    MemorySlot* find(int partition, const KeyHash& key) noexcept;
    MemorySlot& insert(int partition, const KeyHash& key, Micros now) noexcept;
    void make_room(PartitionHeader& header, Micros now) noexcept;
    void free_expired(PartitionHeader& header, Micros now) noexcept;
    void unlink_lru(PartitionHeader& header, std::uint32_t index) noexcept;
    void push_newest(PartitionHeader& header, std::uint32_t index) noexcept;
    void touch(PartitionHeader& header, std::uint32_t index) noexcept;
    void free_slot(PartitionHeader& header, std::uint32_t index) noexcept;
    void note_expiry(PartitionHeader& header, Micros expires_at) noexcept;
    std::uint32_t index_of(const MemorySlot& slot) const noexcept;
    static SavedSlot saved_form(const MemorySlot& slot) noexcept;

    Header* header_ = nullptr;
    PartitionHeader* partitions_ = nullptr;
    MemorySlot* slots_ = nullptr;
    std::uint32_t* buckets_ = nullptr;
};

// Throws ArgumentError (p_limit) if the memory engine cannot keep `limit`'s state in a slot.
void require_memory_limit(const Limit& limit);

// Copies a slot's state into `state` (cleared first) and back; store_slot_state requires a log
// of at most kMemoryLogCapacity entries (require_memory_limit guarantees it).
void load_slot_state(const MemorySlot& slot, KeyState& state);
void store_slot_state(const KeyState& state, Micros expires_at, MemorySlot& slot) noexcept;

}  // namespace ratelimit
