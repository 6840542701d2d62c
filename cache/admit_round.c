/* admit_round.c: the host side of CUDA admission rounds (see admit_round.h):
 * the device state's layout, the round's graph, settling a finished round's
 * status into the part's counts, taking slots for the reservoirs from the
 * pool, and the limbo ring of evicted slabs. */
#include "cache/admit_round.h"

#include <cuda_runtime_api.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cache/admit_coin.h"
#include "cache/admit_kernels.h"
#include "cache/cache.h"
#include "cache/cuda_state.h"
#include "cache/maint_kernels.h"
#include "common/carve.h"
#include "common/clock.h"
#include "common/cuda_check.h"
#include "common/fault.h"

/* Byte offsets in the input block (io) and in the fixed state. In io, top to
 * count are contiguous: the status each round downloads. (A piece aligned to
 * 1 follows the one before it directly.) */
typedef struct io_layout {
  uint64_t top, granted, wanted, count, fill_n, evict, skip, fill, total;
} io_layout;

static void io_layout_of(uint32_t n_cls, uint32_t n_tables, uint64_t fill_cap, io_layout *l) {
  fl_carve io = {FL_ROUND_ARGS_BYTES};
  l->top = fl_carve_add(&io, 8ull * n_cls, 1);
  l->granted = fl_carve_add(&io, 8ull * n_cls, 1);
  l->wanted = fl_carve_add(&io, 8ull * n_cls, 1);
  l->count = fl_carve_add(&io, 8ull * FL_ROUND_COUNTS, 1);
  l->fill_n = fl_carve_add(&io, 8ull * n_cls, 1);
  l->evict = fl_carve_add(&io, sizeof(fl_evict_in), 1);
  l->skip = fl_carve_add(&io, n_tables, 16);
  l->fill = fl_carve_add(&io, 8ull * fill_cap, 16);
  l->total = fl_carve_size(&io, 16);
}

static uint64_t status_bytes(uint32_t n_cls) { return 8ull * (3ull * n_cls + FL_ROUND_COUNTS); }

static cudaStream_t maint(fl_cache *c) { return (cudaStream_t)c->fixed.cuda->maint; }

static void drop_graph(fl_admit_round *r) {
  if (r->graph) cudaGraphExecDestroy((cudaGraphExec_t)r->graph);
  r->graph = NULL;
  r->graph_keys = 0;
}

/* (Re)makes the input block for fill_cap new slots, keeping what the host
 * wrote into it; the device views change, so the graph goes. The part's
 * last round is over (settled). Failures are reported on handle err. */
static fl_status io_alloc(fl_cache *c, const void *err, fl_admit_round *r, uint64_t fill_cap) {
  uint32_t n = r->dev.n_classes;
  io_layout l;
  io_layout_of(n, c->fixed.n_tables, fill_cap, &l);
  void *io_d = NULL;
  uint8_t *io_h = NULL;
  cudaError_t e = fl_fault_hit(FL_FAULT_ROUND_BLOCK) ? cudaErrorMemoryAllocation
                                                     : cudaMalloc(&io_d, l.total);
  if (e == cudaSuccess) e = cudaMallocHost((void **)&io_h, l.total);
  if (e != cudaSuccess) {
    cudaFree(io_d);
    return fl_fail(err, e == cudaErrorMemoryAllocation ? FL_ERR_OUT_OF_MEMORY : FL_ERR_CUDA,
                   "allocating an admission round's input block (%llu bytes): %s",
                   (unsigned long long)l.total, cudaGetErrorString(e));
  }
  memset(io_h, 0, l.total);
  if (r->io_h) {
    memcpy(io_h, r->io_h, r->io_bytes < l.total ? r->io_bytes : l.total);
    fl_cuda_allocated(c->fixed.cuda, 2); /* not the creation's block */
  }
  cudaFree(r->io_d);
  cudaFreeHost(r->io_h);
  r->io_d = io_d, r->io_h = io_h, r->io_bytes = l.total, r->fill_cap = fill_cap;
  uint8_t *d = io_d;
  r->dev.top = (uint64_t *)(d + l.top);
  r->dev.granted = (uint64_t *)(d + l.granted);
  r->dev.wanted = (uint64_t *)(d + l.wanted);
  r->dev.count = (unsigned long long *)(d + l.count);
  r->evict.taken = r->dev.count + FL_ROUND_EVICTED;
  r->evict_in = d + l.evict;
  r->dev.ev = (const fl_evict_in *)r->evict_in;
  r->dev.fill_n = (const uint64_t *)(d + l.fill_n);
  r->dev.skip = d + l.skip;
  r->dev.fill = (const uint64_t *)(d + l.fill);
  drop_graph(r);
  return FL_OK;
}

