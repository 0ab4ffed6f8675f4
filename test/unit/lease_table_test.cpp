// The lease table against a model: random acquires, releases, session ends and clock moves on a
// few keys, every answer compared with what a plain list of leases says.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <map>
#include <optional>
#include <random>
#include <vector>

#include "ratelimit/lease_table.hpp"

namespace ratelimit {
namespace {

struct ModelLease {
    KeyHash key;
    std::uint64_t session = 0;
    Micros expires_at = 0;
    std::int64_t units = 0;
};

struct Model {
    std::map<std::uint64_t, ModelLease> leases;  // by identifier

    static bool live(const ModelLease& lease, Micros now) {
        return lease.expires_at == 0 || now < lease.expires_at;
    }
    std::int64_t in_flight(const KeyHash& key, Micros now, std::optional<Micros>* next) const {
        std::int64_t units = 0;
        std::optional<Micros> first;
        for (const auto& [id, lease] : leases) {
            if (lease.key != key || !live(lease, now))
                continue;
            units += lease.units;
            if (lease.expires_at != 0 && (!first || lease.expires_at < *first))
                first = lease.expires_at;
        }
        *next = first ? std::optional<Micros>(*first - now) : std::nullopt;
        return units;
    }
};

class LeaseTableTest : public ::testing::Test {
  protected:
    std::vector<unsigned char> block_;
    LeaseTable make(std::int64_t capacity) {
        block_.assign(LeaseTable::bytes_needed(capacity), 0);
        return LeaseTable::create(block_.data(), capacity);
    }
};

KeyHash key_of(int i) {
    KeyHash key;
    key.high = 0x9e3779b97f4a7c15ULL * static_cast<std::uint64_t>(i + 1);
    key.low = 0xc2b2ae3d27d4eb4fULL * static_cast<std::uint64_t>(i + 7);
    return key;
}

TEST_F(LeaseTableTest, AtMostTheLimitInFlightAndEachReleaseGivesItsUnitsBack) {
    LeaseTable table = make(kMinLeaseCapacity * 4);
    const KeyHash key = key_of(0);
    const int p = LeaseTable::partition_of(key);
    const LeaseAnswer a = table.acquire(p, key, 2, 1, 1000, 0, 7, 11);
    const LeaseAnswer b = table.acquire(p, key, 2, 1, 1000, 0, 7, 12);
    const LeaseAnswer c = table.acquire(p, key, 2, 1, 1000, 0, 7, 13);
    ASSERT_TRUE(a.allowed);
    ASSERT_TRUE(b.allowed);
    EXPECT_EQ(b.in_flight, 2);
    EXPECT_FALSE(c.allowed);
    EXPECT_EQ(c.in_flight, 2);
    EXPECT_FALSE(c.retry_after.has_value()) << "no lease has a hold time: no expected release";
    EXPECT_NE(a.id, b.id);
    EXPECT_EQ(table.partition_of_lease(a.id), p);
    EXPECT_TRUE(table.release(p, a.id, 2000));
    EXPECT_FALSE(table.release(p, a.id, 2000)) << "released twice";
    EXPECT_EQ(table.in_flight(p, key, 2000), 1);
    EXPECT_TRUE(table.acquire(p, key, 2, 1, 2000, 0, 7, 14).allowed);
}

TEST_F(LeaseTableTest, AMaximumHoldTimeEndsTheLeaseAndIsTheExpectedRelease) {
    LeaseTable table = make(kMinLeaseCapacity);
    const KeyHash key = key_of(1);
    const int p = LeaseTable::partition_of(key);
    const LeaseAnswer held = table.acquire(p, key, 1, 1, 1000, 31000, 1, 5);
    ASSERT_TRUE(held.allowed);
    const LeaseAnswer denied = table.acquire(p, key, 1, 1, 11000, 0, 2, 6);
    EXPECT_FALSE(denied.allowed);
    ASSERT_TRUE(denied.retry_after.has_value());
    EXPECT_EQ(*denied.retry_after, 20000);
    EXPECT_TRUE(table.acquire(p, key, 1, 1, 31000, 0, 2, 7).allowed) << "the hold time has passed";
    EXPECT_FALSE(table.release(p, held.id, 31000)) << "a lease past its hold time is not held";
}

TEST_F(LeaseTableTest, ASessionsEndReleasesOnlyItsLeases) {
    LeaseTable table = make(kMinLeaseCapacity * 4);
    const KeyHash key = key_of(2);
    const int p = LeaseTable::partition_of(key);
    ASSERT_TRUE(table.acquire(p, key, 3, 1, 0, 0, 100, 1).allowed);
    ASSERT_TRUE(table.acquire(p, key, 3, 1, 0, 0, 200, 2).allowed);
    ASSERT_TRUE(table.acquire(p, key, 3, 1, 0, 0, 100, 3).allowed);
    EXPECT_EQ(table.release_session(p, 100), 2);
    EXPECT_EQ(table.in_flight(p, key, 0), 1);
}

TEST_F(LeaseTableTest, ATransactionsEndReleasesOnlyWhatItsSessionHolds) {
    LeaseTable table = make(kMinLeaseCapacity);  // one slot per partition: the slot is reused
    const KeyHash key = key_of(5);
    const int p = LeaseTable::partition_of(key);
    const LeaseAnswer mine = table.acquire(p, key, 1, 1, 0, 0, 10, 1);
    ASSERT_TRUE(mine.allowed);
    table.release_own(p, mine.id, 20);
    EXPECT_EQ(table.in_flight(p, key, 0), 1) << "another session's end leaves the lease";
    ASSERT_TRUE(table.release(p, mine.id, 0)) << "released elsewhere, by its identifier";
    const LeaseAnswer next = table.acquire(p, key, 1, 1, 0, 0, 20, 1);  // same slot, same bits
    ASSERT_TRUE(next.allowed);
    ASSERT_EQ(next.id, mine.id) << "the same slot and random bits give the same identifier";
    table.release_own(p, mine.id, 10);
    EXPECT_EQ(table.in_flight(p, key, 0), 1) << "the first holder's end cannot end the new lease";
    table.release_own(p, next.id, 20);
    EXPECT_EQ(table.in_flight(p, key, 0), 0);
}

TEST_F(LeaseTableTest, AFullPartitionRefusesWithoutHoldingAnything) {
    LeaseTable table = make(kMinLeaseCapacity);  // one slot per partition
    const KeyHash a = key_of(3);
    const int p = LeaseTable::partition_of(a);
    KeyHash b = key_of(4);
    b.low = a.low;  // same partition
    b.high ^= 1;
    ASSERT_TRUE(table.acquire(p, a, 5, 1, 0, 0, 1, 1).allowed);
    const LeaseAnswer full = table.acquire(p, b, 5, 1, 0, 0, 1, 2);
    EXPECT_FALSE(full.allowed);
    EXPECT_TRUE(full.table_full);
    EXPECT_EQ(table.in_flight(p, b, 0), 0);
}

TEST_F(LeaseTableTest, IdentifiersThatAreNotTheTablesAreRefused) {
    LeaseTable table = make(kMinLeaseCapacity * 2);
    EXPECT_EQ(table.partition_of_lease(0), -1);
    EXPECT_EQ(table.partition_of_lease(12345), -1) << "no random bits";
    EXPECT_EQ(table.partition_of_lease((1ULL << 32) | (70ULL << 16)), -1) << "no partition 70";
    EXPECT_EQ(table.partition_of_lease((1ULL << 32) | 5), -1) << "no slot 5";
    EXPECT_FALSE(table.release(0, (1ULL << 32) | 1, 0));
}

TEST_F(LeaseTableTest, RandomOperationsMatchTheModel) {
    constexpr int kKeys = 6;
    constexpr std::int64_t kLimit = 4;
    LeaseTable table = make(kMinLeaseCapacity * 16);
    Model model;
    std::mt19937_64 random(20261125);
    Micros now = 1000000;
    std::vector<std::uint64_t> ids;
    for (int step = 0; step < 20000; ++step) {
        const int op = static_cast<int>(random() % 10);
        const KeyHash key = key_of(static_cast<int>(random() % kKeys));
        const int p = LeaseTable::partition_of(key);
        if (op < 5) {
            const std::int64_t units = 1 + static_cast<std::int64_t>(random() % 2);
            const Micros expires = random() % 3 == 0 ? now + 1 + random() % 5000 : 0;
            const std::uint64_t session = 1 + random() % 4;
            std::optional<Micros> next;
            const std::int64_t held = model.in_flight(key, now, &next);
            const LeaseAnswer answer = table.acquire(p, key, kLimit, units, now, expires, session,
                                                     static_cast<std::uint32_t>(random()));
            ASSERT_FALSE(answer.table_full) << "16 slots per partition hold every lease here";
            ASSERT_EQ(answer.allowed, held + units <= kLimit) << "step " << step;
            if (answer.allowed) {
                ASSERT_EQ(answer.in_flight, held + units);
                ASSERT_EQ(model.leases.count(answer.id), 0u) << "identifiers are unique";
                model.leases[answer.id] = ModelLease{key, session, expires, units};
                ids.push_back(answer.id);
            } else {
                ASSERT_EQ(answer.in_flight, held);
                ASSERT_EQ(answer.retry_after, next);
            }
        } else if (op < 8 && !ids.empty()) {
            const std::uint64_t id = ids[random() % ids.size()];
            const auto found = model.leases.find(id);
            const bool held = found != model.leases.end() && Model::live(found->second, now);
            ASSERT_EQ(table.release(table.partition_of_lease(id), id, now), held);
            if (found != model.leases.end())
                model.leases.erase(found);
        } else if (op == 8) {
            const std::uint64_t session = 1 + random() % 4;
            for (int q = 0; q < kLeasePartitions; ++q)
                table.release_session(q, session);
            for (auto it = model.leases.begin(); it != model.leases.end();)
                it = it->second.session == session ? model.leases.erase(it) : std::next(it);
        } else {
            now += static_cast<Micros>(random() % 2000);
        }
        // A lease past its hold time is gone: the table may reuse its slot.
        for (auto it = model.leases.begin(); it != model.leases.end();)
            it = Model::live(it->second, now) ? std::next(it) : model.leases.erase(it);
        for (int k = 0; k < kKeys; ++k) {
            const KeyHash each = key_of(k);
            std::optional<Micros> next_model, next_table;
            ASSERT_EQ(table.in_flight(LeaseTable::partition_of(each), each, now, &next_table),
                      model.in_flight(each, now, &next_model))
                << "step " << step;
            ASSERT_EQ(next_table, next_model);
        }
    }
}

}  // namespace
}  // namespace ratelimit
