/* query_cuda.c: the CUDA engine for one part batch, on the caller's stream:
 *   1. one upload of the launch arguments (and of host ids);
 *   2. the fused index kernel (all tables, one launch), which also
 *      deduplicates the misses and unified-index hits into unique rows whose
 *      ids it writes straight into pinned host memory (miss_set.h); its
 *      last block writes the counters there too and raises a flag;
 *   3. the host polls the flag, while
 *   4. the decoupled hit-copy kernel runs on the caller's stream;
 *   5. the unique rows gathered from the store into pinned staging (pointer
 *      rows through their references) by the store's threads, while this
 *      thread uploads each stretch as soon as it is gathered; one scatter
 *      kernel expands them into every missed position: the answer is
 *      complete, and fl_query returns;
 *   6. the cache's courier thread prepares admission (settling the last
 *      round, eviction, slots for the reservoirs) and launches it as a round
 *      on the maintenance stream (admit_kernels.cu, cache/admit_round.h),
 *      after the upload. The query's scratch stays busy until the round is
 *      over.
 * Outputs in unregistered host memory go through a device buffer and one
 * download at the end. A prepared query replays 1, 2 and 4 as a graph from
 * its second run; a launched one (fl_prepared_launch) replays a graph that
 * also holds a scatter behind a gate (fl_gate): the host's rows come from
 * the pinned staging, read by the GPU once the host raises the gate, so
 * nothing after the launch needs a CUDA call, and the host's part (3, 5, 6:
 * the answer) is left to the cache's answerer thread. */
#include <cuda_runtime_api.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cache/admission.h"
#include "cache/cuda_state.h"
#include "common/carve.h"
#include "common/clock.h"
#include "common/courier.h"
#include "common/cuda_check.h"
#include "common/fault.h"
#include "dram_store/store_internal.h"
#include "fusion/admit_kernels.h"
#include "fusion/query.h"
#include "fusion/query_kernels.h"

/* Byte layout of one part batch's scratch. The header has the same offsets
 * on device and host; the rest differs. */
typedef struct layout {
  uint64_t args, scan_index, scan_copy, offsets, codes, table_cls, zc, run, ids, header_end;
  /* device */
  uint64_t locs, miss_pos, miss_slot, set_ids, set_count, set_uid, uniq_slot, choice, counters,
      gate, upload, out, total;
  /* host (pinned) */
  uint64_t h_counters, h_flag, h_gate, h_uniq_ids, h_uniq_refs, h_upload, host_total;
  uint64_t counter_bytes; /* 16 + the per-arg counters */
} layout;