fl_status fl_round_create(fl_cache *c, uint32_t part) {
  fl_part *p = &c->parts[part];
  fl_admit_round *r = calloc(1, sizeof *r);
  if (!r) return fl_fail(NULL, FL_ERR_OUT_OF_MEMORY, "out of host memory");
  p->round = r;
  uint32_t n = p->pool.n_classes;
  r->dev.n_classes = n;
  r->res = calloc(n ? n : 1, sizeof *r->res);
  r->ret = calloc(n ? n : 1, sizeof *r->ret);
  r->cap = calloc(n ? n : 1, sizeof *r->cap);
  r->top = calloc(n ? n : 1, sizeof *r->top);
  if (!r->res || !r->ret || !r->cap || !r->top)
    return fl_fail(NULL, FL_ERR_OUT_OF_MEMORY, "out of host memory");
  /* The fixed state: ret_n, cand, base, res, ret, the eviction's histogram
   * and pick. */
  fl_carve fx = {0};
  uint64_t o_ret_n = fl_carve_add(&fx, 4ull * n, 1);
  uint64_t o_cand = fl_carve_add(&fx, 4ull * n * FL_ADMIT_BUCKETS, 1);
  uint64_t o_base = fl_carve_add(&fx, 4ull * n * FL_ADMIT_BUCKETS, 16);
  uint64_t o_res = fl_carve_add(&fx, 8ull * n, 16);
  uint64_t o_ret = fl_carve_add(&fx, 8ull * n, 1);
  uint64_t o_hist = fl_carve_add(&fx, 8ull * FL_AGE_BUCKETS, 16);
  uint64_t o_pick = fl_carve_add(&fx, 8ull * 3, 1);
  uint64_t fixed = fl_carve_size(&fx, 16);
  FL_CUDA_TRY(NULL, cudaMalloc(&r->fixed_d, fixed ? fixed : 16));
  FL_CUDA_TRY(NULL, cudaMemset(r->fixed_d, 0, fixed ? fixed : 16));
  uint8_t *f = r->fixed_d;
  r->dev.ret_n = (uint32_t *)(f + o_ret_n);
  r->dev.cand = (uint32_t *)(f + o_cand);
  r->dev.base = (uint32_t *)(f + o_base);
  r->dev.res = (uint64_t **)(f + o_res);
  r->dev.ret = (uint64_t **)(f + o_ret);
  r->evict.hist = (unsigned long long *)(f + o_hist);
  r->evict.pick = (unsigned long long *)(f + o_pick);
  /* TinyLFU (admit_freq.c made them): the kernels count and age the
   * sketch, the eviction tallies its victims. */
  r->dev.sketch = r->evict.tally.sketch = p->sketch;
  r->dev.freq = r->evict.tally.freq = p->freq;
  r->dev.sketch_sample = p->sketch_sample;
  FL_CUDA_TRY(NULL, cudaMallocHost((void **)&r->status_h, status_bytes(n)));
  memset(r->status_h, 0, status_bytes(n));
  return io_alloc(c, NULL, r, 4096);
}

void fl_round_destroy(fl_cache *c, uint32_t part) {
  fl_admit_round *r = c->parts[part].round;
  if (!r) return;
  for (uint32_t k = 0; r->res && k < r->dev.n_classes; k++) {
    cudaFree(r->res[k]);
    cudaFree(r->ret[k]);
  }
  if (r->event) fl_event_release(c, r->event);
  drop_graph(r);
  cudaFree(r->fixed_d);
  cudaFree(r->io_d);
  cudaFreeHost(r->io_h);
  cudaFreeHost(r->status_h);
  cudaFreeHost(r->limbo);
  free(r->res);
  free(r->ret);
  free(r->cap);
  free(r->top);
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
  fl_cache_add(c, FL_STAT_NS_ADMISSION_WAIT, fl_now_ns() - t0);
}

