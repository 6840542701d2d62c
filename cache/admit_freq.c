/* admit_freq.c: a part's TinyLFU frequency state (admit_rule.h): the
 * sketch's memory and its fl_admit_freq, one allocation in the backend's
 * memory (device on CUDA, where the round kernels update it), and the host
 * backend's aging and victim bookkeeping. The CUDA rounds do the same on
 * the device (admit_kernels.cu, maint_kernels.cu). */
#include <cuda_runtime_api.h>
#include <stddef.h>
#include <string.h>

#include "cache/cache.h"
#include "cache/cuda_state.h"
#include "common/cuda_check.h"
#include "common/error.h"

fl_status fl_freq_create(fl_cache *c, fl_part *p, double mean_slot) {
  if (c->fixed.cfg.admit_policy != FL_ADMIT_TINYLFU) return FL_OK;
  uint64_t keys = (uint64_t)((double)p->pool_bytes / mean_slot) + 1;
  uint64_t words = fl_sketch_words(keys);
  uint64_t bytes = sizeof(fl_admit_freq) + 4 * words;
  void *mem = NULL;
  fl_status st = fl_cache_mem_alloc(c, bytes, &mem);
  if (st != FL_OK) return st;
  if (c->fixed.backend == FL_BACKEND_CUDA) {
    cudaError_t e = cudaMemset(mem, 0, bytes);
    if (e != cudaSuccess) {
      fl_cache_mem_free(c, mem);
      return fl_fail(NULL, FL_ERR_CUDA, "zeroing the admission sketch: %s", cudaGetErrorString(e));
    }
  } else {
    memset(mem, 0, bytes);
  }
  p->freq = mem;
  p->sketch.word = (uint32_t *)((fl_admit_freq *)mem + 1);
  p->sketch.mask = words - 1;
  p->sketch_sample = (uint64_t)FL_SKETCH_SAMPLE * keys;
  fl_shift_init(&p->shift, keys);
  return FL_OK;
}

void fl_freq_destroy(fl_cache *c, fl_part *p) {
  fl_cache_mem_free(c, p->freq);
  p->freq = NULL;
  p->sketch.word = NULL;
}

void fl_freq_age_host(fl_part *p) {
  uint64_t left;
  uint32_t k = fl_sketch_halvings(p->freq->additions, p->sketch_sample, &left);
  p->freq->additions = left;
  if (k == 0) return;
  for (uint64_t w = 0; w <= p->sketch.mask; w++)
    p->sketch.word[w] = fl_sketch_age_word(p->sketch.word[w], k);
}

void fl_freq_evicted_host(fl_part *p, uint64_t victim_sum, uint64_t victim_n) {
  p->freq->victim = fl_admit_victim(victim_sum, victim_n, p->freq->victim);
}

int fl_freq_shift_open(fl_cache *c, fl_part *p) {
  uint64_t missed = atomic_exchange(&p->missed_of, 0);
  uint64_t lookups = atomic_exchange(&p->missed_lookups, 0);
  uint64_t quiet = atomic_exchange(&p->quiet_lookups, 0);
  if (!p->freq) return 0;
  uint64_t opened = p->shift.opened;
  fl_shift_observe(&p->shift, quiet, 0);
  int open = fl_shift_observe(&p->shift, lookups, missed);
  if (p->shift.opened != opened) fl_cache_add(c, FL_STAT_SHIFT_OPENS, 1);
  return open;
}

/* fl_freq_reset_victim clears victim_sum through victim in one stretch. */
_Static_assert(offsetof(fl_admit_freq, victim_n) ==
                       offsetof(fl_admit_freq, victim_sum) + sizeof(unsigned long long) &&
                   offsetof(fl_admit_freq, victim) ==
                       offsetof(fl_admit_freq, victim_n) + sizeof(unsigned long long),
               "the victim's three fields lie together");

fl_status fl_freq_reset_victim(fl_cache *c, fl_part *p) {
  if (!p->freq) return FL_OK;
  fl_shift_init(&p->shift, (uint64_t)p->shift.capacity);
  size_t from = offsetof(fl_admit_freq, victim_sum);
  size_t bytes = offsetof(fl_admit_freq, victim) + sizeof p->freq->victim - from;
  if (c->fixed.backend != FL_BACKEND_CUDA) {
    memset((char *)p->freq + from, 0, bytes);
    return FL_OK;
  }
  cudaStream_t maint = (cudaStream_t)c->fixed.cuda->maint;
  FL_CUDA_TRY(c, cudaMemsetAsync((char *)p->freq + from, 0, bytes, maint));
  FL_CUDA_TRY(c, cudaStreamSynchronize(maint));
  return FL_OK;
}