/* Every piece of the scratch starts 256-byte aligned. */
static void plan_layout(const fl_part_batch *b, uint64_t host_ids, uint64_t out_bytes, layout *l) {
  uint64_t n = b->n_keys, na = b->n_args, sets = fl_miss_set_slots(n, b->n_args);
  fl_carve d = {0};
  l->args = fl_carve_add(&d, na * sizeof(fl_batch_arg), 256);
  l->scan_index = fl_carve_add(&d, (na + 1) * 8, 256);
  l->scan_copy = fl_carve_add(&d, (na + 1) * 8, 256);
  l->offsets = fl_carve_add(&d, na * 8, 256);
  l->codes = fl_carve_add(&d, b->c->n_tables * sizeof(fl_code), 256);
  l->table_cls = fl_carve_add(&d, b->c->n_tables * 4, 256);
  l->zc = fl_carve_add(&d, b->c->n_tables * sizeof(fl_zc_table), 256);
  l->counter_bytes = 16 + FL_MISS_COUNTERS * 4 * na;
  l->counters = fl_carve_add(&d, l->counter_bytes, 256); /* start values come with the header */
  /* the batch counter, the index kernel's finished blocks, the gate's ticket */
  l->run = fl_carve_add(&d, 12, 256);
  l->ids = fl_carve_add(&d, host_ids * 8, 256);
  l->header_end = fl_carve_size(&d, 256);
  uint64_t upload = fl_align_up(na * 8, 256) + n * fl_align_up(b->max_row, 16) + 16 * na;
  l->locs = fl_carve_add(&d, n * 8, 256);
  l->miss_pos = fl_carve_add(&d, n * 4, 256);
  l->miss_slot = fl_carve_add(&d, n * 4, 256);
  l->set_ids = fl_carve_add(&d, sets * 8, 256);
  l->set_count = fl_carve_add(&d, sets * 4, 256);
  l->set_uid = fl_carve_add(&d, sets * 4, 256);
  l->uniq_slot = fl_carve_add(&d, n * 4, 256);
  l->choice = fl_carve_add(&d, n * 4, 256);
  l->gate = fl_carve_add(&d, 4, 256); /* the gate's verdict (fl_gate.open) */
  l->upload = fl_carve_add(&d, upload, 256);
  l->out = fl_carve_add(&d, out_bytes, 256);
  l->total = fl_carve_size(&d, 256);
  fl_carve h = {l->header_end};
  l->h_counters = fl_carve_add(&h, l->counter_bytes, 256);
  l->h_flag = fl_carve_add(&h, 4, 256);
  l->h_gate = fl_carve_add(&h, sizeof(fl_gate_bad), 256); /* raised word, out-of-range id */
  l->h_uniq_ids = fl_carve_add(&h, n * 8, 256);
  l->h_uniq_refs = fl_carve_add(&h, n * 8, 256);
  l->h_upload = fl_carve_add(&h, upload, 256);
  l->host_total = fl_carve_size(&h, 256);
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

/* How long the gather's threads spin when woken ahead (fl_workers_wake): the
 * index kernel of a large batch, with room. Only after a batch the host
 * gathered rows for: after a zero-copy batch they would spin on every core
 * for nothing. (Waking them cold instead costs a 256-sample batch with 336
 * host-gathered misses 180-280 us against 48-55 on the H100.) */
#define FL_FETCH_PREWAKE_NS 300000ull

/* Where the fetch's stretches of gathered rows go: the upload block, on the
 * caller's stream, each as soon as it is gathered, so that the upload
 * overlaps the rest of the gather. */
typedef struct upload_job {
  fl_part_batch *b;
  uint8_t *up_dev, *up_host; /* the upload block: staging offsets (head bytes), then rows */
  uint64_t head;
  /* Zero-copy batches: per table, non-NULL when the GPU read its misses in
   * place (their staging rows are not the host's to upload); else NULL. */
  const void *const *in_place;
  const uint64_t *stage_base;
  const uint32_t *per_arg;
} upload_job;

static fl_status upload(upload_job *j, uint64_t from, uint64_t to) {
  int e = (int)cudaMemcpyAsync(j->up_dev + from, j->up_host + from, to - from,
                               cudaMemcpyHostToDevice, (cudaStream_t)j->b->stream);
  if (e) return fl_fail(j->b->c, FL_ERR_CUDA, "uploading missed rows failed: %s",
                        cudaGetErrorString((cudaError_t)e));
  return FL_OK;
}

/* Uploads staging bytes [begin, end), around the rows read in place: the
 * zero-copy kernel wrote those in device memory before these uploads land. */
static fl_status upload_stretch(void *ctx, uint64_t begin, uint64_t end) {
  upload_job *j = ctx;
  /* The first stretch takes the staging offsets along, unless the
   * zero-copy kernel wrote them (it reads rows in place). */
  uint64_t from = begin || j->in_place ? j->head + begin : 0, to = j->head + end;
  for (uint32_t a = 0; j->in_place && a < j->b->n_args && from < to; a++) {
    if (!j->in_place[j->b->args[a].table]) continue;
    uint64_t lo = j->head + j->stage_base[a];
    uint64_t hi = lo + (uint64_t)j->per_arg[FL_MISS_COUNTERS * a] * j->b->args[a].vec_bytes;
    if (hi <= from || lo >= to) continue;
    if (lo > from) {
      fl_status st = upload(j, from, lo);
      if (st != FL_OK) return st;
    }
    from = hi;
  }
  return from < to ? upload(j, from, to) : FL_OK;
}

/* The host's share of a batch's misses once its counters are up: counts the
 * unique rows the GPU reads in place (launching their reads unless the
 * prepared query's graph holds them: zc_launched), lays out the pinned
 * staging and fetches the other rows from the store into it, each stretch
 * uploaded as it fills through up (NULL: the rows stay in the staging).
 * *in_place: whether the GPU read rows in place; *host_rows: the rows the
 * host fetched. */
static fl_status host_misses(fl_part_batch *b, const layout *l, fl_scratch *x, const fl_miss_out *m,
                             int zc_launched, int want_refs, upload_job *up, int *in_place_out,
                             uint64_t *host_rows) {
  fl_cache *c = b->c;
  const fl_cuda_state *cs = c->cuda;
  uint8_t *D = x->dev, *H = x->host;
  const uint32_t *per_arg = (const uint32_t *)(H + l->h_counters + 16);
  uint64_t *uniq_ids = (uint64_t *)(H + l->h_uniq_ids), *uniq_refs = (uint64_t *)(H + l->h_uniq_refs);
  uint64_t cpu0 = fl_thread_cpu_ns(), rows = 0, zc_rows = 0;
  for (uint32_t a = 0; a < b->n_args; a++) {
    rows += per_arg[FL_MISS_COUNTERS * a] + per_arg[FL_MISS_COUNTERS * a + 1];
    if (cs->zc_limit) zc_rows += fl_zc_arg_rows(per_arg, a, cs->zc_rows[b->args[a].table] != NULL);
  }
  /* The zero-copy kernel reads the qualifying misses in place when the
   * batch has few enough (zero_copy.h); the host fetches the rest. */
  const void *const *in_place = fl_zc_take(zc_rows, cs->zc_limit) ? cs->zc_rows : NULL;
  *host_rows = fl_zc_host_rows(zc_rows, rows, cs->zc_limit);
  *in_place_out = in_place != NULL;
  if (in_place) {
    const uint64_t head = fl_align_up(b->n_args * 8ull, 256);
    int e = zc_launched ? 0
                        : fl_launch_zero_copy((const fl_batch_arg *)(D + l->args), b->n_args, *m,
                                              (const fl_zc_table *)(D + l->zc), cs->zc_limit,
                                              cs->zc_seq, (uint64_t *)(D + l->upload),
                                              D + l->upload + head, fl_launch_on(b->stream));
    if (e) return fl_fail(c, FL_ERR_CUDA, "the zero-copy reads failed: %s",
                          cudaGetErrorString((cudaError_t)e));
    atomic_fetch_add(&c->unique_misses, zc_rows);
    atomic_fetch_add(&c->zero_copy_rows, zc_rows);
  }
  uint64_t *stage_base = (uint64_t *)(H + l->h_upload);
  uint8_t *staging = H + l->h_upload + fl_align_up(b->n_args * 8ull, 256);
  fl_misses_layout(b, per_arg, stage_base);
  if (up) up->in_place = in_place;
  atomic_fetch_add(&c->ns_miss_cpu, fl_thread_cpu_ns() - cpu0);
  fl_status st = FL_OK;
  if (want_refs && in_place) st = fl_misses_refs(b, per_arg, uniq_ids, uniq_refs, in_place);
  atomic_store_explicit(&c->gathered_last, *host_rows != 0, memory_order_relaxed);
  if (st == FL_OK && *host_rows)
    st = fl_misses_fetch(b, per_arg, uniq_ids, uniq_refs, want_refs, staging, stage_base, in_place,
                         up ? upload_stretch : NULL, up, 1);
  return st;
}

/* Scatters the fetched rows (uploaded by the fetch into the upload block at
 * D + l->upload) to every missed position on the caller's stream: the answer
 * is complete when the stream gets there. */
static fl_status scatter_misses(fl_part_batch *b, const layout *l, fl_scratch *x,
                                const fl_miss_out *m, uint64_t n_miss) {
  cudaStream_t stream = (cudaStream_t)b->stream;
  uint8_t *D = x->dev;
  uint64_t head = fl_align_up(b->n_args * 8ull, 256);
  int e = fl_launch_scatter((const fl_batch_arg *)(D + l->args), (const uint64_t *)(D + l->offsets),
                          b->n_args, *m, (const uint64_t *)(D + l->upload), D + l->upload + head,
                          n_miss, stream);
  if (e) return fl_fail(b->c, FL_ERR_CUDA, "miss scatter failed: %s",
                        cudaGetErrorString((cudaError_t)e));
  return FL_OK;
}

/* A batch's admission round, prepared and launched by the cache's courier
 * once fl_query has returned: settling the last round, eviction, the
 * reservoirs' top-up and the round graph's launch are off the answer's path, and
 * rounds run one at a time in the courier's order. The job owns the batch's
 * scratch until the round's last use of it is recorded (admit_done). */
typedef struct round_job {
  fl_cache *c;
  uint32_t part, n_args, now;
  uint64_t n_keys, n_miss;
  layout l;
  fl_scratch *x;
  fl_miss_out m;
  uint64_t *need;  /* per slab class: the slots the round may take (fl_misses_need) */
  uint64_t *gen;   /* per table, the generations the fetch saw; the job frees both */
  int have_refs;   /* the fetch brought store references: pointers may be published */
  int release_x;   /* a one-off query's scratch: the job gives it back */
} round_job;

/* Readies the round (fl_round_prepare) and launches its graph on the
 * maintenance stream after the query's work on its stream (x->busy_until,
 * recorded before the round is handed over); the round empties the batch's
 * miss set last. Tables the store changed since the fetch are skipped
 * (their rows may be stale): under c->lock, so that no change slips between
 * the check and the launch. */
static fl_status round_launch(const round_job *j) {
  fl_cache *c = j->c;
  fl_part *p = &c->parts[j->part];
  const layout *l = &j->l;
  uint8_t *D = j->x->dev;
  uint8_t *skip = malloc(c->n_tables ? c->n_tables : 1);
  if (!skip) return fl_fail(c, FL_ERR_OUT_OF_MEMORY, "out of host memory");
  fl_status st = fl_round_prepare(c, j->part, j->need);
  if (st != FL_OK) {
    free(skip);
    return st;
  }
  fl_misses_skip(c, j->gen, skip);
  uint64_t limit = fl_cache_unified_limit(c, j->part);
  fl_admit_args a = {.n_miss = j->n_miss};
  a.b = (fl_admit_batch){
      .v = p->index,
      .codes = (const fl_code *)(D + l->codes),
      .table_cls = (const uint32_t *)(D + l->table_cls),
      .args = (const fl_batch_arg *)(D + l->args),
      .key_offsets = (const uint64_t *)(D + l->offsets),
      .n_args = j->n_args,
      .n_keys = j->n_keys,
      .m = j->m,
      .stage_base = (const uint64_t *)(D + l->upload),
      .staging = D + l->upload + fl_align_up(j->n_args * 8ull, 256),
      .choice = (uint32_t *)(D + l->choice),
      .seed = c->cfg.seed,
      .threshold = c->admit_threshold,
      .now = j->now,
      .pointer_room = j->have_refs && limit > p->dram_entries ? limit - p->dram_entries : 0,
  };
  /* The round reads the scratch, and empties its miss set: the scratch is
   * busy until admit_done. */
  st = fl_round_launch(c, j->part, &a, sizeof a, skip, j->n_keys, fl_admit_round_nodes,
                       j->x->busy_until, j->x->admit_done);
  free(skip);
  return st;
}

static void round_job_free(round_job *j) {
  free(j->need);
  free(j->gen);
  free(j);
}

/* The courier's side of a round_job. A failure cannot reach the query, which
 * has returned: the part's round keeps it for the next settle to report
 * (fl_round_failed), and the scratch's miss set counts as dirty. */
static void round_deliver(void *ctx) {
  round_job *j = ctx;
  fl_cache *c = j->c;
  uint64_t t0 = fl_now_ns(), cpu0 = fl_thread_cpu_ns();
  fl_status st = cudaSetDevice(c->cuda->device) == cudaSuccess
                     ? FL_OK
                     : fl_fail(c, FL_ERR_CUDA, "selecting the cache's device for an admission round");
  if (st == FL_OK) fl_round_wait(c, j->part);
  pthread_mutex_lock(&c->lock);
  if (st == FL_OK) st = round_launch(j);
  if (st != FL_OK) {
    j->x->clean_set = NULL;
    fl_round_failed(c, j->part, st, fl_error_get(c));
  }
  pthread_mutex_unlock(&c->lock);
  __atomic_store_n(&j->x->round_ticket, 0, __ATOMIC_RELEASE);
  if (j->release_x) fl_cuda_scratch_release(c, j->x);
  atomic_fetch_add(&c->ns_admission, fl_now_ns() - t0);
  atomic_fetch_add(&c->ns_miss_cpu, fl_thread_cpu_ns() - cpu0);
  round_job_free(j);
}

/* A round shed before the courier started it (common/courier.h): the batch
 * is not admitted, and its miss set, never reset, is dirty. */
static void round_drop(void *ctx) {
  round_job *j = ctx;
  j->x->clean_set = NULL;
  atomic_fetch_add(&j->c->rounds_shed, 1);
  __atomic_store_n(&j->x->round_ticket, 0, __ATOMIC_RELEASE);
  if (j->release_x) fl_cuda_scratch_release(j->c, j->x);
  round_job_free(j);
}

/* A round_job for the batch, taking gen; NULL when out of memory. */
static round_job *round_job_new(fl_part_batch *b, const layout *l, fl_scratch *x,
                                const fl_miss_out *m, uint64_t n_miss, const uint32_t *per_arg,
                                uint64_t **gen, int have_refs, int release_x) {
  fl_cache *c = b->c;
  uint32_t n_cls = c->parts[b->part].pool.n_classes;
  round_job *j = malloc(sizeof *j);
  uint64_t *need = calloc(n_cls ? n_cls : 1, sizeof *need);
  if (!j || !need) {
    free(j);
    free(need);
    return NULL;
  }
  fl_misses_need(b, per_arg, need);
  *j = (round_job){c, b->part, b->n_args, b->now, b->n_keys, n_miss, *l, x, *m, need, *gen,
                   have_refs, release_x};
  *gen = NULL;
  return j;
}

/* The host's half of a prepared run whose graph scatters the host's rows
 * after a gate (fl_gate): the counters, the rows gathered, the gate raised,
 * the round handed to the courier. */
typedef struct gated_answer {
  fl_part_batch b;    /* args: the plan's copy (hargs) */
  fl_cuda_plan *pl;
  fl_batch_arg *hargs;
  uint32_t *hquery_of; /* the plan's copies of the run's args and their queries */
  fl_miss_out m;
  uint64_t *gen;      /* the run's generations, until a round takes them */
  uint64_t t0;        /* when the run began */
  uint32_t ticket;
  int want_refs;
} gated_answer;

/* A prepared query's own scratch and launch graph for its part batch
 * (fl_query_prepare, one part batch): the header is built at the first run
 * and kept; later runs refresh only what changes (the counters' start
 * values, the batch counter, ids in host memory) and replay the index phase
 * (header upload, index kernel, hit copy) as one CUDA graph: one launch where
 * fl_query makes three calls. */
struct fl_cuda_plan {
  fl_scratch *x;          /* kept from run to run; NULL before the first */
  layout l;
  fl_batch_arg *dargs;    /* the args with device-usable pointers, as uploaded */
  uint8_t **host_out;     /* per arg: the caller's output in host memory, or NULL */
  uint64_t index_threads, copy_threads;
  void *exec;             /* cudaGraphExec_t, NULL until built */
  void *exec_gated;       /* the same with the gate (fl_gate) for launches; NULL: none */
  int no_graph;           /* building it failed: direct launches */
  int zc_graph;           /* the graph reads the misses of a qualifying batch in place and,
                             when that is all of them, scatters them (zero_copy.h) */
  uint32_t ticket;        /* the last run's gate ticket */
  int async;              /* a launch (fl_prepared_launch): the gated graph, and the
                             answer is the answerer's */
  gated_answer answer;    /* the host's half of the last launched run */
  uint64_t answer_ticket; /* the answerer's ticket for it, 0 once answered */
  fl_status answer_st;    /* a launched run's failure not reported yet, and its message */
  char answer_msg[512];
  /* A launched run's round goes to the courier once both the answerer (the
   * round, after the gate) and the launching thread (the end-of-reads
   * events, after the launch) are done: the last of the two to arrive posts
   * it (plan_arrive). */
  _Atomic int arrivals;
  void *pending_round;    /* round_job *: the answerer's round, NULL: none */
  /* What the next run must order after, besides its stream's own order:
   * the last run's stream (NULL when it must wait for busy_until whatever
   * the stream: before the first run, after a failed one), and whether the
   * last run handed a round over (admit_done). */
  void *last_stream;
  int last_ordered, last_posted;
};

fl_cuda_plan *fl_cuda_plan_create(void) { return calloc(1, sizeof(fl_cuda_plan)); }

static fl_status plan_answered(fl_cache *c, fl_cuda_plan *pl);

void fl_cuda_plan_set_async(fl_cuda_plan *pl, int async) { pl->async = async; }

fl_status fl_cuda_plan_wait(fl_cache *c, fl_cuda_plan *pl) { return plan_answered(c, pl); }

void fl_cuda_plan_destroy(fl_cache *c, fl_cuda_plan *pl) {
  if (!pl) return;
  (void)plan_answered(c, pl);
  if (pl->x) {
    /* Reusable once its last uses end, the round's recorded first. */
    fl_cuda_scratch_unhold(c, pl->x);
    fl_cuda_scratch_release(c, pl->x);
  }
  if (pl->exec) cudaGraphExecDestroy((cudaGraphExec_t)pl->exec);
  if (pl->exec_gated) cudaGraphExecDestroy((cudaGraphExec_t)pl->exec_gated);
  free(pl->dargs);
  free(pl->host_out);
  free(pl->answer.hargs);
  free(pl->answer.hquery_of);
  free(pl);
}

/* Copies ids in host memory into the header and sets the counters' start
 * values ([0] no miss yet, [1] no out-of-range key: ~0, per arg zero), the
 * batch counter and no finished block; lowers the counters' flag. Per run. */
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
  ((uint32_t *)(H + l->run))[0] = b->now;
  ((uint32_t *)(H + l->run))[1] = 0;
  ((uint32_t *)(H + l->run))[2] = b->plan ? b->plan->ticket : 0;
  __atomic_store_n((uint32_t *)(H + l->h_flag), 0u, __ATOMIC_RELAXED);
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
  uint64_t host_ids = 0;
  fl_carve outs = {0}; /* the device buffers of outputs in unregistered memory */
  for (uint32_t a = 0; a < b->n_args; a++) {
    const fl_query_view *v = b->views ? &b->views[b->query_of[a]] : NULL;
    dargs[a] = b->args[a];
    dargs[a].ids = v ? v->ids : device_view(b->args[a].ids);
    if (!dargs[a].ids) host_ids += b->args[a].n;
    dargs[a].out = v ? v->out : (uint8_t *)device_view(b->args[a].out);
    if (!dargs[a].out) fl_carve_add(&outs, (uint64_t)b->args[a].n * b->args[a].vec_bytes, 256);
  }
  plan_layout(b, host_ids, fl_carve_size(&outs, 256), l);
  fl_scratch *x;
  fl_status st = fl_cuda_scratch_acquire(c, l->total, l->host_total, b->part, &x);
  if (st != FL_OK) {
    free(dargs);
    free(host_out);
    return st;
  }
  uint8_t *D = x->dev, *H = x->host;
  uint64_t *scan_i = (uint64_t *)(H + l->scan_index), *scan_c = (uint64_t *)(H + l->scan_copy);
  uint64_t *offsets = (uint64_t *)(H + l->offsets);
  uint64_t ids_at = 0;
  fl_carve out_at = {0}; /* placed as outs was sized */
  scan_i[0] = scan_c[0] = 0;
  for (uint32_t a = 0; a < b->n_args; a++) {
    fl_batch_arg *d = &dargs[a];
    if (!d->ids) {
      d->ids = (const uint64_t *)(D + l->ids) + ids_at;
      ids_at += d->n;
    }
    if (!d->out) {
      host_out[a] = b->args[a].out;
      d->out = D + l->out + fl_carve_add(&out_at, (uint64_t)d->n * d->vec_bytes, 256);
    }
    d->width = fl_batch_width(d->vec_bytes, (uint64_t)(uintptr_t)d->out);
    d->lanes = d->vec_bytes / d->width;
    offsets[a] = d->key_offset;
    scan_i[a + 1] = scan_i[a] + fl_align_up(d->n, 32);
    scan_c[a + 1] = scan_c[a] + fl_align_up((uint64_t)d->n * d->lanes, 32);
  }
  memcpy(H + l->args, dargs, b->n_args * sizeof *dargs);
  for (uint32_t t = 0; t < c->n_tables; t++) {
    memcpy(H + l->codes + t * sizeof(fl_code), &c->tables[t].code, sizeof(fl_code));
    ((uint32_t *)(H + l->table_cls))[t] = c->tables[t].cls;
    ((fl_zc_table *)(H + l->zc))[t].rows = c->cuda->zc_rows ? c->cuda->zc_rows[t] : NULL;
  }
  *index_threads = scan_i[b->n_args];
  *copy_threads = scan_c[b->n_args];
  *dargs_out = dargs;
  *host_out_out = host_out;
  *x_out = x;
  return FL_OK;
}

