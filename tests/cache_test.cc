// cache_test.cc: the cache and query path through the public C API, on the
// host backend everywhere and on the CUDA backend where a GPU is usable. The
// oracle: every vector a query returns equals the store's vector for that
// (table, id), whatever the cache did (admissions, evictions, invalidations,
// concurrent callers).
#include <cuda_runtime_api.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <memory>
#include <mutex>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "common/fault.h"
#include "tests/shims.h"

extern "C" {
#include "cache/admit_shift.h"
}

namespace {

struct Param {
  fl_backend backend;
  fl_layout layout;
  uint32_t key_bits;
};

std::string Name(const testing::TestParamInfo<Param> &p) {
  return std::string(p.param.backend == FL_BACKEND_CUDA ? "Cuda" : "Host") +
         (p.param.layout == FL_LAYOUT_FLAT ? "Flat" : "PerTable") + std::to_string(p.param.key_bits);
}

// Four tables of mixed shapes: dims 8, 3 (fp16: rows not 4-byte aligned),
// 64, and a hashed table of dim 16.
std::vector<fl_table_desc> Tables() {
  return {
      {"small", 50, 8, FL_FP32, FL_IDS_DENSE},
      {"half", 3000, 3, FL_FP16, FL_IDS_DENSE},
      {"wide", 20000, 64, FL_FP32, FL_IDS_DENSE},
      {"hashed", 5000, 16, FL_FP32, FL_IDS_HASHED},
  };
}

size_t ElemBytes(const fl_table_desc &d) { return d.dtype == FL_FP16 ? 2 : 4; }
size_t RowBytes(const fl_table_desc &d) { return d.dim * ElemBytes(d); }

// Hashed table ids: raw 64-bit values.
uint64_t HashedId(uint64_t k) { return k * 0x9e3779b97f4a7c15ull + 12345; }

// A writer that rewrites rows `ids` of the wide table (2, dim 64) on its own
// thread, version after version: row r of version v holds v * 64 + r in
// every element (exact in fp32), so a reader can tell a whole row of its id
// from a torn one or another's. Version 1 is written before the thread
// starts (first()); version() is the last one complete. Hold() parks it
// between two versions until Resume().
class RowRewriter {
 public:
  static constexpr size_t kDim = 64;
  RowRewriter(fl_store *s, std::vector<uint64_t> ids) : s_(s), ids_(std::move(ids)) {
    first_ = Write(1);
    thread_ = std::thread([this] {
      for (int v = 2; !stop_ && v < 200000; v++) {
        std::lock_guard<std::mutex> held(hold_);
        if (Write(v) != FL_OK) failures_++;
        version_.store(v);
      }
    });
  }
  ~RowRewriter() { Stop(); }
  fl_status first() const { return first_; }
  int version() const { return version_.load(); }
  // Returns once no write runs, none to come until Resume() (on the same
  // thread).
  void Hold() { hold_.lock(); }
  void Resume() { hold_.unlock(); }
  // Stops the writer; the writes that failed.
  int Stop() {
    stop_ = true;
    if (thread_.joinable()) thread_.join();
    return failures_.load();
  }

 private:
  fl_status Write(int v) {
    std::vector<float> rows(ids_.size() * kDim);
    for (size_t r = 0; r < ids_.size(); r++)
      std::fill(rows.begin() + r * kDim, rows.begin() + (r + 1) * kDim, (float)(v * 64 + (int)r));
    return fl_store_upsert(s_, 2, ids_.data(), ids_.size(), rows.data());
  }
  fl_store *s_;
  std::vector<uint64_t> ids_;
  fl_status first_;
  std::atomic<bool> stop_{false};
  std::atomic<int> version_{1}, failures_{0};
  std::mutex hold_;  /* held by each write, and by Hold() until Resume() */
  std::thread thread_;
};

// The rows a query got of a versioned writer's ids (RowRewriter's values:
// version * 64 + the id's index, in every element): elements unlike their
// row's first (torn), rows of another id or of no version (wrong_id), rows
// older than the version complete when the query began (stale). Zeros are
// a removed row when removed_ok.
struct VersionedRows {
  int torn = 0, wrong_id = 0, stale = 0;
  void Check(const float *out, size_t n, size_t dim, int before, bool removed_ok) {
    for (size_t r = 0; r < n; r++) {
      const float *row = out + r * dim;
      for (size_t j = 1; j < dim; j++) torn += row[j] != row[0];
      if (removed_ok && row[0] == 0.0f) continue;
      const int value = (int)row[0];
      if ((float)value != row[0] || value < 64 || value % 64 != (int)r) {
        wrong_id++;
        continue;
      }
      stale += value / 64 < before;
    }
  }
};

class CacheTest : public testing::TestWithParam<Param> {
 protected:
  void SetUp() override {
    if (GetParam().backend == FL_BACKEND_CUDA) FL_REQUIRE_GPU();
    tables_ = Tables();
    fl_store *s = nullptr;
    ASSERT_EQ(fl_store_create(tables_.data(), (uint32_t)tables_.size(), 2, &s), FL_OK)
        << fl_store_last_error(nullptr);
    store_.reset(s);
    for (uint32_t t = 0; t < 3; t++) FL_ASSERT_OK_STORE(fl_store_fill_synthetic(s, t, 7), s);
    // The hashed table holds 4000 of the 5000 ids the queries use: 1000 miss.
    std::vector<uint64_t> ids(4000);
    std::vector<float> rows(4000 * 16);
    for (uint64_t k = 0; k < 4000; k++) {
      ids[k] = HashedId(k);
      for (int j = 0; j < 16; j++) rows[k * 16 + j] = fl_synthetic_value(9, 3, ids[k], j);
    }
    FL_ASSERT_OK_STORE(fl_store_upsert(s, 3, ids.data(), ids.size(), rows.data()), s);
  }

  fl_config Config(uint64_t budget, double admit = 0.7) {
    fl_config cfg;
    fl_config_default(&cfg);
    cfg.backend = GetParam().backend;
    cfg.layout = GetParam().layout;
    cfg.key_bits = GetParam().key_bits;
    cfg.budget_bytes = budget;
    // The coin: these cases choose what share of the misses enters.
    cfg.admit_policy = FL_ADMIT_COIN;
    cfg.admit_probability = admit;
    cfg.host_threads = 2;
    return cfg;
  }

  // A cache of `budget` bytes with TinyLFU admission, the rest as Config's.
  fl::Cache TinyLfuCache(uint64_t budget) {
    fl_config cfg = Config(budget);
    cfg.admit_policy = FL_ADMIT_TINYLFU;
    return MakeCache(cfg);
  }

  fl::Cache MakeCache(const fl_config &cfg) {
    fl_cache *c = nullptr;
    fl_status s = fl_cache_create(store_.get(), &cfg, &c);
    EXPECT_EQ(s, FL_OK) << fl::Describe(s, fl_cache_last_error(nullptr));
    return fl::Cache(c);
  }

  // Random skewed ids per table (duplicates likely), `n` per table.
  std::vector<std::vector<uint64_t>> Ids(std::mt19937_64 &rng, size_t n) {
    std::vector<std::vector<uint64_t>> ids(tables_.size());
    for (size_t t = 0; t < tables_.size(); t++) {
      uint64_t corpus = tables_[t].corpus_size;
      for (size_t i = 0; i < n; i++) {
        // Squaring a uniform skews towards small ranks: hot and cold ids.
        double u = std::uniform_real_distribution<double>(0, 1)(rng);
        uint64_t k = (uint64_t)(u * u * corpus) % corpus;
        ids[t].push_back(t == 3 ? HashedId(k) : k);
      }
    }
    return ids;
  }

  // Runs one query of all tables and checks every row against the store.
  // Queries ids [from, to) of table t alone, checks the answer, and waits
  // for the query's admission (fl_cache_sync).
  void QueryRange(fl_cache *c, size_t t, uint64_t from, uint64_t to) {
    std::vector<std::vector<uint64_t>> ids(tables_.size());
    for (uint64_t k = from; k < to; k++) ids[t].push_back(k);
    QueryAndCheck(c, ids, nullptr, nullptr);
    FL_ASSERT_OK_CACHE(fl_cache_sync(c), c);
  }

  // The hits of QueryRange(c, t, from, to).
  uint64_t HitsOfRange(fl_cache *c, size_t t, uint64_t from, uint64_t to) {
    uint64_t before = Stats(c).hits;
    QueryRange(c, t, from, to);
    return Stats(c).hits - before;
  }

  // One caller's device copies of its query ids and outputs, grown as needed
  // and kept between its queries: cudaMalloc and cudaFree wait for the whole
  // device, which would serialize the concurrent callers of a test (under
  // racecheck, for minutes).
  class DeviceIo {
   public:
    DeviceIo() = default;
    DeviceIo(const DeviceIo &) = delete;
    DeviceIo &operator=(const DeviceIo &) = delete;
    ~DeviceIo() {
      for (auto &b : bufs_) cudaFree(b.p);
    }
    // The device buffer `k` (grown to at least `bytes`), or nullptr when
    // cudaMalloc fails.
    void *Buffer(size_t k, size_t bytes) {
      if (bufs_.size() <= k) bufs_.resize(k + 1);
      Buf &b = bufs_[k];
      if (b.bytes < bytes) {
        cudaFree(b.p);
        b.p = nullptr, b.bytes = 0;
        if (cudaMalloc(&b.p, bytes) != cudaSuccess) return nullptr;
        b.bytes = bytes;
      }
      return b.p;
    }

   private:
    struct Buf {
      void *p = nullptr;
      size_t bytes = 0;
    };
    std::vector<Buf> bufs_;
  };

  // Queries `ids` (one vector per table) on `stream` and checks every row
  // against the store. dev: the query's ids and outputs in these device
  // buffers (CUDA), nullptr: in host memory. Every device copy is ordered on
  // `stream`, so callers on other streams run alongside.
  void QueryAndCheck(fl_cache *c, const std::vector<std::vector<uint64_t>> &ids, void *stream,
                     DeviceIo *dev) {
    size_t nt = tables_.size();
    cudaStream_t st = (cudaStream_t)stream;
    std::vector<std::vector<uint8_t>> out(nt), want(nt);
    std::vector<fl_table_query> q(nt), w(nt);
    for (size_t t = 0; t < nt; t++) {
      size_t bytes = ids[t].size() * RowBytes(tables_[t]);
      out[t].assign(bytes, 0xAB);  // poison: every byte must be written
      want[t].assign(bytes, 0xCD);
      q[t] = {(uint32_t)t, ids[t].data(), ids[t].size(), out[t].data()};
      w[t] = {(uint32_t)t, ids[t].data(), ids[t].size(), want[t].data()};
      if (dev && bytes) {
        void *d_ids = dev->Buffer(2 * t, ids[t].size() * 8);
        void *d_out = dev->Buffer(2 * t + 1, bytes);
        ASSERT_TRUE(d_ids && d_out) << "cudaMalloc";
        ASSERT_EQ(cudaMemcpyAsync(d_ids, ids[t].data(), ids[t].size() * 8,
                                  cudaMemcpyHostToDevice, st),
                  cudaSuccess);
        ASSERT_EQ(cudaMemsetAsync(d_out, 0xAB, bytes, st), cudaSuccess);
        q[t].ids = (const uint64_t *)d_ids;
        q[t].out = d_out;
      }
    }
    FL_ASSERT_OK_CACHE(fl_query(c, q.data(), (uint32_t)nt, stream), c);
    for (size_t t = 0; t < nt; t++)
      if (dev && !out[t].empty())
        ASSERT_EQ(cudaMemcpyAsync(out[t].data(), q[t].out, out[t].size(),
                                  cudaMemcpyDeviceToHost, st),
                  cudaSuccess);
    if (GetParam().backend == FL_BACKEND_CUDA) {
      ASSERT_EQ(cudaStreamSynchronize(st), cudaSuccess);
    }
    FL_ASSERT_OK_STORE(fl_store_gather(store_.get(), w.data(), (uint32_t)nt, FL_MISSING_ZERO, nullptr),
                       store_.get());
    for (size_t t = 0; t < nt; t++) {
      size_t rb = RowBytes(tables_[t]);
      for (size_t i = 0; i < ids[t].size(); i++)
        ASSERT_EQ(0, std::memcmp(out[t].data() + i * rb, want[t].data() + i * rb, rb))
            << "table " << t << " id " << ids[t][i] << " at position " << i;
    }
  }

  // `threads` callers, each on its own stream (CUDA), query `batches` batches
  // of skewed ids (thread th: base + step * th ids per table) and check every
  // answer; device buffers every other batch on CUDA. Returns the failures.
  int ConcurrentReaders(fl_cache *c, int threads, int batches, uint64_t seed, size_t base,
                        size_t step) {
    std::vector<std::thread> pool;
    std::atomic<int> failures{0};
    for (int th = 0; th < threads; th++) {
      pool.emplace_back([&, th] {
        cudaStream_t stream = nullptr;
        bool cuda = GetParam().backend == FL_BACKEND_CUDA;
        if (cuda) cudaStreamCreate(&stream);
        std::mt19937_64 rng(seed + th);
        DeviceIo dev;
        for (int batch = 0; batch < batches; batch++) {
          QueryAndCheck(c, Ids(rng, base + step * th), stream,
                        cuda && (batch & 1) ? &dev : nullptr);
          if (HasFailure()) failures++;
        }
        if (stream) cudaStreamDestroy(stream);
      });
    }
    for (auto &t : pool) t.join();
    return failures.load();
  }

  // Statistics once every admission enqueued so far is counted.
  fl_cache_stats Stats(fl_cache *c) {
    fl_cache_stats s;
    EXPECT_EQ(fl_cache_sync(c), FL_OK) << fl_cache_last_error(c);
    EXPECT_EQ(fl_cache_stats_get(c, &s, nullptr, 0), FL_OK);
    return s;
  }

  // OracleWithAdmissionsAndEvictions under an admission policy.
  void OracleUnderEviction(fl_admit_policy policy);

  // ConcurrentUpdatesNeverServeTornOrStaleRows with this zero-copy limit.
  void ConcurrentUpdates(uint64_t zero_copy_rows);

