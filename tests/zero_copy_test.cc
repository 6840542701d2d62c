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
  EXPECT_EQ(fl_zc_host_rows(300, 350, 500), 50u);
  EXPECT_EQ(fl_zc_host_rows(600, 650, 500), 650u);
}

}  // namespace
