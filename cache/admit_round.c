/* admit_round.c: the host side of CUDA admission rounds (see admit_round.h):
 * the device state's layout, settling a finished round's status into the
 * part's counts, and topping up the reservoirs from the pool. */
#include "cache/admit_round.h"

#include <cuda_runtime_api.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cache/admission.h"
#include "cache/cache.h"
#include "cache/cuda_state.h"
#include "common/cuda_check.h"

static uint64_t align16(uint64_t x) { return (x + 15u) & ~15ull; }

/* Byte offsets of dev's arrays in state_d. The first three arrays and count
 * are contiguous: the status the host downloads. count, ret_n and cand are
 * contiguous too: what a round zeroes. */
typedef struct state_layout {
  uint64_t top, granted, wanted, count, ret_n, cand, base, res, ret, skip, total;
} state_layout;

static void layout(uint32_t n_cls, uint32_t n_tables, state_layout *l) {
  uint64_t o = 0;
  l->top = o, o += 8ull * n_cls;
  l->granted = o, o += 8ull * n_cls;
  l->wanted = o, o += 8ull * n_cls;
  l->count = o, o += 8ull * FL_ROUND_COUNTS;
  l->ret_n = o, o += 4ull * n_cls;
  l->cand = o, o += 4ull * n_cls * FL_ADMIT_BUCKETS;
  l->base = o = align16(o), o += 4ull * n_cls * FL_ADMIT_BUCKETS;
  l->res = o = align16(o), o += 8ull * n_cls;
  l->ret = o, o += 8ull * n_cls;
  l->skip = o, o += n_tables;
  l->total = align16(o);
}

static cudaStream_t maint(fl_cache *c) { return (cudaStream_t)c->cuda->maint; }

fl_status fl_round_create(fl_cache *c, uint32_t part) {
  fl_part *p = &c->parts[part];
  fl_admit_round *r = calloc(1, sizeof *r);
  if (!r) return fl_fail(NULL, FL_ERR_OUT_OF_MEMORY, "out of host memory");
  p->round = r;
  uint32_t n = p->pool.n_classes;
  r->res = calloc(n ? n : 1, sizeof *r->res);
  r->ret = calloc(n ? n : 1, sizeof *r->ret);
  r->cap = calloc(n ? n : 1, sizeof *r->cap);
  if (!r->res || !r->ret || !r->cap)
    return fl_fail(NULL, FL_ERR_OUT_OF_MEMORY, "out of host memory");
  /* Pinned: each round uploads it, and an upload from pageable memory
   * would wait for the maintenance stream first. */
  FL_CUDA_TRY(NULL, cudaMallocHost((void **)&r->top, (n ? n : 1) * sizeof *r->top));
  memset(r->top, 0, (n ? n : 1) * sizeof *r->top);
  state_layout l;
  layout(n, c->n_tables, &l);
  FL_CUDA_TRY(NULL, cudaMalloc(&r->state_d, l.total));
  FL_CUDA_TRY(NULL, cudaMemset(r->state_d, 0, l.total));
  FL_CUDA_TRY(NULL, cudaMallocHost((void **)&r->status_h, l.ret_n));
  FL_CUDA_TRY(NULL, cudaMallocHost((void **)&r->skip_h, c->n_tables ? c->n_tables : 1));
  uint8_t *d = r->state_d;
  r->dev = (fl_admit_dev){(uint64_t *)(d + l.top), (uint64_t *)(d + l.granted),
                          (uint64_t *)(d + l.wanted), (unsigned long long *)(d + l.count),
                          (uint32_t *)(d + l.ret_n), (uint32_t *)(d + l.cand),
                          (uint32_t *)(d + l.base), (uint64_t **)(d + l.res),
                          (uint64_t **)(d + l.ret), d + l.skip, n};
  return FL_OK;
}

void fl_round_destroy(fl_cache *c, uint32_t part) {
  fl_admit_round *r = c->parts[part].round;
  if (!r) return;
  for (uint32_t k = 0; r->res && k < r->dev.n_classes; k++) {
    cudaFree(r->res[k]);
    cudaFree(r->ret[k]);
  }
  if (r->event) fl_cuda_event_release(c, r->event);
  cudaFree(r->state_d);
  cudaFreeHost(r->status_h);
  cudaFreeHost(r->skip_h);
  cudaFreeHost(r->refill_h);
  free(r->res);
  free(r->ret);
  free(r->cap);
  cudaFreeHost(r->top);
  free(r);
  c->parts[part].round = NULL;
}

