// The memory engine's store: every tracked key's state in one fixed block of memory (shared
// memory, in the server), so that a decision is a hash lookup and a few stores, with no
// allocation and no I/O.
//
// Layout. The block holds a header, the table of databases, kMemoryPartitions partition
// headers, then `capacity` slots, `capacity` bucket heads and the log blocks. Partition p owns
// a contiguous run of slots, buckets and log blocks; a key lives in the partition its hash
// picks, chained from one of that partition's buckets. Each partition keeps its own free lists
// and its own use count, so nothing is shared between partitions and each can be locked on its
// own; only the databases' counts are shared, as atomic counters.
//
// Recency. Each use of a key stamps its slot with the partition's next use count. Eviction
// compares the stamps of a bounded sample of the partition's slots and takes the oldest, as
// Redis approximates LRU: a use writes only the slot it already holds, where a linked LRU list
// would also write the slot's two neighbours and the list's front, three more cache misses on
// every call over many keys. A partition of at most kMemoryEvictionWalk slots is sampled whole,
// so there the least recently used key is exactly the one taken.
//
// Locking is the caller's (src/pg/engines/memory_engine.cpp): every method that takes a partition
// needs that partition's lock, exclusive for anything that writes (every decision writes,
// because using a key stamps it), shared for stats().
//
// Keys are stored as their 128-bit keyed hash (ratelimit/key_hash.hpp), never as text: a slot
// has a fixed size whatever the key's length. Two keys share a slot only if their hashes
// collide, which, the hash being keyed with a secret, callers cannot arrange.
//
// Room. A new key needs a slot of its partition, and a sliding_window log longer than
// kMemoryLogCapacity entries a log block of its partition's pool. Expired slots are always
// reclaimable: they decide exactly like no slot. A key that has not expired (still counting,
// blocked, locked out) is never taken for another unless its caller's Tenant says `evict`, and
// then only from the same database. Otherwise a call that cannot be given room is refused:
// nothing is stored and a consume is denied (last_room() says why, so that the server can
// apply ratelimit.memory_when_full).
//
// Databases. Every slot records the database it belongs to (an index into a table of database
// OIDs in the block); each database's count of slots is kept there, so that a database can be
// held to a share of the store, and the refusals and evictions it met are counted per database.
// The keys of two databases never meet: their hashes differ (the server hashes the OID in).
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "ratelimit/algorithms.hpp"
#include "ratelimit/key_hash.hpp"
#include "ratelimit/time.hpp"

namespace ratelimit {

constexpr int kMemoryPartitions = 128;

// A sliding_window log of up to this many entries is kept inside the slot; a longer one (up to
// kMaxSlidingLog entries, whatever the limit) in a log block of the partition's pool.
constexpr int kMemoryLogCapacity = 5;

// The smallest and largest store: enough slots per partition that the fixed headers stay a
// few bytes per key; slot numbers fit 32 bits.
constexpr std::int64_t kMinMemoryCapacity = 4096;
constexpr std::int64_t kMaxMemoryCapacity = 1LL << 30;

// Log blocks: kMaxSlidingLog entries each (1 kB). The default pool has one block for every 32
// slots, and at least 8 per partition.
constexpr std::int64_t kMaxMemoryLogBlocks = 1LL << 22;
constexpr std::int64_t kMemoryLogBlockBytes = 16 * kMaxSlidingLog;
std::int64_t default_memory_log_blocks(std::int64_t capacity) noexcept;

// Databases with a row of their own in the store's table; any further one shares the last row
// (reported with OID 0).
constexpr int kMaxMemoryDatabases = 1024;

// An eviction takes the least recently used slot of the caller's database among this many of the
// partition's slots, looked at in turn from where the previous eviction stopped, so that a full
// partition never costs a walk of all its slots.
constexpr int kMemoryEvictionWalk = 64;

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
        std::int32_t units[kMemoryLogCapacity];  // at most the limit, which fits 32 bits
        std::uint32_t block;  // the log's block while log_count > kMemoryLogCapacity
    } log;
};