/* The index phase's launches on `to` (a stream, or the prepared query's
 * graph): header upload, index kernel (which publishes the counters to
 * l->h_counters), then the hit copy. prof (optional, on a stream): timing
 * events around the kernels. zc_limit > 0 (a prepared query's graph): then
 * the zero-copy reads and the scatter of a batch read wholly in place, each
 * deciding on the device whether the batch is one. gated (a prepared
 * query's graph): last, the gated scatter of the host's rows (fl_gate). */
static int launch_index_phase(fl_part_batch *b, const layout *l, fl_scratch *x, const fl_miss_out *m,
                              uint64_t index_threads, uint64_t copy_threads, int clear_set,
                              uint64_t zc_limit, int gated, fl_launch_to to, cudaEvent_t *prof) {
  cudaStream_t stream = (cudaStream_t)to.stream;
  uint8_t *D = x->dev, *H = x->host;
  const fl_batch_arg *A = (const fl_batch_arg *)(D + l->args);
  uint64_t *locs = (uint64_t *)(D + l->locs);
  /* Pinned host memory is device-mapped at the same address (UVA). */
  fl_publish pub = {(unsigned *)(D + l->run) + 1, (uint32_t *)(H + l->h_counters),
                    (uint32_t *)(H + l->h_flag), (uint32_t)(l->counter_bytes / 4)};
  int e = (int)fl_launch_copy(to, D, H, l->header_end, cudaMemcpyHostToDevice);
  if (!e && prof) e = (int)cudaEventRecord(prof[0], stream);
  if (!e)
    e = fl_launch_index(b->c->parts[b->part].index, (const fl_code *)(D + l->codes), A,
                        (const uint64_t *)(D + l->scan_index), b->n_args, index_threads, b->n_keys,
                        (const uint32_t *)(D + l->run), locs, *m, pub, clear_set, to);
  if (!e && prof) e = (int)cudaEventRecord(prof[1], stream);
  if (!e)
    e = fl_launch_copy_hits(A, (const uint64_t *)(D + l->scan_copy), b->n_args, copy_threads,
                            locs, to);
  if (!e && prof) e = (int)cudaEventRecord(prof[2], stream);
  const fl_zc_table *zc = (const fl_zc_table *)(D + l->zc);
  const uint64_t *stage_base = (const uint64_t *)(D + l->upload);
  const uint8_t *staging = D + l->upload + fl_align_up(b->n_args * 8ull, 256);
  if (!e && zc_limit)
    e = fl_launch_zero_copy(A, b->n_args, *m, zc, zc_limit, b->c->cuda->zc_seq,
                            (uint64_t *)stage_base, (uint8_t *)staging, to);
  if (!e && zc_limit)
    e = fl_launch_scatter_in_place(A, (const uint64_t *)(D + l->offsets), b->n_args, *m, zc,
                                   zc_limit, stage_base, staging, to);
  fl_gate g = {(const uint32_t *)(H + l->h_gate), (fl_gate_bad *)(H + l->h_gate),
               (const uint32_t *)(D + l->run) + 2, (uint32_t *)(D + l->gate),
               (const uint64_t *)(H + l->h_upload),
               H + l->h_upload + fl_align_up(b->n_args * 8ull, 256)};
  if (!e && gated)
    e = fl_launch_gated_scatter(A, (const uint64_t *)(D + l->offsets), b->n_args, *m, zc,
                                zc_limit, g, (uint64_t *)stage_base, (uint8_t *)staging, to);
  return e;
}

