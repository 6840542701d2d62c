// index_sweep_test.cc: the index's slot layouts and its tombstone sweep
// (cache/index.h). Their logic on hand-built indexes of every layout; then, through the public API on the host backend and on
// CUDA (fl_cache_index_health), that an invalidation keeps the keys after it
// on their chain found, and that a churned cache keeps its never-used slots,
// so misses stop probing early.
#include <cuda_runtime_api.h>

#include <algorithm>
#include <random>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

#include "tests/shims.h"

#include "cache/index.h"

namespace {

struct Census {
  uint64_t empty = 0, tombstones = 0, live = 0;
  double miss_probe = 0;  // mean slots a miss walks from a home to a never-used slot
};

Census Count(const fl_index_view &v) {
  Census c;
  for (uint64_t i = 0; i < v.slots; i++) {
    switch (fl_index_slot_state(&v, i)) {
      case FL_SLOT_EMPTY: c.empty++; break;
      case FL_SLOT_TOMBSTONE: c.tombstones++; break;
      case FL_SLOT_LIVE: c.live++; break;
    }
  }
  uint64_t walked = 0;
  for (uint64_t h = 0; h < v.slots; h++) {
    uint64_t i = h, n = 1;
    while (n < FL_PROBE_LIMIT && fl_index_slot_state(&v, i) != FL_SLOT_EMPTY)
      n++, i = fl_index_next(&v, i);
    walked += n;
  }
  c.miss_probe = double(walked) / double(v.slots);
  return c;
}

// One of the index's four layouts (cache/index.h).
struct Layout {
  uint32_t key_bits, loc_bits;
};

std::string LayoutName(const testing::TestParamInfo<Layout> &p) {
  return "Key" + std::to_string(p.param.key_bits) + "Loc" + std::to_string(p.param.loc_bits);
}

// Where unit 0 of a 32-bit location is: any 16-byte aligned address.
constexpr uint64_t kLocBase = 0x7f0000000000ull;

// An index in host memory, every slot never-used.
struct HostIndex {
  std::vector<uint64_t> mem;
  fl_index_view v{};
  HostIndex(uint64_t slots, Layout l = {64, 64})
      : mem((slots * FL_INDEX_SLOT_BYTES(l.key_bits, l.loc_bits) + 7) / 8, 0x5a5a5a5a5a5a5a5aull) {
    v.slots = slots;
    v.key_bits = l.key_bits;
    v.loc_bits = l.loc_bits;
    v.loc_base = kLocBase;
    fl_index_place(&v, mem.data());
    for (uint64_t i = 0; i < slots; i++) fl_index_clear_slot(&v, i);
  }
  // Keys that fit the key width (never the empty key).
  uint64_t Key(uint64_t n) const {
    uint64_t k = n * 0x9e3779b97f4a7c15ull >> 8;
    return v.key_bits == 32 ? k % 0xfffffff0ull + 1 : k;
  }
  std::vector<uint64_t> KeysHomedAt(uint64_t home, size_t n) const {
    std::vector<uint64_t> keys;
    for (uint64_t k = 1; keys.size() < n; k++)
      if (fl_index_home(&v, k) == home) keys.push_back(k);
    return keys;
  }
};

// A slab address for the key: 16-byte aligned, within a 32-bit location's
// reach of kLocBase, never 0.
uint64_t Loc(uint64_t key) { return kLocBase + ((key % (1ull << 30)) << 4); }

bool Found(const fl_index_view &v, uint64_t key) {
  uint64_t loc = 0;
  return fl_index_find(&v, key, &loc) >= 0 && loc == Loc(key);
}

class IndexLayout : public testing::TestWithParam<Layout> {};

// Every field of every slot holds its own value: the arrays fl_index_place
// lays out neither overlap nor leave the slot's bytes.
TEST_P(IndexLayout, EachSlotsFieldsAreItsOwn) {
  const uint64_t slots = 1000;
  HostIndex x(slots, GetParam());
  const fl_index_view &v = x.v;
  for (uint64_t i = 0; i < slots; i++) {
    fl_index_set_key(&v, i, i + 1);
    *fl_index_ver(&v, i) = uint32_t(2 * i);
    *fl_index_ts(&v, i) = uint32_t(3 * i + 1);
    fl_index_set_loc(&v, i, kLocBase + 16 * (i + 7));
  }
  for (uint64_t i = 0; i < slots; i++) {
    EXPECT_EQ(fl_index_key(&v, i), i + 1) << i;
    EXPECT_EQ(*fl_index_ver(&v, i), uint32_t(2 * i)) << i;
    EXPECT_EQ(*fl_index_ts(&v, i), uint32_t(3 * i + 1)) << i;
    EXPECT_EQ(fl_index_loc(&v, i), kLocBase + 16 * (i + 7)) << i;
  }
  // Nothing past the last slot's bytes was written.
  size_t used = slots * FL_INDEX_SLOT_BYTES(GetParam().key_bits, GetParam().loc_bits);
  const uint8_t *bytes = reinterpret_cast<const uint8_t *>(x.mem.data());
  for (size_t b = used; b < x.mem.size() * 8; b++) EXPECT_EQ(bytes[b], 0x5a) << b;
}

// The first and the last unit a 32-bit location reaches come back as they
// went in; a DRAM pointer cannot go into one, and the index stays as it was.
TEST_P(IndexLayout, LocationsAtTheEdgesOfTheirReach) {
  HostIndex x(64, GetParam());
  const uint64_t last = kLocBase + FL_LOC32_MAX_POOL - 16;
  ASSERT_EQ(fl_index_insert(&x.v, 5, kLocBase, 1), FL_INSERT_DONE);
  ASSERT_EQ(fl_index_insert(&x.v, 6, last, 1), FL_INSERT_DONE);
  uint64_t loc = 0;
  ASSERT_GE(fl_index_find(&x.v, 5, &loc), 0);
  EXPECT_EQ(loc, kLocBase);
  ASSERT_GE(fl_index_find(&x.v, 6, &loc), 0);
  EXPECT_EQ(loc, last);
  uint64_t dram = 0x1230 | FL_LOC_DRAM_BIT;
  if (GetParam().loc_bits == 32) {
    EXPECT_EQ(fl_index_insert(&x.v, 7, dram, 1), FL_INSERT_FULL);
    EXPECT_LT(fl_index_find(&x.v, 7, &loc), 0);
    for (uint64_t i = 0; i < 64; i++)
      if (fl_index_key(&x.v, i) == 7) ADD_FAILURE() << "the refused key took slot " << i;
  } else {
    EXPECT_EQ(fl_index_insert(&x.v, 7, dram, 1), FL_INSERT_DONE);
    ASSERT_GE(fl_index_find(&x.v, 7, &loc), 0);
    EXPECT_EQ(loc, dram);
  }
}

// A tombstone with a live key after it on its chain stays; once the chain's
// last key goes, its erase empties the whole run back to the live key before.
void CheckChainAt(uint64_t home, Layout l) {
  HostIndex x(64, l);
  std::vector<uint64_t> k = x.KeysHomedAt(home, 3);
  for (uint64_t key : k) ASSERT_EQ(fl_index_insert(&x.v, key, Loc(key), 1), FL_INSERT_DONE);
  auto slot = [&](int d) { return (home + d) % 64; };
  EXPECT_EQ(fl_index_erase(&x.v, k[1]), Loc(k[1]));
  EXPECT_EQ(fl_index_slot_state(&x.v, slot(1)), FL_SLOT_TOMBSTONE);
  EXPECT_TRUE(Found(x.v, k[0]));
  EXPECT_TRUE(Found(x.v, k[2])) << "the key after the tombstone is lost";
  EXPECT_EQ(fl_index_sweep_slot(&x.v, slot(1)), 0);
  EXPECT_EQ(fl_index_erase(&x.v, k[2]), Loc(k[2]));
  EXPECT_EQ(fl_index_slot_state(&x.v, slot(2)), FL_SLOT_EMPTY);
  EXPECT_EQ(fl_index_slot_state(&x.v, slot(1)), FL_SLOT_EMPTY);
  EXPECT_EQ(fl_index_slot_state(&x.v, slot(0)), FL_SLOT_LIVE);
  EXPECT_TRUE(Found(x.v, k[0]));
  Census c = Count(x.v);
  EXPECT_EQ(c.live, 1u);
  EXPECT_EQ(c.tombstones, 0u);
  // The erased keys come back into the first free slots of their chain.
  ASSERT_EQ(fl_index_insert(&x.v, k[2], Loc(k[2]), 2), FL_INSERT_DONE);
  EXPECT_EQ(fl_index_slot_state(&x.v, slot(1)), FL_SLOT_LIVE);
  EXPECT_TRUE(Found(x.v, k[2]));
}

TEST_P(IndexLayout, AnErasedKeysRunGoesOnlyWhenNoLiveKeyFollowsIt) { CheckChainAt(10, GetParam()); }

// A run of tombstones ending at a never-used slot goes back to the live key
// before it, and the sweep says how many slots it emptied.
TEST_P(IndexLayout, ARunSweepsBackToTheLiveKeyBeforeIt) {
  HostIndex x(64, GetParam());
  std::vector<uint64_t> k = x.KeysHomedAt(20, 4);
  for (uint64_t key : k) ASSERT_EQ(fl_index_insert(&x.v, key, Loc(key), 1), FL_INSERT_DONE);
  for (uint64_t i = 21; i < 24; i++) ASSERT_NE(fl_index_erase_slot(&x.v, i), FL_LOC_NONE);
  EXPECT_EQ(fl_index_sweep_run(&x.v, 23), 3u);
  for (uint64_t i = 21; i < 24; i++) EXPECT_EQ(fl_index_slot_state(&x.v, i), FL_SLOT_EMPTY) << i;
  EXPECT_TRUE(Found(x.v, k[0]));
  EXPECT_EQ(fl_index_sweep_run(&x.v, 20), 0u) << "a live key was swept";
}
TEST_P(IndexLayout, RunsThatWrapAroundTheEnd) { CheckChainAt(63, GetParam()); }

// A table of nothing but tombstones and live keys has no slot to stop at:
// nothing is swept, and every key stays found.
TEST_P(IndexLayout, NothingGoesWithoutANeverUsedSlot) {
  HostIndex x(16, GetParam());
  std::vector<uint64_t> keys;
  for (uint64_t k = 1; keys.size() < 16; k++)
    if (fl_index_insert(&x.v, k, Loc(k), 1) == FL_INSERT_DONE) keys.push_back(k);
  for (uint64_t i = 0; i < 16; i += 2) EXPECT_NE(fl_index_erase_slot(&x.v, i), FL_LOC_NONE);
  for (uint64_t i = 0; i < 16; i++) EXPECT_EQ(fl_index_sweep_slot(&x.v, i), 0) << i;
  for (uint64_t i = 1; i < 16; i += 2) EXPECT_TRUE(Found(x.v, fl_index_key(&x.v, i))) << i;
}

// Churn as a cache's eviction makes it: fill to a load, tombstone a random
// twentieth, sweep (or not), again. Every live key stays found with its
// location and appears once; with the sweep, never-used slots stay.
Census Churn(double load, bool sweep, uint64_t seed, Layout l) {
  const uint64_t slots = 8192;
  HostIndex x(slots, l);
  std::mt19937_64 rng(seed);
  std::set<uint64_t> live;
  uint64_t next_key = 1;
  for (int round = 0; round < 600; round++) {
    while (live.size() < uint64_t(load * slots)) {
      uint64_t key = x.Key(next_key++);
      if (fl_index_insert(&x.v, key, Loc(key), 1) != FL_INSERT_DONE) {
        ADD_FAILURE() << "insert found no slot at round " << round;
        return {};
      }
      live.insert(key);
    }
    std::vector<uint64_t> keys;
    keys.assign(live.begin(), live.end());
    std::shuffle(keys.begin(), keys.end(), rng);
    for (size_t i = 0; i < keys.size() / 20; i++) {
      uint64_t loc = 0;
      int64_t at = fl_index_find(&x.v, keys[i], &loc);  // compaction moves keys
      if (at < 0) {
        ADD_FAILURE() << "key " << keys[i] << " lost at round " << round;
        return {};
      }
      EXPECT_EQ(fl_index_erase_slot(&x.v, (uint64_t)at), Loc(keys[i]));
      live.erase(keys[i]);
    }
    if (sweep) {
      for (uint64_t i = 0; i < slots; i++)
        if (fl_index_cluster_start(&x.v, i)) fl_index_compact_cluster(&x.v, i);
      for (uint64_t i = slots; i-- > 0;) fl_index_sweep_slot(&x.v, i);
    }
  }
  std::set<uint64_t> seen;
  for (uint64_t i = 0; i < slots; i++)
    if (fl_index_slot_state(&x.v, i) == FL_SLOT_LIVE) {
      uint64_t key = fl_index_key(&x.v, i);
      EXPECT_TRUE(seen.insert(key).second) << "key " << key << " in two slots";
      EXPECT_TRUE(live.count(key)) << "key " << key << " was erased";
    }
  for (uint64_t key : live) EXPECT_TRUE(Found(x.v, key)) << "key " << key << " lost";
  return Count(x.v);
}

TEST_P(IndexLayout, ChurnedIndexKeepsItsNeverUsedSlots) {
  for (double load : {0.5, 0.7}) {
    Census with = Churn(load, true, 7, GetParam()), without = Churn(load, false, 7, GetParam());
    SCOPED_TRACE("load " + std::to_string(load));
    EXPECT_EQ(with.live, without.live);
    // Without the sweep, tombstones take the place of nearly every
    // never-used slot, and a miss walks far; with it, the free slots stay
    // mostly never-used.
    EXPECT_LT(without.empty, (8192 - without.live) / 10) << without.tombstones << " tombstones";
    EXPECT_GT(with.empty, (8192 - with.live) / 2) << with.tombstones << " tombstones";
    EXPECT_LT(with.miss_probe, without.miss_probe / 2);
    printf("load %.1f: with the sweep %llu never-used, %llu tombstones, a miss walks %.1f slots; "
           "without %llu, %llu, %.1f\n",
           load, (unsigned long long)with.empty, (unsigned long long)with.tombstones,
           with.miss_probe, (unsigned long long)without.empty,
           (unsigned long long)without.tombstones, without.miss_probe);
  }
}

INSTANTIATE_TEST_SUITE_P(Layouts, IndexLayout,
                         testing::Values(Layout{64, 64}, Layout{64, 32}, Layout{32, 64},
                                         Layout{32, 32}),
                         LayoutName);

// --- inside a cache, both backends and key widths ---

struct Param {
  fl_backend backend;
  uint32_t key_bits;
};

class CacheSweepTest : public testing::TestWithParam<Param> {
 protected:
  static constexpr uint32_t kDim = 8;
  static constexpr uint64_t kRows = 200000;

