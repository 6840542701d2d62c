/* maint.c: index maintenance and census for both backends: on the host, loops over the
 * index with the same index.h functions the kernels use; on CUDA, the kernels
 * of maint_kernels.cu on the maintenance stream, waited for before returning
 * (maintenance is rare: eviction batches, invalidations, clears). All under
 * the cache lock. */
#include <cuda_runtime_api.h>
#include <stdlib.h>
#include <string.h>

#include "cache/cache.h"
#include "cache/maint_kernels.h"
#include "common/cuda_check.h"
#include "cache/cuda_state.h"

static cudaStream_t maint_stream(fl_cache *c) { return (cudaStream_t)c->fixed.cuda->maint; }

fl_status fl_maint_index_reset(fl_cache *c, fl_part *p) {
  p->entries = 0;
  p->dram_entries = 0;
  if (c->fixed.backend == FL_BACKEND_CUDA) {
    FL_CUDA_TRY(c, fl_launch_index_reset(p->index, c->fixed.cuda->maint));
    FL_CUDA_TRY(c, cudaStreamSynchronize(maint_stream(c)));
    return FL_OK;
  }
  for (uint64_t i = 0; i < p->index.slots; i++) fl_index_clear_slot(&p->index, i);
  return FL_OK;
}

fl_status fl_maint_age_histogram(fl_cache *c, fl_part *p, fl_entry_kind kind, uint32_t now,
                                 uint64_t hist[FL_AGE_BUCKETS]) {
  if (c->fixed.backend == FL_BACKEND_CUDA) {
    void *dev, *host;
    fl_status st = fl_cuda_state_maint_buffers(c, FL_AGE_BUCKETS * 8, FL_AGE_BUCKETS * 8, &dev, &host);
    if (st != FL_OK) return st;
    FL_CUDA_TRY(c, fl_launch_age_histogram(p->index, kind, now, dev, c->fixed.cuda->maint));
    FL_CUDA_TRY(c, cudaMemcpyAsync(host, dev, FL_AGE_BUCKETS * 8, cudaMemcpyDeviceToHost,
                                   maint_stream(c)));
    FL_CUDA_TRY(c, cudaStreamSynchronize(maint_stream(c)));
    memcpy(hist, host, FL_AGE_BUCKETS * 8);
    return FL_OK;
  }
  memset(hist, 0, FL_AGE_BUCKETS * sizeof *hist);
  for (uint64_t i = 0; i < p->index.slots; i++)
    if (fl_index_is_kind(&p->index, i, kind)) hist[fl_index_age_bucket(now, *fl_index_ts(&p->index, i))]++;
  return FL_OK;
}

fl_status fl_maint_evict(fl_cache *c, fl_part *p, fl_entry_kind kind, uint32_t now, uint32_t b,
                         uint64_t quota, uint64_t *locs, uint64_t *n_locs) {
  *n_locs = 0;
  if (c->fixed.backend == FL_BACKEND_CUDA) {
    void *dev, *host;
    size_t bytes = 16 + p->slots * 8;
    fl_status st = fl_cuda_state_maint_buffers(c, bytes, 16, &dev, &host);
    if (st != FL_OK) return st;
    unsigned long long *counters = dev;
    uint64_t *dlocs = (uint64_t *)((char *)dev + 16);
    fl_evict_tally tally = {p->sketch, p->freq};
    FL_CUDA_TRY(c, fl_launch_evict(p->index, kind, now, b, quota, dlocs, counters, tally,
                                   c->fixed.cuda->maint));
    FL_CUDA_TRY(c, cudaMemcpyAsync(host, counters, 16, cudaMemcpyDeviceToHost, maint_stream(c)));
    FL_CUDA_TRY(c, cudaStreamSynchronize(maint_stream(c)));
    uint64_t n = ((unsigned long long *)host)[0];
    /* On the maintenance stream, which waits for no caller's stream (a
     * legacy-stream copy waits for every blocking stream, launched runs'
     * gates included). */
    FL_CUDA_TRY(c, cudaMemcpyAsync(locs, dlocs, n * 8, cudaMemcpyDeviceToHost, maint_stream(c)));
    FL_CUDA_TRY(c, cudaStreamSynchronize(maint_stream(c)));
    *n_locs = n;
    return FL_OK;
  }
  uint64_t in_b = 0, victim_sum = 0;
  int tally = p->freq && kind == FL_ENTRY_CACHED; /* TinyLFU's victims (admit_rule.h) */
  for (uint64_t i = 0; i < p->index.slots; i++) {
    if (!fl_index_is_kind(&p->index, i, kind)) continue;
    uint32_t bucket = fl_index_age_bucket(now, *fl_index_ts(&p->index, i));
    if (bucket < b || (bucket == b && in_b++ >= quota)) continue;
    uint64_t key = fl_index_key(&p->index, i);
    uint64_t l = fl_index_erase_slot(&p->index, i);
    if (l == FL_LOC_NONE) continue;
    locs[(*n_locs)++] = l;
    if (tally) victim_sum += fl_sketch_estimate(&p->sketch, key);
  }
  if (tally) fl_freq_evicted_host(p, victim_sum, *n_locs);
  for (uint64_t i = 0; i < p->index.slots; i++)
    if (fl_index_cluster_start(&p->index, i)) fl_index_compact_cluster(&p->index, i);
  /* From the end: slot i + 1 is swept before slot i looks at it. */
  for (uint64_t i = p->index.slots; i-- > 0;) fl_index_sweep_slot(&p->index, i);
  return FL_OK;
}