struct MemorySlot {
    KeyHash key;
    std::uint64_t last_use;    // the partition's use count at the key's last use
    std::uint32_t chain_next;  // next slot of the same bucket (or of the free list), or kNoSlot
    std::uint16_t database;    // 1 + the database's row in the store's table; 0: a free slot
    std::int8_t algorithm;     // Algorithm, as stored
    std::uint8_t log_count;
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
    std::int64_t denied = 0;     // consume calls denied (refusals included)
    std::int64_t refusals = 0;   // calls refused for lack of room (a slot, a share, a log block)
    // Partitions whose last look for a new key's slot found no free or expired one (0 or 1 for
    // one partition); back to 0 once one of its slots is freed.
    std::int64_t full_partitions = 0;
    std::int64_t log_blocks = 0;
    std::int64_t log_blocks_used = 0;

    MemoryStats& operator+=(const MemoryStats& other) noexcept {
        entries += other.entries;
        capacity += other.capacity;
        evictions += other.evictions;
        expired += other.expired;
        allowed += other.allowed;
        denied += other.denied;
        refusals += other.refusals;
        full_partitions += other.full_partitions;
        log_blocks += other.log_blocks;
        log_blocks_used += other.log_blocks_used;
        return *this;
    }
};

// One database's row of the store's table.
struct MemoryDatabaseStats {
    std::uint32_t oid = 0;  // 0: the row shared by databases beyond kMaxMemoryDatabases - 1
    std::int64_t entries = 0;
    std::int64_t refusals = 0;
    std::int64_t evictions = 0;  // its keys taken while they had not expired
};

// Who is asking for room, and what to do when there is none.
struct Tenant {
    int database = 0;                // MemoryStore::database_index() of the caller's database
    std::int64_t share = INT64_MAX;  // the most slots the database may hold
    bool evict = false;              // take the database's least recently used live slot
    // The instant other keys' expiry is judged at when room is made, when the decision's own
    // clock runs ahead of the real one (the drop-ins decide a window's end that way): a key
    // that has not expired by the real clock is never taken as expired. -1: the decision's.
    Micros clock = -1;
};

// What the last call did to find room.
enum class Shortage : std::uint8_t {
    kNone,
    kPartitionFull,  // every slot of the partition holds a key that has not expired
    kShareFull,      // the database holds its share of the store
    kLogPoolFull,    // every log block of the partition holds a live key's log
};
struct RoomReport {
    bool refused = false;
    Shortage shortage = Shortage::kNone;  // why it was refused, or why it evicted
    std::int64_t evicted = 0;             // live slots taken by the call
};

// One key's state as saved to disk and restored: the fixed part first (what the file always
// holds), then the first log_count entries of `log` (sliding_window only).
struct SavedSlot {
    KeyHash key;
    std::uint32_t database = 0;  // the OID of the key's database
    std::int16_t algorithm = 0;
    std::uint16_t log_count = 0;
    Micros blocked_until = 0;
    Micros expires_at = 0;
    Micros instant = 0;
    std::int64_t amount = 0;
    std::int64_t carry = 0;
    std::int64_t measured_limit = 0;
    Micros measured_period = 0;
    LogEntry log[kMaxSlidingLog];
};
constexpr std::size_t kSavedSlotFixedBytes = offsetof(SavedSlot, log);
static_assert(kSavedSlotFixedBytes == 80, "the saved form's fixed part has no padding");
static_assert(sizeof(LogEntry) == 16, "a saved log entry is two 64-bit words");

class MemoryStore {
  public:
    // Bytes of the block for `capacity` slots (kMinMemoryCapacity..kMaxMemoryCapacity) and
    // `log_blocks` log blocks (0..kMaxMemoryLogBlocks; by default default_memory_log_blocks()).
    static std::size_t bytes_needed(std::int64_t capacity, std::int64_t log_blocks) noexcept;
    static std::size_t bytes_needed(std::int64_t capacity) noexcept {
        return bytes_needed(capacity, default_memory_log_blocks(capacity));
    }

