/* evict_pick.h: which entries an eviction takes, from a histogram of their
 * ages (FL_HD: the host's eviction and the CUDA round's pick kernel run the
 * same code). The oldest first: every entry of the buckets above `bucket`,
 * and `quota` entries of that bucket, together `want` when there are as
 * many. */
#ifndef FL_CACHE_EVICT_PICK_H
#define FL_CACHE_EVICT_PICK_H

#include "cache/index.h"

FL_HD void fl_evict_pick(const uint64_t *hist, uint64_t want, uint32_t *bucket, uint64_t *quota) {
  uint64_t taken = 0;
  uint32_t b = FL_AGE_BUCKETS - 1u;
  while (b > 0 && taken + hist[b] < want) taken += hist[b--];
  *bucket = b;
  *quota = want > taken ? want - taken : 0;
}

#endif
