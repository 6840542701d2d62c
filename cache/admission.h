/* admission.h: the probabilistic admission coin, shared by both backends. A
 * missed vector enters the cache with probability p; the coin is a pure
 * function of (seed, batch, key), so runs are reproducible and every backend
 * admits the same keys. */
#ifndef FL_CACHE_ADMISSION_H
#define FL_CACHE_ADMISSION_H

#include "common/hash.h"

/* The coin's threshold for probability p: admit when the hash is below it. */
static inline uint64_t fl_admit_threshold(double p) {
  if (!(p > 0.0)) return 0;
  if (p >= 1.0) return ~0ull;
  return (uint64_t)(p * 18446744073709551616.0);
}

FL_HD int fl_admit(uint64_t seed, uint64_t batch, uint64_t key, uint64_t threshold) {
  if (threshold == ~0ull) return 1;
  return fl_hash2(seed ^ fl_mix64(batch), key) < threshold;
}

#endif