/* Waits until the device writes `want` to a word of pinned memory: spins
 * on it and, every check_ns, asks the stream whether its kernel failed or
 * ended without writing it (`what` names the kernel and the word). */
static fl_status wait_word(fl_cache *c, const uint32_t *word, uint32_t want, uint64_t check_ns,
                           cudaStream_t stream, const char *what) {
  uint64_t next_check = fl_now_ns() + check_ns;
  for (uint32_t i = 1;; i++) {
    if (__atomic_load_n(word, __ATOMIC_ACQUIRE) == want) return FL_OK;
    if (i % 64) {
#if defined(__x86_64__) || defined(__i386__)
      __builtin_ia32_pause();
#endif
      continue;
    }
    uint64_t now = fl_now_ns();
    if (now < next_check) continue;
    next_check = now + check_ns;
    cudaError_t e = cudaStreamQuery(stream);
    if (e == cudaErrorNotReady) continue;
    if (__atomic_load_n(word, __ATOMIC_ACQUIRE) == want) return FL_OK;
    (void)cudaGetLastError();
    return fl_fail(c, FL_ERR_CUDA, "%s: %s", what,
                   e == cudaSuccess ? "the kernel ended without writing it" : cudaGetErrorString(e));
  }
}

/* Waits for the index kernel's counters (fl_publish). */
#define COUNTERS_WHAT "the fused index kernel's counters"