  // A prepared query answers as fl_query would, run after run (the CUDA
  // index phase a graph), misses gathered by the host or, with
  // zero_copy_rows, read in place; bad ids and bad prepares fail clearly.
  // A prepared query over the first nt tables, run on random ids; answers
  // checked against the store's. launch: through fl_prepared_launch and
  // fl_prepared_wait, every buffer on the device (CUDA), so that from the
  // second run the answerer gathers while the graph waits at its gate.
  // unified: the unified index's size, so that misses of dense tables read
  // in place come with pointer rows, which the host fetches.
  void PreparedAnswersLikeQuery(uint64_t zero_copy_rows, size_t nt, double admit = 0.7,
                                bool launch = false, bool device_ids = false,
                                uint64_t unified = 0) {
    fl_config cfg = Config(1 << 20, admit);
    cfg.zero_copy_rows = zero_copy_rows;
    cfg.unified_entries = unified;
    fl::Cache c = MakeCache(cfg);
    ASSERT_NE(c, nullptr);
    const bool cuda = GetParam().backend == FL_BACKEND_CUDA;
    const size_t n = 300;
    std::vector<std::vector<uint64_t>> ids(nt, std::vector<uint64_t>(n));
    std::vector<std::vector<uint8_t>> out(nt), want(nt);
    std::vector<void *> dev(2 * nt, nullptr);
    std::vector<fl_table_query> q(nt), w(nt);
    for (size_t t = 0; t < nt; t++) {
      out[t].assign(n * RowBytes(tables_[t]), 0xAB);
      want[t].assign(out[t].size(), 0xCD);
      q[t] = {(uint32_t)t, ids[t].data(), n, out[t].data()};
      w[t] = {(uint32_t)t, ids[t].data(), n, want[t].data()};
      if (cuda && (launch || device_ids || t % 2 == 0)) {
        ASSERT_EQ(cudaMalloc(&dev[2 * t], n * 8), cudaSuccess);
        ASSERT_EQ(cudaMalloc(&dev[2 * t + 1], out[t].size()), cudaSuccess);
        q[t].ids = (const uint64_t *)dev[2 * t];
        q[t].out = dev[2 * t + 1];
      }
    }
    cudaStream_t stream = nullptr;
    if (cuda) {
      ASSERT_EQ(cudaStreamCreate(&stream), cudaSuccess);
    }
    fl_prepared *raw = nullptr;
    FL_ASSERT_OK_CACHE(fl_query_prepare(c.get(), q.data(), (uint32_t)nt, &raw), c.get());
    std::unique_ptr<fl_prepared, void (*)(fl_prepared *)> p(raw, fl_prepared_destroy);
    // Rewrites the buffers' ids (on the device too).
    auto put = [&](const std::vector<std::vector<uint64_t>> &next) {
      for (size_t t = 0; t < nt; t++) {
        ids[t] = next[t];
        if (dev[2 * t]) cudaMemcpy(dev[2 * t], ids[t].data(), n * 8, cudaMemcpyHostToDevice);
      }
    };
    // Poisons every output (on the device in stream order, so that a launch
    // queued behind another finds its outputs poisoned): each answer is
    // written by the run that is checked, not left by an earlier one.
    auto poison = [&] {
      for (size_t t = 0; t < nt; t++) {
        std::fill(out[t].begin(), out[t].end(), 0xAB);
        if (dev[2 * t + 1])
          ASSERT_EQ(cudaMemsetAsync(dev[2 * t + 1], 0xAB, out[t].size(), stream), cudaSuccess);
      }
    };
    // The store's rows for the ids the buffers hold, against the answers.
    auto check = [&](const std::string &what) {
      FL_ASSERT_OK_STORE(fl_store_gather(store_.get(), w.data(), (uint32_t)nt, FL_MISSING_ZERO, nullptr),
                         store_.get());
      for (size_t t = 0; t < nt; t++) ASSERT_EQ(out[t], want[t]) << what << ", table " << t;
    };
    // Rewrites the ids, runs, reads the answers.
    auto run = [&](const std::vector<std::vector<uint64_t>> &next) {
      put(next);
      poison();
      fl_status st = launch ? fl_prepared_launch(p.get(), stream) : fl_prepared_run(p.get(), stream);
      if (launch && st == FL_OK) st = fl_prepared_wait(p.get());
      if (cuda) {
        EXPECT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
      }
      for (size_t t = 0; t < nt && st == FL_OK; t++)
        if (dev[2 * t + 1])
          cudaMemcpy(out[t].data(), dev[2 * t + 1], out[t].size(), cudaMemcpyDeviceToHost);
      return st;
    };
    std::mt19937_64 rng(61);
    auto ids_for = [&](std::mt19937_64 &r) {
      auto all = Ids(r, n);
      all.resize(nt);
      return all;
    };
    for (int round = 0; round < 6; round++) {
      FL_ASSERT_OK_CACHE(run(ids_for(rng)), c.get());
      check("round " + std::to_string(round));
      if (HasFatalFailure()) return;
    }
    fl_cache_stats s = Stats(c.get());
    EXPECT_EQ(s.lookups, 6 * n * nt);
    if (cuda && zero_copy_rows) {
      EXPECT_GT(s.zero_copy_rows, 0u);
    }
    if (unified) {
      EXPECT_GT(s.dram_hits, 0u);
    }
    // Dense tables only, fewer distinct misses than the limit: every miss is
    // read in place (from the second run on by the flat layout's graph,
    // which scatters them too).
    if (cuda && zero_copy_rows && nt <= 3 && !unified) {
      EXPECT_EQ(s.zero_copy_rows, s.unique_misses);
    }
    // An id out of range (table 0 holds 50) fails the run and names it.
    auto bad = ids_for(rng);
    bad[0][17] = 50;
    EXPECT_EQ(run(bad), FL_ERR_OUT_OF_RANGE);
    EXPECT_NE(std::string(fl_cache_last_error(c.get())).find("id 50 at position 17"), std::string::npos)
        << fl_cache_last_error(c.get());
    FL_ASSERT_OK_CACHE(run(ids_for(rng)), c.get());
    check("after the failed run");
    if (HasFatalFailure()) return;
    if (launch) {
      // Launches back to back, ids rewritten and outputs poisoned between
      // them by copies that wait for the stream: each launch waits for the
      // last one's answer.
      for (int i = 0; i < 5; i++) {
        put(ids_for(rng));
        poison();
        FL_ASSERT_OK_CACHE(fl_prepared_launch(p.get(), stream), c.get());
      }
      FL_ASSERT_OK_CACHE(fl_prepared_wait(p.get()), c.get());
      if (cuda) {
        ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
        for (size_t t = 0; t < nt; t++)
          cudaMemcpy(out[t].data(), dev[2 * t + 1], out[t].size(), cudaMemcpyDeviceToHost);
      }
      check("back to back");
      if (HasFatalFailure()) return;
      // An out-of-range id. A launched run (CUDA, flat layout: a graph that
      // waits at its gate) finds it after the launch returned: the next
      // launch returns the failure and does nothing, and the failure is
      // reported once. Elsewhere the launch answers as a run and fails itself.
      const bool launched = cuda && GetParam().layout == FL_LAYOUT_FLAT && !graphs_fail_;
      bad = ids_for(rng);
      bad[0][3] = 50;
      put(bad);
      EXPECT_EQ(fl_prepared_launch(p.get(), stream), launched ? FL_OK : FL_ERR_OUT_OF_RANGE);
      if (launched) EXPECT_EQ(fl_prepared_launch(p.get(), stream), FL_ERR_OUT_OF_RANGE);
      EXPECT_NE(std::string(fl_cache_last_error(c.get())).find("id 50 at position 3"), std::string::npos)
          << fl_cache_last_error(c.get());
      EXPECT_EQ(fl_prepared_wait(p.get()), FL_OK) << "the failure was reported twice";
      if (cuda) {
        ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
      }
      FL_ASSERT_OK_CACHE(run(ids_for(rng)), c.get());
      check("after the failed launch");
      if (HasFatalFailure()) return;
      EXPECT_EQ(fl_prepared_launch(nullptr, stream), FL_ERR_INVALID_ARGUMENT);
      EXPECT_EQ(fl_prepared_wait(nullptr), FL_ERR_INVALID_ARGUMENT);
    }
    // Bad queries fail at prepare, with nothing returned.
    fl_prepared *none = (fl_prepared *)&raw;
    q[1].table = 9;
    EXPECT_EQ(fl_query_prepare(c.get(), q.data(), (uint32_t)nt, &none), FL_ERR_INVALID_ARGUMENT);
    EXPECT_EQ(none, nullptr);
    EXPECT_NE(std::string(fl_cache_last_error(c.get())).find("table 9 does not exist"), std::string::npos);
    EXPECT_EQ(fl_query_prepare(c.get(), q.data(), (uint32_t)nt, nullptr), FL_ERR_INVALID_ARGUMENT);
    EXPECT_EQ(fl_prepared_run(nullptr, stream), FL_ERR_INVALID_ARGUMENT);
    fl_prepared_destroy(nullptr);
    p.reset();
    for (void *d : dev) cudaFree(d);
    if (stream) cudaStreamDestroy(stream);
  }

  std::vector<fl_table_desc> tables_;
  fl::Store store_;
  DeviceIo dev_;  // the test thread's (Dev)

