// evict_pick_test.cc: the eviction's pick and the age buckets it reads
// (cache/evict_pick.h, cache/index.h), the FL_HD logic that the host scan
// and a CUDA round's kernels share.
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

extern "C" {
#include "cache/evict_pick.h"
}

namespace {

struct Pick {
  uint32_t bucket;
  uint64_t quota;
};

Pick PickFrom(const std::vector<uint64_t> &hist, uint64_t want) {
  Pick p{};
  fl_evict_pick(hist.data(), want, &p.bucket, &p.quota);
  return p;
}

TEST(EvictPick, OldestBucketsFirstThenAQuotaOfTheNext) {
  std::vector<uint64_t> hist(FL_AGE_BUCKETS, 0);
  hist[0] = 100, hist[3] = 10, hist[7] = 5, hist[FL_AGE_BUCKETS - 1] = 2;
  Pick p = PickFrom(hist, 2);  // exactly the clamped oldest bucket
  EXPECT_EQ(p.bucket, FL_AGE_BUCKETS - 1);
  EXPECT_EQ(p.quota, 2u);
  p = PickFrom(hist, 9);  // 2 + 5 = 7 taken whole, 2 more of bucket 3
  EXPECT_EQ(p.bucket, 3u);
  EXPECT_EQ(p.quota, 2u);
  p = PickFrom(hist, 7);  // buckets 1023 and 7 whole
  EXPECT_EQ(p.bucket, 7u);
  EXPECT_EQ(p.quota, 5u);
  p = PickFrom(hist, 50);  // into the youngest bucket
  EXPECT_EQ(p.bucket, 0u);
  EXPECT_EQ(p.quota, 33u);
}

TEST(EvictPick, WantingMoreThanThereIsTakesEverything) {
  std::vector<uint64_t> hist(FL_AGE_BUCKETS, 0);
  hist[0] = 4, hist[1] = 6;
  Pick p = PickFrom(hist, 1000);
  EXPECT_EQ(p.bucket, 0u);
  EXPECT_GE(p.quota, 4u);  // all of bucket 0 (the quota may exceed it)
}

TEST(EvictPick, WantingNothingTakesNothing) {
  std::vector<uint64_t> hist(FL_AGE_BUCKETS, 3);
  Pick p = PickFrom(hist, 0);
  EXPECT_EQ(p.bucket, FL_AGE_BUCKETS - 1);
  EXPECT_EQ(p.quota, 0u);
}

// The timestamp word of an entry hit at batch b (fl_index_touch).
uint32_t Hit(uint32_t b) { return (b & FL_TS_BATCH) | FL_TS_USED; }

TEST(AgeBucket, BatchesSinceLastUseExactThenPerDoubling) {
  EXPECT_EQ(fl_index_age_bucket(10, Hit(10)), 0u);
  EXPECT_EQ(fl_index_age_bucket(10, Hit(3)), 7u);
  EXPECT_EQ(fl_index_age_bucket(600, Hit(89)), 511u);
  // Past 512 batches, 16 buckets per doubling: 512-543 is 512, 544-575 513,
  // 1,024-1,087 is 528, 2^29.. the last octave.
  EXPECT_EQ(fl_index_age_bucket(512, Hit(0)), 512u);
  EXPECT_EQ(fl_index_age_bucket(543, Hit(0)), 512u);
  EXPECT_EQ(fl_index_age_bucket(544, Hit(0)), 513u);
  EXPECT_EQ(fl_index_age_bucket(1023, Hit(0)), 527u);
  EXPECT_EQ(fl_index_age_bucket(1024, Hit(0)), 528u);
  EXPECT_EQ(fl_index_age_bucket(FL_AGE_FUTURE - 1u, Hit(0)), 512u + 20u * 16u + 15u);
  EXPECT_LT(fl_index_age_bucket(FL_AGE_FUTURE - 1u, Hit(0)), FL_AGE_BUCKETS);
  // Across the counter's wrap.
  EXPECT_EQ(fl_index_age_bucket(2, Hit(0xfffffffeu)), 4u);
}

// Older never lands in a younger bucket, and an hour of batches at 30,000
// a second (10^8) is told from a minute (1.8 * 10^6).
TEST(AgeBucket, OlderIsNeverYoungerAndFarAgesStayApart) {
  uint32_t last = 0;
  for (uint64_t age = 0; age < FL_AGE_FUTURE; age += 1 + age / 7) {
    uint32_t b = fl_index_age_bucket((uint32_t)age, Hit(0));
    EXPECT_GE(b, last) << age;
    last = b;
  }
  EXPECT_GT(fl_index_age_bucket(100000000u, Hit(0)), fl_index_age_bucket(1800000u, Hit(0)) + 16u);
}

// A scan reads the clock, then queries that began later touch entries with
// newer timestamps. Those entries are the youngest, not the oldest (fails
// when their age wraps to 2^31 - 1 and they are evicted first).
TEST(AgeBucket, TouchedAfterTheScanReadTheClockIsYoungest) {
  EXPECT_EQ(fl_index_age_bucket(100, Hit(101)), 0u);
  EXPECT_EQ(fl_index_age_bucket(100, Hit(164)), 0u);
  EXPECT_EQ(fl_index_age_bucket(0xffffffffu, Hit(3)), 0u);  // newer, past the wrap
}

// An entry not hit since it came in is as old as a hit one FL_PROBATION_AGING
// times its age, never younger than a hit one of its age, and stays in
// range however old.
TEST(AgeBucket, NeverHitEntriesAgeFaster) {
  EXPECT_EQ(fl_index_age_bucket(100, 100), 0u);
  EXPECT_EQ(fl_index_age_bucket(100, 90), fl_index_age_bucket(100, Hit(100 - 10 * FL_PROBATION_AGING)));
  EXPECT_EQ(fl_index_age_bucket(5000, 4000), fl_index_age_bucket(5000, Hit(5000 - 1000 * FL_PROBATION_AGING)));
  for (uint64_t age = 1; age < FL_AGE_FUTURE; age += 1 + age / 5) {
    uint32_t fresh = fl_index_age_bucket((uint32_t)age, 0), used = fl_index_age_bucket((uint32_t)age, Hit(0));
    EXPECT_GE(fresh, used) << age;
    if (age < FL_AGE_FUTURE / FL_PROBATION_AGING / 2) {
      EXPECT_GT(fresh, used) << age;
    }
    EXPECT_LT(fresh, FL_AGE_BUCKETS) << age;
  }
  EXPECT_EQ(fl_index_age_bucket(100, 101), 0u);  // newer: the youngest either way
}

// Inserting puts an entry on probation; a hit takes it off, with its batch;
// a key inserted again after its erasure starts on probation again.
TEST(AgeBucket, InsertStartsOnProbationAndAHitEndsIt) {
  std::vector<uint64_t> kv(2 * 64, FL_KEY_EMPTY(64)), locs(64, FL_LOC_NONE);
  for (size_t i = 0; i < 64; i++) kv[2 * i + 1] = 0;
  fl_index_view v{kv.data(), locs.data(), nullptr, 64, 64, 64, 0};
  ASSERT_EQ(fl_index_insert(&v, 77, 0x1000, 5), FL_INSERT_DONE);
  uint64_t loc = 0;
  int64_t s = fl_index_find(&v, 77, &loc);
  ASSERT_GE(s, 0);
  EXPECT_EQ(*fl_index_ts(&v, (uint64_t)s), 5u);
  fl_index_touch(&v, s, 9);
  EXPECT_EQ(*fl_index_ts(&v, (uint64_t)s), Hit(9));
  EXPECT_EQ(fl_index_age_bucket(12, *fl_index_ts(&v, (uint64_t)s)), 3u);
  fl_index_touch(&v, s, 0x80000010u);  // the counter's top bit is not the flag
  EXPECT_EQ(*fl_index_ts(&v, (uint64_t)s), Hit(0x10));
  EXPECT_EQ(fl_index_erase(&v, 77), 0x1000u);
  ASSERT_EQ(fl_index_insert(&v, 77, 0x2000, 0x80000020u), FL_INSERT_DONE);
  EXPECT_EQ(*fl_index_ts(&v, (uint64_t)fl_index_find(&v, 77, &loc)), 0x20u);
}

}  // namespace
