// zero_copy_test.cc: the choice between reading a batch's dense misses in
// place and the host's gather (fusion/zero_copy.h): the limits a cache
// calibrates from the two paths' cost lines (by cost, and by the in-place
// reads' latency), and the take rule the engine and the kernels apply with
// it.
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

extern "C" {
#include "fusion/zero_copy.h"
}

namespace {

// The limit from fetch times at 64, 256, 1024, 4096 rows (the first n of
// them), in place paying when no dearer (margin 1) or by `margin`.
uint64_t Limit(std::vector<double> zc, std::vector<double> host, double margin = 1.0) {
  const double rows[] = {64, 256, 1024, 4096};
  return fl_zc_limit_of(rows, zc.data(), host.data(), (int)zc.size(), margin);
}

TEST(ZeroCopyLimit, WhereInPlaceStopsPaying) {
  // In place pays at 64 and 256 rows (by 10 and 6 us) and loses at 1,024
  // (by 2 us): d falls 8 us over 768 rows, so it reaches 0 at
  // 256 + 768 * 6 / 8 = 832 rows.
  EXPECT_EQ(Limit({10e3, 20e3, 60e3, 200e3}, {20e3, 26e3, 58e3, 90e3}), 832u);
  // Exactly even at a point: still in place there.
  EXPECT_EQ(Limit({10e3, 20e3, 60e3, 90e3}, {20e3, 26e3, 60e3, 80e3}), 1024u);
}

TEST(ZeroCopyLimit, SmallCountsBeforeTheFirstPayingPointFollowIt) {
  // The host is cheaper for 64 rows (both cost about a launch and a wait),
  // in place pays at 256 and 1,024, and stops between 1,024 and 4,096.
  EXPECT_EQ(Limit({12e3, 14e3, 20e3, 110e3}, {11e3, 20e3, 40e3, 90e3}), 1024u + 3072u * 20 / 40);
}

TEST(ZeroCopyLimit, NeverPayingGivesZero) {
  EXPECT_EQ(Limit({20e3, 30e3, 60e3, 200e3}, {10e3, 12e3, 20e3, 60e3}), 0u);
  EXPECT_EQ(Limit({}, {}), 0u);
}

TEST(ZeroCopyLimit, StillPayingAtTheLastPointStopsThere) {
  // Nothing was measured beyond 4,096 rows: the limit is that count, not a
  // line drawn on past it.
  EXPECT_EQ(Limit({10e3, 20e3, 30e3, 60e3}, {20e3, 30e3, 38e3, 64e3}), 4096u);
  EXPECT_EQ(Limit({10e3, 20e3, 30e3, 60e3}, {20e3, 30e3, 38e3, 70e3}), 4096u);
  EXPECT_EQ(Limit({10e3}, {20e3}), 64u);
}

TEST(ZeroCopyLimit, InPlaceMustWinByTheMargin) {
  // 10% cheaper in place everywhere: no limit under a margin of 1.25.
  EXPECT_EQ(Limit({10e3, 20e3, 40e3, 100e3}, {11e3, 22e3, 44e3, 110e3}, 1.25), 0u);
  EXPECT_EQ(Limit({10e3, 20e3, 40e3, 100e3}, {11e3, 22e3, 44e3, 110e3}), 4096u);
  // Half the cost at 64 and 256 rows, even at 1,024: with the margin, d =
  // host - 1.25 zc is 7.5 and 15 us, then -10 us: 0 at 256 + 768 * 15 / 25.
  EXPECT_EQ(Limit({10e3, 20e3, 40e3, 100e3}, {20e3, 40e3, 40e3, 60e3}, 1.25), 256u + 768u * 15 / 25);
}

// The latency limit at 64, 256, 1024, 4096 rows (the first n of them), for
// fetches up to twice the first point's time.
uint64_t LatencyLimit(std::vector<double> zc) {
  const double rows[] = {64, 256, 1024, 4096};
  return fl_zc_latency_limit(rows, zc.data(), (int)zc.size(), 2.0);
}

TEST(ZeroCopyLatency, WhereAFetchStopsBeingBoundByARowsLatency) {
  // 10 us up to 256 rows, 30 us at 1,024: twice the first point's (20 us)
  // is reached halfway from 256 to 1,024 rows.
  EXPECT_EQ(LatencyLimit({10e3, 10e3, 30e3, 110e3}), 256u + 768u / 2);
  // Doubled by 256 rows already: 64 + 192 * (20 - 10) / (40 - 10).
  EXPECT_EQ(LatencyLimit({10e3, 40e3, 60e3, 200e3}), 64u + 192u / 3);
  // Exactly twice at a point: that point.
  EXPECT_EQ(LatencyLimit({10e3, 12e3, 20e3, 80e3}), 1024u);
}

TEST(ZeroCopyLatency, NeverDoublingGivesTheLastPoint) {
  EXPECT_EQ(LatencyLimit({10e3, 11e3, 12e3, 19e3}), 4096u);
  EXPECT_EQ(LatencyLimit({10e3}), 64u);
  EXPECT_EQ(LatencyLimit({}), 0u);
}

TEST(ZeroCopyTake, BatchesUpToTheLimitOnly) {
  EXPECT_FALSE(fl_zc_take(0, 500));  // nothing qualifies: nothing to read
  EXPECT_TRUE(fl_zc_take(1, 500));
  EXPECT_TRUE(fl_zc_take(500, 500));
  EXPECT_FALSE(fl_zc_take(501, 500));
  EXPECT_FALSE(fl_zc_take(1, 0));  // limit 0: never
  // The host gathers what does not qualify, or everything when the batch
  // does not take the device path.
  EXPECT_EQ(fl_zc_host_rows({300, 0, 350}, 500), 50u);
  EXPECT_EQ(fl_zc_host_rows({600, 0, 650}, 500), 650u);
  EXPECT_EQ(fl_zc_host_rows({300, 0, 300}, 500), 0u);
}

// Three args: a dense table (5 misses, 2 pointer rows), a hashed table read
// at its references (4 misses, 3 pointer rows) and a table read only by the
// host (1 miss, 1 pointer row).
std::vector<uint32_t> PerArg() { return {5, 2, 9, 2, 4, 3, 4, 3, 1, 1, 1, 1}; }

fl_zc_count Count(const std::vector<uint32_t> &per_arg, int args, int pointers) {
  static const uint8_t rows[1] = {0};
  const fl_zc_table tables[3] = {{rows, {0, 0}}, {nullptr, {4000, 72}}, {nullptr, {0, 0}}};
  fl_zc_count k = {0, 0, 0};
  for (int a = 0; a < args; a++) fl_zc_count_arg(&k, per_arg.data(), a, &tables[a], pointers);
  return k;
}

TEST(ZeroCopyCount, PointerRowsQualifyInOneShotRunsOnly) {
  const auto per_arg = PerArg();
  fl_zc_count k = Count(per_arg, 3, 1);
  EXPECT_EQ(k.misses, 5u);        // the dense table's; hashed misses need the store's lookup
  EXPECT_EQ(k.pointers, 2u + 3u); // the dense and the hashed table's
  EXPECT_EQ(k.all, 7u + 7u + 2u);
  k = Count(per_arg, 3, 0);       // a prepared query's graph: no pointer rows
  EXPECT_EQ(k.pointers, 0u);
  EXPECT_EQ(k.misses, 5u);
}

TEST(ZeroCopyCount, ModeAndHostRows) {
  const auto per_arg = PerArg();
  // All three args: the third table's rows stay the host's, so at most the
  // dense misses are read in place, into the staging.
  fl_zc_count k = Count(per_arg, 3, 1);
  EXPECT_EQ(fl_zc_mode(k, 10), FL_ZC_MISSES);
  EXPECT_EQ(fl_zc_host_rows(k, 10), 16u - 5u);
  EXPECT_EQ(fl_zc_mode(k, 9), FL_ZC_NONE);  // 10 qualify: over the limit
  EXPECT_EQ(fl_zc_host_rows(k, 9), 16u);
  // The first two args with the hashed misses found (pointer rows only):
  // every unique row qualifies, and the host gathers none.
  std::vector<uint32_t> found = {5, 2, 9, 2, 0, 7, 0, 7};
  k = Count(found, 2, 1);
  EXPECT_EQ(fl_zc_mode(k, 14), FL_ZC_ALL);
  EXPECT_EQ(fl_zc_host_rows(k, 14), 0u);
  EXPECT_EQ(fl_zc_mode(k, 13), FL_ZC_NONE);
  // Without pointer rows (a prepared graph), the dense misses alone.
  k = Count(found, 2, 0);
  EXPECT_EQ(fl_zc_mode(k, 14), FL_ZC_MISSES);
  EXPECT_EQ(fl_zc_host_rows(k, 14), 14u - 5u);
  // Pointer rows alone qualifying but not every row: the host gathers all.
  std::vector<uint32_t> hashed = {0, 0, 0, 0, 4, 3, 4, 3};
  k = Count(hashed, 2, 1);
  EXPECT_EQ(fl_zc_mode(k, 100), FL_ZC_NONE);
  EXPECT_EQ(fl_zc_host_rows(k, 100), 7u);
}

// The slot header of a hashed row at its reference, as the kernels find it:
// chunks of 2 MiB aligned to their size, vectors first, then 16-byte headers.
TEST(ZeroCopySlots, HeaderAndStripeOfAReference) {
  const uint64_t chunk = 7ull << 21;
  const fl_slot_layout l = {1000, 72};
  EXPECT_EQ(fl_slot_head(chunk, l), chunk + 72000);
  EXPECT_EQ(fl_slot_head(chunk + 5 * 72, l), chunk + 72000 + 80);
  EXPECT_EQ(fl_slot_stripe(3, 4096), fl_seq_stripe(3, 256));
}

}  // namespace