static fl_status apply_status(fl_cache *c, uint32_t part);

fl_status fl_round_report(fl_cache *c, uint32_t part) {
  fl_admit_round *r = c->parts[part].round;
  if (!r || r->failed == FL_OK) return FL_OK;
  fl_status st = r->failed;
  r->failed = FL_OK;
  return fl_fail(c, st, "an earlier batch's admission round (part %u) could not be launched: %s",
                 part, r->failed_msg);
}

fl_status fl_round_settle(fl_cache *c, uint32_t part, int wait) {
  fl_part *p = &c->parts[part];
  fl_admit_round *r = p->round;
  if (!r || !r->event) return FL_OK;
  if (!wait && !fl_event_done(c, r->event)) return FL_OK;
  cudaError_t e = cudaEventSynchronize((cudaEvent_t)r->event);
  fl_event_release(c, r->event);
  r->event = NULL;
  if (e != cudaSuccess) {
    /* It may or may not have recycled its released slabs: they are
     * dropped, never handed out twice. */
    r->limbo_tail = r->limbo_released;
    return fl_fail(c, FL_ERR_CUDA, "admission round of part %u failed: %s", part,
                   cudaGetErrorString(e));
  }
  return apply_status(c, part);
}

fl_status fl_round_settle_all(fl_cache *c, int wait, int report) {
  fl_status st = FL_OK;
  for (uint32_t p = 0; p < c->fixed.n_parts; p++) {
    fl_status s = fl_round_settle(c, p, wait);
    if (s == FL_OK && report) s = fl_round_report(c, p);
    if (st == FL_OK) st = s;
  }
  return st;
}

/* Applies a finished round's status (status_h) to the part's counts, and
 * marks its evicted slabs, now in limbo, with one reclamation epoch. */
static fl_status apply_status(fl_cache *c, uint32_t part) {
  fl_part *p = &c->parts[part];
  fl_admit_round *r = p->round;
  uint32_t n = r->dev.n_classes;
  const uint64_t *count = r->status_h + 3ull * n;
  uint64_t admitted = count[FL_ROUND_ADMITTED], promoted = count[FL_ROUND_PROMOTED];
  p->entries += admitted;
  p->dram_entries += count[FL_ROUND_POINTERS];
  p->dram_entries -= promoted < p->dram_entries ? promoted : p->dram_entries;
  fl_cache_add(c, FL_STAT_ADMISSIONS, admitted);
  p->reserved_bytes = 0;
  for (uint32_t k = 0; k < n; k++) {
    r->top[k] = r->status_h[k];
    p->reserved_bytes += r->top[k] * p->pool.classes[k].slot_bytes;
  }
  /* The slabs handed to this round are on its reservoir now. */
  fl_cache_add(c, FL_STAT_SLABS_RECYCLED, r->limbo_released - r->limbo_tail);
  r->limbo_tail = r->limbo_released;
  uint64_t evicted = count[FL_ROUND_EVICTED];
  if (evicted > r->evict_want) evicted = r->evict_want;
  r->evict_want = 0;
  if (evicted == 0) return FL_OK;
  p->entries -= evicted < p->entries ? evicted : p->entries;
  fl_cache_add(c, FL_STAT_EVICTIONS, evicted);
  fl_shift_evicted(&p->shift);
  r->limbo_head += evicted;
  /* With every mark taken (a query has held the horizon back for many
   * rounds), the newest absorbs this one: its later epoch releases both
   * later, never too early. */
  if (r->n_marks == FL_LIMBO_MARKS) r->n_marks--;
  r->marks[r->n_marks++] = (fl_limbo_mark){r->limbo_head, fl_reclaim_mark(&c->reclaim)};
  return FL_OK;
}

/* Grows class k's reservoir and return list to hold `want` slots (the
 * device is idle for this part: settled); on failure, *cap_out is the
 * capacity it tried. Records no message: release_limbo falls back. */