void fl_round_failed(fl_cache *c, uint32_t part, fl_status st, const char *msg) {
  fl_admit_round *r = c->parts[part].round;
  r->failed = st;
  snprintf(r->failed_msg, sizeof r->failed_msg, "%s", msg);
}

void fl_round_wait(fl_cache *c, uint32_t part) {
  pthread_mutex_lock(&c->lock);
  void *ev = c->parts[part].round->event;
  pthread_mutex_unlock(&c->lock);
  /* Events are pooled, never destroyed while the cache lives: one settled
   * and reused meanwhile marks a later point, and the settle under the lock
   * still waits for the right one. */
  uint64_t t0 = fl_now_ns();
  if (ev && cudaEventSynchronize((cudaEvent_t)ev) != cudaSuccess) (void)cudaGetLastError();
  atomic_fetch_add(&c->ns_admission_wait, fl_now_ns() - t0);
}

fl_status fl_round_settle(fl_cache *c, uint32_t part, int wait) {
  fl_part *p = &c->parts[part];
  fl_admit_round *r = p->round;
  if (r && r->failed != FL_OK) {
    fl_status st = r->failed;
    r->failed = FL_OK;
    return fl_fail(c, st, "an earlier batch's admission round (part %u) could not be launched: %s",
                   part, r->failed_msg);
  }
  if (!r || !r->event) return FL_OK;
  if (!wait && !fl_cuda_event_done(c, r->event)) return FL_OK;
  cudaError_t e = cudaEventSynchronize((cudaEvent_t)r->event);
  fl_cuda_event_release(c, r->event);
  r->event = NULL;
  if (e != cudaSuccess)
    return fl_fail(c, FL_ERR_CUDA, "admission round of part %u failed: %s", part,
                   cudaGetErrorString(e));
  uint32_t n = r->dev.n_classes;
  const uint64_t *count = r->status_h + 3ull * n;
  uint64_t admitted = count[FL_ROUND_ADMITTED], promoted = count[FL_ROUND_PROMOTED];
  p->entries += admitted;
  p->dram_entries += count[FL_ROUND_POINTERS];
  p->dram_entries -= promoted < p->dram_entries ? promoted : p->dram_entries;
  atomic_fetch_add(&c->admissions, admitted);
  p->reserved_bytes = 0;
  for (uint32_t k = 0; k < n; k++) {
    r->top[k] = r->status_h[k];
    p->reserved_bytes += r->top[k] * p->pool.classes[k].slot_bytes;
  }
  return FL_OK;
}

/* Grows class k's reservoir and return list to hold `want` slots (the
 * device is idle for this part: settled). */
static fl_status grow(fl_cache *c, fl_admit_round *r, uint32_t k, uint64_t want) {
  uint64_t cap = r->cap[k] ? 2 * r->cap[k] : 4096;
  while (cap < want) cap *= 2;
  uint64_t *res = NULL, *ret = NULL;
  cudaError_t e = cudaMalloc((void **)&res, cap * 8);
  if (e == cudaSuccess) e = cudaMalloc((void **)&ret, cap * 8);
  if (e == cudaSuccess && r->top[k])
    e = cudaMemcpyAsync(res, r->res[k], r->top[k] * 8, cudaMemcpyDeviceToDevice, maint(c));
  if (e == cudaSuccess) e = cudaStreamSynchronize(maint(c));
  if (e != cudaSuccess) {
    cudaFree(res);
    cudaFree(ret);
    return fl_fail(c, e == cudaErrorMemoryAllocation ? FL_ERR_OUT_OF_MEMORY : FL_ERR_CUDA,
                   "growing the admission reservoir to %llu slots: %s", (unsigned long long)cap,
                   cudaGetErrorString(e));
  }
  cudaFree(r->res[k]);
  cudaFree(r->ret[k]);
  r->res[k] = res;
  r->ret[k] = ret;
  r->cap[k] = cap;
  FL_CUDA_TRY(c, cudaMemcpy(&r->dev.res[k], &res, 8, cudaMemcpyHostToDevice));
  FL_CUDA_TRY(c, cudaMemcpy(&r->dev.ret[k], &ret, 8, cudaMemcpyHostToDevice));
  return FL_OK;
}

/* Gives each class up to need[k] slots on its reservoir; *starved = 1 when
 * the pool could not. */
