/* query_cuda.c: the CUDA engine for one part batch, on the caller's stream:
 *   1. one upload of the launch arguments (and of host ids);
 *   2. the fused index kernel (all tables, one launch), which also
 *      deduplicates the misses and unified-index hits into unique rows whose
 *      ids it writes straight into pinned host memory (miss_set.h); its
 *      last block writes the counters there too and raises a flag;
 *   3. the host polls the flag (having woken the store's threads ahead
 *      when the part's recent batches missed enough for a large gather),
 *      while
 *   4. the decoupled hit-copy kernel runs on the caller's stream;
 *   5. the unique rows gathered from the store into pinned staging (pointer
 *      rows through their references) by the store's threads, while this
 *      thread uploads each stretch as soon as it is gathered; one scatter
 *      kernel expands them into every missed position: the answer is
 *      complete, and fl_query returns;
 *   6. the cache's courier thread prepares admission (settling the last
 *      round, eviction, slots for the reservoirs) and launches it as a round
 *      on the maintenance stream (cache/admit.h), after the upload. The
 *      query's scratch stays busy until the round is over. A prefetch
 *      (fl_prefetch) launches its round itself and orders its stream after
 *      it; its outputs are the scratch's device buffer, never downloaded.
 * Outputs in unregistered host memory go through a device buffer and one
 * download at the end.
 *
 * Three kinds of run share these phases (phases.h): a one-shot run
 * (fl_query) sets up its scratch and gives it back; a prepared run keeps
 * its plan's scratch and replays 1, 2 and 4 as a graph; a launched run
 * (fl_prepared_launch) hands 3, 5 and 6 to the cache's answerer (plan.h).
 * A run's state is one record (run), ended by one cleanup (run_end). */
#include <cuda_runtime_api.h>
#include <stdlib.h>

#include "cache/cache.h"
#include "common/clock.h"
#include "common/cuda_check.h"
#include "dram_store/store_internal.h"
#include "fusion/plan.h"

typedef struct run {
  fl_part_batch *b;
  fl_plan *pl;                /* a prepared run's plan, NULL: one-shot */
  fl_run_setup own;           /* a one-shot run's setup */
  fl_run_views own_views;
  const fl_run_setup *s;      /* the run's setup: &own or the plan's */
  const fl_run_views *v;      /* and its views */
  uint32_t gate_ticket;       /* a prepared run's gate ticket (0: none) */
  uint64_t t0;
  int64_t ticket;             /* reclamation ticket, < 0: not registered */
  int want_refs;              /* misses also take store references (unified index) */
  uint64_t *gen;              /* generations read before any row is */
  fl_admit_job *round;        /* the batch's admission, for the courier */
  /* cfg.profile: timing events around the two kernels (created per call:
   * the pooled events carry no timing). */
  void *prof[3];
  int profiled;
  uint64_t set_slots;         /* the miss set's slots */
  int clear_set;              /* the set is not known empty: cleared whole */
  int gated;                  /* a launch's gated graph */
  int handed_over;            /* a launched run's host half went to the answerer */
  int uses_ended, more_uses;  /* end_uses ran; work on the scratch followed it */
  uint64_t n_miss;            /* missed positions */
} run;

/* Takes the scratch and header: the plan's, or a one-shot's own. */
static fl_status run_setup(run *r) {
  if (r->pl) return fl_plan_begin(r->pl, r->b, &r->s, &r->v, &r->gate_ticket);
  fl_status st = fl_run_setup_new(r->b, &r->own);
  if (st != FL_OK) return st;
  fl_run_views_of(&r->own.l, r->own.x, &r->own_views);
  r->s = &r->own;
  r->v = &r->own_views;
  return FL_OK;
}

static void profile_begin(run *r) {
  for (int i = 0; i < 3 && r->b->f->cfg.profile; i++)
    if (cudaEventCreate((cudaEvent_t *)&r->prof[i]) != cudaSuccess) r->prof[i] = NULL;
  r->profiled = r->prof[0] && r->prof[1] && r->prof[2];
}

static void profile_end(run *r, fl_status st) {
  fl_cache *c = r->b->c;
  if (r->profiled && st == FL_OK && cudaEventSynchronize((cudaEvent_t)r->prof[2]) == cudaSuccess) {
    float index_ms = 0, copy_ms = 0;
    cudaEventElapsedTime(&index_ms, (cudaEvent_t)r->prof[0], (cudaEvent_t)r->prof[1]);
    cudaEventElapsedTime(&copy_ms, (cudaEvent_t)r->prof[1], (cudaEvent_t)r->prof[2]);
    fl_cache_add(c, FL_STAT_GPU_NS_INDEX, (uint64_t)(index_ms * 1e6));
    fl_cache_add(c, FL_STAT_GPU_NS_HIT_COPY, (uint64_t)(copy_ms * 1e6));
  }
  for (int i = 0; i < 3; i++)
    if (r->prof[i]) cudaEventDestroy((cudaEvent_t)r->prof[i]);
}