/* One graph of the plan's index phase, built node by node; NULL on failure. */
static void *plan_graph(fl_part_batch *b, fl_cuda_plan *pl, const fl_miss_out *m, int gated) {
  cudaGraph_t g = NULL;
  cudaGraphExec_t exec = NULL;
  void *last = NULL;
  int ok = cudaGraphCreate(&g, 0) == cudaSuccess;
  fl_launch_to to = {NULL, g, &last, 1};
  ok = ok && launch_index_phase(b, &pl->l, pl->x, m, pl->index_threads, pl->copy_threads, 0,
                                b->c->cuda->zc_limit, gated, to, NULL) == 0;
  ok = ok && !fl_fault_hit(FL_FAULT_PLAN_GRAPH) && cudaGraphInstantiate(&exec, g, 0) == cudaSuccess;
  if (g) cudaGraphDestroy(g);
  (void)cudaGetLastError();
  if (!ok && exec) cudaGraphExecDestroy(exec);
  return ok ? exec : NULL;
}

/* Builds the plan's graphs (after a run that left the miss set empty: they
 * never clear it): one for runs (the host scatters its rows after it), one
 * with the gate for launches. The gate's two kernels cost a run that does
 * not wait at it 3 to 4 us on the H100, so runs keep the plain one.
 * Outputs in unregistered host memory come down after the scatter, outside
 * a graph: then no gated graph. On failure the plan keeps direct launches
 * (and launches answer as runs). */
static void plan_build(fl_part_batch *b, fl_cuda_plan *pl, const fl_miss_out *m) {
  int gated = 1;
  for (uint32_t a = 0; a < b->n_args; a++) gated = gated && !pl->host_out[a];
  pl->exec = plan_graph(b, pl, m, 0);
  if (!pl->exec) {
    pl->no_graph = 1;
    return;
  }
  pl->exec_gated = gated ? plan_graph(b, pl, m, 1) : NULL;
  pl->zc_graph = b->c->cuda->zc_limit != 0;
}

/* How often the answerer asks the stream whether a kernel it waits for
 * failed: seldom. Until it raises the gate, a CUDA call of its own can wait
 * behind another thread's call that holds the driver while it waits for
 * the device (cudaFree, a legacy-stream cudaMemcpy), and the device waits
 * for the gate: stuck for good. The counters come long before this. */
#define FL_ANSWER_CHECK_NS 1000000000ull

/* Gate tickets: below FL_GATE_FAILED, never 0 (a kept scratch's gate
 * starts at 0). */
static uint32_t next_ticket(uint32_t t) {
  t = (t + 1) & ~FL_GATE_FAILED;
  return t ? t : 1;
}

/* The query's reads end (reclamation ticket `ticket`), and the scratch frees
 * up, when the stream gets here. */