    // Lays out an empty store in `block` (bytes_needed() bytes, 8-byte aligned).
    static MemoryStore create(void* block, std::int64_t capacity, std::int64_t log_blocks,
                              const HashSecret& secret) noexcept;
    static MemoryStore create(void* block, std::int64_t capacity,
                              const HashSecret& secret) noexcept {
        return create(block, capacity, default_memory_log_blocks(capacity), secret);
    }

    // A store laid out earlier by create() in `block` (by this or another process).
    static MemoryStore attach(void* block) noexcept;

    const HashSecret& secret() const noexcept;
    std::int64_t capacity() const noexcept;
    std::int64_t log_blocks() const noexcept;
    static int partition_of(const KeyHash& key) noexcept;

    // ---- no lock needed (the table is updated with atomic operations) ----

    // The row of database `oid` (0 < oid), claimed on first use; rows are never given back.
    int database_index(std::uint32_t oid) noexcept;
    // Row `index` (0..kMaxMemoryDatabases - 1): its OID (0 while unclaimed) and counts.
    MemoryDatabaseStats database_stats(int index) const noexcept;

    // ---- cache hints for a batch of keys: they only read, and change nothing ----

    // Asks the CPU to fetch `key`'s bucket head (its address alone: no lock needed).
    void prefetch_bucket(int partition, const KeyHash& key) const noexcept;
    // Asks for the first slot of `key`'s chain. The caller holds `partition`'s lock.
    void prefetch_slot(int partition, const KeyHash& key) const noexcept;

    // ---- the caller holds `partition`'s lock exclusively ----

    // Decides `action` on `key` like decide() on the key's state, and stores the result. A key
    // without a slot is fresh; it gets a slot only when the decision writes state, and a log
    // block only when its log outgrows the slot. Without room (see above) nothing is stored and
    // a consume is denied, retry_after being the wait until the partition's next key expires
    // (at least a millisecond, at most the period). `scratch` is reused across calls so that a
    // decision allocates nothing once warm.
    Decision decide(int partition, const KeyHash& key, const Limit& limit, Micros now,
                    std::int64_t cost, Action action, KeyState& scratch,
                    const Tenant& tenant = Tenant{});

    // Blocks `key` until `until` (an earlier block is never shortened); returns the block's end,
    // or -1 when a new key could not be given a slot.
    Micros block(int partition, const KeyHash& key, Micros until, Micros now, KeyState& scratch,
                 const Tenant& tenant = Tenant{});

    // Forgets `key`; true if it had a slot.
    bool reset(int partition, const KeyHash& key) noexcept;

    // Frees every slot of `partition` whose state expired by `now`; returns how many. Cheap
    // when none can have: the partition knows the earliest expiry among its slots.
    std::int64_t expire(int partition, Micros now) noexcept;

    // For a decision over several keys that must not fail half-way: what charging `cost` to
    // `key` under `limit` may need (an upper bound: a slot for a key without one, a block for a
    // log that may outgrow the slot), then room for all of a partition's needs at once. The
    // room is held for this tenant's next inserts until release(); the slots of `keep` are
    // neither evicted nor freed meanwhile. On false nothing is held and last_room() says why.
    struct Need {
        int slots = 0;
        int blocks = 0;
    };
    Need need_for_consume(int partition, const KeyHash& key, const Limit& limit,
                          std::int64_t cost) noexcept;
    bool reserve(int partition, Micros now, const Tenant& tenant, const Need& need,
                 const KeyHash* keep, int keep_count) noexcept;
    void release(int partition, const Tenant& tenant) noexcept;
    // The denial to report for a consume that found no room, from what it would have decided.
    Decision refusal(int partition, const Limit& limit, const Decision& decided,
                     Micros now) const noexcept;

    // Restores one saved key as the most recently used of its partition (call them oldest
    // first); expired or invalid ones are skipped, and a full partition makes room from its
    // least recently used keys, whatever their database. True if restored.
    bool restore(const SavedSlot& saved, Micros now);

    // What the last decide(), block(), reserve() or restore() did for room.
    const RoomReport& last_room() const noexcept { return room_; }

    // ---- the caller holds `partition`'s lock, shared or exclusive ----

