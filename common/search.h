/* search.h: finding which of n consecutive ranges holds a position (FL_HD). */
#ifndef FL_COMMON_SEARCH_H
#define FL_COMMON_SEARCH_H

#include "common/hd.h"

/* The range holding x among n ranges [starts[i], starts[i+1]) (the last one
 * open-ended): the largest i < n with starts[i] <= x, by binary search. For
 * ascending starts with starts[0] <= x, n >= 1. */
FL_HD uint32_t fl_search_range(const uint64_t *starts, uint32_t n, uint64_t x) {
  uint32_t lo = 0, hi = n;
  while (hi - lo > 1) {
    uint32_t mid = (lo + hi) / 2;
    if (starts[mid] <= x) lo = mid; else hi = mid;
  }
  return lo;
}

#endif
