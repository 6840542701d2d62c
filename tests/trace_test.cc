// trace_test.cc: the replay benchmark's trace readers, writer and generator
// (tools/trace/): the real Criteo sample, malformed inputs of every format,
// .fltr round trips, the Zipf sampler and the id bijection.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "common/error.h"
#include "common/crc32c.h"
#include "tools/trace/trace.h"
#include "tools/trace/zipf.h"

namespace {

struct TraceCloser { void operator()(fl_trace *t) const { fl_trace_close(t); } };
using Trace = std::unique_ptr<fl_trace, TraceCloser>;

// A batch that frees itself.
struct Batch {
  fl_trace_batch b{};
  ~Batch() { fl_trace_batch_free(&b); }
};

std::string TmpPath(const std::string &name) {
  const char *d = std::getenv("TEST_TMPDIR");
  return std::string(d ? d : "/tmp") + "/" + name;
}

std::string WriteFile(const std::string &name, const std::string &body) {
  std::string p = TmpPath(name);
  std::ofstream(p, std::ios::binary) << body;
  return p;
}

std::string ReadFile(const std::string &p) {
  std::ifstream f(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(f), {});
}

const char kCriteoSample[] = "tools/trace/testdata/criteo-head-1k.tsv";

// Reads a whole trace: every batch's per-table ids, in order.
using Ids = std::vector<std::vector<std::vector<uint64_t>>>;  // [batch][table][i]
fl_status ReadAll(fl_trace *t, Ids *out, std::vector<uint64_t> *samples = nullptr) {
  Batch b;
  int got = 0;
  out->clear();
  for (;;) {
    fl_status s = fl_trace_next(t, &b.b, &got);
    if (s != FL_OK || !got) return s;
    out->emplace_back();
    for (uint32_t i = 0; i < b.b.n_tables; i++)
      out->back().emplace_back(b.b.ids[i], b.b.ids[i] + b.b.n[i]);
    if (samples) samples->push_back(b.b.samples);
  }
}

Trace OpenOk(const std::string &path, fl_trace_format fmt, uint32_t batch) {
  fl_trace *t = nullptr;
  fl_status s = fl_trace_open(path.c_str(), fmt, batch, &t);
  EXPECT_EQ(s, FL_OK) << fl_trace_last_error(nullptr);
  return Trace(t);
}

// The failure message of reading `path` to its end (open or read).
std::string ReadError(const std::string &path, fl_trace_format fmt, fl_status want) {
  fl_trace *t = nullptr;
  fl_status s = fl_trace_open(path.c_str(), fmt, 4, &t);
  if (s != FL_OK) {
    EXPECT_EQ(s, want) << fl_trace_last_error(nullptr);
    return fl_trace_last_error(nullptr);
  }
  Trace tr(t);
  Ids ids;
  s = ReadAll(t, &ids);
  EXPECT_EQ(s, want);
  return fl_trace_last_error(t);
}

// ------------------------------------------------------------------ Criteo

TEST(Criteo, RealSampleCountsEveryLookup) {
  Trace t = OpenOk(kCriteoSample, FL_TRACE_AUTO, 256);
  ASSERT_EQ(fl_trace_num_tables(t.get()), 26u);
  EXPECT_STREQ(fl_trace_tables(t.get())[0].name, "C1");
  EXPECT_EQ(fl_trace_tables(t.get())[25].id_kind, FL_IDS_HASHED);
  Ids ids;
  std::vector<uint64_t> samples;
  ASSERT_EQ(ReadAll(t.get(), &ids, &samples), FL_OK) << fl_trace_last_error(t.get());
  ASSERT_EQ(ids.size(), 4u);  // 1000 rows in batches of 256
  EXPECT_EQ(samples, (std::vector<uint64_t>{256, 256, 256, 232}));
  // Counted with awk: non-empty values per column, and distinct (column, value).
  const size_t want[26] = {1000, 1000, 967, 967, 1000, 878, 1000, 1000, 1000,
                           1000, 1000, 967, 1000, 1000, 1000, 967, 1000, 1000,
                           502,  502,  967, 185, 1000, 967, 502,  502};
  size_t total = 0;
  std::set<std::pair<int, uint64_t>> distinct;
  for (int c = 0; c < 26; c++) {
    size_t n = 0;
    for (auto &batch : ids) {
      n += batch[c].size();
      for (uint64_t id : batch[c]) distinct.insert({c, id});
    }
    EXPECT_EQ(n, want[c]) << "column C" << c + 1;
    total += n;
  }
  EXPECT_EQ(total, 22873u);
  EXPECT_EQ(distinct.size(), 7639u);
  EXPECT_EQ(ids[0][0][0], 0x68fd1e64u);  // first row, C1
  EXPECT_EQ(ids[3][0].back(), 0x5a9ed9b0u);  // last row, C1
  // A rewind replays the same batches.
  Ids again;
  ASSERT_EQ(fl_trace_rewind(t.get()), FL_OK);
  ASSERT_EQ(ReadAll(t.get(), &again), FL_OK);
  EXPECT_EQ(again, ids);
}

// The whole 10k-row sample where it is available (not in the repository).
TEST(Criteo, FullSharedSampleMatchesItsReadme) {
  const char *p = "/work/shared/data/criteo-kaggle/train-head-10k.tsv";
  if (!std::ifstream(p)) GTEST_SKIP() << p << " not present";
  Trace t = OpenOk(p, FL_TRACE_CRITEO, 16384);
  Ids ids;
  ASSERT_EQ(ReadAll(t.get(), &ids), FL_OK) << fl_trace_last_error(t.get());
  size_t total = 0;
  std::set<std::pair<int, uint64_t>> distinct;
  for (auto &batch : ids)
    for (int c = 0; c < 26; c++) {
      total += batch[c].size();
      for (uint64_t id : batch[c]) distinct.insert({c, id});
    }
  EXPECT_EQ(total, 230360u);
  EXPECT_EQ(distinct.size(), 43579u);
}

std::string CsvRow(const std::string &c4) {
  std::string r;
  for (int c = 1; c <= 26; c++) r += (c > 1 ? "," : "") + (c == 4 ? c4 : (c == 2 ? "" : "a" + std::to_string(c)));
  return r + "\r\n";
}

TEST(Criteo, CsvWithHeaderNoLabelAndEmptyFields) {
  std::string hdr;
  for (int c = 1; c <= 26; c++) hdr += (c > 1 ? ",C" : "C") + std::to_string(c);
  std::string p = WriteFile("c.csv", hdr + "\n" + CsvRow("ff") + CsvRow("0"));
  Trace t = OpenOk(p, FL_TRACE_AUTO, 10);
  Ids ids;
  ASSERT_EQ(ReadAll(t.get(), &ids), FL_OK) << fl_trace_last_error(t.get());
  ASSERT_EQ(ids.size(), 1u);
  EXPECT_TRUE(ids[0][1].empty());  // C2 empty in every row
  EXPECT_EQ(ids[0][3], (std::vector<uint64_t>{0xff, 0}));
  EXPECT_EQ(ids[0][25], (std::vector<uint64_t>{0xa26, 0xa26}));
}

TEST(Criteo, NonHexValueNamesFileLineAndColumn) {
  std::string p = WriteFile("bad.csv", CsvRow("1") + CsvRow("2") + CsvRow("zz12"));
  std::string msg = ReadError(p, FL_TRACE_CRITEO, FL_ERR_FORMAT);
  EXPECT_NE(msg.find("bad.csv: line 3: column C4: 'zz12' is not hex"), std::string::npos) << msg;
  p = WriteFile("long.csv", CsvRow("123456789abcdef01"));
  EXPECT_NE(ReadError(p, FL_TRACE_CRITEO, FL_ERR_FORMAT).find("is not hex"), std::string::npos);
}

TEST(Criteo, RowWithMissingFieldsIsRejected) {
  std::string p = WriteFile("short.csv", CsvRow("1") + "1,2,3\n");
  std::string msg = ReadError(p, FL_TRACE_CRITEO, FL_ERR_FORMAT);
  EXPECT_NE(msg.find("line 2: 3 fields, expected 26"), std::string::npos) << msg;
}

// A file with no lookups is an error whatever its format, not an empty replay.
TEST(Trace, EmptyFileIsAClearError) {
  for (auto c : {std::make_pair(std::string(""), FL_TRACE_AUTO),
                 std::make_pair(std::string(""), FL_TRACE_CRITEO),
                 std::make_pair(std::string("# only a comment\n\n"), FL_TRACE_AUTO),
                 std::make_pair(std::string("\n\n"), FL_TRACE_TEXT)}) {
    std::string p = WriteFile("empty.txt", c.first);
    fl_trace *t = nullptr;
    EXPECT_EQ(fl_trace_open(p.c_str(), c.second, 4, &t), FL_ERR_FORMAT) << "'" << c.first << "'";
    EXPECT_EQ(t, nullptr);
    EXPECT_NE(std::string(fl_trace_last_error(nullptr)).find("no lookups"), std::string::npos)
        << fl_trace_last_error(nullptr);
  }
}

TEST(Criteo, MissingFileIsAnIoError) {
  ReadError(TmpPath("does-not-exist.tsv"), FL_TRACE_CRITEO, FL_ERR_IO);
}

// -------------------------------------------------------------------- text

TEST(Text, BatchesOfLookups) {
  std::string p = WriteFile("t.txt", "# comment\n0 5\n2 0x10\n\n1 7  # trailing\n0 5\n2 3\n");
  Trace t = OpenOk(p, FL_TRACE_AUTO, 2);
  ASSERT_EQ(fl_trace_num_tables(t.get()), 3u);
  EXPECT_EQ(fl_trace_num_batches(t.get()), 3u);
  Ids ids;
  ASSERT_EQ(ReadAll(t.get(), &ids), FL_OK) << fl_trace_last_error(t.get());
  ASSERT_EQ(ids.size(), 3u);
  EXPECT_EQ(ids[0][0], (std::vector<uint64_t>{5}));
  EXPECT_EQ(ids[0][2], (std::vector<uint64_t>{16}));
  EXPECT_EQ(ids[1][1], (std::vector<uint64_t>{7}));
  EXPECT_EQ(ids[2][2], (std::vector<uint64_t>{3}));
}

TEST(Text, MalformedLinesNameTheLine) {
  struct Case { const char *body; uint32_t tables; const char *want; } cases[] = {
      {"0 1\n0 1 2\n", 0, "line 2: expected 'table id', found 3 fields"},
      {"0 1\nx 1\n", 0, "line 2: table 'x' is not a number"},
      {"0 1\n\n3 1\n", 2, "line 3: table 3 out of range (2 tables)"},
      {"0 -4\n", 0, "line 1: id '-4' is not a 64-bit number"},
      {"0 18446744073709551616\n", 0, "is not a 64-bit number"},
  };
  for (const Case &c : cases) {
    std::string p = WriteFile("bad.txt", c.body);
    fl_trace *t = nullptr;
    EXPECT_EQ(fl_trace_open_text(p.c_str(), 4, c.tables, &t), FL_ERR_FORMAT) << c.body;
    std::string msg = fl_trace_last_error(nullptr);
    EXPECT_NE(msg.find(c.want), std::string::npos) << msg;
    EXPECT_NE(msg.find("bad.txt"), std::string::npos) << msg;
    fl_trace_close(t);
  }
}

// -------------------------------------------------------------------- fltr

fl_zipf_spec SmallSpec(const std::vector<uint64_t> &card) {
  fl_zipf_spec s{};
  s.n_tables = (uint32_t)card.size();
  s.cardinality = card.data();
  s.exponent = 1.05;
  s.seed = 7;
  s.batch_samples = 100;
  s.n_batches = 5;
  s.threads = 2;
  return s;
}

TEST(Fltr, RoundTripOfGeneratedTrace) {
  std::vector<uint64_t> card = {3, 1000, 10131227};
  fl_trace *g = nullptr;
  fl_zipf_spec spec = SmallSpec(card);
  ASSERT_EQ(fl_trace_open_zipf(&spec, &g), FL_OK) << fl_trace_last_error(nullptr);
  Trace gen(g);
  std::string p = TmpPath("rt.fltr");
  uint64_t n = 0;
  ASSERT_EQ(fl_trace_convert(g, p.c_str(), &n), FL_OK) << fl_trace_last_error(nullptr);
  EXPECT_EQ(n, 5u);
  Trace back = OpenOk(p, FL_TRACE_AUTO, 1);
  ASSERT_EQ(fl_trace_num_tables(back.get()), 3u);
  EXPECT_EQ(fl_trace_num_batches(back.get()), 5u);
  for (uint32_t i = 0; i < 3; i++) {
    EXPECT_EQ(fl_trace_tables(back.get())[i].cardinality, card[i]);
    EXPECT_EQ(fl_trace_tables(back.get())[i].id_kind, FL_IDS_DENSE);
    EXPECT_STREQ(fl_trace_tables(back.get())[i].name, fl_trace_tables(g)[i].name);
  }
  Ids a, b;
  std::vector<uint64_t> sa, sb;
  ASSERT_EQ(fl_trace_rewind(g), FL_OK);
  ASSERT_EQ(ReadAll(g, &a, &sa), FL_OK);
  ASSERT_EQ(ReadAll(back.get(), &b, &sb), FL_OK) << fl_trace_last_error(back.get());
  EXPECT_EQ(a, b);
  EXPECT_EQ(sa, sb);
  // A second pass after a rewind reads the same again.
  ASSERT_EQ(fl_trace_rewind(back.get()), FL_OK);
  ASSERT_EQ(ReadAll(back.get(), &b), FL_OK);
  EXPECT_EQ(a, b);
}

TEST(Fltr, RoundTripOfCriteoAndTextTraces) {
  for (std::string src : {std::string(kCriteoSample), WriteFile("rt.txt", "0 9\n1 0xffffffffffffffff\n")}) {
    Trace in = OpenOk(src, FL_TRACE_AUTO, 300);
    std::string p = TmpPath("rt2.fltr");
    ASSERT_EQ(fl_trace_convert(in.get(), p.c_str(), nullptr), FL_OK) << fl_trace_last_error(nullptr);
    Trace back = OpenOk(p, FL_TRACE_FLTR, 0);
    Ids a, b;
    ASSERT_EQ(fl_trace_rewind(in.get()), FL_OK);
    ASSERT_EQ(ReadAll(in.get(), &a), FL_OK);
    ASSERT_EQ(ReadAll(back.get(), &b), FL_OK) << fl_trace_last_error(back.get());
    EXPECT_EQ(a, b) << src;
    EXPECT_EQ(fl_trace_tables(back.get())[0].id_kind, FL_IDS_HASHED);
  }
}

// A small valid .fltr file: 2 tables, 3 batches.
std::string SmallFltr(const std::string &name) {
  std::vector<uint64_t> card = {50, 60};
  fl_zipf_spec spec = SmallSpec(card);
  spec.n_batches = 3;
  spec.batch_samples = 10;
  fl_trace *g = nullptr;
  EXPECT_EQ(fl_trace_open_zipf(&spec, &g), FL_OK);
  Trace gen(g);
  std::string p = TmpPath(name);
  EXPECT_EQ(fl_trace_convert(g, p.c_str(), nullptr), FL_OK) << fl_trace_last_error(nullptr);
  return p;
}

// Layout facts from docs/TRACES.md for this 2-table file.
constexpr size_t kHeader = 16 + 2 * 32 + 4;               // 84
constexpr size_t kBatch = 16 + 2 * 8 + 2 * 10 * 8 + 4;    // 196
constexpr size_t kEnd = 20;

TEST(Fltr, LayoutMatchesTheDocumentation) {
  std::string body = ReadFile(SmallFltr("layout.fltr"));
  ASSERT_EQ(body.size(), kHeader + 3 * kBatch + kEnd);
  EXPECT_EQ(body.substr(0, 8), std::string("FLTRACE\0", 8));
  EXPECT_EQ(body.substr(kHeader, 4), "BTCH");
  EXPECT_EQ(body.substr(kHeader + 3 * kBatch, 4), "END!");
}

TEST(Fltr, EveryTruncationIsCaughtWithItsOffset) {
  std::string body = ReadFile(SmallFltr("full.fltr"));
  const size_t end_record = body.size() - kEnd;
  ASSERT_EQ(end_record, kHeader + 3 * kBatch);
  for (size_t len = 0; len < body.size(); len++) {
    std::string p = WriteFile("cut.fltr", body.substr(0, len));
    std::string msg = ReadError(p, FL_TRACE_FLTR, FL_ERR_FORMAT);
    // The place named: the header's fixed part (16 bytes) at 0, then where
    // the header's tables ran out; after the header, the start of the
    // record the cut fell in: at a record's start, the missing end record;
    // inside its 4-byte tag, a batch (the reader cannot tell which record).
    std::string want;
    const size_t k = len < kHeader ? 0 : std::min<size_t>((len - kHeader) / kBatch, 3);
    const std::string at = "offset " + std::to_string(kHeader + k * kBatch) + ": ";
    if (len < 16)
      want = "offset 0: truncated header";
    else if (len < kHeader)
      want = "offset " + std::to_string(len) + ": truncated header";
    else if (len == kHeader + k * kBatch)
      want = at + "truncated: no end record after batch " + std::to_string(k);
    else if (k < 3 || len < end_record + 4)
      want = at + "truncated batch " + std::to_string(k);
    else
      want = at + "truncated end record";
    EXPECT_NE(msg.find(want), std::string::npos) << len << ": " << msg << " (want: " << want << ")";
  }
  std::string p = WriteFile("cut.fltr", body.substr(0, kHeader + kBatch + 30));
  EXPECT_NE(ReadError(p, FL_TRACE_FLTR, FL_ERR_FORMAT).find("offset 280: truncated batch 1"),
            std::string::npos);
}

TEST(Fltr, CorruptionIsCaught) {
  std::string body = ReadFile(SmallFltr("good.fltr"));
  struct Case { size_t at; const char *want; } cases[] = {
      {0, "offset 0: wrong magic"},
      {8, "offset 8: version"},
      {20, "header checksum mismatch"},
      {kHeader + kBatch + 40, "offset 280: batch 1: checksum mismatch"},
      {kHeader + 1, "batch 0: bad record tag"},
      {kHeader + 3 * kBatch + 9, "end record checksum mismatch"},
  };
  for (const Case &c : cases) {
    std::string bad = body;
    bad[c.at] ^= 0x5a;
    std::string msg = ReadError(WriteFile("corrupt.fltr", bad), FL_TRACE_FLTR, FL_ERR_FORMAT);
    EXPECT_NE(msg.find(c.want), std::string::npos) << c.at << ": " << msg;
  }
  std::string msg = ReadError(WriteFile("tail.fltr", body + "x"), FL_TRACE_FLTR, FL_ERR_FORMAT);
  EXPECT_NE(msg.find("1 bytes after the end record"), std::string::npos) << msg;
  msg = ReadError(WriteFile("magic.fltr", "NOTATRACE-at-all-really"), FL_TRACE_FLTR, FL_ERR_FORMAT);
  EXPECT_NE(msg.find("wrong magic"), std::string::npos) << msg;
}

TEST(Fltr, DenseIdOutOfRangeNamesTableAndOffset) {
  fl_trace_table tables[2] = {};
  snprintf(tables[0].name, sizeof tables[0].name, "a");
  snprintf(tables[1].name, sizeof tables[1].name, "b");
  tables[0].cardinality = 10;
  tables[1].cardinality = 10;
  std::string p = TmpPath("range.fltr");
  fl_fltr_writer *w = nullptr;
  ASSERT_EQ(fl_fltr_create(p.c_str(), tables, 2, &w), FL_OK);
  fl_trace_batch b{};
  ASSERT_EQ(fl_trace_batch_init(&b, 2), FL_OK);
  for (uint64_t id : {1, 2}) fl_trace_batch_push(&b, 0, id);
  for (uint64_t id : {3, 10}) fl_trace_batch_push(&b, 1, id);
  ASSERT_EQ(fl_fltr_write(w, &b), FL_OK);
  fl_trace_batch_free(&b);
  ASSERT_EQ(fl_fltr_close(w), FL_OK);
  std::string msg = ReadError(p, FL_TRACE_FLTR, FL_ERR_FORMAT);
  // header 84, batch head 32, table a's 16 bytes, then b's second id.
  EXPECT_NE(msg.find("offset 140: batch 0: table 1 (b): id 10 out of range (cardinality 10)"),
            std::string::npos)
      << msg;
}

// -------------------------------------------------------------- generator

TEST(Zipf, RankFrequenciesFollowTheLaw) {
  const uint64_t n = 1000;
  for (double e : {0.5, 1.0, 1.05, 2.0}) {
    fl_zipf z;
    fl_zipf_init(&z, n, e);
    double norm = 0;
    for (uint64_t k = 1; k <= n; k++) norm += std::pow((double)k, -e);
    std::vector<uint64_t> count(n);
    uint64_t rng = 42;
    const int draws = 400000;
    for (int i = 0; i < draws; i++) {
      uint64_t r = fl_zipf_sample(&z, &rng);
      ASSERT_LT(r, n);
      count[r]++;
    }
    for (uint64_t r : {0, 1, 9}) {
      double want = std::pow((double)(r + 1), -e) / norm;
      EXPECT_NEAR((double)count[r] / draws, want, 0.05 * want + 0.002) << "e=" << e << " r=" << r;
    }
  }
}

TEST(Zipf, HugeDomainsAndTinyOnes) {
  fl_zipf z;
  uint64_t rng = 1;
  fl_zipf_init(&z, 1, 1.05);
  EXPECT_EQ(fl_zipf_sample(&z, &rng), 0u);
  fl_zipf_init(&z, UINT64_C(1) << 62, 1.05);
  for (int i = 0; i < 1000; i++) EXPECT_LT(fl_zipf_sample(&z, &rng), UINT64_C(1) << 62);
}

TEST(Perm, IsABijection) {
  for (uint64_t n : {1, 2, 3, 5, 24, 583, 4096, 4097, 100000}) {
    fl_perm p;
    fl_perm_init(&p, n, 1234 + n);
    std::vector<bool> seen(n);
    size_t moved = 0;
    for (uint64_t x = 0; x < n; x++) {
      uint64_t y = fl_perm_apply(&p, x);
      ASSERT_LT(y, n);
      ASSERT_FALSE(seen[y]) << "n=" << n;
      seen[y] = true;
      moved += y != x;
    }
    if (n > 100) {
      EXPECT_GT(moved, n / 2);  // it actually scatters
    }
  }
}

TEST(Generator, DeterministicInRangeAndSwitches) {
  std::vector<uint64_t> card = {1460, 583, 10131227};
  fl_zipf_spec spec = SmallSpec(card);
  spec.batch_samples = 2000;
  spec.n_batches = 4;
  spec.switch_batch = 2;
  spec.switch_exponent = 1.2;
  fl_trace *a = nullptr, *b = nullptr;
  ASSERT_EQ(fl_trace_open_zipf(&spec, &a), FL_OK);
  spec.threads = 1;  // thread count never changes the ids
  ASSERT_EQ(fl_trace_open_zipf(&spec, &b), FL_OK);
  Trace ta(a), tb(b);
  Ids ia, ib;
  ASSERT_EQ(ReadAll(a, &ia), FL_OK);
  ASSERT_EQ(ReadAll(b, &ib), FL_OK);
  EXPECT_EQ(ia, ib);
  ASSERT_EQ(ia.size(), 4u);
  auto hottest = [](const std::vector<uint64_t> &ids) {
    std::map<uint64_t, int> c;
    for (uint64_t id : ids) c[id]++;
    return std::max_element(c.begin(), c.end(), [](auto &x, auto &y) { return x.second < y.second; })->first;
  };
  for (uint32_t t = 0; t < 3; t++) {
    for (auto &batch : ia)
      for (uint64_t id : batch[t]) ASSERT_LT(id, card[t]);
    EXPECT_EQ(hottest(ia[0][t]), hottest(ia[1][t])) << t;  // same distribution
    EXPECT_NE(hottest(ia[1][t]), hottest(ia[2][t])) << t;  // the hot set moved
  }
  EXPECT_NE(ia[0], ia[1]);  // batches differ
}

TEST(Crc32c, KnownVectorAndChaining) {
  EXPECT_EQ(fl_crc32c(0, "123456789", 9), 0xe3069283u);
  EXPECT_EQ(fl_crc32c(fl_crc32c(0, "1234", 4), "56789", 5), 0xe3069283u);
  std::string big(1000, 'x');
  EXPECT_EQ(fl_crc32c(fl_crc32c(0, big.data(), 333), big.data() + 333, 667),
            fl_crc32c(0, big.data(), 1000));
}

}  // namespace
