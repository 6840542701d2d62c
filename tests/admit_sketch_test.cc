// admit_sketch_test.cc: TinyLFU's frequency sketch and admission rule
// (cache/admit_sketch.h, cache/admit_rule.h), the FL_HD logic that the host
// backend's admission and a CUDA round's kernels share: estimates never
// below the true count, saturation, aging by halving, and who wins a place.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <map>
#include <random>
#include <vector>

extern "C" {
#include "cache/admit_rule.h"
}
#include "tests/admit_sketch_device.h"

namespace {

struct Sketch {
  std::vector<uint32_t> words;
  fl_sketch_view view;
  explicit Sketch(uint64_t keys) : words(fl_sketch_words(keys), 0) {
    view.word = words.data();
    view.mask = words.size() - 1;
  }
};

TEST(AdmitSketch, WordsArePowersOfTwoWithTwoPerKey) {
  EXPECT_EQ(fl_sketch_words(0), 64u);
  EXPECT_EQ(fl_sketch_words(32), 64u);
  EXPECT_EQ(fl_sketch_words(33), 128u);
  EXPECT_EQ(fl_sketch_words(1000000), 1u << 21);
}

TEST(AdmitSketch, EstimatesAreNeverBelowTheTrueCount) {
  // A crowded sketch (many keys per counter): collisions only raise.
  Sketch s(256);
  std::mt19937_64 rng(3);
  std::map<uint64_t, uint32_t> truth;
  for (int i = 0; i < 20000; i++) {
    uint64_t key = rng() % 3000;
    uint32_t times = 1 + (uint32_t)(rng() % 3);
    fl_sketch_add(&s.view, key, times);
    truth[key] += times;
  }
  uint64_t exact = 0;
  for (const auto &kv : truth) {
    uint32_t want = kv.second < FL_SKETCH_MAX ? kv.second : FL_SKETCH_MAX;
    uint32_t got = fl_sketch_estimate(&s.view, kv.first);
    EXPECT_GE(got, want) << kv.first;
    EXPECT_LE(got, FL_SKETCH_MAX);
    exact += got == want;
  }
  EXPECT_GT(exact, 0u);
}

TEST(AdmitSketch, SparseSketchCountsExactlyAndSaturates) {
  Sketch s(1 << 16);
  fl_sketch_add(&s.view, 42, 3);
  fl_sketch_add(&s.view, 42, 2);
  EXPECT_EQ(fl_sketch_estimate(&s.view, 42), 5u);
  EXPECT_EQ(fl_sketch_estimate(&s.view, 43), 0u);
  fl_sketch_add(&s.view, 7, 1000);
  EXPECT_EQ(fl_sketch_estimate(&s.view, 7), FL_SKETCH_MAX);
  fl_sketch_add(&s.view, 7, 1);  // a saturated counter stays, its neighbours untouched
  EXPECT_EQ(fl_sketch_estimate(&s.view, 7), FL_SKETCH_MAX);
  EXPECT_EQ(fl_sketch_estimate(&s.view, 42), 5u);
  EXPECT_EQ(fl_sketch_uses(1000), FL_SKETCH_MAX);
  EXPECT_EQ(fl_sketch_uses(4), 4u);
}

TEST(AdmitSketch, AdditionsCommute) {
  // The CUDA round adds a batch's rows in any order: the counters end the same.
  Sketch a(64), b(64);
  std::vector<std::pair<uint64_t, uint32_t>> adds;
  std::mt19937_64 rng(5);
  for (int i = 0; i < 2000; i++) adds.push_back({rng() % 500, 1 + (uint32_t)(rng() % 9)});
  for (const auto &x : adds) fl_sketch_add(&a.view, x.first, x.second);
  for (auto it = adds.rbegin(); it != adds.rend(); ++it) fl_sketch_add(&b.view, it->first, it->second);
  EXPECT_EQ(a.words, b.words);
}

TEST(AdmitSketch, AgingHalvesEveryCounter) {
  Sketch s(1 << 12);
  for (uint64_t key = 0; key < 200; key++) fl_sketch_add(&s.view, key, 1 + key % 15);
  std::vector<uint32_t> before(200);
  for (uint64_t key = 0; key < 200; key++) before[key] = fl_sketch_estimate(&s.view, key);
  uint64_t left = 0;
  EXPECT_EQ(fl_sketch_halvings(99, 100, &left), 0u);
  EXPECT_EQ(left, 99u);
  ASSERT_EQ(fl_sketch_halvings(100, 100, &left), 1u);
  EXPECT_EQ(left, 50u);
  for (auto &w : s.words) w = fl_sketch_age_word(w, 1);
  for (uint64_t key = 0; key < 200; key++)
    EXPECT_EQ(fl_sketch_estimate(&s.view, key), before[key] / 2) << key;
  // A batch far past the sample halves as often as it takes to fall under it.
  EXPECT_EQ(fl_sketch_halvings(1000, 100, &left), 4u);
  EXPECT_EQ(left, 62u);
  EXPECT_EQ(fl_sketch_age_word(0xffffffffu, 2), 0x33333333u);
  EXPECT_EQ(fl_sketch_age_word(0xffffffffu, 4), 0u);
  EXPECT_EQ(fl_sketch_halvings(5, 0, &left), 0u) << "no sample: never ages";
}

// The CUDA round's threads add a batch's rows at once (compare-and-swaps on
// shared words) and age the sketch: the counters end as the host's loop
// leaves them.
TEST(AdmitSketchCuda, DeviceCountsAndAgesAsTheHostDoes) {
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    (void)cudaGetLastError();
    GTEST_SKIP() << "no usable CUDA device";
  }
  Sketch host(512), dev(512);  // crowded: many rows share words
  std::vector<uint64_t> keys;
  std::vector<uint32_t> times;
  std::mt19937_64 rng(9);
  for (int i = 0; i < 100000; i++) keys.push_back(rng() % 20000), times.push_back(1 + rng() % 4);
  for (uint32_t halvings : {0u, 1u, 3u}) {
    std::fill(host.words.begin(), host.words.end(), 0u);
    std::fill(dev.words.begin(), dev.words.end(), 0u);
    for (size_t i = 0; i < keys.size(); i++) fl_sketch_add(&host.view, keys[i], times[i]);
    for (auto &w : host.words) w = fl_sketch_age_word(w, halvings);
    ASSERT_EQ(fl_test_sketch_on_device(keys.data(), times.data(), keys.size(), halvings,
                                       dev.words.data(), dev.words.size()),
              0);
    EXPECT_EQ(dev.words, host.words) << halvings << " halvings";
  }
}

