// The reservation table: identifiers, the life of a slot through the transactions that make
// and settle it, expiry, who may settle, capacity; and random histories against a model.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <map>
#include <random>
#include <vector>

#include "ratelimit/reservation_table.hpp"

namespace ratelimit {
namespace {

constexpr std::uint32_t kDatabase = 5;
constexpr std::uint32_t kRole = 10;
constexpr std::uint64_t kSession = 77;
constexpr std::uint64_t kOtherSession = 88;

Reservation reservation_of(Micros expires_at, std::int64_t estimate = 4) {
    Reservation made;
    made.database = kDatabase;
    made.role = kRole;
    made.engine = Engine::kMemory;
    made.limit = Limit{Algorithm::kGcra, 10, 60 * kMicrosPerSecond, 12};
    made.estimate = estimate;
    made.expires_at = expires_at;
    const char key[] = "tenant:42";
    made.key_length = sizeof key - 1;
    std::memcpy(made.key, key, sizeof key - 1);
    return made;
}

class ReservationTableTest : public ::testing::Test {
  protected:
    std::vector<unsigned char> block_;
    ReservationTable make(std::int64_t capacity) {
        block_.assign(ReservationTable::bytes_needed(capacity), 0);
        return ReservationTable::create(block_.data(), capacity);
    }

    // A reservation made and committed in `partition`, open until `expires_at`.
    std::uint64_t open(ReservationTable& table, int partition, Micros now, Micros expires_at,
                       std::uint32_t random = 12345) {
        const std::uint64_t id = table.take(partition, now, kSession, random);
        EXPECT_NE(id, 0u);
        EXPECT_TRUE(table.fill(partition, id, kSession, reservation_of(expires_at)));
        table.commit(partition, id, kSession);
        return id;
    }

