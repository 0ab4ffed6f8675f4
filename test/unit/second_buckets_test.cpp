#include "ratelimit/second_buckets.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <random>
#include <vector>

namespace ratelimit {
namespace {

constexpr Micros kMinute = 60 * kMicrosPerSecond;
// 2025-10-28 12:00:45 UTC.
constexpr Micros kT0 = 1761652845LL * kMicrosPerSecond;

// The bucket table as the database keeps it: allowed costs per whole second.
class BucketTable {
  public:
    std::vector<Bucket> counted(const SecondBuckets& rule, Micros now) const {
        std::vector<Bucket> out;
        for (const auto& [start, count] : buckets_) {
            if (start > rule.counts_after(now))
                out.push_back(Bucket{start, count});
        }
        return out;
    }
    void record(Micros now, std::int64_t cost) { buckets_[SecondBuckets::bucket_of(now)] += cost; }

  private:
    std::map<Micros, std::int64_t> buckets_;
};

// Brute-force reference: every allowed call kept with its own timestamp.
struct CallLog {
    std::vector<std::pair<Micros, std::int64_t>> calls;
    std::int64_t counted_at(Micros now, Micros window) const {
        std::int64_t total = 0;
        for (const auto& [at, cost] : calls) {
            if (SecondBuckets::bucket_of(at) > now - window)
                total += cost;
        }
        return total;
    }
};

TEST(SecondBuckets, BucketOfTruncatesToTheSecond) {
    EXPECT_EQ(SecondBuckets::bucket_of(kT0 + 999999), kT0);
    EXPECT_EQ(SecondBuckets::bucket_of(kT0), kT0);
    EXPECT_EQ(SecondBuckets::bucket_of(-1), -kMicrosPerSecond);
}

TEST(SecondBuckets, FiveInAMinuteThenRetryAfterTheOldestBucket) {
    SecondBuckets rule(5, kMinute);
    BucketTable table;
    for (Micros at : {kT0, kT0, kT0 + 5 * kMicrosPerSecond, kT0 + 10 * kMicrosPerSecond,
                      kT0 + 14 * kMicrosPerSecond}) {
        BucketDecision d = rule.decide(table.counted(rule, at), 1, at);
        ASSERT_TRUE(d.allowed);
        table.record(at, 1);
    }
    Micros now = kT0 + 14 * kMicrosPerSecond + 250000;
    BucketDecision denied = rule.decide(table.counted(rule, now), 1, now);
    EXPECT_FALSE(denied.allowed);
    EXPECT_EQ(denied.current, 5);
    EXPECT_EQ(denied.retry_after_s, 46);  // 12:00:45 leaves at 12:01:45; now is 12:00:59.25
    // Exactly at the boundary the oldest bucket has left: allowed.
    Micros boundary = kT0 + kMinute;
    EXPECT_FALSE(rule.decide(table.counted(rule, boundary - 1), 1, boundary - 1).allowed);
    EXPECT_TRUE(rule.decide(table.counted(rule, boundary), 1, boundary).allowed);
}

TEST(SecondBuckets, CostNeverDebitsPartially) {
    SecondBuckets rule(10, kMinute);
    std::vector<Bucket> counted{{kT0, 7}};
    BucketDecision d = rule.decide(counted, 4, kT0 + 1);
    EXPECT_FALSE(d.allowed);
    EXPECT_EQ(d.current, 7);
    EXPECT_TRUE(rule.decide(counted, 3, kT0 + 1).allowed);
}

TEST(SecondBuckets, RetryAfterWaitsForEnoughBucketsWhenTheLimitWasLowered) {
    // Six calls recorded under an older, larger limit; now the limit is 3.
    SecondBuckets rule(3, kMinute);
    std::vector<Bucket> counted{
        {kT0, 2}, {kT0 + 10 * kMicrosPerSecond, 2}, {kT0 + 20 * kMicrosPerSecond, 2}};
    Micros now = kT0 + 30 * kMicrosPerSecond;
    BucketDecision d = rule.decide(counted, 1, now);
    EXPECT_FALSE(d.allowed);
    // Only once the second bucket leaves (at kT0 + 70 s) do 2 + 1 fit under 3.
    EXPECT_EQ(d.retry_after_s, 40);
}

// Property, against the call log: decisions equal the brute-force rule (so a clock that goes
// backwards, which brings old buckets back into view, never grants extra), the counted total at
// the latest instant seen never exceeds the limit, and retry-after is true (allowed exactly
// then, not a second earlier) when nothing else happens meanwhile.
TEST(SecondBuckets, RandomSequencesMatchTheReferenceAndHonourTheGuarantee) {
    std::mt19937_64 rng(11);
    for (int sequence = 0; sequence < 1500; ++sequence) {
        std::int64_t limit = 1 + static_cast<std::int64_t>(rng() % 12);
        Micros window = (1 + static_cast<Micros>(rng() % 90)) * kMicrosPerSecond;
        SecondBuckets rule(limit, window);
        BucketTable table;
        CallLog log;
        Micros now = kT0;
        Micros latest = kT0;
        for (int i = 0; i < 120; ++i) {
            std::int64_t step = static_cast<std::int64_t>(rng() % (window / 5 + 1));
            now += (rng() % 10 == 0) ? -step : step;
            std::int64_t cost = 1 + static_cast<std::int64_t>(rng() % limit);
            BucketDecision d = rule.decide(table.counted(rule, now), cost, now);
            std::int64_t before = log.counted_at(now, window);
            ASSERT_EQ(d.allowed, before + cost <= limit);
            if (d.allowed) {
                table.record(now, cost);
                log.calls.emplace_back(now, cost);
                ASSERT_EQ(d.current, before + cost);
            } else {
                ASSERT_EQ(d.current, before);
                ASSERT_GE(d.retry_after_s, 1);
                Micros at = now + d.retry_after_s * kMicrosPerSecond;
                ASSERT_LE(log.counted_at(at, window) + cost, limit) << "retry-after too early";
                Micros earlier = now + (d.retry_after_s - 1) * kMicrosPerSecond;
                ASSERT_GT(log.counted_at(earlier, window) + cost, limit) << "retry-after too late";
            }
            latest = std::max(latest, now);
            ASSERT_LE(log.counted_at(latest, window), limit);
        }
    }
}

}  // namespace
}  // namespace ratelimit
