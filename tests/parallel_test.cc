// parallel_test.cc: the worker pool (common/parallel.h): every item runs once,
// a started job overlaps the caller's own work, a busy pool runs a second
// caller's range on that caller, and waking ahead leaves jobs intact.
#include <gtest/gtest.h>

#include <atomic>
#include <thread>
#include <vector>

extern "C" {
#include "common/parallel.h"
}

namespace {

struct Counts {
  std::vector<std::atomic<int>> hits;
  explicit Counts(size_t n) : hits(n) {}
};

void count_range(void *ctx, size_t b, size_t e) {
  auto *c = static_cast<Counts *>(ctx);
  for (size_t i = b; i < e; i++) c->hits[i].fetch_add(1);
}

void ExpectEachOnce(const Counts &c) {
  for (size_t i = 0; i < c.hits.size(); i++) ASSERT_EQ(c.hits[i].load(), 1) << "item " << i;
}

struct Pool {
  fl_workers *w;
  explicit Pool(uint32_t threads) : w(fl_workers_create(threads)) {}
  ~Pool() { fl_workers_destroy(w); }
};

TEST(Workers, EveryItemRunsOnceOverManyJobs) {
  Pool p(4);
  ASSERT_NE(p.w, nullptr);
  EXPECT_EQ(fl_workers_count(p.w), 4u);
  for (size_t n : {1u, 63u, 64u, 1000u, 100000u}) {
    Counts c(n);
    fl_workers_for(p.w, n, 64, count_range, &c);
    ExpectEachOnce(c);
  }
}

TEST(Workers, StartedJobOverlapsTheCallersWork) {
  Pool p(3);
  Counts c(50000);
  ASSERT_EQ(fl_workers_start(p.w, c.hits.size(), 16, count_range, &c), 1);
  // The caller's own work meanwhile; the job may already be done or not.
  std::atomic<int> mine{0};
  for (int i = 0; i < 1000; i++) mine.fetch_add(1);
  fl_workers_wait(p.w);
  ExpectEachOnce(c);
  EXPECT_EQ(mine.load(), 1000);
}

TEST(Workers, BusyPoolRunsASecondCallersRangeOnThatCaller) {
  Pool p(3);
  Counts first(1000);
  ASSERT_EQ(fl_workers_start(p.w, first.hits.size(), 1, count_range, &first), 1);
  // Between start and wait the pool serves nobody else.
  Counts second(5000);
  std::thread other([&] {
    EXPECT_EQ(fl_workers_start(p.w, 10, 1, count_range, &second), 0);
    fl_workers_for(p.w, second.hits.size(), 1, count_range, &second);
  });
  other.join();
  fl_workers_wait(p.w);
  ExpectEachOnce(first);
  ExpectEachOnce(second);
}

TEST(Workers, WakingAheadLeavesJobsIntact) {
  Pool p(4);
  fl_workers_wake(nullptr, 1000);  // no pool: nothing
  for (int round = 0; round < 20; round++) {
    fl_workers_wake(p.w, 200000);  // spin 0.2 ms
    if (round % 2) std::this_thread::sleep_for(std::chrono::milliseconds(1));  // asleep again
    Counts c(4096);
    fl_workers_for(p.w, c.hits.size(), 32, count_range, &c);
    ExpectEachOnce(c);
  }
}

TEST(Workers, OneThreadPoolRunsEverythingOnTheCaller) {
  Pool p(1);
  Counts c(100);
  EXPECT_EQ(fl_workers_start(p.w, c.hits.size(), 1, count_range, &c), 0);
  fl_workers_for(p.w, c.hits.size(), 1, count_range, &c);
  ExpectEachOnce(c);
}

}  // namespace