    bool claim(ReservationTable& table, int partition, std::uint64_t id, Micros now,
               std::uint64_t session = kSession, std::uint32_t role = kRole,
               std::uint32_t database = kDatabase, Reservation* made = nullptr,
               ReservationState* previous = nullptr) {
        Reservation ignored;
        ReservationState was = ReservationState::kFree;
        return table.claim(partition, id, database, role, now, session,
                           made != nullptr ? made : &ignored,
                           previous != nullptr ? previous : &was);
    }
};

TEST_F(ReservationTableTest, IdentifiersNamePartitionAndSlotAndArePositive) {
    ReservationTable table = make(640);
    EXPECT_EQ(table.capacity(), 640);
    const std::uint64_t id = table.take(17, 0, kSession, 0xffffffffU);
    ASSERT_NE(id, 0u);
    EXPECT_EQ(id >> 63, 0u) << "positive as a bigint";
    EXPECT_EQ(table.partition_of(id), 17);
    EXPECT_EQ(table.partition_of(0), -1);
    EXPECT_EQ(table.partition_of(id & 0xffffffffULL), -1) << "no random bits: not an identifier";
    EXPECT_EQ(table.partition_of((1ULL << 32) | (64ULL << 16)), -1) << "partition 64";
    EXPECT_EQ(table.partition_of((1ULL << 32) | 10), -1) << "slot 10 of 10 per partition";
    EXPECT_EQ(table.partition_of(~0ULL), -1) << "negative as a bigint";
    // Zero random bits still make an identifier that is not 0.
    const std::uint64_t plain = table.take(0, 0, kSession, 0);
    EXPECT_NE(plain >> 32, 0u);
}

TEST_F(ReservationTableTest, PendingUntilCommittedAndDroppedByARollback) {
    ReservationTable table = make(64);
    const std::uint64_t id = table.take(3, 0, kSession, 99);
    ASSERT_TRUE(table.fill(3, id, kSession, reservation_of(1000)));
    EXPECT_FALSE(table.fill(3, id, kOtherSession, reservation_of(1000))) << "not its slot";
    EXPECT_FALSE(claim(table, 3, id, 0, kOtherSession)) << "another session: not made yet";
    EXPECT_EQ(table.live(3, 0), 1);
    table.roll_back(3, id, kSession, ReservationState::kFree);
    EXPECT_EQ(table.live(3, 0), 0);
    EXPECT_FALSE(claim(table, 3, id, 0)) << "a rolled-back reservation never was";
    table.commit(3, id, kSession);  // a late commit of a freed slot does nothing
    EXPECT_EQ(table.live(3, 0), 0);
}

TEST_F(ReservationTableTest, SettledOnceByTheRoleThatMadeIt) {
    ReservationTable table = make(64);
    const std::uint64_t id = open(table, 5, 0, 1000);
    EXPECT_FALSE(claim(table, 5, id, 10, kOtherSession, kRole + 1)) << "another role";
    EXPECT_FALSE(claim(table, 5, id, 10, kOtherSession, kRole, kDatabase + 1))
        << "another database";
    EXPECT_FALSE(claim(table, 5, id ^ (1ULL << 40), 10, kOtherSession)) << "a guessed id";
    EXPECT_FALSE(claim(table, 4, id, 10, kOtherSession)) << "the wrong partition";
    Reservation made;
    ReservationState previous = ReservationState::kFree;
    ASSERT_TRUE(claim(table, 5, id, 10, kOtherSession, kRole, kDatabase, &made, &previous))
        << "any session of the role";
    EXPECT_EQ(previous, ReservationState::kOpen);
    EXPECT_EQ(made.estimate, 4);
    EXPECT_EQ(made.key_text(), "tenant:42");
    EXPECT_EQ(made.limit.burst, 12);
    EXPECT_EQ(made.engine, Engine::kMemory);
    EXPECT_FALSE(claim(table, 5, id, 10)) << "being settled: no one else can";
    table.commit(5, id, kSession);  // not the settling session: nothing
    EXPECT_FALSE(claim(table, 5, id, 10));
    table.commit(5, id, kOtherSession);
    EXPECT_EQ(table.live(5, 10), 0);
    EXPECT_FALSE(claim(table, 5, id, 10, kOtherSession)) << "settled: gone";
}

TEST_F(ReservationTableTest, ASettleRolledBackReopensIt) {
    ReservationTable table = make(64);
    const std::uint64_t id = open(table, 9, 0, 1000);
    ReservationState previous = ReservationState::kFree;
    Reservation made;
    ASSERT_TRUE(claim(table, 9, id, 10, kOtherSession, kRole, kDatabase, &made, &previous));
    table.roll_back(9, id, kOtherSession, previous);
    ASSERT_TRUE(claim(table, 9, id, 20)) << "open again, for any session of the role";
    table.commit(9, id, kSession);
    EXPECT_EQ(table.live(9, 20), 0);
}

TEST_F(ReservationTableTest, SettledInTheTransactionThatMadeIt) {
    ReservationTable table = make(64);
    const std::uint64_t id = table.take(2, 0, kSession, 5);
    ASSERT_TRUE(table.fill(2, id, kSession, reservation_of(1000)));
    ReservationState previous = ReservationState::kFree;
    Reservation made;
    ASSERT_TRUE(claim(table, 2, id, 0, kSession, kRole, kDatabase, &made, &previous));
    EXPECT_EQ(previous, ReservationState::kPending);
    // Rolled back newest first: the settle, then the reserve.
    table.roll_back(2, id, kSession, previous);
    ASSERT_TRUE(claim(table, 2, id, 0, kSession, kRole, kDatabase, &made, &previous));
    table.roll_back(2, id, kSession, previous);
    table.roll_back(2, id, kSession, ReservationState::kFree);
    EXPECT_EQ(table.live(2, 0), 0);
}

TEST_F(ReservationTableTest, ExpiredAtItsHoldTimeAndItsSlotTakenAgain) {
    ReservationTable table = make(64);  // one slot per partition
    const std::uint64_t id = open(table, 7, 0, 1000);
    EXPECT_EQ(table.take(7, 999, kSession, 1), 0u) << "the partition is full";
    EXPECT_FALSE(claim(table, 7, id, 1000)) << "at its hold time it is expired";
    EXPECT_TRUE(claim(table, 7, id, 999)) << "just before, it is open";
    table.roll_back(7, id, kSession, ReservationState::kOpen);
    const std::uint64_t next = table.take(7, 1000, kSession, 2);
    ASSERT_NE(next, 0u) << "an expired reservation's slot is taken again";
    EXPECT_NE(next, id);
    EXPECT_FALSE(claim(table, 7, id, 0)) << "and the old identifier names nothing";
    // A slot held pending or settling never expires under its transaction.
    ASSERT_TRUE(table.fill(7, next, kSession, reservation_of(1500)));
    EXPECT_EQ(table.take(7, 5000, kSession, 3), 0u);
}

// Random histories of reserves, settles, commits, rollbacks and clock moves, against a model
// that keeps each reservation's state in a map.
TEST_F(ReservationTableTest, RandomHistoriesMatchAModel) {
    std::mt19937_64 random(4242);
    for (int history = 0; history < 300; ++history) {
        ReservationTable table = make(64 * 3);
        struct Entry {
            ReservationState state;
            std::uint64_t session;
            Micros expires_at;
        };
        std::map<std::uint64_t, Entry> model;
        Micros now = 0;
        for (int step = 0; step < 200; ++step) {
            const int partition = static_cast<int>(random() % 2);
            const std::uint64_t session = 1 + random() % 3;
            const int what = static_cast<int>(random() % 6);
            if (what == 0) {
                now += static_cast<Micros>(random() % 300);
            } else if (what == 1) {
                std::int64_t free_slots = 3;
                for (const auto& [id, e] : model) {
                    if (table.partition_of(id) == partition &&
                        (e.state != ReservationState::kOpen || now < e.expires_at))
                        --free_slots;
                }
                const std::uint64_t id =
                    table.take(partition, now, session, static_cast<std::uint32_t>(random()));
                ASSERT_EQ(id != 0, free_slots > 0);
                if (id == 0)
                    continue;
                const Micros expires_at = now + 1 + static_cast<Micros>(random() % 1000);
                ASSERT_TRUE(table.fill(partition, id, session, reservation_of(expires_at)));
                // Drop any expired entry whose slot this one took.
                for (auto it = model.begin(); it != model.end();) {
                    if ((it->first & 0xffffffffULL) == (id & 0xffffffffULL))
                        it = model.erase(it);
                    else
                        ++it;
                }
                model[id] = Entry{ReservationState::kPending, session, expires_at};
            } else if (!model.empty()) {
                auto it = model.begin();
                std::advance(it, static_cast<long>(random() % model.size()));
                const std::uint64_t id = it->first;
                Entry& e = it->second;
                const int p = table.partition_of(id);
                if (what == 2) {
                    const bool expected =
                        (e.state == ReservationState::kOpen ||
                         (e.state == ReservationState::kPending && e.session == session)) &&
                        now < e.expires_at;
                    ReservationState previous = ReservationState::kFree;
                    Reservation made;
                    ASSERT_EQ(claim(table, p, id, now, session, kRole, kDatabase, &made, &previous),
                              expected);
                    if (expected) {
                        ASSERT_EQ(previous, e.state);
                        e.state = ReservationState::kSettling;
                        e.session = session;
                    }
                } else if (what == 3 || what == 4) {
                    table.commit(p, id, e.session);
                    if (e.state == ReservationState::kPending) {
                        e.state = ReservationState::kOpen;
                    } else if (e.state == ReservationState::kSettling) {
                        model.erase(it);
                    }
                } else {
                    if (e.state == ReservationState::kSettling) {
                        table.roll_back(p, id, e.session, ReservationState::kOpen);
                        e.state = ReservationState::kOpen;
                    } else if (e.state == ReservationState::kPending) {
                        table.roll_back(p, id, e.session, ReservationState::kFree);
                        model.erase(it);
                    }
                }
            }
            std::int64_t live = 0;
            for (const auto& [id, e] : model)
                live += (e.state != ReservationState::kOpen || now < e.expires_at) ? 1 : 0;
            ASSERT_EQ(table.live(0, now) + table.live(1, now), live) << "step " << step;
        }
    }
}

}  // namespace
}  // namespace ratelimit