    MemoryStats stats(int partition) const noexcept;

    // Calls `visit(const SavedSlot&)` for each key of `partition`, least recently used first.
    template <typename Visit>
    void for_each_oldest_first(int partition, Visit&& visit) const {
        std::vector<std::uint32_t> order(partition_slots());
        for_each_oldest_first(partition, order.data(), visit);
    }

    // The same without allocating: `order` has room for partition_slots() indexes. What the
    // server calls under a partition's lock, where running out of memory must not be possible.
    template <typename Visit>
    void for_each_oldest_first(int partition, std::uint32_t* order, Visit&& visit) const {
        SavedSlot saved;
        const std::uint32_t count = slots_oldest_first(partition, order);
        for (std::uint32_t n = 0; n < count; ++n) {
            saved_form(slots_[order[n]], saved);
            visit(static_cast<const SavedSlot&>(saved));
        }
    }

    // The most slots a partition has.
    std::uint32_t partition_slots() const noexcept;

    // The slots `partition` has.
    std::uint32_t slots_of(int partition) const noexcept;

    // Calls `visit(const SavedSlot&)` for each key held in `partition`'s slots [from, from +
    // count), in slot order. A key keeps its slot until it is freed, so a pass over a partition
    // in runs, its lock released between runs, visits every key that stayed unchanged meanwhile.
    template <typename Visit>
    void for_each_in_slots(int partition, std::uint32_t from, std::uint32_t count,
                           Visit&& visit) const {
        SavedSlot saved;
        for (std::uint32_t n = from; n < from + count; ++n) {
            if (saved_slot(partition, n, saved))
                visit(static_cast<const SavedSlot&>(saved));
        }
    }

    // The key's state in its saved form (SavedSlot) into `saved`; false when the key has no slot.
    // What the server writes to the WAL after a change to the key (ratelimit.memory_wal), and
    // restore()s when it replays it.
    bool saved(int partition, const KeyHash& key, SavedSlot& saved) const noexcept;

    // True if `saved` is a state this version could have written (checked before restoring
    // anything read from disk).
    static bool plausible(const SavedSlot& saved) noexcept;

  private:
    struct Header;
    struct PartitionHeader;
    struct DatabaseRow;

    explicit MemoryStore(void* block) noexcept;

    // The key in `partition`'s slot `n` in its saved form; false when the slot is free.
    bool saved_slot(int partition, std::uint32_t n, SavedSlot& saved) const noexcept;
    // Writes the indexes of `partition`'s keys into `order`, least recently used first; returns
    // how many.
    std::uint32_t slots_oldest_first(int partition, std::uint32_t* order) const noexcept;

    PartitionHeader& partition_header(int partition) noexcept;
    const PartitionHeader& partition_header(int partition) const noexcept;
    const std::uint32_t& bucket_of(const PartitionHeader& header,
                                   const KeyHash& key) const noexcept;
    std::uint32_t& bucket_of(const PartitionHeader& header, const KeyHash& key) noexcept;
    MemorySlot* find(int partition, const KeyHash& key) noexcept;
    const MemorySlot* find(int partition, const KeyHash& key) const noexcept;
    MemorySlot* insert(PartitionHeader& header, const KeyHash& key, Micros now,
                       const Tenant& tenant, bool any_database) noexcept;
    bool make_room(PartitionHeader& header, Micros now, const Tenant& tenant, const Need& need,
                   const KeyHash* keep, int keep_count, bool any_database) noexcept;
    bool claim_share(const Tenant& tenant, std::int64_t slots) noexcept;
    bool evict_one(PartitionHeader& header, const Tenant& tenant, bool any_database,
                   bool want_block, const KeyHash* keep, int keep_count) noexcept;
    void free_expired(PartitionHeader& header, Micros now, const KeyHash* keep = nullptr,
                      int keep_count = 0) noexcept;
    void touch(PartitionHeader& header, std::uint32_t index) noexcept;
    void free_slot(PartitionHeader& header, std::uint32_t index) noexcept;
    std::uint32_t take_block(PartitionHeader& header) noexcept;
    void free_block(PartitionHeader& header, std::uint32_t block) noexcept;
    void note_expiry(PartitionHeader& header, Micros expires_at) noexcept;
    void count_refusal(PartitionHeader& header, const Tenant& tenant, Shortage why) noexcept;
    std::uint32_t index_of(const MemorySlot& slot) const noexcept;
    LogEntry* block_entries(std::uint32_t block) const noexcept;
    void load_state(const MemorySlot& slot, KeyState& state) const;
    // Writes a state into `slot`: the log goes inline, or into the slot's block, or into
    // `new_block` (taken by the caller) when it outgrows the slot; a block no longer needed is
    // given back.
    struct Words {
        Algorithm algorithm;
        Micros blocked_until;
        Micros expires_at;
        Micros instant;
        std::int64_t amount;
        std::int64_t carry;
        std::int64_t measured_limit;
        Micros measured_period;
    };
    void write_slot(PartitionHeader& header, const Words& words, const LogEntry* log,
                    std::size_t log_count, std::uint32_t new_block, MemorySlot& slot) noexcept;
    void store_state(PartitionHeader& header, const KeyState& state, Micros expires_at,
                     std::uint32_t new_block, MemorySlot& slot) noexcept;
    void saved_form(const MemorySlot& slot, SavedSlot& saved) const noexcept;