  void SetUp() override {
    if (GetParam().backend == FL_BACKEND_CUDA) FL_REQUIRE_GPU();
    table_ = {"t", kRows, kDim, FL_FP32, FL_IDS_DENSE};
    fl_store *s = nullptr;
    ASSERT_EQ(fl_store_create(&table_, 1, 2, &s), FL_OK) << fl_store_last_error(nullptr);
    store_.reset(s);
    FL_ASSERT_OK_STORE(fl_store_fill_synthetic(s, 0, 3), s);
  }

  // The coin at 1: every missed row enters, the most churn a budget allows.
  fl::Cache Make(uint64_t budget, double max_load) {
    fl_config cfg;
    fl_config_default(&cfg);
    cfg.backend = GetParam().backend;
    cfg.key_bits = GetParam().key_bits;
    cfg.budget_bytes = budget;
    cfg.max_load = max_load;
    cfg.admit_policy = FL_ADMIT_COIN;
    cfg.admit_probability = 1.0;
    cfg.host_threads = 2;
    cfg.zero_copy_rows = 0;
    fl_cache *c = nullptr;
    fl_status st = fl_cache_create(store_.get(), &cfg, &c);
    EXPECT_EQ(st, FL_OK) << fl::Describe(st, fl_cache_last_error(nullptr));
    return fl::Cache(c);
  }

