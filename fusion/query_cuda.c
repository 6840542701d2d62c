/* query_cuda.c: the CUDA engine for one part batch, on the caller's stream:
 *   1. one upload of the launch arguments (and of host ids);
 *   2. the fused index kernel (all tables, one launch), which also
 *      deduplicates the misses and unified-index hits into unique rows whose
 *      ids it writes straight into pinned host memory (miss_set.h);
 *   3. the counters' download on a side stream (one wait), while
 *   4. the decoupled hit-copy kernel runs on the caller's stream;
 *   5. the unique rows gathered from the store into pinned staging (pointer
 *      rows through their references) by one of the cache's workers, in
 *      stretches each uploaded as soon as it is gathered, while this thread
 *      readies the admission round; one scatter kernel expands them into
 *      every missed position: the answer is complete;
 *   6. admission as a round on the maintenance stream (admit_kernels.cu,
 *      cache/admit_round.h), after the upload and without the host waiting
 *      for it: fl_query returns. The query's scratch stays busy until the
 *      round is over.
 * Outputs in unregistered host memory go through a device buffer and one
 * download at the end. */
#include <cuda_runtime_api.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cache/admission.h"
#include "cache/cuda_state.h"
#include "common/cuda_check.h"
#include "dram_store/store_internal.h"
#include "fusion/admit_kernels.h"
#include "fusion/query.h"
#include "fusion/query_kernels.h"

static uint64_t align256(uint64_t x) { return (x + 255u) & ~255ull; }

/* Byte layout of one part batch's scratch. The header has the same offsets
 * on device and host; the rest differs. */
typedef struct layout {
  uint64_t args, scan_index, scan_copy, offsets, codes, table_cls, now, ids, header_end;
  /* device */
  uint64_t locs, miss_pos, miss_slot, set_ids, set_count, set_uid, uniq_slot, choice, counters,
      upload, out, total;
  /* host (pinned) */
  uint64_t h_counters, h_uniq_ids, h_uniq_refs, h_upload, host_total;
  uint64_t counter_bytes; /* 16 + the per-arg counters */
} layout;