    Header* header_ = nullptr;
    DatabaseRow* databases_ = nullptr;
    PartitionHeader* partitions_ = nullptr;
    MemorySlot* slots_ = nullptr;
    std::uint32_t* buckets_ = nullptr;
    LogEntry* logs_ = nullptr;
    RoomReport room_;
};

// ---- the block's layout: the store's own parts, defined here for the two files that implement
// it (src/core/memory_store.cpp, and memory_store_saved.cpp for the saved form) ----

static_assert(std::atomic<std::int64_t>::is_always_lock_free &&
                  std::atomic<std::uint32_t>::is_always_lock_free,
              "the databases' counts are shared between processes: their atomics must be "
              "lock-free (and so address-free)");

struct MemoryStore::Header {
    std::int64_t capacity;
    std::int64_t log_blocks;
    HashSecret secret;
};

struct MemoryStore::DatabaseRow {
    std::atomic<std::uint32_t> oid;
    std::atomic<std::int64_t> entries;
    std::atomic<std::int64_t> refusals;
    std::atomic<std::int64_t> evictions;
};

struct MemoryStore::PartitionHeader {
    std::uint32_t first;  // the partition's slots and buckets are [first, first + count)
    std::uint32_t count;
    std::uint32_t used;
    std::uint32_t free_head;
    // Where the next eviction starts looking, in [0, count): successive evictions look at
    // successive runs of slots.
    std::uint32_t sample_at;
    std::uint32_t log_first;  // its log blocks are [log_first, log_first + log_count)
    std::uint32_t log_count;
    std::uint32_t log_used;
    std::uint32_t log_free;
    // Free slots held by reserve() for the next inserts, their database's share already
    // counted; given back by release().
    std::uint32_t claimed;
    std::uint32_t full;  // the last look for a new key's slot found none free or expired
    std::uint64_t uses;  // the last stamp given to a slot (MemorySlot::last_use)
    // No slot of the partition expires before this: a full partition scans for expired slots
    // only from then on. Lowered whenever a slot gets an earlier expiry.
    Micros next_expiry;
    std::int64_t evictions;
    std::int64_t expired;
    std::int64_t allowed;
    std::int64_t denied;
    std::int64_t refusals;
};

// True while a slot's sliding_window log lives in a log block.
inline bool has_log_block(const MemorySlot& slot) noexcept {
    return slot.log_count > kMemoryLogCapacity;
}

// Kept for the callers that check a limit before using the memory engine: every limit fits now
// (a long sliding_window log goes to a log block), so it never throws.
void require_memory_limit(const Limit& limit);

// A saved key's state as a KeyState (cleared first).
void load_saved_state(const SavedSlot& saved, KeyState& state);

}  // namespace ratelimit