  // Queries ids of one table into out (host memory; on CUDA through device
  // buffers) and lets the admission round end.
  void Run(fl_cache *c, uint32_t table, const std::vector<uint64_t> &ids, size_t row_bytes,
           void *out) {
    bool cuda = GetParam().backend == FL_BACKEND_CUDA;
    size_t bytes = ids.size() * row_bytes;
    void *d_ids = nullptr, *d_out = nullptr;
    fl_table_query q = {table, ids.data(), ids.size(), out};
    if (cuda) {
      ASSERT_EQ(cudaMalloc(&d_ids, ids.size() * 8), cudaSuccess);
      ASSERT_EQ(cudaMalloc(&d_out, bytes), cudaSuccess);
      ASSERT_EQ(cudaMemcpy(d_ids, ids.data(), ids.size() * 8, cudaMemcpyHostToDevice), cudaSuccess);
      q.ids = (const uint64_t *)d_ids;
      q.out = d_out;
    }
    fl_status st = fl_query(c, &q, 1, nullptr);
    EXPECT_EQ(st, FL_OK) << fl::Describe(st, fl_cache_last_error(c));
    if (cuda) {
      EXPECT_EQ(cudaMemcpy(out, d_out, bytes, cudaMemcpyDeviceToHost), cudaSuccess);
      cudaFree(d_ids);
      cudaFree(d_out);
    }
    EXPECT_EQ(fl_cache_sync(c), FL_OK);
  }

