// store_test.cc: the CPU-DRAM store through the public C API: dense and
// hashed tables, fp16, missing ids, gathers under concurrent writers (no torn
// vectors), statistics, and every model file format with its failure modes.
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "common/crc32c.h"
#include "common/fault.h"
#include "common/half.h"
#include "dram_store/store_internal.h"
#include "dram_store/synthetic_ids.h"
#include "tests/shims.h"

namespace {

using fl::Store;

std::string TmpPath(const std::string &name) {
  const char *d = std::getenv("TEST_TMPDIR");
  return std::string(d ? d : "/tmp") + "/" + name;
}

std::vector<unsigned char> ReadFile(const std::string &p) {
  std::ifstream f(p, std::ios::binary);
  return std::vector<unsigned char>(std::istreambuf_iterator<char>(f), {});
}

void WriteFile(const std::string &p, const void *data, size_t n) {
  FILE *f = std::fopen(p.c_str(), "wb");
  ASSERT_NE(f, nullptr) << p;
  ASSERT_EQ(std::fwrite(data, 1, n, f), n);
  std::fclose(f);
}

void WriteFile(const std::string &p, const std::vector<unsigned char> &v) {
  WriteFile(p, v.data(), v.size());
}

Store MakeStore(const std::vector<fl_table_desc> &d, uint32_t threads = 2) {
  fl_store *s = nullptr;
  fl_status st = fl_store_create(d.data(), (uint32_t)d.size(), threads, &s);
  EXPECT_EQ(st, FL_OK) << fl::Describe(st, fl_store_last_error(nullptr));
  return Store(s);
}

size_t ElemBytes(const fl_table_desc &d) { return d.dtype == FL_FP16 ? 2 : 4; }

// Gathers ids of one table; returns the raw rows.
std::vector<unsigned char> Gather(fl_store *s, uint32_t table, const std::vector<uint64_t> &ids,
                                  fl_missing policy = FL_MISSING_ZERO, uint64_t *missing = nullptr,
                                  fl_status *status = nullptr) {
  fl_table_desc d;
  EXPECT_EQ(fl_store_table(s, table, &d), FL_OK);
  std::vector<unsigned char> out(ids.size() * d.dim * ElemBytes(d) + 1, 0xAB);
  fl_table_query q{table, ids.data(), ids.size(), out.data()};
  fl_status st = fl_store_gather(s, &q, 1, policy, missing);
  if (status) *status = st;
  else EXPECT_EQ(st, FL_OK) << fl_store_last_error(s);
  out.pop_back();
  return out;
}

// The expected row of fl_store_fill_synthetic for (table, id).
std::vector<unsigned char> SynthRow(const fl_table_desc &d, uint64_t seed, uint32_t table,
                                    uint64_t id) {
  std::vector<unsigned char> r(d.dim * ElemBytes(d));
  for (uint32_t j = 0; j < d.dim; j++) {
    float v = fl_synthetic_value(seed, table, id, j);
    if (d.dtype == FL_FP16) {
      uint16_t h = fl_f32_to_f16(v);
      std::memcpy(&r[j * 2], &h, 2);
    } else {
      std::memcpy(&r[j * 4], &v, 4);
    }
  }
  return r;
}

// Every row of every table equal between two stores (same descs, same ids).
void ExpectSameRows(fl_store *a, fl_store *b, uint32_t table, const std::vector<uint64_t> &ids) {
  EXPECT_EQ(Gather(a, table, ids), Gather(b, table, ids)) << "table " << table;
}

fl_table_desc Desc(const char *name, uint64_t corpus, uint32_t dim, fl_dtype t, fl_id_kind k) {
  return fl_table_desc{name, corpus, dim, t, k};
}

// ---------------------------------------------------------------- basics

TEST(StoreTest, CreateRejectsBadDescriptors) {
  fl_store *s = nullptr;
  fl_table_desc bad = Desc("x", 10, 0, FL_FP32, FL_IDS_DENSE);
  EXPECT_EQ(fl_store_create(&bad, 1, 1, &s), FL_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(fl_store_last_error(nullptr)).find("dim 0"), std::string::npos);
  bad.dim = 4097;
  EXPECT_EQ(fl_store_create(&bad, 1, 1, &s), FL_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(fl_store_create(nullptr, 1, 1, &s), FL_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(fl_store_create(&bad, 1, 1, nullptr), FL_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(s, nullptr);
  fl_store_destroy(nullptr);
}

// Fails when threads = 0 takes every core (beside a server's own threads,
// its helpers wait for CPUs), or a given count is not kept.
TEST(StoreTest, GatherPoolTakesHalfTheCoresByDefault) {
  const long cores = sysconf(_SC_NPROCESSORS_ONLN);
  EXPECT_EQ(fl_store_default_threads(), cores > 1 ? (uint32_t)(cores / 2) : 1u);
  fl_table_desc d = Desc("t", 10, 4, FL_FP32, FL_IDS_DENSE);
  for (uint32_t threads : {0u, 3u}) {
    fl_store *s = nullptr;
    ASSERT_EQ(fl_store_create(&d, 1, threads, &s), FL_OK);
    EXPECT_EQ(fl_store_threads(s), threads ? threads : fl_store_default_threads());
    fl_store_destroy(s);
  }
}

TEST(StoreTest, DenseUpsertGatherAndRange) {
  Store s = MakeStore({Desc("d", 100, 4, FL_FP32, FL_IDS_DENSE), Desc(nullptr, 5, 2, FL_FP32, FL_IDS_DENSE)});
  fl_table_desc d;
  FL_ASSERT_OK_STORE(fl_store_table(s.get(), 1, &d), s.get());
  EXPECT_STREQ(d.name, "t1");
  EXPECT_EQ(fl_store_num_tables(s.get()), 2u);
  // Rows start zero.
  std::vector<unsigned char> zero(4 * 4 * 2, 0);
  EXPECT_EQ(Gather(s.get(), 0, {3, 99}), zero);
  std::vector<uint64_t> ids = {7, 99};
  float v[8] = {1, 2, 3, 4, 5, 6, 7, 8};
  FL_ASSERT_OK_STORE(fl_store_upsert(s.get(), 0, ids.data(), 2, v), s.get());
  auto out = Gather(s.get(), 0, {99, 7, 0});
  float got[12];
  std::memcpy(got, out.data(), sizeof got);
  EXPECT_EQ(got[0], 5);
  EXPECT_EQ(got[4], 1);
  EXPECT_EQ(got[8], 0);
  // Out of range: an error even under FL_MISSING_ZERO, and nothing written.
  std::vector<uint64_t> far = {1, 100};
  EXPECT_EQ(fl_store_upsert(s.get(), 0, far.data(), 2, v), FL_ERR_OUT_OF_RANGE);
  EXPECT_NE(std::string(fl_store_last_error(s.get())).find("id 100"), std::string::npos);
  EXPECT_EQ(Gather(s.get(), 0, {1}), std::vector<unsigned char>(16, 0));
  fl_status st;
  auto untouched = Gather(s.get(), 0, far, FL_MISSING_ZERO, nullptr, &st);
  EXPECT_EQ(st, FL_ERR_OUT_OF_RANGE);
  EXPECT_EQ(untouched, std::vector<unsigned char>(32, 0xAB));
  EXPECT_EQ(fl_store_remove(s.get(), 0, ids.data(), 1), FL_ERR_INVALID_ARGUMENT);
  fl_store_table_stats stats;
  FL_ASSERT_OK_STORE(fl_store_stats(s.get(), 0, &stats), s.get());
  EXPECT_EQ(stats.rows, 100u);
  EXPECT_EQ(stats.bytes, 1600u);
}

TEST(StoreTest, GatherValidatesBeforeWriting) {
  Store s = MakeStore({Desc("h", 10, 3, FL_FP32, FL_IDS_HASHED)});
  std::vector<uint64_t> ids = {1, 2};
  std::vector<float> out(6, -1.f);
  fl_table_query q[2] = {{0, ids.data(), 2, out.data()}, {1, ids.data(), 2, out.data()}};
  EXPECT_EQ(fl_store_gather(s.get(), q, 2, FL_MISSING_ZERO, nullptr), FL_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(fl_store_last_error(s.get())).find("table 1"), std::string::npos);
  q[1] = {0, nullptr, 2, out.data()};
  EXPECT_EQ(fl_store_gather(s.get(), q, 2, FL_MISSING_ZERO, nullptr), FL_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(out, std::vector<float>(6, -1.f));
  EXPECT_EQ(fl_store_gather(s.get(), nullptr, 1, FL_MISSING_ZERO, nullptr), FL_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(fl_store_gather(s.get(), nullptr, 0, FL_MISSING_ZERO, nullptr), FL_OK);
}

TEST(StoreTest, HashedMissingIds) {
  Store s = MakeStore({Desc("h", 10, 2, FL_FP32, FL_IDS_HASHED)});
  std::vector<uint64_t> ids = {0xdeadbeefcafeull, 42};
  float v[4] = {1, 2, 3, 4};
  FL_ASSERT_OK_STORE(fl_store_upsert(s.get(), 0, ids.data(), 2, v), s.get());
  uint64_t missing = 99;
  auto out = Gather(s.get(), 0, {42, 7, 0xdeadbeefcafeull, 8}, FL_MISSING_ZERO, &missing);
  EXPECT_EQ(missing, 2u);
  float got[8];
  std::memcpy(got, out.data(), sizeof got);
  EXPECT_EQ(got[0], 3);
  EXPECT_EQ(got[2], 0);
  EXPECT_EQ(got[3], 0);
  EXPECT_EQ(got[4], 1);
  fl_status st;
  Gather(s.get(), 0, {42, 7}, FL_MISSING_ERROR, nullptr, &st);
  EXPECT_EQ(st, FL_ERR_NOT_FOUND);
  std::string msg = fl_store_last_error(s.get());
  EXPECT_NE(msg.find("id 7"), std::string::npos) << msg;
  EXPECT_NE(msg.find("'h'"), std::string::npos) << msg;
  fl_store_table_stats stats;
  FL_ASSERT_OK_STORE(fl_store_stats(s.get(), 0, &stats), s.get());
  EXPECT_EQ(stats.rows, 2u);
  EXPECT_EQ(stats.bytes, 16u);
  EXPECT_EQ(stats.misses, 3u);
  EXPECT_GE(stats.lookups, 5u);
}

TEST(StoreTest, HashedRemoveReuseAndGrowth) {
  Store s = MakeStore({Desc("h", 4, 3, FL_FP32, FL_IDS_HASHED)}, 3);
  const uint64_t n = 50000;
  std::vector<uint64_t> ids(n);
  std::vector<float> v(n * 3);
  for (uint64_t i = 0; i < n; i++) {
    ids[i] = fl_mix64(i) | 1;  // odd ids
    for (int j = 0; j < 3; j++) v[i * 3 + j] = (float)(i * 3 + j);
  }
  FL_ASSERT_OK_STORE(fl_store_upsert(s.get(), 0, ids.data(), n, v.data()), s.get());
  std::vector<uint64_t> evens(ids.begin(), ids.begin() + n / 2);
  FL_ASSERT_OK_STORE(fl_store_remove(s.get(), 0, evens.data(), evens.size()), s.get());
  FL_ASSERT_OK_STORE(fl_store_remove(s.get(), 0, evens.data(), evens.size()), s.get());  // absent: ignored
  fl_store_table_stats stats;
  FL_ASSERT_OK_STORE(fl_store_stats(s.get(), 0, &stats), s.get());
  EXPECT_EQ(stats.rows, n - n / 2);
  // Reinsert with other values into the freed slots.
  std::vector<float> w(v.begin(), v.begin() + (n / 2) * 3);
  for (float &x : w) x = -x;
  FL_ASSERT_OK_STORE(fl_store_upsert(s.get(), 0, evens.data(), evens.size(), w.data()), s.get());
  uint64_t missing = 0;
  auto out = Gather(s.get(), 0, ids, FL_MISSING_ZERO, &missing);
  EXPECT_EQ(missing, 0u);
  std::vector<float> got(n * 3);
  std::memcpy(got.data(), out.data(), out.size());
  for (uint64_t i = 0; i < n; i++)
    ASSERT_EQ(got[i * 3 + 1], i < n / 2 ? -v[i * 3 + 1] : v[i * 3 + 1]) << i;
}

// Every allocation of the store's arena an upsert makes (the hashed index's
// rebuild, the free stack, the chunk directory's growth, each 2 MiB chunk)
// fails in turn, on a fresh store each time: the upsert fails with
// FL_ERR_OUT_OF_MEMORY naming the table, no row changed or appeared, and
// the same upsert retried afterwards lands whole.
TEST(StoreTest, OutOfMemoryUpsertLeavesTheStoreAsItWas) {
  const uint32_t dim = 256;  // 1 KiB rows: 2,016 a chunk, so the batch needs 20 chunks
  const uint64_t old_n = 1000, new_n = 40000, overlap = 500;
  std::vector<uint64_t> old_ids(old_n), batch(new_n + overlap);
  std::vector<float> old_v(old_n * dim), batch_v(batch.size() * dim);
  for (uint64_t i = 0; i < old_n; i++) old_ids[i] = fl_mix64(i) | 1;
  for (uint64_t i = 0; i < batch.size(); i++)  // the last `overlap` ids are old ones
    batch[i] = i < new_n ? fl_mix64(old_n + i) | 1 : old_ids[i - new_n];
  for (size_t k = 0; k < old_v.size(); k++) old_v[k] = (float)k;
  for (size_t k = 0; k < batch_v.size(); k++) batch_v[k] = -(float)k - 1;
  std::vector<uint64_t> new_ids(batch.begin(), batch.begin() + new_n);
  auto rows_of = [&](const std::vector<float> &v) {
    std::vector<unsigned char> b(v.size() * 4);
    std::memcpy(b.data(), v.data(), b.size());
    return b;
  };
  std::vector<float> after_v(old_v);  // the old rows once the batch landed
  std::memcpy(after_v.data(), &batch_v[new_n * dim], overlap * dim * 4);  // old_ids[0, overlap)
  std::vector<float> new_v(batch_v.begin(), batch_v.begin() + new_n * dim);
  unsigned failed = 0;
  for (unsigned skip = 0;; skip++) {
    Store s = MakeStore({Desc("emb", 16, dim, FL_FP32, FL_IDS_HASHED)}, 2);
    FL_ASSERT_OK_STORE(fl_store_upsert(s.get(), 0, old_ids.data(), old_n, old_v.data()), s.get());
    fl_fault_arm(FL_FAULT_STORE_ALLOC, skip);
    fl_status st = fl_store_upsert(s.get(), 0, batch.data(), batch.size(), batch_v.data());
    bool fired = !fl_fault_armed(FL_FAULT_STORE_ALLOC);
    fl_fault_clear();
    if (!fired) {
      FL_ASSERT_OK_STORE(st, s.get());
      break;
    }
    failed++;
    ASSERT_EQ(st, FL_ERR_OUT_OF_MEMORY) << "pass " << skip;
    EXPECT_NE(std::string(fl_store_last_error(s.get())).find("table 0 'emb'"), std::string::npos)
        << fl_store_last_error(s.get());
    fl_store_table_stats stats;
    FL_ASSERT_OK_STORE(fl_store_stats(s.get(), 0, &stats), s.get());
    ASSERT_EQ(stats.rows, old_n) << "pass " << skip;
    ASSERT_EQ(Gather(s.get(), 0, old_ids, FL_MISSING_ERROR), rows_of(old_v)) << "pass " << skip;
    uint64_t missing = 0;
    Gather(s.get(), 0, new_ids, FL_MISSING_ZERO, &missing);
    ASSERT_EQ(missing, new_n) << "pass " << skip;
    // Whatever the failed call allocated stays usable.
    FL_ASSERT_OK_STORE(fl_store_upsert(s.get(), 0, batch.data(), batch.size(), batch_v.data()),
                       s.get());
    ASSERT_EQ(Gather(s.get(), 0, old_ids, FL_MISSING_ERROR), rows_of(after_v)) << "pass " << skip;
    ASSERT_EQ(Gather(s.get(), 0, new_ids, FL_MISSING_ERROR), rows_of(new_v)) << "pass " << skip;
  }
  // The index, the free stack, the directory and 20 chunks.
  EXPECT_GE(failed, 23u);
}

TEST(StoreTest, FillSyntheticFp16AndFp32) {
  std::vector<fl_table_desc> d = {Desc("a", 1000, 7, FL_FP16, FL_IDS_DENSE),
                                  Desc("b", 3000, 16, FL_FP16, FL_IDS_HASHED),
                                  Desc("c", 2000, 33, FL_FP32, FL_IDS_HASHED)};
  Store s = MakeStore(d, 2);
  for (uint32_t t = 0; t < 3; t++) FL_ASSERT_OK_STORE(fl_store_fill_synthetic(s.get(), t, 77), s.get());
  for (uint32_t t = 0; t < 3; t++) {
    std::vector<uint64_t> ids;
    for (uint64_t k = 0; k < d[t].corpus_size; k += 7)
      ids.push_back(d[t].id_kind == FL_IDS_DENSE ? k : fl_synthetic_id(t, k));
    uint64_t missing = 1;
    auto out = Gather(s.get(), t, ids, FL_MISSING_ERROR, &missing);
    EXPECT_EQ(missing, 0u);
    size_t rb = d[t].dim * ElemBytes(d[t]);
    for (size_t i = 0; i < ids.size(); i++)
      ASSERT_EQ(std::vector<unsigned char>(out.begin() + i * rb, out.begin() + (i + 1) * rb),
                SynthRow(d[t], 77, t, ids[i]))
          << "table " << t << " id " << ids[i];
    fl_store_table_stats stats;
    FL_ASSERT_OK_STORE(fl_store_stats(s.get(), t, &stats), s.get());
    EXPECT_EQ(stats.rows, d[t].corpus_size);
  }
  EXPECT_EQ(fl_store_fill_synthetic(s.get(), 3, 1), FL_ERR_INVALID_ARGUMENT);
}

// n queries alternating between table 0 (dense) and table 1 (hashed, asked
// 5,200 synthetic ids of which the store holds 5,000), query i of
// base + step * i ids; outputs prefilled with 0xAB.
struct QuerySet {
  std::vector<std::vector<uint64_t>> ids;
  std::vector<std::vector<unsigned char>> out;
  std::vector<fl_table_query> q;
};

void AlternatingQueries(const std::vector<fl_table_desc> &d, uint32_t n, uint64_t base,
                        uint64_t step, QuerySet *set) {
  set->ids.assign(n, {});
  set->out.assign(n, {});
  set->q.assign(n, {});
  for (uint32_t i = 0; i < n; i++) {
    uint32_t t = i % 2;
    for (uint64_t k = 0; k < base + step * i; k++)
      set->ids[i].push_back(t == 0 ? fl_mix64(k + i) % d[0].corpus_size
                                   : fl_synthetic_id(1, fl_mix64(k + i) % 5200));
    set->out[i].assign(set->ids[i].size() * d[t].dim * ElemBytes(d[t]), 0xAB);
    set->q[i] = {t, set->ids[i].data(), set->ids[i].size(), set->out[i].data()};
  }
}

// The store AlternatingQueries asks: table "a" dense fp32, table "b" hashed
// fp16 holding 5,000 ids, both filled with the synthetic rows of `seed`.
Store AlternatingStore(uint64_t a_corpus, uint32_t a_dim, uint32_t b_dim, uint64_t seed,
                       std::vector<fl_table_desc> *d) {
  *d = {Desc("a", a_corpus, a_dim, FL_FP32, FL_IDS_DENSE), Desc("b", 5000, b_dim, FL_FP16, FL_IDS_HASHED)};
  Store s = MakeStore(*d, 4);
  for (uint32_t t = 0; t < 2; t++)
    EXPECT_EQ(fl_store_fill_synthetic(s.get(), t, seed), FL_OK) << fl_store_last_error(s.get());
  return s;
}

TEST(StoreTest, ManyQueriesAcrossTables) {
  std::vector<fl_table_desc> d;
  Store s = AlternatingStore(5000, 8, 24, 5, &d);
  QuerySet set;
  AlternatingQueries(d, 40, 100, 37, &set);
  const auto &ids = set.ids;
  const auto &out = set.out;
  auto &q = set.q;
  std::vector<uint64_t> missing(40);
  FL_ASSERT_OK_STORE(fl_store_gather(s.get(), q.data(), 40, FL_MISSING_ZERO, missing.data()), s.get());
  for (uint32_t i = 0; i < 40; i++) {
    uint32_t t = i % 2;
    size_t rb = d[t].dim * ElemBytes(d[t]);
    uint64_t miss = 0;
    for (size_t r = 0; r < ids[i].size(); r++) {
      std::vector<unsigned char> row(out[i].begin() + r * rb, out[i].begin() + (r + 1) * rb);
      std::vector<unsigned char> want = SynthRow(d[t], 5, t, ids[i][r]);
      if (row != want) {
        ASSERT_EQ(row, std::vector<unsigned char>(rb, 0)) << "query " << i << " row " << r;
        miss++;
      }
    }
    EXPECT_EQ(missing[i], miss) << i;
  }
}

// A watched gather reports a growing prefix of rows, each report's rows
// already right when it comes, the last report all of them; under
// FL_MISSING_ERROR a missing id fails the call with no last report. The
// same whether the pool's model keeps the gather on the caller or hands it
// to every worker (fixed costs decide; the learned ones vary by machine).
struct WatchLog {
  const std::vector<fl_table_query> *q;
  std::vector<size_t> row_bytes;
  std::vector<std::vector<unsigned char>> want;  // per query, rows as fl_store_gather gives them
  std::vector<uint64_t> reports;
  uint64_t wrong = 0;
};

void CheckPrefix(void *ctx, uint64_t rows) {
  WatchLog *w = static_cast<WatchLog *>(ctx);
  uint64_t from = w->reports.empty() ? 0 : w->reports.back(), at = 0;
  w->reports.push_back(rows);
  for (size_t i = 0; i < w->q->size(); i++) {
    const fl_table_query &q = (*w->q)[i];
    for (size_t r = 0; r < q.n; r++, at++) {
      if (at < from || at >= rows) continue;
      size_t rb = w->row_bytes[i];
      if (std::memcmp(static_cast<unsigned char *>(q.out) + r * rb, &w->want[i][r * rb], rb) != 0)
        w->wrong++;
    }
  }
}

TEST(StoreTest, WatchedGatherReportsLandedRowsInOrder) {
  std::vector<fl_table_desc> d;
  Store s = AlternatingStore(1 << 16, 32, 8, 9, &d);
  QuerySet set;
  AlternatingQueries(d, 7, 900, 1531, &set);
  const auto &out = set.out;
  auto &q = set.q;
  WatchLog log;
  log.q = &q;
  uint64_t total = 0;
  for (uint32_t i = 0; i < 7; i++) {
    uint32_t t = i % 2;
    log.row_bytes.push_back(d[t].dim * ElemBytes(d[t]));
    log.want.push_back(Gather(s.get(), t, set.ids[i]));
    total += set.ids[i].size();
  }
  fl_gather_watch watch = {CheckPrefix, &log};
  const fl_pool_costs alone = {1, 1e12, 1e12, 0}, helpers = {1e6, 1, 1, 0};
  // Outputs for the CPU, then for a GPU (streaming stores: both tables'
  // rows, 128 and 16 bytes, are whole 16-byte units); on the caller, then
  // on all 4 threads.
  for (int run = 0; run < 4; run++) {
    const int for_device = run % 2;
    SCOPED_TRACE(testing::Message() << "for_device " << for_device << " helpers " << run / 2);
    fl_workers_fix_costs(fl_store_workers(s.get()), run < 2 ? &alone : &helpers);
    log.reports.clear();
    for (auto &o : set.out) std::fill(o.begin(), o.end(), 0xAB);
    FL_ASSERT_OK_STORE(
        fl_store_gather_watched(s.get(), q.data(), 7, FL_MISSING_ZERO, &watch, nullptr, for_device),
        s.get());
    ASSERT_FALSE(log.reports.empty());
    EXPECT_EQ(log.reports.back(), total);
    for (size_t i = 1; i < log.reports.size(); i++) EXPECT_GT(log.reports[i], log.reports[i - 1]);
    EXPECT_EQ(log.wrong, 0u);
    for (uint32_t i = 0; i < 7; i++) EXPECT_EQ(out[i], log.want[i]) << "query " << i;
    EXPECT_EQ(fl_workers_last_helpers(fl_store_workers(s.get())), run < 2 ? 0u : 3u);
  }

  // Missing hashed ids under FL_MISSING_ERROR (the table holds 5,000 of
  // the 5,200 ids asked): the call fails naming one, and the watcher never
  // hears of all the rows.
  log.reports.clear();
  fl_status st = fl_store_gather_watched(s.get(), q.data(), 7, FL_MISSING_ERROR, &watch, nullptr, 1);
  EXPECT_EQ(st, FL_ERR_NOT_FOUND);
  EXPECT_NE(std::string(fl_store_last_error(s.get())).find("table 1 'b': id"), std::string::npos)
      << fl_store_last_error(s.get());
  EXPECT_TRUE(log.reports.empty() || log.reports.back() < total);
}

// The references a watched gather hands out from its own lookups equal
// fl_store_refs's: dense rows' addresses, hashed slots', 0 for the hashed
// ids the store lacks.
TEST(StoreTest, GatherHandsOutTheReferencesItLookedUp) {
  std::vector<fl_table_desc> d;
  Store s = AlternatingStore(1 << 16, 32, 8, 9, &d);
  QuerySet set;
  AlternatingQueries(d, 7, 900, 1531, &set);
  std::vector<std::vector<uint64_t>> got(7), want(7);
  std::vector<uint64_t *> refs_out(7);
  size_t zeros = 0;
  for (uint32_t i = 0; i < 7; i++) {
    got[i].assign(set.ids[i].size(), ~0ull);
    want[i].assign(set.ids[i].size(), 1);
    refs_out[i] = got[i].data();
    FL_ASSERT_OK_STORE(fl_store_refs(s.get(), i % 2, set.ids[i].data(), set.ids[i].size(),
                                     want[i].data()),
                       s.get());
    for (uint64_t r : want[i]) zeros += r == 0;
  }
  FL_ASSERT_OK_STORE(
      fl_store_gather_watched(s.get(), set.q.data(), 7, FL_MISSING_ZERO, nullptr, refs_out.data(), 0),
      s.get());
  for (uint32_t i = 0; i < 7; i++) EXPECT_EQ(got[i], want[i]) << "query " << i;
  EXPECT_GT(zeros, 0u) << "no missing hashed id asked: the 0 case is untried";
}

// ---------------------------------------------------------------- concurrency

// A row written at version v of id: every element is 1 + 32 * digit + v % 32,
// where the digit of element j is digit j % 8 of (id, v) in base 32 (elements
// 0-3 carry the id, 4-7 the version, then again). So every element is an
// integer in 1..1024 (exact in fp16), a written row is never all zeros (the
// gather's answer for a missing id), a row names its id and version exactly,
// and any element of another version or id differs from the row its first 8
// elements name. Rows need dim >= 8; ids and versions stay below 2^20.
constexpr uint32_t kRowDigits = 8;
constexpr uint64_t kRowLimit = 1u << 20;  // ids and versions: 4 digits of 5 bits

float VersionElem(uint64_t id, uint64_t v, uint32_t j) {
  uint32_t k = j % kRowDigits;
  uint64_t digit = ((k < 4 ? id : v) >> (5 * (k % 4))) & 31;
  return (float)(1 + 32 * digit + v % 32);
}

void VersionRow(const fl_table_desc &d, uint64_t id, uint64_t v, unsigned char *row) {
  if (d.dim < kRowDigits || id >= kRowLimit || v >= kRowLimit) {
    std::fprintf(stderr, "VersionRow: dim %u, id %llu, version %llu outside the encoding\n",
                 d.dim, (unsigned long long)id, (unsigned long long)v);
    std::abort();
  }
  for (uint32_t j = 0; j < d.dim; j++) {
    float x = VersionElem(id, v, j);
    if (d.dtype == FL_FP16) {
      uint16_t h = fl_f32_to_f16(x);
      std::memcpy(row + j * 2, &h, 2);
    } else {
      std::memcpy(row + j * 4, &x, 4);
    }
  }
}

float Elem(const fl_table_desc &d, const unsigned char *row, uint32_t j) {
  if (d.dtype == FL_FP16) {
    uint16_t h;
    std::memcpy(&h, row + j * 2, 2);
    return fl_f16_to_f32(h);
  }
  float x;
  std::memcpy(&x, row + j * 4, 4);
  return x;
}

// What a gathered row is: all zeros (the id was absent), exactly
// VersionRow(d, *id, *v) for the id and version its first 8 elements name,
// or neither (torn, or garbage).
enum class RowIs { kAbsent, kVersion, kBad };

RowIs ReadVersionRow(const fl_table_desc &d, const unsigned char *row, uint64_t *id, uint64_t *v) {
  size_t rb = d.dim * ElemBytes(d);
  if (std::all_of(row, row + rb, [](unsigned char c) { return c == 0; })) return RowIs::kAbsent;
  *id = *v = 0;
  for (uint32_t k = 0; k < kRowDigits; k++) {
    float x = Elem(d, row, k);
    if (!(x >= 1 && x <= 1024) || x != (float)(int)x) return RowIs::kBad;
    uint64_t digit = (uint64_t)(x - 1) / 32;
    (k < 4 ? *id : *v) |= digit << (5 * (k % 4));
  }
  std::vector<unsigned char> want(rb);
  VersionRow(d, *id, *v, want.data());
  return std::memcmp(row, want.data(), rb) == 0 ? RowIs::kVersion : RowIs::kBad;
}

// Rows of a gather under concurrent writers that are not one whole version
// written for the id asked (torn rows, another id's row, garbage), or that
// are absent where the id is never absent (absent_ok false: dense tables,
// written before the readers start). Counts rows in *checked.
uint64_t BadRows(const fl_table_desc &d, const unsigned char *out, size_t n, const uint64_t *ids,
                 bool absent_ok, std::atomic<uint64_t> *checked) {
  size_t rb = d.dim * ElemBytes(d);
  uint64_t bad = 0;
  for (size_t i = 0; i < n; i++) {
    uint64_t id, v;
    switch (ReadVersionRow(d, out + i * rb, &id, &v)) {
      case RowIs::kAbsent: bad += !absent_ok; break;
      case RowIs::kVersion: bad += id != ids[i]; break;
      case RowIs::kBad: bad++; break;
    }
  }
  *checked += n;
  return bad;
}

TEST(StoreTest, ConcurrentReadersSeeNoTornVectors) {
  std::vector<fl_table_desc> d = {Desc("dense32", 64, 4096, FL_FP32, FL_IDS_DENSE),
                                  Desc("hash16", 64, 1031, FL_FP16, FL_IDS_HASHED),
                                  Desc("hash32", 8, 300, FL_FP32, FL_IDS_HASHED)};
  Store s = MakeStore(d, 2);
  // The dense rows hold version 0 before the readers start: none reads as absent.
  std::vector<unsigned char> first(d[0].dim * ElemBytes(d[0]));
  for (uint64_t id = 0; id < 64; id++) {
    VersionRow(d[0], id, 0, first.data());
    FL_ASSERT_OK_STORE(fl_store_upsert(s.get(), 0, &id, 1, first.data()), s.get());
  }
  std::atomic<bool> stop{false};
  std::atomic<uint64_t> torn{0}, checked{0};
  std::vector<std::thread> threads;
  // Writers: one per table, overwrite rows with new versions; hashed tables
  // also remove and re-add ids, and grow (ids beyond the first 64 come and go).
  for (uint32_t t = 0; t < 3; t++) {
    threads.emplace_back([&, t] {
      std::vector<unsigned char> row(d[t].dim * ElemBytes(d[t]));
      for (uint32_t v = 1; !stop.load(); v++) {
        for (uint64_t id = 0; id < 64; id++) {
          VersionRow(d[t], id, v, row.data());
          ASSERT_EQ(fl_store_upsert(s.get(), t, &id, 1, row.data()), FL_OK);
        }
        if (d[t].id_kind == FL_IDS_HASHED) {
          std::vector<uint64_t> rm;
          for (uint64_t id = v % 2; id < 64; id += 2) rm.push_back(id);
          ASSERT_EQ(fl_store_remove(s.get(), t, rm.data(), rm.size()), FL_OK);
          std::vector<uint64_t> grow(200);
          std::vector<unsigned char> rows(grow.size() * row.size());
          for (size_t i = 0; i < grow.size(); i++) {
            grow[i] = 1000 + (v % 8) * 200 + i;
            VersionRow(d[t], grow[i], v, rows.data() + i * row.size());
          }
          ASSERT_EQ(fl_store_upsert(s.get(), t, grow.data(), grow.size(), rows.data()), FL_OK);
          if (v % 8 == 7) {
            for (uint64_t g = 1000; g < 2600; g += 200) {
              std::vector<uint64_t> old(200);
              for (size_t i = 0; i < 200; i++) old[i] = g + i;
              ASSERT_EQ(fl_store_remove(s.get(), t, old.data(), old.size()), FL_OK);
            }
          }
        }
      }
    });
  }
  // Readers gather all tables at once and check each row is one version.
  for (int r = 0; r < 2; r++) {
    threads.emplace_back([&] {
      std::vector<uint64_t> ids;
      for (uint64_t id = 0; id < 64; id++) ids.push_back(id);
      for (uint64_t id = 1000; id < 2600; id += 13) ids.push_back(id);
      std::vector<std::vector<unsigned char>> out(3);
      std::vector<fl_table_query> q(3);
      for (uint32_t t = 0; t < 3; t++) {
        size_t n = d[t].id_kind == FL_IDS_DENSE ? 64 : ids.size();
        out[t].resize(n * d[t].dim * ElemBytes(d[t]));
        q[t] = {t, ids.data(), n, out[t].data()};
      }
      while (!stop.load()) {
        ASSERT_EQ(fl_store_gather(s.get(), q.data(), 3, FL_MISSING_ZERO, nullptr), FL_OK);
        for (uint32_t t = 0; t < 3; t++)
          torn += BadRows(d[t], out[t].data(), q[t].n, ids.data(),
                          d[t].id_kind == FL_IDS_HASHED, &checked);
      }
    });
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(1500));
  stop = true;
  for (auto &t : threads) t.join();
  EXPECT_EQ(torn.load(), 0u);
  EXPECT_GT(checked.load(), 1000u);
}

// Gathers while a writer makes the hashed index rebuild over and over (it
// grows, then rebuilds at the same size to sweep the tombstones of removed
// ids): the ids that stay keep their rows. Under --config=tsan this checks
// the publication of a rebuilt index to readers: it fails when
// fl_table_prefetch_index loads the index pointer relaxed and reads the new
// index's mask with no happens-before on the rebuild (a data race).
TEST(StoreTest, GathersDuringIndexRebuilds) {
  const uint32_t dim = 4;
  std::vector<fl_table_desc> d = {Desc("hashed", 16, dim, FL_FP32, FL_IDS_HASHED)};
  Store s = MakeStore(d, 2);
  std::vector<uint64_t> kept(128);
  std::vector<float> rows(kept.size() * dim);
  for (size_t i = 0; i < kept.size(); i++) {
    kept[i] = i * 7919 + 1;
    for (uint32_t j = 0; j < dim; j++) rows[i * dim + j] = (float)(kept[i] % 1000 + j);
  }
  ASSERT_EQ(fl_store_upsert(s.get(), 0, kept.data(), kept.size(), rows.data()), FL_OK);
  std::atomic<bool> stop{false};
  std::atomic<uint64_t> bad{0}, gathers{0};
  std::thread writer([&] {
    std::vector<uint64_t> temp(512);
    std::vector<float> temp_rows(temp.size() * dim, 0.5f);
    for (uint64_t round = 0; !stop.load(); round++) {
      for (size_t i = 0; i < temp.size(); i++) temp[i] = (1ull << 40) + round * temp.size() + i;
      ASSERT_EQ(fl_store_upsert(s.get(), 0, temp.data(), temp.size(), temp_rows.data()), FL_OK);
      ASSERT_EQ(fl_store_remove(s.get(), 0, temp.data(), temp.size()), FL_OK);
    }
  });
  std::vector<std::thread> readers;
  for (int r = 0; r < 2; r++) {
    readers.emplace_back([&] {
      std::vector<float> out(rows.size());
      // More ids than the gather's prefetch distance, so the index is
      // prefetched as well as probed.
      fl_table_query q{0, kept.data(), kept.size(), out.data()};
      while (!stop.load()) {
        ASSERT_EQ(fl_store_gather(s.get(), &q, 1, FL_MISSING_ZERO, nullptr), FL_OK);
        bad += out != rows;
        gathers++;
      }
    });
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  stop = true;
  writer.join();
  for (auto &t : readers) t.join();
  EXPECT_EQ(bad.load(), 0u);
  EXPECT_GT(gathers.load(), 0u);
}

// ---------------------------------------------------------------- references

// References of one table's ids (fl_store_refs must succeed).
std::vector<uint64_t> Refs(fl_store *s, uint32_t table, const std::vector<uint64_t> &ids) {
  std::vector<uint64_t> refs(ids.size(), 0xABu);
  fl_status st = fl_store_refs(s, table, ids.data(), ids.size(), refs.data());
  EXPECT_EQ(st, FL_OK) << fl_store_last_error(s);
  return refs;
}

// Gathers ids of one table through refs; returns the raw rows.
std::vector<unsigned char> GatherRefs(fl_store *s, uint32_t table, const std::vector<uint64_t> &ids,
                                      const std::vector<uint64_t> &refs,
                                      fl_missing policy = FL_MISSING_ZERO,
                                      uint64_t *missing = nullptr, fl_status *status = nullptr) {
  fl_table_desc d;
  EXPECT_EQ(fl_store_table(s, table, &d), FL_OK);
  std::vector<unsigned char> out(ids.size() * d.dim * ElemBytes(d) + 1, 0xAB);
  fl_ref_query q{table, ids.data(), refs.data(), ids.size(), out.data()};
  fl_status st = fl_store_gather_refs(s, &q, 1, policy, missing, 0);
  if (status) *status = st;
  else EXPECT_EQ(st, FL_OK) << fl_store_last_error(s);
  EXPECT_EQ(out.back(), 0xAB) << "wrote past the output";
  out.pop_back();
  return out;
}

// One row of fl_store_fill_synthetic-like content for (id, version).
std::vector<float> Vec(uint32_t dim, uint64_t id, float version) {
  std::vector<float> v(dim);
  for (uint32_t j = 0; j < dim; j++) v[j] = version * 100000 + (float)(id % 1000) * 10 + j;
  return v;
}

TEST(StoreRefsTest, GatherRefsMatchesGather) {
  std::vector<fl_table_desc> d = {Desc("d32", 500, 7, FL_FP32, FL_IDS_DENSE),
                                  Desc("d16", 300, 3, FL_FP16, FL_IDS_DENSE),
                                  Desc("h16", 2000, 5, FL_FP16, FL_IDS_HASHED),
                                  Desc("h16one", 100, 1, FL_FP16, FL_IDS_HASHED),
                                  Desc("h32", 3000, 33, FL_FP32, FL_IDS_HASHED),
                                  Desc("h32x4", 700, 4, FL_FP32, FL_IDS_HASHED)};
  Store s = MakeStore(d, 3);
  for (uint32_t t = 0; t < d.size(); t++) FL_ASSERT_OK_STORE(fl_store_fill_synthetic(s.get(), t, 5), s.get());
  std::vector<std::vector<uint64_t>> ids(d.size()), refs(d.size());
  std::vector<std::vector<unsigned char>> out(d.size());
  std::vector<fl_ref_query> q(d.size());
  for (uint32_t t = 0; t < d.size(); t++) {
    for (uint64_t k = 0; k < d[t].corpus_size; k += 3) {
      ids[t].push_back(d[t].id_kind == FL_IDS_DENSE ? k : fl_synthetic_id(t, k));
      if (d[t].id_kind == FL_IDS_HASHED && k % 30 == 0) ids[t].push_back(k * 7919 + 1);  // absent
    }
    refs[t] = Refs(s.get(), t, ids[t]);
    size_t present = 0;
    for (size_t i = 0; i < ids[t].size(); i++) {
      if (!refs[t][i]) continue;
      present++;
      ASSERT_EQ(refs[t][i] & 1u, 0u) << "table " << t << " id " << ids[t][i];
      if (i % 2) refs[t][i] |= 1;  // the cache's tag: ignored
    }
    EXPECT_EQ(present, (d[t].corpus_size + 2) / 3) << "table " << t;
    out[t].resize(ids[t].size() * d[t].dim * ElemBytes(d[t]));
    q[t] = {t, ids[t].data(), refs[t].data(), ids[t].size(), out[t].data()};
  }
  std::vector<fl_store_table_stats> before(d.size());
  for (uint32_t t = 0; t < d.size(); t++) FL_ASSERT_OK_STORE(fl_store_stats(s.get(), t, &before[t]), s.get());
  std::vector<uint64_t> missing(d.size(), 99);
  // As for a GPU: streaming stores where rows are 16-byte units (h32x4),
  // memcpy elsewhere; compared with fl_store_gather's plain copies.
  FL_ASSERT_OK_STORE(fl_store_gather_refs(s.get(), q.data(), (uint32_t)q.size(), FL_MISSING_ZERO,
                                          missing.data(), 1),
                     s.get());
  for (uint32_t t = 0; t < d.size(); t++) {
    EXPECT_EQ(out[t], Gather(s.get(), t, ids[t])) << "table " << t;
    size_t absent = ids[t].size() - (d[t].corpus_size + 2) / 3;
    EXPECT_EQ(missing[t], absent) << "table " << t;
    fl_store_table_stats after;
    FL_ASSERT_OK_STORE(fl_store_stats(s.get(), t, &after), s.get());
    EXPECT_EQ(after.lookups - before[t].lookups, 2 * ids[t].size()) << "table " << t;
    EXPECT_EQ(after.misses - before[t].misses, 2 * absent) << "table " << t;
  }
  // Errors are validated before anything is written, as fl_store_gather does.
  uint64_t bad_id = 500, ref = 0;
  EXPECT_EQ(fl_store_refs(s.get(), 0, &bad_id, 1, &ref), FL_ERR_OUT_OF_RANGE);
  EXPECT_EQ(fl_store_refs(s.get(), 9, &bad_id, 1, &ref), FL_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(fl_store_refs(s.get(), 0, &bad_id, 1, nullptr), FL_ERR_INVALID_ARGUMENT);
  fl_ref_query bq{0, &bad_id, &ref, 1, out[0].data()};
  EXPECT_EQ(fl_store_gather_refs(s.get(), &bq, 1, FL_MISSING_ZERO, nullptr, 0), FL_ERR_OUT_OF_RANGE);
  bq.refs = nullptr;
  bad_id = 1;
  EXPECT_EQ(fl_store_gather_refs(s.get(), &bq, 1, FL_MISSING_ZERO, nullptr, 0), FL_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(fl_store_last_error(s.get())).find("refs is NULL"), std::string::npos);
  EXPECT_EQ(fl_store_gather_refs(s.get(), nullptr, 1, FL_MISSING_ZERO, nullptr, 0), FL_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(fl_store_gather_refs(s.get(), nullptr, 0, FL_MISSING_ZERO, nullptr, 0), FL_OK);
}

TEST(StoreRefsTest, RemovedIdFallsBack) {
  Store s = MakeStore({Desc("h", 16, 4, FL_FP32, FL_IDS_HASHED)});
  std::vector<uint64_t> ids = {11, 22, 33};
  std::vector<float> v;
  for (uint64_t id : ids) for (float x : Vec(4, id, 1)) v.push_back(x);
  FL_ASSERT_OK_STORE(fl_store_upsert(s.get(), 0, ids.data(), ids.size(), v.data()), s.get());
  auto refs = Refs(s.get(), 0, ids);
  FL_ASSERT_OK_STORE(fl_store_remove(s.get(), 0, &ids[1], 1), s.get());
  uint64_t missing = 0;
  auto out = GatherRefs(s.get(), 0, ids, refs, FL_MISSING_ZERO, &missing);
  EXPECT_EQ(missing, 1u);
  EXPECT_EQ(out, Gather(s.get(), 0, ids));
  std::vector<unsigned char> zero(16, 0);
  EXPECT_EQ(std::vector<unsigned char>(out.begin() + 16, out.begin() + 32), zero);
  fl_status st;
  GatherRefs(s.get(), 0, ids, refs, FL_MISSING_ERROR, nullptr, &st);
  EXPECT_EQ(st, FL_ERR_NOT_FOUND);
  std::string msg = fl_store_last_error(s.get());
  EXPECT_NE(msg.find("fl_store_gather_refs"), std::string::npos) << msg;
  EXPECT_NE(msg.find("id 22"), std::string::npos) << msg;
  // Re-added: the old reference answers the new row, wherever it now lives.
  auto w = Vec(4, 22, 2);
  FL_ASSERT_OK_STORE(fl_store_upsert(s.get(), 0, &ids[1], 1, w.data()), s.get());
  out = GatherRefs(s.get(), 0, ids, refs, FL_MISSING_ERROR, &missing);
  EXPECT_EQ(missing, 0u);
  EXPECT_EQ(out, Gather(s.get(), 0, ids));
}

TEST(StoreRefsTest, ReusedSlotIsDetected) {
  Store s = MakeStore({Desc("h", 16, 6, FL_FP16, FL_IDS_HASHED)});
  std::vector<uint16_t> row(6);
  auto put = [&](uint64_t id, float version) {
    auto v = Vec(6, id, version);
    for (int j = 0; j < 6; j++) row[j] = fl_f32_to_f16(v[j] / 1000);
    ASSERT_EQ(fl_store_upsert(s.get(), 0, &id, 1, row.data()), FL_OK);
  };
  for (uint64_t id = 1; id <= 8; id++) put(id, 1);
  const uint64_t a = 5;
  uint64_t ref_a = Refs(s.get(), 0, {a})[0];
  ASSERT_NE(ref_a, 0u);
  FL_ASSERT_OK_STORE(fl_store_remove(s.get(), 0, &a, 1), s.get());
  // Insert other ids until one of them takes a's old slot.
  uint64_t b = 0;
  for (uint64_t id = 100; id < 10000 && !b; id++) {
    put(id, 3);
    if (Refs(s.get(), 0, {id})[0] == ref_a) b = id;
  }
  ASSERT_NE(b, 0u) << "the freed slot was never reused";
  std::vector<uint64_t> ids = {a, b}, refs = {ref_a | 1, ref_a};
  uint64_t missing = 0;
  auto out = GatherRefs(s.get(), 0, ids, refs, FL_MISSING_ZERO, &missing);
  EXPECT_EQ(missing, 1u);
  EXPECT_EQ(out, Gather(s.get(), 0, ids));  // a: zeros, not b's row; b: b's row
  fl_status st;
  GatherRefs(s.get(), 0, {a}, {ref_a}, FL_MISSING_ERROR, nullptr, &st);
  EXPECT_EQ(st, FL_ERR_NOT_FOUND);
  // a back in another slot: the stale reference answers a's new row.
  put(a, 4);
  EXPECT_NE(Refs(s.get(), 0, {a})[0], ref_a);
  out = GatherRefs(s.get(), 0, ids, refs, FL_MISSING_ERROR, &missing);
  EXPECT_EQ(missing, 0u);
  EXPECT_EQ(out, Gather(s.get(), 0, ids));
  EXPECT_NE(std::vector<unsigned char>(out.begin(), out.begin() + 12),
            std::vector<unsigned char>(out.begin() + 12, out.end()));
}

// The double reuse that an owner-only check cannot see: id x's slot goes to
// ~x, which is then removed too. A stale reference to x must not read ~x's
// old row as x's (fails when a remove marks the slot only by writing
// owner = ~id, without the live flag: ~~x is x again).
TEST(StoreRefsTest, DoubleReuseNeverReturnsAnotherIdsRow) {
  Store s = MakeStore({Desc("h", 16, 4, FL_FP32, FL_IDS_HASHED)});
  const uint64_t x = 0x1234, y = ~x;
  auto put = [&](uint64_t id, float version) {
    auto v = Vec(4, id, version);
    ASSERT_EQ(fl_store_upsert(s.get(), 0, &id, 1, v.data()), FL_OK);
  };
  put(x, 1);
  uint64_t ref_x = Refs(s.get(), 0, {x})[0];
  FL_ASSERT_OK_STORE(fl_store_remove(s.get(), 0, &x, 1), s.get());
  put(y, 2);
  ASSERT_EQ(Refs(s.get(), 0, {y})[0], ref_x) << "~x did not take x's slot: the test needs it";
  FL_ASSERT_OK_STORE(fl_store_remove(s.get(), 0, &y, 1), s.get());
  uint64_t missing = 0;
  auto out = GatherRefs(s.get(), 0, {x}, {ref_x | 1}, FL_MISSING_ZERO, &missing);
  EXPECT_EQ(missing, 1u) << "x is absent: its stale reference must not find ~x's old row";
  EXPECT_EQ(out, std::vector<unsigned char>(16, 0));
  fl_status st;
  GatherRefs(s.get(), 0, {x}, {ref_x}, FL_MISSING_ERROR, nullptr, &st);
  EXPECT_EQ(st, FL_ERR_NOT_FOUND);
  // x back, in the same slot (LIFO reuse) or another: its current row.
  put(x, 3);
  out = GatherRefs(s.get(), 0, {x}, {ref_x}, FL_MISSING_ERROR, &missing);
  EXPECT_EQ(missing, 0u);
  EXPECT_EQ(out, Gather(s.get(), 0, {x}));
}

TEST(StoreRefsTest, ConcurrentWritersNoTornRows) {
  std::vector<fl_table_desc> d = {Desc("dense32", 64, 2048, FL_FP32, FL_IDS_DENSE),
                                  Desc("hash16", 64, 1031, FL_FP16, FL_IDS_HASHED),
                                  Desc("hash32", 8, 300, FL_FP32, FL_IDS_HASHED)};
  Store s = MakeStore(d, 2);
  std::vector<uint64_t> ids;
  for (uint64_t id = 0; id < 64; id++) ids.push_back(id);
  for (uint64_t id = 1000; id < 2600; id += 13) ids.push_back(id);
  for (uint32_t t = 0; t < 3; t++) {  // every id present once, so refs start non-zero
    std::vector<unsigned char> row(d[t].dim * ElemBytes(d[t]));
    size_t n = d[t].id_kind == FL_IDS_DENSE ? 64 : ids.size();
    for (size_t i = 0; i < n; i++) {
      VersionRow(d[t], ids[i], 0, row.data());
      FL_ASSERT_OK_STORE(fl_store_upsert(s.get(), t, &ids[i], 1, row.data()), s.get());
    }
  }
  std::atomic<bool> stop{false};
  std::atomic<uint64_t> torn{0}, checked{0};
  std::vector<std::thread> threads;
  // Writers: overwrite rows with new versions; hashed tables also remove and
  // re-add ids, so slots are freed and reused under the readers' references.
  for (uint32_t t = 0; t < 3; t++) {
    threads.emplace_back([&, t] {
      std::vector<unsigned char> row(d[t].dim * ElemBytes(d[t]));
      for (uint32_t v = 1; !stop.load(); v++) {
        if (d[t].id_kind == FL_IDS_HASHED) {
          std::vector<uint64_t> rm;
          for (size_t i = v % 3; i < ids.size(); i += 3) rm.push_back(ids[i]);
          ASSERT_EQ(fl_store_remove(s.get(), t, rm.data(), rm.size()), FL_OK);
        }
        size_t n = d[t].id_kind == FL_IDS_DENSE ? 64 : ids.size();
        for (size_t i = (v % 2) * (n / 2); i < n; i++) {  // re-adds in another order
          VersionRow(d[t], ids[i], v, row.data());
          ASSERT_EQ(fl_store_upsert(s.get(), t, &ids[i], 1, row.data()), FL_OK);
        }
      }
    });
  }
  // Readers: take references now and then, gather through them (most of them
  // stale by then) and check each row is one version of the id asked for.
  for (int r = 0; r < 2; r++) {
    threads.emplace_back([&, r] {
      std::vector<std::vector<unsigned char>> out(3);
      std::vector<std::vector<uint64_t>> refs(3);
      std::vector<fl_ref_query> q(3);
      for (uint32_t t = 0; t < 3; t++) {
        size_t n = d[t].id_kind == FL_IDS_DENSE ? 64 : ids.size();
        out[t].resize(n * d[t].dim * ElemBytes(d[t]));
        refs[t].resize(n);
        q[t] = {t, ids.data(), refs[t].data(), n, out[t].data()};
      }
      for (uint64_t round = 0; !stop.load(); round++) {
        if (round % (4 + r) == 0) {
          for (uint32_t t = 0; t < 3; t++)
            ASSERT_EQ(fl_store_refs(s.get(), t, ids.data(), q[t].n, refs[t].data()), FL_OK);
        }
        // Every other round as for a GPU: streaming stores (dense32 and
        // hash32 rows are 16-byte units) must be as torn-free as memcpy.
        ASSERT_EQ(fl_store_gather_refs(s.get(), q.data(), 3, FL_MISSING_ZERO, nullptr, round % 2),
                  FL_OK);
        for (uint32_t t = 0; t < 3; t++)
          torn += BadRows(d[t], out[t].data(), q[t].n, ids.data(),
                          d[t].id_kind == FL_IDS_HASHED, &checked);
      }
    });
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(1500));
  stop = true;
  for (auto &t : threads) t.join();
  EXPECT_EQ(torn.load(), 0u);
  EXPECT_GT(checked.load(), 1000u);
}

// ---------------------------------------------------------------- change log

struct Changes {
  std::vector<std::pair<uint32_t, std::vector<uint64_t>>> calls;
  static void Record(void *ctx, uint32_t table, const uint64_t *ids, size_t n) {
    static_cast<Changes *>(ctx)->calls.push_back({table, std::vector<uint64_t>(ids, ids + n)});
  }
};

TEST(StoreTest, ChangeCallbacks) {
  Store s = MakeStore({Desc("d", 10, 2, FL_FP32, FL_IDS_DENSE), Desc("h", 10, 2, FL_FP32, FL_IDS_HASHED)});
  Changes c;
  int id = fl_store_subscribe(s.get(), Changes::Record, &c);
  ASSERT_GE(id, 0);
  EXPECT_NE(fl_store_workers(s.get()), nullptr);
  ASSERT_NE(fl_store_desc(s.get(), 1), nullptr);
  EXPECT_STREQ(fl_store_desc(s.get(), 1)->name, "h");
  EXPECT_EQ(fl_store_desc(s.get(), 2), nullptr);
  std::vector<uint64_t> ids = {3, 4};
  float v[4] = {1, 2, 3, 4};
  FL_ASSERT_OK_STORE(fl_store_upsert(s.get(), 1, ids.data(), 2, v), s.get());
  FL_ASSERT_OK_STORE(fl_store_upsert(s.get(), 0, ids.data(), 1, v), s.get());
  FL_ASSERT_OK_STORE(fl_store_remove(s.get(), 1, ids.data(), 1), s.get());
  std::vector<uint64_t> absent = {99};
  FL_ASSERT_OK_STORE(fl_store_remove(s.get(), 1, absent.data(), 1), s.get());  // changes nothing
  FL_ASSERT_OK_STORE(fl_store_fill_synthetic(s.get(), 0, 1), s.get());
  ASSERT_EQ(c.calls.size(), 4u);
  EXPECT_EQ(c.calls[0].first, 1u);
  EXPECT_EQ(c.calls[0].second, ids);
  EXPECT_EQ(c.calls[1].first, 0u);
  EXPECT_EQ(c.calls[2].second, std::vector<uint64_t>{3});
  EXPECT_TRUE(c.calls[3].second.empty());  // fill: the whole table
  fl_store_unsubscribe(s.get(), id);
  FL_ASSERT_OK_STORE(fl_store_upsert(s.get(), 1, ids.data(), 2, v), s.get());
  EXPECT_EQ(c.calls.size(), 4u);
}

// ---------------------------------------------------------------- FLST files

std::vector<fl_table_desc> MixedDescs() {
  return {Desc("C1", 300, 8, FL_FP32, FL_IDS_DENSE), Desc("C2", 500, 5, FL_FP16, FL_IDS_HASHED),
          Desc("C3", 200, 16, FL_FP32, FL_IDS_HASHED), Desc("empty", 10, 4, FL_FP32, FL_IDS_HASHED)};
}

std::vector<uint64_t> IdsOf(const fl_table_desc &d, uint32_t t) {
  std::vector<uint64_t> ids;
  for (uint64_t k = 0; k < d.corpus_size; k++)
    ids.push_back(d.id_kind == FL_IDS_DENSE ? k : fl_synthetic_id(t, k));
  return ids;
}

// MixedDescs with a few rows a table: FLST files of a few hundred bytes.
std::vector<fl_table_desc> SmallMixedDescs() {
  return {Desc("C1", 6, 3, FL_FP32, FL_IDS_DENSE), Desc("C2", 5, 5, FL_FP16, FL_IDS_HASHED),
          Desc("C3", 4, 16, FL_FP32, FL_IDS_HASHED), Desc("empty", 10, 4, FL_FP32, FL_IDS_HASHED)};
}

// A store of these tables, all but the last filled (every id of the corpus).
Store FilledMixed(const std::vector<fl_table_desc> &d = MixedDescs()) {
  Store s = MakeStore(d);
  for (uint32_t t = 0; t + 1 < d.size(); t++)
    EXPECT_EQ(fl_store_fill_synthetic(s.get(), t, 9), FL_OK);
  return s;
}

TEST(StoreFileTest, FlstRoundTrip) {
  Store a = FilledMixed();
  std::string p = TmpPath("round.flst");
  FL_ASSERT_OK_STORE(fl_store_save(a.get(), p.c_str()), a.get());
  fl_store *raw = nullptr;
  fl_status st = fl_store_load(p.c_str(), 2, &raw);
  ASSERT_EQ(st, FL_OK) << fl_store_last_error(nullptr);
  Store b(raw);
  auto d = MixedDescs();
  ASSERT_EQ(fl_store_num_tables(b.get()), 4u);
  for (uint32_t t = 0; t < 4; t++) {
    fl_table_desc got;
    FL_ASSERT_OK_STORE(fl_store_table(b.get(), t, &got), b.get());
    EXPECT_STREQ(got.name, d[t].name);
    EXPECT_EQ(got.dim, d[t].dim);
    EXPECT_EQ(got.dtype, d[t].dtype);
    EXPECT_EQ(got.id_kind, d[t].id_kind);
    EXPECT_EQ(got.corpus_size, d[t].corpus_size);
    fl_store_table_stats sa, sb;
    FL_ASSERT_OK_STORE(fl_store_stats(a.get(), t, &sa), a.get());
    FL_ASSERT_OK_STORE(fl_store_stats(b.get(), t, &sb), b.get());
    EXPECT_EQ(sa.rows, sb.rows);
    ExpectSameRows(a.get(), b.get(), t, IdsOf(d[t], t));
  }
}

// A model file loads into a store whose every arena allocation (the dense
// arrays, the hashed tables' indexes, directories, free stacks and chunks)
// fails in turn: the load fails with FL_ERR_OUT_OF_MEMORY, hands back no
// store, and says what it could not allocate. fl_store_fill_synthetic fails
// the same way into an empty hashed table and leaves it empty.
TEST(StoreFileTest, OutOfMemoryLoadAndFillFailCleanly) {
  auto d = MixedDescs();
  Store a = FilledMixed(d);
  std::string p = TmpPath("oom.flst");
  FL_ASSERT_OK_STORE(fl_store_save(a.get(), p.c_str()), a.get());
  unsigned failed = 0;
  for (unsigned skip = 0;; skip++) {
    fl_store *raw = nullptr;
    fl_fault_arm(FL_FAULT_STORE_ALLOC, skip);
    fl_status st = fl_store_load(p.c_str(), 2, &raw);
    bool fired = !fl_fault_armed(FL_FAULT_STORE_ALLOC);
    fl_fault_clear();
    Store b(raw);
    if (!fired) {
      ASSERT_EQ(st, FL_OK) << fl_store_last_error(nullptr);
      for (uint32_t t = 0; t < d.size(); t++) ExpectSameRows(a.get(), b.get(), t, IdsOf(d[t], t));
      break;
    }
    failed++;
    ASSERT_EQ(st, FL_ERR_OUT_OF_MEMORY) << "pass " << skip;
    EXPECT_EQ(raw, nullptr);
    EXPECT_NE(std::string(fl_store_last_error(nullptr)).find("no memory"), std::string::npos)
        << fl_store_last_error(nullptr);
  }
  EXPECT_GE(failed, (unsigned)d.size());
  fl_table_desc h = Desc("h", 5000, 8, FL_FP32, FL_IDS_HASHED);
  for (unsigned skip = 0;; skip++) {
    Store s = MakeStore({h});
    fl_fault_arm(FL_FAULT_STORE_ALLOC, skip);
    fl_status st = fl_store_fill_synthetic(s.get(), 0, 3);
    bool fired = !fl_fault_armed(FL_FAULT_STORE_ALLOC);
    fl_fault_clear();
    fl_store_table_stats stats;
    FL_ASSERT_OK_STORE(fl_store_stats(s.get(), 0, &stats), s.get());
    if (!fired) {
      FL_ASSERT_OK_STORE(st, s.get());
      EXPECT_EQ(stats.rows, h.corpus_size);
      break;
    }
    ASSERT_EQ(st, FL_ERR_OUT_OF_MEMORY) << "pass " << skip;
    EXPECT_NE(std::string(fl_store_last_error(s.get())).find("table 0 'h'"), std::string::npos)
        << fl_store_last_error(s.get());
    EXPECT_EQ(stats.rows, 0u) << "pass " << skip;
  }
}

// Loads p expecting FL_ERR_FORMAT with every piece of `want` in the message.
void ExpectLoadFails(const std::string &p, std::vector<std::string> want,
                     fl_status expected = FL_ERR_FORMAT) {
  fl_store *raw = nullptr;
  EXPECT_EQ(fl_store_load(p.c_str(), 1, &raw), expected);
  EXPECT_EQ(raw, nullptr);
  std::string msg = fl_store_last_error(nullptr);
  for (auto &w : want) EXPECT_NE(msg.find(w), std::string::npos) << "'" << w << "' not in: " << msg;
}

// Where a load of the first `len` bytes of FilledMixed(d)'s file must report
// the file's end, as "offset X: file ends inside WHAT" (docs/FORMATS.md: a
// short file is reported at the first incomplete id or row): the header at 0,
// the metadata at len, then the id or row that len cuts, by the layout.
std::string FlstCutAt(const std::vector<fl_table_desc> &d, size_t len) {
  if (len < 32) return "offset 0: file ends inside the header";
  size_t pos = 32;
  for (auto &t : d) pos += 36 + std::strlen(t.name);
  if (len < pos) return "offset " + std::to_string(len) + ": file ends inside the table metadata";
  for (size_t i = 0; i < d.size(); i++) {
    uint64_t rows = i + 1 < d.size() ? d[i].corpus_size : 0;  // the last table is empty
    std::pair<const char *, size_t> sections[2] = {
        {"id", d[i].id_kind == FL_IDS_HASHED ? 8 : 0}, {"row", d[i].dim * ElemBytes(d[i])}};
    for (auto [item, bytes] : sections) {
      if (bytes && len < pos + rows * bytes) {
        size_t k = (len - pos) / bytes;
        return "offset " + std::to_string(pos + k * bytes) + ": file ends inside table '" +
               d[i].name + "' " + item + " " + std::to_string(k) + " (";
      }
      pos += rows * bytes;
    }
  }
  return "(the file is complete)";
}

TEST(StoreFileTest, FlstTruncatedAndCorrupted) {
  const auto d = SmallMixedDescs();
  Store a = FilledMixed(d);
  std::string p = TmpPath("good.flst"), bad = TmpPath("bad.flst");
  FL_ASSERT_OK_STORE(fl_store_save(a.get(), p.c_str()), a.get());
  auto bytes = ReadFile(p);
  ASSERT_EQ(FlstCutAt(d, bytes.size()), "(the file is complete)") << "the layout is not the file's";
  // Every truncation: FL_ERR_FORMAT naming the file and where it ends, and no
  // store.
  for (size_t len = 0; len < bytes.size(); len++) {
    SCOPED_TRACE("length " + std::to_string(len));
    WriteFile(bad, bytes.data(), len);
    ExpectLoadFails(bad, {bad + ": " + FlstCutAt(d, len)});
  }
  // Trailing garbage.
  auto longer = bytes;
  longer.push_back(0);
  WriteFile(bad, longer);
  ExpectLoadFails(bad, {"after the last table"});
  // Corruptions: header, metadata, a row byte, an id byte.
  for (size_t at : {size_t(9), size_t(40), bytes.size() - 5}) {
    auto c = bytes;
    c[at] ^= 0x10;
    WriteFile(bad, c);
    ExpectLoadFails(bad, {bad, "checksum mismatch"});
  }
  auto c = bytes;
  c[bytes.size() - 5] ^= 1;
  WriteFile(bad, c);
  ExpectLoadFails(bad, {"checksum mismatch in table 'C3' rows", "offset "});
  std::string notflst = TmpPath("not.flst");
  WriteFile(notflst, std::string(64, 'x').data(), 64);
  ExpectLoadFails(notflst, {"bad magic"});
  ExpectLoadFails(TmpPath("does_not_exist.flst"), {"does_not_exist.flst", "cannot open"}, FL_ERR_IO);
}

// Stores a field into FLST bytes and re-stamps the header checksum, so that a
// load gets past it to the sizes.
template <typename T>
void PatchFlstHeader(std::vector<unsigned char> *f, size_t at, T v) {
  std::memcpy(f->data() + at, &v, sizeof v);
  uint32_t crc = fl_crc32c(0, f->data(), 28);
  std::memcpy(f->data() + 28, &crc, 4);
}

// One FLST table metadata record (docs/FORMATS.md), section checksums zero.
void AppendFlstRecord(std::vector<unsigned char> *m, const std::string &name, uint64_t corpus,
                      uint32_t dim, uint8_t dtype, uint8_t kind, uint64_t rows) {
  auto put = [m](const void *p, size_t n) {
    m->insert(m->end(), (const unsigned char *)p, (const unsigned char *)p + n);
  };
  uint32_t len = (uint32_t)name.size(), zero = 0;
  unsigned char kinds[4] = {dtype, kind, 0, 0};
  put(&len, 4);
  put(name.data(), len);
  put(&corpus, 8);
  put(&dim, 4);
  put(kinds, 4);
  put(&rows, 8);
  put(&zero, 4);
  put(&zero, 4);
}

// Sizes in a header or metadata are checked against the file before anything
// is allocated for them (fuzz/fuzz_model_flst.c explores the same): each of
// these fails, unchecked, by allocating gigabytes or a store sized from a
// wrapped 64-bit length.
TEST(StoreFileTest, FlstHugeCountsAreFormatErrorsNotAllocations) {
  Store a = FilledMixed();
  std::string p = TmpPath("counts.flst"), bad = TmpPath("huge.flst");
  FL_ASSERT_OK_STORE(fl_store_save(a.get(), p.c_str()), a.get());
  const auto bytes = ReadFile(p);
  // 4 GiB of metadata in a file whose length field is right.
  auto f = bytes;
  PatchFlstHeader<uint32_t>(&f, 12, 0xfffffff0u);
  WriteFile(bad, f);
  ExpectLoadFails(bad, {bad, "offset 12", "4294967280 bytes of table metadata do not fit"});
  // 2^32 - 1 tables in a few hundred bytes of metadata.
  f = bytes;
  PatchFlstHeader<uint32_t>(&f, 8, 0xffffffffu);
  WriteFile(bad, f);
  ExpectLoadFails(bad, {bad, "offset 8", "4294967295 tables do not fit"});
  // Dense tables whose sections add up to exactly 2^64 bytes: the length
  // wraps to the metadata's end, which matches the header.
  std::vector<unsigned char> meta;
  const uint64_t big = (1ull << 49) - 1;  // rows of 16 KiB: 2^63 - 2^14 bytes
  AppendFlstRecord(&meta, "a", big, 4096, FL_FP32, FL_IDS_DENSE, big);
  AppendFlstRecord(&meta, "b", big, 4096, FL_FP32, FL_IDS_DENSE, big);
  AppendFlstRecord(&meta, "c", 1u << 13, 1, FL_FP32, FL_IDS_DENSE, 1u << 13);  // 2^15 bytes
  f.assign(32, 0);
  std::memcpy(f.data(), "FLST", 4);
  uint32_t version = 1, tables = 3, meta_bytes = (uint32_t)meta.size();
  uint32_t meta_crc = fl_crc32c(0, meta.data(), meta.size());
  std::memcpy(&f[4], &version, 4);
  std::memcpy(&f[8], &tables, 4);
  std::memcpy(&f[12], &meta_bytes, 4);
  std::memcpy(&f[24], &meta_crc, 4);
  f.insert(f.end(), meta.begin(), meta.end());
  PatchFlstHeader<uint64_t>(&f, 16, f.size());
  WriteFile(bad, f);
  ExpectLoadFails(bad, {bad, "table 2 holds an impossible 8192 rows", "offset "});
}

// The writer of FlstSaveWhileWriting, in table C3: round r (from 1) adds the
// id kSaveNew + r, then writes version r of the ids kSaveOld + i (i < kSaveIds),
// each as VersionRow(id, r). Upsert k (from 0) is that sequence's k-th write.
constexpr uint64_t kSaveIds = 64, kSaveOld = 1000, kSaveNew = 100000;

void SaveWriterStep(uint64_t k, uint64_t *id, uint64_t *v) {
  uint64_t r = k / (kSaveIds + 1) + 1, i = k % (kSaveIds + 1);
  *id = i == 0 ? kSaveNew + r : kSaveOld + i - 1;
  *v = r;
}

// C3 as the writer leaves it after p upserts: ids kSaveNew + 1 ..
// kSaveNew + added are present, and version[i] of id kSaveOld + i (0: not
// written yet).
struct SaveWriterState {
  uint64_t added = 0;
  std::vector<uint64_t> version = std::vector<uint64_t>(kSaveIds, 0);
  bool operator==(const SaveWriterState &o) const {
    return added == o.added && version == o.version;
  }
};

SaveWriterState SaveWriterAfter(uint64_t p) {
  SaveWriterState s;
  uint64_t rounds = p / (kSaveIds + 1), rest = p % (kSaveIds + 1);
  s.added = rounds + (rest > 0);
  for (uint64_t i = 0; i < kSaveIds; i++) s.version[i] = rounds + (i + 1 < rest);
  return s;
}

// A save while a writer upserts: fl_store_save holds every table's write
// lock, so the file is one consistent snapshot (docs/FORMATS.md, docs/API.md
// "Model files"). Its C3 must be exactly the writer's state after some
// number p of upserts, every row one whole version written for its id, with
// p at least the upserts that had returned when the save began (they are
// complete) and at most those begun when it returned. The other tables, and
// C3's filled rows, are the store's.
TEST(StoreFileTest, FlstSaveWhileWriting) {
  Store a = FilledMixed();
  const auto d = MixedDescs();
  const uint32_t c3 = 2;
  for (uint64_t id : IdsOf(d[c3], c3)) ASSERT_GE(id, kRowLimit) << "a filled id among the writer's";
  std::atomic<bool> stop{false}, quit{false};
  std::atomic<uint64_t> started{0}, done{0};
  auto write = [&] {
    std::vector<unsigned char> row(d[c3].dim * ElemBytes(d[c3]));
    for (uint64_t k = 0; !stop.load(); k++) {
      uint64_t id, v;
      SaveWriterStep(k, &id, &v);
      VersionRow(d[c3], id, v, row.data());
      started = k + 1;
      ASSERT_EQ(fl_store_upsert(a.get(), c3, &id, 1, row.data()), FL_OK);
      done = k + 1;
    }
  };
  std::thread w([&] {
    write();
    quit = true;
  });
  while (done.load() < 3 * (kSaveIds + 1) && !quit.load()) std::this_thread::yield();
  std::string p = TmpPath("busy.flst");
  int overlapped = 0;  // saves during which the writer began an upsert
  for (int round = 0; round < 10 && !HasFatalFailure(); round++) {
    SCOPED_TRACE("save " + std::to_string(round));
    uint64_t before = done.load();
    FL_ASSERT_OK_STORE(fl_store_save(a.get(), p.c_str()), a.get());
    uint64_t begun = started.load();
    overlapped += begun > before;
    fl_store *raw = nullptr;
    ASSERT_EQ(fl_store_load(p.c_str(), 1, &raw), FL_OK) << fl_store_last_error(nullptr);
    Store b(raw);
    for (uint32_t t = 0; t < d.size(); t++) ExpectSameRows(a.get(), b.get(), t, IdsOf(d[t], t));
    // The writer's ids as the file holds them: each absent or one whole
    // version written for it; the added ids asked one round past any begun.
    SaveWriterState got;
    std::vector<uint64_t> ids;
    for (uint64_t i = 0; i < kSaveIds; i++) ids.push_back(kSaveOld + i);
    for (uint64_t r = 1; r <= begun / (kSaveIds + 1) + 2; r++) ids.push_back(kSaveNew + r);
    auto rows = Gather(b.get(), c3, ids);
    size_t rb = d[c3].dim * ElemBytes(d[c3]);
    std::vector<bool> added;
    for (size_t i = 0; i < ids.size(); i++) {
      uint64_t id = 0, v = 0;
      RowIs is = ReadVersionRow(d[c3], rows.data() + i * rb, &id, &v);
      bool whole = is == RowIs::kVersion && id == ids[i] &&
                   (i < kSaveIds || v == ids[i] - kSaveNew);
      ASSERT_TRUE(is == RowIs::kAbsent || whole)
          << "id " << ids[i] << " is not one version the writer wrote for it";
      if (i < kSaveIds) got.version[i] = is == RowIs::kAbsent ? 0 : v;
      else added.push_back(is != RowIs::kAbsent);
    }
    while (got.added < added.size() && added[got.added]) got.added++;
    for (size_t r = got.added; r < added.size(); r++)
      ASSERT_FALSE(added[r]) << "id " << kSaveNew + r + 1 << " without id "
                             << kSaveNew + got.added + 1;
    // Each upsert adds an id or raises one version by 1: p is their sum.
    uint64_t upserts = got.added;
    for (uint64_t v : got.version) upserts += v;
    EXPECT_EQ(got, SaveWriterAfter(upserts)) << "not the state after any number of upserts";
    EXPECT_GE(upserts, before) << "upserts complete before the save are missing";
    EXPECT_LE(upserts, begun) << "upserts begun after the save returned are in it";
    fl_store_table_stats st;
    FL_ASSERT_OK_STORE(fl_store_stats(b.get(), c3, &st), b.get());
    uint64_t written = 0;
    for (uint64_t v : got.version) written += v > 0;
    EXPECT_EQ(st.rows, d[c3].corpus_size + got.added + written) << "ids the writer never wrote";
  }
  stop = true;
  w.join();
  EXPECT_GT(overlapped, 0) << "the writer never ran during a save: nothing was tried";
}

// ---------------------------------------------------------------- NumPy

// Zero-copy mapping (store_internal.h): the regions a GPU reads in place,
// each on whole pages of its own, mapped once per store however many
// callers ask, unmapped by the last; a failed map undoes what it mapped.
struct MapLog {
  std::vector<std::pair<void *, size_t>> mapped, unmapped;
  int fail_at = -1;  // the map call that fails, counted from 0
} g_map;

int RecordMap(void *p, size_t bytes) {
  if ((int)g_map.mapped.size() == g_map.fail_at) return -1;
  g_map.mapped.emplace_back(p, bytes);
  return 0;
}

int RecordUnmap(void *p, size_t bytes) {
  g_map.unmapped.emplace_back(p, bytes);
  return 0;
}

TEST(StoreTest, ZeroCopyRegionsAreMappedOnceOnPagesOfTheirOwn) {
  std::vector<fl_table_desc> d = {{"a", 50, 8, FL_FP32, FL_IDS_DENSE},
                                  {"h", 100, 4, FL_FP32, FL_IDS_HASHED},
                                  {"b", 3000, 3, FL_FP16, FL_IDS_DENSE},
                                  {"c", 70000, 16, FL_FP32, FL_IDS_DENSE}};
  Store s = MakeStore(d);
  ASSERT_NE(s.get(), nullptr);
  EXPECT_EQ(fl_store_dense_rows(s.get(), 1), nullptr);
  EXPECT_EQ(fl_store_dense_rows(s.get(), 9), nullptr);
  g_map = MapLog{};
  ASSERT_EQ(fl_store_map_rows(s.get(), RecordMap, RecordUnmap), 0);
  ASSERT_EQ(g_map.mapped.size(), 4u);  // the stripes, then the 3 dense tables
  EXPECT_EQ(g_map.mapped[0].first, (const void *)fl_store_seq_stripes(s.get()));
  EXPECT_EQ(g_map.mapped[0].second, FL_SEQ_STRIPES * sizeof(uint32_t));
  const uint32_t dense[3] = {0, 2, 3};
  for (int i = 0; i < 3; i++) {
    const fl_table_desc &t = d[dense[i]];
    EXPECT_EQ(g_map.mapped[i + 1].first, fl_store_dense_rows(s.get(), dense[i]));
    EXPECT_GE(g_map.mapped[i + 1].second, t.corpus_size * t.dim * ElemBytes(t));
  }
  for (size_t i = 0; i < g_map.mapped.size(); i++) {
    auto [p, bytes] = g_map.mapped[i];
    EXPECT_EQ((uintptr_t)p % 4096, 0u) << "region " << i;
    EXPECT_EQ(bytes % 4096, 0u) << "region " << i;
    for (size_t j = 0; j < i; j++) {  // no page shared with another region
      auto [q, qb] = g_map.mapped[j];
      EXPECT_TRUE((char *)p + bytes <= (char *)q || (char *)q + qb <= (char *)p)
          << "regions " << j << " and " << i;
    }
  }
  // A second caller only counts; the last one unmaps every region.
  ASSERT_EQ(fl_store_map_rows(s.get(), RecordMap, RecordUnmap), 0);
  EXPECT_EQ(g_map.mapped.size(), 4u);
  fl_store_unmap_rows(s.get());
  EXPECT_TRUE(g_map.unmapped.empty());
  fl_store_unmap_rows(s.get());
  EXPECT_EQ(g_map.unmapped, g_map.mapped);
  // A map that fails on the third region: the two before are unmapped, and
  // nothing is counted, so the next call maps from scratch.
  g_map = MapLog{};
  g_map.fail_at = 2;
  EXPECT_EQ(fl_store_map_rows(s.get(), RecordMap, RecordUnmap), -1);
  ASSERT_EQ(g_map.mapped.size(), 2u);
  EXPECT_EQ(g_map.unmapped.size(), 2u);
  fl_store_unmap_rows(s.get());  // nothing mapped: no effect
  EXPECT_EQ(g_map.unmapped.size(), 2u);
  g_map = MapLog{};
  ASSERT_EQ(fl_store_map_rows(s.get(), RecordMap, RecordUnmap), 0);
  EXPECT_EQ(g_map.mapped.size(), 4u);
  fl_store_unmap_rows(s.get());
  EXPECT_EQ(g_map.unmapped.size(), 4u);
  // The store still answers after all of it.
  EXPECT_EQ(Gather(s.get(), 0, {49}).size(), 8 * sizeof(float));
}

// A hashed table's slot chunks are mapped with the rest, after the fixed
// regions; a write that adds chunks while the store is mapped maps them
// before it returns, and one whose chunk cannot be mapped fails and leaves
// the table as it was; the last unmap takes every chunk with it. Each
// chunk's slot headers are where the kernels look for them (fl_slot_head).
// The sample a cache times pointer reads on (fl_store_sample_rows): live
// rows only, each once, with the references fl_store_refs gives; every live
// row when asked for more than there are; none of a dense table. Fails when
// removed rows, repeats or wrong references come back.
TEST(StoreTest, SampledRowsAreLiveDistinctAndTheirOwn) {
  std::vector<fl_table_desc> d = {{"a", 50, 8, FL_FP32, FL_IDS_DENSE},
                                  {"h", 4096, 16, FL_FP32, FL_IDS_HASHED}};
  Store s = MakeStore(d);
  ASSERT_NE(s.get(), nullptr);
  std::vector<uint64_t> ids(1000);
  std::vector<float> rows(1000 * 16, 2.5f);
  for (uint64_t i = 0; i < ids.size(); i++) ids[i] = i * 0x9e3779b97f4a7c15ull + 1;
  FL_ASSERT_OK_STORE(fl_store_upsert(s.get(), 1, ids.data(), ids.size(), rows.data()), s.get());
  FL_ASSERT_OK_STORE(fl_store_remove(s.get(), 1, ids.data(), 200), s.get());  // the first 200
  const std::set<uint64_t> live(ids.begin() + 200, ids.end());
  std::vector<uint64_t> got(2000), refs(2000), want(2000);
  EXPECT_EQ(fl_store_sample_rows(s.get(), 0, 10, 1, got.data(), refs.data()), 0u);
  for (uint64_t n : {300ull, 2000ull}) {
    const uint64_t k = fl_store_sample_rows(s.get(), 1, n, 5, got.data(), refs.data());
    EXPECT_EQ(k, n < live.size() ? n : live.size()) << n;
    std::set<uint64_t> seen;
    for (uint64_t i = 0; i < k; i++) {
      EXPECT_EQ(live.count(got[i]), 1u) << "not a live id: " << got[i];
      EXPECT_TRUE(seen.insert(got[i]).second) << "taken twice: " << got[i];
    }
    FL_ASSERT_OK_STORE(fl_store_refs(s.get(), 1, got.data(), k, want.data()), s.get());
    for (uint64_t i = 0; i < k; i++) EXPECT_EQ(refs[i], want[i]) << "id " << got[i];
  }
}

TEST(StoreTest, ZeroCopyMapsHashedSlotsAsTheyCome) {
  std::vector<fl_table_desc> d = {{"a", 50, 8, FL_FP32, FL_IDS_DENSE},
                                  {"h", 1 << 20, 64, FL_FP32, FL_IDS_HASHED}};
  Store s = MakeStore(d);
  ASSERT_NE(s.get(), nullptr);
  auto write = [&](uint64_t from, uint64_t n) {
    std::vector<uint64_t> ids(n);
    std::vector<float> rows(n * 64, 1.5f);
    for (uint64_t i = 0; i < n; i++) ids[i] = (from + i) * 7919;
    return fl_store_upsert(s.get(), 1, ids.data(), n, rows.data());
  };
  const fl_slot_layout l = fl_store_slot_layout(s.get(), 1);
  ASSERT_EQ(l.vec_stride, 256u);
  EXPECT_EQ(fl_store_slot_layout(s.get(), 0).vec_stride, 0u);  // dense: read at their ids
  FL_ASSERT_OK_STORE(write(0, 3 * l.per_chunk), s.get());       // 3 chunks
  g_map = MapLog{};
  ASSERT_EQ(fl_store_map_rows(s.get(), RecordMap, RecordUnmap), 0);
  ASSERT_EQ(g_map.mapped.size(), 2u + 3u);  // stripes, dense rows, chunks
  for (size_t i = 2; i < 5; i++) {
    EXPECT_EQ((uintptr_t)g_map.mapped[i].first % FL_SLOT_CHUNK_BYTES, 0u);
    EXPECT_EQ(g_map.mapped[i].second, FL_SLOT_CHUNK_BYTES);
  }
  FL_ASSERT_OK_STORE(write(3 * l.per_chunk, l.per_chunk + 1), s.get());  // 2 more
  EXPECT_EQ(g_map.mapped.size(), 7u);
  // The references a cache's pointers take lie in mapped chunks, and their
  // headers own their ids.
  std::vector<uint64_t> ids = {0, 7919 * (3 * l.per_chunk), 7919 * (4 * l.per_chunk)}, refs(3);
  FL_ASSERT_OK_STORE(fl_store_refs(s.get(), 1, ids.data(), 3, refs.data()), s.get());
  for (size_t i = 0; i < 3; i++) {
    const uint64_t chunk = refs[i] & ~(FL_SLOT_CHUNK_BYTES - 1);
    bool mapped = false;
    for (auto [p, bytes] : g_map.mapped) mapped |= (uint64_t)(uintptr_t)p == chunk;
    EXPECT_TRUE(mapped) << "reference " << i;
    const uint64_t *head = (const uint64_t *)(uintptr_t)fl_slot_head(refs[i], l);
    EXPECT_EQ(head[0], ids[i]);
    EXPECT_EQ(head[1] & FL_SLOT_HEAD_LIVE, FL_SLOT_HEAD_LIVE);
  }
  // A chunk that cannot be mapped fails its write; the rows are not there.
  g_map.fail_at = (int)g_map.mapped.size();
  fl_store_table_stats before, after;
  FL_ASSERT_OK_STORE(fl_store_stats(s.get(), 1, &before), s.get());
  EXPECT_EQ(write(10 * l.per_chunk, l.per_chunk), FL_ERR_OUT_OF_MEMORY);
  EXPECT_STREQ(fl_store_last_error(s.get()),
               ("table 1 'h': no memory a GPU reading the store could register for " +
                std::to_string(l.per_chunk) + " more rows")
                   .c_str());
  FL_ASSERT_OK_STORE(fl_store_stats(s.get(), 1, &after), s.get());
  EXPECT_EQ(after.rows, before.rows);
  g_map.fail_at = -1;
  FL_ASSERT_OK_STORE(write(10 * l.per_chunk, l.per_chunk), s.get());  // mapped now
  EXPECT_EQ(g_map.mapped.size(), 8u);
  fl_store_unmap_rows(s.get());
  auto sorted = [](std::vector<std::pair<void *, size_t>> v) {
    std::sort(v.begin(), v.end());
    return v;
  };
  EXPECT_EQ(sorted(g_map.unmapped), sorted(g_map.mapped));
  // Unmapped: new chunks are not mapped.
  FL_ASSERT_OK_STORE(write(20 * l.per_chunk, l.per_chunk), s.get());
  EXPECT_EQ(g_map.mapped.size(), 8u);
}

TEST(StoreFileTest, NpyRoundTrip) {
  Store a = FilledMixed();
  auto d = MixedDescs();
  Store b = MakeStore(d);
  for (uint32_t t = 0; t < 4; t++) {
    std::string ids = TmpPath("ids" + std::to_string(t) + ".npy");
    std::string vec = TmpPath("vec" + std::to_string(t) + ".npy");
    FL_ASSERT_OK_STORE(fl_store_export_npy(a.get(), t, ids.c_str(), vec.c_str()), a.get());
    auto head = ReadFile(vec);
    ASSERT_GT(head.size(), 64u);
    EXPECT_EQ(std::string(head.begin() + 1, head.begin() + 6), "NUMPY");
    FL_ASSERT_OK_STORE(fl_store_import_npy(b.get(), t, ids.c_str(), vec.c_str()), b.get());
    ExpectSameRows(a.get(), b.get(), t, IdsOf(d[t], t));
    fl_store_table_stats sa, sb;
    FL_ASSERT_OK_STORE(fl_store_stats(a.get(), t, &sa), a.get());
    FL_ASSERT_OK_STORE(fl_store_stats(b.get(), t, &sb), b.get());
    EXPECT_EQ(sa.rows, sb.rows);
  }
}

// A .npy file with the given header dict (version 1 or 2) and data.
std::vector<unsigned char> Npy(const std::string &dict, const void *data, size_t n, int version = 1) {
  std::vector<unsigned char> f = {0x93, 'N', 'U', 'M', 'P', 'Y', (unsigned char)version, 0};
  size_t pre = version == 1 ? 10 : 12;
  std::string h = dict;
  while ((pre + h.size() + 1) % 64) h += ' ';
  h += '\n';
  uint32_t len = (uint32_t)h.size();
  for (size_t i = 0; i < pre - 8; i++) f.push_back((unsigned char)(len >> (8 * i)));
  f.insert(f.end(), h.begin(), h.end());
  const unsigned char *p = static_cast<const unsigned char *>(data);
  f.insert(f.end(), p, p + n);
  return f;
}

TEST(StoreFileTest, NpyVersion2AndUnsignedIds) {
  Store s = MakeStore({Desc("h", 10, 2, FL_FP16, FL_IDS_HASHED)});
  uint64_t ids[3] = {5, 6, ~0ull};
  uint16_t vec[6] = {0x3c00, 0x4000, 0x4200, 0x4400, 0x4500, 0x4600};
  std::string ip = TmpPath("v2ids.npy"), vp = TmpPath("v2vec.npy");
  WriteFile(ip, Npy("{\"descr\": \"<u8\", \"fortran_order\": False, \"shape\": (3,)}", ids, 24, 2));
  WriteFile(vp, Npy("{'shape': (3, 2), 'fortran_order': False, 'descr': '<f2', }", vec, 12, 2));
  FL_ASSERT_OK_STORE(fl_store_import_npy(s.get(), 0, ip.c_str(), vp.c_str()), s.get());
  auto out = Gather(s.get(), 0, {~0ull, 5});
  uint16_t got[4];
  std::memcpy(got, out.data(), 8);
  EXPECT_EQ(got[0], 0x4500);
  EXPECT_EQ(got[3], 0x4000);
}

TEST(StoreFileTest, NpyErrorsChangeNothing) {
  Store s = MakeStore({Desc("h", 10, 2, FL_FP32, FL_IDS_HASHED), Desc("d", 4, 2, FL_FP32, FL_IDS_DENSE)});
  uint64_t ids[3] = {1, 2, 7};
  float vec[9] = {1, 2, 3, 4, 5, 6, 7, 8, 9};  // the (3, 3) case reads all 9
  std::string ip = TmpPath("e_ids.npy"), vp = TmpPath("e_vec.npy");
  const std::string good_ids = "{'descr': '<i8', 'fortran_order': False, 'shape': (3,), }";
  const std::string good_vec = "{'descr': '<f4', 'fortran_order': False, 'shape': (3, 2), }";
  struct Case {
    std::string ids_dict, vec_dict;
    size_t vec_bytes;
    uint32_t table;
    std::vector<std::string> want;
    fl_status status;
  } cases[] = {
      {good_ids, "{'descr': '<f4', 'fortran_order': True, 'shape': (3, 2), }", 24, 0, {"fortran_order"}, FL_ERR_FORMAT},
      {good_ids, "{'descr': '<f2', 'fortran_order': False, 'shape': (3, 2), }", 12, 0, {"'<f2'", "'<f4'"}, FL_ERR_FORMAT},
      {good_ids, "{'descr': '<f4', 'fortran_order': False, 'shape': (3, 3), }", 36, 0, {"(n, 2)"}, FL_ERR_FORMAT},
      {good_ids, "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 2), }", 16, 0, {"2 vectors", "3 ids"}, FL_ERR_FORMAT},
      {good_ids, good_vec, 20, 0, {"file ends inside row 2", "offset 144"}, FL_ERR_FORMAT},
      {good_ids, "{'descr': '<f4' 'fortran_order': False}", 24, 0, {"header is not a NumPy v1/v2 header", "offset 10"}, FL_ERR_FORMAT},
      {"{'descr': '>i8', 'fortran_order': False, 'shape': (3,), }", good_vec, 24, 0, {"'>i8'"}, FL_ERR_FORMAT},
      {good_ids, good_vec, 24, 1, {"id 7", "out of range", "offset 144"}, FL_ERR_OUT_OF_RANGE},
  };
  for (auto &c : cases) {
    WriteFile(ip, Npy(c.ids_dict, ids, 24));
    WriteFile(vp, Npy(c.vec_dict, vec, c.vec_bytes));
    EXPECT_EQ(fl_store_import_npy(s.get(), c.table, ip.c_str(), vp.c_str()), c.status) << c.vec_dict;
    std::string msg = fl_store_last_error(s.get());
    for (auto &w : c.want) EXPECT_NE(msg.find(w), std::string::npos) << "'" << w << "' not in: " << msg;
    fl_store_table_stats st;
    FL_ASSERT_OK_STORE(fl_store_stats(s.get(), 0, &st), s.get());
    EXPECT_EQ(st.rows, 0u);
  }
  EXPECT_EQ(Gather(s.get(), 1, {1, 2, 3}), std::vector<unsigned char>(24, 0));
  WriteFile(ip, "garbage!", 8);
  EXPECT_EQ(fl_store_import_npy(s.get(), 0, ip.c_str(), vp.c_str()), FL_ERR_FORMAT);
  EXPECT_NE(std::string(fl_store_last_error(s.get())).find("bad magic"), std::string::npos);
}

// A NumPy header length is checked against the file before the header is
// read into memory (fuzz/fuzz_model_npy.c explores the same): fails when a
// v2 length field of 4 GiB is allocated first.
TEST(StoreFileTest, NpyHugeHeaderLengthIsAFormatError) {
  Store s = MakeStore({Desc("h", 10, 2, FL_FP32, FL_IDS_HASHED)});
  std::vector<unsigned char> f = {0x93, 'N', 'U', 'M', 'P', 'Y', 2, 0, 0xf0, 0xff, 0xff, 0xff};
  f.resize(64, ' ');
  std::string ip = TmpPath("huge_ids.npy"), vp = TmpPath("huge_vec.npy");
  WriteFile(ip, f);
  float vec[2] = {1, 2};
  WriteFile(vp, Npy("{'descr': '<f4', 'fortran_order': False, 'shape': (1, 2), }", vec, 8));
  EXPECT_EQ(fl_store_import_npy(s.get(), 0, ip.c_str(), vp.c_str()), FL_ERR_FORMAT);
  std::string msg = fl_store_last_error(s.get());
  EXPECT_NE(msg.find(ip + ": offset 8: header length 4294967280 runs past the end of the file "
                          "(64 bytes)"), std::string::npos) << msg;
  fl_store_table_stats st;
  FL_ASSERT_OK_STORE(fl_store_stats(s.get(), 0, &st), s.get());
  EXPECT_EQ(st.rows, 0u);
}

// ---------------------------------------------------------------- HugeCTR

TEST(StoreFileTest, HugectrRoundTripAndErrors) {
  Store a = FilledMixed();
  auto d = MixedDescs();
  std::string dir = TmpPath("hugectr_C3");
  FL_ASSERT_OK_STORE(fl_store_export_hugectr(a.get(), 2, dir.c_str()), a.get());
  EXPECT_EQ(ReadFile(dir + "/key").size(), 200u * 8);
  EXPECT_EQ(ReadFile(dir + "/emb_vector").size(), 200u * 16 * 4);
  Store b = MakeStore(d);
  FL_ASSERT_OK_STORE(fl_store_import_hugectr(b.get(), 2, dir.c_str()), b.get());
  ExpectSameRows(a.get(), b.get(), 2, IdsOf(d[2], 2));
  EXPECT_EQ(fl_store_export_hugectr(a.get(), 1, dir.c_str()), FL_ERR_UNSUPPORTED);  // fp16
  // dim 32 fp32 rows are 128 bytes: 64 ids, emb_vector cut inside row 32.
  Store c = MakeStore({Desc("h", 64, 32, FL_FP32, FL_IDS_HASHED)});
  std::string bad = TmpPath("hugectr_bad");
  ASSERT_EQ(::system(("mkdir -p " + bad).c_str()), 0);
  std::vector<uint64_t> keys(64);
  for (uint64_t i = 0; i < 64; i++) keys[i] = i * 11;
  std::vector<float> emb(64 * 32, 0.5f);
  WriteFile(bad + "/key", keys.data(), 64 * 8);
  WriteFile(bad + "/emb_vector", emb.data(), 4096 + 100);
  EXPECT_EQ(fl_store_import_hugectr(c.get(), 0, bad.c_str()), FL_ERR_FORMAT);
  std::string msg = fl_store_last_error(c.get());
  EXPECT_NE(msg.find("emb_vector: offset 4096: file ends inside row 32 (expected 8192 bytes)"),
            std::string::npos) << msg;
  WriteFile(bad + "/emb_vector", emb.data(), 64 * 128);
  WriteFile(bad + "/key", keys.data(), 64 * 8 - 3);
  EXPECT_EQ(fl_store_import_hugectr(c.get(), 0, bad.c_str()), FL_ERR_FORMAT);
  msg = fl_store_last_error(c.get());
  EXPECT_NE(msg.find("key: offset 504: file ends inside id 63"), std::string::npos) << msg;
  WriteFile(bad + "/key", keys.data(), 63 * 8);
  EXPECT_EQ(fl_store_import_hugectr(c.get(), 0, bad.c_str()), FL_ERR_FORMAT);
  msg = fl_store_last_error(c.get());
  EXPECT_NE(msg.find("bytes after row 62"), std::string::npos) << msg;
  fl_store_table_stats st;
  FL_ASSERT_OK_STORE(fl_store_stats(c.get(), 0, &st), c.get());
  EXPECT_EQ(st.rows, 0u);
  WriteFile(bad + "/key", keys.data(), 64 * 8);
  FL_ASSERT_OK_STORE(fl_store_import_hugectr(c.get(), 0, bad.c_str()), c.get());
  FL_ASSERT_OK_STORE(fl_store_stats(c.get(), 0, &st), c.get());
  EXPECT_EQ(st.rows, 64u);
  EXPECT_EQ(fl_store_import_hugectr(c.get(), 0, TmpPath("nope").c_str()), FL_ERR_IO);
}

}  // namespace