  // The test thread's device buffers when `on`, else host buffers.
  DeviceIo *Dev(bool on) { return on ? &dev_ : nullptr; }
  // Set while a fault point keeps prepared queries' graphs from being built:
  // launches then answer as runs.
  bool graphs_fail_ = false;
};

// The oracle under constant eviction, admitting by `policy`.
void CacheTest::OracleUnderEviction(fl_admit_policy policy) {
  // A budget far below the model (about 1.4 MB of vectors): constant eviction.
  fl_config cfg = Config(512 << 10);
  cfg.admit_policy = policy;
  fl::Cache c = MakeCache(cfg);
  ASSERT_NE(c, nullptr);
  std::mt19937_64 rng(1);
  for (int batch = 0; batch < 40; batch++) {
    auto ids = Ids(rng, 1 + batch * 37 % 900);
    QueryAndCheck(c.get(), ids, nullptr, nullptr);
    if (HasFatalFailure()) return;
  }
  fl_cache_stats s = Stats(c.get());
  EXPECT_GT(s.hits, 0u);
  EXPECT_GT(s.misses, 0u);
  EXPECT_GT(s.admissions, 0u);
  EXPECT_GT(s.evictions, 0u);
  EXPECT_EQ(s.hits + s.misses + s.dram_hits, s.lookups);
  EXPECT_LE(s.pool_bytes + s.index_bytes, 512u << 10) << "budget exceeded";
}

TEST_P(CacheTest, OracleWithAdmissionsAndEvictions) { OracleUnderEviction(FL_ADMIT_COIN); }

TEST_P(CacheTest, TinyLfuOracleWithAdmissionsAndEvictions) {
  OracleUnderEviction(FL_ADMIT_TINYLFU);
}

// TinyLFU under a full pool (cache/admit_rule.h): once the pool has evicted
// entries missed once, a row missed for the first time loses to them and a
// row missed a second time wins. Only the wide table is queried.
TEST_P(CacheTest, TinyLfuAdmitsRepeatsNotOneOffsUnderAFullPool) {
  fl::Cache c = TinyLfuCache(512 << 10);
  ASSERT_NE(c, nullptr);
  const size_t wide = 2;
  auto query = [&](const std::vector<uint64_t> &keys) {
    std::vector<std::vector<uint64_t>> ids(tables_.size());
    ids[wide] = keys;
    QueryAndCheck(c.get(), ids, nullptr, nullptr);
  };
  auto range = [](uint64_t from, uint64_t to) {
    std::vector<uint64_t> v;
    for (uint64_t k = from; k < to; k++) v.push_back(k);
    return v;
  };
  // More distinct rows than the pool holds (at most pool_bytes / 256), once
  // each: the pool fills, evicts its oldest, and the victims were used once.
  uint64_t cap = Stats(c.get()).pool_bytes / (RowBytes(tables_[wide]));
  ASSERT_LT(3 * cap + 100, tables_[wide].corpus_size);
  // Each batch's round runs before the next batch: a round the courier has
  // not started is shed by the next one of its part, and the sketch never
  // counts its misses (the first rows would then look never seen).
  for (uint64_t at = 0; at < 3 * cap; at += cap / 4) {
    query(range(at, std::min(at + cap / 4, 3 * cap)));
    ASSERT_EQ(fl_cache_sync(c.get()), FL_OK) << fl_cache_last_error(c.get());
  }
  if (HasFatalFailure()) return;
  fl_cache_stats s = Stats(c.get());
  ASSERT_GT(s.evictions, 0u);
  // One batch: 100 rows of the first batch (missed once before, evicted
  // first) and 100 rows never seen.
  std::vector<uint64_t> seen = range(0, 100), fresh = range(3 * cap, 3 * cap + 100), both = seen;
  both.insert(both.end(), fresh.begin(), fresh.end());
  query(both);
  auto hits_of = [&](const std::vector<uint64_t> &keys) {
    uint64_t before = Stats(c.get()).hits;
    query(keys);
    return Stats(c.get()).hits - before;
  };
  uint64_t fresh_hits = hits_of(fresh), seen_hits = hits_of(seen);
  // A fresh row's four counters may all have been raised by others
  // (a few per cent): it then looks used twice.
  EXPECT_LE(fresh_hits, 15u) << "rows missed once were admitted over victims missed once";
  EXPECT_GE(seen_hits, 90u) << "rows missed twice were not admitted";
}

// TinyLFU after the hot set moves (cache/admit_shift.h): a part whose
// lookups mostly hit and whose victims were used once refuses rows missed
// once, until a batch's misses jump: the hot set moved, and every missed
// row is admitted for a while. H (200 rows, each looked up 64 times a
// batch) is the hot set, hit for many capacities of lookups; then B (20
// rows never seen: fewer than the pool's free slots, 2% of its vectors
// under the high watermark) is missed once and is cached. With the
// detector shut (mutant 23), B would lose to the victims as one-offs do.
TEST_P(CacheTest, TinyLfuAdmitsAMovedHotSetOnItsFirstMiss) {
  fl::Cache c = TinyLfuCache(512 << 10);
  ASSERT_NE(c, nullptr);
  const size_t wide = 2;
  const fl_cache_stats st = Stats(c.get());
  const uint64_t cap = st.pool_bytes / RowBytes(tables_[wide]);
  // The detector's unit, the part's vectors, is at most this many (its
  // slots are at least 16 bytes).
  const uint64_t most_vectors = st.pool_bytes / 16;
  const uint64_t kH = 200, kRepeats = 64, kB = 20, kFrom = 3 * cap + kH;
  ASSERT_LT(kFrom + kB, tables_[wide].corpus_size);
  // Rows missed once fill the pool past its watermarks: victims of one use.
  for (uint64_t at = 0; at < 3 * cap; at += cap / 4) QueryRange(c.get(), wide, at, at + cap / 4);
  ASSERT_GT(Stats(c.get()).evictions, 0u);
  // H, hit: a steady low miss share, past the detector's warm-up.
  std::vector<std::vector<uint64_t>> hot(tables_.size());
  for (uint64_t r = 0; r < kRepeats; r++)
    for (uint64_t k = 0; k < kH; k++) hot[wide].push_back(3 * cap + k);
  uint64_t looked = 0;
  for (; looked < (FL_SHIFT_WARM + 2 * FL_SHIFT_LONG) * most_vectors; looked += kH * kRepeats) {
    QueryAndCheck(c.get(), hot, nullptr, nullptr);
    FL_ASSERT_OK_CACHE(fl_cache_sync(c.get()), c.get());
  }
  EXPECT_EQ(HitsOfRange(c.get(), wide, 3 * cap, 3 * cap + kH), kH) << "the hot set is not cached";
  EXPECT_EQ(Stats(c.get()).shift_opens, 0u) << "opened while the hot set stood still";
  QueryRange(c.get(), wide, kFrom, kFrom + kB);
  EXPECT_EQ(Stats(c.get()).shift_opens, 1u);
  EXPECT_GE(HitsOfRange(c.get(), wide, kFrom, kFrom + kB), 18u)
      << "a moved hot set's rows missed once lost to victims missed once";
}

// TinyLFU's sketch ages: rows missed often long ago weigh no more than rows
// never seen once enough misses have passed since. A (100 rows) is missed 17
// times: each time a store write to A's rows invalidates them after the
// query admits them. With the pool full of rows missed once, A wins its
// place on one more miss (most of it: the pool's free slots go first to the
// rows most frequent in the batch): its frequency counts. Then a stream of
// misses of other rows, many sketch samples long (halvings), and the pool
// full of them again: now one miss no longer wins A a place.
TEST_P(CacheTest, TinyLfuForgetsWhatWasFrequentLongAgo) {
  fl::Cache c = TinyLfuCache(512 << 10);
  ASSERT_NE(c, nullptr);
  const size_t wide = 2;
  const uint64_t kA = 100, kFrom = 1000, kCorpus = tables_[wide].corpus_size;
  auto query = [&](uint64_t from, uint64_t to) { QueryRange(c.get(), wide, from, to); };
  auto hits_of = [&](uint64_t from, uint64_t to) { return HitsOfRange(c.get(), wide, from, to); };
  std::vector<uint64_t> a(kA);
  for (uint64_t k = 0; k < kA; k++) a[k] = k;
  std::vector<float> rows(kA * tables_[wide].dim);
  auto rewrite_a = [&](int v) {  // new values: the cache drops A's rows
    std::fill(rows.begin(), rows.end(), (float)v);
    FL_ASSERT_OK_STORE(fl_store_upsert(store_.get(), wide, a.data(), kA, rows.data()), store_.get());
  };
  const uint64_t cap = Stats(c.get()).pool_bytes / RowBytes(tables_[wide]);
  ASSERT_LT(kFrom + 2 * cap, kCorpus);
  for (int i = 0; i < 17; i++) {
    query(0, kA);
    rewrite_a(i);
  }
  if (HasFatalFailure()) return;
  // Rows missed once fill the pool past its watermarks: victims of one use.
  for (uint64_t at = kFrom; at < kFrom + 2 * cap; at += cap / 4) query(at, at + cap / 4);
  ASSERT_GT(Stats(c.get()).evictions, 0u);
  query(0, kA);
  // Winners take the slots the pool has free under its high watermark:
  // most of A, not all.
  EXPECT_GE(hits_of(0, kA), 50u) << "rows missed 18 times lost to victims missed once";
  rewrite_a(100);
  // Misses of other rows: 25 samples of the sketch (FL_SKETCH_SAMPLE, 10,
  // additions a row the pool holds), the pool full of rows missed once.
  const uint64_t stream = 25 * 10 * cap, batch = cap / 2;
  uint64_t at = kFrom;
  for (uint64_t done = 0; done < stream; done += batch) {
    if (at + batch > kCorpus) at = kFrom;
    query(at, at + batch);
    at += batch;
    if (HasFatalFailure()) return;
  }
  query(0, kA);
  EXPECT_LE(hits_of(0, kA), 15u) << "rows missed often long ago still won on one miss";
}

// A cleared cache refills as a new one. TinyLFU's victim is the mean
// frequency of the rows the pool last evicted; a clear takes every row but
// leaves the pool empty, so the victim goes back to 0 and every missed row
// wins a place again, however often the cleared rows had been missed. Here
// H (500 rows) is missed 10 times (a store write drops its rows after each
// query), then cached and cleared; rows never seen then fill the pool on
// one miss each.
TEST_P(CacheTest, ClearedTinyLfuCacheAdmitsAsANewOne) {
  fl::Cache c = TinyLfuCache(512 << 10);
  ASSERT_NE(c, nullptr);
  const size_t wide = 2;
  const uint64_t kH = 500, kFresh = 5000;
  std::vector<uint64_t> h(kH);
  for (uint64_t k = 0; k < kH; k++) h[k] = k;
  std::vector<float> rows(kH * tables_[wide].dim);
  for (int i = 0; i < 10; i++) {
    QueryRange(c.get(), wide, 0, kH);
    std::fill(rows.begin(), rows.end(), (float)i);
    FL_ASSERT_OK_STORE(fl_store_upsert(store_.get(), wide, h.data(), kH, rows.data()),
                       store_.get());
  }
  QueryRange(c.get(), wide, 0, kH);
  EXPECT_EQ(HitsOfRange(c.get(), wide, 0, kH), kH) << "H is cached before the clear";
  FL_ASSERT_OK_CACHE(fl_cache_clear(c.get()), c.get());
  QueryRange(c.get(), wide, kFresh, kFresh + 200);
  EXPECT_EQ(HitsOfRange(c.get(), wide, kFresh, kFresh + 200), 200u)
      << "rows missed once did not enter the cleared pool";
}

// Eviction's probation: rows hit since their admission outlive younger rows
// never hit. A is admitted and hit once; B is admitted later and never hit;
// C then fills the pool past the high watermark, and the next round evicts
// down to the low one. By age alone A, the oldest, would go first; ranked
// with probation (cache/index.h), B goes and A stays whole.
TEST_P(CacheTest, RowsHitSinceAdmissionOutliveYoungerRowsNeverHit) {
  if (GetParam().layout != FL_LAYOUT_FLAT) GTEST_SKIP() << "sizes below are of one flat pool";
  fl_config cfg = Config(512 << 10, 1.0);
  cfg.low_watermark = 0.7;
  cfg.high_watermark = 0.9;
  fl::Cache c = MakeCache(cfg);
  ASSERT_NE(c, nullptr);
  const size_t wide = 2;
  auto query = [&](uint64_t from, uint64_t to) { QueryRange(c.get(), wide, from, to); };
  auto hits_of = [&](uint64_t from, uint64_t to) { return HitsOfRange(c.get(), wide, from, to); };
  uint64_t cap = Stats(c.get()).pool_bytes / RowBytes(tables_[wide]);
  uint64_t a = cap * 3 / 10, b = 2 * a, c_end = b + cap * 35 / 100;
  ASSERT_LT(c_end + 8, tables_[wide].corpus_size);
  query(0, a);
  ASSERT_EQ(hits_of(0, a), a) << "A is cached whole, and hit once";
  query(a, b);
  for (uint64_t k = 0; k < 4; k++) query(c_end + k, c_end + k + 1);  // batches go by
  query(b, c_end);
  ASSERT_EQ(Stats(c.get()).evictions, 0u) << "nothing evicted before C filled the pool";
  query(c_end + 4, c_end + 5);  // the round after C's evicts
  if (HasFatalFailure()) return;
  ASSERT_GT(Stats(c.get()).evictions, cap / 10);
  EXPECT_EQ(hits_of(0, a), a) << "a row hit since its admission was evicted before unhit ones";
  EXPECT_LT(hits_of(a, b), (b - a) / 2) << "rows never hit survived";
}

// A starved class in a pool of several classes (the wide and hashed
// tables' sizes) frees at least a fifth of use in one eviction, so whole
// pages empty: with the watermarks' share alone, the largest eviction of
// this churn stays under a tenth of the entries (FL_STARVED_SHARE at 0.05:
// 5.3%, checked).
TEST_P(CacheTest, StarvedPoolOfSeveralClassesFreesAFifth) {
  if (GetParam().backend != FL_BACKEND_HOST || GetParam().layout != FL_LAYOUT_FLAT)
    GTEST_SKIP() << "the host's admission evicts at once; one flat pool of four classes";
  fl::Cache c = MakeCache(Config(512 << 10, 1.0));
  ASSERT_NE(c, nullptr);
  std::mt19937_64 rng(13);
  double largest = 0;
  for (int batch = 0; batch < 40; batch++) {
    fl_cache_stats before = Stats(c.get());
    // Rows of the two widest classes only: rows smaller than the tables'
    // mean (by which the index is sized) would fill the index first, and
    // the index's watermarks, not a starved class, would evict.
    std::vector<std::vector<uint64_t>> ids = Ids(rng, 3000);
    ids[0].clear(), ids[1].clear();
    QueryAndCheck(c.get(), ids, nullptr, nullptr);
    if (HasFatalFailure()) return;
    fl_cache_stats after = Stats(c.get());
    if (before.index_entries > 0)
      largest = std::max(largest, double(after.evictions - before.evictions) / double(before.index_entries));
  }
  EXPECT_GE(largest, 0.19) << "no eviction freed a fifth of the entries";
}

// Heavy churn over a pool of many pages: classes grow, evict, give pages back
// and take them again; every answer still matches the store.
TEST_P(CacheTest, EvictionChurnAcrossManyPages) {
  fl::Cache c = MakeCache(Config(3 << 20));
  ASSERT_NE(c, nullptr);
  std::mt19937_64 rng(11);
  for (int batch = 0; batch < 60; batch++) {
    auto ids = Ids(rng, 2500);
    QueryAndCheck(c.get(), ids, nullptr, nullptr);
    if (HasFatalFailure()) return;
  }
  fl_cache_stats s = Stats(c.get());
  EXPECT_GT(s.evictions, 1000u);
  EXPECT_LE(s.pool_bytes_used, s.pool_bytes);
}

// Churn far beyond the pool: every evicted slab comes back. Admissions go on
// at their pace to the end (a leak would exhaust the pool), and the counts
// agree: what is in the index is what was admitted and not evicted.
TEST_P(CacheTest, ChurnRecyclesEverySlab) {
  fl::Cache c = MakeCache(Config(1 << 20));
  ASSERT_NE(c, nullptr);
  std::mt19937_64 rng(5);
  uint64_t admitted_before_last = 0;
  for (int batch = 0; batch < 80; batch++) {
    if (batch == 70) {
      FL_ASSERT_OK_CACHE(fl_cache_sync(c.get()), c.get());
      admitted_before_last = Stats(c.get()).admissions;
    }
    QueryAndCheck(c.get(), Ids(rng, 3000), nullptr, nullptr);
    if (HasFatalFailure()) return;
  }
  FL_ASSERT_OK_CACHE(fl_cache_sync(c.get()), c.get());
  fl_cache_stats s = Stats(c.get());
  EXPECT_GT(s.admissions, 3 * s.index_entries) << "too little churn to show a leak";
  // The last 10 batches admit at least half their share of the 80: a leak
  // leaves only the free pages' crumbs (a tenth of it, checked).
  EXPECT_GE(8 * (s.admissions - admitted_before_last), s.admissions / 2)
      << "admission dwindled: slabs leaked? " << s.admissions - admitted_before_last << " of "
      << s.admissions << " admitted in the last 10 batches; rounds shed " << s.rounds_shed
      << ", starved " << s.rounds_starved << "; " << s.evictions << " evictions";
  EXPECT_EQ(s.index_entries, s.admissions - s.evictions - s.invalidations);
  EXPECT_LE(s.pool_bytes_used, s.pool_bytes);
}

// A pool far smaller than each batch's misses starves the rounds. In a part
// of one slab class (each part of the per-table layout) such a round admits
// what its slots allow and evicts in its own graph, and the evicted slabs,
// once no query can read them, go back on the reservoir on the device. A
// part of several classes (the flat layout here) evicts from the host and
// returns slabs to the pool. Answers stay right, admission goes on to the
// end, and the counts agree.
TEST_P(CacheTest, StarvedRoundsEvictInTheirGraphAndRecycleTheSlabs) {
  if (GetParam().backend != FL_BACKEND_CUDA) GTEST_SKIP() << "admission rounds are CUDA's";
  fl::Cache c = MakeCache(Config(512 << 10, 1.0));
  ASSERT_NE(c, nullptr);
  std::mt19937_64 rng(11);
  uint64_t admitted_before_last = 0;
  for (int batch = 0; batch < 40; batch++) {
    if (batch == 30) admitted_before_last = Stats(c.get()).admissions;
    // The widest classes only, as in StarvedPoolOfSeveralClassesFreesAFifth:
    // smaller rows would fill the index first, and its watermarks evict.
    std::vector<std::vector<uint64_t>> ids = Ids(rng, 3000);
    ids[0].clear(), ids[1].clear();
    QueryAndCheck(c.get(), ids, nullptr, Dev(batch % 2 == 1));
    if (HasFatalFailure()) return;
  }
  fl_cache_stats s = Stats(c.get());
  EXPECT_GT(s.rounds_starved, 0u);
  EXPECT_GT(s.evictions, 0u);
  EXPECT_GT(s.admissions, admitted_before_last) << "admission stopped";
  EXPECT_EQ(s.index_entries, s.admissions - s.evictions - s.invalidations);
  EXPECT_LE(s.pool_bytes_used, s.pool_bytes);
  EXPECT_LE(s.slabs_recycled, s.evictions);
  if (GetParam().layout == FL_LAYOUT_PER_TABLE)
    EXPECT_GT(s.slabs_recycled, 0u);
  else
    EXPECT_EQ(s.slabs_recycled, 0u);
}

// Rounds whose launch fails after their prepare released limbo slabs (in
// this starved churn most rounds release some) lose none: the released
// slabs go back to the pool, later rounds recycle again, and a clear leaves
// no slab in use, as it does without faults.
TEST_P(CacheTest, RoundsFailingAfterARecycleLoseNoSlab) {
  if (GetParam().backend != FL_BACKEND_CUDA) GTEST_SKIP() << "admission rounds are CUDA's";
  for (bool failing : {false, true}) {  // the same churn without faults first
    SCOPED_TRACE(failing ? "rounds failing" : "no fault");
    fl::Cache c = MakeCache(Config(512 << 10, 1.0));
    ASSERT_NE(c, nullptr);
    std::mt19937_64 rng(12);
    int failed_rounds = 0;
    auto churn = [&](int batches, bool fail) {
      for (int batch = 0; batch < batches; batch++) {
        if (fail) fl_fault_arm(FL_FAULT_ROUND_LAUNCH, 0);
        QueryAndCheck(c.get(), Ids(rng, 3000), nullptr, Dev(batch % 2 == 1));
        fl_status st = fl_cache_sync(c.get());
        fl_fault_clear();
        if (HasFatalFailure()) return;
        EXPECT_TRUE(st == FL_OK || (fail && st == FL_ERR_CUDA)) << fl_cache_last_error(c.get());
        failed_rounds += st == FL_ERR_CUDA;
      }
    };
    churn(20, false);
    if (HasFatalFailure()) return;
    const uint64_t recycled = Stats(c.get()).slabs_recycled;
    churn(10, failing);
    if (HasFatalFailure()) return;
    EXPECT_EQ(failed_rounds > 0, failing) << failed_rounds << " rounds failed";
    const uint64_t admitted = Stats(c.get()).admissions;
    churn(20, false);
    if (HasFatalFailure()) return;
    fl_cache_stats s = Stats(c.get());
    EXPECT_GT(s.admissions, admitted) << "admission stopped";
    EXPECT_EQ(s.index_entries, s.admissions - s.evictions - s.invalidations);
    EXPECT_LE(s.pool_bytes_used, s.pool_bytes);
    if (GetParam().layout == FL_LAYOUT_PER_TABLE) {
      EXPECT_GT(recycled, 0u);
      EXPECT_GT(s.slabs_recycled, recycled) << "recycling stopped";
    }
    // The clear frees the last rounds' evicted slabs too (no query runs).
    FL_ASSERT_OK_CACHE(fl_cache_clear(c.get()), c.get());
    EXPECT_EQ(Stats(c.get()).pool_bytes_used, 0u) << "slabs lost";
  }
}

// Each failure point of an admission round (common/fault.h), fired once in
// a round that has its batch's new slots: the query that handed the round
// over still answers right; fl_cache_sync reports the failure once, naming
// the round and the step; the slots go back (memcheck would see later rounds
// write through reservoir entries the device never got); and later rounds
// admit again. Fails when a round's prepare reports its predecessor's
// failure as its own: admission would then stop until a sync took it.
TEST_P(CacheTest, FailedRoundIsReportedOnceAndAdmissionGoesOn) {
  if (GetParam().backend != FL_BACKEND_CUDA) GTEST_SKIP() << "admission rounds are CUDA's";
  struct Case {
    fl_fault_point point;
    fl_status status;
    const char *says;
  };
  for (Case k : {Case{FL_FAULT_ROUND_BLOCK, FL_ERR_OUT_OF_MEMORY, "input block"},
                 Case{FL_FAULT_ROUND_GRAPH, FL_ERR_CUDA, "graph"},
                 Case{FL_FAULT_ROUND_LAUNCH, FL_ERR_CUDA, "launch"}}) {
    SCOPED_TRACE(k.says);
    fl::Cache c = MakeCache(Config(4 << 20, 1.0));
    ASSERT_NE(c, nullptr);
    std::mt19937_64 rng(3);
    // Enough distinct misses (over 4096 in a part: the wide table's alone in
    // the per-table layout) that the first round's input block grows, so
    // every point is passed in that round.
    fl_fault_arm(k.point, 0);
    QueryAndCheck(c.get(), Ids(rng, 20000), nullptr, nullptr);
    fl_status st = fl_cache_sync(c.get());
    fl_fault_clear();
    if (HasFatalFailure()) return;
    EXPECT_EQ(st, k.status) << fl_cache_last_error(c.get());
    std::string msg = fl_cache_last_error(c.get());
    EXPECT_NE(msg.find("admission round"), std::string::npos) << msg;
    EXPECT_NE(msg.find(k.says), std::string::npos) << msg;
    EXPECT_EQ(fl_cache_sync(c.get()), FL_OK) << "reported twice: " << fl_cache_last_error(c.get());
    fl_cache_stats s = Stats(c.get());
    // The flat layout's one round failed; per table, the other parts' did not.
    if (GetParam().layout == FL_LAYOUT_FLAT) EXPECT_EQ(s.admissions, 0u);
    EXPECT_EQ(s.index_entries, s.admissions);
    for (int batch = 0; batch < 6; batch++) {
      QueryAndCheck(c.get(), Ids(rng, 2000), nullptr, Dev(batch & 1));
      if (HasFatalFailure()) return;
    }
    s = Stats(c.get());
    EXPECT_GT(s.admissions, 0u) << "admission stopped after one failed round";
    EXPECT_EQ(s.index_entries, s.admissions - s.evictions);
    EXPECT_GT(s.hits, 0u);
  }
}

// A cache whose first round's input block cannot be allocated is not
// created: a clear status on the NULL handle, and the next create works.
TEST_P(CacheTest, CreateFailsCleanlyWhenARoundCannotBeSetUp) {
  if (GetParam().backend != FL_BACKEND_CUDA) GTEST_SKIP() << "admission rounds are CUDA's";
  fl_config cfg = Config(1 << 20);
  fl_cache *c = nullptr;
  fl_fault_arm(FL_FAULT_ROUND_BLOCK, 0);
  fl_status st = fl_cache_create(store_.get(), &cfg, &c);
  fl_fault_clear();
  EXPECT_EQ(st, FL_ERR_OUT_OF_MEMORY);
  EXPECT_EQ(c, nullptr);
  std::string msg = fl_cache_last_error(nullptr);
  EXPECT_NE(msg.find("input block"), std::string::npos) << msg;
  fl::Cache ok = MakeCache(cfg);
  ASSERT_NE(ok, nullptr);
  std::mt19937_64 rng(4);
  QueryAndCheck(ok.get(), Ids(rng, 500), nullptr, nullptr);
}

// A module whose kernels cannot load fails the create: each of the three
// (maintenance, admission, query) once, with FL_ERR_CUDA naming it, no
// cache, and the store as it was: a cache made afterwards answers from it.
TEST_P(CacheTest, CreateFailsCleanlyWhenKernelsCannotLoad) {
  if (GetParam().backend != FL_BACKEND_CUDA) GTEST_SKIP() << "kernels are CUDA's";
  fl_config cfg = Config(1 << 20);
  const char *modules[] = {"maintenance kernels", "admission kernels", "query kernels"};
  for (unsigned skip = 0; skip < 3; skip++) {
    fl_cache *c = nullptr;
    fl_fault_arm(FL_FAULT_KERNEL_LOAD, skip);
    fl_status st = fl_cache_create(store_.get(), &cfg, &c);
    bool fired = !fl_fault_armed(FL_FAULT_KERNEL_LOAD);
    fl_fault_clear();
    EXPECT_TRUE(fired) << "skip " << skip;
    EXPECT_EQ(st, FL_ERR_CUDA) << "skip " << skip;
    EXPECT_EQ(c, nullptr);
    std::string msg = fl_cache_last_error(nullptr);
    EXPECT_NE(msg.find(modules[skip]), std::string::npos) << msg;
  }
  std::vector<float> rows(64, 7.25f);
  uint64_t id = 11;
  FL_ASSERT_OK_STORE(fl_store_upsert(store_.get(), 2, &id, 1, rows.data()), store_.get());
  fl::Cache ok = MakeCache(cfg);
  ASSERT_NE(ok, nullptr);
  std::mt19937_64 rng(4);
  auto ids = Ids(rng, 500);
  ids[2].push_back(id);
  QueryAndCheck(ok.get(), ids, nullptr, nullptr);
}

// Every batch size from one key to a million, one table left empty, with
// duplicates, misses and evictions: the oracle holds at each size.
TEST_P(CacheTest, BatchSizesFromOneKeyToAMillion) {
  fl::Cache c = MakeCache(Config(4 << 20));
  ASSERT_NE(c, nullptr);
  std::mt19937_64 rng(31);
  for (size_t total : {size_t{1}, size_t{2}, size_t{33}, size_t{1000}, size_t{65537}, size_t{1} << 20}) {
    // Spread `total` keys over tables 0, 2 and 3; table 1 stays empty.
    static const size_t kUsed[3] = {0, 2, 3};
    auto ids = Ids(rng, 0);
    for (size_t i = 0; i < total; i++) {
      size_t t = kUsed[i % 3];
      double u = std::uniform_real_distribution<double>(0, 1)(rng);
      uint64_t k = (uint64_t)(u * u * tables_[t].corpus_size) % tables_[t].corpus_size;
      ids[t].push_back(t == 3 ? HashedId(k) : k);
    }
    QueryAndCheck(c.get(), ids, nullptr, Dev(GetParam().backend == FL_BACKEND_CUDA && total > 2));
    if (HasFatalFailure()) return;
  }
}

// More queries in one call than one launch takes (the kernels keep at most
// 1024 queries' scan in shared memory): the call is split, answers unchanged.
TEST_P(CacheTest, ManyQueriesInOneCall) {
  fl::Cache c = MakeCache(Config(4 << 20));
  ASSERT_NE(c, nullptr);
  std::mt19937_64 rng(41);
  const size_t nq = 2500;
  std::vector<std::vector<uint64_t>> ids(nq);
  std::vector<std::vector<float>> out(nq), want(nq);
  std::vector<fl_table_query> q(nq), w(nq);
  for (size_t i = 0; i < nq; i++) {
    uint32_t t = (i % 2) ? 2 : 0;  // fp32 tables: dims 64 and 8
    for (int k = 0; k < 3; k++) ids[i].push_back(rng() % tables_[t].corpus_size);
    out[i].assign(3 * tables_[t].dim, -1.0f);
    want[i].assign(3 * tables_[t].dim, -2.0f);
    q[i] = {t, ids[i].data(), 3, out[i].data()};
    w[i] = {t, ids[i].data(), 3, want[i].data()};
  }
  for (int pass = 0; pass < 2; pass++) {
    FL_ASSERT_OK_CACHE(fl_query(c.get(), q.data(), (uint32_t)nq, nullptr), c.get());
    if (GetParam().backend == FL_BACKEND_CUDA) {
      ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    }
    FL_ASSERT_OK_STORE(fl_store_gather(store_.get(), w.data(), (uint32_t)nq, FL_MISSING_ZERO, nullptr),
                       store_.get());
    for (size_t i = 0; i < nq; i++) ASSERT_EQ(out[i], want[i]) << "query " << i;
  }
}

// One call's buffers sharing allocations (ids and outputs of several tables
// in one pinned block, in device blocks, ids in a registered region) beside
// unregistered ones and more separate allocations than a call remembers:
// each answers as the store does, by fl_query and by a prepared query. The
// driver is asked once per allocation (fusion/device_view.c): a buffer is
// read in place only inside an allocation that the device can read.
TEST_P(CacheTest, BuffersSharingAllocationsAnswerLikeSeparateOnes) {
  if (GetParam().backend != FL_BACKEND_CUDA) GTEST_SKIP() << "CUDA only";
  fl::Cache c = MakeCache(Config(4 << 20));
  ASSERT_NE(c, nullptr);
  std::mt19937_64 rng(53);
  const size_t nq = 40, n = 50, nt = tables_.size();
  size_t slot = n * 8;  // one query's ids or outputs
  for (size_t t = 0; t < nt; t++) slot = std::max(slot, n * RowBytes(tables_[t]));
  uint8_t *pinned = nullptr, *dev_ids = nullptr, *dev_out = nullptr;
  std::vector<uint8_t> region(nq * slot);
  std::vector<void *> own;  // outputs in allocations of their own
  bool registered = false;
  std::shared_ptr<void> release(nullptr, [&](void *) {
    if (registered) cudaHostUnregister(region.data());
    cudaFreeHost(pinned);
    cudaFree(dev_ids);
    cudaFree(dev_out);
    for (void *p : own) cudaFree(p);
  });
  ASSERT_EQ(cudaMallocHost((void **)&pinned, 2 * nq * slot), cudaSuccess);
  ASSERT_EQ(cudaMalloc((void **)&dev_ids, nq * slot), cudaSuccess);
  ASSERT_EQ(cudaMalloc((void **)&dev_out, nq * slot), cudaSuccess);
  ASSERT_EQ(cudaHostRegister(region.data(), region.size(), cudaHostRegisterDefault), cudaSuccess);
  registered = true;
  std::vector<std::vector<uint64_t>> ids(nq, std::vector<uint64_t>(n));
  std::vector<std::vector<uint8_t>> out(nq), want(nq);
  std::vector<fl_table_query> q(nq), w(nq);
  std::vector<bool> out_on_device(nq, false);
  for (size_t i = 0; i < nq; i++) {
    const uint32_t t = (uint32_t)(i % nt);
    for (auto &id : ids[i]) id = rng() % tables_[t].corpus_size;
    out[i].assign(n * RowBytes(tables_[t]), 0xAB);
    want[i].assign(out[i].size(), 0xCD);
    w[i] = {t, ids[i].data(), n, want[i].data()};
    q[i] = w[i];
    q[i].out = out[i].data();
    uint8_t *pin = pinned + 2 * i * slot;
    switch (i % 5) {
      case 0:  // ids and outputs in the pinned block
        memcpy(pin, ids[i].data(), n * 8);
        q[i] = {t, (const uint64_t *)pin, n, pin + slot};
        break;
      case 1:  // ids and outputs in device blocks
        ASSERT_EQ(cudaMemcpy(dev_ids + i * slot, ids[i].data(), n * 8, cudaMemcpyHostToDevice),
                  cudaSuccess);
        q[i] = {t, (const uint64_t *)(dev_ids + i * slot), n, dev_out + i * slot};
        out_on_device[i] = true;
        break;
      case 2:  // both unregistered
        break;
      case 3:  // ids in the registered region, outputs in an allocation of their own
        memcpy(region.data() + i * slot, ids[i].data(), n * 8);
        own.push_back(nullptr);
        ASSERT_EQ(cudaMalloc(&own.back(), out[i].size()), cudaSuccess);
        q[i] = {t, (const uint64_t *)(region.data() + i * slot), n, own.back()};
        out_on_device[i] = true;
        break;
      case 4:  // unregistered ids, outputs in the pinned block
        q[i].out = pin + slot;
        break;
    }
  }
  auto poison = [&] {
    for (size_t i = 0; i < nq; i++) {
      if (out_on_device[i]) {
        ASSERT_EQ(cudaMemset(q[i].out, 0xAB, out[i].size()), cudaSuccess);
      } else {
        memset(q[i].out, 0xAB, out[i].size());
      }
    }
  };
  auto check = [&](const std::string &what) {
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess) << what;
    FL_ASSERT_OK_STORE(fl_store_gather(store_.get(), w.data(), (uint32_t)nq, FL_MISSING_ZERO, nullptr),
                       store_.get());
    for (size_t i = 0; i < nq; i++) {
      std::vector<uint8_t> got(out[i].size());
      ASSERT_EQ(cudaMemcpy(got.data(), q[i].out, got.size(), cudaMemcpyDefault), cudaSuccess);
      ASSERT_EQ(got, want[i]) << what << ", query " << i << " (placement " << i % 5 << ")";
    }
  };
  for (int pass = 0; pass < 2; pass++) {
    poison();
    FL_ASSERT_OK_CACHE(fl_query(c.get(), q.data(), (uint32_t)nq, nullptr), c.get());
    check("fl_query, pass " + std::to_string(pass));
  }
  fl_prepared *raw = nullptr;
  FL_ASSERT_OK_CACHE(fl_query_prepare(c.get(), q.data(), (uint32_t)nq, &raw), c.get());
  std::unique_ptr<fl_prepared, void (*)(fl_prepared *)> p(raw, fl_prepared_destroy);
  poison();
  FL_ASSERT_OK_CACHE(fl_prepared_run(p.get(), nullptr), c.get());
  check("prepared run");
}

