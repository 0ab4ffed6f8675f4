// The memory store against a plain map of KeyStates decided by the same core: while nothing is
// evicted the two must agree on every decision; eviction takes expired keys first, then the
// least recently used; saving and restoring keeps states and LRU order.
#include <gtest/gtest.h>

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
        : block_(MemoryStore::bytes_needed(capacity) / 8 + 1),
          store_(MemoryStore::create(block_.data(), capacity, secret)) {}

    MemoryStore& operator*() { return store_; }
    MemoryStore* operator->() { return &store_; }

    KeyHash hash(const std::string& key) const {
        return hash_key(store_.secret(), key.data(), key.size());
    }

    Decision decide(const std::string& key, const Limit& limit, Micros now, std::int64_t cost,
                    Action action = Action::kConsume) {
        const KeyHash h = hash(key);
        return store_.decide(MemoryStore::partition_of(h), h, limit, now, cost, action, scratch_);
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

TEST(MemoryStore, EntryFitsTheBudget) {
    // A slot plus its bucket head, plus the fixed headers spread over the smallest store.
    const std::int64_t capacity = kMinMemoryCapacity;
    EXPECT_LE(MemoryStore::bytes_needed(capacity), static_cast<std::size_t>(capacity) * 128);
    EXPECT_LE(MemoryStore::bytes_needed(100000), static_cast<std::size_t>(100000) * 125);
}

TEST(MemoryStore, DecidesLikeTheCoreOnEveryAlgorithm) {
    const std::vector<Limit> limits = {
        limit_of(Algorithm::kFixedWindow, 5, 1000 * 1000),
        limit_of(Algorithm::kRollingWindow, 5, 1000 * 1000),
        limit_of(Algorithm::kSlidingWindow, kMemoryLogCapacity, 1000 * 1000),
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
            const std::int64_t cost = static_cast<std::int64_t>(random() % 3);
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
    store.decide(keys[slots], short_limit, kStart + 2 * 1000 * 1000, 1);
    EXPECT_EQ(store->stats(0).evictions, 0);
    EXPECT_EQ(store->stats(0).expired, slots - 1);
    EXPECT_EQ(store.decide(keys[0], long_limit, kStart + 2 * 1000 * 1000, 0).remaining, 4);
}

TEST(MemoryStore, FullPartitionEvictsTheLeastRecentlyUsed) {
    Store store(kMinMemoryCapacity);
    const int slots = static_cast<int>(store->stats(0).capacity);
    const std::vector<std::string> keys = store.keys_in(0, slots + 2);
    const Limit limit = limit_of(Algorithm::kFixedWindow, 5, kMicrosPerMinute);
    for (int i = 0; i < slots; ++i)
        store.decide(keys[i], limit, kStart, 1);
    // keys[0] is used again (a peek counts as use), so keys[1] is now the least recent.
    store.decide(keys[0], limit, kStart, 1, Action::kPeek);
    store.decide(keys[slots], limit, kStart, 1);
    EXPECT_EQ(store->stats(0).evictions, 1);
    EXPECT_EQ(store->stats(0).entries, slots);
    EXPECT_EQ(store.decide(keys[0], limit, kStart, 0, Action::kPeek).remaining, 4);
    EXPECT_EQ(store.decide(keys[1], limit, kStart, 0, Action::kPeek).remaining, 5);  // fresh
}

TEST(MemoryStore, ManyKeysIntoASmallStoreNeverLoseAKeyUsedOften) {
    Store store(kMinMemoryCapacity);
    const Limit limit = limit_of(Algorithm::kFixedWindow, 1000000, kMicrosPerMinute);
    std::int64_t hot_calls = 0;
    for (int i = 0; i < 200000; ++i) {
        store.decide("cold-" + std::to_string(i), limit, kStart, 1);
        if (i % 100 == 0) {
            ++hot_calls;
            ASSERT_EQ(store.decide("hot", limit, kStart, 1).remaining, 1000000 - hot_calls);
        }
        ASSERT_LE(store.totals().entries, kMinMemoryCapacity);
    }
    const MemoryStats totals = store.totals();
    EXPECT_EQ(totals.entries + totals.evictions + totals.expired, 200000 + 1);
    EXPECT_GT(totals.evictions, 200000 - kMinMemoryCapacity - 1);
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

TEST(MemoryStore, SlidingWindowLimitIsBoundedBySlotSize) {
    EXPECT_NO_THROW(require_memory_limit(
        limit_of(Algorithm::kSlidingWindow, kMemoryLogCapacity, kMicrosPerMinute)));
    EXPECT_NO_THROW(
        require_memory_limit(limit_of(Algorithm::kSlidingWindowCounter, 1000, kMicrosPerMinute)));
    try {
        require_memory_limit(
            limit_of(Algorithm::kSlidingWindow, kMemoryLogCapacity + 1, kMicrosPerMinute));
        FAIL() << "expected an ArgumentError";
    } catch (const ArgumentError& e) {
        EXPECT_EQ(e.argument(), "p_limit");
        EXPECT_EQ(e.kind(), ErrorKind::kInvalidArgument);
    }
}

TEST(MemoryStore, SavedKeysRestoreWithStateAndOrder) {
    Store before(kMinMemoryCapacity);
    const Limit limit = limit_of(Algorithm::kSlidingWindow, kMemoryLogCapacity, kMicrosPerMinute);
    for (int i = 0; i < 300; ++i)
        for (int call = 0; call <= i % 4; ++call)
            before.decide("k" + std::to_string(i), limit, kStart + call * 1000, 1);
    std::vector<SavedSlot> saved;
    for (int p = 0; p < kMemoryPartitions; ++p)
        before->for_each_oldest_first(p, [&](const SavedSlot& s) { saved.push_back(s); });
    ASSERT_EQ(saved.size(), 300u);

    Store after(kMinMemoryCapacity, before->secret());
    for (const SavedSlot& s : saved)
        EXPECT_TRUE(after->restore(s, kStart));
    for (int i = 0; i < 300; ++i) {
        const std::string key = "k" + std::to_string(i);
        expect_same(after.decide(key, limit, kStart + 5000, 1, Action::kPeek),
                    before.decide(key, limit, kStart + 5000, 1, Action::kPeek), key);
    }
    // The LRU order came back too: both stores list each partition in the same order.
    for (int p = 0; p < kMemoryPartitions; ++p) {
        std::vector<KeyHash> a, b;
        before->for_each_oldest_first(p, [&](const SavedSlot& s) { a.push_back(s.key); });
        after->for_each_oldest_first(p, [&](const SavedSlot& s) { b.push_back(s.key); });
        EXPECT_EQ(a, b);
    }
    // Expired keys are not restored.
    Store later(kMinMemoryCapacity, before->secret());
    EXPECT_FALSE(later->restore(saved.front(), kStart + 2 * kMicrosPerMinute));
    EXPECT_EQ(later.totals().entries, 0);
}

TEST(MemoryStore, ImplausibleSavedSlotsAreRefused) {
    SavedSlot good;
    good.algorithm = static_cast<std::int16_t>(Algorithm::kSlidingWindow);
    good.log_count = 2;
    good.expires_at = kStart + 1;
    good.state.log.at[0] = kStart - 10;
    good.state.log.at[1] = kStart - 5;
    good.state.log.units[0] = 1;
    good.state.log.units[1] = 2;
    EXPECT_TRUE(MemoryStore::plausible(good));

    SavedSlot bad = good;
    bad.algorithm = 99;
    EXPECT_FALSE(MemoryStore::plausible(bad));
    bad = good;
    bad.log_count = kMemoryLogCapacity + 1;
    EXPECT_FALSE(MemoryStore::plausible(bad));
    bad = good;
    bad.state.log.at[1] = bad.state.log.at[0];  // not strictly increasing
    EXPECT_FALSE(MemoryStore::plausible(bad));
    bad = good;
    bad.state.log.units[0] = 0;
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
