/* hash.h: the 64-bit mixing hash shared by encoding (folding raw ids),
 * the index (slot choice), admission (the coin) and synthetic data. */
#ifndef FL_COMMON_HASH_H
#define FL_COMMON_HASH_H

#include "common/hd.h"

/* splitmix64's finalizer: a bijection on 64-bit words with full avalanche, so
 * folding its output to fewer bits keeps ids uniformly spread. */
FL_HD uint64_t fl_mix64(uint64_t x) {
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ull;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebull;
  x ^= x >> 31;
  return x;
}

/* Two-word hash: mixes b into a's hash (for (seed, key, batch) style inputs). */
FL_HD uint64_t fl_hash2(uint64_t a, uint64_t b) {
  return fl_mix64(fl_mix64(a) ^ (b + 0x9e3779b97f4a7c15ull));
}

#endif
