// encoding_test.cc: tests of encoding/ through the public C API: the Criteo
// comparison with the fixed-length baseline, properties over random table
// sets (prefix-free codes, injective lossless tables, exact reports,
// determinism, host == GPU), bad input, and exhaustive checks of small key
// widths through the internal builder (encoding/encoder.h).
#include <algorithm>
#include <cmath>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "encoding/encoder.h"
#include "tests/shims.h"
#include "tools/criteo_tables.h"

namespace {

const std::vector<uint64_t> kCriteo(fl_criteo_rows, fl_criteo_rows + FL_CRITEO_TABLES);

std::vector<fl_table_desc> Tables(const std::vector<uint64_t> &corpus, fl_id_kind kind) {
  std::vector<fl_table_desc> t;
  for (uint64_t c : corpus) t.push_back(fl_table_desc{nullptr, c, 16, FL_FP32, kind});
  return t;
}

fl::Encoding Make(const std::vector<fl_table_desc> &t, uint32_t key_bits,
                  fl_encoding_scheme scheme) {
  fl_encoding *e = nullptr;
  fl_status s = fl_encoding_create(t.data(), (uint32_t)t.size(), key_bits, scheme, &e);
  EXPECT_EQ(s, FL_OK) << fl::Describe(s, fl_encoding_last_error(nullptr));
  return fl::Encoding(e);
}

std::vector<fl_table_code_report> Reports(const fl_encoding *e, uint32_t n) {
  std::vector<fl_table_code_report> r(n);
  for (uint32_t i = 0; i < n; i++) EXPECT_EQ(fl_encoding_report(e, i, &r[i]), FL_OK);
  return r;
}

struct Totals {
  uint32_t lossless = 0;
  double colliding = 0;  // expected ids sharing a key, summed over tables
};

Totals Sum(const std::vector<fl_table_code_report> &r, const std::vector<fl_table_desc> &t) {
  Totals s;
  for (size_t i = 0; i < r.size(); i++) {
    s.lossless += r[i].lossless;
    s.colliding += r[i].collision_rate * (double)t[i].corpus_size;
  }
  return s;
}

uint64_t Empty(uint32_t key_bits) { return FL_KEY_EMPTY(key_bits); }

// The block of a table holds the empty key exactly when its prefix is all ones.
bool OwnsEmpty(const fl_table_code_report &r) {
  return r.prefix_len == 0 || r.prefix == (r.prefix_len >= 64 ? ~0ull : (1ull << r.prefix_len) - 1);
}

double ExpectedRate(uint64_t m, const fl_table_code_report &r) {
  long double n = std::ldexp(1.0L, (int)r.feature_bits) - (OwnsEmpty(r) ? 1 : 0);
  if (m <= 1) return 0;
  return (double)-std::expm1((long double)(m - 1) * std::log1p(-1.0L / n));
}

// Ids to try for one table: the bounds and some random ones.
std::vector<uint64_t> SampleIds(const fl_table_desc &t, std::mt19937_64 &rng, size_t n) {
  std::vector<uint64_t> ids;
  if (t.id_kind == FL_IDS_DENSE) {
    ids.push_back(0);
    ids.push_back(t.corpus_size - 1);
    for (size_t i = 0; i < n; i++) ids.push_back(rng() % t.corpus_size);
  } else {
    ids.push_back(0);
    ids.push_back(~0ull);
    for (size_t i = 0; i < n; i++) ids.push_back(rng());
  }
  return ids;
}

std::vector<fl_table_desc> RandomTables(std::mt19937_64 &rng) {
  uint32_t n = 1 + (uint32_t)(rng() % 48);
  std::vector<fl_table_desc> t(n);
  for (auto &d : t) {
    int bits = (int)(rng() % 41);  // corpus log-uniform in [1, 2^40]
    uint64_t c = (1ull << bits) + (bits ? rng() % (1ull << bits) : 0);
    d = fl_table_desc{nullptr, c, 8, FL_FP32, rng() % 4 == 0 ? FL_IDS_HASHED : FL_IDS_DENSE};
  }
  return t;
}

// Checks the report's structure: widths add up, prefixes are prefix-free,
// lossless exactly when ids fit, rates follow the birthday formula.
void CheckReports(const std::vector<fl_table_desc> &t, const fl_encoding *e, uint32_t key_bits,
                  fl_encoding_scheme scheme) {
  auto r = Reports(e, (uint32_t)t.size());
  bool all = true;
  for (size_t i = 0; i < t.size(); i++) {
    SCOPED_TRACE("table " + std::to_string(i));
    ASSERT_EQ(r[i].prefix_len + r[i].feature_bits, key_bits);
    if (r[i].prefix_len < 64) {
      ASSERT_LT(r[i].prefix, 1ull << r[i].prefix_len);
    }
    if (scheme == FL_ENCODING_SIZE_AWARE) {
      ASSERT_FALSE(OwnsEmpty(r[i]));
    }
    long double values = std::ldexp(1.0L, (int)r[i].feature_bits) - (OwnsEmpty(r[i]) ? 1 : 0);
    bool fits = t[i].id_kind == FL_IDS_DENSE && (long double)t[i].corpus_size <= values;
    ASSERT_EQ(r[i].lossless, fits ? 1 : 0);
    if (fits) {
      ASSERT_EQ(r[i].collision_rate, 0.0);
    } else {
      double want = ExpectedRate(t[i].corpus_size, r[i]);
      ASSERT_NEAR(r[i].collision_rate, want, 1e-9 * want + 1e-300);
    }
    all = all && fits;
    for (size_t j = 0; j < i; j++) {
      uint32_t l = std::min(r[i].prefix_len, r[j].prefix_len);
      uint64_t a = l ? r[i].prefix >> (r[i].prefix_len - l) : 0;
      uint64_t b = l ? r[j].prefix >> (r[j].prefix_len - l) : 0;
      ASSERT_TRUE(l > 0 && a != b) << "prefix of table " << j << " starts table " << i;
    }
  }
  ASSERT_EQ(fl_encoding_lossless(e), all ? 1 : 0);
}

// Encodes sample ids of every table; checks keys lie in their table's block,
// are never the empty key, are distinct for distinct ids of lossless tables
// and across tables, and decode back when the encoding is lossless.
void CheckKeys(const std::vector<fl_table_desc> &t, const fl_encoding *e, uint32_t key_bits,
               std::mt19937_64 &rng) {
  auto r = Reports(e, (uint32_t)t.size());
  std::set<uint64_t> seen_keys;
  for (uint32_t i = 0; i < t.size(); i++) {
    std::vector<uint64_t> ids = SampleIds(t[i], rng, 64);
    std::set<uint64_t> distinct(ids.begin(), ids.end());
    ids.assign(distinct.begin(), distinct.end());
    std::vector<uint64_t> keys(ids.size());
    fl_status s = fl_encoding_encode(e, i, ids.data(), ids.size(), keys.data(), 0);
    ASSERT_EQ(s, FL_OK) << fl::Describe(s, fl_encoding_last_error(e));
    std::set<uint64_t> table_keys;
    for (size_t k = 0; k < ids.size(); k++) {
      ASSERT_NE(keys[k], Empty(key_bits));
      if (key_bits < 64) {
        ASSERT_LT(keys[k], 1ull << key_bits);
      }
      uint64_t prefix = r[i].feature_bits >= 64 ? 0 : keys[k] >> r[i].feature_bits;
      ASSERT_EQ(prefix, r[i].prefix);
      table_keys.insert(keys[k]);
    }
    if (r[i].lossless) {
      ASSERT_EQ(table_keys.size(), ids.size()) << "table " << i;
    }
    for (uint64_t k : table_keys) ASSERT_TRUE(seen_keys.insert(k).second) << "table " << i;
    if (fl_encoding_lossless(e)) {
      std::vector<uint32_t> dt(keys.size());
      std::vector<uint64_t> did(keys.size());
      s = fl_encoding_decode(e, keys.data(), keys.size(), dt.data(), did.data());
      ASSERT_EQ(s, FL_OK) << fl::Describe(s, fl_encoding_last_error(e));
      for (size_t k = 0; k < keys.size(); k++) {
        ASSERT_EQ(dt[k], i);
        ASSERT_EQ(did[k], ids[k]);
      }
    }
  }
}

TEST(EncodingCriteo, SixtyFourBitKeysAreLossless) {
  for (auto scheme : {FL_ENCODING_SIZE_AWARE, FL_ENCODING_FIXED}) {
    auto t = Tables(kCriteo, FL_IDS_DENSE);
    auto e = Make(t, 64, scheme);
    ASSERT_TRUE(e);
    EXPECT_EQ(fl_encoding_lossless(e.get()), 1);
    EXPECT_EQ(Sum(Reports(e.get(), 26), t).lossless, 26u);
  }
}

TEST(EncodingCriteo, SizeAwareNeverWorseThanFixed) {
  for (uint32_t key_bits : {32u, 64u}) {
    for (auto kind : {FL_IDS_DENSE, FL_IDS_HASHED}) {
      SCOPED_TRACE(std::to_string(key_bits) + (kind == FL_IDS_DENSE ? " dense" : " hashed"));
      auto t = Tables(kCriteo, kind);
      auto sa = Make(t, key_bits, FL_ENCODING_SIZE_AWARE);
      auto fx = Make(t, key_bits, FL_ENCODING_FIXED);
      ASSERT_TRUE(sa && fx);
      Totals a = Sum(Reports(sa.get(), 26), t), b = Sum(Reports(fx.get(), 26), t);
      EXPECT_GE(a.lossless, b.lossless);
      EXPECT_LE(a.colliding, b.colliding);
      CheckReports(t, sa.get(), key_bits, FL_ENCODING_SIZE_AWARE);
      CheckReports(t, fx.get(), key_bits, FL_ENCODING_FIXED);
    }
  }
  // Hashed ids in 32-bit keys: the proportional split beats equal blocks.
  auto t = Tables(kCriteo, FL_IDS_HASHED);
  auto sa = Make(t, 32, FL_ENCODING_SIZE_AWARE);
  auto fx = Make(t, 32, FL_ENCODING_FIXED);
  EXPECT_LT(Sum(Reports(sa.get(), 26), t).colliding, Sum(Reports(fx.get(), 26), t).colliding / 2);
}

TEST(EncodingCriteo, LargerTablesGetShorterPrefixes) {
  auto t = Tables(kCriteo, FL_IDS_DENSE);
  auto e = Make(t, 32, FL_ENCODING_SIZE_AWARE);
  auto r = Reports(e.get(), 26);
  for (size_t i = 0; i < 26; i++)
    for (size_t j = 0; j < 26; j++)
      if (kCriteo[i] > kCriteo[j]) {
        EXPECT_LE(r[i].prefix_len, r[j].prefix_len);
      }
  for (size_t i = 0; i < 26; i++)  // dense and lossless: exactly ceil(log2(corpus)) bits
    EXPECT_EQ(r[i].feature_bits, (uint32_t)std::ceil(std::log2((double)kCriteo[i])));
}

TEST(EncodingProperties, RandomTableSets) {
  std::mt19937_64 rng(20240601);
  for (int round = 0; round < 300; round++) {
    auto t = RandomTables(rng);
    uint32_t key_bits = rng() % 2 ? 64 : 32;
    for (auto scheme : {FL_ENCODING_SIZE_AWARE, FL_ENCODING_FIXED}) {
      SCOPED_TRACE("round " + std::to_string(round) + " key_bits " + std::to_string(key_bits) +
                   " scheme " + std::to_string(scheme));
      auto e = Make(t, key_bits, scheme);
      ASSERT_TRUE(e);
      CheckReports(t, e.get(), key_bits, scheme);
      CheckKeys(t, e.get(), key_bits, rng);
    }
  }
}

TEST(EncodingProperties, Deterministic) {
  std::mt19937_64 rng(7);
  for (int round = 0; round < 50; round++) {
    auto t = RandomTables(rng);
    for (auto scheme : {FL_ENCODING_SIZE_AWARE, FL_ENCODING_FIXED}) {
      auto a = Make(t, 32, scheme), b = Make(t, 32, scheme);
      ASSERT_TRUE(a && b);
      for (uint32_t i = 0; i < t.size(); i++) {
        fl_table_code_report ra, rb;
        ASSERT_EQ(fl_encoding_report(a.get(), i, &ra), FL_OK);
        ASSERT_EQ(fl_encoding_report(b.get(), i, &rb), FL_OK);
        ASSERT_EQ(ra.prefix, rb.prefix);
        ASSERT_EQ(ra.prefix_len, rb.prefix_len);
        ASSERT_EQ(ra.feature_bits, rb.feature_bits);
        ASSERT_EQ(ra.lossless, rb.lossless);
        ASSERT_EQ(ra.collision_rate, rb.collision_rate);
        std::vector<uint64_t> ids = SampleIds(t[i], rng, 32), ka(ids.size()), kb(ids.size());
        ASSERT_EQ(fl_encoding_encode(a.get(), i, ids.data(), ids.size(), ka.data(), 0), FL_OK);
        ASSERT_EQ(fl_encoding_encode(b.get(), i, ids.data(), ids.size(), kb.data(), 0), FL_OK);
        ASSERT_EQ(ka, kb);
      }
    }
  }
}

// The report's collision rate is what hashing really does: measured over one
// draw of distinct ids into a small block.
TEST(EncodingProperties, ReportedCollisionRateMatchesMeasured) {
  // 24-bit keys, two hashed tables: the larger gets about 2^22 keys.
  const uint64_t m = 1u << 21;
  auto t = Tables({m, 1000}, FL_IDS_HASHED);
  fl_encoding *raw = nullptr;
  ASSERT_EQ(fl_encoding_build(t.data(), 2, 24, FL_ENCODING_SIZE_AWARE, &raw), FL_OK);
  fl::Encoding e(raw);
  fl_table_code_report r;
  ASSERT_EQ(fl_encoding_report(e.get(), 0, &r), FL_OK);
  std::vector<uint64_t> ids(m), keys(m);
  std::mt19937_64 rng(99);
  for (auto &id : ids) id = rng();  // distinct: a repeat among 2^21 draws has odds ~2^-23

  ASSERT_EQ(fl_encoding_encode(e.get(), 0, ids.data(), m, keys.data(), 0), FL_OK);
  std::sort(keys.begin(), keys.end());
  uint64_t colliding = 0;
  for (uint64_t i = 0; i < m; i++)
    colliding += (i > 0 && keys[i] == keys[i - 1]) || (i + 1 < m && keys[i] == keys[i + 1]);
  double measured = (double)colliding / (double)m;
  EXPECT_GT(r.collision_rate, 0.1);
  EXPECT_NEAR(measured, r.collision_rate, 0.01 * r.collision_rate);
}

TEST(EncodingFixed, EqualPrefixesAndTheEmptyKey) {
  // Four tables fill the 2-bit prefix space: the last one's block holds the
  // empty key, so it has one value fewer.
  auto t = Tables({1u << 30, 1u << 30, 1u << 30, (1u << 30) - 1}, FL_IDS_DENSE);
  auto e = Make(t, 32, FL_ENCODING_FIXED);
  auto r = Reports(e.get(), 4);
  for (uint32_t i = 0; i < 4; i++) {
    EXPECT_EQ(r[i].prefix_len, 2u);
    EXPECT_EQ(r[i].prefix, i);
    EXPECT_EQ(r[i].lossless, 1);
  }
  uint64_t id = (1u << 30) - 2, key = 0;
  ASSERT_EQ(fl_encoding_encode(e.get(), 3, &id, 1, &key, 0), FL_OK);
  EXPECT_EQ(key, Empty(32) - 1);
  // One id more and the last table folds into 2^30 - 1 values.
  t[3].corpus_size = 1u << 30;
  auto f = Make(t, 32, FL_ENCODING_FIXED);
  ASSERT_EQ(fl_encoding_report(f.get(), 3, &r[3]), FL_OK);
  EXPECT_EQ(r[3].lossless, 0);
  EXPECT_NEAR(r[3].collision_rate, ExpectedRate(1u << 30, r[3]), 1e-9);
  std::vector<uint64_t> ids(1 << 16), keys(ids.size());
  for (size_t i = 0; i < ids.size(); i++) ids[i] = (1u << 30) - 1 - i;
  ASSERT_EQ(fl_encoding_encode(f.get(), 3, ids.data(), ids.size(), keys.data(), 0), FL_OK);
  for (uint64_t k : keys) ASSERT_NE(k, Empty(32));
}

TEST(EncodingBadInput, CreateFailsWithAStatusThatSaysWhy) {
  auto t = Tables({10, 20}, FL_IDS_DENSE);
  fl_encoding *e = reinterpret_cast<fl_encoding *>(0x1);
  EXPECT_EQ(fl_encoding_create(t.data(), 0, 32, FL_ENCODING_SIZE_AWARE, &e),
            FL_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(e, nullptr);
  EXPECT_NE(std::string(fl_encoding_last_error(nullptr)).find("zero tables"), std::string::npos);
  EXPECT_EQ(fl_encoding_create(nullptr, 2, 32, FL_ENCODING_SIZE_AWARE, &e),
            FL_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(fl_encoding_create(t.data(), 2, 32, FL_ENCODING_SIZE_AWARE, nullptr),
            FL_ERR_INVALID_ARGUMENT);
  for (uint32_t bits : {0u, 1u, 16u, 48u, 65u, 128u}) {
    EXPECT_EQ(fl_encoding_create(t.data(), 2, bits, FL_ENCODING_SIZE_AWARE, &e),
              FL_ERR_INVALID_ARGUMENT);
    EXPECT_NE(std::string(fl_encoding_last_error(nullptr)).find("32 or 64"), std::string::npos);
  }
  EXPECT_EQ(fl_encoding_create(t.data(), 2, 32, (fl_encoding_scheme)7, &e),
            FL_ERR_INVALID_ARGUMENT);
  t[1].corpus_size = 0;
  t[1].name = "clicks";
  EXPECT_EQ(fl_encoding_create(t.data(), 2, 64, FL_ENCODING_FIXED, &e), FL_ERR_INVALID_ARGUMENT);
  std::string msg = fl_encoding_last_error(nullptr);
  EXPECT_NE(msg.find("table 1 'clicks'"), std::string::npos) << msg;
  EXPECT_NE(msg.find("corpus_size 0"), std::string::npos) << msg;
  t[1].corpus_size = 5;
  t[1].id_kind = (fl_id_kind)3;
  EXPECT_EQ(fl_encoding_create(t.data(), 2, 64, FL_ENCODING_FIXED, &e), FL_ERR_INVALID_ARGUMENT);
}

TEST(EncodingBadInput, EncodeAndDecodeFailWithoutWriting) {
  auto t = Tables({10, 1000}, FL_IDS_DENSE);
  t[1].name = "ads";
  auto e = Make(t, 32, FL_ENCODING_SIZE_AWARE);
  uint64_t ids[3] = {1, 1000, 2}, keys[3] = {7, 7, 7};
  EXPECT_EQ(fl_encoding_encode(e.get(), 1, ids, 3, keys, 0), FL_ERR_OUT_OF_RANGE);
  std::string msg = fl_encoding_last_error(e.get());
  EXPECT_NE(msg.find("table 1 'ads'"), std::string::npos) << msg;
  EXPECT_NE(msg.find("id 1000"), std::string::npos) << msg;
  EXPECT_EQ(keys[0], 7u);  // nothing written
  EXPECT_EQ(fl_encoding_encode(e.get(), 2, ids, 1, keys, 0), FL_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(fl_encoding_encode(nullptr, 0, ids, 1, keys, 0), FL_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(fl_encoding_encode(e.get(), 0, nullptr, 1, keys, 0), FL_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(fl_encoding_encode(e.get(), 0, ids, 1, nullptr, 0), FL_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(fl_encoding_encode(e.get(), 0, nullptr, 0, nullptr, 0), FL_OK);  // empty batch
  fl_table_code_report r;
  EXPECT_EQ(fl_encoding_report(e.get(), 2, &r), FL_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(fl_encoding_report(e.get(), 0, nullptr), FL_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(fl_encoding_report(nullptr, 0, &r), FL_ERR_INVALID_ARGUMENT);

  uint32_t dt[1];
  uint64_t did[1], bad = Empty(32);
  EXPECT_EQ(fl_encoding_decode(e.get(), &bad, 1, dt, did), FL_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(fl_encoding_decode(e.get(), nullptr, 1, dt, did), FL_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(fl_encoding_decode(e.get(), &bad, 1, nullptr, did), FL_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(fl_encoding_decode(e.get(), &bad, 1, dt, nullptr), FL_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(fl_encoding_decode(nullptr, &bad, 1, dt, did), FL_ERR_INVALID_ARGUMENT);

  auto h = Make(Tables({10, 1000}, FL_IDS_HASHED), 32, FL_ENCODING_SIZE_AWARE);
  uint64_t key = 0;
  ASSERT_EQ(fl_encoding_encode(h.get(), 0, ids, 1, &key, 0), FL_OK);
  EXPECT_EQ(fl_encoding_lossless(h.get()), 0);
  EXPECT_EQ(fl_encoding_decode(h.get(), &key, 1, dt, did), FL_ERR_UNSUPPORTED);
  fl_encoding_destroy(nullptr);
}

TEST(EncodingBadInput, GpuEncodeWithoutDeviceSaysSo) {
  if (fl_cuda_device_count() > 0) GTEST_SKIP() << "a CUDA device is present";
  auto e = Make(Tables({10}, FL_IDS_DENSE), 32, FL_ENCODING_SIZE_AWARE);
  uint64_t id = 1, key = 0;
  EXPECT_EQ(fl_encoding_encode(e.get(), 0, &id, 1, &key, 1), FL_ERR_NO_DEVICE);
}

// ------------------------------------------- small key widths, exhaustively

TEST(EncodingSmallWidths, TooManyTablesForTheKeyWidth) {
  for (uint32_t bits = 1; bits <= 6; bits++) {
    uint32_t n = 1u << bits;  // one more than 2^bits - 1
    std::vector<fl_table_desc> t = Tables(std::vector<uint64_t>(n, 1), FL_IDS_DENSE);
    for (auto scheme : {FL_ENCODING_SIZE_AWARE, FL_ENCODING_FIXED}) {
      fl_encoding *e = nullptr;
      EXPECT_EQ(fl_encoding_build(t.data(), n, bits, scheme, &e), FL_ERR_INVALID_ARGUMENT);
      EXPECT_NE(std::string(fl_encoding_last_error(nullptr)).find("do not fit"),
                std::string::npos);
      ASSERT_EQ(fl_encoding_build(t.data(), n - 1, bits, scheme, &e), FL_OK);
      fl_encoding_destroy(e);
    }
  }
}

// Every key of the space belongs to at most one table and the empty key to
// none (size-aware) or to the owner of the all-ones prefix (fixed); every id
// of a dense table is encoded, and lossless tables are injective and decode.
TEST(EncodingSmallWidths, EveryKeyAndEveryId) {
  std::mt19937_64 rng(5);
  for (uint32_t bits = 1; bits <= 10; bits++) {
    for (int round = 0; round < 60; round++) {
      uint32_t max_n = std::min<uint32_t>((1u << bits) - 1, 6);
      uint32_t n = 1 + (uint32_t)(rng() % max_n);
      std::vector<fl_table_desc> t(n);
      for (auto &d : t)
        d = fl_table_desc{nullptr, 1 + rng() % (2ull << bits), 4, FL_FP32,
                          rng() % 3 == 0 ? FL_IDS_HASHED : FL_IDS_DENSE};
      for (auto scheme : {FL_ENCODING_SIZE_AWARE, FL_ENCODING_FIXED}) {
        SCOPED_TRACE("bits " + std::to_string(bits) + " round " + std::to_string(round));
        fl_encoding *raw = nullptr;
        ASSERT_EQ(fl_encoding_build(t.data(), n, bits, scheme, &raw), FL_OK)
            << fl_encoding_last_error(nullptr);
        fl::Encoding e(raw);
        CheckReports(t, e.get(), bits, scheme);
        const fl_code *codes = fl_encoding_codes(e.get());
        for (uint64_t key = 0; key < (1ull << bits); key++) {
          int holders = 0;
          for (uint32_t i = 0; i < n; i++) holders += fl_code_holds(&codes[i], key);
          ASSERT_LE(holders, 1) << "key " << key;
          if (key == Empty(bits) && scheme == FL_ENCODING_SIZE_AWARE) {
            ASSERT_EQ(holders, 0);
          }
        }
        std::vector<uint64_t> all_keys;
        for (uint32_t i = 0; i < n; i++) {
          std::vector<uint64_t> ids;
          for (uint64_t id = 0; id < std::min<uint64_t>(t[i].corpus_size, 4096); id++)
            ids.push_back(t[i].id_kind == FL_IDS_DENSE ? id : rng());
          std::vector<uint64_t> keys(ids.size());
          ASSERT_EQ(fl_encoding_encode(e.get(), i, ids.data(), ids.size(), keys.data(), 0), FL_OK);
          fl_table_code_report r;
          ASSERT_EQ(fl_encoding_report(e.get(), i, &r), FL_OK);
          std::set<uint64_t> distinct(keys.begin(), keys.end());
          if (r.lossless) {
            ASSERT_EQ(distinct.size(), keys.size());
          }
          for (uint64_t k : keys) {
            ASSERT_NE(k, Empty(bits));
            ASSERT_TRUE(fl_code_holds(&codes[i], k));
          }
          all_keys.insert(all_keys.end(), distinct.begin(), distinct.end());
          if (t[i].id_kind == FL_IDS_DENSE) {
            uint64_t out_of_range = t[i].corpus_size, key;
            ASSERT_EQ(fl_encoding_encode(e.get(), i, &out_of_range, 1, &key, 0),
                      FL_ERR_OUT_OF_RANGE);
          }
          if (fl_encoding_lossless(e.get())) {
            std::vector<uint32_t> dt(keys.size());
            std::vector<uint64_t> did(keys.size());
            ASSERT_EQ(fl_encoding_decode(e.get(), keys.data(), keys.size(), dt.data(), did.data()),
                      FL_OK);
            for (size_t k = 0; k < keys.size(); k++) {
              ASSERT_EQ(dt[k], i);
              ASSERT_EQ(did[k], ids[k]);
            }
          }
        }
        std::set<uint64_t> distinct_all(all_keys.begin(), all_keys.end());
        ASSERT_EQ(distinct_all.size(), all_keys.size());  // tables never share a key
      }
    }
  }
}

// ------------------------------------------------------------- GPU == host

TEST(EncodingGpu, SameKeysAsHost) {
  FL_REQUIRE_GPU();
  std::mt19937_64 rng(11);
  for (int round = 0; round < 40; round++) {
    auto t = RandomTables(rng);
    uint32_t key_bits = round % 2 ? 64 : 32;
    auto e = Make(t, key_bits, round % 3 ? FL_ENCODING_SIZE_AWARE : FL_ENCODING_FIXED);
    ASSERT_TRUE(e);
    for (uint32_t i = 0; i < t.size(); i++) {
      std::vector<uint64_t> ids = SampleIds(t[i], rng, 1 + rng() % 5000);
      std::vector<uint64_t> host(ids.size()), gpu(ids.size(), 0);
      ASSERT_EQ(fl_encoding_encode(e.get(), i, ids.data(), ids.size(), host.data(), 0), FL_OK);
      fl_status s = fl_encoding_encode(e.get(), i, ids.data(), ids.size(), gpu.data(), 1);
      ASSERT_EQ(s, FL_OK) << fl::Describe(s, fl_encoding_last_error(e.get()));
      ASSERT_EQ(host, gpu) << "round " << round << " table " << i;
    }
  }
  // A large batch (many blocks, grid-stride) and an out-of-range id.
  auto t = Tables({1ull << 40}, FL_IDS_DENSE);
  auto e = Make(t, 32, FL_ENCODING_SIZE_AWARE);
  std::vector<uint64_t> ids(1 << 24), host(ids.size()), gpu(ids.size());
  for (auto &id : ids) id = rng() % (1ull << 40);
  ASSERT_EQ(fl_encoding_encode(e.get(), 0, ids.data(), ids.size(), host.data(), 0), FL_OK);
  ASSERT_EQ(fl_encoding_encode(e.get(), 0, ids.data(), ids.size(), gpu.data(), 1), FL_OK);
  ASSERT_EQ(host, gpu);
  ids[12345] = 1ull << 40;
  ids[999999] = ~0ull;
  std::fill(gpu.begin(), gpu.end(), 0);
  ASSERT_EQ(fl_encoding_encode(e.get(), 0, ids.data(), ids.size(), gpu.data(), 1),
            FL_ERR_OUT_OF_RANGE);
  std::string msg = fl_encoding_last_error(e.get());
  EXPECT_NE(msg.find("id 1099511627776 (index 12345)"), std::string::npos) << msg;
  EXPECT_EQ(gpu[0], 0u);  // nothing written
}

}  // namespace
