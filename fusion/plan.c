/* plan.c: a prepared query's plan on the CUDA engine (plan.h).
 *
 * A prepared query of one part batch keeps its scratch and header from its
 * first run; later runs refresh only what changes (the counters' start
 * values, the batch counter, ids in host memory) and replay the index phase
 * (header upload, index kernel, hit copy) as one CUDA graph: one launch
 * where fl_query makes three calls.
 *
 * A launched run (fl_prepared_launch) replays a graph that also holds a
 * scatter behind a gate (fl_gate): the host's rows come from the pinned
 * staging, read by the GPU once the host raises the gate, so nothing after
 * the launch needs a CUDA call, and the host's half (the counters, the
 * gather, the gate, the admission round) is the cache's answerer thread's. */
#include <cuda_runtime_api.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/clock.h"
#include "common/courier.h"
#include "common/error.h"
#include "common/fault.h"
#include "fusion/plan.h"

/* How often the answerer asks the stream whether a kernel it waits for
 * failed: seldom. Until it raises the gate, a CUDA call of its own can wait
 * behind another thread's call that holds the driver while it waits for
 * the device (cudaFree, a legacy-stream cudaMemcpy), and the device waits
 * for the gate: stuck for good. The counters come long before this. */
#define FL_ANSWER_CHECK_NS 1000000000ull

/* The host's half of a run whose graph scatters the host's rows after a
 * gate: the counters, the rows gathered, the gate raised, the round handed
 * to the courier. */
typedef struct gated_answer {
  fl_part_batch b;     /* args: the plan's copy (hargs) */
  fl_batch_arg *hargs;
  uint32_t *hquery_of; /* the plan's copies of the run's args and their queries */
  uint64_t *gen;       /* the run's generations, until a round takes them */
  uint64_t t0;         /* when the run began */
  uint32_t ticket;
  int want_refs;
} gated_answer;

struct fl_plan {
  fl_run_setup s;         /* kept from run to run; s.x NULL before the first */
  fl_run_views v;         /* of s */
  void *exec;             /* cudaGraphExec_t, NULL until built */
  void *exec_gated;       /* the same with the gate (fl_gate) for launches; NULL: none */
  int no_graph;           /* building it failed: direct launches */
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
   * it (arrive). */
  _Atomic int arrivals;
  fl_admit_job *pending_round; /* the answerer's round, NULL: none */
  /* What the next run must order after, besides its stream's own order:
   * the last run's stream (NULL when it must wait for busy_until whatever
   * the stream: before the first run, after a failed one), and whether the
   * last run handed a round over (admit_done). */
  void *last_stream;
  int last_ordered, last_posted;
};

fl_plan *fl_plan_create(void) { return calloc(1, sizeof(fl_plan)); }

void fl_plan_set_async(fl_plan *pl, int async) { pl->async = async; }

/* Waits for the plan's last answer; returns a launched run's failure not
 * reported yet (once). */
fl_status fl_plan_wait(fl_cache *c, fl_plan *pl) {
  uint64_t t = __atomic_load_n(&pl->answer_ticket, __ATOMIC_ACQUIRE);
  if (t) fl_courier_wait(fl_cache_fixed_of(c)->answerer, t);
  fl_status st = pl->answer_st;
  if (st == FL_OK) return FL_OK;
  pl->answer_st = FL_OK;
  return fl_fail(c, st, "%s", pl->answer_msg);
}

void fl_plan_destroy(fl_cache *c, fl_plan *pl) {
  if (!pl) return;
  (void)fl_plan_wait(c, pl);
  /* Reusable once its last uses end, the round's recorded first. */
  if (pl->s.x) fl_scratch_unhold(c, pl->s.x);
  fl_run_setup_free(c, &pl->s);
  if (pl->exec) cudaGraphExecDestroy((cudaGraphExec_t)pl->exec);
  if (pl->exec_gated) cudaGraphExecDestroy((cudaGraphExec_t)pl->exec_gated);
  free(pl->answer.hargs);
  free(pl->answer.hquery_of);
  free(pl);
}

/* Gate tickets: below FL_GATE_FAILED, never 0 (a kept scratch's gate
 * starts at 0). */
