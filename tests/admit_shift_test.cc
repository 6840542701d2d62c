// admit_shift_test.cc: TinyLFU's shift detector (cache/admit_shift.h), the
// host code that opens admission on both backends when a part's hot set
// moves: when it opens, for how long, and when it must stay shut.
#include <gtest/gtest.h>

#include <cstdint>

extern "C" {
#include "cache/admit_shift.h"
}

namespace {

constexpr uint64_t kCapacity = 1000;

// A detector past its warm-up (the part evicted, then FL_SHIFT_WARM
// capacities of lookups) at a steady miss share of `missed` per 1,000
// lookups, in batches of 1,000.
fl_admit_shift Steady(uint64_t missed) {
  fl_admit_shift s;
  fl_shift_init(&s, kCapacity);
  fl_shift_evicted(&s);
  for (int i = 0; i < 4 * FL_SHIFT_WARM; i++)
    EXPECT_EQ(fl_shift_observe(&s, 1000, missed), 0) << "opened at a steady share, batch " << i;
  return s;
}

TEST(AdmitShift, OpensWhenTheMissShareJumpsAndStaysOpenItsSpan) {
  fl_admit_shift s = Steady(50);
  // The hot set moves: a batch misses a quarter of its lookups.
  EXPECT_EQ(fl_shift_observe(&s, 1000, 250), 1) << "the jump's own batch is not admitted open";
  EXPECT_EQ(s.opened, 1u);
  // Open for FL_SHIFT_OPEN capacities of lookups from the jump on, however
  // few lookups miss meanwhile (the new hot rows climb in).
  uint64_t open = 1000;
  while (fl_shift_observe(&s, 1000, 10)) open += 1000;
  EXPECT_EQ(open, (uint64_t)(FL_SHIFT_OPEN * kCapacity));
  EXPECT_EQ(s.opened, 1u);
  // Shut again, at the new, lower share.
  for (int i = 0; i < 20; i++) EXPECT_EQ(fl_shift_observe(&s, 1000, 10), 0) << i;
}

TEST(AdmitShift, ReadsTheSameAtAnyBatchSize) {
  // The same stream in batches of 1,000 and of 100 lookups opens within a
  // batch of the same point (its windows are in lookups).
  for (uint64_t batch : {1000ull, 100ull}) {
    fl_admit_shift s;
    fl_shift_init(&s, kCapacity);
    fl_shift_evicted(&s);
    uint64_t at = 0, opened_at = 0;
    for (; at < 40 * kCapacity; at += batch) {
      uint64_t per_1000 = at < 20 * kCapacity ? 50 : 300;
      if (fl_shift_observe(&s, batch, batch * per_1000 / 1000) && !opened_at) opened_at = at;
    }
    EXPECT_GE(opened_at, 20 * kCapacity) << "batch " << batch;
    EXPECT_LE(opened_at, 20 * kCapacity + kCapacity / 2) << "batch " << batch;
  }
}

TEST(AdmitShift, ShutWhileWarmingUp) {
  // A filling pool misses everything, then less and less, then jumps: no
  // shift before the part first evicts.
  fl_admit_shift s;
  fl_shift_init(&s, kCapacity);
  for (uint64_t at = 0, missed = 1000; at < 40 * kCapacity; at += 1000) {
    EXPECT_EQ(fl_shift_observe(&s, 1000, missed), 0) << at;
    missed = missed > 50 ? missed / 2 : 600;  // down, then a jump
  }
  // Nor in the first FL_SHIFT_WARM capacities of lookups after it.
  fl_shift_evicted(&s);
  for (uint64_t at = 0; at < FL_SHIFT_WARM * kCapacity; at += 100)
    EXPECT_EQ(fl_shift_observe(&s, 100, at % 200 ? 5 : 60), 0) << at;
}

TEST(AdmitShift, ShutOnAJumpOfAFewMisses) {
  // A 6x jump of a tiny share is a handful of misses: noise, not a moved
  // hot set. Thirty are not.
  fl_admit_shift s = Steady(1);
  EXPECT_EQ(fl_shift_observe(&s, 1000, 6), 0);
  s = Steady(1);
  EXPECT_EQ(fl_shift_observe(&s, 1000, 30), 1);
  // Short of FL_SHIFT_RATIO: shut however many lookups it spans; past it,
  // open.
  s = Steady(100);
  EXPECT_EQ(fl_shift_observe(&s, 100000, 14000), 0);
  s = Steady(100);
  EXPECT_EQ(fl_shift_observe(&s, 100000, 16000), 1);
}

// serve_bench's stream as its CUDA callers fed the detector (the H200, stop
// 43): requests of 64 to 2,048 samples over 26 tables, cut from a finite
// pool served over and over (39 capacities of lookups a pass). Admission
// rounds take one to four requests at a time; a stretch of 4 to 9
// capacities of each pass comes in requests the cache holds whole, and the
// rest miss 3.5%, some requests twice that and some none. The share's
// return after the stretch is where it was: no shift.
TEST(AdmitShift, ShutWhenTheShareComesBackToWhereItWas) {
  constexpr uint64_t kRows = 1400000;  // a 5% cache's pool of replay's workload
  const uint64_t sizes[] = {64, 256, 1024, 2048};
  fl_admit_shift s;
  fl_shift_init(&s, kRows);
  fl_shift_evicted(&s);
  uint64_t rng = 12345, seen = 0;
  auto next = [&rng] {  // splitmix64
    uint64_t z = (rng += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  };
  while (seen < 400 * kRows) {
    uint64_t lookups = 0, missed = 0;
    uint64_t at = seen % (39 * kRows), pass = seen / (39 * kRows);
    bool whole = at >= 20 * kRows && at < (24 + pass % 6) * kRows;
    for (uint64_t k = 1 + next() % 4; k > 0; k--) {
      uint64_t n = 26 * sizes[next() % 4];
      lookups += n;
      if (!whole) missed += n * 35 * (next() % 3) / 1000;
    }
    ASSERT_EQ(fl_shift_observe(&s, lookups, missed), 0) << "after " << seen << " lookups";
    seen += lookups;
  }
  // A moved hot set still opens it within a replay batch's lookups: every
  // request misses a quarter of its lookups, as replay's switch batch does.
  int opened = 0;
  for (int i = 0; i < 16 && !opened; i++) opened = fl_shift_observe(&s, 26 * 1024, 26 * 1024 / 4);
  EXPECT_EQ(opened, 1);
}

TEST(AdmitShift, AScanOfMissesStaysShutOnceItIsTheNorm) {
  // A part that misses everything (a stream of one-off rows) is not moving:
  // the long window's share is as high as the short one's.
  fl_admit_shift s = Steady(1000);
  EXPECT_EQ(s.opened, 0u);
  EXPECT_EQ(fl_shift_observe(&s, 1000, 1000), 0);
}

TEST(AdmitShift, InitStartsOver) {
  fl_admit_shift s = Steady(50);
  fl_shift_init(&s, kCapacity);  // a cleared part's
  EXPECT_EQ(fl_shift_observe(&s, 1000, 250), 0) << "opened before the part evicted";
  fl_shift_evicted(&s);
  EXPECT_EQ(fl_shift_observe(&s, 1000, 250), 0) << "opened before its warm-up";
  EXPECT_EQ(s.opened, 0u);
}

}  // namespace
