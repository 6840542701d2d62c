/* query_cuda.c: the CUDA engine for one part batch, on the caller's stream:
 *   1. one upload of the launch arguments (and of host ids);
 *   2. the fused index kernel (all tables, one launch);
 *   3. the miss count and list download on a side stream (misses, and hits
 *      of unified-index pointers with their row addresses), while
 *   4. the decoupled hit-copy kernel runs on the caller's stream;
 *   5. those rows fetched from the store on the host into pinned staging
 *      (pointers through their references, misses by id), one upload, one
 *      scatter kernel into the outputs;
 *   6. admission: rows copied from the staging into slabs, and new pointers,
 *      published by one kernel on the maintenance stream (index writers never
 *      overlap).
 * Outputs in unregistered host memory go through a device buffer and one
 * download at the end. */
#include <cuda_runtime_api.h>
#include <stdlib.h>
#include <string.h>

#include "cache/maint_kernels.h"
#include "common/cuda_check.h"
#include "cache/cuda_state.h"
#include "fusion/query.h"
#include "fusion/query_kernels.h"

static uint64_t align256(uint64_t x) { return (x + 255u) & ~255ull; }

/* Byte layout of one part batch's scratch, identical on device and host. */
typedef struct layout {
  uint64_t args, scan_index, scan_copy, offsets, codes, ids, header_end; /* uploaded together */
  uint64_t locs, miss_pos, miss_ids, miss_locs, counters, out, staging, src_off, pos, total;
  uint64_t host_total; /* pinned: header + miss list + staging + src_off + pos */
} layout;

static void plan_layout(const fl_part_batch *b, uint64_t host_ids, uint64_t out_bytes, layout *l) {
  uint64_t o = 0, n = b->n_keys, na = b->n_args;
  l->args = o, o = align256(o + na * sizeof(fl_batch_arg));
  l->scan_index = o, o = align256(o + (na + 1) * 8);
  l->scan_copy = o, o = align256(o + (na + 1) * 8);
  l->offsets = o, o = align256(o + na * 8);
  l->codes = o, o = align256(o + b->c->n_tables * sizeof(fl_code));
  l->ids = o, o = align256(o + host_ids * 8);
  l->header_end = o;
  l->locs = o, o = align256(o + n * 8);
  l->miss_pos = o, o = align256(o + n * 4);
  l->miss_ids = o, o = align256(o + n * 8);
  l->miss_locs = o, o = align256(o + n * 8);
  l->counters = o, o = align256(o + 16);
  l->staging = o, o = align256(o + n * ((b->max_row + 15) & ~15ull) + 16 * na);
  l->src_off = o, o = align256(o + n * 8);
  l->pos = o, o = align256(o + n * 4);
  l->out = o, o = align256(o + out_bytes);
  l->total = o;
  l->host_total = l->out;
}

/* Where a caller pointer can be used from the device: its device address, or
 * NULL when it is unregistered host memory. */
static const void *device_view(const void *p) {
  struct cudaPointerAttributes at;
  if (cudaPointerGetAttributes(&at, p) != cudaSuccess) {
    (void)cudaGetLastError();
    return NULL;
  }
  if (at.type == cudaMemoryTypeUnregistered) return NULL;
  return at.devicePointer;
}

static uint64_t round32(uint64_t x) { return (x + 31u) & ~31ull; }