static uint32_t next_ticket(uint32_t t) {
  t = (t + 1) & ~FL_GATE_FAILED;
  return t ? t : 1;
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
static fl_status reuse(fl_cache *c, fl_plan *pl, void *stream) {
  int same_stream = pl->last_ordered && pl->last_stream == stream;
  void *ev[2] = {same_stream ? NULL : pl->s.x->busy_until,
                 pl->last_posted ? pl->s.x->admit_done : NULL};
  for (int i = 0; i < 2; i++) {
    if (!ev[i]) continue;
    cudaError_t e = cudaStreamWaitEvent((cudaStream_t)stream, (cudaEvent_t)ev[i], 0);
    if (e != cudaSuccess)
      return fl_fail(c, FL_ERR_CUDA, "ordering after the prepared query's last run: %s",
                     cudaGetErrorString(e));
  }
  return FL_OK;
}

/* The first run: the header built and kept, with room for a launched run's
 * copy of the args. */
static fl_status first_run(fl_plan *pl, fl_part_batch *b) {
  fl_cache *c = b->c;
  fl_status st = fl_run_setup_new(b, &pl->s);
  if (st != FL_OK) return st;
  pl->answer.hargs = malloc(b->n_args * sizeof *b->args);
  pl->answer.hquery_of = malloc(b->n_args * sizeof *b->query_of);
  if (!pl->answer.hargs || !pl->answer.hquery_of) {
    free(pl->answer.hargs);
    free(pl->answer.hquery_of);
    pl->answer.hargs = NULL;
    pl->answer.hquery_of = NULL;
    fl_run_setup_free(c, &pl->s);
    return fl_fail(c, FL_ERR_OUT_OF_MEMORY, "out of host memory");
  }
  fl_scratch_keep(c, pl->s.x);
  fl_run_views_of(&pl->s.l, pl->s.x, &pl->v);
  memset(pl->v.h_gate, 0, sizeof(fl_gate_bad)); /* no ticket is 0: shut */
  return FL_OK;
}

fl_status fl_plan_begin(fl_plan *pl, fl_part_batch *b, const fl_run_setup **s,
                        const fl_run_views **v, uint32_t *ticket) {
  fl_cache *c = b->c;
  fl_status st = fl_plan_wait(c, pl);
  if (st != FL_OK) return st;
  pl->ticket = next_ticket(pl->ticket);
  if (pl->s.x) {
    /* The last run's round must be launched: its admit_done recorded. A
     * plan run back to back would shed every round the courier has not
     * woken for yet, and never warm: it waits instead. */
    fl_scratch_unhold(c, pl->s.x);
    st = reuse(c, pl, b->stream);
  } else {
    st = first_run(pl, b);
  }
  if (st != FL_OK) return st;
  *s = &pl->s;
  *v = &pl->v;
  *ticket = pl->ticket;
  return FL_OK;
}

void *fl_plan_graph(const fl_plan *pl, int clear_set, int profiled, int *gated) {
  void *exec = !clear_set && !profiled ? pl->exec : NULL;
  *gated = exec && pl->async && pl->exec_gated;
  return *gated ? pl->exec_gated : exec;
}

/* One graph of the plan's index phase, built node by node; NULL on failure. */
static void *build_graph(fl_part_batch *b, fl_plan *pl, int gated) {
  cudaGraph_t g = NULL;
  cudaGraphExec_t exec = NULL;
  void *last = NULL;
  int ok = cudaGraphCreate(&g, 0) == cudaSuccess;
  fl_launch_to to = {NULL, g, &last, 1};
  ok = ok && fl_phase_index(b, &pl->s, &pl->v, 0, gated, to, NULL) == 0;
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
static void build_graphs(fl_part_batch *b, fl_plan *pl) {
  int gated = 1;
  for (uint32_t a = 0; a < b->n_args; a++) gated = gated && !pl->s.host_out[a];
  pl->exec = build_graph(b, pl, 0);
  if (!pl->exec) {
    pl->no_graph = 1;
    return;
  }
  pl->exec_gated = gated ? build_graph(b, pl, 1) : NULL;
}

void fl_plan_end_run(fl_plan *pl, fl_part_batch *b, int ok, int posted) {
  pl->last_stream = b->stream;
  pl->last_ordered = ok;
  pl->last_posted = posted;
  /* A plan whose run left the set empty builds its graph, once. */
  if (!pl->exec && !pl->no_graph && pl->s.x->clean_set) build_graphs(b, pl);
}

/* One of a launched run's two arrivals (fl_plan.arrivals); the last hands
 * the answerer's round to the courier: its kernels reset the miss set the
 * run's scatter reads, so they order after the end-of-reads events. */
static void arrive(fl_cache *c, fl_plan *pl) {
  if (atomic_fetch_sub(&pl->arrivals, 1) != 1) return;
  fl_admit_job *round = pl->pending_round;
  pl->pending_round = NULL;
  if (round) fl_admit_job_post(c, round);
}

/* Counts a launched run's lookups and fetches the host's rows into the
 * pinned staging, readying its round (*round). */
static fl_status answer_misses(gated_answer *a, fl_plan *pl, uint64_t n_miss, uint64_t t1,
                               fl_admit_job **round) {
  fl_part_batch *b = &a->b;
  fl_cache *c = b->c;
  fl_query_count(b, pl->v.h_per_arg);
  if (!n_miss) return FL_OK;
  int in_place = 0;
  uint64_t host_rows = 0;
  fl_status st = fl_phase_misses(b, &pl->v, a->want_refs, 0, &in_place, &host_rows);
  uint64_t cpu2 = fl_thread_cpu_ns();
  if (st == FL_OK &&
      !(*round = fl_phase_admit_job(b, &pl->v, pl->s.x, n_miss, &a->gen, a->want_refs, 0)))
    st = fl_fail(c, FL_ERR_OUT_OF_MEMORY, "out of host memory");
  fl_cache_add(c, FL_STAT_NS_MISS_FETCH, fl_now_ns() - t1);
  fl_cache_add(c, FL_STAT_NS_MISS_CPU, fl_thread_cpu_ns() - cpu2);
  return st;
}

/* The host's half of a gated run, after the launch: waits for the
 * counters, gathers the rows that are the host's into the pinned staging,
 * raises the gate (failed too: the graph must not wait for ever), then
 * hands the round to the courier. Before the gate it makes no copy or
 * launch (fl_gate), only a rare stream query, and waits for nothing on the
 * device but the counters: the run's stream is held at the gate until
 * then. Nor after it: another handle's gate may be shut. */
static fl_status answer(gated_answer *a, fl_plan *pl) {
  fl_part_batch *b = &a->b;
  fl_cache *c = b->c;
  const fl_run_views *v = &pl->v;
  fl_admit_job *round = NULL;
  uint64_t bad = ~0ull;
  /* The stream is asked about failures rarely: any CUDA call here might
   * wait behind another thread's call that waits for a gate. */
  fl_status st = fl_phase_wait_word(c, v->h_flag, 1, FL_ANSWER_CHECK_NS, b->stream,
                                    FL_COUNTERS_WHAT);
  if (st == FL_OK) {
    uint64_t t1 = fl_now_ns();
    fl_cache_add(c, FL_STAT_NS_INDEX, t1 - a->t0);
    bad = v->h_counters[1];
    fl_phase_note_misses(b, v->h_counters[0]);
    if (bad == ~0ull) st = answer_misses(a, pl, v->h_counters[0], t1, &round);
  }
  int ok = st == FL_OK && bad == ~0ull;
  /* The rows are in the staging (the fetch's threads are done). */
  __atomic_store_n(&v->h_gate->raised, a->ticket | (ok ? 0u : FL_GATE_FAILED), __ATOMIC_RELEASE);
  if (st == FL_OK && !ok) {
    /* The gate kernel hands over the id (no copy: it could wait behind
     * another handle's shut gate, which this thread must raise). */
    st = fl_phase_wait_word(c, &v->h_gate->ticket, a->ticket, FL_ANSWER_CHECK_NS, b->stream,
                            "the gate kernel's out-of-range id");
    if (st == FL_OK)
      st = fl_query_range_error(b, bad, __atomic_load_n(&v->h_gate->id, __ATOMIC_ACQUIRE));
  }
  if (ok) {
    pl->s.x->clean_set = v->m.set.ids;
    pl->s.x->clean_slots = fl_miss_set_slots(b->n_keys, b->n_args);
  }
  pl->last_ordered = ok;
  pl->last_posted = round && ok;
  if (round && !ok) fl_admit_job_free(round);
  pl->pending_round = ok ? round : NULL;
  arrive(c, pl);
  free(a->gen);
  a->gen = NULL;
  return st;
}

/* The answerer's side of a launched run: its failure waits in the plan for
 * fl_prepared_wait, or the next launch, to report it. */
static void answer_deliver(void *ctx) {
  fl_plan *pl = ctx;
  fl_cache *c = pl->answer.b.c;
  const struct fl_cuda_state *cs = pl->answer.b.f->cuda;
  /* Once per thread (the answerer is the cache's own): no CUDA call before
   * the gate that need not be made (FL_ANSWER_CHECK_NS). */
  static _Thread_local int device = -1;
  if (device != cs->device && cudaSetDevice(cs->device) == cudaSuccess) device = cs->device;
  fl_status st = device == cs->device
                     ? answer(&pl->answer, pl)
                     : fl_fail(c, FL_ERR_CUDA, "selecting the cache's device for a launched query");
  if (st != FL_OK) {
    snprintf(pl->answer_msg, sizeof pl->answer_msg, "%s", fl_error_get(c));
    pl->answer_st = st;
  }
  __atomic_store_n(&pl->answer_ticket, 0, __ATOMIC_RELEASE);
}

/* Without room in the answerer's queue: the run fails, its gate raised. */
static void answer_drop(void *ctx) {
  fl_plan *pl = ctx;
  __atomic_store_n(&pl->v.h_gate->raised, pl->answer.ticket | FL_GATE_FAILED, __ATOMIC_RELEASE);
  snprintf(pl->answer_msg, sizeof pl->answer_msg, "out of host memory handing the run over");
  pl->answer_st = FL_ERR_OUT_OF_MEMORY;
  pl->last_ordered = pl->last_posted = 0;
  pl->pending_round = NULL;
  arrive(pl->answer.b.c, pl);
  free(pl->answer.gen);
  pl->answer.gen = NULL;
  __atomic_store_n(&pl->answer_ticket, 0, __ATOMIC_RELEASE);
}

/* Readies a launched run's answer (the batch's args copied: the caller's
 * are gone once the call returns) and hands it to the answerer. Takes
 * *gen. */
static void post_answer(fl_plan *pl, fl_part_batch *b, uint64_t **gen, int want_refs,
                        uint64_t t0) {
  gated_answer *a = &pl->answer;
  memcpy(a->hargs, b->args, b->n_args * sizeof *b->args);
  memcpy(a->hquery_of, b->query_of, b->n_args * sizeof *b->query_of);
  a->b = *b;
  a->b.args = a->hargs;
  a->b.query_of = a->hquery_of;
  a->b.views = NULL;
  a->gen = *gen;
  *gen = NULL;
  a->t0 = t0;
  a->ticket = pl->ticket;
  a->want_refs = want_refs;
  fl_courier_post(b->f->answerer, (fl_courier_job){answer_deliver, answer_drop, pl,
                                                   (uint64_t)(uintptr_t)pl, &pl->answer_ticket});
}

void fl_plan_hand_over(fl_plan *pl, fl_part_batch *b, uint64_t **gen, int want_refs, uint64_t t0,
                       int64_t ticket) {
  /* Everything this run does on the stream is in the graph. The answer
   * goes to the answerer before any other CUDA call here: such a call can
   * wait behind another thread's that waits for the device, which waits
   * for this run's gate (FL_ANSWER_CHECK_NS). */
  pl->last_stream = b->stream;
  atomic_store(&pl->arrivals, 2);
  post_answer(pl, b, gen, want_refs, t0);
  fl_phase_end_uses(b->c, pl->s.x, ticket, b->stream);
  arrive(b->c, pl);
}