static cudaError_t grow(fl_cache *c, fl_admit_round *r, uint32_t k, uint64_t want,
                        uint64_t *cap_out) {
  uint64_t cap = r->cap[k] ? 2 * r->cap[k] : 4096;
  while (cap < want) cap *= 2;
  *cap_out = cap;
  uint64_t *res = NULL, *ret = NULL;
  cudaError_t e = fl_fault_hit(FL_FAULT_ROUND_GROW) ? cudaErrorMemoryAllocation
                                                    : cudaMalloc((void **)&res, cap * 8);
  if (e == cudaSuccess) e = cudaMalloc((void **)&ret, cap * 8);
  if (e == cudaSuccess && r->top[k])
    e = cudaMemcpyAsync(res, r->res[k], r->top[k] * 8, cudaMemcpyDeviceToDevice, maint(c));
  if (e == cudaSuccess) e = cudaStreamSynchronize(maint(c));
  if (e != cudaSuccess) {
    cudaFree(res);
    cudaFree(ret);
    (void)cudaGetLastError(); /* a failed allocation is not sticky: clear it */
    return e;
  }
  cudaFree(r->res[k]);
  cudaFree(r->ret[k]);
  fl_cuda_allocated(c->fixed.cuda, 2);
  r->res[k] = res;
  r->ret[k] = ret;
  r->cap[k] = cap;
  /* Pageable sources: the copies are done when the calls return. */
  e = cudaMemcpyAsync(&r->dev.res[k], &res, 8, cudaMemcpyHostToDevice, maint(c));
  if (e == cudaSuccess) e = cudaMemcpyAsync(&r->dev.ret[k], &ret, 8, cudaMemcpyHostToDevice, maint(c));
  return e == cudaSuccess ? cudaStreamSynchronize(maint(c)) : e;
}

/* Class k's reservoir holds at least `slots` (grow), or the failure is
 * reported on c, naming the part and class. */
static fl_status reservoir_fit(fl_cache *c, uint32_t part, uint32_t k, uint64_t slots) {
  fl_admit_round *r = c->parts[part].round;
  if (slots <= r->cap[k]) return FL_OK;
  uint64_t cap = 0;
  cudaError_t e = grow(c, r, k, slots, &cap);
  if (e == cudaSuccess) return FL_OK;
  return fl_fail(c, e == cudaErrorMemoryAllocation ? FL_ERR_OUT_OF_MEMORY : FL_ERR_CUDA,
                 "growing part %u's admission reservoir of slab class %u to %llu slots: %s",
                 part, k, (unsigned long long)cap, cudaGetErrorString(e));
}

/* Gives each class up to need[k] more slots on its reservoir, written into
 * the input block (fill_n, fill) for the round to stock; *starved = 1 when
 * the pool could not. */
static fl_status refill(fl_cache *c, uint32_t part, const uint64_t *need, int *starved) {
  fl_part *p = &c->parts[part];
  fl_admit_round *r = p->round;
  uint32_t n = r->dev.n_classes;
  io_layout l;
  io_layout_of(n, c->fixed.n_tables, r->fill_cap, &l);
  /* No new slot until taken (unfill returns what fill_n lists). */
  memset(r->io_h + l.fill_n, 0, 8ull * n);
  uint64_t total = 0;
  for (uint32_t k = 0; k < n; k++)
    if (need[k] > r->top[k]) total += need[k] - r->top[k];
  if (total > r->fill_cap) {
    uint64_t cap = 2 * r->fill_cap;
    while (cap < total) cap *= 2;
    fl_status st = io_alloc(c, c, r, cap);
    if (st != FL_OK) return st;
    io_layout_of(n, c->fixed.n_tables, r->fill_cap, &l);
  }
  uint64_t *fill_n = (uint64_t *)(r->io_h + l.fill_n), *fill = (uint64_t *)(r->io_h + l.fill);
  uint64_t at = 0;
  for (uint32_t k = 0; k < n; k++) {
    if (need[k] <= r->top[k]) continue;
    uint64_t want = need[k] - r->top[k];
    fl_status st = reservoir_fit(c, part, k, r->top[k] + want);
    if (st != FL_OK) return st;
    uint64_t got = fl_pool_alloc_n(&p->pool, k, want, fill + at);
    if (got < want) *starved = 1;
    fill_n[k] = got;
    r->top[k] += got;
    p->reserved_bytes += got * p->pool.classes[k].slot_bytes;
    at += got;
  }
  return FL_OK;
}

/* Undoes refill when its round will not run: the new slots, and limbo
 * slabs released to the round's reservoir, go back to the pool. */