TEST_P(CacheTest, LargeBudgetServesRepeatsFromCache) {
  fl::Cache c = MakeCache(Config(64 << 20, 1.0));
  ASSERT_NE(c, nullptr);
  std::mt19937_64 rng(2);
  auto ids = Ids(rng, 500);
  QueryAndCheck(c.get(), ids, nullptr, nullptr);
  FL_ASSERT_OK_CACHE(fl_cache_sync(c.get()), c.get());  // CUDA: admitted after fl_query returns
  fl_cache_stats_reset(c.get());
  QueryAndCheck(c.get(), ids, nullptr, nullptr);
  fl_cache_stats s = Stats(c.get());
  // Everything was admitted on the first pass, except the hashed table's ids
  // the store does not hold (answered as zeros, admitted as zeros too).
  EXPECT_EQ(s.misses, 0u);
  EXPECT_EQ(s.hits, s.lookups);
}

// fl_cache_reserve for 4 callers: 4 threads on streams of their own, with
// misses, admission rounds and evictions, host and device buffers, never
// make or grow a buffer set while they query (setup_grow_ns 0 in every
// call), and the rounds' evictions grow no ring or reservoir (the cache's
// allocations stay at the reserve's), each answer checked against the
// store. Without it, calls do (CUDA): the count can fail. Host backend: no
// sets, nothing grows.
TEST_P(CacheTest, ReservedCallersNeverAllocateWhileServing) {
  const bool cuda = GetParam().backend == FL_BACKEND_CUDA;
  const size_t n = 200, threads = 4;
  for (bool reserve : {false, true}) {
    SCOPED_TRACE(reserve ? "reserved" : "not reserved");
    fl::Cache c = MakeCache(Config(384 << 10));
    ASSERT_NE(c, nullptr);
    if (reserve)
      FL_ASSERT_OK_CACHE(fl_cache_reserve(c.get(), n * tables_.size(), (uint32_t)tables_.size(),
                                          (uint32_t)threads),
                         c.get());
    const uint64_t reserved = Stats(c.get()).allocations;
    std::atomic<int> grew{0}, calls{0};
    std::vector<std::thread> pool;
    for (size_t th = 0; th < threads; th++) {
      pool.emplace_back([&, th] {
        cudaStream_t stream = nullptr;
        if (cuda) cudaStreamCreate(&stream);
        std::mt19937_64 rng(70 + th);
        DeviceIo dev;
        for (int batch = 0; batch < 12; batch++) {
          QueryAndCheck(c.get(), Ids(rng, n - 50 * (batch % 3)), stream,
                        cuda && (batch & 1) ? &dev : nullptr);
          fl_query_timing t;
          fl_query_timing_last(&t);
          grew += t.setup_grow_ns > 0;
          calls++;
        }
        if (stream) cudaStreamDestroy(stream);
      });
    }
    for (auto &t : pool) t.join();
    EXPECT_EQ(calls.load(), 48);
    if (cuda && !reserve) EXPECT_GT(grew.load(), 0);
    else EXPECT_EQ(grew.load(), 0);
    const fl_cache_stats s = Stats(c.get());
    EXPECT_GT(s.evictions, 0u);
    // Every set a call made or grew is counted (one buffer at least); once
    // reserved, the pool's filling and evictions allocate nothing either
    // (rings, reservoirs); the host backend allocates no CUDA buffer.
    if (cuda && !reserve) EXPECT_GE(s.allocations, (uint64_t)grew.load());
    else EXPECT_EQ(s.allocations, reserved) << "allocated while serving";
  }
}

// A reserve whose ring or reservoir cannot grow (common/fault.h, each
// growth in turn) fails with FL_ERR_OUT_OF_MEMORY naming the part, and the
// cache is as it was: it answers right, it admits, and the next reserve
// finishes the job. Fails when a growth's failure is not reported, when
// its message names no part (or no class, for a reservoir), or when it
// leaves the part without a ring or reservoir that rounds can use.
TEST_P(CacheTest, ReserveThatCannotGrowLeavesTheCacheServing) {
  if (GetParam().backend != FL_BACKEND_CUDA) GTEST_SKIP() << "admission rounds are CUDA's";
  const uint32_t tables = (uint32_t)tables_.size();
  bool ring = false, reservoir = false;
  for (unsigned skip = 0;; skip++) {
    SCOPED_TRACE("skip " + std::to_string(skip));
    fl::Cache c = MakeCache(Config(384 << 10));
    ASSERT_NE(c, nullptr);
    std::mt19937_64 rng(90 + skip);
    QueryAndCheck(c.get(), Ids(rng, 300), nullptr, nullptr);
    FL_ASSERT_OK_CACHE(fl_cache_sync(c.get()), c.get());
    const fl_cache_stats before = Stats(c.get());
    fl_fault_arm(FL_FAULT_ROUND_GROW, skip);
    // Calls of 5,000 ids a table: more new slots a round than the
    // reservoirs' first size.
    fl_status st = fl_cache_reserve(c.get(), 5000 * tables, tables, 4);
    const bool fired = !fl_fault_armed(FL_FAULT_ROUND_GROW);
    fl_fault_clear();
    if (!fired) {
      EXPECT_EQ(st, FL_OK) << fl_cache_last_error(c.get());
      break;
    }
    ASSERT_EQ(st, FL_ERR_OUT_OF_MEMORY) << fl_cache_last_error(c.get());
    const std::string msg = fl_cache_last_error(c.get());
    EXPECT_NE(msg.find("part "), std::string::npos) << msg;
    ring |= msg.find("evicted slabs") != std::string::npos;
    reservoir |= msg.find("reservoir of slab class") != std::string::npos;
    EXPECT_EQ(Stats(c.get()).index_entries, before.index_entries);
    for (int batch = 0; batch < 8; batch++) {
      QueryAndCheck(c.get(), Ids(rng, 300), nullptr, Dev(batch & 1));
      if (HasFatalFailure()) return;
    }
    FL_ASSERT_OK_CACHE(fl_cache_sync(c.get()), c.get());
    const fl_cache_stats s = Stats(c.get());
    EXPECT_GT(s.admissions, before.admissions) << "admission stopped";
    EXPECT_GT(s.evictions, 0u);
    EXPECT_EQ(s.index_entries, s.admissions - s.evictions - s.invalidations);
    FL_ASSERT_OK_CACHE(fl_cache_reserve(c.get(), 5000 * tables, tables, 4), c.get());
    ASSERT_LT(skip, 200u) << "the fault keeps firing";
  }
  EXPECT_TRUE(ring) << "no ring growth was failed";
  EXPECT_TRUE(reservoir) << "no reservoir growth was failed";
}

// fl_query_timing_last describes this thread's last call: its counts are
// the call's own (the statistics' change over it), its phases fit in its
// total, and an all-hit call fetches nothing.
TEST_P(CacheTest, TimingOfTheLastCallMatchesItsCounts) {
  fl::Cache c = MakeCache(Config(64 << 20, 1.0));
  ASSERT_NE(c, nullptr);
  std::mt19937_64 rng(5);
  auto ids = Ids(rng, 400);
  for (int pass = 0; pass < 2; pass++) {
    FL_ASSERT_OK_CACHE(fl_cache_sync(c.get()), c.get());
    fl_cache_stats_reset(c.get());
    QueryAndCheck(c.get(), ids, nullptr, nullptr);
    fl_query_timing t;
    memset(&t, 0xff, sizeof t);
    fl_query_timing_last(&t);
    fl_cache_stats s = Stats(c.get());
    EXPECT_EQ(t.missed, s.misses + s.dram_hits) << "pass " << pass;
    // The host fetches what the GPU does not read in place (the calibrated
    // default may read the dense tables' misses in place).
    EXPECT_EQ(t.fetched_rows, s.unique_misses - s.zero_copy_rows) << "pass " << pass;
    EXPECT_GT(t.total_ns, 0u);
    EXPECT_LE(t.setup_ns + t.index_ns + t.fetch_ns + t.admission_ns, t.total_ns);
    EXPECT_LE(t.setup_wait_ns + t.setup_grow_ns, t.setup_ns);
    EXPECT_LE(t.index_wait_ns, t.index_ns);
    EXPECT_LE(t.setup_find_ns + t.setup_wait_ns + t.setup_grow_ns, t.setup_ns);
    if (GetParam().backend == FL_BACKEND_CUDA) {
      EXPECT_GT(t.index_wait_ns, 0u) << "pass " << pass;
    }
    if (pass == 0) {
      EXPECT_GT(t.missed, 0u);
      EXPECT_GT(t.fetch_ns, 0u);
    } else {  // everything was admitted on the first pass (except absent hashed ids, as zeros)
      EXPECT_EQ(t.missed, 0u);
      EXPECT_EQ(t.fetch_ns, 0u);
    }
  }
}

TEST_P(CacheTest, UpdatesInvalidateCachedVectors) {
  fl::Cache c = MakeCache(Config(8 << 20, 1.0));
  ASSERT_NE(c, nullptr);
  std::vector<std::vector<uint64_t>> ids(tables_.size());
  ids[2] = {1, 2, 3, 1000, 19999};
  QueryAndCheck(c.get(), ids, nullptr, nullptr);
  ASSERT_EQ(Stats(c.get()).index_entries, 5u);  // admitted before the upsert
  std::vector<float> rows(3 * 64, 42.5f);
  uint64_t changed[3] = {2, 1000, 5};
  FL_ASSERT_OK_STORE(fl_store_upsert(store_.get(), 2, changed, 3, rows.data()), store_.get());
  QueryAndCheck(c.get(), ids, nullptr, nullptr);  // must see 42.5 for ids 2 and 1000
  EXPECT_GE(Stats(c.get()).invalidations, 2u);
}

// A whole-table rewrite (a synthetic refill) reaches the cache through the
// change log: nothing cached before it is served after it. The table's rows
// are shown cached first (they hit), so the last query would serve the old
// values if the refill left them.
TEST_P(CacheTest, RefillDropsCachedVectors) {
  fl::Cache c = MakeCache(Config(8 << 20, 1.0));
  ASSERT_NE(c, nullptr);
  std::mt19937_64 rng(5);
  auto ids = Ids(rng, 300);
  QueryAndCheck(c.get(), ids, nullptr, nullptr);
  Stats(c.get());  // CUDA: the admission round is over
  fl_cache_stats_reset(c.get());
  QueryAndCheck(c.get(), ids, nullptr, nullptr);
  fl_cache_stats s;
  fl_cache_table_stats per[4];
  ASSERT_EQ(fl_cache_stats_get(c.get(), &s, per, 4), FL_OK);
  ASSERT_EQ(per[2].hits, ids[2].size()) << "table 2's rows are not all cached before the refill";
  FL_ASSERT_OK_STORE(fl_store_fill_synthetic(store_.get(), 2, 1234), store_.get());
  fl_cache_stats_reset(c.get());
  QueryAndCheck(c.get(), ids, nullptr, nullptr);
  ASSERT_EQ(fl_cache_stats_get(c.get(), &s, per, 4), FL_OK);
  EXPECT_EQ(per[2].hits, 0u) << "a row cached before the refill hit after it";
}