fl_status fl_maint_erase(fl_cache *c, fl_part *p, const uint64_t *keys, uint64_t n,
                         uint64_t *locs) {
  if (n == 0) return FL_OK;
  if (c->fixed.backend == FL_BACKEND_CUDA) {
    void *dev, *host;
    fl_status st = fl_cuda_state_maint_buffers(c, n * 16, 0, &dev, &host);
    if (st != FL_OK) return st;
    uint64_t *dkeys = dev, *dlocs = (uint64_t *)dev + n;
    FL_CUDA_TRY(c, cudaMemcpyAsync(dkeys, keys, n * 8, cudaMemcpyHostToDevice, maint_stream(c)));
    FL_CUDA_TRY(c, fl_launch_erase(p->index, dkeys, n, dlocs, c->fixed.cuda->maint));
    FL_CUDA_TRY(c, cudaMemcpyAsync(locs, dlocs, n * 8, cudaMemcpyDeviceToHost, maint_stream(c)));
    FL_CUDA_TRY(c, cudaStreamSynchronize(maint_stream(c)));
    return FL_OK;
  }
  for (uint64_t i = 0; i < n; i++) locs[i] = fl_index_erase(&p->index, keys[i]);
  return FL_OK;
}

fl_status fl_maint_census(fl_cache *c, fl_part *p, fl_index_health *out) {
  fl_index_view v = p->index;
  uint8_t *copy = NULL;
  if (c->fixed.backend == FL_BACKEND_CUDA) {
    copy = malloc(p->index_bytes ? p->index_bytes : 1);
    if (!copy) return fl_fail(c, FL_ERR_OUT_OF_MEMORY, "out of host memory for an index census");
    cudaError_t e = cudaMemcpyAsync(copy, p->index_mem, p->index_bytes, cudaMemcpyDeviceToHost,
                                    maint_stream(c));
    if (e == cudaSuccess) e = cudaStreamSynchronize(maint_stream(c));
    if (e != cudaSuccess) {
      free(copy);
      return fl_fail(c, FL_ERR_CUDA, "copying the index for its census: %s", cudaGetErrorString(e));
    }
    fl_index_place(&v, copy);
  }
  uint64_t stop = v.slots;
  for (uint64_t i = 0; i < v.slots; i++) {
    fl_slot_state s = fl_index_slot_state(&v, i);
    out->live += s == FL_SLOT_LIVE;
    out->tombstones += s == FL_SLOT_TOMBSTONE;
    out->never_used += s == FL_SLOT_EMPTY;
    if (s == FL_SLOT_EMPTY) stop = i;
  }
  out->slots += v.slots;
  /* A probe from home h reads h up to the first never-used slot: walking
   * back from one, each slot's probe is one more than the next slot's. */
  if (stop == v.slots) {
    out->miss_probe += (double)v.slots * FL_PROBE_LIMIT;
  } else {
    uint64_t reads = 1, i = stop;
    for (uint64_t n = 0; n < v.slots; n++, i = fl_index_prev(&v, i)) {
      if (fl_index_slot_state(&v, i) == FL_SLOT_EMPTY) reads = 1;
      else if (reads < FL_PROBE_LIMIT) reads++;
      out->miss_probe += (double)reads;
    }
  }
  free(copy);
  return FL_OK;
}
