// sim_policy_test.cc: the policy simulator's policies and driver
// (tools/sim_policy.h, tools/policy_sim.h): one lookup per batch reproduces
// the per-access policies (references written here), OPT against an
// exhaustive search and against every policy, hand-computed batches for each
// policy's batch semantics, the driver's rule checks and per-batch hit rates,
// the loaded trace, recovery after the hot set moves, and the budget search
// of the fleche row.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <list>
#include <map>
#include <random>
#include <set>
#include <vector>

#include "tools/policy_sim.h"

namespace {

using Batch = std::vector<uint64_t>;  // ids of table 0, in lookup order
using Trace = std::vector<Batch>;

// The trace loaded as the simulator loads one (ids of one table).
struct Loaded {
  fl_sim_trace t{};
  explicit Loaded(const Trace &tr) {
    fl_trace_batch b{};
    EXPECT_EQ(fl_trace_batch_init(&b, 1), FL_OK);
    EXPECT_EQ(fl_sim_trace_begin(&t), FL_OK);
    for (const Batch &ids : tr) {
      fl_trace_batch_clear(&b);
      for (uint64_t id : ids) EXPECT_EQ(fl_trace_batch_push(&b, 0, id), FL_OK);
      EXPECT_EQ(fl_sim_trace_add(&t, &b), FL_OK);
    }
    EXPECT_EQ(fl_sim_trace_end(&t), FL_OK);
    fl_trace_batch_free(&b);
  }
  ~Loaded() { fl_sim_trace_free(&t); }
};

// One row of the table, freed with its scope.
struct Simulated {
  fl_sim_result r{};
  Simulated(const fl_sim_policy &p, const Trace &tr, uint64_t capacity) {
    Loaded l(tr);
    char err[256] = "";
    EXPECT_EQ(fl_sim_run(&l.t, &p, capacity, 1, &r, err, sizeof err), FL_OK) << err;
  }
  ~Simulated() { fl_sim_result_free(&r); }
};

uint64_t Hits(const fl_sim_policy &p, const Trace &tr, uint64_t capacity) {
  return Simulated(p, tr, capacity).r.hits;
}

const fl_sim_policy *const kPolicies[] = {&fl_sim_opt, &fl_sim_lru, &fl_sim_arc, &fl_sim_tinylfu,
                                          &fl_sim_lfu};

// Batches of `per_batch` lookups over ids 0..keys-1, skewed (squared
// uniform) so that keys recur across and within batches.
Trace RandomTrace(std::mt19937_64 &rng, size_t batches, size_t per_batch, uint64_t keys) {
  std::uniform_real_distribution<double> u(0, 1);
  Trace tr(batches);
  for (Batch &b : tr)
    for (size_t i = 0; i < per_batch; i++) b.push_back((uint64_t)(u(rng) * u(rng) * (double)keys));
  return tr;
}

// ----------------------------------------------- per-access references

uint64_t LruReference(const Batch &ids, size_t capacity) {
  std::list<uint64_t> order;  // front: most recent
  std::map<uint64_t, std::list<uint64_t>::iterator> at;
  uint64_t hits = 0;
  for (uint64_t id : ids) {
    auto it = at.find(id);
    if (it != at.end()) {
      hits++;
      order.erase(it->second);
    } else if (order.size() == capacity) {
      at.erase(order.back());
      order.pop_back();
    }
    order.push_front(id);
    at[id] = order.begin();
  }
  return hits;
}

// Belady with bypass: on a miss, of the resident keys and the new one, the
// one next used last leaves (the new one itself when it is).
uint64_t BeladyReference(const Batch &ids, size_t capacity) {
  auto next_use = [&](size_t from, uint64_t id) {
    for (size_t j = from; j < ids.size(); j++)
      if (ids[j] == id) return j;
    return ids.size();
  };
  std::set<uint64_t> in;
  uint64_t hits = 0;
  for (size_t i = 0; i < ids.size(); i++) {
    if (in.count(ids[i])) {
      hits++;
      continue;
    }
    in.insert(ids[i]);
    if (in.size() <= capacity) continue;
    uint64_t worst = 0;
    size_t far = 0;
    for (uint64_t k : in)
      if (next_use(i + 1, k) >= far) far = next_use(i + 1, k), worst = k;
    in.erase(worst);
  }
  return hits;
}

// ARC as the paper's pseudocode gives it, one access at a time.
uint64_t ArcReference(const Batch &ids, size_t c) {
  std::list<uint64_t> t1, t2, b1, b2;  // front: most recent
  double p = 0;
  auto has = [](std::list<uint64_t> &l, uint64_t x) { return std::find(l.begin(), l.end(), x) != l.end(); };
  auto replace = [&](bool in_b2) {
    if (!t1.empty() && ((double)t1.size() > p || (in_b2 && (double)t1.size() == p))) {
      b1.push_front(t1.back());
      t1.pop_back();
    } else {
      b2.push_front(t2.back());
      t2.pop_back();
    }
  };
  uint64_t hits = 0;
  for (uint64_t x : ids) {
    if (has(t1, x) || has(t2, x)) {
      hits++;
      t1.remove(x);
      t2.remove(x);
      t2.push_front(x);
    } else if (has(b1, x)) {
      p = std::min((double)c, p + (b1.size() >= b2.size() ? 1.0 : (double)b2.size() / b1.size()));
      replace(false);
      b1.remove(x);
      t2.push_front(x);
    } else if (has(b2, x)) {
      p = std::max(0.0, p - (b2.size() >= b1.size() ? 1.0 : (double)b1.size() / b2.size()));
      replace(true);
      b2.remove(x);
      t2.push_front(x);
    } else {
      size_t l1 = t1.size() + b1.size(), all = l1 + t2.size() + b2.size();
      if (l1 == c) {
        if (t1.size() < c) {
          b1.pop_back();
          replace(false);
        } else {
          t1.pop_back();
        }
      } else if (all >= c) {
        if (all == 2 * c) b2.pop_back();
        replace(false);
      }
      t1.push_front(x);
    }
  }
  return hits;
}

// The most lookup hits any schedule gets: after each batch the cache may keep
// any set of at most `capacity` of its keys and the batch's (ids < 32), a
// dynamic program over those sets.
uint64_t BruteForce(const Trace &tr, size_t capacity) {
  std::map<uint32_t, uint64_t> best = {{0, 0}};  // resident set -> most hits so far
  for (const Batch &b : tr) {
    std::map<uint32_t, uint64_t> next;
    for (const auto &[resident, so_far] : best) {
      uint64_t hits = so_far;
      uint32_t pool = resident;
      for (uint64_t id : b) {
        if (resident >> id & 1) hits++;
        pool |= 1u << id;
      }
      for (uint32_t keep = pool;; keep = (keep - 1) & pool) {
        if ((size_t)__builtin_popcount(keep) <= capacity) next[keep] = std::max(next[keep], hits);
        if (keep == 0) break;
      }
    }
    best.swap(next);
  }
  uint64_t most = 0;
  for (const auto &kv : best) most = std::max(most, kv.second);
  return most;
}

// ------------------------------------------------------------------ tests

// Random traces of one lookup a batch: the policy's hits equal the
// per-access reference's at each capacity.
void ExpectPerAccess(const fl_sim_policy &p, uint64_t (*reference)(const Batch &, size_t),
                     uint64_t seed) {
  std::mt19937_64 rng(seed);
  for (int round = 0; round < 40; round++) {
    Trace tr = RandomTrace(rng, 300, 1, 10 + round * 6);
    Batch ids;
    for (const Batch &b : tr) ids.push_back(b[0]);
    for (size_t cap : {1, 3, 8, 20})
      EXPECT_EQ(Hits(p, tr, cap), reference(ids, cap)) << "round " << round << " cap " << cap;
  }
}

TEST(SimPolicy, OneLookupPerBatchIsPerAccessLru) { ExpectPerAccess(fl_sim_lru, LruReference, 1); }
TEST(SimPolicy, OneLookupPerBatchIsPerAccessArc) { ExpectPerAccess(fl_sim_arc, ArcReference, 2); }
TEST(SimPolicy, OneLookupPerBatchOptIsBelady) { ExpectPerAccess(fl_sim_opt, BeladyReference, 3); }

// Without repeats inside a batch a lookup hit is a key hit, what Belady's rule
// maximizes: OPT equals the exhaustive search.
TEST(SimPolicy, OptEqualsExhaustiveSearchWithoutRepeats) {
  std::mt19937_64 rng(4);
  for (int round = 0; round < 300; round++) {
    size_t keys = 3 + round % 5, per = 1 + round % 3;
    Trace tr = RandomTrace(rng, 6, per, keys);
    for (Batch &b : tr) {
      std::sort(b.begin(), b.end());
      b.erase(std::unique(b.begin(), b.end()), b.end());
    }
    for (size_t cap = 1; cap <= 3; cap++)
      EXPECT_EQ(Hits(fl_sim_opt, tr, cap), BruteForce(tr, cap)) << "round " << round << " cap " << cap;
  }
}

TEST(SimPolicy, OptBeatsEveryPolicyOnRandomTraces) {
  std::mt19937_64 rng(5);
  for (int round = 0; round < 60; round++) {
    Trace tr = RandomTrace(rng, 60, 1 + round % 12, 30 + round * 3);
    for (size_t cap : {1, 4, 16}) {
      uint64_t opt = Hits(fl_sim_opt, tr, cap);
      for (const fl_sim_policy *p : kPolicies)
        EXPECT_GE(opt, Hits(*p, tr, cap)) << p->name << " round " << round << " cap " << cap;
    }
  }
}

// A key is never a hit in the batch that brings it in, whatever its count.
TEST(SimPolicy, ARepeatInsideABatchIsAMiss) {
  const Trace tr = {{7, 7, 7}, {7, 7}};
  for (const fl_sim_policy *p : kPolicies) EXPECT_EQ(Hits(*p, tr, 1), 2u) << p->name;
}

// LRU: a batch's keys are more recent than older ones, the more frequent
// (then the later looked up) the more recent, and a hit refreshes once.
TEST(SimPolicy, LruRanksABatchByCountThenLastLookup) {
  EXPECT_EQ(Hits(fl_sim_lru, {{1, 2}, {3}, {2}}, 2), 1u);        // 2 looked up last: kept
  EXPECT_EQ(Hits(fl_sim_lru, {{1, 2}, {3}, {1}}, 2), 0u);        // 1 the older: evicted
  EXPECT_EQ(Hits(fl_sim_lru, {{1, 1, 2}, {3}, {1}}, 2), 1u);     // 1 more frequent: kept
  EXPECT_EQ(Hits(fl_sim_lru, {{1, 2}, {1, 1, 1, 2}, {3}, {1, 1}}, 2), 6u);  // the hit 1 refreshed
  // More distinct misses than room: the most frequent stay, the hit too.
  EXPECT_EQ(Hits(fl_sim_lru, {{1}, {1, 1, 2, 3, 3, 4}, {1, 3}}, 2), 4u);
}

// ARC: a key looked up twice in its batch goes to T2 and outlives a scan that
// flushes LRU.
TEST(SimPolicy, ArcKeepsATwiceUsedKeyThroughAScan) {
  const Trace tr = {{1, 1}, {2}, {3}, {4}, {1}};
  EXPECT_EQ(Hits(fl_sim_arc, tr, 2), 1u);
  EXPECT_EQ(Hits(fl_sim_lru, tr, 2), 0u);
}

// W-TinyLFU: one-off keys leaving the window lose to a frequent one in
// probation (window 1, main 2 at capacity 3).
TEST(SimPolicy, TinyLfuAdmitsByFrequency) {
  const Trace tr = {{1, 1, 1}, {2}, {3}, {4}, {5}, {1}};
  EXPECT_EQ(Hits(fl_sim_tinylfu, tr, 3), 1u);
  EXPECT_EQ(Hits(fl_sim_lru, tr, 3), 0u);
  // A probation hit is promoted to protected: it then outlives probation's
  // turnover of frequent-enough keys.
  const Trace promoted = {{1, 1}, {2, 2}, {3}, {1}, {4, 4, 4}, {5, 5, 5, 5}, {6, 6, 6, 6}, {1}};
  EXPECT_EQ(Hits(fl_sim_tinylfu, promoted, 3), 2u);
}

// LFU-DA: a batch's count is its uses, a miss's and a hit's; aging lets new
// keys evict a key popular long ago, which plain LFU would keep forever.
TEST(SimPolicy, LfuCountsUsesAndAges) {
  EXPECT_EQ(Hits(fl_sim_lfu, {{1, 1, 1, 1, 2}, {3}, {4}, {1}}, 2), 1u);
  EXPECT_EQ(Hits(fl_sim_lru, {{1, 1, 1, 1, 2}, {3}, {4}, {1}}, 2), 0u);
  EXPECT_EQ(Hits(fl_sim_lfu, {{1, 2}, {1, 1, 1, 1, 2}, {3}, {4}, {1}}, 2), 6u);
  Trace aged = {{1, 1, 1, 1, 1}};
  for (uint64_t k = 10; k < 30; k++) aged.push_back({k});
  aged.push_back({1});
  EXPECT_EQ(Hits(fl_sim_lfu, aged, 2), 0u);
}

// OPT keeps the key next used soonest, and of keys next used in the same
// batch the one looked up more often there; a key never used again never
// comes in.
TEST(SimPolicy, OptKeepsTheSoonestThenTheMostLookedUp) {
  EXPECT_EQ(Simulated(fl_sim_opt, {{1}, {2}, {3, 1}}, 2).r.admissions, 1u);
  EXPECT_EQ(Hits(fl_sim_opt, {{1, 2}, {2}, {1}}, 1), 1u);
  EXPECT_EQ(Hits(fl_sim_opt, {{1, 2}, {1, 2, 2}}, 1), 2u);
  EXPECT_EQ(Hits(fl_sim_opt, {{1, 2}, {2, 1, 1}}, 1), 2u);
}

TEST(SimPolicy, TraceHoldsDistinctKeysWithNextUses) {
  Loaded l({{5, 6, 5, 7, 6, 5}, {6}, {5, 8}});
  const fl_sim_trace &t = l.t;
  ASSERT_EQ(t.n_batches, 3u);
  EXPECT_EQ(t.n_keys, 4u);
  EXPECT_EQ(t.lookups, 9u);
  EXPECT_EQ(t.n_entries, 6u);
  EXPECT_EQ(t.first_use, 7u);  // batch 0's six lookups and 8's
  // Batch 0: 5 (3 lookups), 6 (2), 7 (1); keys numbered by first lookup.
  const fl_sim_entry *e = t.entry;
  EXPECT_EQ(e[0].key, 0u);
  EXPECT_EQ(e[0].count, 3u);
  EXPECT_EQ(e[0].next, 2u);
  EXPECT_EQ(e[0].next_count, 1u);
  EXPECT_EQ(e[1].key, 1u);
  EXPECT_EQ(e[1].next, 1u);
  EXPECT_EQ(e[2].key, 2u);
  EXPECT_EQ(e[2].next, FL_SIM_NEVER);
  EXPECT_EQ(e[2].next_count, 0u);
  // Equal counts: the later looked up first.
  Loaded ties({{1, 2, 3}});
  EXPECT_EQ(ties.t.entry[0].key, 2u);
  EXPECT_EQ(ties.t.entry[2].key, 0u);
}

// A policy that breaks the rules fails the run: it admits every miss (mode
// 0), admits a hit (1) or evicts a key that is not resident (2).
int g_rogue_mode;
void *RogueCreate(const fl_sim_setup *) { return &g_rogue_mode; }
void RogueDestroy(void *) {}
void RogueBatch(void *, const fl_sim_batch *b, fl_sim_log *log) {
  if (g_rogue_mode == 0)
    for (size_t i = 0; i < b->n_misses; i++) fl_sim_admit(log, b->misses[i].key);
  if (g_rogue_mode == 1 && b->index == 0) fl_sim_admit(log, b->misses[0].key);
  if (g_rogue_mode == 1 && b->n_hits) fl_sim_admit(log, b->hits[0].key);
  if (g_rogue_mode == 2) fl_sim_evict(log, b->misses[0].key);
}

TEST(SimPolicy, DriverRejectsARuleBreakingPolicy) {
  const fl_sim_policy rogue = {"rogue", "", RogueCreate, RogueBatch, RogueDestroy};
  const char *want[] = {"beyond the capacity", "admission of a resident key", "not resident"};
  for (g_rogue_mode = 0; g_rogue_mode < 3; g_rogue_mode++) {
    Loaded l({{1, 2, 3}, {1, 2, 3}});
    fl_sim_result r;
    char err[256] = "";
    EXPECT_EQ(fl_sim_run(&l.t, &rogue, 2, 1, &r, err, sizeof err), FL_ERR_INVALID_ARGUMENT);
    EXPECT_NE(strstr(err, want[g_rogue_mode]), nullptr) << err;
    fl_sim_result_free(&r);
  }
}

// The driver keeps each batch's hit rate: LRU at capacity 2 holds 1 and 2
// after batch 0, hits 1 twice in batch 1 (3 is its miss), keeps 1 and 3, and
// misses 2 in batch 2.
TEST(SimPolicy, DriverKeepsEachBatchsHitRate) {
  Simulated s(fl_sim_lru, {{1, 2}, {1, 1, 3}, {2}}, 2);
  ASSERT_EQ(s.r.batches, 3u);
  EXPECT_EQ(s.r.batch_pct[0], 0);
  EXPECT_DOUBLE_EQ(s.r.batch_pct[1], 200.0 / 3);
  EXPECT_EQ(s.r.batch_pct[2], 0);
}

// Recovery: the batches from the switch until the hit rate first reaches the
// mean of the last quarter (rounded up) of the batches from the switch, less
// the tolerance.
TEST(SimPolicy, RecoveryIsTheFirstBatchNearTheNewSteadyState) {
  // From batch 4: 10 batches, the last 3 average 80, so 79.5 is reached at
  // batch 7 (79.4 is not), 3 batches after the switch.
  const double curve[] = {90, 90, 90, 90, 10, 50, 79.4, 79.6, 78, 80, 80, 80, 81, 79};
  fl_sim_recovery r = fl_sim_recovery_of(curve, 14, 4, FL_SIM_RECOVERY_PTS);
  EXPECT_DOUBLE_EQ(r.steady_pct, 80);
  EXPECT_EQ(r.batches, 3u);
  // A wider tolerance reaches it sooner; the switch batch itself counts 0.
  EXPECT_EQ(fl_sim_recovery_of(curve, 14, 4, 1).batches, 2u);
  EXPECT_EQ(fl_sim_recovery_of(curve, 14, 7, FL_SIM_RECOVERY_PTS).batches, 0u);
  // Overshooting the steady state is recovering: from batch 0 the last 4
  // average 80 and batch 0's 90 is above it.
  EXPECT_EQ(fl_sim_recovery_of(curve, 14, 0, FL_SIM_RECOVERY_PTS).batches, 0u);
  // 5 batches after the switch: their last 2 (79.6, 78) average 78.8, and
  // batch 6's 79.4 is the first at 78.3 or more.
  r = fl_sim_recovery_of(curve, 9, 4, FL_SIM_RECOVERY_PTS);
  EXPECT_NEAR(r.steady_pct, 78.8, 1e-9);
  EXPECT_EQ(r.batches, 2u);
  // One batch after the switch is its own steady state.
  EXPECT_EQ(fl_sim_recovery_of(curve, 5, 4, FL_SIM_RECOVERY_PTS).batches, 0u);
}

// The fleche row's budget: the least whose pool holds the vectors, so it
// holds them and at most a page (64 KiB of 128-byte vectors) more, at the
// options' index load limit: a fuller index leaves more of a budget to the
// pool, so the same vectors need less.
TEST(SimPolicy, BudgetOfVectorsHoldsThemAndLittleMore) {
  fl_table_desc d{};
  d.name = "t";
  d.corpus_size = 1 << 18;
  d.dim = 32;
  d.dtype = FL_FP32;
  d.id_kind = FL_IDS_DENSE;
  fl_store *s = nullptr;
  ASSERT_EQ(fl_store_create(&d, 1, 1, &s), FL_OK);
  fl_replay_opts half, full;
  fl_replay_opts_default(&half);
  fl_replay_opts_default(&full);
  half.max_load = 0.5;
  full.max_load = 0.8;
  for (uint64_t want : {100ull, 5000ull, 70000ull}) {
    uint64_t budget[2] = {0, 0};
    const fl_replay_opts *opts[2] = {&half, &full};
    for (int k = 0; k < 2; k++) {
      uint64_t got = 0;
      ASSERT_EQ(fl_sim_budget_of_vectors(s, opts[k], want, &budget[k]), FL_OK);
      ASSERT_EQ(fl_sim_vectors_of_budget(s, opts[k], budget[k], &got), FL_OK);
      EXPECT_GE(got, want);
      EXPECT_LE(got, want + 512);
    }
    // 128-byte vectors with 24-byte slots: 176 bytes a vector at load 0.5,
    // 158 at 0.8.
    if (want >= 5000) {
      EXPECT_LT(budget[1], budget[0] * 0.95) << want;
    }
  }
  fl_store_destroy(s);
}

}  // namespace
