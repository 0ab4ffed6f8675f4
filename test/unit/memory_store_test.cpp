// The memory store against a plain map of KeyStates decided by the same core: while nothing is
// evicted the two must agree on every decision, sliding_window at any limit included (long logs
// go to log blocks); a full partition frees expired keys first, then refuses (or, when told to
// evict, takes the least recently used key of the same database); databases are held to their
// share; saving and restoring keeps states, databases and LRU order.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "ratelimit/error.hpp"
#include "ratelimit/memory_store.hpp"

namespace ratelimit {
namespace {

constexpr Micros kStart = 4102444800LL * kMicrosPerSecond;  // 2100-01-01

class Store {
  public:
    explicit Store(std::int64_t capacity, HashSecret secret = {1, 2})
        : Store(capacity, default_memory_log_blocks(capacity), secret) {}
    Store(std::int64_t capacity, std::int64_t log_blocks, HashSecret secret = {1, 2})
        : block_(MemoryStore::bytes_needed(capacity, log_blocks) / 8 + 1),
          store_(MemoryStore::create(block_.data(), capacity, log_blocks, secret)) {}

    MemoryStore& operator*() { return store_; }
    MemoryStore* operator->() { return &store_; }

    KeyHash hash(const std::string& key) const {
        return hash_key(store_.secret(), key.data(), key.size());
    }

    Decision decide(const std::string& key, const Limit& limit, Micros now, std::int64_t cost,
                    Action action = Action::kConsume, const Tenant& tenant = Tenant{}) {
        const KeyHash h = hash(key);
        return store_.decide(MemoryStore::partition_of(h), h, limit, now, cost, action, scratch_,
                             tenant);
    }

    Micros block(const std::string& key, Micros until, Micros now,
                 const Tenant& tenant = Tenant{}) {
        const KeyHash h = hash(key);
        return store_.block(MemoryStore::partition_of(h), h, until, now, scratch_, tenant);
    }

    MemoryStats totals() const {
        MemoryStats total;
        for (int p = 0; p < kMemoryPartitions; ++p)
            total += store_.stats(p);
        return total;
    }

    // Keys that land in `partition`, for tests that fill one partition.
    std::vector<std::string> keys_in(int partition, int count) const {
        std::vector<std::string> keys;
        for (int i = 0; static_cast<int>(keys.size()) < count; ++i) {
            const std::string key = "key-" + std::to_string(i);
            if (MemoryStore::partition_of(hash(key)) == partition)
                keys.push_back(key);
        }
        return keys;
    }