static void end_uses(fl_cache *c, fl_scratch *x, int64_t ticket, cudaStream_t stream) {
  void *ev = NULL;
  if (fl_cuda_event_get(c, &ev) == FL_OK && cudaEventRecord((cudaEvent_t)ev, stream) == cudaSuccess) {
    fl_reclaim_end(&c->reclaim, ticket, ev);
  } else {
    /* No event: wait for the stream instead, then end at once. */
    cudaStreamSynchronize(stream);
    if (ev) fl_cuda_event_release(c, ev);
    fl_reclaim_end(&c->reclaim, ticket, NULL);
  }
  cudaEventRecord((cudaEvent_t)x->busy_until, stream);
}

/* One of a launched run's two arrivals (fl_cuda_plan.arrivals); the last
 * hands the answerer's round to the courier: its kernels reset the miss set
 * the run's scatter reads, so they order after the end-of-reads events. */
static void plan_arrive(fl_cache *c, fl_cuda_plan *pl) {
  if (atomic_fetch_sub(&pl->arrivals, 1) != 1) return;
  round_job *round = pl->pending_round;
  pl->pending_round = NULL;
  if (!round) return;
  pl->x->round_part = round->part;
  fl_courier_post(c->courier, (fl_courier_job){round_deliver, round_drop, round, round->part,
                                               &pl->x->round_ticket});
}

/* The host's half of a gated run (gated_answer), after the launch: waits
 * for the counters, gathers the rows that are the host's into the pinned
 * staging, raises the gate (failed too: the graph must not wait for ever),
 * then hands the round to the courier. Before the gate it makes no copy or
 * launch (fl_gate), only a rare stream query, and waits for nothing on the
 * device but the counters: the run's stream is held at the gate until
 * then. Nor after it: another handle's gate may be shut. */
static fl_status answer(gated_answer *a) {
  fl_part_batch *b = &a->b;
  fl_cuda_plan *pl = a->pl;
  fl_cache *c = b->c;
  fl_scratch *x = pl->x;
  const layout *l = &pl->l;
  uint8_t *D = x->dev, *H = x->host;
  const unsigned long long *counters = (const unsigned long long *)(H + l->h_counters);
  const uint32_t *per_arg = (const uint32_t *)(H + l->h_counters + 16);
  uint32_t *gate = (uint32_t *)(H + l->h_gate);
  round_job *round = NULL;
  uint64_t n_miss = 0, bad = ~0ull;
  /* The stream is asked about failures rarely: any CUDA call here might
   * wait behind another thread's call that waits for a gate. */
  fl_status st = wait_word(c, (const uint32_t *)(H + l->h_flag), 1, FL_ANSWER_CHECK_NS,
                           (cudaStream_t)b->stream, COUNTERS_WHAT);
  if (st == FL_OK) {
    uint64_t t1 = fl_now_ns();
    atomic_fetch_add(&c->ns_index, t1 - a->t0);
    n_miss = counters[0];
    bad = counters[1];
    if (bad == ~0ull) fl_query_count(b, per_arg);
    if (bad == ~0ull && !n_miss) atomic_store_explicit(&c->gathered_last, 0, memory_order_relaxed);
    if (bad == ~0ull && n_miss) {
      int in_place = 0;
      uint64_t host_rows = 0;
      st = host_misses(b, l, x, &a->m, pl->zc_graph, a->want_refs, NULL, &in_place, &host_rows);
      uint64_t cpu2 = fl_thread_cpu_ns();
      if (st == FL_OK && !(round = round_job_new(b, l, x, &a->m, n_miss, per_arg, &a->gen,
                                                 a->want_refs, 0)))
        st = fl_fail(c, FL_ERR_OUT_OF_MEMORY, "out of host memory");
      atomic_fetch_add(&c->ns_miss_fetch, fl_now_ns() - t1);
      atomic_fetch_add(&c->ns_miss_cpu, fl_thread_cpu_ns() - cpu2);
    }
  }
  int ok = st == FL_OK && bad == ~0ull;
  /* The rows are in the staging (the fetch's threads are done). */
  __atomic_store_n(gate, a->ticket | (ok ? 0u : FL_GATE_FAILED), __ATOMIC_RELEASE);
  if (st == FL_OK && !ok) {
    /* The gate kernel hands over the id (no copy: it could wait behind
     * another handle's shut gate, which this thread must raise). */
    const fl_gate_bad *gb = (const fl_gate_bad *)(H + l->h_gate);
    st = wait_word(c, &gb->ticket, a->ticket, FL_ANSWER_CHECK_NS, (cudaStream_t)b->stream,
                   "the gate kernel's out-of-range id");
    if (st == FL_OK) st = fl_query_range_error(b, bad, __atomic_load_n(&gb->id, __ATOMIC_ACQUIRE));
  }
  if (ok) {
    x->clean_set = D + l->set_ids;
    x->clean_slots = fl_miss_set_slots(b->n_keys, b->n_args);
  }
  pl->last_ordered = ok;
  pl->last_posted = round && ok;
  if (round && !ok) round_job_free(round);
  pl->pending_round = ok ? round : NULL;
  plan_arrive(c, pl);
  free(a->gen);
  a->gen = NULL;
  return st;
}

/* The answerer's side of a launched run: its failure waits in the plan for
 * fl_prepared_wait, or the next launch, to report it. */
static void answer_deliver(void *ctx) {
  gated_answer *a = ctx;
  fl_cuda_plan *pl = a->pl;
  fl_cache *c = a->b.c;
  /* Once per thread (the answerer is the cache's own): no CUDA call before
   * the gate that need not be made (FL_ANSWER_CHECK_NS). */
  static _Thread_local int device = -1;
  if (device != c->cuda->device && cudaSetDevice(c->cuda->device) == cudaSuccess)
    device = c->cuda->device;
  fl_status st = device == c->cuda->device
                     ? answer(a)
                     : fl_fail(c, FL_ERR_CUDA, "selecting the cache's device for a launched query");
  if (st != FL_OK) {
    snprintf(pl->answer_msg, sizeof pl->answer_msg, "%s", fl_error_get(c));
    pl->answer_st = st;
  }
  __atomic_store_n(&pl->answer_ticket, 0, __ATOMIC_RELEASE);
}

/* Without room in the answerer's queue: the run fails, its gate raised. */
static void answer_drop(void *ctx) {
  gated_answer *a = ctx;
  fl_cuda_plan *pl = a->pl;
  __atomic_store_n((uint32_t *)(pl->x->host + pl->l.h_gate), a->ticket | FL_GATE_FAILED,
                   __ATOMIC_RELEASE);
  snprintf(pl->answer_msg, sizeof pl->answer_msg, "out of host memory handing the run over");
  pl->answer_st = FL_ERR_OUT_OF_MEMORY;
  pl->last_ordered = pl->last_posted = 0;
  pl->pending_round = NULL;
  plan_arrive(a->b.c, pl);
  free(a->gen);
  a->gen = NULL;
  __atomic_store_n(&pl->answer_ticket, 0, __ATOMIC_RELEASE);
}

