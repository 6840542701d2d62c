/* admit_coin.h: the probabilistic admission coin, shared by both backends. A
 * missed vector enters the cache with probability p per missed lookup (one
 * decision per row and batch); the coin is a pure function of (seed, batch,
 * key), so runs are reproducible and every backend admits the same keys.
 * When the pool has fewer free slots than winners, the rows most frequent in
 * the batch go first (fl_admit_bucket, whatever the policy: admit_rule.h). */
#ifndef FL_CACHE_ADMIT_COIN_H
#define FL_CACHE_ADMIT_COIN_H

#include "common/hash.h"

/* The coin's threshold for probability p: admit when the hash is below it. */
FL_HD uint64_t fl_admit_threshold(double p) {
  if (!(p > 0.0)) return 0;
  if (p >= 1.0) return ~0ull;
  return (uint64_t)(p * 18446744073709551616.0);
}

FL_HD int fl_admit(uint64_t seed, uint64_t batch, uint64_t key, uint64_t threshold) {
  if (threshold == ~0ull) return 1;
  return fl_hash2(seed ^ fl_mix64(batch), key) < threshold;
}

/* Priority of a coin winner when the pool cannot take them all: rows seen
 * more often in the batch first (floor of log2 of the count: bucket 0 for
 * one-off ids, up to FL_ADMIT_BUCKETS - 1), whatever their table. Within a
 * bucket, order is arbitrary. */
#define FL_ADMIT_BUCKETS 16u
FL_HD uint32_t fl_admit_bucket(uint32_t count) {
  uint32_t b = 0;
  while (count > 1 && b < FL_ADMIT_BUCKETS - 1) count >>= 1, b++;
  return b;
}

/* The coin of a row missed `count` times in one batch: every missed lookup
 * is a chance, so it wins with probability 1 - (1 - p)^count, drawn once
 * from the same hash (one decision per row and batch). */
FL_HD int fl_admit_counted(uint64_t seed, uint64_t batch, uint64_t key, uint64_t threshold,
                           uint32_t count) {
  if (count <= 1 || threshold == 0 || threshold == ~0ull)
    return fl_admit(seed, batch, key, threshold);
  double miss = 1.0 - (double)threshold * (1.0 / 18446744073709551616.0), all = 1.0;
  for (uint32_t i = 0; i < count && all > 1e-12; i++) all *= miss;
  return fl_admit(seed, batch, key, fl_admit_threshold(1.0 - all));
}

#endif