/* The index phase: the plan's graph, or the launches. The set is left
 * empty after each use; a set at a new place or size (or after a failed
 * query) is cleared whole. */
static fl_status run_index(run *r) {
  fl_part_batch *b = r->b;
  fl_cache *c = b->c;
  fl_scratch *x = r->s->x;
  r->set_slots = fl_miss_set_slots(b->n_keys, b->n_args);
  r->clear_set = !(x->clean_set == r->v->m.set.ids && x->clean_slots == r->set_slots);
  x->clean_set = NULL;
  /* A prepared query's graph: its work orders after the previous run's on
   * any stream (fl_plan_begin). */
  void *exec = r->pl ? fl_plan_graph(r->pl, r->clear_set, r->profiled, &r->gated) : NULL;
  /* Generations before any row is read (the GPU may read rows in place). */
  if (!(r->gen = malloc(b->f->n_tables * sizeof *r->gen)))
    return fl_fail(c, FL_ERR_OUT_OF_MEMORY, "out of host memory");
  fl_cache_generations(c, r->gen);
  fl_status st =
      exec ? FL_CUDA_CHECK(c, cudaGraphLaunch((cudaGraphExec_t)exec, (cudaStream_t)b->stream))
           : FL_CUDA_CHECK(c, fl_phase_index(b, r->s, r->v, r->clear_set, 0,
                                             fl_launch_on(b->stream), r->profiled ? r->prof : NULL));
  if (st != FL_OK) return st;
  /* The query's reads of the index and the slabs are all in the work just
   * enqueued: its events go on now, while the GPU runs it, not after the
   * counters (1.1 to 1.6 us of an all-hit run's path). The scratch's is
   * recorded again at the end when misses or downloads follow. A launch
   * hands its answer over first (fl_plan_hand_over). */
  if (!r->gated) {
    fl_phase_end_uses(c, x, r->ticket, b->stream);
    r->uses_ended = 1;
  }
  return FL_OK;
}

/* Waits for the counters (hits are copied meanwhile), then reports an
 * out-of-range id, or counts the lookups. *t1: when they came. */
static fl_status run_counters(run *r, uint64_t *t1) {
  fl_part_batch *b = r->b;
  fl_cache *c = b->c;
  const fl_run_views *v = r->v;
  uint64_t t0 = fl_now_ns();
  fl_status st = fl_phase_wait_word(c, v->h_flag, 1, 20000, b->stream, FL_COUNTERS_WHAT);
  if (st != FL_OK) return st;
  *t1 = fl_now_ns();
  fl_query_timing_here()->index_wait_ns += *t1 - t0;
  fl_cache_add(c, FL_STAT_NS_INDEX, *t1 - r->t0);
  r->n_miss = v->h_counters[0];
  fl_phase_note_misses(b, r->n_miss);
  uint64_t bad = v->h_counters[1];
  if (bad != ~0ull) {
    uint64_t id;
    uint32_t a = fl_batch_find(v->h.offsets, b->n_args, bad);
    /* On the query's stream: a legacy-stream copy would wait for every
     * blocking stream, launched runs' gates included. */
    st = FL_CUDA_CHECK(c, cudaMemcpyAsync(&id, r->s->dargs[a].ids + (bad - b->args[a].key_offset),
                                          8, cudaMemcpyDeviceToHost, (cudaStream_t)b->stream));
    if (st == FL_OK) st = FL_CUDA_CHECK(c, cudaStreamSynchronize((cudaStream_t)b->stream));
    return st == FL_OK ? fl_query_range_error(b, bad, id) : st;
  }
  fl_query_count(b, v->h_per_arg);
  return FL_OK;
}

/* The misses: the host's share gathered and uploaded as it lands (this
 * thread watches the store's threads gather), every missed position
 * written, and the batch's admission job readied. */
static fl_status run_misses(run *r, uint64_t t1) {
  fl_part_batch *b = r->b;
  fl_cache *c = b->c;
  int in_place = 0;
  uint64_t host_rows = 0;
  r->more_uses = 1;
  fl_status st = fl_phase_misses(b, r->v, r->want_refs, 1, &in_place, &host_rows);
  uint64_t cpu2 = fl_thread_cpu_ns();
  if (st == FL_OK && !(in_place && !host_rows))
    st = fl_phase_scatter(b, r->v, r->n_miss);
  if (st == FL_OK && !(r->round = fl_phase_admit_job(b, r->v, r->s->x, r->n_miss, &r->gen,
                                                     r->want_refs, !r->pl)))
    st = fl_fail(c, FL_ERR_OUT_OF_MEMORY, "out of host memory");
  /* The fetch and the scatter; admission is the courier's. This thread's
   * CPU time around the fetch (the fetch counts its own). */
  fl_cache_add(c, FL_STAT_NS_MISS_FETCH, fl_now_ns() - t1);
  fl_cache_add(c, FL_STAT_NS_MISS_CPU, fl_thread_cpu_ns() - cpu2);
  return st;
}