TEST(AdmitRule, TinyLfuAdmitsWhatBeatsTheVictims) {
  fl_admit_rule r = {FL_ADMIT_TINYLFU, 0, 0x5eed, fl_admit_threshold(0.0)};
  // No eviction yet: the victim is 0, every missed row (estimate >= 1) wins.
  EXPECT_TRUE(fl_admit_wins(&r, 1, 9, 1, 1, 0));
  // Victims used once on average: a row must be used more.
  uint32_t victim = fl_admit_victim(50, 50, 0);
  EXPECT_EQ(victim, FL_VICTIM_ONE);
  EXPECT_FALSE(fl_admit_wins(&r, 1, 9, 1, 1, victim));
  EXPECT_TRUE(fl_admit_wins(&r, 1, 9, 1, 2, victim));
  // A row must beat the victims' mean by half a use: 1.5 is beaten by 3,
  // not by 2.
  victim = fl_admit_victim(3, 2, 0);
  EXPECT_EQ(victim, FL_VICTIM_ONE * 3 / 2);
  EXPECT_FALSE(fl_admit_wins(&r, 1, 9, 1, 2, victim));
  EXPECT_TRUE(fl_admit_wins(&r, 1, 9, 1, 3, victim));
  // An eviction that took nothing keeps the last victim.
  EXPECT_EQ(fl_admit_victim(0, 0, victim), victim);
  // Victims at the ceiling: a saturated row still wins, so admission
  // never stops for good.
  victim = fl_admit_victim(FL_SKETCH_MAX * 10ull, 10, 0);
  EXPECT_LT(victim, FL_SKETCH_MAX * FL_VICTIM_ONE);
  EXPECT_TRUE(fl_admit_wins(&r, 1, 9, 1, FL_SKETCH_MAX, victim));
  EXPECT_FALSE(fl_admit_wins(&r, 1, 9, 1, FL_SKETCH_MAX - 1, victim));
}

TEST(AdmitRule, CoinIgnoresTheSketch) {
  fl_admit_rule never = {FL_ADMIT_COIN, 0, 0x5eed, fl_admit_threshold(0.0)};
  fl_admit_rule always = {FL_ADMIT_COIN, 0, 0x5eed, fl_admit_threshold(1.0)};
  EXPECT_FALSE(fl_admit_wins(&never, 3, 9, 4, FL_SKETCH_MAX, 0));
  EXPECT_TRUE(fl_admit_wins(&always, 3, 9, 1, 0, 1000));
}

TEST(AdmitRule, LosersOfStoreMissesLeavePointersWhileThereIsRoom) {
  EXPECT_EQ(fl_admit_choose(1, 0, 77, 1), FL_ADMIT_CACHE);
  EXPECT_EQ(fl_admit_choose(0, 0, 77, 1), FL_ADMIT_POINTER);
  EXPECT_EQ(fl_admit_choose(0, 0, 77, 0), FL_ADMIT_NONE);
  EXPECT_EQ(fl_admit_choose(0, 1, 0, 1), FL_ADMIT_NONE) << "already a pointer";
  EXPECT_EQ(fl_admit_choose(0, 0, 0, 1), FL_ADMIT_NONE) << "absent from the store";
}

}  // namespace
