/* cuda_state.c: the CUDA backend's streams, events and scratch buffers (see
 * cuda_state.h), and the cache's memory allocation for both backends. */
#include "cache/cuda_state.h"

#include <cuda_runtime_api.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>

#include "cache/admit_kernels.h"
#include "cache/cache.h"
#include "common/clock.h"
#include "common/courier.h"
#include "common/cuda_check.h"
#include "common/mutant.h"
#include "dram_store/store_internal.h"

fl_status fl_cache_mem_alloc(fl_cache *c, uint64_t bytes, void **out) {
  *out = NULL;
  if (c->fixed.backend == FL_BACKEND_CUDA) {
    cudaError_t e = cudaMalloc(out, bytes ? bytes : 16);
    if (e != cudaSuccess) {
      (void)cudaGetLastError();
      *out = NULL;
      return fl_fail(NULL, e == cudaErrorMemoryAllocation ? FL_ERR_OUT_OF_MEMORY : FL_ERR_CUDA,
                     "cudaMalloc of %llu bytes failed: %s", (unsigned long long)bytes,
                     cudaGetErrorString(e));
    }
    return FL_OK;
  }
  /* Host backend: 64-byte aligned so 16-byte vector copies stay aligned. */
  if (posix_memalign(out, 64, bytes ? bytes : 16) != 0) {
    *out = NULL;
    return fl_fail(NULL, FL_ERR_OUT_OF_MEMORY, "out of host memory: %llu bytes for the cache",
                   (unsigned long long)bytes);
  }
  return FL_OK;
}

void fl_cache_mem_free(fl_cache *c, void *p) {
  if (!p) return;
  if (c->fixed.backend == FL_BACKEND_CUDA)
    cudaFree(p);
  else
    free(p);
}

static int map_region(void *p, size_t bytes) {
  if (cudaHostRegister(p, bytes, cudaHostRegisterMapped | cudaHostRegisterPortable) == cudaSuccess)
    return 0;
  (void)cudaGetLastError();
  return -1;
}

static int unmap_region(void *p, size_t bytes) {
  (void)bytes;
  return cudaHostUnregister(p) == cudaSuccess ? 0 : -1;
}

/* Where the device reads p in place; NULL (p NULL, or not mapped). */
static const void *device_address(const void *p) {
  void *d = NULL;
  if (p && cudaHostGetDevicePointer(&d, (void *)p, 0) != cudaSuccess) {
    (void)cudaGetLastError();
    d = NULL;
  }
  return d;
}

/* Whether the device reads registered host memory at its host address (a
 * hashed row's reference is one): pointers into the store's slots are then
 * read in place as they are. */
static int host_pointers_readable(const fl_cache *c) {
  int yes = 0;
  if (cudaDeviceGetAttribute(&yes, cudaDevAttrCanUseHostPointerForRegisteredMem,
                             c->fixed.cfg.device) != cudaSuccess) {
    (void)cudaGetLastError();
    yes = 0;
  }
  return yes;
}

/* Maps the store's rows and seqlock stripes for zero-copy reads: its dense
 * tables' rows, and its hashed tables' slots when the cache keeps
 * unified-index pointers; the cache reads nothing in place when that fails
 * or no table is readable so. */
static fl_status zero_copy_setup(fl_cache *c) {
  fl_cuda_state *s = c->fixed.cuda;
  fl_store *store = c->fixed.store;
  const int slots = c->fixed.cfg.unified_entries > 0 && host_pointers_readable(c);
  int any = 0;
  for (uint32_t t = 0; t < c->fixed.n_tables && !any; t++)
    any = fl_store_dense_rows(store, t) || (slots && fl_store_slot_layout(store, t).vec_stride);
  if (!c->fixed.cfg.zero_copy_rows || !any || fl_store_map_rows(store, map_region, unmap_region) != 0)
    return FL_OK;
  uint32_t n = c->fixed.n_tables ? c->fixed.n_tables : 1;
  s->zc_rows = calloc(n, sizeof *s->zc_rows);
  s->zc_slots = calloc(n, sizeof *s->zc_slots);
  if (!s->zc_rows || !s->zc_slots) {
    free(s->zc_rows);
    free(s->zc_slots);
    s->zc_rows = NULL;
    s->zc_slots = NULL;
    fl_store_unmap_rows(store);
    return fl_fail(NULL, FL_ERR_OUT_OF_MEMORY, "out of host memory");
  }
  for (uint32_t t = 0; t < c->fixed.n_tables; t++) {
    s->zc_rows[t] = device_address(fl_store_dense_rows(store, t));
    if (slots) s->zc_slots[t] = fl_store_slot_layout(store, t);
  }
  s->zc_seq = device_address(fl_store_seq_stripes(store));
  uint64_t asked = c->fixed.cfg.zero_copy_rows;
  s->zc_limit = s->zc_seq && asked != FL_ZERO_COPY_AUTO ? asked : 0;
  return FL_OK;
}