static void unfill(fl_cache *c, uint32_t part) {
  fl_part *p = &c->parts[part];
  fl_admit_round *r = p->round;
  uint64_t recycled = r->limbo_released - r->limbo_tail;
  for (uint64_t i = r->limbo_tail; i < r->limbo_released; i++)
    fl_pool_free(&p->pool, r->limbo[i % r->limbo_cap]);
  if (recycled) {
    r->top[0] -= recycled;
    p->reserved_bytes -= recycled * p->pool.classes[0].slot_bytes;
    r->limbo_tail = r->limbo_released;
  }
  io_layout l;
  io_layout_of(r->dev.n_classes, c->fixed.n_tables, r->fill_cap, &l);
  uint64_t *fill_n = (uint64_t *)(r->io_h + l.fill_n), *fill = (uint64_t *)(r->io_h + l.fill);
  uint64_t at = 0;
  for (uint32_t k = 0; k < r->dev.n_classes; k++) {
    for (uint64_t i = 0; i < fill_n[k]; i++) fl_pool_free(&p->pool, fill[at + i]);
    at += fill_n[k];
    r->top[k] -= fill_n[k];
    p->reserved_bytes -= fill_n[k] * p->pool.classes[k].slot_bytes;
    fill_n[k] = 0;
  }
}

/* Releases the limbo slabs whose marks the reclamation horizon has passed
 * (admit_round.h): with to_pool 0, in a part of one class onto its
 * reservoir, by the round's first kernel (r->top counts them from here),
 * else, or when the reservoir cannot grow, back to the pool now. */
static void release_limbo(fl_cache *c, uint32_t part, int to_pool) {
  fl_part *p = &c->parts[part];
  fl_admit_round *r = p->round;
  uint64_t horizon = r->n_marks ? fl_cache_horizon(c) : 0, end = r->limbo_released;
  uint32_t k = 0;
  while (k < r->n_marks && r->marks[k].epoch < horizon) end = r->marks[k++].end;
  if (k == 0) return;
  memmove(r->marks, r->marks + k, (r->n_marks - k) * sizeof *r->marks);
  r->n_marks -= k;
  uint64_t n = end - r->limbo_released, cap;
  /* A reservoir that cannot grow sends the slabs to the pool instead. */
  if (!to_pool && r->dev.n_classes == 1 &&
      (r->top[0] + n <= r->cap[0] || grow(c, r, 0, r->top[0] + n, &cap) == cudaSuccess)) {
    r->top[0] += n;
    p->reserved_bytes += n * p->pool.classes[0].slot_bytes;
  } else {
    for (uint64_t i = r->limbo_released; i < end; i++)
      fl_pool_free(&p->pool, r->limbo[i % r->limbo_cap]);
    fl_pool_compact(&p->pool);
    r->limbo_tail = end;
  }
  r->limbo_released = end;
}

void fl_round_release_limbo(fl_cache *c, uint32_t part) {
  if (c->parts[part].round) release_limbo(c, part, 1);
}

/* Grows the limbo ring (doubling) to hold `slabs`, keeping the slabs in
 * it. The part's last round is over: nothing reads the ring. */
static fl_status ring_fit(fl_cache *c, uint32_t part, uint64_t slabs) {
  fl_admit_round *r = c->parts[part].round;
  if (slabs <= r->limbo_cap) return FL_OK;
  uint64_t cap = r->limbo_cap ? 2 * r->limbo_cap : 4096;
  while (cap < slabs) cap *= 2;
  uint64_t *ring = NULL;
  /* Pinned memory is mapped at the same address for the device (UVA):
   * the kernels write and read the slabs straight in it. */
  cudaError_t e = fl_fault_hit(FL_FAULT_ROUND_GROW) ? cudaErrorMemoryAllocation
                                                    : cudaMallocHost((void **)&ring, cap * 8);
  if (e != cudaSuccess)
    return fl_fail(c, FL_ERR_OUT_OF_MEMORY, "allocating part %u's room for %llu evicted slabs: %s",
                   part, (unsigned long long)cap, cudaGetErrorString(e));
  for (uint64_t i = r->limbo_tail; i < r->limbo_head; i++) ring[i % cap] = r->limbo[i % r->limbo_cap];
  cudaFreeHost(r->limbo);
  fl_cuda_allocated(c->fixed.cuda, 1);
  r->limbo = ring, r->limbo_cap = cap;
  return FL_OK;
}