static fl_status refill(fl_cache *c, uint32_t part, const uint64_t *need, int *starved) {
  fl_part *p = &c->parts[part];
  fl_admit_round *r = p->round;
  uint64_t total = 0;
  for (uint32_t k = 0; k < r->dev.n_classes; k++)
    if (need[k] > r->top[k]) total += need[k] - r->top[k];
  if (total > r->refill_cap) {
    cudaFreeHost(r->refill_h);
    r->refill_h = NULL;
    r->refill_cap = 0;
    uint64_t cap = total + total / 2;
    FL_CUDA_TRY(c, cudaMallocHost((void **)&r->refill_h, cap * 8));
    r->refill_cap = cap;
  }
  uint64_t at = 0;
  for (uint32_t k = 0; k < r->dev.n_classes; k++) {
    if (need[k] <= r->top[k]) continue;
    uint64_t want = need[k] - r->top[k];
    if (r->top[k] + want > r->cap[k]) {
      fl_status st = grow(c, r, k, r->top[k] + want);
      if (st != FL_OK) return st;
    }
    uint64_t got = fl_pool_alloc_n(&p->pool, k, want, r->refill_h + at);
    if (got < want) *starved = 1;
    if (got)
      FL_CUDA_TRY(c, cudaMemcpyAsync(r->res[k] + r->top[k], r->refill_h + at, got * 8,
                                     cudaMemcpyHostToDevice, maint(c)));
    r->top[k] += got;
    p->reserved_bytes += got * p->pool.classes[k].slot_bytes;
    at += got;
  }
  return FL_OK;
}

fl_status fl_round_prepare(fl_cache *c, uint32_t part, const uint64_t *need) {
  fl_part *p = &c->parts[part];
  fl_admit_round *r = p->round;
  /* With no round in flight (the first, or after a failed launch), the last
   * refill's upload may still read refill_h: let it finish. */
  if (!r->event) FL_CUDA_TRY(c, cudaStreamSynchronize(maint(c)));
  uint64_t t0 = fl_now_ns();
  fl_status st = fl_round_settle(c, part, 1);
  atomic_fetch_add(&c->ns_admission_wait, fl_now_ns() - t0);
  if (st == FL_OK) st = fl_cache_make_room(c, part, 0);
  int starved = 0;
  if (st == FL_OK) st = refill(c, part, need, &starved);
  /* A class with no slot and no page: evict now, the slabs come back to
   * the pool for later rounds. */
  if (st == FL_OK && starved) st = fl_cache_make_room(c, part, 1);
  if (st != FL_OK) return st;
  uint32_t n = r->dev.n_classes;
  FL_CUDA_TRY(c, cudaMemcpyAsync(r->dev.top, r->top, 8ull * n, cudaMemcpyHostToDevice, maint(c)));
  FL_CUDA_TRY(c, cudaMemsetAsync(r->dev.count, 0,
                                 (uint8_t *)(r->dev.cand + n * FL_ADMIT_BUCKETS) -
                                     (uint8_t *)r->dev.count,
                                 maint(c)));
  return FL_OK;
}

fl_status fl_round_skip(fl_cache *c, uint32_t part, const uint8_t *skip) {
  fl_admit_round *r = c->parts[part].round;
  memcpy(r->skip_h, skip, c->n_tables);
  FL_CUDA_TRY(c, cudaMemcpyAsync((void *)r->dev.skip, r->skip_h, c->n_tables,
                                 cudaMemcpyHostToDevice, maint(c)));
  return FL_OK;
}

fl_status fl_round_end(fl_cache *c, uint32_t part) {
  fl_admit_round *r = c->parts[part].round;
  void *ev = NULL;
  fl_status st = fl_cuda_event_get(c, &ev);
  if (st != FL_OK) return st;
  uint64_t bytes = 8ull * (3ull * r->dev.n_classes + FL_ROUND_COUNTS);
  cudaError_t e = cudaMemcpyAsync(r->status_h, r->dev.top, bytes, cudaMemcpyDeviceToHost, maint(c));
  if (e == cudaSuccess) e = cudaEventRecord((cudaEvent_t)ev, maint(c));
  if (e != cudaSuccess) {
    fl_cuda_event_release(c, ev);
    return fl_fail(c, FL_ERR_CUDA, "ending an admission round: %s", cudaGetErrorString(e));
  }
  r->event = ev;
  return FL_OK;
}
