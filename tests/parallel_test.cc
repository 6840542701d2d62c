// parallel_test.cc: the worker pool (common/parallel.h) and its cost model
// (common/pool_model.h): every item runs once; the model picks the cheapest
// plan (checked against a brute-force search), a tiny job runs on the
// caller alone and a large one calls in the workers, with the same results;
// the pool learns its costs; a started job overlaps the caller's own work,
// its watcher runs what stalled helpers have not taken, a busy pool runs a
// second caller's range on that caller, and workers woken ahead spin until
// the deadline, then sleep, and leave jobs intact; its threads carry its
// name. The courier
// (common/courier.h): jobs run in order, off the poster's thread, one at a
// time; posts never wait, a waiting job is shed by a newer one of its key or
// by fl_courier_shed; wait, idle and destroy wait for jobs; its thread
// carries its name.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

extern "C" {
#include "common/clock.h"
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

// The names of the process's threads now (/proc/self/task/TID/comm).
std::multiset<std::string> ThreadNames() {
  std::multiset<std::string> names;
  for (const auto &task : std::filesystem::directory_iterator("/proc/self/task")) {
    std::string name;
    if (std::getline(std::ifstream(task.path() / "comm"), name)) names.insert(name);
  }
  return names;
}

struct Pool {
  fl_workers *w;
  explicit Pool(uint32_t threads) : w(fl_workers_create("test-pool", threads)) {}
  ~Pool() { fl_workers_destroy(w); }
};

// Costs under which every job stays on its caller (a hand-off costs more
// than any job), and costs under which every worker pays (items cost 1 ms,
// hand-offs 1 ns).
const fl_pool_costs kAlone = {1, 1e12, 1e12, 0};
const fl_pool_costs kHelpers = {1e6, 1, 1, 0};

TEST(Workers, EveryItemRunsOnceOverManyJobs) {
  Pool p(4);
  ASSERT_NE(p.w, nullptr);
  EXPECT_EQ(fl_workers_count(p.w), 4u);
  // Learned costs, then every job forced onto the caller, then onto all.
  for (const fl_pool_costs *fixed : {(const fl_pool_costs *)nullptr, &kAlone, &kHelpers}) {
    fl_workers_fix_costs(p.w, fixed);
    for (size_t n : {1u, 63u, 64u, 65u, 1000u, 100000u}) {
      Counts c(n);
      fl_workers_for(p.w, n, 64, count_range, &c);
      ExpectEachOnce(c);
    }
  }
}

// Which thread ran each item. With `await` set, every chunk waits (5 s at
// most) until chunks have run on two threads, so that a job with helpers
// shows them whatever the machine's speed and whoever takes which chunk.
struct Where {
  std::vector<std::thread::id> ran;
  std::thread::id caller = std::this_thread::get_id();
  std::mutex m;
  std::set<std::thread::id> threads;
  bool await = false;
  explicit Where(size_t n) : ran(n) {}
  size_t Threads() {
    std::lock_guard<std::mutex> l(m);
    return threads.size();
  }
};

void where_range(void *ctx, size_t b, size_t e) {
  auto *w = static_cast<Where *>(ctx);
  const auto me = std::this_thread::get_id();
  for (size_t i = b; i < e; i++) w->ran[i] = me;
  {
    std::lock_guard<std::mutex> l(w->m);
    w->threads.insert(me);
  }
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (w->await && w->Threads() < 2 && std::chrono::steady_clock::now() < deadline)
    std::this_thread::yield();
}

// Fails when a job shorter than a hand-off wakes anyone, or when the pool
// calls in workers its plan did not ask for.
TEST(Workers, TinyJobRunsOnTheCallerAlone) {
  Pool p(4);
  fl_workers_fix_costs(p.w, &kAlone);
  Where where(1000);
  fl_workers_for(p.w, where.ran.size(), 1, where_range, &where);
  EXPECT_EQ(fl_workers_last_helpers(p.w), 0u);
  for (size_t i = 0; i < where.ran.size(); i++) ASSERT_EQ(where.ran[i], where.caller) << i;
  EXPECT_EQ(fl_workers_start(p.w, where.ran.size(), 1, where_range, &where), 0);
}

// Fails when a job the model says pays for every worker runs on fewer, or
// its chunks never reach a worker.
TEST(Workers, LargeJobCallsInTheWorkers) {
  Pool p(4);
  fl_workers_fix_costs(p.w, &kHelpers);
  Where where(1000);
  where.await = true;
  fl_workers_for(p.w, where.ran.size(), 1, where_range, &where);
  EXPECT_EQ(fl_workers_last_helpers(p.w), 3u);
  std::set<std::thread::id> threads(where.ran.begin(), where.ran.end());
  EXPECT_GE(threads.size(), 2u) << "every item ran on one thread";
  EXPECT_LE(threads.size(), 4u);
  // No more participants than chunks: 3 items of grain 1 take 2 helpers.
  Counts c(3);
  fl_workers_for(p.w, 3, 1, count_range, &c);
  EXPECT_EQ(fl_workers_last_helpers(p.w), 2u);
  ExpectEachOnce(c);
}

// The output of a job does not depend on who ran it.
void square_range(void *ctx, size_t b, size_t e) {
  auto *out = static_cast<uint64_t *>(ctx);
  for (size_t i = b; i < e; i++) out[i] = (uint64_t)i * i + 7;
}

TEST(Workers, ResultsAreTheSameAloneOrWithHelpers) {
  Pool p(4);
  constexpr size_t kN = 200000;
  std::vector<uint64_t> alone(kN, 1), helped(kN, 2), watched(kN, 3);
  fl_workers_fix_costs(p.w, &kAlone);
  fl_workers_for(p.w, kN, 64, square_range, alone.data());
  EXPECT_EQ(fl_workers_last_helpers(p.w), 0u);
  fl_workers_fix_costs(p.w, &kHelpers);
  fl_workers_for(p.w, kN, 64, square_range, helped.data());
  EXPECT_EQ(fl_workers_last_helpers(p.w), 3u);
  ASSERT_EQ(fl_workers_start(p.w, kN, 64, square_range, watched.data()), 1);
  EXPECT_EQ(fl_workers_last_helpers(p.w), 3u);
  fl_workers_wait(p.w);
  EXPECT_EQ(alone, helped);
  EXPECT_EQ(alone, watched);
  EXPECT_EQ(alone[kN - 1], (uint64_t)(kN - 1) * (kN - 1) + 7);
}

// Fails when the pool does not learn: after create its hand-offs have a
// cost; after one job of a body, so does that body's item; fixed costs
// are reported as fixed, and releasing them brings the learned ones back.
TEST(Workers, LearnsItsCostsAndReportsFixedOnes) {
  Pool p(3);
  fl_pool_costs c;
  fl_workers_costs(p.w, count_range, &c);
  EXPECT_EQ(c.item_ns, 0.0);  // never run
  EXPECT_GT(c.spin_ns, 0.0);
  EXPECT_GT(c.sleep_ns, 0.0);
  EXPECT_GT(c.wake_call_ns, 0.0);
  Counts n(4096);
  fl_workers_for(p.w, n.hits.size(), 256, count_range, &n);
  ExpectEachOnce(n);
  fl_workers_costs(p.w, count_range, &c);
  EXPECT_GT(c.item_ns, 0.0);
  const double learned = c.item_ns;
  fl_workers_fix_costs(p.w, &kHelpers);
  fl_workers_costs(p.w, nullptr, &c);
  EXPECT_EQ(c.item_ns, kHelpers.item_ns);
  EXPECT_EQ(c.spin_ns, kHelpers.spin_ns);
  fl_workers_fix_costs(p.w, nullptr);
  fl_workers_costs(p.w, count_range, &c);
  EXPECT_EQ(c.item_ns, learned);
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

// Yields until done() holds, 5 s at most.
template <typename Done>
void AwaitAtMost5s(Done done) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (!done() && std::chrono::steady_clock::now() < deadline) std::this_thread::yield();
}

void overlap_range(void *ctx, size_t b, size_t e) {
  auto *o = static_cast<Overlap *>(ctx);
  o->started++;
  const bool caller_busy = !o->caller_done;
  AwaitAtMost5s([&] { return o->caller_done.load(); });
  if (caller_busy && o->caller_done) o->during++;
  count_range(&o->c, b, e);
}

TEST(Workers, StartedJobOverlapsTheCallersWork) {
  Pool p(3);
  fl_workers_fix_costs(p.w, &kHelpers);
  Overlap o;
  ASSERT_EQ(fl_workers_start(p.w, o.c.hits.size(), 16, overlap_range, &o), 1);
  // The caller's own work: it waits (5 s at most) for a worker to begin.
  AwaitAtMost5s([&] { return o.started.load() != 0; });
  o.caller_done = true;
  fl_workers_wait(p.w);
  ExpectEachOnce(o.c);
  EXPECT_GT(o.during.load(), 0) << "no chunk ran while the caller worked";
}

// Helpers that claimed a chunk and then stall (5 s at most, until the test
// releases them) hold only that chunk: the watcher runs every other chunk
// itself through fl_workers_help. Fails when help runs nothing, or runs a
// chunk a helper also runs (an item counted twice).
struct Late {
  Counts c{4096};
  std::thread::id caller = std::this_thread::get_id();
  std::atomic<bool> release{false};
};

void late_range(void *ctx, size_t b, size_t e) {
  auto *l = static_cast<Late *>(ctx);
  if (std::this_thread::get_id() != l->caller) AwaitAtMost5s([&] { return l->release.load(); });
  count_range(&l->c, b, e);
}

TEST(Workers, WatcherRunsWhatLateHelpersHaveNotTaken) {
  Pool p(4);
  fl_workers_fix_costs(p.w, &kHelpers);
  Late l;
  ASSERT_EQ(fl_workers_start(p.w, l.c.hits.size(), 16, late_range, &l), 1);
  const uint32_t helpers = fl_workers_last_helpers(p.w);
  int ran = 0;
  while (fl_workers_help(p.w)) ran++;
  size_t done = 0;
  for (const auto &h : l.c.hits) done += h.load() > 0;
  // Chunks are n / ((helpers + 1) * 8) items: each stalled helper holds one.
  const size_t chunk = l.c.hits.size() / ((helpers + 1) * 8);
  EXPECT_GT(ran, 0);
  EXPECT_GE(done, l.c.hits.size() - helpers * chunk) << "the watcher left chunks to late helpers";
  l.release = true;
  fl_workers_wait(p.w);
  ExpectEachOnce(l.c);
}

TEST(Workers, BusyPoolRunsASecondCallersRangeOnThatCaller) {
  Pool p(3);
  fl_workers_fix_costs(p.w, &kHelpers);
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

TEST(Workers, OneThreadPoolRunsEverythingOnTheCaller) {
  Pool p(1);
  fl_workers_fix_costs(p.w, &kHelpers);
  Counts c(100);
  EXPECT_EQ(fl_workers_start(p.w, c.hits.size(), 1, count_range, &c), 0);
  fl_workers_for(p.w, c.hits.size(), 1, count_range, &c);
  ExpectEachOnce(c);
}

// Polls until pred holds or `ms` pass; whether it held.
template <class Pred>
bool Within(int ms, Pred pred) {
  auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(ms);
  while (!pred()) {
    if (std::chrono::steady_clock::now() > end) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return true;
}

// Fails when a wake ahead leaves sleeping workers asleep, when they sleep
// again before its deadline (mutant 32), when they never sleep after it,
// or when a job after it loses or repeats items.
TEST(Workers, WokenAheadWorkersSpinUntilTheDeadlineThenSleep) {
  Pool p(4);
  ASSERT_TRUE(Within(5000, [&] { return fl_workers_asleep(p.w) == 3; }));
  const uint64_t until = fl_now_ns() + 400'000'000ull;
  fl_workers_prewake(p.w, until);
  ASSERT_TRUE(Within(300, [&] { return fl_workers_asleep(p.w) == 0; }));
  // Awake through the deadline (a preempted spinner does not count as asleep).
  while (fl_now_ns() + 50'000'000ull < until) {
    ASSERT_EQ(fl_workers_asleep(p.w), 0u);
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  EXPECT_TRUE(Within(5000, [&] { return fl_workers_asleep(p.w) == 3; }));
  fl_workers_fix_costs(p.w, &kHelpers);
  fl_workers_prewake(p.w, fl_now_ns() + 50'000'000ull);
  Counts c(10000);
  fl_workers_for(p.w, c.hits.size(), 1, count_range, &c);
  ExpectEachOnce(c);
}

// Fails when a pool's workers go unnamed, or a name too long for Linux's 15
// characters is dropped rather than cut.
TEST(Workers, ThreadsCarryThePoolsName) {
  fl_workers *w = fl_workers_create("named-pool", 4);
  ASSERT_NE(w, nullptr);
  std::multiset<std::string> names = ThreadNames();
  for (const char *name : {"named-pool-0", "named-pool-1", "named-pool-2"})
    EXPECT_EQ(names.count(name), 1u) << name;
  EXPECT_EQ(names.count("named-pool-3"), 0u) << "the caller is the fourth thread";
  fl_workers_destroy(w);
  EXPECT_EQ(ThreadNames().count("named-pool-0"), 0u) << "destroy joins the workers";
  w = fl_workers_create("a-much-too-long-pool", 2);
  ASSERT_NE(w, nullptr);
  EXPECT_EQ(ThreadNames().count("a-much-too-long"), 1u);
  fl_workers_destroy(w);
}

// ------------------------------------------------------------ the cost model

fl_pool_shape Shape(size_t n, size_t grain, uint32_t spinning, uint32_t sleeping) {
  fl_pool_shape s{};
  s.n = n;
  s.grain = grain;
  s.spinning = spinning;
  s.sleeping = sleeping;
  return s;
}

// The model's rule, searched exhaustively: the k minimizing the predicted
// time plus one spinning hand-off per helper (the smallest such k), over the
// helpers the job's chunks have room for; 0 for a job shorter than one
// spinning hand-off.
uint32_t BruteForcePlan(const fl_pool_costs &c, const fl_pool_shape &s) {
  const double work = (double)s.n * c.item_ns;
  if (!(work > c.spin_ns)) return 0;
  const size_t chunks = (s.n + s.grain - 1) / s.grain;
  size_t most = std::min<size_t>(s.spinning + s.sleeping, chunks - 1);
  double best = work;
  uint32_t pick = 0;
  for (uint32_t k = 1; k <= most; k++) {
    const double cost = fl_pool_predict(&c, &s, k) + k * c.spin_ns;
    if (cost < best) best = cost, pick = k;
  }
  return pick;
}

// Plans the model must make, each with why.
struct PlanCase {
  const char *why;
  fl_pool_costs costs;
  fl_pool_shape shape;
  uint32_t helpers;
};

TEST(PoolModel, SmallJobsStayOnTheCallerLargeOnesTakeEveryWorkerThatPays) {
  const fl_pool_costs c = {10, 1000, 50000, 5000}, rows = {100, 1000, 50000, 5000};
  const fl_pool_costs slow = {1e6, 1, 1, 0}, none = {0, 0, 0, 0};
  const PlanCase cases[] = {
      {"50 items of 10 ns: shorter than one spinning hand-off", c, Shape(50, 1, 15, 0), 0},
      {"500 items (5 us): a spinning helper takes half of what is left once it starts, 1 us "
       "in, but joining it and its price cost 1 us each",
       c, Shape(500, 1, 15, 0), 0},
      {"a 30 us job ends before a sleeping worker (50 us) would start", c,
       Shape(3000, 64, 0, 15), 0},
      {"no costs learned yet: nothing to gain from anyone", none, Shape(3000, 64, 0, 15), 0},
      {"32768 rows of 100 ns (3.3 ms): every spinning worker", rows, Shape(32768, 64, 15, 0), 15},
      {"the same with every worker asleep", rows, Shape(32768, 64, 0, 15), 15},
      {"3 chunks bound the helpers: 2 beside the caller", slow, Shape(192, 64, 15, 0), 2},
  };
  for (const PlanCase &k : cases) EXPECT_EQ(fl_pool_plan(&k.costs, &k.shape), k.helpers) << k.why;
  // 590 rows of 120 ns (71 us, a replay batch's misses) with spinning
  // workers: some, not all (10 chunks of 64 rows).
  const fl_pool_costs g = {120, 1000, 50000, 5000};
  const fl_pool_shape s = Shape(590, 64, 15, 0);
  const uint32_t helpers = fl_pool_plan(&g, &s);
  EXPECT_GT(helpers, 1u);
  EXPECT_LT(helpers, 10u);
}

// Fails when the plan's early stop skips a better plan, or when a plan is
// predicted slower than the caller alone.
TEST(PoolModel, PlanIsTheExhaustiveSearchsAnswer) {
  std::mt19937_64 rng(28);
  auto log_uniform = [&](double lo, double hi) {
    return std::exp(std::uniform_real_distribution<double>(std::log(lo), std::log(hi))(rng));
  };
  for (int i = 0; i < 20000; i++) {
    fl_pool_costs c;
    c.item_ns = log_uniform(0.5, 5000);
    c.spin_ns = log_uniform(50, 20000);
    c.sleep_ns = c.spin_ns * log_uniform(1, 200);  // a sleeper never starts sooner
    c.wake_call_ns = log_uniform(1, 50000);
    const size_t grain = (size_t)log_uniform(1, 4096);
    const fl_pool_shape s = Shape((size_t)log_uniform(1, 1e7), grain, rng() % 40, rng() % 40);
    const uint32_t k = fl_pool_plan(&c, &s);
    ASSERT_EQ(k, BruteForcePlan(c, s))
        << "item " << c.item_ns << " spin " << c.spin_ns << " sleep " << c.sleep_ns << " wake "
        << c.wake_call_ns << " n " << s.n << " grain " << s.grain << " spinning " << s.spinning
        << " sleeping " << s.sleeping;
    ASSERT_LE(fl_pool_predict(&c, &s, k), fl_pool_predict(&c, &s, 0));
  }
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
  fl_courier *k = fl_courier_create("test-courier", GetParam());
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
  fl_courier *k = fl_courier_create("test-courier", 0);
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
  fl_courier *k = fl_courier_create("test-courier", 0);
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
  fl_courier *k = fl_courier_create("test-courier", 0);
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

TEST(Courier, ThreadCarriesItsName) {
  fl_courier *k = fl_courier_create("named-courier", 0);
  ASSERT_NE(k, nullptr);
  EXPECT_EQ(ThreadNames().count("named-courier"), 1u);
  fl_courier_destroy(k);
}

}  // namespace
