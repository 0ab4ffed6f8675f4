// The top-offenders table: exact while it has room, and the space-saving guarantees once full.
#include "ratelimit/offender_table.hpp"

#include <gtest/gtest.h>

#include <map>
#include <random>
#include <string>
#include <utility>
#include <vector>

namespace ratelimit {
namespace {

struct Table {
    std::vector<OffenderSlot> slots = std::vector<OffenderSlot>(kOffenderSlots);
    OffenderTable table{slots.data()};
    Table() { table.clear(); }
};

TEST(OffenderTable, CountsExactlyWhileThereIsRoom) {
    Table t;
    for (int i = 0; i < 5; ++i)
        t.table.record("login", "10.0.0.1", 100 + i);
    t.table.record("login", "10.0.0.2", 200);
    t.table.record("signup", "10.0.0.1", 300);
    const std::vector<Offender> top = t.table.snapshot();
    ASSERT_EQ(top.size(), 3u);
    EXPECT_EQ(top[0].policy, "login");
    EXPECT_EQ(top[0].subject, "10.0.0.1");
    EXPECT_EQ(top[0].denials, 5);
    EXPECT_EQ(top[0].overcount, 0);
    EXPECT_EQ(top[0].first_at, 100);
    EXPECT_EQ(top[0].last_at, 104);
    EXPECT_EQ(top[1].denials + top[2].denials, 2);
}

TEST(OffenderTable, KeepsEveryHeavyHitterWithinItsBounds) {
    Table t;
    std::mt19937_64 random(7);
    std::map<std::string, std::int64_t> truth;
    // Three heavy subjects among 5000 light ones: each heavy one is more than 1/128 of all.
    std::int64_t total = 0;
    for (int i = 0; i < 60000; ++i) {
        std::string subject;
        const int pick = static_cast<int>(random() % 100);
        if (pick < 10)
            subject = "heavy-" + std::to_string(pick % 3);
        else
            subject = "light-" + std::to_string(random() % 5000);
        t.table.record("p", subject, i);
        ++truth[subject];
        ++total;
    }
    const std::vector<Offender> top = t.table.snapshot();
    EXPECT_EQ(top.size(), static_cast<std::size_t>(kOffenderSlots));
    for (int h = 0; h < 3; ++h) {
        const std::string subject = "heavy-" + std::to_string(h);
        ASSERT_GT(truth[subject] * kOffenderSlots, total);
        bool found = false;
        for (const Offender& o : top) {
            if (o.subject != subject)
                continue;
            found = true;
            EXPECT_LE(o.denials - o.overcount, truth[subject]);
            EXPECT_GE(o.denials, truth[subject]);
        }
        EXPECT_TRUE(found) << subject;
    }
    // Most denials first, and the heavy ones lead.
    for (std::size_t i = 1; i < top.size(); ++i)
        EXPECT_GE(top[i - 1].denials, top[i].denials);
    for (int i = 0; i < 3; ++i)
        EXPECT_EQ(top[i].subject.substr(0, 6), "heavy-");
}

TEST(OffenderTable, CutsLongNamesAndClears) {
    Table t;
    const std::string policy(100, 'p');
    const std::string subject(400, 's');
    t.table.record(policy, subject, 1);
    t.table.record(policy, subject, 2);
    std::vector<Offender> top = t.table.snapshot();
    ASSERT_EQ(top.size(), 1u);
    EXPECT_EQ(top[0].policy.size(), kOffenderPolicyBytes);
    EXPECT_EQ(top[0].subject.size(), kOffenderSubjectBytes);
    EXPECT_EQ(top[0].denials, 2);
    t.table.clear();
    EXPECT_TRUE(t.table.snapshot().empty());
}

// Databases share the table but never see or clear each other's entries.
TEST(OffenderTable, DatabasesKeepTheirOwnEntries) {
    Table t;
    t.table.record("activity.create_post", "secret-user@corp.com", 1, 16384);
    t.table.record("activity.create_post", "secret-user@corp.com", 2, 16384);
    t.table.record("activity.create_post", "secret-user@corp.com", 3, 16385);
    const std::vector<Offender> a = t.table.snapshot(16384);
    ASSERT_EQ(a.size(), 1u);
    EXPECT_EQ(a[0].denials, 2);
    const std::vector<Offender> b = t.table.snapshot(16385);
    ASSERT_EQ(b.size(), 1u);
    EXPECT_EQ(b[0].denials, 1);
    EXPECT_TRUE(t.table.snapshot(16386).empty());
    t.table.clear(16385);
    EXPECT_TRUE(t.table.snapshot(16385).empty());
    ASSERT_EQ(t.table.snapshot(16384).size(), 1u);
    EXPECT_EQ(t.table.snapshot(16384)[0].denials, 2);
}

// One database's flood of denials, each of a new subject, takes no more than its share: another
// database's offenders stay, with their counts, and the flooding database keeps its heaviest.
TEST(OffenderTable, AFloodingDatabaseKeepsToItsShare) {
    Table t;
    const int share = kOffenderSlots / 2;
    for (int i = 0; i < 10; ++i) {
        for (int n = 0; n <= i; ++n)
            t.table.record("login", "victim-" + std::to_string(i), n, 16385, share);
    }
    // More than (its 21,000 denials / its 64 entries): space-saving keeps it.
    for (int n = 0; n < 1000; ++n)
        t.table.record("login", "heavy", n, 16384, share);
    for (int i = 0; i < 20000; ++i)
        t.table.record("login", "flood-" + std::to_string(i), i, 16384, share);
    const std::vector<Offender> other = t.table.snapshot(16385);
    ASSERT_EQ(other.size(), 10u);
    for (const Offender& offender : other) {
        EXPECT_EQ(offender.overcount, 0);
        EXPECT_EQ("victim-" + std::to_string(offender.denials - 1), offender.subject);
    }
    const std::vector<Offender> flooding = t.table.snapshot(16384);
    EXPECT_EQ(flooding.size(), static_cast<std::size_t>(share));
    bool heavy_kept = false;
    for (const Offender& offender : flooding)
        heavy_kept = heavy_kept || offender.subject == "heavy";
    EXPECT_TRUE(heavy_kept);
    // Under its share, a database takes free entries, then the fewest-denied of any database.
    Table u;
    for (int i = 0; i < kOffenderSlots + 1; ++i)
        u.table.record("p", "s-" + std::to_string(i), i, 16384 + (i % 2), share);
    EXPECT_EQ(u.table.snapshot(16384).size() + u.table.snapshot(16385).size(),
              static_cast<std::size_t>(kOffenderSlots));
}

}  // namespace
}  // namespace ratelimit
