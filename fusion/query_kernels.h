/* query_kernels.h: launchers of the fused query kernels (query_kernels.cu).
 * Each enqueues on `stream` and returns a cudaError_t as int. */
#ifndef FL_FUSION_QUERY_KERNELS_H
#define FL_FUSION_QUERY_KERNELS_H

#include "cache/index.h"
#include "fusion/batch.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Most queries one launch takes (the scan lives in shared memory). */
#define FL_LAUNCH_MAX_QUERIES 1024u

/* The self-identified fused index kernel: encodes every key of every query
 * (codes indexed by arg.table), probes the index, writes locs[pos] (0 = not a
 * cached vector), appends misses and unified-index hits to miss_pos/miss_ids/
 * miss_locs (the DRAM pointer, 0 for a miss; counters[0] = count) and keeps in
 * counters[1] the smallest position of an out-of-range id (initialised to ~0
 * by the launcher). scan: n_args + 1 thread offsets (1 thread per key). */
int fl_launch_index(fl_index_view v, const fl_code *codes, const fl_batch_arg *args,
                    const uint64_t *scan, uint32_t n_args, uint64_t threads, uint32_t now,
                    uint64_t *locs, uint32_t *miss_pos, uint64_t *miss_ids, uint64_t *miss_locs,
                    unsigned long long *counters, void *stream);
/* Decoupled hit copy: scan gives arg.lanes threads per key. */
int fl_launch_copy_hits(const fl_batch_arg *args, const uint64_t *scan, uint32_t n_args,
                        uint64_t threads, const uint64_t *locs, void *stream);
/* Writes n fetched rows (src + src_off[r]) to their output positions pos[r];
 * key_offsets: n_args ascending first positions to find each row's query. */
int fl_launch_scatter(const fl_batch_arg *args, const uint64_t *key_offsets, uint32_t n_args,
                      const uint8_t *src, const uint64_t *src_off, const uint32_t *pos,
                      uint64_t n, void *stream);

#ifdef __cplusplus
}
#endif
#endif
