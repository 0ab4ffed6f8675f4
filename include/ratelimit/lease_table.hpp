// In-flight leases: "at most N at once" limits (concurrent requests, jobs, connections). A lease
// is taken for a key and counts against its limit until it is released, or until its maximum
// hold time passes. Unlike a counter over a period, nothing refills: a slot comes back only when
// the lease holding it ends. The server ends a transaction's leases with the transaction and a
// session's with the backend (src/pg/native/leases.cpp), so a crashed worker never holds a slot.
//
// Layout. One fixed block: a header, then kLeasePartitions runs of slots. A key's leases live in
// the partition its hash picks; each partition has its own lock (the caller's), so keys of two
// partitions never wait for each other. A lease's identifier carries its partition and slot, and
// 31 random bits so that an identifier cannot be guessed or outlive its lease: releasing finds
// the slot directly and checks the identifier it holds.
//
// Counting a key's leases scans its partition's slots (a few hundred at most, see
// kMaxLeaseSlotsPerPartition), which keeps the block free of any per-key structure to maintain.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>

#include "ratelimit/key_hash.hpp"
#include "ratelimit/time.hpp"

namespace ratelimit {

constexpr int kLeasePartitions = 64;
constexpr std::int64_t kMinLeaseCapacity = kLeasePartitions;
// A partition's slots are numbered in 16 bits of the identifier.
constexpr std::int64_t kMaxLeaseSlotsPerPartition = 1 << 16;
constexpr std::int64_t kMaxLeaseCapacity = kLeasePartitions * kMaxLeaseSlotsPerPartition;

// Who took a lease: only the same database, by the same role (or a role with its privileges),
// may release it by its identifier.
struct LeaseOwner {
    std::uint32_t database = 0;
    std::uint32_t role = 0;
    bool operator==(const LeaseOwner& other) const noexcept {
        return database == other.database && role == other.role;
    }
};

struct LeaseSlot {
    KeyHash key;
    std::uint64_t id = 0;       // 0: free
    std::uint64_t session = 0;  // the holding backend's session token
    LeaseOwner owner;
    Micros acquired_at = 0;
    Micros expires_at = 0;  // 0: no maximum hold time
    std::int64_t units = 0;
};

struct LeaseAnswer {
    bool allowed = false;
    bool table_full = false;     // allowed by the limit, but no slot was free: nothing held
    std::uint64_t id = 0;        // the lease, when allowed
    std::int64_t in_flight = 0;  // units the key holds after the call
    // When denied: the wait until the earliest of the key's leases reaches its maximum hold
    // time, if any of them has one (a lease without one ends only when released).
    std::optional<Micros> retry_after;
};

class LeaseTable {
  public:
    // Slots for `capacity` leases in all (kMinLeaseCapacity..kMaxLeaseCapacity), spread evenly.
    static std::size_t bytes_needed(std::int64_t capacity) noexcept;
    static LeaseTable create(void* block, std::int64_t capacity) noexcept;
    static LeaseTable attach(void* block) noexcept;

    std::int64_t capacity() const noexcept;
    static int partition_of(const KeyHash& key) noexcept;
    // The partition an identifier names, or -1 if it cannot be one of this table's.
    int partition_of_lease(std::uint64_t id) const noexcept;

    // ---- the caller holds the partition's lock ----

    // Takes `units` of `key`'s `limit` for `session` when they fit beside the key's live leases
    // (those not past their maximum hold time at `now`). `expires_at` is the lease's end (0:
    // none); `random` supplies the identifier's unguessable bits.
    LeaseAnswer acquire(int partition, const KeyHash& key, std::int64_t limit, std::int64_t units,
                        Micros now, Micros expires_at, std::uint64_t session, std::uint32_t random,
                        LeaseOwner owner = {}) noexcept;

    // Who holds lease `id` at `now`; nullopt when it is not held.
    std::optional<LeaseOwner> owner_of(int partition, std::uint64_t id, Micros now) const noexcept;
    // Ends lease `id`; false when it is not held (released, past its hold time, never taken).
    bool release(int partition, std::uint64_t id, Micros now) noexcept;
    // Ends lease `id` only if `session` holds it: what a transaction's end releases, so that an
    // identifier released elsewhere and its slot taken again can never end another's lease.
    void release_own(int partition, std::uint64_t id, std::uint64_t session) noexcept;

    // The units `key` holds in live leases at `now`, and the wait until the first of them with
    // a maximum hold time ends.
    std::int64_t in_flight(int partition, const KeyHash& key, Micros now,
                           std::optional<Micros>* next_expiry = nullptr) const noexcept;

    // Ends every lease of `session` in the partition; returns how many.
    std::int64_t release_session(int partition, std::uint64_t session) noexcept;

    // Live leases and units held in the partition at `now`.
    std::int64_t live_leases(int partition, Micros now) const noexcept;

  private:
    struct Header;
    explicit LeaseTable(void* block) noexcept;
    LeaseSlot* partition_slots(int partition) const noexcept;
    std::int64_t slots_per_partition() const noexcept;

    Header* header_ = nullptr;
    LeaseSlot* slots_ = nullptr;
};

// A slot's lease counts while it is taken and not past its maximum hold time.
inline bool lease_live(const LeaseSlot& slot, Micros now) noexcept {
    return slot.id != 0 && (slot.expires_at == 0 || now < slot.expires_at);
}

}  // namespace ratelimit
