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

TEST(AgeBucket, BatchesSinceLastUseExactThenPerDoubling) {
  EXPECT_EQ(fl_index_age_bucket(10, 10), 0u);
  EXPECT_EQ(fl_index_age_bucket(10, 3), 7u);
  EXPECT_EQ(fl_index_age_bucket(600, 89), 511u);
  // Past 512 batches, 16 buckets per doubling: 512-543 is 512, 544-575 513,
  // 1,024-1,087 is 528, 2^30.. the last octave.
  EXPECT_EQ(fl_index_age_bucket(512, 0), 512u);
  EXPECT_EQ(fl_index_age_bucket(543, 0), 512u);
  EXPECT_EQ(fl_index_age_bucket(544, 0), 513u);
  EXPECT_EQ(fl_index_age_bucket(1023, 0), 527u);
  EXPECT_EQ(fl_index_age_bucket(1024, 0), 528u);
  EXPECT_EQ(fl_index_age_bucket(0x7fffffffu, 0), 512u + 21u * 16u + 15u);
  EXPECT_LT(fl_index_age_bucket(0x7fffffffu, 0), FL_AGE_BUCKETS);
  // Across the counter's wrap.
  EXPECT_EQ(fl_index_age_bucket(2, 0xfffffffeu), 4u);
}

// Older never lands in a younger bucket, and an hour of batches at 30,000
// a second (10^8) is told from a minute (1.8 * 10^6).
TEST(AgeBucket, OlderIsNeverYoungerAndFarAgesStayApart) {
  uint32_t last = 0;
  for (uint64_t age = 0; age < 0x80000000ull; age += 1 + age / 7) {
    uint32_t b = fl_index_age_bucket((uint32_t)age, 0);
    EXPECT_GE(b, last) << age;
    last = b;
  }
  EXPECT_GT(fl_index_age_bucket(100000000u, 0), fl_index_age_bucket(1800000u, 0) + 16u);
}

// A scan reads the clock, then queries that began later touch entries with
// newer timestamps. Those entries are the youngest, not the oldest (fails
// when their age wraps to 2^32 - 1 and they are evicted first).
TEST(AgeBucket, TouchedAfterTheScanReadTheClockIsYoungest) {
  EXPECT_EQ(fl_index_age_bucket(100, 101), 0u);
  EXPECT_EQ(fl_index_age_bucket(100, 164), 0u);
  EXPECT_EQ(fl_index_age_bucket(0xffffffffu, 3), 0u);  // newer, past the wrap
}

}  // namespace
