#include "ratelimit/memory_store.hpp"

#include <algorithm>
#include <cstring>
#include <new>
#include <stdexcept>
#include <string>

#include "ratelimit/error.hpp"

namespace ratelimit {

struct MemoryStore::Header {
    std::int64_t capacity;
    HashSecret secret;
};

struct MemoryStore::PartitionHeader {
    std::uint32_t first;  // the partition's slots and buckets are [first, first + count)
    std::uint32_t count;
    std::uint32_t used;
    std::uint32_t newest;  // LRU list ends
    std::uint32_t oldest;
    std::uint32_t free_head;
    // No slot of the partition expires before this: a full partition scans for expired slots
    // only from then on. Lowered whenever a slot gets an earlier expiry.
    Micros next_expiry;
    std::int64_t evictions;
    std::int64_t expired;
    std::int64_t allowed;
    std::int64_t denied;
};

namespace {

constexpr Micros kNever = INT64_MAX;

std::size_t align8(std::size_t bytes) noexcept {
    return (bytes + 7) & ~static_cast<std::size_t>(7);
}

}  // namespace

std::size_t MemoryStore::bytes_needed(std::int64_t capacity) noexcept {
    const auto slots = static_cast<std::size_t>(capacity);
    return align8(sizeof(Header)) + align8(sizeof(PartitionHeader) * kMemoryPartitions) +
           sizeof(MemorySlot) * slots + align8(sizeof(std::uint32_t) * slots);
}

MemoryStore::MemoryStore(void* block) noexcept {
    auto* bytes = static_cast<unsigned char*>(block);
    header_ = reinterpret_cast<Header*>(bytes);
    bytes += align8(sizeof(Header));
    partitions_ = reinterpret_cast<PartitionHeader*>(bytes);
    bytes += align8(sizeof(PartitionHeader) * kMemoryPartitions);
    slots_ = reinterpret_cast<MemorySlot*>(bytes);
    bytes += sizeof(MemorySlot) * static_cast<std::size_t>(header_->capacity);
    buckets_ = reinterpret_cast<std::uint32_t*>(bytes);
}

MemoryStore MemoryStore::create(void* block, std::int64_t capacity,
                                const HashSecret& secret) noexcept {
    auto* header = new (block) Header{capacity, secret};
    MemoryStore store(header);
    // Partition p gets capacity / P slots, and one more for the first capacity % P partitions.
    const std::int64_t base = capacity / kMemoryPartitions;
    const std::int64_t extra = capacity % kMemoryPartitions;
    std::uint32_t first = 0;
    for (int p = 0; p < kMemoryPartitions; ++p) {
        const auto count = static_cast<std::uint32_t>(base + (p < extra ? 1 : 0));
        PartitionHeader& part = store.partitions_[p];
        part = PartitionHeader{first, count, 0, kNoSlot, kNoSlot, first, kNever, 0, 0, 0, 0};
        for (std::uint32_t i = first; i < first + count; ++i) {
            MemorySlot& slot = store.slots_[i];
            std::memset(static_cast<void*>(&slot), 0, sizeof(MemorySlot));
            slot.newer = slot.older = kNoSlot;
            slot.chain_next = i + 1 < first + count ? i + 1 : kNoSlot;
            store.buckets_[i] = kNoSlot;
        }
        first += count;
    }
    return store;
}

MemoryStore MemoryStore::attach(void* block) noexcept {
    return MemoryStore(block);
}

const HashSecret& MemoryStore::secret() const noexcept {
    return header_->secret;
}

std::int64_t MemoryStore::capacity() const noexcept {
    return header_->capacity;
}

int MemoryStore::partition_of(const KeyHash& key) noexcept {
    // The hash is a PRF of the key, so any of its bits spread keys evenly; the bucket uses
    // `low`, the partition `high`, so the two choices are independent.
    return static_cast<int>(key.high % kMemoryPartitions);
}

MemoryStore::PartitionHeader& MemoryStore::partition_header(int partition) noexcept {
    return partitions_[partition];
}

const MemoryStore::PartitionHeader& MemoryStore::partition_header(int partition) const noexcept {
    return partitions_[partition];
}

std::uint32_t& MemoryStore::bucket_of(const PartitionHeader& header, const KeyHash& key) noexcept {
    return buckets_[header.first + key.low % header.count];
}

std::uint32_t MemoryStore::oldest_index(int partition) const noexcept {
    return partitions_[partition].oldest;
}

std::uint32_t MemoryStore::index_of(const MemorySlot& slot) const noexcept {
    return static_cast<std::uint32_t>(&slot - slots_);
}

MemorySlot* MemoryStore::find(int partition, const KeyHash& key) noexcept {
    for (std::uint32_t i = bucket_of(partitions_[partition], key); i != kNoSlot;
         i = slots_[i].chain_next) {
        if (slots_[i].key == key)
            return &slots_[i];
    }
    return nullptr;
}

void MemoryStore::unlink_lru(PartitionHeader& header, std::uint32_t index) noexcept {
    MemorySlot& slot = slots_[index];
    if (slot.newer != kNoSlot)
        slots_[slot.newer].older = slot.older;
    else
        header.newest = slot.older;
    if (slot.older != kNoSlot)
        slots_[slot.older].newer = slot.newer;
    else
        header.oldest = slot.newer;
    slot.newer = slot.older = kNoSlot;
}

void MemoryStore::push_newest(PartitionHeader& header, std::uint32_t index) noexcept {
    MemorySlot& slot = slots_[index];
    slot.newer = kNoSlot;
    slot.older = header.newest;
    if (header.newest != kNoSlot)
        slots_[header.newest].newer = index;
    header.newest = index;
    if (header.oldest == kNoSlot)
        header.oldest = index;
}

void MemoryStore::touch(PartitionHeader& header, std::uint32_t index) noexcept {
    if (header.newest == index)
        return;
    unlink_lru(header, index);
    push_newest(header, index);
}

void MemoryStore::free_slot(PartitionHeader& header, std::uint32_t index) noexcept {
    MemorySlot& slot = slots_[index];
    // Unchain from its bucket: chains are short (at most a few slots at full load).
    std::uint32_t* link = &bucket_of(header, slot.key);
    while (*link != index)
        link = &slots_[*link].chain_next;
    *link = slot.chain_next;
    unlink_lru(header, index);
    slot.in_use = 0;
    slot.chain_next = header.free_head;
    header.free_head = index;
    --header.used;
}

void MemoryStore::note_expiry(PartitionHeader& header, Micros expires_at) noexcept {
    header.next_expiry = std::min(header.next_expiry, expires_at);
}

void MemoryStore::make_room(PartitionHeader& header, Micros now) noexcept {
    free_expired(header, now);
    if (header.free_head == kNoSlot) {
        free_slot(header, header.oldest);
        ++header.evictions;
    }
}

void MemoryStore::free_expired(PartitionHeader& header, Micros now) noexcept {
    if (now < header.next_expiry)
        return;
    // Free every expired slot at once, and learn the earliest expiry of the rest, so the scan
    // runs again only when some slot can have expired.
    Micros next = kNever;
    for (std::uint32_t i = header.first; i < header.first + header.count; ++i) {
        if (!slots_[i].in_use)
            continue;
        if (slots_[i].expires_at <= now) {
            free_slot(header, i);
            ++header.expired;
        } else {
            next = std::min(next, slots_[i].expires_at);
        }
    }
    header.next_expiry = next;
}

MemorySlot& MemoryStore::insert(int partition, const KeyHash& key, Micros now) noexcept {
    PartitionHeader& header = partitions_[partition];
    if (header.free_head == kNoSlot)
        make_room(header, now);
    const std::uint32_t index = header.free_head;
    MemorySlot& slot = slots_[index];
    header.free_head = slot.chain_next;
    ++header.used;
    std::memset(static_cast<void*>(&slot), 0, sizeof(MemorySlot));
    slot.key = key;
    slot.in_use = 1;
    std::uint32_t& bucket = bucket_of(header, key);
    slot.chain_next = bucket;
    bucket = index;
    push_newest(header, index);
    return slot;
}

void load_slot_state(const MemorySlot& slot, KeyState& state) {
    state.algorithm = static_cast<Algorithm>(slot.algorithm);
    state.blocked_until = slot.blocked_until;
    state.log.clear();
    if (state.algorithm == Algorithm::kSlidingWindow) {
        state.instant = slot.state.log.instant;
        state.amount = state.carry = 0;
        state.measured_limit = state.measured_period = 0;
        for (int i = 0; i < slot.log_count; ++i)
            state.log.push_back(LogEntry{slot.state.log.at[i], slot.state.log.units[i]});
    } else {
        state.instant = slot.state.counter.instant;
        state.amount = slot.state.counter.amount;
        state.carry = slot.state.counter.carry;
        state.measured_limit = slot.state.counter.measured_limit;
        state.measured_period = slot.state.counter.measured_period;
    }
}

void store_slot_state(const KeyState& state, Micros expires_at, MemorySlot& slot) noexcept {
    slot.algorithm = static_cast<std::int16_t>(state.algorithm);
    slot.blocked_until = state.blocked_until;
    slot.expires_at = expires_at;
    std::memset(static_cast<void*>(&slot.state), 0, sizeof(SlotState));
    if (state.algorithm == Algorithm::kSlidingWindow) {
        slot.log_count = static_cast<std::uint8_t>(state.log.size());
        slot.state.log.instant = state.instant;
        for (std::size_t i = 0; i < state.log.size(); ++i) {
            slot.state.log.at[i] = state.log[i].at;
            slot.state.log.units[i] = static_cast<std::int16_t>(state.log[i].units);
        }
    } else {
        slot.log_count = 0;
        slot.state.counter.instant = state.instant;
        slot.state.counter.amount = state.amount;
        slot.state.counter.carry = state.carry;
        slot.state.counter.measured_limit = state.measured_limit;
        slot.state.counter.measured_period = state.measured_period;
    }
}

void require_memory_limit(const Limit& limit) {
    if (limit.algorithm == Algorithm::kSlidingWindow && limit.limit > kMemoryLogCapacity) {
        throw ArgumentError::invalid(
            "p_limit", "must be at most " + std::to_string(kMemoryLogCapacity) +
                           " for sliding_window on the memory engine, which keeps the log "
                           "inside a fixed-size slot; use sliding_window_counter or a table "
                           "engine for larger limits");
    }
}

Decision MemoryStore::decide(int partition, const KeyHash& key, const Limit& limit, Micros now,
                             std::int64_t cost, Action action, KeyState& scratch) {
    PartitionHeader& header = partitions_[partition];
    MemorySlot* slot = find(partition, key);
    if (slot != nullptr) {
        load_slot_state(*slot, scratch);
    } else {
        scratch.algorithm = Algorithm::kNone;
        scratch.instant = scratch.amount = scratch.carry = scratch.blocked_until = 0;
        scratch.measured_limit = scratch.measured_period = 0;
        scratch.log.clear();
    }
    const Decision decision = ratelimit::decide(limit, scratch, now, cost, action);
    if (decision.state_changed) {
        if (scratch.log.size() > static_cast<std::size_t>(kMemoryLogCapacity))
            throw std::length_error("ratelimit: a sliding_window log outgrew its memory slot");
        if (slot == nullptr)
            slot = &insert(partition, key, now);
        const Micros expires_at = idle_from(limit, scratch);
        store_slot_state(scratch, expires_at, *slot);
        note_expiry(header, expires_at);
    }
    if (slot != nullptr)
        touch(header, index_of(*slot));
    if (action == Action::kConsume)
        ++(decision.allowed ? header.allowed : header.denied);
    return decision;
}

Micros MemoryStore::block(int partition, const KeyHash& key, Micros until, Micros now,
                          KeyState& scratch) {
    PartitionHeader& header = partitions_[partition];
    MemorySlot* slot = find(partition, key);
    if (slot == nullptr)
        slot = &insert(partition, key, now);
    load_slot_state(*slot, scratch);
    block_until(scratch, until);
    const Micros expires_at = std::max(slot->expires_at, scratch.blocked_until);
    store_slot_state(scratch, expires_at, *slot);
    note_expiry(header, expires_at);
    touch(header, index_of(*slot));
    return scratch.blocked_until;
}

bool MemoryStore::reset(int partition, const KeyHash& key) noexcept {
    MemorySlot* slot = find(partition, key);
    if (slot == nullptr)
        return false;
    free_slot(partitions_[partition], index_of(*slot));
    return true;
}

std::int64_t MemoryStore::expire(int partition, Micros now) noexcept {
    PartitionHeader& header = partitions_[partition];
    const std::int64_t before = header.expired;
    free_expired(header, now);
    return header.expired - before;
}

MemoryStats MemoryStore::stats(int partition) const noexcept {
    const PartitionHeader& header = partitions_[partition];
    MemoryStats stats;
    stats.entries = header.used;
    stats.capacity = header.count;
    stats.evictions = header.evictions;
    stats.expired = header.expired;
    stats.allowed = header.allowed;
    stats.denied = header.denied;
    return stats;
}

SavedSlot MemoryStore::saved_form(const MemorySlot& slot) noexcept {
    SavedSlot saved;
    saved.key = slot.key;
    saved.algorithm = slot.algorithm;
    saved.log_count = slot.log_count;
    saved.blocked_until = slot.blocked_until;
    saved.expires_at = slot.expires_at;
    saved.state = slot.state;
    return saved;
}

bool MemoryStore::plausible(const SavedSlot& saved) noexcept {
    if (saved.algorithm < static_cast<std::int16_t>(Algorithm::kNone) ||
        saved.algorithm > static_cast<std::int16_t>(Algorithm::kGcra))
        return false;
    if (saved.blocked_until < 0 || saved.blocked_until > kMaxInstant + kMaxWindow ||
        saved.expires_at < 0)
        return false;
    const bool sliding = saved.algorithm == static_cast<std::int16_t>(Algorithm::kSlidingWindow);
    if (saved.log_count > (sliding ? kMemoryLogCapacity : 0))
        return false;
    if (!sliding) {
        // What a bucket was measured in: nothing (0), or a limit and period in their ranges.
        const std::int64_t measured_limit = saved.state.counter.measured_limit;
        const Micros measured_period = saved.state.counter.measured_period;
        if (measured_limit < 0 || measured_limit > INT32_MAX ||
            (measured_period != 0 &&
             (measured_period < kMinPeriod || measured_period > kMaxWindow)))
            return false;
    }
    if (sliding) {
        // The log is oldest first, one entry per distinct instant, each with some units.
        for (int i = 0; i < saved.log_count; ++i) {
            if (saved.state.log.units[i] <= 0 || saved.state.log.units[i] > kMemoryLogCapacity ||
                (i > 0 && saved.state.log.at[i] <= saved.state.log.at[i - 1]))
                return false;
        }
    }
    return true;
}

bool MemoryStore::restore(const SavedSlot& saved, Micros now) {
    if (!plausible(saved) || saved.expires_at <= now)
        return false;
    const int partition = partition_of(saved.key);
    PartitionHeader& header = partitions_[partition];
    MemorySlot* slot = find(partition, saved.key);
    if (slot == nullptr)
        slot = &insert(partition, saved.key, now);
    else
        touch(header, index_of(*slot));
    slot->algorithm = saved.algorithm;
    slot->log_count = saved.log_count;
    slot->blocked_until = saved.blocked_until;
    slot->expires_at = saved.expires_at;
    slot->state = saved.state;
    note_expiry(header, saved.expires_at);
    return true;
}

}  // namespace ratelimit