/* Asks the round to evict `want` cached entries and to recycle what
 * release_limbo gave it (fl_evict_in in the input block), growing the ring
 * to hold the slabs still in use and the new ones. */
static fl_status ask_eviction(fl_cache *c, uint32_t part, uint64_t want) {
  fl_admit_round *r = c->parts[part].round;
  fl_status st = ring_fit(c, part, r->limbo_head - r->limbo_tail + want);
  if (st != FL_OK) return st;
  io_layout l;
  io_layout_of(r->dev.n_classes, c->fixed.n_tables, r->fill_cap, &l);
  fl_evict_in in = {.want = want,
                    .ring = r->limbo,
                    .ring_cap = r->limbo_cap,
                    .at = r->limbo_head,
                    .recycle_from = r->limbo_tail,
                    .recycle_n = r->limbo_released - r->limbo_tail,
                    .now = (uint32_t)__atomic_load_n(&c->batch, __ATOMIC_RELAXED)};
  memcpy(r->io_h + l.evict, &in, sizeof in);
  r->evict_want = want;
  return FL_OK;
}

fl_status fl_round_reserve(fl_cache *c, uint32_t part, uint64_t fill) {
  fl_admit_round *r = c->parts[part].round;
  fl_status st = fl_round_settle(c, part, 1);
  /* Not the input block: every round uploads it whole, so it stays the
   * size rounds use; sized for a reserve's largest batch it would multiply
   * every small round's upload. */
  /* Two bursts: the slabs of the last, still in limbo, and the next's. */
  uint64_t slabs = 2 * fl_cache_evict_burst(c, part);
  if (st == FL_OK) st = ring_fit(c, part, slabs);
  /* Each class's reservoir takes a round's fill; a part of one class also
   * recycles the bursts' slabs onto it (release_limbo). */
  uint64_t want = fill + (r->dev.n_classes == 1 ? slabs : 0);
  for (uint32_t k = 0; k < r->dev.n_classes && st == FL_OK; k++)
    st = reservoir_fit(c, part, k, r->top[k] + want);
  return st;
}

fl_status fl_round_prepare(fl_cache *c, uint32_t part, const uint64_t *need) {
  fl_part *p = &c->parts[part];
  fl_admit_round *r = p->round;
  /* With no round in flight (the first, or after a failed launch), the last
   * upload may still read the input block: let it finish. */
  if (!r->event) FL_CUDA_TRY(c, cudaStreamSynchronize(maint(c)));
  uint64_t t0 = fl_now_ns();
  fl_status st = fl_round_settle(c, part, 1);
  fl_cache_add(c, FL_STAT_NS_ADMISSION_WAIT, fl_now_ns() - t0);
  if (st != FL_OK) return st;
  fl_cache_collect(c);
  st = fl_cache_trim_unified(c, part);
  if (st != FL_OK) return st; /* nothing taken from the pool yet */
  release_limbo(c, part, 0);
  /* The eviction runs in the round (ask_eviction), so its slabs serve
   * rounds two or more later, once no query can read them: the
   * reservoirs' slack covers that. */
  uint64_t want = fl_cache_evict_want(c, part, 0);
  int starved = 0;
  st = refill(c, part, need, &starved);
  /* A class with no slot and no page. In a part of one class the round
   * admits what its slots allow and evicts as a starved pool must; its
   * slabs serve the rounds after the next. A class among several needs
   * whole pages, which only a prompt eviction frees: the host's, whose
   * slabs are back in the pool a round earlier, and compaction empties
   * pages. With the round's eviction instead, admission dwindles in
   * ChurnRecyclesEverySlab under memcheck's slow timing. */
  if (st == FL_OK && starved) {
    fl_cache_add(c, FL_STAT_ROUNDS_STARVED, 1);
    if (r->dev.n_classes == 1) {
      want = fl_cache_evict_want(c, part, 1);
    } else {
      st = fl_cache_make_room(c, part, 1);
      want = 0;
    }
  }
  if (st == FL_OK) st = ask_eviction(c, part, want);
  if (st != FL_OK) {
    unfill(c, part);
    return st;
  }
  uint32_t n = r->dev.n_classes;
  io_layout l;
  io_layout_of(n, c->fixed.n_tables, r->fill_cap, &l);
  memcpy(r->io_h + l.top, r->top, 8ull * n);
  memset(r->io_h + l.count, 0, 8ull * FL_ROUND_COUNTS);
  return FL_OK;
}

