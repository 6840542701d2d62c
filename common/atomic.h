/* atomic.h: the few atomic operations the shared index logic needs, with one
 * spelling for device code (CUDA atomics and fences) and host code (GCC
 * __atomic builtins), so index.h compiles unchanged on both sides. */
#ifndef FL_COMMON_ATOMIC_H
#define FL_COMMON_ATOMIC_H

#include "common/hd.h"

#ifdef __CUDA_ARCH__
#define FL_FENCE() __threadfence()
/* Orders a reader's loads (seqlock reads): acquire-release, lighter than the
 * sequentially consistent __threadfence() writers use. */
#define FL_FENCE_READ() asm volatile("fence.acq_rel.gpu;" ::: "memory")
FL_HD uint32_t fl_ld32(const uint32_t *p) { return *(const volatile uint32_t *)p; }
FL_HD uint64_t fl_ld64(const uint64_t *p) { return *(const volatile uint64_t *)p; }
FL_HD void fl_st32(uint32_t *p, uint32_t v) { *(volatile uint32_t *)p = v; }
FL_HD void fl_st64(uint64_t *p, uint64_t v) { *(volatile uint64_t *)p = v; }
/* Returns the previous value, like atomicCAS; a full fence follows so the
 * claimant's next writes are ordered after the claim. */
FL_HD uint32_t fl_cas32(uint32_t *p, uint32_t expect, uint32_t desired) {
  uint32_t old = atomicCAS((unsigned int *)p, expect, desired);
  __threadfence();
  return old;
}
/* Plain (relaxed) read-modify-writes for counters and claims that need no
 * ordering of other memory: each returns the previous value. */
FL_HD uint64_t fl_cas64_relaxed(uint64_t *p, uint64_t expect, uint64_t desired) {
  return atomicCAS((unsigned long long *)p, expect, desired);
}
FL_HD uint32_t fl_add32(uint32_t *p, uint32_t v) { return atomicAdd((unsigned int *)p, v); }
#else
#define FL_FENCE() __atomic_thread_fence(__ATOMIC_SEQ_CST)
#define FL_FENCE_READ() __atomic_thread_fence(__ATOMIC_ACQ_REL)
FL_HD uint32_t fl_ld32(const uint32_t *p) { return __atomic_load_n(p, __ATOMIC_RELAXED); }
FL_HD uint64_t fl_ld64(const uint64_t *p) { return __atomic_load_n(p, __ATOMIC_RELAXED); }
FL_HD void fl_st32(uint32_t *p, uint32_t v) { __atomic_store_n(p, v, __ATOMIC_RELAXED); }
FL_HD void fl_st64(uint64_t *p, uint64_t v) { __atomic_store_n(p, v, __ATOMIC_RELAXED); }
FL_HD uint32_t fl_cas32(uint32_t *p, uint32_t expect, uint32_t desired) {
  __atomic_compare_exchange_n(p, &expect, desired, 0, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);
  return expect;
}
FL_HD uint64_t fl_cas64_relaxed(uint64_t *p, uint64_t expect, uint64_t desired) {
  __atomic_compare_exchange_n(p, &expect, desired, 0, __ATOMIC_RELAXED, __ATOMIC_RELAXED);
  return expect;
}
FL_HD uint32_t fl_add32(uint32_t *p, uint32_t v) {
  return __atomic_fetch_add(p, v, __ATOMIC_RELAXED);
}
#endif

#endif