  private:
    std::vector<std::uint64_t> block_;
    MemoryStore store_;
    KeyState scratch_;
};

Limit limit_of(Algorithm algorithm, std::int64_t n, Micros period, std::int64_t burst = 0) {
    return make_limit(algorithm, n, period,
                      burst > 0 ? std::optional<std::int64_t>(burst) : std::nullopt);
}

void expect_same(const Decision& a, const Decision& b, const std::string& where) {
    EXPECT_EQ(a.allowed, b.allowed) << where;
    EXPECT_EQ(a.limit, b.limit) << where;
    EXPECT_EQ(a.remaining, b.remaining) << where;
    EXPECT_EQ(a.retry_after, b.retry_after) << where;
    EXPECT_EQ(a.reset_after, b.reset_after) << where;
}

Tenant evicting(int database = 0) {
    Tenant tenant;
    tenant.database = database;
    tenant.evict = true;
    return tenant;
}

TEST(MemoryStore, EntryFitsTheBudget) {
    // A slot plus its bucket head, plus the fixed headers spread over the smallest store; the
    // log blocks on top, a kilobyte each.
    const std::int64_t capacity = kMinMemoryCapacity;
    EXPECT_LE(MemoryStore::bytes_needed(capacity, 0), static_cast<std::size_t>(capacity) * 136);
    EXPECT_LE(MemoryStore::bytes_needed(100000, 0), static_cast<std::size_t>(100000) * 125);
    EXPECT_EQ(MemoryStore::bytes_needed(100000, 100) - MemoryStore::bytes_needed(100000, 0),
              100u * 1024);
    EXPECT_EQ(default_memory_log_blocks(100000), 3125);
    EXPECT_EQ(default_memory_log_blocks(kMinMemoryCapacity), 8 * kMemoryPartitions);
}

TEST(MemoryStore, DecidesLikeTheCoreOnEveryAlgorithm) {
    const std::vector<Limit> limits = {
        limit_of(Algorithm::kFixedWindow, 5, 1000 * 1000),
        limit_of(Algorithm::kRollingWindow, 5, 1000 * 1000),
        limit_of(Algorithm::kSlidingWindow, kMemoryLogCapacity, 1000 * 1000),
        limit_of(Algorithm::kSlidingWindow, 10, 1000 * 1000),
        limit_of(Algorithm::kSlidingWindow, 1000, 1000 * 1000),
        limit_of(Algorithm::kSlidingWindow, 100000, 1000 * 1000),
        limit_of(Algorithm::kSlidingWindowCounter, 5, 1000 * 1000),
        limit_of(Algorithm::kTokenBucket, 5, 1000 * 1000, 7),
        limit_of(Algorithm::kGcra, 5, 1000 * 1000, 3),
    };
    std::mt19937_64 random(42);
    for (const Limit& limit : limits) {
        Store store(4096);
        std::map<std::string, KeyState> model;
        Micros now = kStart;
        for (int call = 0; call < 20000; ++call) {
            const std::string key = "k" + std::to_string(random() % 50);
            now += static_cast<Micros>(random() % 200000) - 20000;  // sometimes backwards
            const std::int64_t cost = static_cast<std::int64_t>(random() % 3) *
                                      std::max<std::int64_t>(1, limit.limit / 20);
            const int pick = static_cast<int>(random() % 10);
            const Action action = pick < 7   ? Action::kConsume
                                  : pick < 9 ? Action::kPeek
                                             : Action::kRefund;
            const Decision expected = decide(limit, model[key], now, cost, action);
            expect_same(
                store.decide(key, limit, now, cost, action), expected,
                std::string(algorithm_name(limit.algorithm)) + " call " + std::to_string(call));
        }
        EXPECT_EQ(store.totals().evictions, 0);
    }
}

TEST(MemoryStore, FreshKeyGetsASlotOnlyWhenStateIsWritten) {
    Store store(kMinMemoryCapacity);
    const Limit limit = limit_of(Algorithm::kFixedWindow, 2, kMicrosPerMinute);
    store.decide("peeked", limit, kStart, 1, Action::kPeek);
    EXPECT_EQ(store.totals().entries, 0);
    store.decide("consumed", limit, kStart, 1);
    EXPECT_EQ(store.totals().entries, 1);
    EXPECT_EQ(store.totals().allowed, 1);
    EXPECT_FALSE(store.decide("consumed", limit, kStart, 2).allowed);
    EXPECT_EQ(store.totals().denied, 1);
}

TEST(MemoryStore, FullPartitionFreesExpiredKeysBeforeEvicting) {
    Store store(kMinMemoryCapacity);
    const int slots = static_cast<int>(store->stats(0).capacity);
    const std::vector<std::string> keys = store.keys_in(0, slots + 1);
    const Limit short_limit = limit_of(Algorithm::kFixedWindow, 5, 1000 * 1000);
    const Limit long_limit = limit_of(Algorithm::kFixedWindow, 5, kMicrosPerMinute);
    // The oldest key counts over a long window; every other one over a second.
    store.decide(keys[0], long_limit, kStart, 1);
    for (int i = 1; i < slots; ++i)
        store.decide(keys[i], short_limit, kStart, 1);
    EXPECT_EQ(store->stats(0).entries, slots);
    // Two seconds on, the short keys have expired: a new key takes one of their slots and the
    // least recently used key, which still counts, stays.
    EXPECT_TRUE(store.decide(keys[slots], short_limit, kStart + 2 * 1000 * 1000, 1).allowed);
    EXPECT_EQ(store->stats(0).evictions, 0);
    EXPECT_EQ(store->stats(0).refusals, 0);
    EXPECT_EQ(store->stats(0).full_partitions, 0);
    EXPECT_EQ(store->stats(0).expired, slots - 1);
    EXPECT_EQ(store.decide(keys[0], long_limit, kStart + 2 * 1000 * 1000, 0).remaining, 4);
}

TEST(MemoryStore, FullPartitionOfLiveKeysRefusesANewKey) {
    Store store(kMinMemoryCapacity);
    const int slots = static_cast<int>(store->stats(0).capacity);
    const std::vector<std::string> keys = store.keys_in(0, slots + 1);
    const Limit limit = limit_of(Algorithm::kFixedWindow, 3, kMicrosPerMinute);
    for (int i = 0; i < slots; ++i)
        store.decide(keys[i], limit, kStart, 3);  // every key spent
    const Decision refused = store.decide(keys[slots], limit, kStart + 1000, 1);
    EXPECT_FALSE(refused.allowed);
    EXPECT_EQ(refused.remaining, 0);
    EXPECT_EQ(refused.limit, 3);
    // The wait until the partition's first key expires, the end of the minute.
    EXPECT_EQ(refused.retry_after, kMicrosPerMinute - 1000);
    EXPECT_TRUE(store->last_room().refused);
    EXPECT_EQ(store->last_room().shortage, Shortage::kPartitionFull);
    const MemoryStats stats = store->stats(0);
    EXPECT_EQ(stats.entries, slots);
    EXPECT_EQ(stats.evictions, 0);
    EXPECT_EQ(stats.refusals, 1);
    EXPECT_EQ(stats.denied, 1);
    EXPECT_EQ(stats.full_partitions, 1);
    EXPECT_EQ(store->database_stats(0).refusals, 1);
    // Every spent key is still spent; peek, refund and reset of the new key need no slot.
    for (int i = 0; i < slots; ++i)
        ASSERT_FALSE(store.decide(keys[i], limit, kStart + 2000, 1).allowed) << i;
    EXPECT_TRUE(store.decide(keys[slots], limit, kStart, 1, Action::kPeek).allowed);
    store.decide(keys[slots], limit, kStart, 1, Action::kRefund);
    EXPECT_FALSE(store->last_room().refused);
    // A block of a new key cannot be stored either.
    EXPECT_EQ(store.block(keys[slots], kStart + kMicrosPerMinute, kStart), -1);
    // Once the minute is over the keys have expired and the new key gets a slot.
    EXPECT_TRUE(store.decide(keys[slots], limit, kStart + kMicrosPerMinute, 1).allowed);
    EXPECT_EQ(store->stats(0).full_partitions, 0);
}

TEST(MemoryStore, ADecisionAheadOfTheRealClockMakesRoomAtTheRealClock) {
    // The drop-ins decide some keys at a clock moved forward (a window's end). The partition's
    // keys expire at the end of the minute: judged at the decision's clock, an hour ahead, all
    // of them would look expired; judged at the real clock (Tenant::clock) none is.
    Store store(kMinMemoryCapacity);
    const int slots = static_cast<int>(store->stats(0).capacity);
    const std::vector<std::string> keys = store.keys_in(0, slots + 1);
    const Limit limit = limit_of(Algorithm::kFixedWindow, 3, kMicrosPerMinute);
    for (int i = 0; i < slots; ++i)
        store.decide(keys[i], limit, kStart, 3);
    Tenant real_clock;
    real_clock.clock = kStart + 1000;
    const Limit ahead = limit_of(Algorithm::kRollingWindow, 100, (60 * kMicrosPerMinute));
    const Decision refused = store.decide(keys[slots], ahead, kStart + (60 * kMicrosPerMinute), 1,
                                          Action::kConsume, real_clock);
    EXPECT_FALSE(refused.allowed);
    EXPECT_TRUE(store->last_room().refused);
    EXPECT_EQ(store->stats(0).expired, 0);
    for (int i = 0; i < slots; ++i)
        ASSERT_FALSE(store.decide(keys[i], limit, kStart + 2000, 1).allowed) << i;
    // Without it, the same call takes every spent key for expired.
    EXPECT_TRUE(store.decide(keys[slots], ahead, kStart + (60 * kMicrosPerMinute), 1).allowed);
    EXPECT_EQ(store->stats(0).expired, slots);
}

TEST(MemoryStore, BlockedAndLockedOutKeysAreNeverRefusedAway) {
    Store store(kMinMemoryCapacity);
    const int slots = static_cast<int>(store->stats(0).capacity);
    const std::vector<std::string> keys = store.keys_in(0, slots + 50);
    const Limit limit = limit_of(Algorithm::kGcra, 3, 1000 * 1000);
    EXPECT_EQ(store.block(keys[0], kStart + 30 * 24 * 3600 * kMicrosPerSecond, kStart),
              kStart + 30 * 24 * 3600 * kMicrosPerSecond);
    for (int i = 1; i < slots; ++i)
        store.decide(keys[i], limit, kStart, 3);
    // An hour later everything but the block has expired: the flood takes those slots only.
    for (int i = slots; i < slots + 50; ++i)
        store.decide(keys[i], limit, kStart + 3600 * kMicrosPerSecond, 1);
    EXPECT_FALSE(store.decide(keys[0], limit, kStart + 3600 * kMicrosPerSecond, 1).allowed);
    EXPECT_EQ(store->stats(0).evictions, 0);
}

TEST(MemoryStore, FullPartitionEvictsTheLeastRecentlyUsedWhenTold) {
    Store store(kMinMemoryCapacity);
    const int slots = static_cast<int>(store->stats(0).capacity);
    const std::vector<std::string> keys = store.keys_in(0, slots + 2);
    const Limit limit = limit_of(Algorithm::kFixedWindow, 5, kMicrosPerMinute);
    for (int i = 0; i < slots; ++i)
        store.decide(keys[i], limit, kStart, 1);
    // keys[0] is used again (a peek counts as use), so keys[1] is now the least recent.
    store.decide(keys[0], limit, kStart, 1, Action::kPeek);
    EXPECT_TRUE(store.decide(keys[slots], limit, kStart, 1, Action::kConsume, evicting()).allowed);
    EXPECT_EQ(store->last_room().evicted, 1);
    EXPECT_FALSE(store->last_room().refused);
    EXPECT_EQ(store->database_stats(0).evictions, 1);
    EXPECT_EQ(store->stats(0).evictions, 1);
    EXPECT_EQ(store->stats(0).entries, slots);
    EXPECT_EQ(store.decide(keys[0], limit, kStart, 0, Action::kPeek).remaining, 4);
    EXPECT_EQ(store.decide(keys[1], limit, kStart, 0, Action::kPeek).remaining, 5);  // fresh
}

TEST(MemoryStore, ALargePartitionEvictsTheOldestOfTheKeysItLooksAt) {
    // 256 slots a partition: an eviction looks at 64 of them, so the key it takes is older than
    // at least 63 others, whatever order they were used in.
    Store store(kMemoryPartitions * 256);
    const int slots = static_cast<int>(store->stats(0).capacity);
    ASSERT_EQ(slots, 256);
    const std::vector<std::string> keys = store.keys_in(0, slots + 200);
    const Limit limit = limit_of(Algorithm::kFixedWindow, 5, kMicrosPerMinute);
    std::vector<int> order(slots);
    for (int i = 0; i < slots; ++i) {
        order[i] = i;
        store.decide(keys[i], limit, kStart, 1);
    }
    std::shuffle(order.begin(), order.end(), std::mt19937_64(7));
    for (const int i : order)
        store.decide(keys[i], limit, kStart, 0, Action::kPeek);
    auto held_oldest_first = [&] {
        std::vector<KeyHash> held;
        store->for_each_oldest_first(0, [&](const SavedSlot& saved) { held.push_back(saved.key); });
        return held;
    };
    for (int n = 0; n < 200; ++n) {
        const std::vector<KeyHash> before = held_oldest_first();
        ASSERT_TRUE(
            store.decide(keys[slots + n], limit, kStart, 1, Action::kConsume, evicting()).allowed);
        ASSERT_EQ(store->last_room().evicted, 1);
        const std::vector<KeyHash> after = held_oldest_first();
        ASSERT_EQ(after.size(), before.size());
        ASSERT_EQ(after.back(), store.hash(keys[slots + n])) << "the new key is the most recent";
        // The one key of `before` missing from `after` is the evicted one.
        std::size_t rank = 0;
        while (rank < before.size() &&
               std::find(after.begin(), after.end(), before[rank]) != after.end())
            ++rank;
        ASSERT_LT(rank, before.size());
        EXPECT_LE(rank, before.size() - kMemoryEvictionWalk) << "eviction " << n;
    }
}

TEST(MemoryStore, ManyKeysIntoASmallStoreNeverLoseAKeyUsedOften) {
    Store store(kMinMemoryCapacity);
    const Limit limit = limit_of(Algorithm::kFixedWindow, 1000000, kMicrosPerMinute);
    std::int64_t hot_calls = 0;
    for (int i = 0; i < 200000; ++i) {
        store.decide("cold-" + std::to_string(i), limit, kStart, 1, Action::kConsume, evicting());
        if (i % 100 == 0) {
            ++hot_calls;
            ASSERT_EQ(store.decide("hot", limit, kStart, 1, Action::kConsume, evicting()).remaining,
                      1000000 - hot_calls);
        }
        ASSERT_LE(store.totals().entries, kMinMemoryCapacity);
    }
    const MemoryStats totals = store.totals();
    EXPECT_EQ(totals.entries + totals.evictions + totals.expired, 200000 + 1);
    EXPECT_GT(totals.evictions, 200000 - kMinMemoryCapacity - 1);
}

// The WAL's pass goes over a partition in runs of slots, its lock released between runs: the
// runs together visit each key once, with the state for_each_oldest_first gives.
TEST(MemoryStore, RunsOfSlotsVisitEveryKeyOnce) {
    Store store(kMemoryPartitions * 256);
    const std::vector<std::string> keys = store.keys_in(0, 200);
    const Limit limit = limit_of(Algorithm::kTokenBucket, 5, kMicrosPerMinute);
    for (std::size_t i = 0; i < keys.size(); ++i)
        store.decide(keys[i], limit, kStart, 1 + static_cast<std::int64_t>(i % 3));
    std::map<std::uint64_t, std::int64_t> oldest_first;
    store->for_each_oldest_first(
        0, [&](const SavedSlot& saved) { oldest_first[saved.key.low] = saved.amount; });
    std::map<std::uint64_t, std::int64_t> in_runs;
    int visits = 0;
    for (std::uint32_t from = 0; from < store->slots_of(0); from += 7) {
        store->for_each_in_slots(0, from, std::min<std::uint32_t>(7, store->slots_of(0) - from),
                                 [&](const SavedSlot& saved) {
                                     in_runs[saved.key.low] = saved.amount;
                                     ++visits;
                                 });
    }
    EXPECT_EQ(visits, 200);
    EXPECT_EQ(in_runs, oldest_first);
}

TEST(MemoryStore, ExpireFreesOnlyExpiredKeys) {
    Store store(kMinMemoryCapacity);
    const Limit second = limit_of(Algorithm::kTokenBucket, 10, 1000 * 1000);
    const Limit hour = limit_of(Algorithm::kTokenBucket, 10, 3600 * kMicrosPerSecond);
    for (int i = 0; i < 100; ++i)
        store.decide("s" + std::to_string(i), second, kStart, 1);
    for (int i = 0; i < 50; ++i)
        store.decide("h" + std::to_string(i), hour, kStart, 1);
    std::int64_t freed = 0;
    for (int p = 0; p < kMemoryPartitions; ++p)
        freed += store->expire(p, kStart + 1000 * 1000);
    EXPECT_EQ(freed, 100);
    EXPECT_EQ(store.totals().entries, 50);
    EXPECT_EQ(store.decide("h7", hour, kStart + 1000 * 1000, 0, Action::kPeek).remaining, 9);
}

TEST(MemoryStore, BlockAndReset) {
    Store store(kMinMemoryCapacity);
    const Limit limit = limit_of(Algorithm::kGcra, 3, 1000 * 1000);
    const KeyHash h = store.hash("user");
    const int p = MemoryStore::partition_of(h);
    KeyState scratch;
    EXPECT_EQ(store->block(p, h, kStart + 5000, kStart, scratch), kStart + 5000);
    EXPECT_EQ(store->block(p, h, kStart + 10, kStart, scratch), kStart + 5000);  // not shorter
    const Decision blocked = store.decide("user", limit, kStart, 1);
    EXPECT_FALSE(blocked.allowed);
    EXPECT_EQ(blocked.retry_after, 5000);
    EXPECT_TRUE(store->reset(p, h));
    EXPECT_FALSE(store->reset(p, h));
    EXPECT_TRUE(store.decide("user", limit, kStart, 1).allowed);
}

TEST(MemoryStore, FloodOfNewKeysNeverForgetsALiveKey) {
    // The users' case, scaled down: a spent key, then ten times the capacity in new keys.
    Store store(kMinMemoryCapacity);
    const Limit limit = limit_of(Algorithm::kFixedWindow, 3, 3600 * kMicrosPerSecond);
    for (int i = 0; i < 4; ++i)
        store.decide("victim", limit, kStart, 1);
    std::int64_t allowed = 0;
    for (int i = 0; i < 10 * kMinMemoryCapacity; ++i)
        allowed += store.decide("flood-" + std::to_string(i), limit, kStart + 1000, 1).allowed;
    const MemoryStats totals = store.totals();
    EXPECT_EQ(totals.evictions, 0);
    EXPECT_EQ(totals.entries, kMinMemoryCapacity);
    EXPECT_EQ(allowed, kMinMemoryCapacity - 1);
    EXPECT_EQ(totals.refusals, 10 * kMinMemoryCapacity - allowed);
    EXPECT_EQ(totals.full_partitions, kMemoryPartitions);
    const Decision victim = store.decide("victim", limit, kStart + 2000, 1, Action::kPeek);
    EXPECT_FALSE(victim.allowed);
    EXPECT_EQ(victim.remaining, 0);
}

TEST(MemoryStore, EvictionTakesOnlyTheSameDatabase) {
    Store store(kMinMemoryCapacity);
    const int a = store->database_index(16384);
    const int b = store->database_index(16385);
    EXPECT_NE(a, b);
    EXPECT_EQ(store->database_index(16384), a);  // a row per database, found again
    const int slots = static_cast<int>(store->stats(0).capacity);
    const std::vector<std::string> keys = store.keys_in(0, 2 * slots);
    const Limit limit = limit_of(Algorithm::kFixedWindow, 5, kMicrosPerMinute);
    // Database A holds half of the partition, B the other half, A's keys the least recent.
    for (int i = 0; i < slots; ++i)
        store.decide(keys[i], limit, kStart, 1, Action::kConsume, evicting(i < slots / 2 ? a : b));
    // B's flood, even when told to evict, takes only B's keys.
    for (int i = slots; i < 2 * slots; ++i)
        store.decide(keys[i], limit, kStart, 1, Action::kConsume, evicting(b));
    EXPECT_EQ(store->database_stats(a).entries, slots / 2);
    EXPECT_EQ(store->database_stats(a).evictions, 0);
    EXPECT_EQ(store->database_stats(b).evictions, slots);
    for (int i = 0; i < slots / 2; ++i)
        EXPECT_EQ(store.decide(keys[i], limit, kStart, 0, Action::kPeek, evicting(a)).remaining, 4);
    // A partition full of B's keys refuses A's new key even with evict: none of them is A's.
    Store other(kMinMemoryCapacity);
    const int oa = other->database_index(1);
    const int ob = other->database_index(2);
    for (int i = 0; i < slots; ++i)
        other.decide(keys[i], limit, kStart, 1, Action::kConsume, evicting(ob));
    EXPECT_FALSE(
        other.decide(keys[slots], limit, kStart, 1, Action::kConsume, evicting(oa)).allowed);
    EXPECT_EQ(other->last_room().shortage, Shortage::kPartitionFull);
    EXPECT_EQ(other->database_stats(oa).refusals, 1);
    EXPECT_EQ(other->database_stats(ob).evictions, 0);
}

TEST(MemoryStore, DatabaseShareBoundsItsKeys) {
    Store store(kMinMemoryCapacity);
    Tenant small;
    small.database = store->database_index(7);
    small.share = 100;
    Tenant big;
    big.database = store->database_index(8);
    const Limit limit = limit_of(Algorithm::kFixedWindow, 5, kMicrosPerMinute);
    int allowed = 0;
    for (int i = 0; i < 300; ++i)
        allowed += store.decide("s" + std::to_string(i), limit, kStart, 1, Action::kConsume, small)
                       .allowed;
    EXPECT_EQ(allowed, 100);
    EXPECT_EQ(store->database_stats(small.database).entries, 100);
    EXPECT_EQ(store->database_stats(small.database).refusals, 200);
    EXPECT_EQ(store->last_room().shortage, Shortage::kShareFull);
    // Its existing keys go on counting; another database is not held by its share.
    EXPECT_TRUE(store.decide("s0", limit, kStart, 1, Action::kConsume, small).allowed);
    for (int i = 0; i < 300; ++i)
        ASSERT_TRUE(
            store.decide("b" + std::to_string(i), limit, kStart, 1, Action::kConsume, big).allowed);
    // With evict, a database at its share takes its own least recently used key of the new
    // key's partition.
    small.evict = true;
    const int partition = MemoryStore::partition_of(store.hash("s1"));
    const std::string fresh = store.keys_in(partition, 1000).back();
    EXPECT_TRUE(store.decide(fresh, limit, kStart, 1, Action::kConsume, small).allowed);
    EXPECT_EQ(store->database_stats(small.database).entries, 100);
    EXPECT_EQ(store->database_stats(small.database).evictions, 1);
    EXPECT_EQ(store->database_stats(big.database).evictions, 0);
    // Its expired keys no longer count against it once freed.
    small.evict = false;
    for (int p = 0; p < kMemoryPartitions; ++p)
        store->expire(p, kStart + kMicrosPerMinute);
    EXPECT_EQ(store->database_stats(small.database).entries, 0);
    EXPECT_TRUE(
        store.decide("s-later", limit, kStart + kMicrosPerMinute, 1, Action::kConsume, small)
            .allowed);
}

TEST(MemoryStore, SlidingWindowOfAnyLimitDecidesLikeTheCore) {
    // Logs up to kMaxSlidingLog entries: in the slot up to kMemoryLogCapacity, beyond in a
    // block, given back when the log shrinks and when the key goes.
    Store store(kMinMemoryCapacity);
    std::mt19937_64 random(7);
    for (std::int64_t n :
         {std::int64_t{6}, std::int64_t{10}, std::int64_t{1000}, std::int64_t{100000}}) {
        const Limit limit = limit_of(Algorithm::kSlidingWindow, n, kMicrosPerMinute);
        std::map<std::string, KeyState> model;
        Micros now = kStart;
        for (int call = 0; call < 5000; ++call) {
            const std::string key = "sw" + std::to_string(n) + "-" + std::to_string(random() % 8);
            now += static_cast<Micros>(random() % 2000000);
            const std::int64_t cost =
                1 + static_cast<std::int64_t>(random() % std::min<std::int64_t>(n, 50));
            const Action action = random() % 10 == 0 ? Action::kRefund : Action::kConsume;
            const Decision expected = decide(limit, model[key], now, cost, action);
            expect_same(store.decide(key, limit, now, cost, action), expected,
                        "limit " + std::to_string(n) + " call " + std::to_string(call));
        }
    }
    EXPECT_GT(store.totals().log_blocks_used, 0);
    EXPECT_EQ(store.totals().refusals, 0);
    // Reset and expiry give the blocks back.
    for (int p = 0; p < kMemoryPartitions; ++p)
        store->expire(p, kStart + 365LL * 24 * 3600 * kMicrosPerSecond);
    EXPECT_EQ(store.totals().log_blocks_used, 0);
    EXPECT_EQ(store.totals().entries, 0);
}

TEST(MemoryStore, FullLogPoolRefusesOrEvictsALogOwner) {
    // One block per partition: the second long log of a partition finds the pool full.
    Store store(kMinMemoryCapacity, kMemoryPartitions);
    const std::vector<std::string> keys = store.keys_in(3, 3);
    const Limit limit = limit_of(Algorithm::kSlidingWindow, 100, kMicrosPerMinute);
    auto fill = [&](const std::string& key, const Tenant& tenant) {
        Decision last;
        for (int i = 0; i < kMemoryLogCapacity + 1; ++i)
            last = store.decide(key, limit, kStart + i * 1000, 1, Action::kConsume, tenant);
        return last;
    };
    EXPECT_TRUE(fill(keys[0], Tenant{}).allowed);
    EXPECT_EQ(store->stats(3).log_blocks_used, 1);
    // The second key keeps its five inline entries; its sixth is refused, nothing changed.
    const Decision refused = fill(keys[1], Tenant{});
    EXPECT_FALSE(refused.allowed);
    EXPECT_EQ(store->last_room().shortage, Shortage::kLogPoolFull);
    EXPECT_EQ(store.decide(keys[1], limit, kStart + 10000, 0, Action::kPeek).remaining,
              100 - kMemoryLogCapacity);
    EXPECT_EQ(store.decide(keys[0], limit, kStart + 10000, 0, Action::kPeek).remaining,
              100 - kMemoryLogCapacity - 1);
    // With evict, the least recently used key holding a block goes.
    const Decision evicted = fill(keys[2], evicting());
    EXPECT_TRUE(evicted.allowed);
    EXPECT_EQ(store->stats(3).evictions, 1);
    EXPECT_EQ(store.decide(keys[0], limit, kStart + 10000, 0, Action::kPeek).remaining, 100);
    EXPECT_EQ(store.decide(keys[1], limit, kStart + 10000, 0, Action::kPeek).remaining,
              100 - kMemoryLogCapacity);
}

TEST(MemoryStore, ReserveHoldsRoomForSeveralKeys) {
    Store store(kMinMemoryCapacity);
    const int slots = static_cast<int>(store->stats(5).capacity);
    const std::vector<std::string> keys = store.keys_in(5, slots + 2);
    const Limit limit = limit_of(Algorithm::kFixedWindow, 5, kMicrosPerMinute);
    for (int i = 0; i < slots - 1; ++i)
        store.decide(keys[i], limit, kStart, 1);
    // One slot left: two new keys cannot both have one, and nothing is held on failure.
    MemoryStore::Need need;
    need.slots = 2;
    const KeyHash keep[2] = {store.hash(keys[slots - 1]), store.hash(keys[slots])};
    EXPECT_FALSE(store->reserve(5, kStart, Tenant{}, need, keep, 2));
    EXPECT_EQ(store->last_room().shortage, Shortage::kPartitionFull);
    need.slots = 1;
    EXPECT_TRUE(store->reserve(5, kStart, Tenant{}, need, keep, 1));
    EXPECT_EQ(store->database_stats(0).entries, slots);  // the held slot counts
    store->release(5, Tenant{});
    EXPECT_EQ(store->database_stats(0).entries, slots - 1);
    EXPECT_EQ(store->need_for_consume(5, keep[0], limit, 1).slots, 1);
    EXPECT_EQ(store->need_for_consume(5, store.hash(keys[0]), limit, 1).slots, 0);
}

TEST(MemoryStore, EveryLimitIsAcceptedNow) {
    EXPECT_NO_THROW(
        require_memory_limit(limit_of(Algorithm::kSlidingWindow, 100000, kMicrosPerMinute)));
}

TEST(MemoryStore, SavedKeysRestoreWithStateAndOrder) {
    Store before(kMinMemoryCapacity);
    const int db = before->database_index(4242);
    Tenant tenant;
    tenant.database = db;
    const Limit limit = limit_of(Algorithm::kSlidingWindow, 1000, kMicrosPerMinute);
    for (int i = 0; i < 300; ++i)
        for (int call = 0; call <= i % 9; ++call)  // some logs longer than the slot holds
            before.decide("k" + std::to_string(i), limit, kStart + call * 1000, 1, Action::kConsume,
                          tenant);
    before.block("blocked", kStart + 30 * 24 * 3600 * kMicrosPerSecond, kStart, tenant);
    std::vector<SavedSlot> saved;
    for (int p = 0; p < kMemoryPartitions; ++p)
        before->for_each_oldest_first(p, [&](const SavedSlot& s) { saved.push_back(s); });
    ASSERT_EQ(saved.size(), 301u);
    for (const SavedSlot& s : saved) {
        EXPECT_TRUE(MemoryStore::plausible(s));
        EXPECT_EQ(s.database, 4242u);
    }
    EXPECT_GT(before.totals().log_blocks_used, 0);

    Store after(kMinMemoryCapacity, before->secret());
    for (const SavedSlot& s : saved)
        EXPECT_TRUE(after->restore(s, kStart));
    for (int i = 0; i < 300; ++i) {
        const std::string key = "k" + std::to_string(i);
        expect_same(after.decide(key, limit, kStart + 5000, 1, Action::kPeek),
                    before.decide(key, limit, kStart + 5000, 1, Action::kPeek), key);
    }
    EXPECT_EQ(after.totals().log_blocks_used, before.totals().log_blocks_used);
    // The database came back with its keys: the same OID's row counts them.
    EXPECT_EQ(after->database_stats(after->database_index(4242)).entries, 301);
    // The LRU order came back too: both stores list each partition in the same order.
    for (int p = 0; p < kMemoryPartitions; ++p) {
        std::vector<KeyHash> a, b;
        before->for_each_oldest_first(p, [&](const SavedSlot& s) { a.push_back(s.key); });
        after->for_each_oldest_first(p, [&](const SavedSlot& s) { b.push_back(s.key); });
        EXPECT_EQ(a, b);
    }
    EXPECT_FALSE(after.decide("blocked", limit, kStart + 5000, 1, Action::kPeek).allowed);
    // The saved form reads back as the same state.
    KeyState state;
    load_saved_state(saved.back(), state);
    EXPECT_EQ(state.algorithm, static_cast<Algorithm>(saved.back().algorithm));
    // Expired keys are not restored.
    Store later(kMinMemoryCapacity, before->secret());
    EXPECT_FALSE(later->restore(saved.front(), kStart + 2 * kMicrosPerMinute));
    EXPECT_EQ(later.totals().entries, 0);
    // A store with fewer log blocks keeps what fits, the most recently used first.
    Store smaller(kMinMemoryCapacity, 0, before->secret());
    int restored = 0;
    for (const SavedSlot& s : saved)
        restored += smaller->restore(s, kStart);
    EXPECT_EQ(restored, 301 - before.totals().log_blocks_used);
}

// What the server writes to the WAL after each change (saved()) and replays (restore(), or a
// reset when the key has no slot): a store that replays every change of another, in order,
// decides like it on every key, whatever the algorithms, blocks and resets in between.
TEST(MemoryStore, ReplayingEachChangedKeyRebuildsTheStore) {
    const Algorithm kAlgorithms[] = {Algorithm::kFixedWindow,   Algorithm::kRollingWindow,
                                     Algorithm::kSlidingWindow, Algorithm::kSlidingWindowCounter,
                                     Algorithm::kTokenBucket,   Algorithm::kGcra};
    std::mt19937_64 rng(209);
    Store primary(kMinMemoryCapacity);
    Store replica(kMinMemoryCapacity, primary->secret());
    Tenant tenant;
    tenant.database = primary->database_index(4242);
    SavedSlot saved;
    Micros now = kStart;
    // A state that has expired decides like no state: the replica forgets the key.
    auto replay = [&](const std::string& key) {
        const KeyHash h = primary.hash(key);
        const int partition = MemoryStore::partition_of(h);
        if (primary->saved(partition, h, saved) && saved.expires_at > now)
            ASSERT_TRUE(replica->restore(saved, now));
        else
            replica->reset(partition, h);
    };
    for (int step = 0; step < 20000; ++step) {
        now += static_cast<Micros>(rng() % 50000);
        const int k = static_cast<int>(rng() % 200);
        const std::string key = "k" + std::to_string(k);
        const Limit limit = limit_of(kAlgorithms[k % 6], 5 + k % 7, kMicrosPerMinute);
        switch (rng() % 20) {
            case 0: {
                const KeyHash h = primary.hash(key);
                primary->reset(MemoryStore::partition_of(h), h);
                break;
            }
            case 1:
                primary.block(key, now + static_cast<Micros>(rng() % kMicrosPerMinute), now,
                              tenant);
                break;
            case 2:
                primary.decide(key, limit, now, 1, Action::kRefund, tenant);
                break;
            default:
                primary.decide(key, limit, now, 1 + static_cast<std::int64_t>(rng() % 2),
                               Action::kConsume, tenant);
                break;
        }
        replay(key);
    }
    for (int k = 0; k < 200; ++k) {
        const std::string key = "k" + std::to_string(k);
        const Limit limit = limit_of(kAlgorithms[k % 6], 5 + k % 7, kMicrosPerMinute);
        expect_same(replica.decide(key, limit, now, 1, Action::kPeek, tenant),
                    primary.decide(key, limit, now, 1, Action::kPeek, tenant), key);
    }
}

TEST(MemoryStore, ImplausibleSavedSlotsAreRefused) {
    SavedSlot good;
    good.algorithm = static_cast<std::int16_t>(Algorithm::kSlidingWindow);
    good.log_count = 2;
    good.expires_at = kStart + 1;
    good.log[0] = LogEntry{kStart - 10, 1};
    good.log[1] = LogEntry{kStart - 5, 2};
    EXPECT_TRUE(MemoryStore::plausible(good));
    SavedSlot longer = good;
    longer.log_count = kMaxSlidingLog;
    for (int i = 0; i < kMaxSlidingLog; ++i)
        longer.log[i] = LogEntry{kStart - 100 + i, 1000};
    EXPECT_TRUE(MemoryStore::plausible(longer));

    SavedSlot bad = good;
    bad.algorithm = 99;
    EXPECT_FALSE(MemoryStore::plausible(bad));
    bad = longer;
    bad.log_count = kMaxSlidingLog + 1;
    EXPECT_FALSE(MemoryStore::plausible(bad));
    bad = good;
    bad.log[1].at = bad.log[0].at;  // not strictly increasing
    EXPECT_FALSE(MemoryStore::plausible(bad));
    bad = good;
    bad.log[0].units = 0;
    EXPECT_FALSE(MemoryStore::plausible(bad));
    bad = good;
    bad.log[0].units = std::int64_t{INT32_MAX} + 1;
    EXPECT_FALSE(MemoryStore::plausible(bad));
    bad = good;
    bad.algorithm = static_cast<std::int16_t>(Algorithm::kFixedWindow);  // a log it cannot have
    EXPECT_FALSE(MemoryStore::plausible(bad));

    Store store(kMinMemoryCapacity);
    bad = good;
    bad.algorithm = 99;
    EXPECT_FALSE(store->restore(bad, kStart));
    EXPECT_EQ(store.totals().entries, 0);
}

}  // namespace
}  // namespace ratelimit
