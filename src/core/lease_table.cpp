#include "ratelimit/lease_table.hpp"

#include <algorithm>
#include <new>

namespace ratelimit {

struct LeaseTable::Header {
    std::int64_t capacity;
    std::int64_t slots_per_partition;
};

namespace {

constexpr std::size_t kHeaderBytes = 64;  // the slots start on their own cache line
static_assert(sizeof(LeaseSlot) == 64, "a lease slot is eight words");

std::int64_t per_partition(std::int64_t capacity) noexcept {
    const std::int64_t clamped = std::clamp(capacity, kMinLeaseCapacity, kMaxLeaseCapacity);
    return (clamped + kLeasePartitions - 1) / kLeasePartitions;
}

// Identifier: 31 random bits (never all zero, so no identifier is 0), the partition in 16
// bits, the slot in 16 bits.
std::uint64_t make_id(int partition, std::int64_t slot, std::uint32_t random) noexcept {
    // 31 bits: identifiers stay positive as a bigint.
    const std::uint64_t high = (random & 0x7fffffffU) == 0 ? 1 : (random & 0x7fffffffU);
    return (high << 32) | (static_cast<std::uint64_t>(partition) << 16) |
           static_cast<std::uint64_t>(slot);
}

}  // namespace

std::size_t LeaseTable::bytes_needed(std::int64_t capacity) noexcept {
    return kHeaderBytes +
           sizeof(LeaseSlot) * static_cast<std::size_t>(per_partition(capacity)) * kLeasePartitions;
}

LeaseTable::LeaseTable(void* block) noexcept
    : header_(static_cast<Header*>(block)),
      slots_(reinterpret_cast<LeaseSlot*>(static_cast<char*>(block) + kHeaderBytes)) {}

LeaseTable LeaseTable::create(void* block, std::int64_t capacity) noexcept {
    Header* header = new (block) Header{};
    header->slots_per_partition = per_partition(capacity);
    header->capacity = header->slots_per_partition * kLeasePartitions;
    LeaseTable table(block);
    for (std::int64_t i = 0; i < header->capacity; ++i)
        new (&table.slots_[i]) LeaseSlot{};
    return table;
}

LeaseTable LeaseTable::attach(void* block) noexcept {
    return LeaseTable(block);
}

std::int64_t LeaseTable::capacity() const noexcept {
    return header_->capacity;
}

std::int64_t LeaseTable::slots_per_partition() const noexcept {
    return header_->slots_per_partition;
}

LeaseSlot* LeaseTable::partition_slots(int partition) const noexcept {
    return slots_ + static_cast<std::int64_t>(partition) * header_->slots_per_partition;
}

int LeaseTable::partition_of(const KeyHash& key) noexcept {
    return static_cast<int>(key.low % kLeasePartitions);
}

int LeaseTable::partition_of_lease(std::uint64_t id) const noexcept {
    const auto partition = static_cast<std::int64_t>((id >> 16) & 0xffff);
    const auto slot = static_cast<std::int64_t>(id & 0xffff);
    if ((id >> 32) == 0 || partition >= kLeasePartitions || slot >= header_->slots_per_partition)
        return -1;
    return static_cast<int>(partition);
}

LeaseAnswer LeaseTable::acquire(int partition, const KeyHash& key, std::int64_t limit,
                                std::int64_t units, Micros now, Micros expires_at,
                                std::uint64_t session, std::uint32_t random,
                                LeaseOwner owner) noexcept {
    LeaseAnswer answer;
    std::optional<Micros> next_expiry;
    const std::int64_t held = in_flight(partition, key, now, &next_expiry);
    answer.in_flight = held;
    if (units > limit - held) {
        answer.retry_after = next_expiry;
        return answer;
    }
    LeaseSlot* slots = partition_slots(partition);
    for (std::int64_t i = 0; i < header_->slots_per_partition; ++i) {
        LeaseSlot& slot = slots[i];
        if (lease_live(slot, now))
            continue;
        slot.key = key;
        slot.id = make_id(partition, i, random);
        slot.session = session;
        slot.owner = owner;
        slot.acquired_at = now;
        slot.expires_at = expires_at;
        slot.units = units;
        answer.allowed = true;
        answer.id = slot.id;
        answer.in_flight = held + units;
        return answer;
    }
    answer.table_full = true;
    return answer;
}

std::optional<LeaseOwner> LeaseTable::owner_of(int partition, std::uint64_t id,
                                               Micros now) const noexcept {
    if (partition_of_lease(id) != partition)
        return std::nullopt;
    const LeaseSlot& slot = partition_slots(partition)[id & 0xffff];
    if (slot.id != id || !lease_live(slot, now))
        return std::nullopt;
    return slot.owner;
}

bool LeaseTable::release(int partition, std::uint64_t id, Micros now) noexcept {
    if (partition_of_lease(id) != partition)
        return false;
    LeaseSlot& slot = partition_slots(partition)[id & 0xffff];
    if (slot.id != id)
        return false;
    const bool live = lease_live(slot, now);
    slot = LeaseSlot{};
    return live;
}

void LeaseTable::release_own(int partition, std::uint64_t id, std::uint64_t session) noexcept {
    if (partition_of_lease(id) != partition)
        return;
    LeaseSlot& slot = partition_slots(partition)[id & 0xffff];
    if (slot.id == id && slot.session == session)
        slot = LeaseSlot{};
}

std::int64_t LeaseTable::in_flight(int partition, const KeyHash& key, Micros now,
                                   std::optional<Micros>* next_expiry) const noexcept {
    const LeaseSlot* slots = partition_slots(partition);
    std::int64_t units = 0;
    std::optional<Micros> first_end;
    for (std::int64_t i = 0; i < header_->slots_per_partition; ++i) {
        const LeaseSlot& slot = slots[i];
        if (!lease_live(slot, now) || slot.key != key)
            continue;
        units += slot.units;
        if (slot.expires_at != 0 && (!first_end || slot.expires_at < *first_end))
            first_end = slot.expires_at;
    }
    if (next_expiry != nullptr)
        *next_expiry = first_end ? std::optional<Micros>(*first_end - now) : std::nullopt;
    return units;
}

std::int64_t LeaseTable::release_session(int partition, std::uint64_t session) noexcept {
    LeaseSlot* slots = partition_slots(partition);
    std::int64_t released = 0;
    for (std::int64_t i = 0; i < header_->slots_per_partition; ++i) {
        if (slots[i].id != 0 && slots[i].session == session) {
            slots[i] = LeaseSlot{};
            ++released;
        }
    }
    return released;
}

std::int64_t LeaseTable::live_leases(int partition, Micros now) const noexcept {
    const LeaseSlot* slots = partition_slots(partition);
    std::int64_t live = 0;
    for (std::int64_t i = 0; i < header_->slots_per_partition; ++i)
        live += lease_live(slots[i], now) ? 1 : 0;
    return live;
}

}  // namespace ratelimit