  // Queries ids of table 0, checks each row against the store; returns the
  // hits.
  uint64_t Query(fl_cache *c, const std::vector<uint64_t> &ids) {
    std::vector<float> out(ids.size() * kDim, -1.0f);
    fl_cache_stats before, after;
    EXPECT_EQ(fl_cache_stats_get(c, &before, nullptr, 0), FL_OK);
    Run(c, 0, ids, kDim * 4, out.data());
    for (size_t i = 0; i < ids.size(); i++)
      for (uint32_t j = 0; j < kDim; j++)
        if (out[i * kDim + j] != Want(ids[i], j)) {
          ADD_FAILURE() << "id " << ids[i] << " element " << j << ": " << out[i * kDim + j]
                        << ", the store has " << Want(ids[i], j);
          return 0;
        }
    EXPECT_EQ(fl_cache_stats_get(c, &after, nullptr, 0), FL_OK);
    return after.hits - before.hits;
  }

  float Want(uint64_t id, uint32_t j) {
    auto it = written_.find(id);
    return it == written_.end() ? fl_synthetic_value(3, 0, id, j) : it->second + (float)j;
  }

  void Write(uint64_t id, float base) {
    std::vector<float> row(kDim);
    for (uint32_t j = 0; j < kDim; j++) row[j] = base + (float)j;
    FL_ASSERT_OK_STORE(fl_store_upsert(store_.get(), 0, &id, 1, row.data()), store_.get());
    written_[id] = base;
  }

