#include "ratelimit/memory_store.hpp"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <new>
#include <stdexcept>
#include <utility>

namespace ratelimit {

namespace {

constexpr Micros kNever = INT64_MAX;

std::size_t align8(std::size_t bytes) noexcept {
    return (bytes + 7) & ~static_cast<std::size_t>(7);
}

bool kept(const KeyHash& key, const KeyHash* keep, int keep_count) noexcept {
    for (int i = 0; i < keep_count; ++i) {
        if (keep[i] == key)
            return true;
    }
    return false;
}

}  // namespace

std::int64_t default_memory_log_blocks(std::int64_t capacity) noexcept {
    return std::max<std::int64_t>(capacity / 32, 8 * kMemoryPartitions);
}

std::size_t MemoryStore::bytes_needed(std::int64_t capacity, std::int64_t log_blocks) noexcept {
    const auto slots = static_cast<std::size_t>(capacity);
    return align8(sizeof(Header)) + align8(sizeof(DatabaseRow) * kMaxMemoryDatabases) +
           align8(sizeof(PartitionHeader) * kMemoryPartitions) + sizeof(MemorySlot) * slots +
           align8(sizeof(std::uint32_t) * slots) +
           static_cast<std::size_t>(log_blocks) * kMaxSlidingLog * sizeof(LogEntry);
}

MemoryStore::MemoryStore(void* block) noexcept {
    auto* bytes = static_cast<unsigned char*>(block);
    header_ = reinterpret_cast<Header*>(bytes);
    bytes += align8(sizeof(Header));
    databases_ = reinterpret_cast<DatabaseRow*>(bytes);
    bytes += align8(sizeof(DatabaseRow) * kMaxMemoryDatabases);
    partitions_ = reinterpret_cast<PartitionHeader*>(bytes);
    bytes += align8(sizeof(PartitionHeader) * kMemoryPartitions);
    slots_ = reinterpret_cast<MemorySlot*>(bytes);
    bytes += sizeof(MemorySlot) * static_cast<std::size_t>(header_->capacity);
    buckets_ = reinterpret_cast<std::uint32_t*>(bytes);
    bytes += align8(sizeof(std::uint32_t) * static_cast<std::size_t>(header_->capacity));
    logs_ = reinterpret_cast<LogEntry*>(bytes);
}

MemoryStore MemoryStore::create(void* block, std::int64_t capacity, std::int64_t log_blocks,
                                const HashSecret& secret) noexcept {
    auto* header = new (block) Header{capacity, log_blocks, secret};
    MemoryStore store(header);
    for (int d = 0; d < kMaxMemoryDatabases; ++d) {
        DatabaseRow* row = new (&store.databases_[d]) DatabaseRow;
        row->oid.store(0);
        row->entries.store(0);
        row->refusals.store(0);
        row->evictions.store(0);
    }
    // Partition p gets capacity / P slots, and one more for the first capacity % P partitions;
    // the same for the log blocks.
    const std::int64_t base = capacity / kMemoryPartitions;
    const std::int64_t extra = capacity % kMemoryPartitions;
    const std::int64_t log_base = log_blocks / kMemoryPartitions;
    const std::int64_t log_extra = log_blocks % kMemoryPartitions;
    std::uint32_t first = 0;
    std::uint32_t log_first = 0;
    for (int p = 0; p < kMemoryPartitions; ++p) {
        const auto count = static_cast<std::uint32_t>(base + (p < extra ? 1 : 0));
        const auto log_count = static_cast<std::uint32_t>(log_base + (p < log_extra ? 1 : 0));
        PartitionHeader& part = store.partitions_[p];
        part = PartitionHeader{};
        part.first = first;
        part.count = count;
        part.free_head = first;
        part.log_first = log_first;
        part.log_count = log_count;
        part.log_free = kNoSlot;
        part.next_expiry = kNever;
        for (std::uint32_t i = first; i < first + count; ++i) {
            MemorySlot& slot = store.slots_[i];
            std::memset(static_cast<void*>(&slot), 0, sizeof(MemorySlot));
            slot.chain_next = i + 1 < first + count ? i + 1 : kNoSlot;
            store.buckets_[i] = kNoSlot;
        }
        for (std::uint32_t b = log_first + log_count; b-- > log_first;)
            store.free_block(part, b);
        part.log_used = 0;
        first += count;
        log_first += log_count;
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

std::int64_t MemoryStore::log_blocks() const noexcept {
    return header_->log_blocks;
}

int MemoryStore::partition_of(const KeyHash& key) noexcept {
    // The hash is a PRF of the key, so any of its bits spread keys evenly; the bucket uses
    // `low`, the partition `high`, so the two choices are independent.
    return static_cast<int>(key.high % kMemoryPartitions);
}

int MemoryStore::database_index(std::uint32_t oid) noexcept {
    constexpr int kShared = kMaxMemoryDatabases - 1;
    if (oid == 0)
        return kShared;
    // Rows are claimed in order and never given back, so the claimed rows are a prefix and an
    // OID is in at most one of them: two processes claiming the same OID race for the same
    // first free row, and the loser finds the winner's OID there.
    for (int i = 0; i < kShared; ++i) {
        std::uint32_t current = databases_[i].oid.load(std::memory_order_acquire);
        if (current == 0 && databases_[i].oid.compare_exchange_strong(current, oid))
            return i;
        if (current == oid)
            return i;
    }
    return kShared;
}

MemoryDatabaseStats MemoryStore::database_stats(int index) const noexcept {
    const DatabaseRow& row = databases_[index];
    MemoryDatabaseStats stats;
    stats.oid = row.oid.load(std::memory_order_acquire);
    stats.entries = row.entries.load(std::memory_order_relaxed);
    stats.refusals = row.refusals.load(std::memory_order_relaxed);
    stats.evictions = row.evictions.load(std::memory_order_relaxed);
    return stats;
}

MemoryStore::PartitionHeader& MemoryStore::partition_header(int partition) noexcept {
    return partitions_[partition];
}

const MemoryStore::PartitionHeader& MemoryStore::partition_header(int partition) const noexcept {
    return partitions_[partition];
}

const std::uint32_t& MemoryStore::bucket_of(const PartitionHeader& header,
                                            const KeyHash& key) const noexcept {
    return buckets_[header.first + key.low % header.count];
}

std::uint32_t& MemoryStore::bucket_of(const PartitionHeader& header, const KeyHash& key) noexcept {
    return const_cast<std::uint32_t&>(std::as_const(*this).bucket_of(header, key));
}

std::uint32_t MemoryStore::index_of(const MemorySlot& slot) const noexcept {
    return static_cast<std::uint32_t>(&slot - slots_);
}

LogEntry* MemoryStore::block_entries(std::uint32_t block) const noexcept {
    return logs_ + static_cast<std::size_t>(block) * kMaxSlidingLog;
}

void MemoryStore::prefetch_bucket(int partition, const KeyHash& key) const noexcept {
    __builtin_prefetch(&bucket_of(partitions_[partition], key));
}

void MemoryStore::prefetch_slot(int partition, const KeyHash& key) const noexcept {
    const std::uint32_t head = bucket_of(partitions_[partition], key);
    if (head != kNoSlot)
        __builtin_prefetch(&slots_[head], 1);
}

const MemorySlot* MemoryStore::find(int partition, const KeyHash& key) const noexcept {
    for (std::uint32_t i = bucket_of(partitions_[partition], key); i != kNoSlot;
         i = slots_[i].chain_next) {
        if (slots_[i].key == key)
            return &slots_[i];
    }
    return nullptr;
}

MemorySlot* MemoryStore::find(int partition, const KeyHash& key) noexcept {
    return const_cast<MemorySlot*>(std::as_const(*this).find(partition, key));
}

void MemoryStore::touch(PartitionHeader& header, std::uint32_t index) noexcept {
    slots_[index].last_use = ++header.uses;
}

std::uint32_t MemoryStore::take_block(PartitionHeader& header) noexcept {
    const std::uint32_t block = header.log_free;
    header.log_free = static_cast<std::uint32_t>(block_entries(block)[0].at);
    ++header.log_used;
    return block;
}

void MemoryStore::free_block(PartitionHeader& header, std::uint32_t block) noexcept {
    // A free block's first entry links the free list.
    block_entries(block)[0].at = header.log_free;
    header.log_free = block;
    --header.log_used;
}

void MemoryStore::free_slot(PartitionHeader& header, std::uint32_t index) noexcept {
    MemorySlot& slot = slots_[index];
    // Unchain from its bucket: chains are short (at most a few slots at full load).
    std::uint32_t* link = &bucket_of(header, slot.key);
    while (*link != index)
        link = &slots_[*link].chain_next;
    *link = slot.chain_next;
    if (has_log_block(slot))
        free_block(header, slot.state.log.block);
    databases_[slot.database - 1].entries.fetch_sub(1, std::memory_order_relaxed);
    slot.database = 0;
    slot.log_count = 0;
    slot.chain_next = header.free_head;
    header.free_head = index;
    --header.used;
    header.full = 0;
}

void MemoryStore::note_expiry(PartitionHeader& header, Micros expires_at) noexcept {
    header.next_expiry = std::min(header.next_expiry, expires_at);
}

void MemoryStore::free_expired(PartitionHeader& header, Micros now, const KeyHash* keep,
                               int keep_count) noexcept {
    if (now < header.next_expiry)
        return;
    // Free every expired slot at once, and learn the earliest expiry of the rest, so the scan
    // runs again only when some slot can have expired.
    Micros next = kNever;
    for (std::uint32_t i = header.first; i < header.first + header.count; ++i) {
        if (slots_[i].database == 0)
            continue;
        if (slots_[i].expires_at <= now && !kept(slots_[i].key, keep, keep_count)) {
            free_slot(header, i);
            ++header.expired;
        } else {
            next = std::min(next, slots_[i].expires_at);
        }
    }
    header.next_expiry = next;
}

bool MemoryStore::claim_share(const Tenant& tenant, std::int64_t slots) noexcept {
    DatabaseRow& row = databases_[tenant.database];
    const std::int64_t before = row.entries.fetch_add(slots, std::memory_order_relaxed);
    if (before + slots <= tenant.share)
        return true;
    row.entries.fetch_sub(slots, std::memory_order_relaxed);
    return false;
}

bool MemoryStore::evict_one(PartitionHeader& header, const Tenant& tenant, bool any_database,
                            bool want_block, const KeyHash* keep, int keep_count) noexcept {
    // A partition of at most kMemoryEvictionWalk slots is looked at whole; a larger one a run at
    // a time, the next eviction going on from where this one stopped.
    const std::uint32_t walk = std::min<std::uint32_t>(header.count, kMemoryEvictionWalk);
    const std::uint32_t start = header.count > walk ? header.sample_at : 0;
    std::uint32_t victim = kNoSlot;
    for (std::uint32_t k = 0; k < walk; ++k) {
        const std::uint32_t i = header.first + (start + k) % header.count;
        const MemorySlot& slot = slots_[i];
        if (slot.database == 0 || (!any_database && slot.database != tenant.database + 1))
            continue;
        if ((want_block && !has_log_block(slot)) || kept(slot.key, keep, keep_count))
            continue;
        if (victim == kNoSlot || slot.last_use < slots_[victim].last_use)
            victim = i;
    }
    if (header.count > walk)
        header.sample_at = (start + walk) % header.count;
    if (victim == kNoSlot)
        return false;
    const int row = slots_[victim].database - 1;
    free_slot(header, victim);
    ++header.evictions;
    databases_[row].evictions.fetch_add(1, std::memory_order_relaxed);
    ++room_.evicted;
    return true;
}

void MemoryStore::count_refusal(PartitionHeader& header, const Tenant& tenant,
                                Shortage why) noexcept {
    ++header.refusals;
    databases_[tenant.database].refusals.fetch_add(1, std::memory_order_relaxed);
    room_.refused = true;
    room_.shortage = why;
}

bool MemoryStore::make_room(PartitionHeader& header, Micros now, const Tenant& tenant,
                            const Need& need, const KeyHash* keep, int keep_count,
                            bool any_database) noexcept {
    auto free_slots = [&] {
        return static_cast<std::int64_t>(header.count) - header.used - header.claimed;
    };
    auto free_blocks = [&] {
        return static_cast<std::int64_t>(header.log_count) - header.log_used;
    };
    if (free_slots() < need.slots || free_blocks() < need.blocks)
        free_expired(header, now, keep, keep_count);
    if (free_slots() < need.slots) {
        while (free_slots() < need.slots) {
            if (!tenant.evict ||
                !evict_one(header, tenant, any_database, false, keep, keep_count)) {
                header.full = 1;
                count_refusal(header, tenant, Shortage::kPartitionFull);
                return false;
            }
            room_.shortage = Shortage::kPartitionFull;
        }
        header.full = 1;
    }
    while (free_blocks() < need.blocks) {
        if (!tenant.evict || !evict_one(header, tenant, any_database, true, keep, keep_count)) {
            count_refusal(header, tenant, Shortage::kLogPoolFull);
            return false;
        }
        room_.shortage = Shortage::kLogPoolFull;
    }
    if (need.slots > 0 && !claim_share(tenant, need.slots)) {
        // This partition's expired keys of the database no longer count against its share.
        free_expired(header, now, keep, keep_count);
        while (!claim_share(tenant, need.slots)) {
            if (!tenant.evict || !evict_one(header, tenant, false, false, keep, keep_count)) {
                count_refusal(header, tenant, Shortage::kShareFull);
                return false;
            }
            room_.shortage = Shortage::kShareFull;
        }
    }
    header.claimed += static_cast<std::uint32_t>(need.slots);
    return true;
}

MemorySlot* MemoryStore::insert(PartitionHeader& header, const KeyHash& key, Micros now,
                                const Tenant& tenant, bool any_database) noexcept {
    if (header.claimed == 0 && !make_room(header, now, tenant, Need{1, 0}, &key, 1, any_database))
        return nullptr;
    --header.claimed;
    const std::uint32_t index = header.free_head;
    MemorySlot& slot = slots_[index];
    header.free_head = slot.chain_next;
    ++header.used;
    std::memset(static_cast<void*>(&slot), 0, sizeof(MemorySlot));
    slot.key = key;
    slot.database = static_cast<std::uint16_t>(tenant.database + 1);
    std::uint32_t& bucket = bucket_of(header, key);
    slot.chain_next = bucket;
    bucket = index;
    touch(header, index);
    return &slot;
}

void MemoryStore::load_state(const MemorySlot& slot, KeyState& state) const {
    state.algorithm = static_cast<Algorithm>(slot.algorithm);
    state.blocked_until = slot.blocked_until;
    state.log.clear();
    if (state.algorithm == Algorithm::kSlidingWindow) {
        state.instant = slot.state.log.instant;
        state.amount = state.carry = 0;
        state.measured_limit = state.measured_period = 0;
        if (has_log_block(slot)) {
            const LogEntry* entries = block_entries(slot.state.log.block);
            state.log.assign(entries, entries + slot.log_count);
        } else {
            for (int i = 0; i < slot.log_count; ++i)
                state.log.push_back(LogEntry{slot.state.log.at[i], slot.state.log.units[i]});
        }
    } else {
        state.instant = slot.state.counter.instant;
        state.amount = slot.state.counter.amount;
        state.carry = slot.state.counter.carry;
        state.measured_limit = slot.state.counter.measured_limit;
        state.measured_period = slot.state.counter.measured_period;
    }
}

void MemoryStore::write_slot(PartitionHeader& header, const Words& words, const LogEntry* log,
                             std::size_t log_count, std::uint32_t new_block,
                             MemorySlot& slot) noexcept {
    const bool had_block = has_log_block(slot);
    const std::uint32_t old_block = had_block ? slot.state.log.block : kNoSlot;
    const bool sliding = words.algorithm == Algorithm::kSlidingWindow;
    const bool external = sliding && log_count > static_cast<std::size_t>(kMemoryLogCapacity);
    std::uint32_t block = kNoSlot;
    if (external) {
        block = had_block ? old_block : new_block;
        if (had_block && new_block != kNoSlot)
            free_block(header, new_block);
    } else {
        if (had_block)
            free_block(header, old_block);
        if (new_block != kNoSlot)
            free_block(header, new_block);
    }
    slot.algorithm = static_cast<std::int8_t>(words.algorithm);
    slot.blocked_until = words.blocked_until;
    slot.expires_at = words.expires_at;
    std::memset(static_cast<void*>(&slot.state), 0, sizeof(SlotState));
    if (sliding) {
        slot.log_count = static_cast<std::uint8_t>(log_count);
        slot.state.log.instant = words.instant;
        if (external) {
            slot.state.log.block = block;
            std::memcpy(static_cast<void*>(block_entries(block)), log,
                        log_count * sizeof(LogEntry));
        } else {
            for (std::size_t i = 0; i < log_count; ++i) {
                slot.state.log.at[i] = log[i].at;
                slot.state.log.units[i] = static_cast<std::int32_t>(log[i].units);
            }
        }
    } else {
        slot.log_count = 0;
        slot.state.counter.instant = words.instant;
        slot.state.counter.amount = words.amount;
        slot.state.counter.carry = words.carry;
        slot.state.counter.measured_limit = words.measured_limit;
        slot.state.counter.measured_period = words.measured_period;
    }
}

void MemoryStore::store_state(PartitionHeader& header, const KeyState& state, Micros expires_at,
                              std::uint32_t new_block, MemorySlot& slot) noexcept {
    const Words words{state.algorithm,      state.blocked_until,  expires_at,
                      state.instant,        state.amount,         state.carry,
                      state.measured_limit, state.measured_period};
    write_slot(header, words, state.log.data(), state.log.size(), new_block, slot);
}

void require_memory_limit(const Limit&) {}

Decision MemoryStore::refusal(int partition, const Limit& limit, const Decision& decided,
                              Micros now) const noexcept {
    // Room comes back when a key of the partition expires: the earliest is known once a full
    // partition has been scanned. Never less than a millisecond, never more than a period.
    const Micros next = partitions_[partition].next_expiry;
    Micros wait = limit.period;
    if (next != kNever)
        wait = std::min(wait, next > now ? next - now : 0);
    wait = std::max<Micros>(wait, 1000);
    Decision denied;
    denied.allowed = false;
    denied.limit = decided.limit;
    denied.remaining = 0;
    denied.retry_after = wait;
    denied.reset_after = wait;
    denied.state_changed = false;
    return denied;
}

Decision MemoryStore::decide(int partition, const KeyHash& key, const Limit& limit, Micros now,
                             std::int64_t cost, Action action, KeyState& scratch,
                             const Tenant& tenant) {
    room_ = RoomReport{};
    PartitionHeader& header = partitions_[partition];
    MemorySlot* slot = find(partition, key);
    if (slot != nullptr) {
        load_state(*slot, scratch);
    } else {
        scratch.algorithm = Algorithm::kNone;
        scratch.instant = scratch.amount = scratch.carry = scratch.blocked_until = 0;
        scratch.measured_limit = scratch.measured_period = 0;
        scratch.log.clear();
    }
    Decision decision = ratelimit::decide(limit, scratch, now, cost, action);
    // Room is made at the real clock (see Tenant::clock); the key's own state at the decision's.
    const Micros room_now = tenant.clock >= 0 ? std::min(tenant.clock, now) : now;
    if (decision.state_changed) {
        const bool sliding = scratch.algorithm == Algorithm::kSlidingWindow;
        if (sliding) {
            if (scratch.log.size() > static_cast<std::size_t>(kMaxSlidingLog))
                throw std::length_error("ratelimit: a sliding_window log outgrew its bound");
            for (const LogEntry& entry : scratch.log) {
                if (entry.units > INT32_MAX)
                    throw std::length_error("ratelimit: a sliding_window entry outgrew 32 bits");
            }
        }
        const bool fresh = slot == nullptr;
        const Micros expires_at = idle_from(limit, scratch);
        if (fresh && (action == Action::kRefund || expires_at <= now)) {
            // A refund of a new key, or a consume or charge that leaves it deciding like no
            // state: its state is kept when a slot is free, and is never worth a refusal or an
            // eviction. (A charge that counts takes a slot as a consume does; with no room for
            // it, it is dropped below, as the work it counts is done and cannot be refused.)
            if (header.claimed == 0 && (header.count - header.used > 0) && claim_share(tenant, 1))
                ++header.claimed;
            if (header.claimed == 0) {
                decision.state_changed = false;
                if (action == Action::kConsume)
                    ++(decision.allowed ? header.allowed : header.denied);
                return decision;
            }
        }
        if (fresh)
            slot = insert(header, key, room_now, tenant, false);
        std::uint32_t new_block = kNoSlot;
        if (slot != nullptr && sliding &&
            scratch.log.size() > static_cast<std::size_t>(kMemoryLogCapacity) &&
            !has_log_block(*slot)) {
            if (header.log_used < header.log_count ||
                make_room(header, room_now, tenant, Need{0, 1}, &key, 1, false)) {
                new_block = take_block(header);
            } else if (fresh) {
                free_slot(header, index_of(*slot));
                slot = nullptr;
            } else {
                touch(header, index_of(*slot));
                slot = nullptr;
            }
        }
        if (slot == nullptr) {
            if (action != Action::kConsume) {
                decision.state_changed = false;
                return decision;
            }
            ++header.denied;
            return refusal(partition, limit, decision, room_now);
        }
        store_state(header, scratch, expires_at, new_block, *slot);
        note_expiry(header, expires_at);
    }
    if (slot != nullptr)
        touch(header, index_of(*slot));
    if (action == Action::kConsume)
        ++(decision.allowed ? header.allowed : header.denied);
    return decision;
}

Micros MemoryStore::block(int partition, const KeyHash& key, Micros until, Micros now,
                          KeyState& scratch, const Tenant& tenant) {
    room_ = RoomReport{};
    PartitionHeader& header = partitions_[partition];
    MemorySlot* slot = find(partition, key);
    if (slot == nullptr)
        slot = insert(header, key, now, tenant, false);
    if (slot == nullptr)
        return -1;
    load_state(*slot, scratch);
    block_until(scratch, until);
    const Micros expires_at = std::max(slot->expires_at, scratch.blocked_until);
    store_state(header, scratch, expires_at, kNoSlot, *slot);
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

MemoryStore::Need MemoryStore::need_for_consume(int partition, const KeyHash& key,
                                                const Limit& limit, std::int64_t) noexcept {
    Need need;
    const MemorySlot* slot = find(partition, key);
    if (slot == nullptr) {
        need.slots = 1;
    } else if (limit.algorithm == Algorithm::kSlidingWindow &&
               slot->algorithm == static_cast<std::int8_t>(Algorithm::kSlidingWindow) &&
               !has_log_block(*slot) && slot->log_count + 1 > kMemoryLogCapacity) {
        // One write adds at most one entry.
        need.blocks = 1;
    }
    return need;
}

bool MemoryStore::reserve(int partition, Micros now, const Tenant& tenant, const Need& need,
                          const KeyHash* keep, int keep_count) noexcept {
    return make_room(partitions_[partition], now, tenant, need, keep, keep_count, false);
}

void MemoryStore::release(int partition, const Tenant& tenant) noexcept {
    PartitionHeader& header = partitions_[partition];
    if (header.claimed > 0) {
        databases_[tenant.database].entries.fetch_sub(header.claimed, std::memory_order_relaxed);
        header.claimed = 0;
    }
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
    stats.refusals = header.refusals;
    stats.full_partitions = header.full;
    stats.log_blocks = header.log_count;
    stats.log_blocks_used = header.log_used;
    return stats;
}

}  // namespace ratelimit