static void plan_layout(const fl_part_batch *b, uint64_t host_ids, uint64_t out_bytes, layout *l) {
  uint64_t o = 0, n = b->n_keys, na = b->n_args, sets = fl_miss_set_slots(n, b->n_args);
  l->args = o, o = align256(o + na * sizeof(fl_batch_arg));
  l->scan_index = o, o = align256(o + (na + 1) * 8);
  l->scan_copy = o, o = align256(o + (na + 1) * 8);
  l->offsets = o, o = align256(o + na * 8);
  l->codes = o, o = align256(o + b->c->n_tables * sizeof(fl_code));
  l->table_cls = o, o = align256(o + b->c->n_tables * 4);
  l->counter_bytes = 16 + FL_MISS_COUNTERS * 4 * na;
  l->counters = o, o = align256(o + l->counter_bytes); /* start values come with the header */
  l->now = o, o = align256(o + 4);                     /* the batch counter */
  l->ids = o, o = align256(o + host_ids * 8);
  l->header_end = o;
  uint64_t upload = align256(na * 8) + n * ((b->max_row + 15) & ~15ull) + 16 * na;
  l->locs = o, o = align256(o + n * 8);
  l->miss_pos = o, o = align256(o + n * 4);
  l->miss_slot = o, o = align256(o + n * 4);
  l->set_ids = o, o = align256(o + sets * 8);
  l->set_count = o, o = align256(o + sets * 4);
  l->set_uid = o, o = align256(o + sets * 4);
  l->uniq_slot = o, o = align256(o + n * 4);
  l->choice = o, o = align256(o + n * 4);
  l->upload = o, o = align256(o + upload);
  l->out = o, o = align256(o + out_bytes);
  l->total = o;
  o = l->header_end;
  l->h_counters = o, o = align256(o + l->counter_bytes);
  l->h_uniq_ids = o, o = align256(o + n * 8);
  l->h_uniq_refs = o, o = align256(o + n * 8);
  l->h_upload = o, o = align256(o + upload);
  l->host_total = o;
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

void fl_query_cuda_views(const fl_table_query *queries, uint32_t n_queries, fl_query_view *views) {
  for (uint32_t i = 0; i < n_queries; i++) {
    views[i].ids = queries[i].n ? device_view(queries[i].ids) : NULL;
    views[i].out = queries[i].n ? (uint8_t *)device_view(queries[i].out) : NULL;
  }
}

static uint64_t round32(uint64_t x) { return (x + 31u) & ~31ull; }

/* How long the fetch's threads spin when woken ahead (fl_workers_wake): the
 * index kernel and the counters' download of a large batch, with room. */
#define FL_FETCH_PREWAKE_NS 300000ull

/* The store fetch of a batch's unique rows, run by one of the cache's workers
 * while the calling thread prepares the admission round. Each stretch of
 * rows is uploaded on the caller's stream as soon as it is gathered, so that
 * the upload overlaps the rest of the gather. Error messages are per thread:
 * the fetch's travels back in the job. */
typedef struct fetch_job {
  fl_part_batch *b;
  const uint32_t *per_arg;
  uint64_t *ids, *refs, *gen;
  uint8_t *staging;
  const uint64_t *stage_base;
  int want_refs;
  uint8_t *up_dev, *up_host; /* the upload block: staging offsets (head bytes), then rows */
  uint64_t head;
  fl_status st;
  char msg[512];
} fetch_job;

static fl_status upload_stretch(void *ctx, uint64_t begin, uint64_t end) {
  fetch_job *j = ctx;
  /* The first stretch takes the staging offsets along. */
  uint64_t from = begin ? j->head + begin : 0, to = j->head + end;
  int e = (int)cudaMemcpyAsync(j->up_dev + from, j->up_host + from, to - from,
                               cudaMemcpyHostToDevice, (cudaStream_t)j->b->stream);
  if (e) return fl_fail(j->b->c, FL_ERR_CUDA, "uploading missed rows failed: %s",
                        cudaGetErrorString((cudaError_t)e));
  return FL_OK;
}

static void fetch_run(void *ctx, size_t begin, size_t end) {
  (void)begin, (void)end;
  fetch_job *j = ctx;
  fl_cache *c = j->b->c;
  j->st = cudaSetDevice(c->cuda->device) == cudaSuccess
              ? FL_OK
              : fl_fail(c, FL_ERR_CUDA, "selecting the cache's device for the miss upload");
  if (j->st == FL_OK && j->want_refs) j->st = fl_misses_refs(j->b, j->per_arg, j->ids, j->refs);
  if (j->st == FL_OK)
    j->st = fl_misses_fetch(j->b, j->per_arg, j->ids, j->refs, j->staging, j->stage_base, j->gen,
                            upload_stretch, j);
  if (j->st != FL_OK) snprintf(j->msg, sizeof j->msg, "%s", fl_error_get(c));
}

/* Readies the batch's admission round (fl_round_prepare). Under c->lock. */
static fl_status admit_prepare(fl_part_batch *b, const uint32_t *per_arg) {
  fl_cache *c = b->c;
  uint32_t n_cls = c->parts[b->part].pool.n_classes;
  uint64_t *need = calloc(n_cls ? n_cls : 1, sizeof *need);
  if (!need) return fl_fail(c, FL_ERR_OUT_OF_MEMORY, "out of host memory");
  fl_misses_need(b, per_arg, need);
  fl_status st = fl_round_prepare(c, b->part, need);
  free(need);
  return st;
}

/* Scatters the fetched rows (uploaded by the fetch into the upload block at
 * D + l->upload) to every missed position on the caller's stream, then
 * enqueues the prepared admission round on the maintenance stream and the
 * reset of the batch's miss set after it. Under c->lock. */
static fl_status stage_and_admit(fl_part_batch *b, const layout *l, fl_scratch *x,
                                 const uint64_t *gen, int have_refs, const fl_miss_out *m,
                                 uint64_t n_miss) {
  fl_cache *c = b->c;
  fl_part *p = &c->parts[b->part];
  cudaStream_t stream = (cudaStream_t)b->stream;
  uint8_t *D = x->dev;
  uint64_t head = align256(b->n_args * 8ull);
  const fl_batch_arg *A = (const fl_batch_arg *)(D + l->args);
  int e = (int)cudaEventRecord((cudaEvent_t)x->ready, stream);
  if (!e)
    e = fl_launch_scatter(A, (const uint64_t *)(D + l->offsets), b->n_args, *m,
                          (const uint64_t *)(D + l->upload), D + l->upload + head, n_miss, stream);
  if (e) return fl_fail(c, FL_ERR_CUDA, "miss scatter failed: %s",
                        cudaGetErrorString((cudaError_t)e));
  uint8_t *skip = malloc(c->n_tables ? c->n_tables : 1);
  if (!skip) return fl_fail(c, FL_ERR_OUT_OF_MEMORY, "out of host memory");
  fl_misses_skip(b, gen, skip);
  fl_status st = fl_round_skip(c, b->part, skip);
  free(skip);
  if (st != FL_OK) return st;
  uint64_t limit = fl_cache_unified_limit(c, b->part);
  fl_admit_batch ab = {
      .v = p->index,
      .codes = (const fl_code *)(D + l->codes),
      .table_cls = (const uint32_t *)(D + l->table_cls),
      .args = (const fl_batch_arg *)(D + l->args),
      .key_offsets = (const uint64_t *)(D + l->offsets),
      .n_args = b->n_args,
      .n_keys = b->n_keys,
      .m = {{(uint64_t *)(D + l->set_ids), (uint32_t *)(D + l->set_uid),
             (uint32_t *)(D + l->set_count)},
            (uint32_t *)(D + l->counters + 16), (uint32_t *)(D + l->miss_pos),
            (uint32_t *)(D + l->miss_slot), (uint32_t *)(D + l->uniq_slot),
            (uint64_t *)((uint8_t *)x->host + l->h_uniq_ids),
            (uint64_t *)((uint8_t *)x->host + l->h_uniq_refs), (unsigned long long *)(D + l->counters)},
      .stage_base = (const uint64_t *)(D + l->upload),
      .staging = D + l->upload + align256(b->n_args * 8ull),
      .choice = (uint32_t *)(D + l->choice),
      .seed = c->cfg.seed,
      .threshold = c->admit_threshold,
      .now = b->now,
      /* New pointers need the store references fetched with the rows. */
      .pointer_room = have_refs && limit > p->dram_entries ? limit - p->dram_entries : 0,
  };
  cudaStream_t ms = (cudaStream_t)c->cuda->maint;
  e = (int)cudaStreamWaitEvent(ms, (cudaEvent_t)x->ready, 0);
  if (!e) e = fl_launch_admit_round(ab, p->round->dev, ms);
  if (!e) e = fl_launch_miss_reset(*m, n_miss, ms); /* after the round read the set */
  if (e) return fl_fail(c, FL_ERR_CUDA, "admission round launch failed: %s",
                        cudaGetErrorString((cudaError_t)e));
  if ((st = fl_round_end(c, b->part)) != FL_OK) return st;
  /* The round reads the scratch: it is busy until the round is over. */
  if ((e = (int)cudaEventRecord((cudaEvent_t)x->admit_done, ms)))
    return fl_fail(c, FL_ERR_CUDA, "recording the admission's end: %s",
                   cudaGetErrorString((cudaError_t)e));
  return FL_OK;
}

/* A prepared query's own scratch and launch graph for its part batch
 * (fl_query_prepare, one part batch): the header is built at the first run
 * and kept; later runs refresh only what changes (the counters' start
 * values, the batch counter, ids in host memory) and replay the index phase
 * (header upload, index kernel, counters' download, hit copy) as one CUDA
 * graph: one launch where fl_query makes four calls. */
struct fl_cuda_plan {
  fl_scratch *x;          /* kept from run to run; NULL before the first */
  layout l;
  fl_batch_arg *dargs;    /* the args with device-usable pointers, as uploaded */
  uint8_t **host_out;     /* per arg: the caller's output in host memory, or NULL */
  uint64_t index_threads, copy_threads;
  void *exec;             /* cudaGraphExec_t, NULL until captured */
  void *counted, *join;   /* cudaEvent_t: the counters are down; the branches joined */
  void *capture;          /* cudaStream_t the graph is captured on */
  int no_graph;           /* the capture failed: direct launches */
};

fl_cuda_plan *fl_cuda_plan_create(void) { return calloc(1, sizeof(fl_cuda_plan)); }

void fl_cuda_plan_destroy(fl_cache *c, fl_cuda_plan *pl) {
  if (!pl) return;
  if (pl->x) fl_cuda_scratch_release(c, pl->x); /* reusable once its last uses end */
  if (pl->exec) cudaGraphExecDestroy((cudaGraphExec_t)pl->exec);
  if (pl->counted) cudaEventDestroy((cudaEvent_t)pl->counted);
  if (pl->join) cudaEventDestroy((cudaEvent_t)pl->join);
  if (pl->capture) cudaStreamDestroy((cudaStream_t)pl->capture);
  free(pl->dargs);
  free(pl->host_out);
  free(pl);
}

/* Copies ids in host memory into the header and sets the counters' start
 * values ([0] no miss yet, [1] no out-of-range key: ~0, per arg zero) and the
 * batch counter. Per run. */
static void refresh_header(const fl_part_batch *b, const layout *l, const fl_batch_arg *dargs,
                           uint8_t *H, uint8_t *D) {
  for (uint32_t a = 0; a < b->n_args; a++) {
    const uint64_t *in_header = (const uint64_t *)(D + l->ids);
    if (dargs[a].ids >= in_header && dargs[a].ids < in_header + (l->header_end - l->ids) / 8)
      memcpy(H + l->ids + (uint64_t)(dargs[a].ids - in_header) * 8, b->args[a].ids,
             (size_t)dargs[a].n * 8);
  }
  memset(H + l->counters, 0, l->counter_bytes);
  ((uint64_t *)(H + l->counters))[1] = ~0ull;
  *(uint32_t *)(H + l->now) = b->now;
}

/* Resolves where ids and outputs live (dargs: device-usable pointers; host
 * args keep the caller's for messages), lays out and takes a scratch set and
 * fills the header: args, scans, offsets, codes and classes. */
static fl_status build_header(fl_part_batch *b, fl_batch_arg **dargs_out, uint8_t ***host_out_out,
                              layout *l, fl_scratch **x_out, uint64_t *index_threads,
                              uint64_t *copy_threads) {
  fl_cache *c = b->c;
  fl_batch_arg *dargs = malloc(b->n_args * sizeof *dargs);
  uint8_t **host_out = calloc(b->n_args, sizeof *host_out);
  if (!dargs || !host_out) {
    free(dargs);
    free(host_out);
    return fl_fail(c, FL_ERR_OUT_OF_MEMORY, "out of host memory");
  }
  uint64_t host_ids = 0, out_bytes = 0;
  for (uint32_t a = 0; a < b->n_args; a++) {
    const fl_query_view *v = b->views ? &b->views[b->query_of[a]] : NULL;
    dargs[a] = b->args[a];
    dargs[a].ids = v ? v->ids : device_view(b->args[a].ids);
    if (!dargs[a].ids) host_ids += b->args[a].n;
    dargs[a].out = v ? v->out : (uint8_t *)device_view(b->args[a].out);
    if (!dargs[a].out) out_bytes = align256(out_bytes + (uint64_t)b->args[a].n * b->args[a].vec_bytes);
  }
  plan_layout(b, host_ids, out_bytes, l);
  fl_scratch *x;
  fl_status st = fl_cuda_scratch_acquire(c, l->total, l->host_total, &x);
  if (st != FL_OK) {
    free(dargs);
    free(host_out);
    return st;
  }
  uint8_t *D = x->dev, *H = x->host;
  uint64_t *scan_i = (uint64_t *)(H + l->scan_index), *scan_c = (uint64_t *)(H + l->scan_copy);
  uint64_t *offsets = (uint64_t *)(H + l->offsets);
  uint64_t ids_at = 0, out_at = 0;
  scan_i[0] = scan_c[0] = 0;
  for (uint32_t a = 0; a < b->n_args; a++) {
    fl_batch_arg *d = &dargs[a];
    if (!d->ids) {
      d->ids = (const uint64_t *)(D + l->ids) + ids_at;
      ids_at += d->n;
    }
    if (!d->out) {
      host_out[a] = b->args[a].out;
      d->out = D + l->out + out_at;
      out_at = align256(out_at + (uint64_t)d->n * d->vec_bytes);
    }
    d->width = fl_batch_width(d->vec_bytes, (uint64_t)(uintptr_t)d->out);
    d->lanes = d->vec_bytes / d->width;
    offsets[a] = d->key_offset;
    scan_i[a + 1] = scan_i[a] + round32(d->n);
    scan_c[a + 1] = scan_c[a] + round32((uint64_t)d->n * d->lanes);
  }
  memcpy(H + l->args, dargs, b->n_args * sizeof *dargs);
  for (uint32_t t = 0; t < c->n_tables; t++) {
    memcpy(H + l->codes + t * sizeof(fl_code), &c->tables[t].code, sizeof(fl_code));
    ((uint32_t *)(H + l->table_cls))[t] = c->tables[t].cls;
  }
  *index_threads = scan_i[b->n_args];
  *copy_threads = scan_c[b->n_args];
  *dargs_out = dargs;
  *host_out_out = host_out;
  *x_out = x;
  return FL_OK;
}

/* The index phase's launches on `stream`: header upload, index kernel, then
 * the hit copy, with the counters' download forked onto `side` after the
 * index kernel (x->ready marks the fork). prof (optional): timing events
 * around the kernels. */
static int launch_index_phase(fl_part_batch *b, const layout *l, fl_scratch *x, const fl_miss_out *m,
                              uint64_t index_threads, uint64_t copy_threads, int clear_set,
                              cudaStream_t stream, cudaStream_t side, cudaEvent_t *prof) {
  uint8_t *D = x->dev, *H = x->host;
  const fl_batch_arg *A = (const fl_batch_arg *)(D + l->args);
  uint64_t *locs = (uint64_t *)(D + l->locs);
  int e = (int)cudaMemcpyAsync(D, H, l->header_end, cudaMemcpyHostToDevice, stream);
  if (!e && prof) e = (int)cudaEventRecord(prof[0], stream);
  if (!e)
    e = fl_launch_index(b->c->parts[b->part].index, (const fl_code *)(D + l->codes), A,
                        (const uint64_t *)(D + l->scan_index), b->n_args, index_threads, b->n_keys,
                        (const uint32_t *)(D + l->now), locs, *m, clear_set, stream);
  if (!e) e = (int)cudaEventRecord((cudaEvent_t)x->ready, stream);
  if (!e && prof) e = (int)cudaEventRecord(prof[1], stream);
  if (!e)
    e = fl_launch_copy_hits(A, (const uint64_t *)(D + l->scan_copy), b->n_args, copy_threads,
                            locs, stream);
  if (!e && prof) e = (int)cudaEventRecord(prof[2], stream);
  if (!e) e = (int)cudaStreamWaitEvent(side, (cudaEvent_t)x->ready, 0);
  if (!e)
    e = (int)cudaMemcpyAsync(H + l->h_counters, D + l->counters, l->counter_bytes,
                             cudaMemcpyDeviceToHost, side);
  return e;
}

/* Captures the plan's index phase as a graph (after a run that left the
 * miss set empty: the graph never clears it). On failure the plan keeps
 * direct launches. */
static void plan_capture(fl_part_batch *b, fl_cuda_plan *pl, const fl_miss_out *m) {
  cudaStream_t cs = NULL;
  cudaGraph_t g = NULL;
  cudaGraphExec_t exec = NULL;
  cudaEvent_t counted = NULL, join = NULL;
  int ok = cudaStreamCreateWithFlags(&cs, cudaStreamNonBlocking) == cudaSuccess &&
           cudaEventCreateWithFlags(&counted, cudaEventDisableTiming) == cudaSuccess &&
           cudaEventCreateWithFlags(&join, cudaEventDisableTiming) == cudaSuccess &&
           cudaStreamBeginCapture(cs, cudaStreamCaptureModeThreadLocal) == cudaSuccess;
  if (ok) {
    cudaStream_t side = (cudaStream_t)pl->x->side;
    ok = launch_index_phase(b, &pl->l, pl->x, m, pl->index_threads, pl->copy_threads, 0, cs, side,
                            NULL) == 0 &&
         cudaEventRecordWithFlags(counted, side, cudaEventRecordExternal) == cudaSuccess &&
         cudaEventRecord(join, side) == cudaSuccess && cudaStreamWaitEvent(cs, join, 0) == cudaSuccess;
    ok = cudaStreamEndCapture(cs, &g) == cudaSuccess && ok;
  }
  ok = ok && cudaGraphInstantiate(&exec, g, 0) == cudaSuccess;
  if (g) cudaGraphDestroy(g);
  (void)cudaGetLastError();
  if (!ok) {
    if (exec) cudaGraphExecDestroy(exec);
    if (counted) cudaEventDestroy(counted);
    if (join) cudaEventDestroy(join);
    if (cs) cudaStreamDestroy(cs);
    pl->no_graph = 1;
    return;
  }
  pl->exec = exec, pl->counted = counted, pl->join = join, pl->capture = cs;
}

/* A kept scratch is reused once its last query's and round's uses end: the
 * new run's work waits for them on the device. The host needs no wait: what
 * it writes before the counters come down (the header's counters, batch
 * counter and host ids) no earlier use reads any more, since the last run
 * waited for its own counters; the rest it writes after this run's counters
 * are down, so after the waits. */
static fl_status plan_reuse(fl_cache *c, fl_cuda_plan *pl, cudaStream_t stream) {
  void *ev[2] = {pl->x->busy_until, pl->x->admit_done};
  for (int i = 0; i < 2; i++) {
    cudaError_t e = cudaStreamWaitEvent(stream, (cudaEvent_t)ev[i], 0);
    if (e != cudaSuccess)
      return fl_fail(c, FL_ERR_CUDA, "ordering after the prepared query's last run: %s",
                     cudaGetErrorString(e));
  }
  return FL_OK;
}

fl_status fl_query_part_cuda(fl_part_batch *b) {
  fl_cache *c = b->c;
  cudaStream_t stream = (cudaStream_t)b->stream;
  fl_status st = FL_OK;
  uint64_t t0 = fl_now_ns();
  fl_cuda_plan *pl = b->plan;
  fl_batch_arg *dargs = NULL;
  uint8_t **host_out = NULL;
  layout l;
  fl_scratch *x = NULL;
  uint64_t index_threads = 0, copy_threads = 0;
  if (pl && pl->x) {
    if ((st = plan_reuse(c, pl, stream)) != FL_OK) return st;
    dargs = pl->dargs, host_out = pl->host_out, l = pl->l, x = pl->x;
    index_threads = pl->index_threads, copy_threads = pl->copy_threads;
  } else {
    st = build_header(b, &dargs, &host_out, &l, &x, &index_threads, &copy_threads);
    if (st != FL_OK) return st;
    if (pl) {
      pl->dargs = dargs, pl->host_out = host_out, pl->l = l, pl->x = x;
      pl->index_threads = index_threads, pl->copy_threads = copy_threads;
    }
  }
  uint8_t *D = x->dev, *H = x->host;
  refresh_header(b, &l, dargs, H, D);

  pthread_mutex_lock(&c->lock);
  int64_t ticket = fl_reclaim_begin(&c->reclaim);
  int want_refs = fl_cache_unified_limit(c, b->part) > 0;
  pthread_mutex_unlock(&c->lock);
  if (ticket < 0) {
    if (!pl) {
      fl_cuda_scratch_release(c, x);
      free(dargs);
      free(host_out);
    }
    return fl_fail(c, FL_ERR_OUT_OF_MEMORY, "out of host memory registering the query");
  }
  const uint64_t *offsets = (const uint64_t *)(H + l.offsets);
  uint64_t *uniq_ids = (uint64_t *)(H + l.h_uniq_ids), *uniq_refs = (uint64_t *)(H + l.h_uniq_refs);
  fl_miss_out m = {{(uint64_t *)(D + l.set_ids), (uint32_t *)(D + l.set_uid),
                    (uint32_t *)(D + l.set_count)},
                   (uint32_t *)(D + l.counters + 16), (uint32_t *)(D + l.miss_pos),
                   (uint32_t *)(D + l.miss_slot), (uint32_t *)(D + l.uniq_slot), uniq_ids,
                   uniq_refs, (unsigned long long *)(D + l.counters)};
  const unsigned long long *counters = (const unsigned long long *)(H + l.h_counters);
  const uint32_t *per_arg = (const uint32_t *)(H + l.h_counters + 16);
  uint64_t *gen = NULL;
  int e = 0;
  uint64_t n_miss = 0, bad = ~0ull;
  /* cfg.profile: timing events around the two kernels (created per call:
   * the pooled events carry no timing). */
  cudaEvent_t prof[3] = {NULL, NULL, NULL};
  for (int i = 0; i < 3 && c->cfg.profile; i++)
    if (cudaEventCreate(&prof[i]) != cudaSuccess) prof[i] = NULL;
  int profiled = prof[0] && prof[1] && prof[2];
#define TRY(call)                                                                      \
  do {                                                                                 \
    e = (int)(call);                                                                   \
    if (e) {                                                                           \
      st = fl_fail(c, FL_ERR_CUDA, "%s failed: %s", #call,                             \
                   cudaGetErrorString((cudaError_t)e));                                \
      goto done;                                                                       \
    }                                                                                  \
  } while (0)
  /* The set is left empty after each use; a set at a new place or size (or
   * after a failed query) is cleared whole. It is dirty until this query
   * empties it again. */
  uint64_t set_slots = fl_miss_set_slots(b->n_keys, b->n_args);
  int clear_set = !(x->clean_set == D + l.set_ids && x->clean_slots == set_slots);
  x->clean_set = NULL;
  /* A prepared query's graph: its work orders after the previous run's on
   * any stream (plan_reuse). */
  int graph = pl && pl->exec && !clear_set && !profiled;
  if (graph) {
    TRY(cudaGraphLaunch((cudaGraphExec_t)pl->exec, stream));
  } else {
    /* The counters come down on the side stream while hits are copied. */
    TRY(launch_index_phase(b, &l, x, &m, index_threads, copy_threads, clear_set, stream,
                           (cudaStream_t)x->side, profiled ? prof : NULL));
  }
  /* A batch after one with misses likely misses too: wake the fetch's
   * threads now, so that they spin while the index kernel runs instead of
   * being woken once the counters are down. */
  if (atomic_load_explicit(&c->missed_last, memory_order_relaxed)) {
    fl_workers_wake(c->workers, FL_FETCH_PREWAKE_NS);
    fl_store_expect_gather(c->store, FL_FETCH_PREWAKE_NS);
  }
  if (graph) TRY(cudaEventSynchronize((cudaEvent_t)pl->counted));
  else TRY(cudaStreamSynchronize((cudaStream_t)x->side));
  uint64_t t1 = fl_now_ns();
  atomic_fetch_add(&c->ns_index, t1 - t0);
  n_miss = counters[0];
  atomic_store_explicit(&c->missed_last, n_miss != 0, memory_order_relaxed);
  bad = counters[1];
  if (bad != ~0ull) {
    uint64_t id;
    uint32_t a = fl_batch_find(offsets, b->n_args, bad);
    TRY(cudaMemcpy(&id, dargs[a].ids + (bad - b->args[a].key_offset), 8, cudaMemcpyDeviceToHost));
    st = fl_query_range_error(b, bad, id);
    goto done;
  }
  fl_query_count(b, per_arg);
  if (n_miss) {
    uint64_t cpu0 = fl_thread_cpu_ns();
    gen = malloc(c->n_tables * sizeof *gen);
    if (!gen) {
      st = fl_fail(c, FL_ERR_OUT_OF_MEMORY, "out of host memory");
      goto done;
    }
    /* Upload block: the args' staging offsets, then their rows. */
    uint64_t *stage_base = (uint64_t *)(H + l.h_upload);
    uint8_t *staging = H + l.h_upload + align256(b->n_args * 8ull);
    fl_misses_layout(b, per_arg, stage_base);
    /* The fetch runs on one of the cache's workers while this thread readies
     * the admission round: neither needs the other; the launch needs both.
     * round_lock keeps other batches' rounds out from the preparation to the
     * launch, while the lock is free for other callers during the fetch. */
    fetch_job job = {b,         per_arg,         uniq_ids, uniq_refs,
                     gen,       staging,         stage_base, want_refs,
                     D + l.upload, H + l.h_upload, align256(b->n_args * 8ull), FL_OK, ""};
    int async = fl_workers_start(c->workers, 1, 1, fetch_run, &job);
    if (!async) fetch_run(&job, 0, 1);
    uint64_t t2 = fl_now_ns();
    pthread_mutex_lock(&c->round_lock);
    pthread_mutex_lock(&c->lock);
    st = admit_prepare(b, per_arg);
    pthread_mutex_unlock(&c->lock);
    uint64_t t3 = fl_now_ns(), cpu3 = fl_thread_cpu_ns();
    if (async) fl_workers_wait(c->workers);
    uint64_t t4 = fl_now_ns(), cpu4 = fl_thread_cpu_ns();
    if (st == FL_OK && job.st != FL_OK) st = fl_fail(c, job.st, "%s", job.msg);
    if (st == FL_OK) {
      pthread_mutex_lock(&c->lock);
      st = stage_and_admit(b, &l, x, gen, want_refs, &m, n_miss);
      pthread_mutex_unlock(&c->lock);
    }
    pthread_mutex_unlock(&c->round_lock);
    /* The two phases overlap: the fetch's wall time, and the admission's
     * host work before and after it. */
    atomic_fetch_add(&c->ns_miss_fetch, t4 - t1);
    atomic_fetch_add(&c->ns_admission, (t3 - t2) + (fl_now_ns() - t4));
    /* This thread's share, the wait left out (the fetch counts its own). */
    atomic_fetch_add(&c->ns_miss_cpu, (cpu3 - cpu0) + (fl_thread_cpu_ns() - cpu4));
    if (st != FL_OK) goto done;
  }
  if (st == FL_OK) {
    x->clean_set = D + l.set_ids;
    x->clean_slots = set_slots;
  }
  /* Outputs in unregistered host memory come down last. */
  for (uint32_t a = 0; a < b->n_args && st == FL_OK; a++)
    if (host_out[a])
      TRY(cudaMemcpyAsync(host_out[a], dargs[a].out, (size_t)dargs[a].n * dargs[a].vec_bytes,
                          cudaMemcpyDeviceToHost, stream));
done:
#undef TRY
  if (profiled && st == FL_OK && cudaEventSynchronize(prof[2]) == cudaSuccess) {
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
  /* A plan whose run left the set empty captures its graph, once. */
  if (pl && !pl->exec && !pl->no_graph && x->clean_set) plan_capture(b, pl, &m);
  if (!pl) {
    fl_cuda_scratch_release(c, x);
    free(dargs);
    free(host_out);
  }
  free(gen);
  return st;
}

fl_status fl_query_cuda_reserve(fl_cache *c, uint64_t keys, uint32_t queries) {
  fl_part_batch b = {.c = c, .n_args = queries, .n_keys = keys};
  for (uint32_t t = 0; t < c->n_tables; t++)
    if (c->tables[t].vec_bytes > b.max_row) b.max_row = c->tables[t].vec_bytes;
  layout l;
  plan_layout(&b, 0, 0, &l);
  fl_scratch *x;
  fl_status st = fl_cuda_scratch_acquire(c, l.total, l.host_total, &x);
  if (st == FL_OK) fl_cuda_scratch_release(c, x);
  return st;
}
