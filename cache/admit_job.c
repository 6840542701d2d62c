/* admit_job.c: the courier's jobs of CUDA admission (admit.h): a batch's
 * round is readied (fl_round_prepare) and launched (fl_round_launch) on the
 * courier thread once its query returned, or shed by a newer round of its
 * part before it starts (common/courier.h). */
#include <cuda_runtime_api.h>
#include <math.h>
#include <stdlib.h>

#include "cache/admit.h"
#include "cache/admit_kernels.h"
#include "cache/cache.h"
#include "cache/cuda_state.h"
#include "common/clock.h"
#include "common/courier.h"
#include "common/cuda_check.h"
#include "common/error.h"

struct fl_admit_job {
  fl_cache *c;
  uint32_t part;
  fl_admit_args a;     /* the kernels' arguments, completed at launch */
  struct fl_scratch *x;
  uint64_t *need;      /* per slab class: the slots the round may take */
  uint64_t *gen;       /* per table, the generations the fetch saw */
  int have_refs;       /* the fetch brought store references: pointers may be published */
  int release_x;       /* a one-off query's scratch: the job gives it back */
};

/* Adds to need[cls] the reservoir slots a round may take per slab class.
 * Coin winners among n rows: n p' on average, with p' the chance of a row
 * missed twice (repeated rows win more often, admit_coin.h); it asks for 4
 * standard deviations more. An estimate: a round short of slots leaves its
 * least frequent winners out. TinyLFU may admit every row, and a prefetch
 * (force) does: they ask for n. */
static void add_need(const fl_cache *c, const fl_batch_arg *args, uint32_t n_args,
                     const uint32_t *per_arg, int force, uint64_t *need) {
  double p = c->rule.policy == FL_ADMIT_TINYLFU || force ? 1.0 : c->fixed.cfg.admit_probability;
  for (uint32_t a = 0; a < n_args; a++) {
    double pp = 1.0 - (1.0 - p) * (1.0 - p);
    double n = per_arg[FL_MISS_COUNTERS * a] + per_arg[FL_MISS_COUNTERS * a + 1], mean = n * pp;
    double ask = p >= 1.0 ? n : mean + 4.0 * sqrt(mean * (1.0 - pp)) + 1.0;
    need[c->fixed.tables[args[a].table].cls] += (uint64_t)ask;
  }
}

fl_admit_job *fl_admit_job_new(fl_cache *c, uint32_t part, const fl_admit_batch *b,
                               const fl_batch_arg *args, const uint32_t *per_arg, uint64_t n_miss,
                               uint64_t **gen, int have_refs, struct fl_scratch *x, int release_x) {
  uint32_t n_cls = c->parts[part].pool.n_classes;
  fl_admit_job *j = malloc(sizeof *j);
  uint64_t *need = calloc(n_cls ? n_cls : 1, sizeof *need);
  if (!j || !need) {
    free(j);
    free(need);
    return NULL;
  }
  add_need(c, args, b->n_args, per_arg, (int)b->rule.force, need);
  *j = (fl_admit_job){c, part, {*b, n_miss}, x, need, *gen, have_refs, release_x};
  *gen = NULL;
  return j;
}

void fl_admit_job_free(fl_admit_job *j) {
  free(j->need);
  free(j->gen);
  free(j);
}

/* Readies the round and launches its graph on the maintenance stream after
 * the query's work on its stream (x->busy_until, recorded before the round
 * is handed over); the round empties the batch's miss set last. Tables the
 * store changed since the fetch are skipped (their rows may be stale): under
 * c->lock, so that no change slips between the check and the launch. */
static fl_status launch(fl_admit_job *j) {
  fl_cache *c = j->c;
  fl_part *p = &c->parts[j->part];
  uint8_t *skip = malloc(c->fixed.n_tables ? c->fixed.n_tables : 1);
  if (!skip) return fl_fail(c, FL_ERR_OUT_OF_MEMORY, "out of host memory");
  fl_status st = fl_round_prepare(c, j->part, j->need);
  if (st != FL_OK) {
    free(skip);
    return st;
  }
  for (uint32_t t = 0; t < c->fixed.n_tables; t++) skip[t] = (uint8_t)fl_cache_stale(c, j->gen, t);
  uint64_t limit = fl_cache_unified_limit(c, j->part);
  fl_admit_batch *b = &j->a.b;
  b->v = p->index;
  const uint32_t force = b->rule.force; /* the batch's own (fl_admit_job_new) */
  b->rule = c->rule;
  b->rule.open = fl_freq_shift_open(c, p);
  b->rule.force = force;
  b->pointer_room = j->have_refs && limit > p->dram_entries ? limit - p->dram_entries : 0;
  /* The round reads the scratch, and empties its miss set: the scratch is
   * busy until admit_done. */
  st = fl_round_launch(c, j->part, &j->a, sizeof j->a, skip, b->n_keys, j->x->busy_until,
                       j->x->admit_done);
  free(skip);
  return st;
}

/* Launches the job's round, orders `stream` (when not NULL) after it, and
 * frees the job. A failure the caller cannot report (keep: the courier's,
 * whose query has returned) stays with the part's round for the next settle
 * to report (fl_round_failed); either way the scratch's miss set counts as
 * dirty. */
static fl_status deliver_job(fl_admit_job *j, int keep, void *stream) {
  fl_cache *c = j->c;
  uint64_t t0 = fl_now_ns(), cpu0 = fl_thread_cpu_ns();
  fl_status st = cudaSetDevice(c->fixed.cuda->device) == cudaSuccess
                     ? FL_OK
                     : fl_fail(c, FL_ERR_CUDA, "selecting the cache's device for an admission round");
  if (st == FL_OK) fl_round_wait(c, j->part);
  pthread_mutex_lock(&c->lock);
  if (st == FL_OK) st = launch(j);
  /* Before the scratch is given back: its event marks this round's end
   * until the scratch's next round records it again. */
  if (st == FL_OK && stream)
    st = FL_CUDA_CHECK(c, cudaStreamWaitEvent((cudaStream_t)stream,
                                              (cudaEvent_t)j->x->admit_done, 0));
  if (st != FL_OK) {
    j->x->clean_set = NULL;
    if (keep) fl_round_failed(c, j->part, st, fl_error_get(c));
  }
  pthread_mutex_unlock(&c->lock);
  fl_scratch_round_done(c, j->x, j->release_x);
  fl_cache_add(c, FL_STAT_NS_ADMISSION, fl_now_ns() - t0);
  fl_cache_add(c, FL_STAT_NS_MISS_CPU, fl_thread_cpu_ns() - cpu0);
  fl_admit_job_free(j);
  return st;
}

static void deliver(void *ctx) { (void)deliver_job(ctx, 1, NULL); }

fl_status fl_admit_job_run(fl_admit_job *j, void *stream) { return deliver_job(j, 0, stream); }

/* A round shed before the courier started it: the batch is not admitted,
 * and its miss set, never reset, is dirty. */
static void drop(void *ctx) {
  fl_admit_job *j = ctx;
  j->x->clean_set = NULL;
  fl_cache_add(j->c, FL_STAT_ROUNDS_SHED, 1);
  fl_scratch_round_done(j->c, j->x, j->release_x);
  fl_admit_job_free(j);
}

void fl_admit_job_post(fl_cache *c, fl_admit_job *j) {
  j->x->round_part = j->part;
  fl_courier_post(c->courier, (fl_courier_job){deliver, drop, j, j->part, &j->x->round_ticket});
}
