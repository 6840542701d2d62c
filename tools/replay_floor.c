/* replay_floor.c: the floor of a replay's steady-state batch, measured in the
 * same run after the timed batches (fl_batch_floor in replay.h): for every
 * steady batch, its all-hit time plus its distinct missed rows at the store's
 * memcpy-gather rate; the run's floor is the batch with the median of those,
 * set against the steady batches' median latency. With --lookahead the
 * next batch's gather runs while this one's model does (--model-us): only
 * the gather's time beyond the model's adds to the all-hit time (which
 * includes the model).
 *
 * All-hit time. Each steady batch runs again on the same cache through the
 * same runner, with fl_cache_sync after each run so that the run's misses
 * are admitted (by the cache's own admission, at its probability per
 * lookup) before the next, until FL_ALL_HIT_RUNS runs have hit on every
 * lookup; the median of those runs is the batch's all-hit time. It is that
 * batch's time with every id cached: the same cache (index, load, pool,
 * backend), the same ids in the same buffers, timed as the replay times its
 * batches; all that differs is that nothing misses, so a run does the hits'
 * work alone (encode, index, hit copy), no fetch and no admission. Those
 * runs follow runs of the same batch, so some of its rows may still sit in
 * the GPU's L2 or the host's caches: that can only make the all-hit time
 * shorter, the floor lower and the ratio larger, never flatter the cache.
 *
 * Memcpy-gather rate. A plain memcpy gather of random rows from one dense
 * array as large as the model's rows, with the store's thread count
 * (floor_gather.h, as bench_store measures it); each gather is as many rows
 * as the steady batches' median distinct misses, and rows/s is the median
 * of FL_RATE_RUNS gathers, each over rows drawn anew so that none finds its
 * rows in a CPU cache the last one warmed. */
#include <stdlib.h>
#include <string.h>

#include "common/clock.h"
#include "common/hash.h"
#include "tools/floor_gather.h"
#include "tools/replay.h"

/* All-hit runs timed per batch. */
#define FL_ALL_HIT_RUNS 3
/* Runs a batch may take to get them. Admission takes a missed id with
 * probability p per lookup, so a batch's misses shrink geometrically (at the
 * default 0.5, about 15 runs for 20,000). A batch the cache cannot hold
 * stops shrinking: FL_ALL_HIT_STALL runs in a row without fewer misses than
 * before, or FL_ALL_HIT_TRIES runs in all, and the floor is not measured. */
#define FL_ALL_HIT_TRIES 64
#define FL_ALL_HIT_STALL 10
/* Gathers timed for the rate, after FL_RATE_WARM untimed ones (the pool
 * learns the body's cost on its first jobs). */
#define FL_RATE_RUNS 9
#define FL_RATE_WARM 3
/* The dense array's size at most: still far beyond any CPU cache, and a
 * bound on the host memory the floor takes beside the store. */
#define FL_ARRAY_MAX_BYTES (UINT64_C(16) << 30)

/* Runs batch bt until FL_ALL_HIT_RUNS runs have hit on every lookup: *ms is
 * their median, 0 when the batch stopped getting fewer misses first. */
static fl_status all_hit_time(fl_cache *c, fl_runner *rn, const fl_trace_batch *bt, double *ms) {
  double t[FL_ALL_HIT_RUNS];
  int n = 0, stalled = 0;
  uint64_t fewest = UINT64_MAX;
  *ms = 0;
  for (int k = 0; k < FL_ALL_HIT_TRIES && n < FL_ALL_HIT_RUNS && stalled < FL_ALL_HIT_STALL; k++) {
    fl_cache_stats a, z;
    double x;
    fl_status s = fl_cache_stats_get(c, &a, NULL, 0);
    if (s == FL_OK) s = fl_runner_query(rn, bt, NULL, &x);
    if (s == FL_OK) s = fl_cache_stats_get(c, &z, NULL, 0);
    if (s == FL_OK) s = fl_cache_sync(c);
    if (s != FL_OK) return s;
    uint64_t misses = (z.lookups - a.lookups) - (z.hits - a.hits);
    if (misses == 0) t[n++] = x;
    else if (misses < fewest) fewest = misses, stalled = 0;
    else stalled++;
  }
  if (n == FL_ALL_HIT_RUNS) *ms = fl_percentile(t, n, 0.5);
  return FL_OK;
}

/* The all-hit time of every steady batch (batches from..run->batches - 1 of
 * the trace) into f->all_hit_ms_of; f->missing says when one never ran
 * all-hit. */
static fl_status all_hit_times(const fl_workload *w, fl_cache *c, fl_runner *rn,
                               const fl_run *run, uint64_t from, fl_batch_floor *f) {
  fl_trace_batch bt = {0};
  fl_status s = fl_trace_rewind(w->trace);
  for (uint64_t b = 0; s == FL_OK && b < run->batches; b++) {
    int got = 0;
    s = fl_trace_next(w->trace, &bt, &got);
    if (s == FL_OK && !got) s = FL_ERR_FORMAT; /* shorter than when the replay read it */
    if (s != FL_OK || b < from) continue;
    double *ms = &f->all_hit_ms_of[b - from];
    s = all_hit_time(c, rn, &bt, ms);
    if (s == FL_OK && *ms == 0) {
      f->missing = "a steady batch never ran with every lookup a cached hit: the cache cannot "
                   "hold it (or some of its ids stay unified-index pointers, which are not cached hits)";
      break;
    }
  }
  if (s != FL_OK) fprintf(stderr, "error: the floor's all-hit runs: %s\n", fl_status_name(s));
  fl_trace_batch_free(&bt);
  return s;
}