fl_status fl_query_part_cuda(fl_part_batch *b) {
  fl_cache *c = b->c;
  cudaStream_t stream = (cudaStream_t)b->stream;
  fl_status st = FL_OK;
  uint64_t t0 = fl_now_ns();
  /* Resolve where ids and outputs live. Host args keep the caller's pointers
   * (for messages); dargs get device-usable ones. */
  fl_batch_arg *dargs = malloc(b->n_args * sizeof *dargs);
  uint8_t **host_out = calloc(b->n_args, sizeof *host_out);
  if (!dargs || !host_out) {
    free(dargs);
    free(host_out);
    return fl_fail(c, FL_ERR_OUT_OF_MEMORY, "out of host memory");
  }
  uint64_t host_ids = 0, out_bytes = 0;
  for (uint32_t a = 0; a < b->n_args; a++) {
    dargs[a] = b->args[a];
    dargs[a].ids = device_view(b->args[a].ids);
    if (!dargs[a].ids) host_ids += b->args[a].n;
    dargs[a].out = (uint8_t *)device_view(b->args[a].out);
    if (!dargs[a].out) out_bytes = align256(out_bytes + (uint64_t)b->args[a].n * b->args[a].vec_bytes);
  }
  layout l;
  plan_layout(b, host_ids, out_bytes, &l);
  fl_scratch *x;
  if ((st = fl_cuda_scratch_acquire(c, l.total, l.host_total, &x)) != FL_OK) {
    free(dargs);
    free(host_out);
    return st;
  }
  uint8_t *D = x->dev, *H = x->host;
  /* Fill the header: args with device pointers, scans, offsets, codes, ids. */
  uint64_t *scan_i = (uint64_t *)(H + l.scan_index), *scan_c = (uint64_t *)(H + l.scan_copy);
  uint64_t *offsets = (uint64_t *)(H + l.offsets), *ids_h = (uint64_t *)(H + l.ids);
  uint64_t ids_at = 0, out_at = 0;
  scan_i[0] = scan_c[0] = 0;
  for (uint32_t a = 0; a < b->n_args; a++) {
    fl_batch_arg *d = &dargs[a];
    if (!d->ids) {
      memcpy(ids_h + ids_at, b->args[a].ids, (size_t)d->n * 8);
      d->ids = (const uint64_t *)(D + l.ids) + ids_at;
      ids_at += d->n;
    }
    if (!d->out) {
      host_out[a] = b->args[a].out;
      d->out = D + l.out + out_at;
      out_at = align256(out_at + (uint64_t)d->n * d->vec_bytes);
    }
    d->width = fl_batch_width(d->vec_bytes, (uint64_t)(uintptr_t)d->out);
    d->lanes = d->vec_bytes / d->width;
    b->args[a].width = d->width;
    b->args[a].lanes = d->lanes;
    offsets[a] = d->key_offset;
    scan_i[a + 1] = scan_i[a] + round32(d->n);
    scan_c[a + 1] = scan_c[a] + round32((uint64_t)d->n * d->lanes);
  }
  memcpy(H + l.args, dargs, b->n_args * sizeof *dargs);
  for (uint32_t t = 0; t < c->n_tables; t++)
    memcpy(H + l.codes + t * sizeof(fl_code), &c->tables[t].code, sizeof(fl_code));

  pthread_mutex_lock(&c->lock);
  int64_t ticket = fl_reclaim_begin(&c->reclaim);
  pthread_mutex_unlock(&c->lock);
  if (ticket < 0) {
    fl_cuda_scratch_release(c, x);
    free(dargs);
    free(host_out);
    return fl_fail(c, FL_ERR_OUT_OF_MEMORY, "out of host memory registering the query");
  }
  const fl_batch_arg *A = (const fl_batch_arg *)(D + l.args);
  unsigned long long *counters = (unsigned long long *)(D + l.counters);
  uint64_t *locs = (uint64_t *)(D + l.locs);
  fl_misses m;
  memset(&m, 0, sizeof m);
  fl_admit_plan plan;
  memset(&plan, 0, sizeof plan);
  int e = 0;
  uint64_t n_miss = 0, bad = ~0ull;
  /* cfg.profile: timing events around the two kernels (created per call:
   * the pooled events carry no timing). */
  cudaEvent_t prof[3] = {NULL, NULL, NULL};
  for (int i = 0; i < 3 && c->cfg.profile; i++)
    if (cudaEventCreate(&prof[i]) != cudaSuccess) prof[i] = NULL;
#define TRY(call)                                                                      \
  do {                                                                                 \
    e = (int)(call);                                                                   \
    if (e) {                                                                           \
      st = fl_fail(c, FL_ERR_CUDA, "%s failed: %s", #call,                             \
                   cudaGetErrorString((cudaError_t)e));                                \
      goto done;                                                                       \
    }                                                                                  \
  } while (0)
  TRY(cudaMemcpyAsync(D, H, l.header_end, cudaMemcpyHostToDevice, stream));
  if (prof[0]) TRY(cudaEventRecord(prof[0], stream));
  TRY(fl_launch_index(c->parts[b->part].index, (const fl_code *)(D + l.codes), A,
                      (const uint64_t *)(D + l.scan_index), b->n_args, scan_i[b->n_args], b->now,
                      locs, (uint32_t *)(D + l.miss_pos), (uint64_t *)(D + l.miss_ids),
                      (uint64_t *)(D + l.miss_locs), counters, stream));
  /* The miss list comes down on the side stream while hits are copied. */
  TRY(cudaEventRecord((cudaEvent_t)x->ready, stream));
  if (prof[1]) TRY(cudaEventRecord(prof[1], stream));
  TRY(fl_launch_copy_hits(A, (const uint64_t *)(D + l.scan_copy), b->n_args, scan_c[b->n_args],
                          locs, stream));
  if (prof[2]) TRY(cudaEventRecord(prof[2], stream));
  TRY(cudaStreamWaitEvent((cudaStream_t)x->side, (cudaEvent_t)x->ready, 0));
  TRY(cudaMemcpyAsync(H + l.counters, D + l.counters, 16, cudaMemcpyDeviceToHost,
                      (cudaStream_t)x->side));
  TRY(cudaStreamSynchronize((cudaStream_t)x->side));
  uint64_t t1 = fl_now_ns();
  atomic_fetch_add(&c->ns_index, t1 - t0);
  n_miss = ((unsigned long long *)(H + l.counters))[0];
  bad = ((unsigned long long *)(H + l.counters))[1];
  if (bad != ~0ull) {
    uint64_t id;
    const fl_batch_arg *a = &b->args[fl_batch_find(offsets, b->n_args, bad)];
    const fl_batch_arg *da = &dargs[fl_batch_find(offsets, b->n_args, bad)];
    TRY(cudaMemcpy(&id, da->ids + (bad - a->key_offset), 8, cudaMemcpyDeviceToHost));
    st = fl_query_range_error(b, bad, id);
    goto done;
  }
  if (n_miss) {
    TRY(cudaMemcpyAsync(H + l.miss_pos, D + l.miss_pos, n_miss * 4, cudaMemcpyDeviceToHost,
                        (cudaStream_t)x->side));
    TRY(cudaMemcpyAsync(H + l.miss_ids, D + l.miss_ids, n_miss * 8, cudaMemcpyDeviceToHost,
                        (cudaStream_t)x->side));
    TRY(cudaMemcpyAsync(H + l.miss_locs, D + l.miss_locs, n_miss * 8, cudaMemcpyDeviceToHost,
                        (cudaStream_t)x->side));
    TRY(cudaStreamSynchronize((cudaStream_t)x->side));
  }
  if ((st = fl_misses_group(b, (uint32_t *)(H + l.miss_pos), (uint64_t *)(H + l.miss_ids),
                            (uint64_t *)(H + l.miss_locs), n_miss, &m)) != FL_OK)
    goto done;
  fl_query_count(b, &m);
  if (n_miss) {
    uint64_t *gen = malloc(c->n_tables * sizeof *gen);
    if (!gen) {
      st = fl_fail(c, FL_ERR_OUT_OF_MEMORY, "out of host memory");
      goto done;
    }
    st = fl_misses_fetch(b, &m, H + l.staging, gen);
    if (st == FL_OK) {
      memcpy(H + l.src_off, m.src_off, n_miss * 8);
      memcpy(H + l.pos, m.pos, n_miss * 4);
      /* One upload of staging rows, offsets and positions (contiguous). */
      e = (int)cudaMemcpyAsync(D + l.staging, H + l.staging, l.out - l.staging,
                               cudaMemcpyHostToDevice, stream);
      if (!e)
        e = fl_launch_scatter(A, (const uint64_t *)(D + l.offsets), b->n_args, D + l.staging,
                              (const uint64_t *)(D + l.src_off), (const uint32_t *)(D + l.pos),
                              n_miss, stream);
      if (e) st = fl_fail(c, FL_ERR_CUDA, "miss upload/scatter failed: %s",
                          cudaGetErrorString((cudaError_t)e));
    }
    uint64_t t2 = fl_now_ns();
    atomic_fetch_add(&c->ns_miss_fetch, t2 - t1);
    if (st == FL_OK) {
      /* Admission on the maintenance stream, after the staging upload. */
      pthread_mutex_lock(&c->lock);
      st = fl_admit_plan_make(b, &m, gen, &plan);
      if (st == FL_OK && plan.n) {
        void *mdev, *mhost;
        uint64_t n = plan.n, bytes = n * (8 + 8 + 8 + 4 + 1) + 64;
        st = fl_cuda_maint_buffers(c, bytes, bytes, &mdev, &mhost);
        if (st == FL_OK) {
          uint8_t *h = mhost, *d = mdev;
          memcpy(h, plan.keys, n * 8);
          memcpy(h + n * 8, plan.slots, n * 8);
          memcpy(h + n * 16, plan.src_off, n * 8);
          memcpy(h + n * 24, plan.row_bytes, n * 4);
          for (uint64_t k = 0; k < n; k++)
            ((uint32_t *)(h + n * 24))[k] = (plan.row_bytes[k] + 3u) & ~3u;
          cudaStream_t ms = (cudaStream_t)c->cuda->maint;
          e = (int)cudaEventRecord((cudaEvent_t)x->ready, stream);
          if (!e) e = (int)cudaStreamWaitEvent(ms, (cudaEvent_t)x->ready, 0);
          if (!e) e = (int)cudaMemcpyAsync(d, h, n * 28, cudaMemcpyHostToDevice, ms);
          if (!e)
            e = fl_launch_admit(c->parts[b->part].index, (const uint64_t *)d,
                                (const uint64_t *)(d + n * 8), D + l.staging,
                                (const uint64_t *)(d + n * 16), (const uint32_t *)(d + n * 24), n,
                                b->now, d + n * 28, ms);
          if (!e) e = (int)cudaMemcpyAsync(h + n * 28, d + n * 28, n, cudaMemcpyDeviceToHost, ms);
          if (!e) e = (int)cudaStreamSynchronize(ms);
          if (e) {
            st = fl_fail(c, FL_ERR_CUDA, "admission failed: %s", cudaGetErrorString((cudaError_t)e));
            fl_admit_plan_undo(b, &plan);
          } else {
            fl_admit_plan_finish(b, &plan, h + n * 28);
          }
        } else {
          fl_admit_plan_abandon(b, &plan);
        }
      }
      pthread_mutex_unlock(&c->lock);
      atomic_fetch_add(&c->ns_admission, fl_now_ns() - t2);
    }
    free(gen);
  }
  /* Outputs in unregistered host memory come down last. */
  for (uint32_t a = 0; a < b->n_args && st == FL_OK; a++)
    if (host_out[a])
      TRY(cudaMemcpyAsync(host_out[a], dargs[a].out, (size_t)dargs[a].n * dargs[a].vec_bytes,
                          cudaMemcpyDeviceToHost, stream));
done:
#undef TRY
  if (prof[0] && prof[1] && prof[2] && st == FL_OK && cudaEventSynchronize(prof[2]) == cudaSuccess) {
    float index_ms = 0, copy_ms = 0;
    cudaEventElapsedTime(&index_ms, prof[0], prof[1]);
    cudaEventElapsedTime(&copy_ms, prof[1], prof[2]);
    atomic_fetch_add(&c->gpu_ns_index, (uint64_t)(index_ms * 1e6));
    atomic_fetch_add(&c->gpu_ns_hit_copy, (uint64_t)(copy_ms * 1e6));
  }
  for (int i = 0; i < 3; i++)
    if (prof[i]) cudaEventDestroy(prof[i]);
  {
    /* The query's reads end, and the scratch frees up, when the stream gets
     * here. */
    void *ev = NULL;
    pthread_mutex_lock(&c->lock);
    if (fl_cuda_event_get(c, &ev) == FL_OK &&
        cudaEventRecord((cudaEvent_t)ev, stream) == cudaSuccess) {
      fl_reclaim_end(&c->reclaim, ticket, ev);
    } else {
      /* No event: wait for the stream instead, then end at once. */
      cudaStreamSynchronize(stream);
      if (ev) fl_cuda_event_release(c, ev);
      fl_reclaim_end(&c->reclaim, ticket, NULL);
    }
    pthread_mutex_unlock(&c->lock);
    cudaEventRecord((cudaEvent_t)x->busy_until, stream);
  }
  fl_cuda_scratch_release(c, x);
  fl_admit_plan_free(&plan);
  fl_misses_free(&m);
  free(dargs);
  free(host_out);
  return st;
}