  fl_index_health Health(fl_cache *c) {
    fl_index_health h;
    fl_status st = fl_cache_index_health(c, &h);
    EXPECT_EQ(st, FL_OK) << fl::Describe(st, fl_cache_last_error(c));
    return h;
  }

  fl_table_desc table_;
  fl::Store store_;
  std::unordered_map<uint64_t, float> written_;
};

TEST_P(CacheSweepTest, HealthNeedsACacheAndAnOutput) {
  fl::Cache c = Make(1 << 20, 0.5);
  ASSERT_TRUE(c);
  fl_index_health h;
  EXPECT_EQ(fl_cache_index_health(nullptr, &h), FL_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(fl_cache_index_health(c.get(), nullptr), FL_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(fl_cache_last_error(c.get())).find("fl_cache_index_health"), std::string::npos);
  h = Health(c.get());
  EXPECT_EQ(h.never_used, h.slots);
  EXPECT_EQ(h.miss_probe, 1.0);
}

// Three ids whose keys share a home slot sit one after another; a write to
// the middle one invalidates it, and the last must still hit. When the last
// goes too, both their slots are never-used again.
TEST_P(CacheSweepTest, AnInvalidatedKeysTombstoneKeepsTheKeysAfterItFound) {
  fl::Cache c = Make(1 << 20, 0.5);
  ASSERT_TRUE(c);
  fl_index_health h = Health(c.get());
  fl_encoding *e = nullptr;
  ASSERT_EQ(fl_encoding_create(&table_, 1, GetParam().key_bits, FL_ENCODING_SIZE_AWARE, &e), FL_OK);
  fl::Encoding enc(e);
  fl_index_view v{nullptr, nullptr, nullptr, h.slots, GetParam().key_bits, 32, 0};
  std::vector<uint64_t> ids;
  uint64_t home = 0;
  for (uint64_t id = 0; ids.size() < 3 && id < kRows; id++) {
    uint64_t key = 0;
    ASSERT_EQ(fl_encoding_encode(e, 0, &id, 1, &key, 0), FL_OK);
    uint64_t hm = fl_index_home(&v, key);
    if (ids.empty()) home = hm;
    if (hm == home) ids.push_back(id);
  }
  ASSERT_EQ(ids.size(), 3u) << "no three ids share a home slot";
  for (uint64_t id : ids) EXPECT_EQ(Query(c.get(), {id}), 0u);  // admitted in this order
  for (uint64_t id : ids) EXPECT_EQ(Query(c.get(), {id}), 1u) << "id " << id << " not cached";
  Write(ids[1], 100.0f);
  h = Health(c.get());
  EXPECT_EQ(h.live, 2u);
  EXPECT_EQ(h.tombstones, 1u);
  EXPECT_EQ(Query(c.get(), {ids[2]}), 1u) << "the key after the tombstone is lost";
  EXPECT_EQ(Query(c.get(), {ids[0]}), 1u);
  Write(ids[2], 200.0f);
  h = Health(c.get());
  EXPECT_EQ(h.live, 1u);
  EXPECT_EQ(h.tombstones, 0u);
  EXPECT_EQ(h.never_used, h.slots - 1);
  EXPECT_EQ(Query(c.get(), {ids[0]}), 1u);
  EXPECT_EQ(Query(c.get(), {ids[1], ids[2]}), 0u);  // the new rows, from the store
}

// Hundreds of eviction rounds over a pool of a few thousand vectors: every
// row equals the store's, and the index keeps never-used slots, at the
// default load and a fuller one.
TEST_P(CacheSweepTest, ChurnKeepsMissProbesShort) {
  for (double load : {0.5, 0.8}) {
    SCOPED_TRACE("max_load " + std::to_string(load));
    fl::Cache c = Make(256 << 10, load);
    ASSERT_TRUE(c);
    std::mt19937_64 rng(11);
    std::vector<uint64_t> ids(512);
    for (int b = 0; b < 300; b++) {
      for (auto &id : ids) id = rng() % kRows;
      Query(c.get(), ids);
      ASSERT_FALSE(HasFailure()) << "batch " << b;
    }
    fl_cache_stats s;
    ASSERT_EQ(fl_cache_stats_get(c.get(), &s, nullptr, 0), FL_OK);
    fl_index_health h = Health(c.get());
    EXPECT_GT(s.evictions, 3 * h.slots) << "too little churn";
    EXPECT_EQ(h.live, s.index_entries);
    EXPECT_EQ(h.live + h.tombstones + h.never_used, h.slots);
    // Every slot that is not live would be a tombstone by now without the
    // sweep, and a miss would walk FL_PROBE_LIMIT slots.
    EXPECT_GT(h.never_used, (h.slots - h.live) / 2) << h.tombstones << " tombstones";
    // A fresh index at these loads: about 1.5 and 8 slots; 11 to 17 here
    // at 0.8, depending on the watermarks and the key width.
    EXPECT_LT(h.miss_probe, load < 0.6 ? 4.0 : 32.0);
    printf("max_load %.1f: %llu slots, %llu live, %llu tombstones, %llu never used; a miss reads %.2f\n",
           load, (unsigned long long)h.slots, (unsigned long long)h.live,
           (unsigned long long)h.tombstones, (unsigned long long)h.never_used, h.miss_probe);
  }
}

// A hot set of vectors far smaller than the model's mean fills the index at
// max_load long before the pool reaches its watermark: eviction must then
// go by the index, or inserts fail and nothing is ever admitted again.
TEST_P(CacheSweepTest, AHotSetOfSmallVectorsStillChurns) {
  std::vector<fl_table_desc> tables = {{"tiny", kRows, 1, FL_FP16, FL_IDS_DENSE},
                                       {"wide", kRows, 256, FL_FP32, FL_IDS_DENSE}};
  fl_store *s = nullptr;
  ASSERT_EQ(fl_store_create(tables.data(), 2, 2, &s), FL_OK) << fl_store_last_error(nullptr);
  fl::Store store(s);
  FL_ASSERT_OK_STORE(fl_store_fill_synthetic(s, 0, 3), s);
  store_ = std::move(store);
  fl::Cache c = Make(256 << 10, 0.8);
  ASSERT_TRUE(c);
  std::mt19937_64 rng(5);
  std::vector<uint64_t> ids(256);
  std::vector<uint16_t> out(ids.size());
  fl_cache_stats mid{}, end{};
  for (int b = 0; b < 200; b++) {
    for (auto &id : ids) id = rng() % kRows;
    Run(c.get(), 0, ids, 2, out.data());
    ASSERT_FALSE(HasFailure()) << "batch " << b;
    if (b == 99) ASSERT_EQ(fl_cache_stats_get(c.get(), &mid, nullptr, 0), FL_OK);
  }
  ASSERT_EQ(fl_cache_stats_get(c.get(), &end, nullptr, 0), FL_OK);
  fl_index_health h = Health(c.get());
  EXPECT_LT(end.pool_bytes_used, end.pool_bytes / 10) << "not the index-bound case";
  EXPECT_GT(end.evictions, mid.evictions) << "nothing evicted";
  EXPECT_GT(end.admissions, mid.admissions + 1000) << "admission stopped";
  // The host stops admitting at max_load; a CUDA round may pass it by a
  // batch until the next round evicts (fl_cache_index_room).
  EXPECT_LE(double(h.live), 0.8 * double(h.slots) + double(ids.size()));
}

INSTANTIATE_TEST_SUITE_P(Backends, CacheSweepTest,
                         testing::Values(Param{FL_BACKEND_HOST, 64}, Param{FL_BACKEND_HOST, 32},
                                         Param{FL_BACKEND_CUDA, 64}, Param{FL_BACKEND_CUDA, 32}),
                         [](const testing::TestParamInfo<Param> &p) {
                           return std::string(p.param.backend == FL_BACKEND_CUDA ? "Cuda" : "Host") +
                                  std::to_string(p.param.key_bits);
                         });

}  // namespace
