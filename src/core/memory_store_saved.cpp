// The store's saved form (ratelimit/memory_store.hpp): each key as the server's file holds it
// (SavedSlot), listed least recently used first, checked when read back, and restored; the rest
// of the store is memory_store.cpp.
#include "ratelimit/memory_store.hpp"

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstring>
#include <vector>

namespace ratelimit {

std::uint32_t MemoryStore::partition_slots() const noexcept {
    // Partition 0 is never smaller than another (see create()).
    return partitions_[0].count;
}

std::uint32_t MemoryStore::slots_of(int partition) const noexcept {
    return partitions_[partition].count;
}

bool MemoryStore::saved_slot(int partition, std::uint32_t n, SavedSlot& saved) const noexcept {
    const MemorySlot& slot = slots_[partitions_[partition].first + n];
    if (slot.database == 0)
        return false;
    saved_form(slot, saved);
    return true;
}

std::uint32_t MemoryStore::slots_oldest_first(int partition, std::uint32_t* order) const noexcept {
    const PartitionHeader& header = partitions_[partition];
    std::uint32_t held = 0;
    for (std::uint32_t i = header.first; i < header.first + header.count; ++i) {
        if (slots_[i].database != 0)
            order[held++] = i;
    }
    std::sort(order, order + held, [&](std::uint32_t a, std::uint32_t b) {
        return slots_[a].last_use < slots_[b].last_use;
    });
    return held;
}

void load_saved_state(const SavedSlot& saved, KeyState& state) {
    state.algorithm = static_cast<Algorithm>(saved.algorithm);
    state.blocked_until = saved.blocked_until;
    state.instant = saved.instant;
    state.amount = saved.amount;
    state.carry = saved.carry;
    state.measured_limit = saved.measured_limit;
    state.measured_period = saved.measured_period;
    state.log.assign(saved.log, saved.log + saved.log_count);
}

bool MemoryStore::saved(int partition, const KeyHash& key, SavedSlot& saved) const noexcept {
    const MemorySlot* slot = find(partition, key);
    if (slot != nullptr)
        saved_form(*slot, saved);
    return slot != nullptr;
}

void MemoryStore::saved_form(const MemorySlot& slot, SavedSlot& saved) const noexcept {
    saved.key = slot.key;
    saved.database = databases_[slot.database - 1].oid.load(std::memory_order_relaxed);
    saved.algorithm = slot.algorithm;
    saved.blocked_until = slot.blocked_until;
    saved.expires_at = slot.expires_at;
    saved.instant = saved.amount = saved.carry = 0;
    saved.measured_limit = saved.measured_period = 0;
    if (slot.algorithm == static_cast<std::int8_t>(Algorithm::kSlidingWindow)) {
        saved.log_count = slot.log_count;
        saved.instant = slot.state.log.instant;
        if (has_log_block(slot)) {
            std::memcpy(static_cast<void*>(saved.log), block_entries(slot.state.log.block),
                        slot.log_count * sizeof(LogEntry));
        } else {
            for (int i = 0; i < slot.log_count; ++i)
                saved.log[i] = LogEntry{slot.state.log.at[i], slot.state.log.units[i]};
        }
    } else {
        saved.log_count = 0;
        saved.instant = slot.state.counter.instant;
        saved.amount = slot.state.counter.amount;
        saved.carry = slot.state.counter.carry;
        saved.measured_limit = slot.state.counter.measured_limit;
        saved.measured_period = slot.state.counter.measured_period;
    }
}

bool MemoryStore::plausible(const SavedSlot& saved) noexcept {
    if (saved.algorithm < static_cast<std::int16_t>(Algorithm::kNone) ||
        saved.algorithm > static_cast<std::int16_t>(Algorithm::kGcra))
        return false;
    if (saved.blocked_until < 0 || saved.blocked_until > kMaxInstant + kMaxWindow ||
        saved.expires_at < 0)
        return false;
    const bool sliding = saved.algorithm == static_cast<std::int16_t>(Algorithm::kSlidingWindow);
    if (saved.log_count > (sliding ? kMaxSlidingLog : 0))
        return false;
    if (!sliding) {
        // What a bucket was measured in: nothing (0), or a limit and period in their ranges.
        if (saved.measured_limit < 0 || saved.measured_limit > INT32_MAX ||
            (saved.measured_period != 0 &&
             (saved.measured_period < kMinPeriod || saved.measured_period > kMaxWindow)))
            return false;
    } else {
        // The log is oldest first, one entry per distinct instant, each with some units, no
        // more than a limit can hold.
        for (int i = 0; i < saved.log_count; ++i) {
            if (saved.log[i].units <= 0 || saved.log[i].units > INT32_MAX ||
                (i > 0 && saved.log[i].at <= saved.log[i - 1].at))
                return false;
        }
    }
    return true;
}

bool MemoryStore::restore(const SavedSlot& saved, Micros now) {
    room_ = RoomReport{};
    if (!plausible(saved) || saved.expires_at <= now)
        return false;
    const int partition = partition_of(saved.key);
    PartitionHeader& header = partitions_[partition];
    // The saved keys are the store as it was: they are not held to a share, and a smaller
    // store keeps the most recently used of them.
    Tenant tenant;
    tenant.database = database_index(saved.database);
    tenant.evict = true;
    MemorySlot* slot = find(partition, saved.key);
    const bool fresh = slot == nullptr;
    if (fresh)
        slot = insert(header, saved.key, now, tenant, true);
    if (slot == nullptr)
        return false;
    touch(header, index_of(*slot));
    std::uint32_t new_block = kNoSlot;
    if (saved.log_count > kMemoryLogCapacity && !has_log_block(*slot)) {
        if (header.log_used == header.log_count &&
            !make_room(header, now, tenant, Need{0, 1}, &saved.key, 1, true)) {
            if (fresh)
                free_slot(header, index_of(*slot));
            return false;
        }
        new_block = take_block(header);
    }
    const Words words{static_cast<Algorithm>(saved.algorithm),
                      saved.blocked_until,
                      saved.expires_at,
                      saved.instant,
                      saved.amount,
                      saved.carry,
                      saved.measured_limit,
                      saved.measured_period};
    write_slot(header, words, saved.log, saved.log_count, new_block, *slot);
    note_expiry(header, saved.expires_at);
    return true;
}

}  // namespace ratelimit