/* Readies a launched run's answer (the batch's args copied: the caller's
 * are gone once the call returns) and hands it to the answerer. Takes
 * *gen. */
static void post_answer(fl_part_batch *b, fl_cuda_plan *pl, const fl_miss_out *m, uint64_t **gen,
                        int want_refs, uint64_t t0) {
  gated_answer *a = &pl->answer;
  memcpy(a->hargs, b->args, b->n_args * sizeof *b->args);
  memcpy(a->hquery_of, b->query_of, b->n_args * sizeof *b->query_of);
  a->b = *b;
  a->b.args = a->hargs;
  a->b.query_of = a->hquery_of;
  a->b.views = NULL;
  a->pl = pl;
  a->m = *m;
  a->gen = *gen;
  *gen = NULL;
  a->t0 = t0;
  a->ticket = pl->ticket;
  a->want_refs = want_refs;
  fl_courier_post(b->c->answerer,
                  (fl_courier_job){answer_deliver, answer_drop, a, (uint64_t)(uintptr_t)pl,
                                   &pl->answer_ticket});
}

/* Waits for the plan's last answer; returns a launched run's failure not
 * reported yet (once). */
static fl_status plan_answered(fl_cache *c, fl_cuda_plan *pl) {
  uint64_t t = __atomic_load_n(&pl->answer_ticket, __ATOMIC_ACQUIRE);
  if (t) fl_courier_wait(c->answerer, t);
  fl_status st = pl->answer_st;
  if (st == FL_OK) return FL_OK;
  pl->answer_st = FL_OK;
  return fl_fail(c, st, "%s", pl->answer_msg);
}

/* A kept scratch is reused once its last query's and round's uses end: the
 * new run's work waits for them on the device. On the last run's stream its
 * query's uses are in order already, and a last run with no round leaves
 * none (its own start waited for any earlier round), so a run that follows
 * an all-hit run on one stream waits for nothing. The host needs no wait:
 * what it writes before the counters come down (the header's counters,
 * batch counter and host ids) no earlier use reads any more, since the last
 * run waited for its own counters; the rest it writes after this run's
 * counters are down, so after the waits. */