/* The memcpy-gather rate over f->rate_rows rows a gather into f. */
static fl_status gather_rate(const fl_workload *w, const fl_replay_opts *o, fl_batch_floor *f) {
  size_t rb = (size_t)(w->model_bytes / w->model_rows);
  uint64_t rows = w->model_rows;
  if (rows * rb > FL_ARRAY_MAX_BYTES) rows = FL_ARRAY_MAX_BYTES / rb;
  size_t n = f->rate_rows, sets = FL_RATE_WARM + FL_RATE_RUNS;
  fl_workers *pool = fl_workers_create("floor", fl_store_threads(w->store));
  uint64_t *at = malloc(sets * n * sizeof *at);
  fl_floor g;
  int ok = pool && at && fl_floor_init(&g, pool, rows, rb, n) == 0;
  if (ok) {
    for (size_t i = 0; i < sets * n; i++) at[i] = fl_hash2(o->seed, i) % rows;
    double rate[FL_RATE_RUNS];
    for (size_t k = 0; k < sets; k++) {
      g.rows = at + k * n;
      double t0 = fl_now_s();
      fl_workers_for(pool, n, FL_FLOOR_GRAIN, fl_floor_gather, &g);
      double t = fl_now_s() - t0;
      if (k >= FL_RATE_WARM) rate[k - FL_RATE_WARM] = (double)n / t;
    }
    f->rows_per_s = fl_percentile(rate, FL_RATE_RUNS, 0.5);
    f->array_rows = rows;
    f->threads = fl_workers_count(pool);
    fl_floor_free(&g);
  } else {
    fprintf(stderr, "error: the floor's memcpy gather: out of memory (%llu rows of %zu bytes)\n",
            (unsigned long long)rows, rb);
  }
  free(at);
  fl_workers_destroy(pool);
  return ok ? FL_OK : FL_ERR_OUT_OF_MEMORY;
}

/* The gather's time beyond what the model hides (all of it without a look-ahead). */
static double unhidden(const fl_replay_opts *o, double gather_ms) {
  double model_ms = o->lookahead ? (double)o->model_us / 1e3 : 0;
  return gather_ms > model_ms ? gather_ms - model_ms : 0;
}

/* Fills the floor of the median batch from the per-batch all-hit times. */
static fl_status pick_median(const fl_replay_opts *o, const fl_run *run, uint64_t from,
                             fl_batch_floor *f) {
  uint64_t n = f->steady;
  double *fl = malloc(n * sizeof *fl);
  if (!fl) return FL_ERR_OUT_OF_MEMORY;
  for (uint64_t i = 0; i < n; i++)
    fl[i] = f->all_hit_ms_of[i] +
            unhidden(o, 1e3 * (double)fl_run_batch_rows(run, from + i) / f->rows_per_s);
  /* fl_percentile returns one of the values: the median batch is the one that has it. */
  double med = fl_percentile(fl, n, 0.5);
  uint64_t i = 0;
  while (fl[i] != med) i++;
  f->batch = from + i;
  f->rows = fl_run_batch_rows(run, f->batch);
  f->all_hit_ms = f->all_hit_ms_of[i];
  f->gather_ms = 1e3 * (double)f->rows / f->rows_per_s;
  f->hidden_ms = f->gather_ms - unhidden(o, f->gather_ms);
  f->ms = fl[i];
  f->steady_ms = fl_percentile(run->lat_ms + from, n, 0.5);
  f->ratio = f->steady_ms / f->ms;
  free(fl);
  return FL_OK;
}

fl_status fl_floor_measure(const fl_workload *w, const fl_replay_opts *o, fl_cache *c,
                           fl_runner *rn, fl_run *run) {
  fl_batch_floor *f = &run->floor;
  uint64_t from = fl_run_steady_from(run);
  f->steady = run->batches - from;
  if (f->steady == 0 || w->model_rows == 0 || w->model_bytes < w->model_rows) {
    f->missing = "no steady batches, or no model rows";
    return FL_OK;
  }
  double t0 = fl_now_s();
  f->all_hit_ms_of = calloc(f->steady, sizeof *f->all_hit_ms_of);
  double *rows = malloc(f->steady * sizeof *rows);
  fl_status s = f->all_hit_ms_of && rows ? FL_OK : FL_ERR_OUT_OF_MEMORY;
  if (s == FL_OK) s = all_hit_times(w, c, rn, run, from, f);
  if (s == FL_OK && !f->missing) {
    for (uint64_t i = 0; i < f->steady; i++) rows[i] = (double)fl_run_batch_rows(run, from + i);
    f->rate_rows = (uint64_t)fl_percentile(rows, f->steady, 0.5);
    if (f->rate_rows == 0) f->rate_rows = 1;
    s = gather_rate(w, o, f);
  }
  if (s == FL_OK && !f->missing) s = pick_median(o, run, from, f);
  free(rows);
  if (s == FL_OK)
    fprintf(stderr, "floor: %s: %s in %.2f s\n", run->label, f->missing ? "not measured" : "measured",
            fl_now_s() - t0);
  return s;
}