/* Outputs in unregistered host memory come down last. */
static fl_status run_download(run *r) {
  const fl_run_setup *s = r->s;
  fl_status st = FL_OK;
  for (uint32_t a = 0; a < r->b->n_args && st == FL_OK; a++)
    if (s->host_out[a]) {
      r->more_uses = 1;
      st = FL_CUDA_CHECK(r->b->c,
                         cudaMemcpyAsync(s->host_out[a], s->dargs[a].out,
                                         (size_t)s->dargs[a].n * s->dargs[a].vec_bytes,
                                         cudaMemcpyDeviceToHost, (cudaStream_t)r->b->stream));
    }
  return st;
}

/* Ends every run, failed or not: the scratch's last uses recorded, the
 * plan told, the round handed to the courier with the scratch once nothing
 * here touches the scratch any more (a newer round of the part may shed it
 * at once), a one-shot's setup given back (its scratch by the round, when
 * there is one). */
static fl_status run_end(run *r, fl_status st) {
  fl_part_batch *b = r->b;
  fl_cache *c = b->c;
  profile_end(r, st);
  if (r->ticket >= 0 && !r->handed_over) {
    if (!r->uses_ended)
      fl_phase_end_uses(c, r->s->x, r->ticket, b->stream);
    else if (r->more_uses || st != FL_OK)
      cudaEventRecord((cudaEvent_t)r->s->x->busy_until, (cudaStream_t)b->stream);
    if (r->pl) fl_plan_end_run(r->pl, b, st == FL_OK, r->round && st == FL_OK);
    if (r->round && st == FL_OK && b->prefetch) {
      st = fl_admit_job_run(r->round, b->stream);
    } else if (r->round && st == FL_OK) {
      fl_admit_job_post(c, r->round);
    } else if (r->round) {
      fl_admit_job_free(r->round);
      r->round = NULL;
    }
  }
  if (!r->pl) {
    if (r->round) r->own.x = NULL; /* the round gives it back */
    fl_run_setup_free(c, &r->own);
  }
  free(r->gen);
  return st;
}

fl_status fl_query_part_cuda(fl_part_batch *b) {
  fl_cache *c = b->c;
  run r = {.b = b, .pl = b->plan, .t0 = fl_now_ns(), .ticket = -1};
  fl_query_timing *tm = fl_query_timing_here();
  fl_status st = run_setup(&r);
  uint64_t ready = fl_now_ns();
  tm->setup_ns += ready - r.t0;
  if (st != FL_OK) return st;
  fl_run_header_refresh(b, r.s, r.v, r.gate_ticket);
  /* Neither takes the cache lock, which a round's launch holds. */
  r.ticket = fl_cache_query_begin(c);
  r.want_refs = fl_cache_unified_limit(c, b->part) > 0;
  if (r.ticket < 0)
    return run_end(&r, fl_fail(c, FL_ERR_OUT_OF_MEMORY, "out of host memory registering the query"));
  profile_begin(&r);
  st = run_index(&r);
  if (st == FL_OK) fl_phase_prewake(b);
  if (st == FL_OK && r.gated) {
    fl_plan_hand_over(r.pl, b, &r.gen, r.want_refs, r.t0, r.ticket);
    r.handed_over = 1;
    return run_end(&r, FL_OK);
  }
  uint64_t t1 = 0;
  if (st == FL_OK) st = run_counters(&r, &t1);
  if (t1) tm->index_ns += t1 - ready;
  if (st == FL_OK && r.n_miss) st = run_misses(&r, t1);
  if (st == FL_OK && r.n_miss) tm->fetch_ns += fl_now_ns() - t1;
  tm->missed += r.n_miss;
  if (st == FL_OK) {
    r.s->x->clean_set = r.v->m.set.ids;
    r.s->x->clean_slots = r.set_slots;
    st = run_download(&r);
  }
  return run_end(&r, st);
}

fl_status fl_query_cuda_reserve(fl_cache *c, uint64_t keys, uint32_t queries, uint32_t callers) {
  const fl_cache_fixed *f = fl_cache_fixed_of(c);
  fl_part_batch b = {.c = c, .f = f, .n_args = queries, .n_keys = keys};
  for (uint32_t t = 0; t < f->n_tables; t++)
    if (f->tables[t].vec_bytes > b.max_row) b.max_row = f->tables[t].vec_bytes;
  fl_run_layout l;
  fl_run_layout_plan(&b, keys, keys * b.max_row, &l);
  fl_status st = fl_scratch_reserve(c, l.total, l.host_total, callers);
  /* A round's new slots: admit_job.c asks at most a query's misses and 5
   * more (its margin of 4 deviations) a query. */
  return st == FL_OK ? fl_cache_reserve_maintenance(c, keys + 5ull * queries) : st;
}
