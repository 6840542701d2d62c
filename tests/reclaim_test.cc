// reclaim_test.cc: batch-based reclamation on the host (cache/reclaim.c):
// when retired slabs are freed, when a removal marked as a whole (a CUDA
// round's evicted slabs, fl_reclaim_mark) may be reused (fl_reclaim_horizon),
// and that queries on streams give their slots back with no collect, also
// while other threads remove and collect, their events asked outside the
// mutex.
#include <gtest/gtest.h>

#include <pthread.h>

#include <atomic>
#include <thread>
#include <vector>

extern "C" {
#include "cache/reclaim.h"
}

namespace {

// Hooks over plain memory: an "event" is an int that is nonzero once fired.
struct Owner {
  std::vector<uint64_t> freed;
  int released = 0;
  std::atomic<long> asked{0};  // events asked whether they fired (a driver call each on CUDA)
};

fl_reclaim_hooks Hooks(Owner *o) {
  fl_reclaim_hooks h;
  h.free_slab = [](void *ctx, uint32_t, uint64_t loc) { ((Owner *)ctx)->freed.push_back(loc); };
  h.event_done = [](void *ctx, void *ev) {
    ((Owner *)ctx)->asked++;
    return *(int *)ev;
  };
  h.release_event = [](void *ctx, void *) { ((Owner *)ctx)->released++; };
  h.ctx = o;
  return h;
}

class Reclaim : public testing::Test {
 protected:
  void SetUp() override { fl_reclaim_init(&r_); }
  void TearDown() override { fl_reclaim_destroy(&r_); }
  fl_reclaim r_{};
  Owner o_;
};

TEST_F(Reclaim, AMarkIsReusableOnlyAfterTheQueriesBeforeItEnd) {
  fl_reclaim_hooks h = Hooks(&o_);
  int64_t before = fl_reclaim_begin(&r_, &h);
  ASSERT_GE(before, 0);
  uint64_t mark = fl_reclaim_mark(&r_);
  int64_t after = fl_reclaim_begin(&r_, &h);  // began after the removal: cannot read the slabs
  ASSERT_GE(after, 0);
  EXPECT_LE(fl_reclaim_horizon(&r_, &h), mark) << "a query that began before the mark runs";
  fl_reclaim_end(&r_, before, nullptr);
  EXPECT_GT(fl_reclaim_horizon(&r_, &h), mark) << "only a later query runs";
  fl_reclaim_end(&r_, after, nullptr);
  EXPECT_TRUE(o_.freed.empty()) << "a mark frees nothing itself";
}

TEST_F(Reclaim, AQueryOnAStreamHoldsTheMarkUntilItsEventFires) {
  fl_reclaim_hooks h = Hooks(&o_);
  int64_t t = fl_reclaim_begin(&r_, &h);
  int fired = 0;
  fl_reclaim_end(&r_, t, &fired);  // its reads end when the stream gets there
  uint64_t mark = fl_reclaim_mark(&r_);
  EXPECT_LE(fl_reclaim_horizon(&r_, &h), mark);
  EXPECT_EQ(o_.released, 0);
  fired = 1;
  EXPECT_GT(fl_reclaim_horizon(&r_, &h), mark);
  EXPECT_EQ(o_.released, 1) << "the fired event goes back to its owner once";
  EXPECT_GT(fl_reclaim_horizon(&r_, &h), mark);
  EXPECT_EQ(o_.released, 1);
}

TEST_F(Reclaim, RetiredSlabsAreFreedInEpochOrderOnceNoQueryCanReadThem) {
  fl_reclaim_hooks h = Hooks(&o_);
  int64_t q1 = fl_reclaim_begin(&r_, &h);
  const uint64_t first[] = {10, 11};
  ASSERT_EQ(fl_reclaim_retire(&r_, first, 2, 0), 0);
  int64_t q2 = fl_reclaim_begin(&r_, &h);
  const uint64_t second[] = {20};
  ASSERT_EQ(fl_reclaim_retire(&r_, second, 1, 0), 0);
  EXPECT_EQ(fl_reclaim_collect(&r_, &h), 0u) << "q1 may read both";
  fl_reclaim_end(&r_, q1, nullptr);
  EXPECT_EQ(fl_reclaim_collect(&r_, &h), 2u) << "q2 began after the first removal";
  EXPECT_EQ(o_.freed, (std::vector<uint64_t>{10, 11}));
  fl_reclaim_end(&r_, q2, nullptr);
  EXPECT_EQ(fl_reclaim_collect(&r_, &h), 1u);
  EXPECT_EQ(o_.freed.back(), 20u);
}

TEST_F(Reclaim, SlotsOfFinishedQueriesAreReusedWithoutACollect) {
  // Every batch hits: no removal, so nothing calls collect or horizon.
  // Queries on streams must still give their slots and events back, or
  // each begin would scan every query ever made.
  fl_reclaim_hooks h = Hooks(&o_);
  std::vector<int> fired(10000, 0);
  for (int q = 0; q < 10000; q++) {
    int64_t t = fl_reclaim_begin(&r_, &h);
    ASSERT_GE(t, 0);
    fl_reclaim_end(&r_, t, &fired[q]);
    if (q >= 3) fired[q - 3] = 1;  // three queries in flight at a time
  }
  EXPECT_LE(r_.n_inflight, 16u) << "slots grew with the queries made";
  EXPECT_GE(o_.released, 10000 - 16) << "fired events were not given back";
  // A pass asks every running query's event: with slots for only the
  // queries in flight, each begin would pass and ask the three running
  // ones again (4 asks a query); slots for twice the running ones make it
  // 2.
  EXPECT_LE(o_.asked.load(), 10000 * 5 / 2) << "events asked again and again";
}

TEST_F(Reclaim, ABeginNeverTakesTheSlotOfAQueryStillRunning) {
  fl_reclaim_hooks h = Hooks(&o_);
  std::vector<int> fired(40, 0);
  std::vector<int64_t> tickets;
  for (int q = 0; q < 40; q++) {  // none fires: each needs a slot of its own
    int64_t t = fl_reclaim_begin(&r_, &h);
    ASSERT_GE(t, 0);
    for (int64_t u : tickets) ASSERT_NE(t, u);
    tickets.push_back(t);
    fl_reclaim_end(&r_, t, &fired[q]);
  }
  EXPECT_EQ(o_.released, 0);
  uint64_t mark = fl_reclaim_mark(&r_);
  EXPECT_LE(fl_reclaim_horizon(&r_, &h), mark) << "the running queries hold the mark";
}

// Events are asked outside the mutex, and an answer about a slot that was
// ended and taken again meanwhile (by a query ending on the same pooled
// event, as the CUDA cache's are) ends nothing. The event hook plays the
// other thread: it finds the mutex free (a nested call would deadlock
// otherwise), ends the first query through a horizon of its own, begins a
// second in the same slot that ends on the same event, not fired for it,
// and answers "fired" for the first. Fails when the second query's slot is
// taken back on that stale answer (the mark it holds would pass).
struct Reentrant {
  fl_reclaim *r;
  fl_reclaim_hooks h;
  int ev = 0, calls = 0, released = 0;
  bool held = false;
  int64_t q1 = -1, q2 = -1;
  uint64_t mark = 0;
};

int reentrant_done(void *ctx, void *ev) {
  auto *x = static_cast<Reentrant *>(ctx);
  if (pthread_mutex_trylock(&x->r->mu) != 0) {
    x->held = true;
    return 0;
  }
  pthread_mutex_unlock(&x->r->mu);
  if (x->calls++ > 0) return *static_cast<int *>(ev);
  x->ev = 1;
  fl_reclaim_horizon(x->r, &x->h);  // ends q1 (this hook's second call)
  x->q2 = fl_reclaim_begin(x->r, &x->h);
  x->mark = fl_reclaim_mark(x->r);
  fl_reclaim_end(x->r, x->q2, &x->ev);
  x->ev = 0;
  return 1;
}

TEST_F(Reclaim, AStaleAnswerAboutAReusedSlotEndsNothing) {
  Reentrant x;
  x.r = &r_;
  x.h.free_slab = nullptr;
  x.h.event_done = reentrant_done;
  x.h.release_event = [](void *ctx, void *) { static_cast<Reentrant *>(ctx)->released++; };
  x.h.ctx = &x;
  x.q1 = fl_reclaim_begin(&r_, &x.h);
  fl_reclaim_end(&r_, x.q1, &x.ev);
  const uint64_t horizon = fl_reclaim_horizon(&r_, &x.h);
  EXPECT_FALSE(x.held) << "an event was asked with the mutex held";
  ASSERT_EQ(x.q2, x.q1) << "the second query took another slot: nothing tested";
  EXPECT_LE(horizon, x.mark) << "the second query's slot was ended on the first's answer";
  EXPECT_EQ(x.released, 1);
  x.ev = 1;
  EXPECT_GT(fl_reclaim_horizon(&r_, &x.h), x.mark);
  EXPECT_EQ(x.released, 2);
}

// Callers on streams, as a CUDA cache's, beside a thread that removes slabs
// one by one (index first, then retire) and collects. After its begin, a
// caller reads the first slab still in the index and, before its end, finds
// it not freed: a slab removed after a query began stays until that query's
// event fires. Under ThreadSanitizer (.ci/run) the begins that take back
// fired slots race nothing. Every removal is freed in the end, every event
// goes back once, and the slots stay as few as the queries in flight.
TEST_F(Reclaim, CallersOnStreamsBesideRemovalsFreeNothingEarly) {
  constexpr int kCallers = 4, kQueries = 3000;
  constexpr uint64_t kSlabs = 500;
  struct Shared {
    std::atomic<int> released{0};
    std::atomic<uint64_t> freed_n{0};
    std::atomic<uint64_t> removed{0};  // slabs 1..removed are out of the index
    std::atomic<int> freed[kSlabs + 2] = {};
  } sh;
  fl_reclaim_hooks h;
  h.free_slab = [](void *ctx, uint32_t, uint64_t loc) {
    Shared *x = (Shared *)ctx;
    x->freed[loc].store(1);
    x->freed_n++;
  };
  h.event_done = [](void *, void *ev) { return ((std::atomic<int> *)ev)->load() ? 1 : 0; };
  h.release_event = [](void *ctx, void *) { ((Shared *)ctx)->released++; };
  h.ctx = &sh;
  std::vector<std::atomic<int>> fired(kCallers * kQueries);
  std::atomic<int> early{0}, failed{0};
  std::vector<std::thread> callers;
  for (int c = 0; c < kCallers; c++)
    callers.emplace_back([&, c] {
      for (int q = 0; q < kQueries; q++) {
        int64_t t = fl_reclaim_begin(&r_, &h);
        if (t < 0) {
          failed++;
          return;
        }
        const uint64_t read = sh.removed.load() + 1;  // in the index now
        for (int spin = 0; spin < 50; spin++) std::this_thread::yield();
        if (read <= kSlabs && sh.freed[read].load()) early++;
        std::atomic<int> *ev = &fired[c * kQueries + q];
        fl_reclaim_end(&r_, t, ev);
        ev->store(1);  // the stream got past the query
      }
    });
  std::thread remover([&] {
    for (uint64_t loc = 1; loc <= kSlabs; loc++) {
      sh.removed.store(loc);  // out of the index, then retired
      if (fl_reclaim_retire(&r_, &loc, 1, 0) != 0) failed++;
      fl_reclaim_collect(&r_, &h);
    }
  });
  for (auto &t : callers) t.join();
  remover.join();
  fl_reclaim_collect(&r_, &h);
  EXPECT_EQ(failed.load(), 0);
  EXPECT_EQ(early.load(), 0) << "a slab freed while a query that could read it ran";
  EXPECT_EQ(sh.freed_n.load(), kSlabs) << "every removal freed once no query could read it";
  EXPECT_EQ(sh.released.load(), kCallers * kQueries) << "each event given back once";
  EXPECT_LE(r_.n_inflight, 64u) << "slots grew with the queries made";
}

}  // namespace