static fl_status plan_reuse(fl_cache *c, fl_cuda_plan *pl, cudaStream_t stream) {
  int same_stream = pl->last_ordered && pl->last_stream == (void *)stream;
  void *ev[2] = {same_stream ? NULL : pl->x->busy_until, pl->last_posted ? pl->x->admit_done : NULL};
  for (int i = 0; i < 2; i++) {
    if (!ev[i]) continue;
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
  if (pl && (st = plan_answered(c, pl)) != FL_OK) return st;
  if (pl) pl->ticket = next_ticket(pl->ticket);
  if (pl && pl->x) {
    /* The last run's round must be launched: its admit_done recorded. A
     * plan run back to back would shed every round the courier has not
     * woken for yet, and never warm: it waits instead. */
    fl_cuda_scratch_unhold(c, pl->x);
    if ((st = plan_reuse(c, pl, stream)) != FL_OK) return st;
    dargs = pl->dargs, host_out = pl->host_out, l = pl->l, x = pl->x;
    index_threads = pl->index_threads, copy_threads = pl->copy_threads;
  } else {
    st = build_header(b, &dargs, &host_out, &l, &x, &index_threads, &copy_threads);
    if (st != FL_OK) return st;
    if (pl) {
      pl->answer.hargs = malloc(b->n_args * sizeof *b->args);
      pl->answer.hquery_of = malloc(b->n_args * sizeof *b->query_of);
    }
    if (pl && (!pl->answer.hargs || !pl->answer.hquery_of)) {
      free(pl->answer.hargs);
      free(pl->answer.hquery_of);
      pl->answer.hargs = NULL;
      pl->answer.hquery_of = NULL;
      fl_cuda_scratch_release(c, x);
      free(dargs);
      free(host_out);
      return fl_fail(c, FL_ERR_OUT_OF_MEMORY, "out of host memory");
    }
    if (pl) {
      pl->dargs = dargs, pl->host_out = host_out, pl->l = l, pl->x = x;
      fl_cuda_scratch_keep(c, x);
      memset(x->host + l.h_gate, 0, sizeof(fl_gate_bad)); /* no ticket is 0: shut */
      pl->index_threads = index_threads, pl->copy_threads = copy_threads;
    }
  }
  uint8_t *D = x->dev, *H = x->host;
  refresh_header(b, &l, dargs, H, D);

  /* Neither takes the cache lock, which a round's launch holds. */
  int64_t ticket = fl_reclaim_begin(&c->reclaim);
  int want_refs = fl_cache_unified_limit(c, b->part) > 0;
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
  round_job *round = NULL; /* a prepared admission round, for the courier */
  uint64_t n_miss = 0, bad = ~0ull;
  /* Whether end_uses ran, and whether work on the scratch followed it. */
  int uses_ended = 0, more_uses = 0;
  /* cfg.profile: timing events around the two kernels (created per call:
   * the pooled events carry no timing). */
  cudaEvent_t prof[3] = {NULL, NULL, NULL};
  for (int i = 0; i < 3 && c->cfg.profile; i++)
    if (cudaEventCreate(&prof[i]) != cudaSuccess) prof[i] = NULL;
  int profiled = prof[0] && prof[1] && prof[2];
  /* The set is left empty after each use; a set at a new place or size (or
   * after a failed query) is cleared whole. It is dirty until this query
   * empties it again. */
  uint64_t set_slots = fl_miss_set_slots(b->n_keys, b->n_args);
  int clear_set = !(x->clean_set == D + l.set_ids && x->clean_slots == set_slots);
  x->clean_set = NULL;
  /* A prepared query's graph: its work orders after the previous run's on
   * any stream (plan_reuse). */
  int graph = pl && pl->exec && !clear_set && !profiled;
  int gated = graph && pl->async && pl->exec_gated;
  /* Generations before any row is read (the GPU may read rows in place). */
  if (!(gen = malloc(c->n_tables * sizeof *gen))) {
    st = fl_fail(c, FL_ERR_OUT_OF_MEMORY, "out of host memory");
    goto done;
  }
  fl_misses_generations(c, gen);
  if (graph) {
    st = FL_CUDA_CHECK(c, cudaGraphLaunch((cudaGraphExec_t)(gated ? pl->exec_gated : pl->exec),
                                          stream));
  } else {
    st = FL_CUDA_CHECK(c, launch_index_phase(b, &l, x, &m, index_threads, copy_threads, clear_set,
                                             0, 0, fl_launch_on(stream), profiled ? prof : NULL));
  }
  if (st != FL_OK) goto done;
  /* A batch after one with a gather likely has one too: wake the
   * store's gather threads now, so that they spin while the index kernel
   * runs instead of being woken once the counters are up. */
  if (atomic_load_explicit(&c->gathered_last, memory_order_relaxed))
    fl_store_expect_gather(c->store, FL_FETCH_PREWAKE_NS);
  /* The query's reads of the index and the slabs are all in the work just
   * enqueued: its events go on now, while the GPU runs it, not after the
   * counters (1.1 to 1.6 us of an all-hit run's path). The scratch's is
   * recorded again below when its misses or downloads follow. A launch
   * hands its answer over first (below). */
  if (!gated) {
    end_uses(c, x, ticket, stream);
    uses_ended = 1;
  }
  if (gated) {
    /* Everything this run does on the stream is in the graph. The answer
     * goes to the answerer before any other CUDA call here: such a call
     * can wait behind another thread's that waits for the device, which
     * waits for this run's gate (FL_ANSWER_CHECK_NS). */
    pl->last_stream = (void *)stream;
    atomic_store(&pl->arrivals, 2);
    post_answer(b, pl, &m, &gen, want_refs, t0);
    end_uses(c, x, ticket, stream);
    plan_arrive(c, pl);
    free(gen);
    for (int i = 0; i < 3; i++)
      if (prof[i]) cudaEventDestroy(prof[i]);
    return FL_OK;
  }
  /* The counters are up while hits are copied. */
  if ((st = wait_word(c, (const uint32_t *)(H + l.h_flag), 1, 20000, stream, COUNTERS_WHAT)) != FL_OK)
    goto done;
  uint64_t t1 = fl_now_ns();
  atomic_fetch_add(&c->ns_index, t1 - t0);
  n_miss = counters[0];
  bad = counters[1];
  if (bad != ~0ull) {
    uint64_t id;
    uint32_t a = fl_batch_find(offsets, b->n_args, bad);
    /* On the query's stream: a legacy-stream copy would wait for every
     * blocking stream, launched runs' gates included. */
    st = FL_CUDA_CHECK(c, cudaMemcpyAsync(&id, dargs[a].ids + (bad - b->args[a].key_offset), 8,
                                          cudaMemcpyDeviceToHost, stream));
    if (st == FL_OK) st = FL_CUDA_CHECK(c, cudaStreamSynchronize(stream));
    if (st == FL_OK) st = fl_query_range_error(b, bad, id);
    goto done;
  }
  fl_query_count(b, per_arg);
  if (!n_miss) atomic_store_explicit(&c->gathered_last, 0, memory_order_relaxed);
  if (n_miss) {
    /* Upload block: the args' staging offsets, then their rows. This
     * thread watches the store's threads gather and uploads as they go. */
    upload_job up = {b, D + l.upload, H + l.h_upload, fl_align_up(b->n_args * 8ull, 256), NULL,
                     (const uint64_t *)(H + l.h_upload), per_arg};
    int zc_graph = graph && pl->zc_graph, in_place = 0;
    uint64_t host_rows = 0;
    more_uses = 1;
    st = host_misses(b, &l, x, &m, zc_graph, want_refs, &up, &in_place, &host_rows);
    uint64_t cpu2 = fl_thread_cpu_ns();
    if (st == FL_OK && !(zc_graph && in_place && !host_rows))
      st = scatter_misses(b, &l, x, &m, n_miss);
    if (st == FL_OK && !(round = round_job_new(b, &l, x, &m, n_miss, per_arg, &gen, want_refs, !pl)))
      st = fl_fail(c, FL_ERR_OUT_OF_MEMORY, "out of host memory");
    /* The fetch and the scatter; admission is the courier's (round_deliver).
     * This thread's CPU time around the fetch (the fetch counts its own). */
    atomic_fetch_add(&c->ns_miss_fetch, fl_now_ns() - t1);
    atomic_fetch_add(&c->ns_miss_cpu, fl_thread_cpu_ns() - cpu2);
    if (st != FL_OK) goto done;
  }
  if (st == FL_OK) {
    x->clean_set = D + l.set_ids;
    x->clean_slots = set_slots;
  }
  /* Outputs in unregistered host memory come down last. */
  for (uint32_t a = 0; a < b->n_args && st == FL_OK; a++)
    if (host_out[a]) {
      more_uses = 1;
      st = FL_CUDA_CHECK(c, cudaMemcpyAsync(host_out[a], dargs[a].out,
                                            (size_t)dargs[a].n * dargs[a].vec_bytes,
                                            cudaMemcpyDeviceToHost, stream));
    }
done:
  if (profiled && st == FL_OK && cudaEventSynchronize(prof[2]) == cudaSuccess) {
    float index_ms = 0, copy_ms = 0;
    cudaEventElapsedTime(&index_ms, prof[0], prof[1]);
    cudaEventElapsedTime(&copy_ms, prof[1], prof[2]);
    atomic_fetch_add(&c->gpu_ns_index, (uint64_t)(index_ms * 1e6));
    atomic_fetch_add(&c->gpu_ns_hit_copy, (uint64_t)(copy_ms * 1e6));
  }
  for (int i = 0; i < 3; i++)
    if (prof[i]) cudaEventDestroy(prof[i]);
  if (!uses_ended)
    end_uses(c, x, ticket, stream);
  else if (more_uses || st != FL_OK)
    cudaEventRecord((cudaEvent_t)x->busy_until, stream);
  if (pl) {
    pl->last_stream = (void *)stream;
    pl->last_ordered = st == FL_OK;
    pl->last_posted = round && st == FL_OK;
  }
  /* A plan whose run left the set empty builds its graph, once. */
  if (pl && !pl->exec && !pl->no_graph && x->clean_set) plan_build(b, pl, &m);
  /* The round goes to the courier with the scratch, once nothing here
   * touches the scratch any more: a newer round of the part may shed it
   * at once (round_drop). */
  if (round && st == FL_OK) {
    x->round_part = b->part;
    fl_courier_post(c->courier, (fl_courier_job){round_deliver, round_drop, round, b->part,
                                                 &x->round_ticket});
  } else if (round) {
    round_job_free(round);
    round = NULL;
  }
  if (!pl) {
    if (!round) fl_cuda_scratch_release(c, x);
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
  fl_status st = fl_cuda_scratch_acquire(c, l.total, l.host_total, FL_NO_PART, &x);
  if (st == FL_OK) fl_cuda_scratch_release(c, x);
  return st;
}