/* Builds the round's graph: the input block's upload, the eviction, the
 * admission kernels, the status download. */
static fl_status build_graph(fl_cache *c, uint32_t part, uint64_t keys) {
  fl_admit_round *r = c->parts[part].round;
  drop_graph(r);
  cudaGraph_t g = NULL;
  void *last = NULL;
  cudaGraphExec_t exec = NULL;
  cudaError_t e = cudaGraphCreate(&g, 0);
  fl_launch_to to = {NULL, g, &last, 0};
  if (e == cudaSuccess)
    e = fl_launch_copy(to, r->io_d, r->io_h, r->io_bytes, cudaMemcpyHostToDevice);
  if (e == cudaSuccess)
    e = (cudaError_t)fl_launch_round_evict(to, c->parts[part].index,
                                           (const fl_evict_in *)r->evict_in, r->evict);
  if (e == cudaSuccess) e = (cudaError_t)fl_admit_round_nodes(to, r->io_d, r->dev, keys);
  if (e == cudaSuccess)
    e = fl_launch_copy(to, r->status_h, r->dev.top, status_bytes(r->dev.n_classes),
                       cudaMemcpyDeviceToHost);
  if (e == cudaSuccess)
    e = fl_fault_hit(FL_FAULT_ROUND_GRAPH) ? cudaErrorInvalidValue : cudaGraphInstantiate(&exec, g, 0);
  if (g) cudaGraphDestroy(g);
  if (e != cudaSuccess) {
    (void)cudaGetLastError();
    return fl_fail(c, FL_ERR_CUDA, "building the admission round's graph: %s",
                   cudaGetErrorString(e));
  }
  r->graph = exec;
  r->graph_keys = keys;
  return FL_OK;
}

fl_status fl_round_launch(fl_cache *c, uint32_t part, const void *args, size_t args_bytes,
                          const uint8_t *skip, uint64_t n_keys, void *after, void *done) {
  fl_admit_round *r = c->parts[part].round;
  io_layout l;
  io_layout_of(r->dev.n_classes, c->fixed.n_tables, r->fill_cap, &l);
  memcpy(r->io_h, args, args_bytes);
  memcpy(r->io_h + l.skip, skip, c->fixed.n_tables);
  fl_status st = FL_OK;
  if (!r->graph || n_keys > r->graph_keys) {
    /* Sized for the batch or more: batches of changing sizes rarely
     * build it again. */
    uint64_t keys = 4096;
    while (keys < n_keys) keys *= 2;
    st = build_graph(c, part, keys);
  }
  void *ev = NULL;
  if (st == FL_OK) st = fl_event_get(c, &ev);
  if (st != FL_OK) {
    unfill(c, part);
    return st;
  }
  cudaStream_t ms = maint(c);
  cudaError_t e = cudaStreamWaitEvent(ms, (cudaEvent_t)after, 0);
  if (e == cudaSuccess)
    e = fl_fault_hit(FL_FAULT_ROUND_LAUNCH) ? cudaErrorInvalidValue
                                            : cudaGraphLaunch((cudaGraphExec_t)r->graph, ms);
  if (e != cudaSuccess) {
    fl_event_release(c, ev);
    unfill(c, part);
    return fl_fail(c, FL_ERR_CUDA, "admission round launch failed: %s", cudaGetErrorString(e));
  }
  /* The round is enqueued: from here its status is the device's. */
  e = cudaEventRecord((cudaEvent_t)ev, ms);
  if (e == cudaSuccess) e = cudaEventRecord((cudaEvent_t)done, ms);
  if (e != cudaSuccess) {
    /* No event to settle on: wait for the round here instead. */
    cudaError_t sync = cudaStreamSynchronize(ms);
    fl_event_release(c, ev);
    r->event = NULL;
    if (sync == cudaSuccess) (void)apply_status(c, part);
    return fl_fail(c, FL_ERR_CUDA, "ending an admission round: %s", cudaGetErrorString(e));
  }
  r->event = ev;
  return FL_OK;
}
