// parallel_test.cc: the worker pool (common/parallel.h): every item runs once,
// a started job overlaps the caller's own work, a busy pool runs a second
// caller's range on that caller, and waking ahead leaves jobs intact. The
// courier (common/courier.h): jobs run in order, off the poster's thread,
// one at a time; posts never wait, a waiting job is shed by a newer one of
// its key or by fl_courier_shed; wait, idle and destroy wait for jobs.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

extern "C" {
#include "common/courier.h"
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

// A job whose chunks, once begun, hold on until the caller's own work is done
// (5 s at most): a chunk that began before and saw the caller finish ran
// during the caller's work. A start that ran the job on the caller, or left
// it all to fl_workers_wait, has none.
struct Overlap {
  Counts c{50000};
  std::atomic<int> started{0}, during{0};
  std::atomic<bool> caller_done{false};
};

void overlap_range(void *ctx, size_t b, size_t e) {
  auto *o = static_cast<Overlap *>(ctx);
  o->started++;
  const bool caller_busy = !o->caller_done;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (!o->caller_done && std::chrono::steady_clock::now() < deadline) std::this_thread::yield();
  if (caller_busy && o->caller_done) o->during++;
  count_range(&o->c, b, e);
}

TEST(Workers, StartedJobOverlapsTheCallersWork) {
  Pool p(3);
  Overlap o;
  ASSERT_EQ(fl_workers_start(p.w, o.c.hits.size(), 16, overlap_range, &o), 1);
  // The caller's own work: it waits (5 s at most) for a worker to begin.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (o.started == 0 && std::chrono::steady_clock::now() < deadline) std::this_thread::yield();
  o.caller_done = true;
  fl_workers_wait(p.w);
  ExpectEachOnce(o.c);
  EXPECT_GT(o.during.load(), 0) << "no chunk ran while the caller worked";
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

struct Delivery {
  std::atomic<int> *log;      // the next free place in order[]
  int *order;                 // which job ran at each place
  int id;
  std::thread::id *ran_on;    // where it ran, or was dropped
  std::atomic<bool> *release; // the job waits for it, when non-null
  bool dropped = false;
  uint64_t ticket = 0;        // the courier's, cleared when run or dropped
  std::atomic<bool> *started = nullptr;  // set as the job starts, when non-null
};

void deliver(void *ctx) {
  auto *d = static_cast<Delivery *>(ctx);
  if (d->started) d->started->store(true);
  if (d->release)
    while (!d->release->load()) std::this_thread::yield();
  *d->ran_on = std::this_thread::get_id();
  d->order[d->log->fetch_add(1)] = d->id;
  __atomic_store_n(&d->ticket, 0, __ATOMIC_RELEASE);
}

void drop(void *ctx) {
  auto *d = static_cast<Delivery *>(ctx);
  *d->ran_on = std::this_thread::get_id();
  d->dropped = true;
  __atomic_store_n(&d->ticket, 0, __ATOMIC_RELEASE);
}

void Post(fl_courier *k, Delivery *d, uint64_t key) {
  fl_courier_post(k, fl_courier_job{deliver, drop, d, key, &d->ticket});
}

// Both a courier that sleeps between jobs and one that spins for the next
// (spin_ns), with posts now back to back, now spaced beyond its spin.
class CourierSpin : public testing::TestWithParam<uint64_t> {};

TEST_P(CourierSpin, RunsJobsOfDistinctKeysInOrderOffThePostersThread) {
  fl_courier *k = fl_courier_create(GetParam());
  ASSERT_NE(k, nullptr);
  constexpr int kJobs = 200;
  std::atomic<int> log{0};
  std::vector<int> order(kJobs, -1);
  std::vector<std::thread::id> ran_on(kJobs);
  std::vector<Delivery> jobs(kJobs);
  for (int i = 0; i < kJobs; i++) {
    jobs[i] = {&log, order.data(), i, &ran_on[i], nullptr};
    Post(k, &jobs[i], i);
    if (i % 50 == 49) std::this_thread::sleep_for(std::chrono::microseconds(300));
  }
  fl_courier_idle(k);
  ASSERT_EQ(log.load(), kJobs);
  for (int i = 0; i < kJobs; i++) {
    EXPECT_EQ(order[i], i);
    EXPECT_NE(ran_on[i], std::this_thread::get_id());
    EXPECT_FALSE(jobs[i].dropped);
    EXPECT_EQ(jobs[i].ticket, 0u);
  }
  fl_courier_destroy(k);
}

INSTANTIATE_TEST_SUITE_P(SleepOrSpin, CourierSpin, testing::Values(0ull, 100000ull));

// While the first job runs, posts return at once; a waiting job is shed by
// the next of its key, which takes its place in the queue.
TEST(Courier, PostNeverWaitsAndANewerJobShedsTheWaitingOneOfItsKey) {
  fl_courier *k = fl_courier_create(0);
  ASSERT_NE(k, nullptr);
  std::atomic<int> log{0};
  int order[5] = {-1, -1, -1, -1, -1};
  std::thread::id ran_on[5];
  std::atomic<bool> release{false};
  std::atomic<bool> started{false};
  Delivery running{&log, order, 0, &ran_on[0], &release, false, 0, &started};
  Delivery older{&log, order, 1, &ran_on[1], nullptr};
  Delivery other{&log, order, 2, &ran_on[2], nullptr};
  Delivery newer{&log, order, 3, &ran_on[3], nullptr};
  Post(k, &running, 7);
  while (!started.load()) std::this_thread::yield();
  Post(k, &older, 7);   // waits behind the running job of its key
  Post(k, &other, 8);
  uint64_t older_ticket = older.ticket;
  EXPECT_NE(older_ticket, 0u);
  Post(k, &newer, 7);   // sheds `older` here, on this thread
  EXPECT_TRUE(older.dropped);
  EXPECT_EQ(older.ticket, 0u);
  EXPECT_EQ(ran_on[1], std::this_thread::get_id());
  EXPECT_NE(newer.ticket, older_ticket);
  EXPECT_EQ(log.load(), 0);
  release = true;
  fl_courier_idle(k);
  ASSERT_EQ(log.load(), 3);
  EXPECT_EQ(order[0], 0);
  EXPECT_EQ(order[1], 3);  // in the shed job's place, before `other`
  EXPECT_EQ(order[2], 2);
  EXPECT_FALSE(newer.dropped || other.dropped || running.dropped);
  fl_courier_destroy(k);
}

TEST(Courier, ShedTakesOnlyAWaitingJobAndWaitWaitsForARunningOne) {
  fl_courier *k = fl_courier_create(0);
  ASSERT_NE(k, nullptr);
  std::atomic<int> log{0};
  int order[2] = {-1, -1};
  std::thread::id ran_on[2];
  std::atomic<bool> release{false};
  std::atomic<bool> started{false};
  Delivery running{&log, order, 0, &ran_on[0], &release, false, 0, &started};
  Delivery waiting{&log, order, 1, &ran_on[1], nullptr};
  Post(k, &running, 1);
  uint64_t t_running = running.ticket;
  while (!started.load()) std::this_thread::yield();
  Post(k, &waiting, 2);
  uint64_t t_waiting = waiting.ticket;
  EXPECT_EQ(fl_courier_shed(k, t_running), 0);  // the courier has it
  EXPECT_EQ(fl_courier_shed(k, t_waiting), 1);
  EXPECT_TRUE(waiting.dropped);
  EXPECT_EQ(fl_courier_shed(k, t_waiting), 0);  // gone already
  std::atomic<bool> waited{false};
  std::thread waiter([&] {
    fl_courier_wait(k, t_running);
    waited = true;
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_FALSE(waited.load());
  release = true;
  waiter.join();
  EXPECT_EQ(log.load(), 1);
  fl_courier_wait(k, t_waiting);  // shed: returns at once
  fl_courier_destroy(k);
}

TEST(Courier, DestroyRunsEveryWaitingJob) {
  fl_courier *k = fl_courier_create(0);
  ASSERT_NE(k, nullptr);
  std::atomic<int> log{0};
  int order[2] = {-1, -1};
  std::thread::id ran_on[2];
  std::atomic<bool> release{false};
  Delivery first{&log, order, 7, &ran_on[0], &release};
  Delivery second{&log, order, 8, &ran_on[1], nullptr};
  Post(k, &first, 0);
  Post(k, &second, 1);
  std::thread releaser([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    release = true;
  });
  fl_courier_destroy(k);
  releaser.join();
  EXPECT_EQ(log.load(), 2);
  EXPECT_EQ(order[0], 7);
  EXPECT_EQ(order[1], 8);
  fl_courier_destroy(nullptr);
}

}  // namespace
