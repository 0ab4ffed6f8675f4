#include "ratelimit/reservation_table.hpp"

#include <algorithm>
#include <new>

namespace ratelimit {

struct ReservationTable::Header {
    std::int64_t capacity;
    std::int64_t slots_per_partition;
};

namespace {

constexpr std::size_t kHeaderBytes = 64;  // the slots start on their own cache line

std::int64_t per_partition(std::int64_t capacity) noexcept {
    const std::int64_t clamped =
        std::clamp(capacity, kMinReservationCapacity, kMaxReservationCapacity);
    return (clamped + kReservationPartitions - 1) / kReservationPartitions;
}

// Identifier: 31 random bits (never all zero, so no identifier is 0, and positive as a bigint),
// the partition in 16 bits, the slot in 16 bits.
std::uint64_t make_id(int partition, std::int64_t slot, std::uint32_t random) noexcept {
    const std::uint64_t high = (random & 0x7fffffffU) == 0 ? 1 : (random & 0x7fffffffU);
    return (high << 32) | (static_cast<std::uint64_t>(partition) << 16) |
           static_cast<std::uint64_t>(slot);
}

}  // namespace

std::size_t ReservationTable::bytes_needed(std::int64_t capacity) noexcept {
    return kHeaderBytes + sizeof(ReservationSlot) *
                              static_cast<std::size_t>(per_partition(capacity)) *
                              kReservationPartitions;
}

ReservationTable::ReservationTable(void* block) noexcept
    : header_(static_cast<Header*>(block)),
      slots_(reinterpret_cast<ReservationSlot*>(static_cast<char*>(block) + kHeaderBytes)) {}

ReservationTable ReservationTable::create(void* block, std::int64_t capacity) noexcept {
    Header* header = new (block) Header{};
    header->slots_per_partition = per_partition(capacity);
    header->capacity = header->slots_per_partition * kReservationPartitions;
    ReservationTable table(block);
    for (std::int64_t i = 0; i < header->capacity; ++i)
        new (&table.slots_[i]) ReservationSlot{};
    return table;
}

ReservationTable ReservationTable::attach(void* block) noexcept {
    return ReservationTable(block);
}

std::int64_t ReservationTable::capacity() const noexcept {
    return header_->capacity;
}

ReservationSlot* ReservationTable::partition_slots(int partition) const noexcept {
    return slots_ + static_cast<std::int64_t>(partition) * header_->slots_per_partition;
}

int ReservationTable::partition_of(std::uint64_t id) const noexcept {
    const auto partition = static_cast<std::int64_t>((id >> 16) & 0xffff);
    const auto slot = static_cast<std::int64_t>(id & 0xffff);
    if ((id >> 32) == 0 || (id >> 63) != 0 || partition >= kReservationPartitions ||
        slot >= header_->slots_per_partition)
        return -1;
    return static_cast<int>(partition);
}

ReservationSlot* ReservationTable::slot_of(int partition, std::uint64_t id) const noexcept {
    if (partition_of(id) != partition)
        return nullptr;
    ReservationSlot& slot = partition_slots(partition)[id & 0xffff];
    return slot.id == id ? &slot : nullptr;
}

std::uint64_t ReservationTable::take(int partition, Micros now, std::uint64_t session,
                                     std::uint32_t random) noexcept {
    ReservationSlot* slots = partition_slots(partition);
    for (std::int64_t i = 0; i < header_->slots_per_partition; ++i) {
        ReservationSlot& slot = slots[i];
        if (reservation_live(slot, now))
            continue;
        slot = ReservationSlot{};
        slot.id = make_id(partition, i, random);
        slot.session = session;
        slot.state = ReservationState::kPending;
        return slot.id;
    }
    return 0;
}

bool ReservationTable::fill(int partition, std::uint64_t id, std::uint64_t session,
                            const Reservation& reservation) noexcept {
    ReservationSlot* slot = slot_of(partition, id);
    if (slot == nullptr || slot->state != ReservationState::kPending || slot->session != session)
        return false;
    slot->reservation = reservation;
    return true;
}

bool ReservationTable::claim(int partition, std::uint64_t id, std::uint32_t database,
                             std::uint32_t role, Micros now, std::uint64_t session,
                             Reservation* reservation, ReservationState* previous) noexcept {
    ReservationSlot* slot = slot_of(partition, id);
    if (slot == nullptr)
        return false;
    const Reservation& made = slot->reservation;
    const bool settleable =
        (slot->state == ReservationState::kOpen ||
         (slot->state == ReservationState::kPending && slot->session == session)) &&
        now < made.expires_at && made.database == database && made.role == role;
    if (!settleable)
        return false;
    *reservation = made;
    *previous = slot->state;
    slot->state = ReservationState::kSettling;
    slot->session = session;
    return true;
}

void ReservationTable::commit(int partition, std::uint64_t id, std::uint64_t session) noexcept {
    ReservationSlot* slot = slot_of(partition, id);
    if (slot == nullptr || slot->session != session)
        return;
    if (slot->state == ReservationState::kPending) {
        slot->state = ReservationState::kOpen;
        slot->session = 0;
    } else if (slot->state == ReservationState::kSettling) {
        *slot = ReservationSlot{};
    }
}

void ReservationTable::roll_back(int partition, std::uint64_t id, std::uint64_t session,
                                 ReservationState previous) noexcept {
    ReservationSlot* slot = slot_of(partition, id);
    if (slot == nullptr || slot->session != session ||
        (slot->state != ReservationState::kPending && slot->state != ReservationState::kSettling))
        return;
    if (previous == ReservationState::kFree) {
        *slot = ReservationSlot{};
        return;
    }
    slot->state = previous;
    if (previous == ReservationState::kOpen)
        slot->session = 0;
}

std::int64_t ReservationTable::live(int partition, Micros now) const noexcept {
    const ReservationSlot* slots = partition_slots(partition);
    std::int64_t count = 0;
    for (std::int64_t i = 0; i < header_->slots_per_partition; ++i)
        count += reservation_live(slots[i], now) ? 1 : 0;
    return count;
}

}  // namespace ratelimit