void fl_cuda_state_unmap(fl_cache *c) {
  fl_cuda_state *s = c->fixed.cuda;
  if (s->zc_rows) fl_store_unmap_rows(c->fixed.store);
  free(s->zc_rows);
  free(s->zc_slots);
  s->zc_rows = NULL;
  s->zc_slots = NULL;
  s->zc_seq = NULL;
  s->zc_limit = 0;
}

fl_status fl_cuda_state_create(fl_cache *c) {
  fl_cuda_state *s = calloc(1, sizeof *s);
  if (!s) return fl_fail(NULL, FL_ERR_OUT_OF_MEMORY, "out of host memory");
  c->fixed.cuda = s;
  pthread_mutex_init(&s->events_lock, NULL);
  pthread_mutex_init(&s->scratch_lock, NULL);
  s->device = c->fixed.cfg.device;
  FL_CUDA_TRY(NULL, cudaSetDevice(s->device));
  cudaStream_t st;
  FL_CUDA_TRY(NULL, cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
  s->maint = st;
  /* Loaded now: the first launch of each would stall a query or a round. */
  fl_status loaded = fl_load_module(NULL, "the maintenance kernels", fl_maint_kernels_load);
  if (loaded == FL_OK) loaded = fl_load_module(NULL, "the admission kernels", fl_admit_kernels_load);
  return loaded == FL_OK ? zero_copy_setup(c) : loaded;
}

void fl_cuda_state_sync(fl_cache *c) {
  fl_cuda_state *s = c->fixed.cuda;
  if (!s) return;
  if (s->maint) cudaStreamSynchronize((cudaStream_t)s->maint);
  for (size_t i = 0; i < s->n_scratch; i++) {
    if (s->scratch[i].busy_until) cudaEventSynchronize((cudaEvent_t)s->scratch[i].busy_until);
    if (s->scratch[i].admit_done) cudaEventSynchronize((cudaEvent_t)s->scratch[i].admit_done);
  }
}

void fl_cuda_state_destroy(fl_cache *c) {
  fl_cuda_state *s = c->fixed.cuda;
  if (!s) return;
  fl_cuda_state_sync(c);
  for (size_t i = 0; i < s->n_scratch; i++) {
    fl_scratch *x = &s->scratch[i];
    cudaFree(x->dev);
    cudaFreeHost(x->host);
    if (x->busy_until) cudaEventDestroy((cudaEvent_t)x->busy_until);
    if (x->admit_done) cudaEventDestroy((cudaEvent_t)x->admit_done);
  }
  /* Events still held by in-flight tickets are done (synced above). */
  for (uint32_t i = 0; i < c->reclaim.n_inflight; i++)
    if (c->reclaim.inflight[i].event) cudaEventDestroy((cudaEvent_t)c->reclaim.inflight[i].event);
  for (size_t i = 0; i < s->n_free_events; i++) cudaEventDestroy((cudaEvent_t)s->free_events[i]);
  cudaFree(s->m_dev);
  cudaFreeHost(s->m_host);
  if (s->maint) cudaStreamDestroy((cudaStream_t)s->maint);
  fl_cuda_state_unmap(c);
  free(s->scratch);
  free(s->free_events);
  pthread_mutex_destroy(&s->events_lock);
  pthread_mutex_destroy(&s->scratch_lock);
  free(s);
  c->fixed.cuda = NULL;
}

int fl_event_done(void *ctx, void *event) {
  (void)ctx;
  cudaError_t e = cudaEventQuery((cudaEvent_t)event);
  if (e == cudaErrorNotReady) return 0;
  (void)cudaGetLastError();
  return 1;
}

void fl_event_release(void *ctx, void *event) {
  fl_cache *c = ctx;
  fl_cuda_state *s = c->fixed.cuda;
  if (!s) return;
  pthread_mutex_lock(&s->events_lock);
  if (s->n_free_events == s->cap_free_events) {
    size_t cap = s->cap_free_events ? s->cap_free_events * 2 : 16;
    void **f = realloc(s->free_events, cap * sizeof *f);
    if (!f) {
      pthread_mutex_unlock(&s->events_lock);
      cudaEventDestroy((cudaEvent_t)event);
      return;
    }
    s->free_events = f;
    s->cap_free_events = cap;
  }
  s->free_events[s->n_free_events++] = event;
  pthread_mutex_unlock(&s->events_lock);
}

fl_status fl_event_get(fl_cache *c, void **event) {
  fl_cuda_state *s = c->fixed.cuda;
  pthread_mutex_lock(&s->events_lock);
  void *pooled = s->n_free_events ? s->free_events[--s->n_free_events] : NULL;
  pthread_mutex_unlock(&s->events_lock);
  if (pooled) {
    *event = pooled;
    return FL_OK;
  }
  cudaEvent_t e;
  FL_CUDA_TRY(c, cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
  *event = e;
  return FL_OK;
}

/* Grows a device/pinned buffer pair that holds less than the needed sizes
 * to the `to` sizes (at least as large) with 1.5x slack, so that slowly
 * growing batches do not reallocate every time. */
static fl_status grow(fl_cache *c, void **dev, size_t *dev_bytes, size_t need_dev, size_t to_dev,
                      void **host, size_t *host_bytes, size_t need_host, size_t to_host) {
  if (need_dev > *dev_bytes) {
    cudaFree(*dev);
    *dev = NULL;
    *dev_bytes = 0;
    size_t n = to_dev + to_dev / 2;
    fl_cuda_allocated(c->fixed.cuda, 1);
    FL_CUDA_TRY(c, cudaMalloc(dev, n));
    *dev_bytes = n;
  }
  if (need_host > *host_bytes) {
    cudaFreeHost(*host);
    *host = NULL;
    *host_bytes = 0;
    size_t n = to_host + to_host / 2;
    fl_cuda_allocated(c->fixed.cuda, 1);
    FL_CUDA_TRY(c, cudaMallocHost(host, n));
    *host_bytes = n;
  }
  return FL_OK;
}

fl_status fl_cuda_state_maint_buffers(fl_cache *c, size_t dev_bytes, size_t host_bytes, void **dev,
                                void **host) {
  fl_cuda_state *s = c->fixed.cuda;
  fl_status st = grow(c, &s->m_dev, &s->m_dev_bytes, dev_bytes, dev_bytes, &s->m_host,
                      &s->m_host_bytes, host_bytes, host_bytes);
  *dev = s->m_dev;
  *host = s->m_host;
  return st;
}

void fl_scratch_unhold(fl_cache *c, fl_scratch *x) {
  uint64_t t = __atomic_load_n(&x->round_ticket, __ATOMIC_ACQUIRE);
  if (t) fl_courier_wait(c->courier, t);
}

/* A set no query holds whose last uses have not all ended yet. */
static int set_pending(fl_cache *c, const fl_scratch *y) {
  return (y->busy_until && !fl_event_done(c, y->busy_until)) ||
         (y->admit_done && !fl_event_done(c, y->admit_done));
}

/* Waits until y's last uses end: its round launched, then its query's and
 * its round's events. */
static void set_wait(fl_cache *c, fl_scratch *y) {
  fl_scratch_unhold(c, y);
  if (y->busy_until) cudaEventSynchronize((cudaEvent_t)y->busy_until);
  if (y->admit_done) cudaEventSynchronize((cudaEvent_t)y->admit_done);
  (void)cudaGetLastError();
}

/* Waits up to `ns` for y's last uses (its round launched already) to end,
 * asking its events between yields; 1 when they did. */
static int set_wait_briefly(fl_cache *c, const fl_scratch *y, uint64_t ns) {
  const uint64_t end = fl_now_ns() + ns;
  while (set_pending(c, y)) {
    if (fl_now_ns() > end) return 0;
    sched_yield();
  }
  return 1;
}

/* Which of the sets no query holds have had their last uses end. A set
 * seen ended since its last take is not asked again (ended_take), and
 * while one such set is free no other is asked (each ask is a driver
 * call; the others are asked once none is known, several found ended at
 * once). Else the free sets' events are asked with scratch_lock released
 * (a CUDA call may wait for the driver's locks, and every query's setup
 * takes scratch_lock), and an answer counts only for a set not taken
 * since (the same `takes`).
 * Called and returns with scratch_lock held; ended[i] for set i. Returns
 * how many sets are free now that were not asked about (given back, or
 * made, meanwhile). */
static size_t sets_ended(fl_cache *c, fl_cuda_state *s, int *ended) {
  size_t n = s->n_scratch, n_ask = 0, n_known = 0;
  uint64_t takes[FL_MAX_CONCURRENT_QUERIES];
  int ask[FL_MAX_CONCURRENT_QUERIES];
  for (size_t i = 0; i < n; i++) {
    const fl_scratch *y = &s->scratch[i];
    int free_set = !y->in_use && !y->kept;
    ended[i] = free_set && y->ended_take == y->takes;
    ask[i] = free_set && !ended[i];
    n_ask += ask[i];
    n_known += ended[i];
    takes[i] = y->takes;
  }
  if (!n_ask || n_known) return 0;
  pthread_mutex_unlock(&s->scratch_lock);
  /* Events and sets are never freed while the cache lives. */
  for (size_t i = 0; i < n; i++)
    if (ask[i]) ended[i] = !set_pending(c, &s->scratch[i]);
  pthread_mutex_lock(&s->scratch_lock);
  size_t unasked = 0;
  for (size_t i = 0; i < s->n_scratch; i++) {
    fl_scratch *y = &s->scratch[i];
    int same = i < n && (ask[i] || ended[i]) && y->takes == takes[i];
    ended[i] = same && ended[i];
    if (ended[i]) y->ended_take = takes[i];
    unasked += !same && !y->in_use && !y->kept;
  }
  return unasked;
}

fl_status fl_scratch_acquire(fl_cache *c, size_t dev_bytes, size_t host_bytes, uint32_t part,
                             fl_scratch **out, uint64_t *wait_ns, uint64_t *grow_ns) {
  fl_cuda_state *s = c->fixed.cuda;
  fl_status st = FL_OK;
  pthread_mutex_lock(&s->scratch_lock);
  if (dev_bytes > s->want_dev) s->want_dev = dev_bytes;
  if (host_bytes > s->want_host) s->want_host = host_bytes;
  fl_scratch *x = NULL;
  for (;;) {
    fl_scratch *pending = NULL;
    size_t n_pending = 0, n_posted = 0;
    uint64_t posted[FL_MAX_CONCURRENT_QUERIES];
    int ended[FL_MAX_CONCURRENT_QUERIES];
    size_t unasked = sets_ended(c, s, ended);
    for (size_t i = 0; i < s->n_scratch && !x; i++) {
      fl_scratch *y = &s->scratch[i];
      /* Pending: released but still read on the device, or held by its
       * admission round until the courier launches it. */
      uint64_t t = __atomic_load_n(&y->round_ticket, __ATOMIC_ACQUIRE);
      if (y->kept || (y->in_use && !t)) continue; /* a plan's, a running query's */
      if (t && y->round_part == part) posted[n_posted++] = t;
      if (!y->in_use && ended[i]) x = y;
      else if (n_pending++ == 0 || !t)
        pending = y; /* prefer one whose round is launched already */
    }
    if (!x && unasked) continue; /* a set came free meanwhile: ask it rather than make one */
    if (x || n_pending < FL_SCRATCH_PENDING_MAX) break;
    /* Another query may take it meanwhile: look again after the wait. */
    pthread_mutex_unlock(&s->scratch_lock);
    uint64_t t0 = fl_now_ns();
    /* The preferred set's round is launched: most end within
     * FL_SCRATCH_PATIENCE_NS, and the wait with them. One that runs longer
     * (an eviction's index scans, 0.5-0.8 ms on the H200) is not waited
     * out, nor is the courier, which settles it: shed a round of this part
     * it has not started, which frees its set at once; this batch's round
     * would shed it anyway (the courier is busy: rounds still run at its
     * pace). Else wait for the preferred set. */
    int shed = 0;
    if (__atomic_load_n(&pending->round_ticket, __ATOMIC_ACQUIRE) ||
        !set_wait_briefly(c, pending, FL_SCRATCH_PATIENCE_NS))
      for (size_t i = 0; i < n_posted && !shed; i++) shed = fl_courier_shed(c->courier, posted[i]);
    if (!shed) set_wait(c, pending);
    *wait_ns += fl_now_ns() - t0;
    pthread_mutex_lock(&s->scratch_lock);
  }
  uint64_t t_grow = fl_now_ns();
  int made = !x;
  if (!x) {
    if (!s->scratch) {
      /* Sets are referenced by pointer while in use: one array, never moved. */
      s->scratch = calloc(FL_MAX_CONCURRENT_QUERIES, sizeof *s->scratch);
      if (!s->scratch) {
        pthread_mutex_unlock(&s->scratch_lock);
        return fl_fail(c, FL_ERR_OUT_OF_MEMORY, "out of host memory");
      }
    }
    if (s->n_scratch == FL_MAX_CONCURRENT_QUERIES) {
      pthread_mutex_unlock(&s->scratch_lock);
      return fl_fail(c, FL_ERR_OUT_OF_MEMORY, "more than %d concurrent queries on one cache",
                     FL_MAX_CONCURRENT_QUERIES);
    }
    x = &s->scratch[s->n_scratch++];
    /* Events never recorded count as fired: the set starts free. */
    cudaEvent_t busy = NULL, admitted = NULL;
    if (cudaEventCreateWithFlags(&busy, cudaEventDisableTiming) != cudaSuccess ||
        cudaEventCreateWithFlags(&admitted, cudaEventDisableTiming) != cudaSuccess) {
      if (busy) cudaEventDestroy(busy);
      s->n_scratch--;
      pthread_mutex_unlock(&s->scratch_lock);
      return fl_fail(c, FL_ERR_CUDA, "creating the events of a query scratch set failed");
    }
    x->busy_until = busy;
    x->admit_done = admitted;
  }
  x->in_use = 1;
  x->takes++;
  size_t to_dev = s->want_dev, to_host = s->want_host;
  pthread_mutex_unlock(&s->scratch_lock);
  size_t had_bytes = x->dev_bytes, had_host = x->host_bytes;
  st = grow(c, &x->dev, &x->dev_bytes, dev_bytes, to_dev, &x->host, &x->host_bytes, host_bytes,
            to_host);
  /* Only a set made or grown counts: a set taken as it was costs nothing. */
  if (made || st != FL_OK || x->dev_bytes != had_bytes || x->host_bytes != had_host)
    *grow_ns += fl_now_ns() - t_grow;
  /* New device memory holds no empty set, even at the old address. */
  if (x->dev_bytes != had_bytes) x->clean_set = NULL;
  if (st != FL_OK) {
    pthread_mutex_lock(&s->scratch_lock);
    x->in_use = 0;
    pthread_mutex_unlock(&s->scratch_lock);
    return st;
  }
  *out = x;
  return FL_OK;
}

/* fl_cache_reserve's callers get a set each, and the pending ones. */
_Static_assert(FL_RESERVE_MAX_CALLERS + FL_SCRATCH_PENDING_MAX <= FL_MAX_CONCURRENT_QUERIES,
               "a reserve fits the sets a cache makes");

fl_status fl_scratch_reserve(fl_cache *c, size_t dev_bytes, size_t host_bytes,
                             uint32_t callers) {
  fl_scratch *held[FL_MAX_CONCURRENT_QUERIES];
  size_t want = FL_MUTANT_ON(20) ? 0 : (size_t)callers + FL_SCRATCH_PENDING_MAX, got = 0;
  uint64_t wait_ns = 0, grow_ns = 0;
  fl_status st = FL_OK;
  /* Held sets count as running queries': each acquire takes a free or
   * pending set, or makes one. */
  while (got < want && st == FL_OK) {
    st = fl_scratch_acquire(c, dev_bytes, host_bytes, FL_NO_PART, &held[got], &wait_ns, &grow_ns);
    got += st == FL_OK;
  }
  for (size_t i = 0; i < got; i++) fl_scratch_release(c, held[i]);
  return st;
}

void fl_scratch_keep(fl_cache *c, fl_scratch *x) {
  pthread_mutex_lock(&c->fixed.cuda->scratch_lock);
  x->kept = 1;
  pthread_mutex_unlock(&c->fixed.cuda->scratch_lock);
}

void fl_scratch_release(fl_cache *c, fl_scratch *x) {
  pthread_mutex_lock(&c->fixed.cuda->scratch_lock);
  x->in_use = 0;
  x->kept = 0;
  pthread_mutex_unlock(&c->fixed.cuda->scratch_lock);
}

void fl_scratch_round_done(fl_cache *c, fl_scratch *x, int release) {
  pthread_mutex_lock(&c->fixed.cuda->scratch_lock);
  __atomic_store_n(&x->round_ticket, 0, __ATOMIC_RELEASE);
  if (release) x->in_use = x->kept = 0;
  pthread_mutex_unlock(&c->fixed.cuda->scratch_lock);
}