TEST_P(CacheTest, BadInputChangesNothing) {
  fl::Cache c = MakeCache(Config(8 << 20, 1.0));
  ASSERT_NE(c, nullptr);
  std::vector<uint64_t> ids = {1, 2, 50};  // 50 is out of range for "small"
  std::vector<float> out(3 * 8);
  fl_table_query q = {0, ids.data(), ids.size(), out.data()};
  EXPECT_EQ(fl_query(c.get(), &q, 1, nullptr), FL_ERR_OUT_OF_RANGE);
  std::string msg = fl_cache_last_error(c.get());
  EXPECT_NE(msg.find("small"), std::string::npos) << msg;
  EXPECT_NE(msg.find("50"), std::string::npos) << msg;
  fl_cache_stats s = Stats(c.get());
  EXPECT_EQ(s.admissions, 0u);
  EXPECT_EQ(s.index_entries, 0u);
  q.table = 9;
  EXPECT_EQ(fl_query(c.get(), &q, 1, nullptr), FL_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(fl_cache_last_error(c.get())).find("table 9"), std::string::npos);
  q.table = 0;
  q.ids = nullptr;
  EXPECT_EQ(fl_query(c.get(), &q, 1, nullptr), FL_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(fl_query(nullptr, &q, 1, nullptr), FL_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(fl_cache_sync(nullptr), FL_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(fl_cache_reserve(nullptr, 10, 1, 1), FL_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(fl_cache_reserve(c.get(), 1ull << 33, 4, 1), FL_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(fl_cache_last_error(c.get())).find("2^32-1"), std::string::npos)
      << fl_cache_last_error(c.get());
  for (uint32_t callers : {0u, 63u}) {
    EXPECT_EQ(fl_cache_reserve(c.get(), 10, 1, callers), FL_ERR_INVALID_ARGUMENT) << callers;
    EXPECT_NE(std::string(fl_cache_last_error(c.get())).find("callers, not 1 to 62"),
              std::string::npos)
        << fl_cache_last_error(c.get());
  }
  // A good query beside a bad one (unknown table, NULL out): the call is
  // refused whole before anything runs: no row written, nothing counted or
  // admitted.
  std::vector<uint64_t> good = {3, 4, 5};
  std::vector<float> good_out(3 * 8, -7.0f);
  fl_table_query two[2] = {{0, good.data(), good.size(), good_out.data()},
                           {9, good.data(), good.size(), out.data()}};
  EXPECT_EQ(fl_query(c.get(), two, 2, nullptr), FL_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(fl_cache_last_error(c.get())).find("query 1"), std::string::npos)
      << fl_cache_last_error(c.get());
  two[1] = {0, good.data(), good.size(), nullptr};
  EXPECT_EQ(fl_query(c.get(), two, 2, nullptr), FL_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(fl_cache_last_error(c.get())).find("query 1 (table 0): out is NULL"),
            std::string::npos)
      << fl_cache_last_error(c.get());
  for (float v : good_out) EXPECT_EQ(v, -7.0f) << "a refused call wrote a row";
  fl_cache_stats after = Stats(c.get());
  EXPECT_EQ(after.lookups, s.lookups);
  EXPECT_EQ(after.admissions, 0u);
  EXPECT_EQ(after.index_entries, 0u);
  // Still fully usable.
  std::mt19937_64 rng(3);
  QueryAndCheck(c.get(), Ids(rng, 100), nullptr, nullptr);
}

// An id out of range in one table of a call: what API.md promises about the
// outputs. Host backend: the failing batch writes no row. CUDA: its hit rows
// may be written (the hit copy is enqueued before the index pass's result is
// read), its miss rows are not. Per-table layout: the tables before the
// failing one are batches that completed, the ones after it never ran. A
// written row is always the store's, and nothing of the failing batch is
// admitted.
TEST_P(CacheTest, OutOfRangeIdLeavesTheDocumentedRows) {
  const bool cuda = GetParam().backend == FL_BACKEND_CUDA;
  const bool per_table = GetParam().layout == FL_LAYOUT_PER_TABLE;
  fl::Cache c = MakeCache(Config(8 << 20, 1.0));
  ASSERT_NE(c, nullptr);
  // Ids 0..19 of each table cached (hits below), 20..39 never asked (misses).
  std::vector<std::vector<uint64_t>> warm(tables_.size()), ids(tables_.size());
  for (size_t t = 0; t < tables_.size(); t++)
    for (uint64_t k = 0; k < 40; k++) {
      uint64_t id = t == 3 ? HashedId(k) : k;
      if (k < 20) warm[t].push_back(id);
      ids[t].push_back(id);
    }
  QueryAndCheck(c.get(), warm, nullptr, nullptr);
  const fl_cache_stats before = Stats(c.get());
  ASSERT_EQ(before.index_entries, 80u);
  const size_t kBad = 2, kBadPos = 31;
  ids[kBad][kBadPos] = tables_[kBad].corpus_size;
  std::vector<std::vector<uint8_t>> out(tables_.size()), want(tables_.size());
  std::vector<fl_table_query> q, w;
  for (size_t t = 0; t < tables_.size(); t++) {
    out[t].assign(ids[t].size() * RowBytes(tables_[t]), 0xAB);
    want[t].assign(out[t].size(), 0);
    q.push_back({(uint32_t)t, ids[t].data(), ids[t].size(), out[t].data()});
  }
  EXPECT_EQ(fl_query(c.get(), q.data(), (uint32_t)q.size(), nullptr), FL_ERR_OUT_OF_RANGE);
  EXPECT_NE(std::string(fl_cache_last_error(c.get())).find("id 20000 at position 31"), std::string::npos)
      << fl_cache_last_error(c.get());
  if (cuda) {
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  }
  ids[kBad][kBadPos] = 0;  // the store's rows for the others
  for (size_t t = 0; t < tables_.size(); t++)
    w.push_back({(uint32_t)t, ids[t].data(), ids[t].size(), want[t].data()});
  FL_ASSERT_OK_STORE(fl_store_gather(store_.get(), w.data(), (uint32_t)w.size(), FL_MISSING_ZERO, nullptr),
                     store_.get());
  for (size_t t = 0; t < tables_.size(); t++) {
    const size_t rb = RowBytes(tables_[t]);
    const bool completed = per_table && t < kBad, failing = !per_table || t == kBad;
    for (size_t i = 0; i < ids[t].size(); i++) {
      const uint8_t *got = out[t].data() + i * rb;
      const bool poison = std::all_of(got, got + rb, [](uint8_t b) { return b == 0xAB; });
      const bool right = std::memcmp(got, want[t].data() + i * rb, rb) == 0;
      const bool may_be_written = cuda && failing && i < 20 && !(t == kBad && i == kBadPos);
      if (completed)
        EXPECT_TRUE(right) << "table " << t << " (a batch before the failing one), position " << i;
      else if (may_be_written)
        EXPECT_TRUE(poison || right) << "table " << t << ", hit position " << i;
      else
        EXPECT_TRUE(poison) << "table " << t << ", position " << i << " was written";
    }
  }
  // Only the completed batches' misses are admitted.
  const fl_cache_stats after = Stats(c.get());
  EXPECT_EQ(after.index_entries, before.index_entries + (per_table ? 2 * 20u : 0u));
}

// Under FL_MISSING_ERROR an id the store lacks fails the call with
// FL_ERR_NOT_FOUND naming the table and the id (the CUDA engine fetches on a
// worker thread: the message must travel back), and nothing is admitted.
TEST_P(CacheTest, MissingIdUnderErrorPolicyFailsAndChangesNothing) {
  // With zero_copy_rows, the same batch's dense misses are read in place on
  // CUDA while the host's gather of the hashed ones fails.
  for (uint64_t zero_copy_rows : {0ull, 1024ull}) {
    fl_config cfg = Config(8 << 20, 1.0);
    cfg.missing = FL_MISSING_ERROR;
    cfg.zero_copy_rows = zero_copy_rows;
    fl::Cache c = MakeCache(cfg);
    ASSERT_NE(c, nullptr);
    uint64_t absent = HashedId(4500);  // the store holds HashedId(k) for k < 4000
    std::vector<uint64_t> ids = {HashedId(1), absent, HashedId(2)}, dense = {5, 7, 5};
    std::vector<float> out(ids.size() * 16), out2(dense.size() * 64);
    fl_table_query q[2] = {{2, dense.data(), dense.size(), out2.data()},
                           {3, ids.data(), ids.size(), out.data()}};
    EXPECT_EQ(fl_query(c.get(), q, 2, nullptr), FL_ERR_NOT_FOUND);
    std::string msg = fl_cache_last_error(c.get());
    EXPECT_NE(msg.find("hashed"), std::string::npos) << msg;
    EXPECT_NE(msg.find(std::to_string(absent)), std::string::npos) << msg;
    FL_ASSERT_OK_CACHE(fl_cache_sync(c.get()), c.get());
    // Nothing of the failing batch is admitted. The per-table layout runs
    // the dense table first, as a batch of its own that completes (API.md).
    uint64_t done = GetParam().layout == FL_LAYOUT_PER_TABLE ? 2 : 0;
    fl_cache_stats s = Stats(c.get());
    EXPECT_EQ(s.admissions, done);
    EXPECT_EQ(s.index_entries, done);
    EXPECT_EQ(s.zero_copy_rows,
              GetParam().backend == FL_BACKEND_CUDA && zero_copy_rows ? 2u : 0u);
    // Still fully usable for ids the store holds, in every table.
    std::mt19937_64 rng(5);
    auto present = Ids(rng, 100);
    for (size_t i = 0; i < present[3].size(); i++) present[3][i] = HashedId(i * 37 % 4000);
    QueryAndCheck(c.get(), present, nullptr, nullptr);
    EXPECT_GT(Stats(c.get()).admissions, 0u);
  }
}

// A launched prepared run (CUDA: its host part on the answerer, its graph
// waiting at the gate) whose gather fails: fl_prepared_wait names the table
// and id, nothing of the run is admitted, and the handle goes on answering.
TEST_P(CacheTest, MissingIdInALaunchedRunFailsAndChangesNothing) {
  fl_config cfg = Config(8 << 20, 1.0);
  cfg.missing = FL_MISSING_ERROR;
  fl::Cache c = MakeCache(cfg);
  ASSERT_NE(c, nullptr);
  const bool cuda = GetParam().backend == FL_BACKEND_CUDA;
  const uint64_t absent = HashedId(4500);  // the store holds HashedId(k) for k < 4000
  std::vector<uint64_t> ids = {HashedId(1), HashedId(2), HashedId(2)}, dense = {5, 7, 5};
  std::vector<float> out(ids.size() * 16), out2(dense.size() * 64);
  std::vector<float> want(out.size()), want2(out2.size());
  void *d_ids = nullptr, *d_dense = nullptr, *d_out = nullptr, *d_out2 = nullptr;
  fl_table_query q[2] = {{2, dense.data(), dense.size(), out2.data()},
                         {3, ids.data(), ids.size(), out.data()}};
  if (cuda) {
    ASSERT_EQ(cudaMalloc(&d_ids, ids.size() * 8), cudaSuccess);
    ASSERT_EQ(cudaMalloc(&d_dense, dense.size() * 8), cudaSuccess);
    ASSERT_EQ(cudaMalloc(&d_out, out.size() * 4), cudaSuccess);
    ASSERT_EQ(cudaMalloc(&d_out2, out2.size() * 4), cudaSuccess);
    ASSERT_EQ(cudaMemcpy(d_dense, dense.data(), dense.size() * 8, cudaMemcpyHostToDevice), cudaSuccess);
    q[0] = {2, (const uint64_t *)d_dense, dense.size(), d_out2};
    q[1] = {3, (const uint64_t *)d_ids, ids.size(), d_out};
  }
  fl_prepared *raw = nullptr;
  FL_ASSERT_OK_CACHE(fl_query_prepare(c.get(), q, 2, &raw), c.get());
  std::unique_ptr<fl_prepared, void (*)(fl_prepared *)> p(raw, fl_prepared_destroy);
  auto launch = [&](std::vector<uint64_t> next) {
    ids = next;
    if (cuda) cudaMemcpy(d_ids, ids.data(), ids.size() * 8, cudaMemcpyHostToDevice);
    fl_status st = fl_prepared_launch(p.get(), nullptr);
    if (st == FL_OK) st = fl_prepared_wait(p.get());
    if (cuda) {
      EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
      cudaMemcpy(out.data(), d_out, out.size() * 4, cudaMemcpyDeviceToHost);
      cudaMemcpy(out2.data(), d_out2, out2.size() * 4, cudaMemcpyDeviceToHost);
    }
    return st;
  };
  // Two good runs: the second is a launch with the gated graph.
  for (int i = 0; i < 2; i++) FL_ASSERT_OK_CACHE(launch({HashedId(1), HashedId(2), HashedId(2)}), c.get());
  fl_cache_stats before = Stats(c.get());
  // A new id the store holds, then one it lacks.
  EXPECT_EQ(launch({HashedId(3), absent, HashedId(2)}), FL_ERR_NOT_FOUND);
  std::string msg = fl_cache_last_error(c.get());
  EXPECT_NE(msg.find("hashed"), std::string::npos) << msg;
  EXPECT_NE(msg.find(std::to_string(absent)), std::string::npos) << msg;
  fl_cache_stats after = Stats(c.get());
  EXPECT_EQ(after.admissions, before.admissions);
  EXPECT_EQ(after.index_entries, before.index_entries);
  // Still answering, the id of the failed run included.
  FL_ASSERT_OK_CACHE(launch({HashedId(3), HashedId(4), HashedId(1)}), c.get());
  fl_table_query w[2] = {{2, dense.data(), dense.size(), want2.data()},
                         {3, ids.data(), ids.size(), want.data()}};
  FL_ASSERT_OK_STORE(fl_store_gather(store_.get(), w, 2, FL_MISSING_ZERO, nullptr), store_.get());
  EXPECT_EQ(out, want);
  EXPECT_EQ(out2, want2);
  p.reset();
  for (void *d : {d_ids, d_dense, d_out, d_out2}) cudaFree(d);
}

TEST_P(CacheTest, ClearDropsEverything) {
  fl::Cache c = MakeCache(Config(8 << 20, 1.0));
  ASSERT_NE(c, nullptr);
  std::mt19937_64 rng(4);
  auto ids = Ids(rng, 300);
  QueryAndCheck(c.get(), ids, nullptr, nullptr);
  EXPECT_GT(Stats(c.get()).index_entries, 0u);
  FL_ASSERT_OK_CACHE(fl_cache_clear(c.get()), c.get());
  EXPECT_EQ(Stats(c.get()).index_entries, 0u);
  fl_cache_stats_reset(c.get());
  QueryAndCheck(c.get(), ids, nullptr, nullptr);
  EXPECT_EQ(Stats(c.get()).hits, 0u);
  // Straight after a query that missed, before its admission is launched
  // (CUDA: the courier launches it after fl_query returned): cleared too.
  FL_ASSERT_OK_CACHE(fl_cache_clear(c.get()), c.get());
  EXPECT_EQ(Stats(c.get()).index_entries, 0u);
  fl_cache_stats_reset(c.get());
  QueryAndCheck(c.get(), ids, nullptr, nullptr);
  EXPECT_EQ(Stats(c.get()).hits, 0u);
}

TEST_P(CacheTest, ConcurrentCallersWithEvictions) {
  fl::Cache c = MakeCache(Config(384 << 10));
  ASSERT_NE(c, nullptr);
  EXPECT_EQ(ConcurrentReaders(c.get(), 4, 15, 100, 200, 50), 0);
  EXPECT_GT(Stats(c.get()).evictions, 0u);
}

// A writer keeps rewriting rows while a reader queries: every returned row is
// one whole version of its own id (row r of version v holds v * 64 + r in
// every element, exact in fp32), never older than the version complete when
// the query began. The writer goes on until the reader has seen 20 queries
// during which a write completed (10 s at most), so the race is shown run.
// CUDA: the invalidated rows are read in place under the writer; with a
// limit of 24 rows the reader switches paths from query to query (its
// 16-row queries read in place, its 64-row ones mostly have the host gather
// them).
TEST_P(CacheTest, ConcurrentUpdatesNeverServeTornOrStaleRows) {
  for (uint64_t limit : {1024ull, 24ull}) {
    SCOPED_TRACE("zero_copy_rows " + std::to_string(limit));
    ConcurrentUpdates(limit);
  }
}

void CacheTest::ConcurrentUpdates(uint64_t zero_copy_rows) {
  fl_config cfg = Config(4 << 20, 1.0);
  cfg.zero_copy_rows = zero_copy_rows;
  fl::Cache c = MakeCache(cfg);
  ASSERT_NE(c, nullptr);
  const size_t kRows = 64, kDim = RowRewriter::kDim;
  std::vector<uint64_t> ids(kRows);
  for (uint64_t i = 0; i < kRows; i++) ids[i] = i * 7;
  RowRewriter writer(store_.get(), ids);
  FL_ASSERT_OK_STORE(writer.first(), store_.get());
  std::vector<float> out(kRows * kDim);
  VersionedRows got;
  int overlapped = 0, queries = 0;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (overlapped < 20 && std::chrono::steady_clock::now() < deadline) {
    std::fill(out.begin(), out.end(), -1.0f);
    const int before = writer.version();
    const size_t n = queries % 2 ? kRows : 16;
    fl_table_query q = {2, ids.data(), n, out.data()};
    FL_ASSERT_OK_CACHE(fl_query(c.get(), &q, 1, nullptr), c.get());
    overlapped += writer.version() != before;
    queries++;
    got.Check(out.data(), n, kDim, before, false);
  }
  // CUDA: the invalidated rows were read in place under the writer (counted
  // before the query after it), and with the small limit gathered too.
  const fl_cache_stats during = Stats(c.get());
  EXPECT_EQ(writer.Stop(), 0) << "failed writes";
  EXPECT_GE(overlapped, 20) << "only " << overlapped << " of " << queries
                            << " queries ran while a write completed";
  EXPECT_EQ(got.torn, 0) << "elements of torn rows";
  EXPECT_EQ(got.wrong_id, 0) << "rows of another id or of no version";
  EXPECT_EQ(got.stale, 0) << "rows older than the query";
  // After the last write, every answer is the last version.
  const int last = writer.version();
  fl_table_query q = {2, ids.data(), ids.size(), out.data()};
  FL_ASSERT_OK_CACHE(fl_query(c.get(), &q, 1, nullptr), c.get());
  for (size_t r = 0; r < kRows; r++)
    ASSERT_EQ(out[r * kDim + kDim - 1], (float)(last * 64 + (int)r)) << "row " << r;
  if (GetParam().backend == FL_BACKEND_CUDA) {
    EXPECT_GT(during.zero_copy_rows, 0u);
    if (zero_copy_rows < kRows) EXPECT_GT(during.unique_misses, during.zero_copy_rows);
  }
}

// Every position of an id in one answer holds the same copy of its row
// while a writer rewrites the rows, whole and of that id: the host's scatter
// copies each gathered row to all its positions, and on CUDA, a batch whose
// misses are all read in place (limit 1024; nothing is admitted, so every
// query reads them all) has each row read once by the first warp to reach
// one of its positions, the others waiting for that copy (m.claim,
// fusion/query_kernels.cu). Positions of one id are spread over the batch,
// so their warps run on different blocks.
TEST_P(CacheTest, RepeatedIdsOfOneQueryGetOneCopyUnderWrites) {
  for (uint64_t limit : {1024ull, 0ull}) {
    SCOPED_TRACE("zero_copy_rows " + std::to_string(limit));
    fl_config cfg = Config(4 << 20, 0.0);
    cfg.zero_copy_rows = limit;
    fl::Cache c = MakeCache(cfg);
    ASSERT_NE(c, nullptr);
    const size_t kIds = 16, kRepeat = 32, kDim = RowRewriter::kDim;
    std::vector<uint64_t> ids(kIds), batch;
    for (uint64_t i = 0; i < kIds; i++) ids[i] = i * 11 + 5;
    for (size_t k = 0; k < kRepeat; k++) batch.insert(batch.end(), ids.begin(), ids.end());
    RowRewriter writer(store_.get(), ids);
    FL_ASSERT_OK_STORE(writer.first(), store_.get());
    std::vector<float> out(batch.size() * kDim);
    int torn = 0, wrong_id = 0, differ = 0, overlapped = 0, queries = 0;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    const uint64_t in_place0 = Stats(c.get()).zero_copy_rows;
    while (overlapped < 20 && std::chrono::steady_clock::now() < deadline) {
      std::fill(out.begin(), out.end(), -1.0f);
      const int before = writer.version();
      fl_table_query q = {2, batch.data(), batch.size(), out.data()};
      FL_ASSERT_OK_CACHE(fl_query(c.get(), &q, 1, nullptr), c.get());
      overlapped += writer.version() != before;
      queries++;
      for (size_t p = 0; p < batch.size(); p++) {
        const float v0 = out[p * kDim], first = out[(p % kIds) * kDim];
        for (size_t j = 1; j < kDim; j++) torn += out[p * kDim + j] != v0;
        wrong_id += v0 < 64 || (int)v0 % 64 != (int)(p % kIds);
        differ += v0 != first;
      }
    }
    const uint64_t in_place = Stats(c.get()).zero_copy_rows - in_place0;
    EXPECT_EQ(writer.Stop(), 0) << "failed writes";
    EXPECT_GE(overlapped, 20) << "only " << overlapped << " of " << queries
                              << " queries ran while a write completed";
    EXPECT_EQ(torn, 0) << "elements of torn rows";
    EXPECT_EQ(wrong_id, 0) << "rows of another id";
    EXPECT_EQ(differ, 0) << "positions whose copy differs from their id's first position's";
    const bool cuda = GetParam().backend == FL_BACKEND_CUDA;
    EXPECT_EQ(in_place, cuda && limit ? (uint64_t)queries * kIds : 0u);
  }
}

// Unified-index pointers into the hashed table are read in place on CUDA (a
// one-shot fl_query), at the slot's reference, when the slot still holds
// the id (fusion/zero_copy.h). A writer removes and reinserts the ids, so
// their slots change hands among them (the store reuses the last freed
// first): every answer is whole and its id's, or zeros while removed, and
// never older than the query; rows whose slot had changed were fetched
// again by id (zero_copy_stale). After the writer, every pointer row is
// read in place and is the last version. The host backend reads pointer
// rows through the store's references (the same oracle).
TEST_P(CacheTest, HashedPointerRowsReadInPlaceWhileRemovedAndReinserted) {
  const bool cuda = GetParam().backend == FL_BACKEND_CUDA;
  fl_config cfg = Config(8 << 20, 0.0);  // admit nothing: misses leave pointers
  cfg.unified_entries = 1 << 16;
  cfg.zero_copy_rows = 1024;
  fl::Cache c = MakeCache(cfg);
  ASSERT_NE(c, nullptr);
  const size_t kIds = 16, kDim = 16;
  std::vector<uint64_t> ids(kIds);
  for (size_t r = 0; r < kIds; r++) ids[r] = HashedId(100000 + r);
  auto rows_of = [&](int v) {
    std::vector<float> rows(kIds * kDim);
    for (size_t r = 0; r < kIds; r++)
      std::fill(rows.begin() + r * kDim, rows.begin() + (r + 1) * kDim, (float)(v * 64 + (int)r));
    return rows;
  };
  FL_ASSERT_OK_STORE(fl_store_upsert(store_.get(), 3, ids.data(), kIds, rows_of(1).data()),
                     store_.get());
  std::atomic<bool> stop{false};
  std::atomic<int> version{1}, failures{0}, queries{0};
  // Each write waits for three queries after the last (the first misses
  // and leaves pointers, the next read them), however slow the queries
  // run (under a sanitizer), and then runs beside the next ones.
  std::thread writer([&] {
    for (int v = 2, seen = 0; !stop && v < 100000; v++) {
      while (!stop && queries.load() < seen + 3) std::this_thread::sleep_for(std::chrono::microseconds(20));
      seen = queries.load();
      failures += fl_store_remove(store_.get(), 3, ids.data(), kIds) != FL_OK;
      failures += fl_store_upsert(store_.get(), 3, ids.data(), kIds, rows_of(v).data()) != FL_OK;
      version.store(v);
    }
  });
  std::vector<float> out(kIds * kDim);
  VersionedRows got;
  int overlapped = 0;
  const fl_cache_stats before_run = Stats(c.get());
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(4);
  while (std::chrono::steady_clock::now() < deadline) {
    std::fill(out.begin(), out.end(), -1.0f);
    const int before = version.load();
    fl_table_query q = {3, ids.data(), kIds, out.data()};
    FL_ASSERT_OK_CACHE(fl_query(c.get(), &q, 1, nullptr), c.get());
    overlapped += version.load() != before;
    queries++;
    got.Check(out.data(), kIds, kDim, before, true);
  }
  stop = true;
  writer.join();
  const fl_cache_stats during = Stats(c.get());
  EXPECT_EQ(failures.load(), 0) << "failed writes";
  EXPECT_GE(overlapped, 20) << "only " << overlapped << " of " << queries.load()
                            << " queries ran while a write completed";
  EXPECT_EQ(got.torn, 0) << "elements of torn rows";
  EXPECT_EQ(got.wrong_id, 0) << "rows of another id or of no version";
  EXPECT_EQ(got.stale, 0) << "rows older than the query";
  std::printf("%d queries, %d overlapping a write: %llu pointer hits, %llu rows read in place, "
              "%llu of them fetched again\n",
              queries.load(), overlapped, (unsigned long long)(during.dram_hits - before_run.dram_hits),
              (unsigned long long)(during.zero_copy_rows - before_run.zero_copy_rows),
              (unsigned long long)during.zero_copy_stale);
  if (cuda) EXPECT_GT(during.zero_copy_rows, before_run.zero_copy_rows);
  else EXPECT_EQ(during.zero_copy_rows + during.zero_copy_stale, 0u);
  // Quiet: the first query leaves the pointers, the second reads every row
  // in place (CUDA) and gets the last version.
  fl_table_query q = {3, ids.data(), kIds, out.data()};
  FL_ASSERT_OK_CACHE(fl_query(c.get(), &q, 1, nullptr), c.get());
  FL_ASSERT_OK_CACHE(fl_cache_sync(c.get()), c.get());
  const fl_cache_stats quiet = Stats(c.get());
  FL_ASSERT_OK_CACHE(fl_query(c.get(), &q, 1, nullptr), c.get());
  const fl_cache_stats last = Stats(c.get());
  EXPECT_EQ(last.dram_hits - quiet.dram_hits, kIds);
  EXPECT_EQ(last.zero_copy_rows - quiet.zero_copy_rows, cuda ? kIds : 0u);
  EXPECT_EQ(last.zero_copy_stale, quiet.zero_copy_stale);
  for (size_t r = 0; r < kIds; r++)
    ASSERT_EQ(out[r * kDim + kDim - 1], (float)(version.load() * 64 + (int)r)) << "row " << r;
}

// Unified index: misses that do not enter the cache leave pointers into the
// store; later lookups of those keys skip the store's lookup (dram_hits) and
// still return the store's vectors; lowering the limit drops them.
TEST_P(CacheTest, UnifiedIndexPointsIntoTheStore) {
  fl_config cfg = Config(8 << 20);
  cfg.admit_probability = 0.0;  // nothing is cached: every second lookup is a pointer
  cfg.unified_entries = 1 << 20;
  fl::Cache c = MakeCache(cfg);
  ASSERT_NE(c, nullptr);
  std::mt19937_64 rng(21);
  auto ids = Ids(rng, 400);
  QueryAndCheck(c.get(), ids, nullptr, nullptr);
  fl_cache_stats s = Stats(c.get());
  EXPECT_GT(s.unified_entries, 0u);
  EXPECT_EQ(s.admissions, 0u);
  fl_cache_stats_reset(c.get());
  QueryAndCheck(c.get(), ids, nullptr, nullptr);
  s = Stats(c.get());
  // Every id the store holds is now a pointer hit; the hashed table's absent
  // ids get no pointer and stay misses.
  EXPECT_GT(s.dram_hits, s.lookups / 2);
  EXPECT_EQ(s.hits, 0u);
  EXPECT_EQ(s.dram_hits + s.misses, s.lookups);
  // Updates go through the pointer: the new vector is served.
  std::vector<float> rows(64, -3.25f);
  uint64_t id = ids[2][0];
  FL_ASSERT_OK_STORE(fl_store_upsert(store_.get(), 2, &id, 1, rows.data()), store_.get());
  QueryAndCheck(c.get(), ids, nullptr, nullptr);
  // A removed hashed id loses its pointer and reads as missing (zeros).
  uint64_t gone = ids[3][0];
  FL_ASSERT_OK_STORE(fl_store_remove(store_.get(), 3, &gone, 1), store_.get());
  QueryAndCheck(c.get(), ids, nullptr, nullptr);
  FL_ASSERT_OK_CACHE(fl_cache_set_unified_entries(c.get(), 10), c.get());
  EXPECT_LE(Stats(c.get()).unified_entries, 10u);
  FL_ASSERT_OK_CACHE(fl_cache_set_unified_entries(c.get(), 0), c.get());
  EXPECT_EQ(Stats(c.get()).unified_entries, 0u);
  fl_cache_stats_reset(c.get());
  QueryAndCheck(c.get(), ids, nullptr, nullptr);
  EXPECT_EQ(Stats(c.get()).dram_hits, 0u);
}

// Pointers and cached vectors together under eviction, with promotion of
// pointers whose coin comes up: the oracle holds throughout.
TEST_P(CacheTest, UnifiedIndexWithEvictionsAndPromotion) {
  fl_config cfg = Config(512 << 10);
  cfg.admit_probability = 0.3;
  cfg.unified_entries = 3000;
  fl::Cache c = MakeCache(cfg);
  ASSERT_NE(c, nullptr);
  std::mt19937_64 rng(22);
  for (int batch = 0; batch < 30; batch++) {
    QueryAndCheck(c.get(), Ids(rng, 700), nullptr, nullptr);
    if (HasFatalFailure()) return;
  }
  fl_cache_stats s = Stats(c.get());
  EXPECT_GT(s.dram_hits, 0u);
  EXPECT_GT(s.hits, 0u);
  EXPECT_GT(s.evictions, 0u);
  EXPECT_LE(s.unified_entries, 3000u);
  EXPECT_EQ(s.hits + s.dram_hits + s.misses, s.lookups);
}

// Unified entries asked beyond what the index holds at max_load are not
// taken: pointers stop where the index reaches its load, so a miss's probe
// stays short (the index's slots are sized for the pool's vectors).
TEST_P(CacheTest, UnifiedEntriesStopAtTheIndexLoad) {
  fl_config cfg = Config(256 << 10, 0.0);  // admit nothing: misses leave pointers
  cfg.unified_entries = 1ull << 30;
  fl::Cache c = MakeCache(cfg);
  ASSERT_NE(c, nullptr);
  std::mt19937_64 rng(23);
  for (int batch = 0; batch < 20; batch++) {
    QueryAndCheck(c.get(), Ids(rng, 700), nullptr, nullptr);
    if (HasFatalFailure()) return;
  }
  FL_ASSERT_OK_CACHE(fl_cache_sync(c.get()), c.get());
  fl_index_health h;
  FL_ASSERT_OK_CACHE(fl_cache_index_health(c.get(), &h), c.get());
  const fl_cache_stats s = Stats(c.get());
  EXPECT_LE(h.live, (uint64_t)(cfg.max_load * (double)h.slots)) << "of " << h.slots << " slots";
  EXPECT_GE(s.unified_entries, (uint64_t)(0.8 * cfg.max_load * (double)h.slots))
      << "pointers stopped short of the load, of " << h.slots << " slots";
  EXPECT_LT(h.miss_probe, 10.0);
}

// Misses are deduplicated before the store is asked: a batch holding a few
// ids many times looks each id up in the store once, and every position
// still gets its row. (The store's gather: no row is read in place.)
// fl_prefetch caches every row it names, whatever the admission policy
// (here a coin that admits nothing), so that the query after it hits on all
// of them; its ids may be host or device memory (CUDA), its outputs NULL;
// it counts apart from queries; bad input fails as fl_query's does and
// admits nothing.
TEST_P(CacheTest, PrefetchedRowsAreHitsOfTheNextQuery) {
  fl::Cache c = MakeCache(Config(8 << 20, 0.0));
  ASSERT_NE(c, nullptr);
  const bool cuda = GetParam().backend == FL_BACKEND_CUDA;
  cudaStream_t stream = nullptr;
  if (cuda) ASSERT_EQ(cudaStreamCreate(&stream), cudaSuccess);
  std::mt19937_64 rng(21);
  for (int round = 0; round < 2; round++) {
    // Ids the store holds (the hashed table lacks some), repeats included.
    std::vector<std::vector<uint64_t>> ids = Ids(rng, 300);
    ids[3].erase(std::remove_if(ids[3].begin(), ids[3].end(),
                                [](uint64_t id) {
                                  for (uint64_t k = 0; k < 4000; k++)
                                    if (HashedId(k) == id) return false;
                                  return true;
                                }),
                 ids[3].end());
    uint64_t n = 0, distinct = 0;
    for (auto &t : ids) {
      n += t.size();
      distinct += std::set<uint64_t>(t.begin(), t.end()).size();
    }
    // Round 1 starts from an empty cache too.
    FL_ASSERT_OK_CACHE(fl_cache_clear(c.get()), c.get());
    fl_cache_stats cleared = Stats(c.get());
    QueryAndCheck(c.get(), ids, stream, nullptr);
    fl_cache_stats before = Stats(c.get());
    EXPECT_EQ(before.admissions, cleared.admissions) << "the coin at 0 admitted a query's row";
    // Round 1: ids in device memory (CUDA).
    DeviceIo dev;
    std::vector<fl_table_query> q(tables_.size());
    for (size_t t = 0; t < tables_.size(); t++) {
      q[t] = {(uint32_t)t, ids[t].data(), ids[t].size(), nullptr};
      if (cuda && round == 1 && !ids[t].empty()) {
        void *d = dev.Buffer(t, ids[t].size() * 8);
        ASSERT_NE(d, nullptr);
        ASSERT_EQ(cudaMemcpy(d, ids[t].data(), ids[t].size() * 8, cudaMemcpyHostToDevice),
                  cudaSuccess);
        q[t].ids = (const uint64_t *)d;
      }
    }
    FL_ASSERT_OK_CACHE(fl_prefetch(c.get(), q.data(), (uint32_t)q.size(), stream), c.get());
    fl_cache_stats now;
    ASSERT_EQ(fl_cache_stats_get(c.get(), &now, nullptr, 0), FL_OK);
    EXPECT_EQ(now.prefetches - before.prefetches, 1u);
    EXPECT_EQ(now.prefetch_lookups - before.prefetch_lookups, n);
    EXPECT_EQ(now.prefetch_misses - before.prefetch_misses, n);
    EXPECT_EQ(now.queries, before.queries);
    EXPECT_EQ(now.lookups, before.lookups);
    // The query on the prefetch's stream, with no wait on the host between
    // them, finds every row cached.
    QueryAndCheck(c.get(), ids, stream, nullptr);
    fl_cache_stats after = Stats(c.get());
    EXPECT_EQ(after.admissions - before.admissions, distinct);
    EXPECT_EQ(after.hits - before.hits, n) << "a prefetched row missed";
    // Named again: all cached, nothing fetched.
    FL_ASSERT_OK_CACHE(fl_prefetch(c.get(), q.data(), (uint32_t)q.size(), stream), c.get());
    EXPECT_EQ(Stats(c.get()).prefetch_misses, after.prefetch_misses);
  }
  // Bad input: refused, nothing admitted, the message names what.
  fl_cache_stats s = Stats(c.get());
  std::vector<uint64_t> bad = {1, 2, 50};  // 50 is out of range for "small"
  fl_table_query q = {0, bad.data(), bad.size(), nullptr};
  EXPECT_EQ(fl_prefetch(c.get(), &q, 1, stream), FL_ERR_OUT_OF_RANGE);
  EXPECT_NE(std::string(fl_cache_last_error(c.get())).find("id 50"), std::string::npos)
      << fl_cache_last_error(c.get());
  q.table = 9;
  EXPECT_EQ(fl_prefetch(c.get(), &q, 1, stream), FL_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(fl_cache_last_error(c.get())).find("table 9"), std::string::npos);
  q = {0, nullptr, 3, nullptr};
  EXPECT_EQ(fl_prefetch(c.get(), &q, 1, stream), FL_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(fl_cache_last_error(c.get())).find("ids is NULL"), std::string::npos);
  EXPECT_EQ(fl_prefetch(nullptr, &q, 1, stream), FL_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(Stats(c.get()).admissions, s.admissions);
  if (stream) cudaStreamDestroy(stream);
}

// fl_prefetch racing a writer of the rows it names: with a coin that admits
// nothing a query misses, every cached row came from a prefetch, and the
// query after each prefetch (on its stream) never gets a torn row, another
// id's, or one older than the last write complete when the query began: a
// row fetched before a write is not admitted after it. Every other round
// holds the writer: no write can overlap that prefetch, so its query hits
// on every row, and the writes after it invalidate them.
TEST_P(CacheTest, PrefetchesRacingStoreWritesCacheNoStaleRow) {
  fl::Cache c = MakeCache(Config(4 << 20, 0.0));
  ASSERT_NE(c, nullptr);
  cudaStream_t stream = nullptr;
  if (GetParam().backend == FL_BACKEND_CUDA) ASSERT_EQ(cudaStreamCreate(&stream), cudaSuccess);
  const size_t kRows = 64, kDim = RowRewriter::kDim;
  std::vector<uint64_t> ids(kRows);
  for (uint64_t i = 0; i < kRows; i++) ids[i] = i * 13 + 1;
  RowRewriter writer(store_.get(), ids);
  FL_ASSERT_OK_STORE(writer.first(), store_.get());
  std::vector<float> out(kRows * kDim);
  VersionedRows got;
  int overlapped = 0, rounds = 0;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (overlapped < 20 && std::chrono::steady_clock::now() < deadline) {
    const bool held = rounds % 2;
    if (held) writer.Hold();
    const int before = writer.version();
    const uint64_t hits = held ? Stats(c.get()).hits : 0;
    fl_table_query p = {2, ids.data(), kRows, nullptr};
    FL_ASSERT_OK_CACHE(fl_prefetch(c.get(), &p, 1, stream), c.get());
    std::fill(out.begin(), out.end(), -1.0f);
    const int at_query = writer.version();
    fl_table_query q = {2, ids.data(), kRows, out.data()};
    FL_ASSERT_OK_CACHE(fl_query(c.get(), &q, 1, stream), c.get());
    if (stream) ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
    overlapped += writer.version() != before;
    if (held) {
      EXPECT_EQ(Stats(c.get()).hits - hits, kRows) << "round " << rounds << ": prefetched rows missed";
      // A mutex favours the thread that just let it go: the next round
      // starts once the writer has written again.
      const int v = writer.version();
      writer.Resume();
      while (writer.version() == v && std::chrono::steady_clock::now() < deadline)
        std::this_thread::yield();
    }
    rounds++;
    got.Check(out.data(), kRows, kDim, at_query, false);
  }
  EXPECT_EQ(writer.Stop(), 0) << "failed writes";
  const fl_cache_stats s = Stats(c.get());
  EXPECT_GE(overlapped, 20) << "only " << overlapped << " of " << rounds
                            << " prefetches ran while a write completed";
  EXPECT_GT(s.invalidations, 0u);
  EXPECT_EQ(got.torn, 0) << "elements of torn rows";
  EXPECT_EQ(got.wrong_id, 0) << "rows of another id or of no version";
  EXPECT_EQ(got.stale, 0) << "rows older than the query";
  if (stream) cudaStreamDestroy(stream);
}

// Prefetches of random batches on their own threads beside queries on
// others, with a pool small enough to evict: every answer equals the
// store's, and the rows a thread prefetched answer right after as well.
TEST_P(CacheTest, PrefetchesBesideConcurrentQueriesAnswerLikeTheStore) {
  fl::Cache c = MakeCache(Config(256 << 10, 0.3));
  ASSERT_NE(c, nullptr);
  std::atomic<bool> stop{false};
  std::atomic<int> failures{0};
  std::vector<std::thread> prefetchers;
  for (int th = 0; th < 2; th++) {
    prefetchers.emplace_back([&, th] {
      cudaStream_t stream = nullptr;
      if (GetParam().backend == FL_BACKEND_CUDA) cudaStreamCreate(&stream);
      std::mt19937_64 rng(100 + th);
      for (int k = 0; k < 40 && !stop; k++) {
        std::vector<std::vector<uint64_t>> ids = Ids(rng, 200);
        std::vector<fl_table_query> q(tables_.size());
        for (size_t t = 0; t < tables_.size(); t++)
          q[t] = {(uint32_t)t, ids[t].data(), ids[t].size(), nullptr};
        if (fl_prefetch(c.get(), q.data(), (uint32_t)q.size(), stream) != FL_OK) failures++;
        QueryAndCheck(c.get(), ids, stream, nullptr);
        if (HasFailure()) failures++;
      }
      if (stream) cudaStreamDestroy(stream);
    });
  }
  EXPECT_EQ(ConcurrentReaders(c.get(), 3, 20, 7, 150, 50), 0);
  stop = true;
  for (auto &t : prefetchers) t.join();
  EXPECT_EQ(failures.load(), 0) << fl_cache_last_error(c.get());
  fl_cache_stats s = Stats(c.get());
  EXPECT_GT(s.prefetches, 0u);
  EXPECT_GT(s.evictions, 0u) << "the pool never filled: the case tests no eviction";
}

TEST_P(CacheTest, DuplicateMissesAreFetchedOnce) {
  fl_config cfg = Config(8 << 20, 0.0);  // admit nothing: every lookup misses
  cfg.zero_copy_rows = 0;
  fl::Cache c = MakeCache(cfg);
  ASSERT_NE(c, nullptr);
  std::vector<std::vector<uint64_t>> ids(tables_.size());
  for (int i = 0; i < 600; i++) {
    ids[2].push_back((uint64_t[]){5, 7, 19999}[i % 3]);
    ids[3].push_back(HashedId(i % 2));
  }
  fl_store_table_stats before2, before3, after2, after3;
  ASSERT_EQ(fl_store_stats(store_.get(), 2, &before2), FL_OK);
  ASSERT_EQ(fl_store_stats(store_.get(), 3, &before3), FL_OK);
  std::vector<float> out2(600 * 64), out3(600 * 16);
  fl_table_query q[2] = {{2, ids[2].data(), 600, out2.data()}, {3, ids[3].data(), 600, out3.data()}};
  FL_ASSERT_OK_CACHE(fl_query(c.get(), q, 2, nullptr), c.get());
  if (GetParam().backend == FL_BACKEND_CUDA) {
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  }
  ASSERT_EQ(fl_store_stats(store_.get(), 2, &after2), FL_OK);
  ASSERT_EQ(fl_store_stats(store_.get(), 3, &after3), FL_OK);
  fl_cache_table_stats per[4];
  fl_cache_stats st;
  ASSERT_EQ(fl_cache_stats_get(c.get(), &st, per, 4), FL_OK);
  EXPECT_EQ(after2.lookups - before2.lookups, 3u);
  EXPECT_EQ(after3.lookups - before3.lookups, 2u);
  EXPECT_EQ(per[2].misses, 600u);  // positions, not unique rows
  QueryAndCheck(c.get(), ids, nullptr, nullptr);
}

// Zero-copy (CUDA): a batch with at most cfg.zero_copy_rows distinct misses
// of dense tables has the GPU read them straight from the store, while the
// host gathers the hashed table's misses in the same batch; a batch with
// more takes the host path for all; 0 turns it off. Every answer is the
// store's. The host backend never reads in place.
TEST_P(CacheTest, ZeroCopyReadsFewDenseMissesInPlace) {
  const bool cuda = GetParam().backend == FL_BACKEND_CUDA;
  for (uint64_t limit : {0ull, 6ull, 1024ull}) {
    fl_config cfg = Config(8 << 20, 0.0);  // admit nothing: every lookup misses
    cfg.zero_copy_rows = limit;
    fl::Cache c = MakeCache(cfg);
    ASSERT_NE(c, nullptr);
    // Two distinct ids per dense table (6 rows in all, one repeated), and
    // hashed misses, present and absent, for the host.
    std::vector<std::vector<uint64_t>> few = {{3, 49, 3}, {0, 2999}, {7, 19999, 7},
                                              {HashedId(1), HashedId(4500), HashedId(1)}};
    QueryAndCheck(c.get(), few, nullptr, nullptr);
    uint64_t in_place = Stats(c.get()).zero_copy_rows;
    EXPECT_EQ(in_place, cuda && limit >= 2 ? 6u : 0u) << "limit " << limit;
    // 7 distinct dense misses: in place only under the 1024 limit, or, in
    // the per-table layout, where each table's part batch (at most 3 rows)
    // is judged alone.
    std::vector<std::vector<uint64_t>> more = {{1, 2, 4}, {5, 6}, {8, 9}, {HashedId(2)}};
    QueryAndCheck(c.get(), more, nullptr, Dev(cuda));
    uint64_t per_batch = GetParam().layout == FL_LAYOUT_PER_TABLE ? 3 : 7;
    EXPECT_EQ(Stats(c.get()).zero_copy_rows - in_place, cuda && limit >= per_batch ? 7u : 0u)
        << "limit " << limit;
    // Random batches of both kinds, device buffers every other one.
    std::mt19937_64 rng(limit);
    for (int batch = 0; batch < 6; batch++)
      QueryAndCheck(c.get(), Ids(rng, batch % 2 ? 40 : 400), nullptr, Dev(cuda && (batch & 1)));
  }
}

// By default (FL_ZERO_COPY_AUTO) a CUDA cache times both miss paths at
// create and reports the limit it took (a set limit is reported as set);
// a batch with at most that many distinct dense misses reads them in place,
// one with more has the host gather them all. Every answer is the store's.
// The host backend reads nothing in place.
TEST_P(CacheTest, ZeroCopyLimitIsCalibratedByDefault) {
  const bool cuda = GetParam().backend == FL_BACKEND_CUDA;
  fl_config cfg = Config(8 << 20, 0.0);  // admit nothing: every lookup misses
  ASSERT_EQ(cfg.zero_copy_rows, FL_ZERO_COPY_AUTO);
  fl::Cache c = MakeCache(cfg);
  ASSERT_NE(c, nullptr);
  const uint64_t limit = Stats(c.get()).zero_copy_limit;
  if (!cuda) {
    EXPECT_EQ(limit, 0u);
  }
  std::printf("zero_copy_limit %llu\n", (unsigned long long)limit);
  // k distinct misses of the wide dense table alone (its own part batch in
  // the per-table layout too).
  auto in_place_of = [&](uint64_t k) {
    std::vector<std::vector<uint64_t>> ids(tables_.size());
    for (uint64_t i = 0; i < k; i++) ids[2].push_back(i);
    uint64_t before = Stats(c.get()).zero_copy_rows;
    QueryAndCheck(c.get(), ids, nullptr, Dev(cuda));
    return Stats(c.get()).zero_copy_rows - before;
  };
  const uint64_t wide = tables_[2].corpus_size;
  for (uint64_t k : std::vector<uint64_t>{1, 7, limit, limit + 1}) {
    if (k >= 1 && k <= wide)
      EXPECT_EQ(in_place_of(k), k <= limit ? k : 0u) << k << " rows, limit " << limit;
  }
  cfg.zero_copy_rows = 6;
  fl::Cache set = MakeCache(cfg);
  ASSERT_NE(set, nullptr);
  EXPECT_EQ(Stats(set.get()).zero_copy_limit, cuda ? 6u : 0u);
}

// A store of hashed tables only, with the default zero_copy_rows (auto)
// and unified entries: the cache times reads of a sample of the table's rows
// at their references (CUDA: the host's side of the timing reads them by
// reference, which the table's lookups count), and rows pointed at are then
// read in place, up to the limit it picked, and answer the store's vectors.
// An empty hashed store has no row to time: no limit. Fails when such a
// store is not timed (mutant 33: its pointer rows then always take the
// host's path). The limit itself is a measurement: a run under a sanitizer
// picks 0.
TEST_P(CacheTest, HashedOnlyStoreCalibratesItsPointerReads) {
  const bool cuda = GetParam().backend == FL_BACKEND_CUDA;
  const fl_table_desc only[] = {tables_[3]};
  const uint32_t dim = only[0].dim;
  auto hashed_store = [&](uint64_t rows) {
    fl_store *s = nullptr;
    EXPECT_EQ(fl_store_create(only, 1, 2, &s), FL_OK) << fl_store_last_error(nullptr);
    std::vector<uint64_t> ids(rows);
    std::vector<float> vecs(rows * dim);
    for (uint64_t k = 0; k < rows; k++) {
      ids[k] = HashedId(k);
      for (uint32_t j = 0; j < dim; j++) vecs[k * dim + j] = fl_synthetic_value(9, 0, ids[k], j);
    }
    if (s && rows) EXPECT_EQ(fl_store_upsert(s, 0, ids.data(), rows, vecs.data()), FL_OK);
    return fl::Store(s);
  };
  fl_config cfg = Config(8 << 20, 0.0);  // admit nothing: misses leave pointers
  cfg.unified_entries = 1 << 16;
  ASSERT_EQ(cfg.zero_copy_rows, FL_ZERO_COPY_AUTO);
  auto cache_of = [&](fl_store *s) {
    fl_cache *c = nullptr;
    EXPECT_EQ(fl_cache_create(s, &cfg, &c), FL_OK) << fl_cache_last_error(nullptr);
    return fl::Cache(c);
  };
  fl::Store empty = hashed_store(0);
  ASSERT_NE(empty, nullptr);
  fl::Cache none = cache_of(empty.get());
  ASSERT_NE(none, nullptr);
  EXPECT_EQ(Stats(none.get()).zero_copy_limit, 0u);
  auto lookups = [](fl_store *s) {
    fl_store_table_stats st;
    EXPECT_EQ(fl_store_stats(s, 0, &st), FL_OK);
    return st.lookups;
  };

  const uint64_t kRows = 4000;
  fl::Store store = hashed_store(kRows);
  ASSERT_NE(store, nullptr);
  fl::Cache c = cache_of(store.get());
  ASSERT_NE(c, nullptr);
  const uint64_t limit = Stats(c.get()).zero_copy_limit, timed = lookups(store.get());
  std::printf("zero_copy_limit %llu, %llu rows timed on the host\n", (unsigned long long)limit,
              (unsigned long long)timed);
  if (cuda) {
    EXPECT_GE(timed, 64u) << "the hashed rows were not timed";
  } else {
    EXPECT_EQ(limit, 0u);
    EXPECT_EQ(timed, 0u);
  }
  // k ids not asked before: the first query leaves their pointers, the
  // second reads them in place when k is within the limit.
  uint64_t next = 0;
  auto in_place_of = [&](uint64_t k) {
    std::vector<uint64_t> ids(k);
    for (uint64_t i = 0; i < k; i++) ids[i] = HashedId(next++);
    std::vector<float> out(k * dim), want(k * dim);
    fl_table_query q = {0, ids.data(), k, out.data()};
    EXPECT_EQ(fl_query(c.get(), &q, 1, nullptr), FL_OK) << fl_cache_last_error(c.get());
    EXPECT_EQ(fl_cache_sync(c.get()), FL_OK);
    const uint64_t before = Stats(c.get()).zero_copy_rows;
    std::fill(out.begin(), out.end(), -1.0f);
    EXPECT_EQ(fl_query(c.get(), &q, 1, nullptr), FL_OK) << fl_cache_last_error(c.get());
    fl_table_query w = {0, ids.data(), k, want.data()};
    EXPECT_EQ(fl_store_gather(store.get(), &w, 1, FL_MISSING_ERROR, nullptr), FL_OK);
    EXPECT_EQ(out, want) << k << " rows";
    return Stats(c.get()).zero_copy_rows - before;
  };
  for (uint64_t k : std::vector<uint64_t>{1, 7, limit, limit + 1})
    if (k >= 1 && next + k <= kRows)
      EXPECT_EQ(in_place_of(k), k <= limit ? k : 0u) << k << " rows, limit " << limit;
}

// A failed CUDA runtime call of the caller's own (here an allocation too
// large to be made) leaves its error as the thread's last one, until
// something reads it; no later library call on that thread may take it for
// its own. Each call below gets such an error first: queries with misses
// (their scatter kernel), an upsert that invalidates cached rows (the erase
// kernel) and a clear (the index reset). Each must succeed and the answers
// stay the store's. (Fails when a library launch is checked with
// cudaGetLastError() after <<<>>>: it takes the caller's "out of memory".)
TEST_P(CacheTest, AnEarlierFailedCudaCallFailsNoLibraryCall) {
  if (GetParam().backend != FL_BACKEND_CUDA) GTEST_SKIP() << "CUDA only";
  fl::Cache c = MakeCache(Config(8 << 20, 1.0));
  ASSERT_NE(c, nullptr);
  auto fail_a_call = [] {
    void *p = nullptr;
    ASSERT_EQ(cudaMalloc(&p, 1ull << 50), cudaErrorMemoryAllocation);
  };
  std::mt19937_64 rng(5);
  for (int batch = 0; batch < 4; batch++) {
    fail_a_call();
    QueryAndCheck(c.get(), Ids(rng, 200), nullptr, Dev(batch & 1));
  }
  FL_ASSERT_OK_CACHE(fl_cache_sync(c.get()), c.get());
  // The same values again: the cached rows of table 2 are invalidated.
  std::vector<uint64_t> ids = {0, 1, 2, 3, 5, 8};
  std::vector<float> rows(ids.size() * 64);
  for (size_t i = 0; i < ids.size(); i++)
    for (int j = 0; j < 64; j++) rows[i * 64 + j] = fl_synthetic_value(7, 2, ids[i], j);
  uint64_t invalidated = Stats(c.get()).invalidations;
  fail_a_call();
  FL_ASSERT_OK_STORE(fl_store_upsert(store_.get(), 2, ids.data(), ids.size(), rows.data()),
                     store_.get());
  EXPECT_GT(Stats(c.get()).invalidations, invalidated);
  fail_a_call();
  FL_ASSERT_OK_CACHE(fl_cache_clear(c.get()), c.get());
  fail_a_call();
  QueryAndCheck(c.get(), Ids(rng, 200), nullptr, Dev(true));
}

// Async admission (CUDA) racing queries on several streams, cache clears,
// unified-index resizing and store writes that invalidate: the writes put
// back the values the store already holds, so the oracle stays exact while
// every invalidation path runs.
TEST_P(CacheTest, AdmissionRacesQueriesClearsAndInvalidations) {
  fl_config cfg = Config(1 << 20, 0.6);
  cfg.unified_entries = 500;
  fl::Cache c = MakeCache(cfg);
  ASSERT_NE(c, nullptr);
  std::atomic<bool> stop{false};
  std::atomic<int> failures{0};
  std::thread writer([&] {
    std::mt19937_64 rng(77);
    std::vector<uint64_t> ids(32);
    std::vector<float> rows(32 * 64);
    for (int round = 0; !stop; round++) {
      for (size_t i = 0; i < ids.size(); i++) {
        ids[i] = (uint64_t)(rng() % 2000);  // the hot end of the readers' skew
        for (int j = 0; j < 64; j++) rows[i * 64 + j] = fl_synthetic_value(7, 2, ids[i], j);
      }
      // Admissions handed over so far land first, so the upsert finds rows to
      // invalidate even when rounds lag (CUDA: launched after their query).
      if (fl_cache_sync(c.get()) != FL_OK) failures++;
      if (fl_store_upsert(store_.get(), 2, ids.data(), ids.size(), rows.data()) != FL_OK) failures++;
      if (round % 5 == 0 && fl_cache_clear(c.get()) != FL_OK) failures++;
      if (round % 7 == 0 && fl_cache_set_unified_entries(c.get(), (round / 7) % 2 ? 0 : 500) != FL_OK)
        failures++;
      std::this_thread::sleep_for(std::chrono::microseconds(200));
    }
  });
  int reader_failures = ConcurrentReaders(c.get(), 3, 25, 200, 300, 40);
  stop = true;
  writer.join();
  EXPECT_EQ(reader_failures, 0);
  EXPECT_EQ(failures.load(), 0);  // the writer's calls
  fl_cache_stats st = Stats(c.get());
  EXPECT_GT(st.admissions, 0u);
  EXPECT_GT(st.invalidations + st.evictions, 0u);
  EXPECT_EQ(st.hits + st.dram_hits + st.misses, st.lookups);
}

// A pool that fills in every batch: each batch brings more one-off ids than
// the pool holds, in the first tables, and one id the last table looks up
// many times. Admission prefers ids frequent in the batch, whatever their
// table: the hot id of the last table gets cached and hits from then on.
TEST_P(CacheTest, HottestKeyOfTheLastTableIsCachedWhenThePoolFills) {
  std::vector<fl_table_desc> t(4, fl_table_desc{nullptr, 1u << 20, 16, FL_FP32, FL_IDS_DENSE});
  t[3].corpus_size = 100;  // one vector class: every table competes for the same slots
  fl_store *s = nullptr;
  ASSERT_EQ(fl_store_create(t.data(), 4, 2, &s), FL_OK);
  fl::Store store(s);
  for (uint32_t k = 0; k < 4; k++) FL_ASSERT_OK_STORE(fl_store_fill_synthetic(s, k, 3), s);
  fl_config cfg = Config(256 << 10, 1.0);  // about 2,700 vectors: less than one batch
  fl_cache *raw = nullptr;
  ASSERT_EQ(fl_cache_create(s, &cfg, &raw), FL_OK) << fl_cache_last_error(nullptr);
  fl::Cache c(raw);
  const size_t kFlood = 1500, kHot = 40;
  std::vector<std::vector<uint64_t>> ids(4);
  std::vector<std::vector<float>> out(4);
  for (int batch = 0; batch < 6; batch++) {
    std::vector<fl_table_query> q;
    for (uint32_t k = 0; k < 4; k++) {
      ids[k].clear();
      for (size_t i = 0; i < (k < 3 ? kFlood : kHot); i++)
        ids[k].push_back(k < 3 ? (uint64_t)batch * kFlood + i : 7);  // fresh ids; the hot one
      out[k].assign(ids[k].size() * 16, 0.0f);
      q.push_back({k, ids[k].data(), ids[k].size(), out[k].data()});
    }
    fl_cache_stats_reset(c.get());
    FL_ASSERT_OK_CACHE(fl_query(c.get(), q.data(), 4, nullptr), c.get());
    if (GetParam().backend == FL_BACKEND_CUDA) {
      ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    }
    FL_ASSERT_OK_CACHE(fl_cache_sync(c.get()), c.get());
    fl_cache_stats st;
    fl_cache_table_stats per[4];
    ASSERT_EQ(fl_cache_stats_get(c.get(), &st, per, 4), FL_OK);
    if (batch > 0) {
      EXPECT_EQ(per[3].hits, kHot) << "batch " << batch;
      EXPECT_GT(st.pool_bytes_used, st.pool_bytes / 2) << "the pool should be full: batch " << batch;
    }
    for (size_t i = 0; i < kHot; i++)
      ASSERT_EQ(out[3][i * 16 + 5], fl_synthetic_value(3, 3, 7, 5));
  }
}

// A prepared query answers like fl_query for whatever ids its buffers hold
// at each run (CUDA: two tables' buffers on the device, two in pageable host
// memory, so both kinds of place are found once); an out-of-range id fails
// the run and the next run is fine; bad queries fail at prepare.
TEST_P(CacheTest, PreparedQueryAnswersLikeQuery) {
  PreparedAnswersLikeQuery(0, tables_.size());
  PreparedAnswersLikeQuery(1024, tables_.size());
}

// Runs (not launches) with every buffer in device memory: the flat layout's
// run graph with no host ids in its header, after runs that missed, failed
// and hit (PreparedLaunchAnswersLikeQuery covers the gated graph).
TEST_P(CacheTest, PreparedRunOfDeviceIdsAnswersLikeQuery) {
  PreparedAnswersLikeQuery(0, tables_.size(), 0.7, false, true);
}

// Nothing admitted, dense tables only: every run's misses are read in place
// and (CUDA, flat layout) scattered by the prepared query's graph alone.
TEST_P(CacheTest, PreparedQueryReadsDenseMissesInItsGraph) {
  PreparedAnswersLikeQuery(1024, 3, 0.0);
}

// Launched runs (CUDA: the answerer gathers while the graph waits at its
// gate), misses gathered by the host, then mixed with rows read in place.
TEST_P(CacheTest, PreparedLaunchAnswersLikeQuery) {
  PreparedAnswersLikeQuery(0, tables_.size(), 0.7, true);
  PreparedAnswersLikeQuery(1024, tables_.size(), 0.7, true);
}

// A prepared query whose graphs cannot be built (instantiation failing by
// fault point; CUDA): the plain one, so runs and launches go on by direct
// launches, answering as runs; or only the gated one, so launches answer
// as runs. Every answer is the store's, with and without reads in place.
TEST_P(CacheTest, PreparedQueryWithoutItsGraphsAnswersByLaunches) {
  if (GetParam().backend != FL_BACKEND_CUDA) GTEST_SKIP() << "graphs are CUDA's";
  for (unsigned skip : {0u, 1u}) {
    for (uint64_t zero_copy_rows : {0ull, 1024ull}) {
      SCOPED_TRACE(std::to_string(skip) + " builds before the failing one, zero_copy_rows " +
                   std::to_string(zero_copy_rows));
      // Runs build only the plain graph: they meet the fault at its first build.
      for (bool launch : {false, true}) {
        if (!launch && skip) continue;
        fl_fault_arm(FL_FAULT_PLAN_GRAPH, skip);
        graphs_fail_ = true;
        PreparedAnswersLikeQuery(zero_copy_rows, tables_.size(), 0.7, launch);
        graphs_fail_ = false;
        // The per-table layout prepares no graph (a handle of several part
        // batches runs them as fl_query does).
        EXPECT_EQ(fl_fault_armed(FL_FAULT_PLAN_GRAPH), GetParam().layout == FL_LAYOUT_PER_TABLE);
        fl_fault_clear();
      }
    }
  }
}

// Launched runs whose dense misses are read in place while some of them
// hit unified-index pointers: the host fetches those rows, and the graph's
// scatter must take them from the host's staging. (Fails when it takes
// every row of a table read in place from the device staging, where
// nothing writes its pointer rows: torn rows by the million.)
TEST_P(CacheTest, PreparedLaunchReadsInPlaceBesidePointerRows) {
  PreparedAnswersLikeQuery(1024, tables_.size(), 0.5, true, false, 1000);
  PreparedAnswersLikeQuery(1024, 3, 0.5, true, false, 1000);
}

// Launched runs while another thread keeps making calls that hold the CUDA
// driver while they wait for the whole device (cudaFree; a copy on the
// legacy default stream, which waits for every blocking stream): such a
// call waits for a launched run's gate, which the answerer raises with no
// CUDA call of its own, so it only waits. (Fails, by hanging, when the
// launching thread records its events before handing the run to the
// answerer: its record waits behind the other call and the gate is never
// raised.)
TEST_P(CacheTest, LaunchedRunsGoOnWhileAnotherThreadWaitsForTheDevice) {
  if (GetParam().backend != FL_BACKEND_CUDA) GTEST_SKIP() << "CUDA only";
  void *word = nullptr;
  ASSERT_EQ(cudaMalloc(&word, 8), cudaSuccess);
  std::atomic<bool> stop{false};
  std::atomic<int> failures{0}, waits{0};
  std::thread waiter([&] {
    uint64_t v = 0;
    while (!stop) {
      void *p = nullptr;
      if (cudaMalloc(&p, 4096) != cudaSuccess || cudaFree(p) != cudaSuccess) failures++;
      if (cudaMemcpy(&v, word, 8, cudaMemcpyDeviceToHost) != cudaSuccess) failures++;
      waits++;
    }
  });
  PreparedAnswersLikeQuery(0, tables_.size(), 0.7, true);
  stop = true;
  waiter.join();
  cudaFree(word);
  EXPECT_EQ(failures.load(), 0);
  EXPECT_GT(waits.load(), 0);
}

TEST_P(CacheTest, BudgetIsRespected) {
  for (uint64_t budget : {64ull << 10, 1ull << 20, 10ull << 20}) {
    fl::Cache c = MakeCache(Config(budget));
    ASSERT_NE(c, nullptr) << budget;
    fl_cache_stats s = Stats(c.get());
    EXPECT_LE(s.pool_bytes + s.index_bytes, budget);
    EXPECT_GT(s.pool_bytes, 0u);
  }
}

// Index bytes per slot, from the statistics (index_bytes is rounded up to 256).
uint64_t SlotBytes(const fl_cache_stats &s) { return s.index_bytes / s.index_slots; }

// The index takes the smallest slot its cache allows (cache/index.h): 32-bit
// locations unless unified-index pointers were asked for at creation, and
// then no pointer can be made; the cache keeps answering.
TEST_P(CacheTest, TheIndexTakesTheSmallestSlotItCan) {
  const uint64_t narrow = GetParam().key_bits == 32 ? 16 : 20;
  fl::Cache c = MakeCache(Config(1 << 20));
  ASSERT_NE(c, nullptr);
  EXPECT_EQ(SlotBytes(Stats(c.get())), narrow);
  fl_config cfg = Config(1 << 20);
  cfg.unified_entries = 1 << 10;
  fl::Cache wide = MakeCache(cfg);
  ASSERT_NE(wide, nullptr);
  EXPECT_EQ(SlotBytes(Stats(wide.get())), narrow + 4);
  // This store has a hashed table: 32-bit keys would fold its ids.
  cfg = Config(1 << 20);
  cfg.key_bits = FL_KEY_BITS_AUTO;
  fl::Cache picked = MakeCache(cfg);
  ASSERT_NE(picked, nullptr);
  EXPECT_EQ(SlotBytes(Stats(picked.get())), 20u);

  EXPECT_EQ(fl_cache_set_unified_entries(c.get(), 10), FL_ERR_UNSUPPORTED);
  EXPECT_NE(std::string(fl_cache_last_error(c.get())).find("unified_entries"), std::string::npos)
      << fl_cache_last_error(c.get());
  FL_ASSERT_OK_CACHE(fl_cache_set_unified_entries(c.get(), 0), c.get());
  std::mt19937_64 rng(5);
  auto ids = Ids(rng, 300);
  for (int round = 0; round < 3; round++) {
    QueryAndCheck(c.get(), ids, nullptr, nullptr);
    FL_ASSERT_OK_CACHE(fl_cache_sync(c.get()), c.get());  // CUDA: admitted after fl_query returns
  }
  fl_cache_stats s = Stats(c.get());
  EXPECT_EQ(s.unified_entries, 0u);
  EXPECT_EQ(s.dram_hits, 0u);
  EXPECT_GT(s.hits, 0u);
}

INSTANTIATE_TEST_SUITE_P(
    Backends, CacheTest,
    testing::Values(Param{FL_BACKEND_HOST, FL_LAYOUT_FLAT, 64}, Param{FL_BACKEND_HOST, FL_LAYOUT_FLAT, 32},
                    Param{FL_BACKEND_HOST, FL_LAYOUT_PER_TABLE, 64},
                    Param{FL_BACKEND_CUDA, FL_LAYOUT_FLAT, 64}, Param{FL_BACKEND_CUDA, FL_LAYOUT_FLAT, 32},
                    Param{FL_BACKEND_CUDA, FL_LAYOUT_PER_TABLE, 64}),
    Name);

// By default a cache over tables whose ids all fit 32-bit keys takes them:
// with 32-bit locations, 16 index bytes a slot instead of 24, so more of the
// budget holds vectors.
TEST(CacheConfig, ThirtyTwoBitKeysWhenEveryTableFitsThem) {
  std::vector<fl_table_desc> t = Tables();
  t.pop_back();  // the hashed table
  fl_store *s = nullptr;
  ASSERT_EQ(fl_store_create(t.data(), (uint32_t)t.size(), 1, &s), FL_OK);
  fl::Store store(s);
  fl_config cfg;
  fl_config_default(&cfg);
  EXPECT_EQ(cfg.key_bits, FL_KEY_BITS_AUTO);
  cfg.backend = FL_BACKEND_HOST;
  cfg.budget_bytes = 1 << 20;
  fl_cache *c = nullptr;
  ASSERT_EQ(fl_cache_create(s, &cfg, &c), FL_OK) << fl_cache_last_error(nullptr);
  fl::Cache cache(c);
  fl_cache_stats st;
  ASSERT_EQ(fl_cache_stats_get(c, &st, nullptr, 0), FL_OK);
  EXPECT_EQ(SlotBytes(st), 16u);
  cfg.key_bits = 64;
  ASSERT_EQ(fl_cache_create(s, &cfg, &c), FL_OK) << fl_cache_last_error(nullptr);
  fl::Cache wide(c);
  fl_cache_stats st64;
  ASSERT_EQ(fl_cache_stats_get(c, &st64, nullptr, 0), FL_OK);
  EXPECT_EQ(SlotBytes(st64), 20u);
  EXPECT_GT(st.pool_bytes, st64.pool_bytes);
}

TEST(CacheConfig, BadConfigsGetAClearStatus) {
  std::vector<fl_table_desc> t = Tables();
  fl_store *s = nullptr;
  ASSERT_EQ(fl_store_create(t.data(), (uint32_t)t.size(), 1, &s), FL_OK);
  fl::Store store(s);
  fl_config cfg;
  fl_cache *c = nullptr;
  auto expect = [&](fl_status want, const char *word) {
    fl_status got = fl_cache_create(s, &cfg, &c);
    EXPECT_EQ(got, want) << word;
    EXPECT_NE(std::string(fl_cache_last_error(nullptr)).find(word), std::string::npos)
        << fl_cache_last_error(nullptr);
    EXPECT_EQ(c, nullptr);
  };
  fl_config_default(&cfg);
  cfg.backend = FL_BACKEND_HOST;
  cfg.key_bits = 16;
  expect(FL_ERR_INVALID_ARGUMENT, "key_bits");
  fl_config_default(&cfg);
  cfg.backend = FL_BACKEND_HOST;
  cfg.low_watermark = 0.9;
  cfg.high_watermark = 0.5;
  expect(FL_ERR_INVALID_ARGUMENT, "watermarks");
  fl_config_default(&cfg);
  cfg.backend = FL_BACKEND_HOST;
  cfg.budget_bytes = 100;
  expect(FL_ERR_INVALID_ARGUMENT, "budget");
  fl_config_default(&cfg);
  cfg.backend = FL_BACKEND_HOST;
  cfg.admit_probability = 1.5;
  expect(FL_ERR_INVALID_ARGUMENT, "admit_probability");
  fl_config_default(&cfg);
  cfg.backend = FL_BACKEND_HOST;
  cfg.admit_policy = (fl_admit_policy)7;
  expect(FL_ERR_INVALID_ARGUMENT, "admit_policy");
  EXPECT_EQ(fl_cache_create(nullptr, &cfg, &c), FL_ERR_INVALID_ARGUMENT);
  fl_config_default(&cfg);
  cfg.backend = FL_BACKEND_HOST;
  cfg.key_bits = 33;
  expect(FL_ERR_INVALID_ARGUMENT, "FL_KEY_BITS_AUTO");
  if (fl_cuda_device_count() == 0) {
    fl_config_default(&cfg);
    cfg.backend = FL_BACKEND_CUDA;
    expect(FL_ERR_NO_DEVICE, "CUDA");
  }
}

}  // namespace
