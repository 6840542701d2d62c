/* maint_kernels.h: launchers of the index maintenance kernels (CUDA backend).
 * Each enqueues on `stream` and returns a cudaError_t as int (0 = success). */
#ifndef FL_CACHE_MAINT_KERNELS_H
#define FL_CACHE_MAINT_KERNELS_H

#include "cache/index.h"

#ifdef __cplusplus
extern "C" {
#endif

int fl_launch_index_reset(fl_index_view v, void *stream);
/* hist: FL_AGE_BUCKETS device counters of entries of `kind`, zeroed by the
 * launcher. */
int fl_launch_age_histogram(fl_index_view v, fl_entry_kind kind, uint32_t now,
                            unsigned long long *hist, void *stream);
/* counters[0] = entries written to locs, counters[1] = quota used in bucket b;
 * zeroed by the launcher. */
int fl_launch_evict(fl_index_view v, fl_entry_kind kind, uint32_t now, uint32_t b,
                    uint64_t quota, uint64_t *locs, unsigned long long *counters, void *stream);
int fl_launch_erase(fl_index_view v, const uint64_t *keys, uint64_t n, uint64_t *locs,
                    void *stream);

#ifdef __cplusplus
}
#endif
#endif
