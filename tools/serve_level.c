/* serve_level.c: one level of the serving benchmark: the worker threads, the
 * shared queue, the arrival schedule and the counter sampler.
 *
 * The queue is a ticket counter: a free worker takes the next ticket i and
 * waits for request i to arrive (open loop: at t0 + sched[i]; closed loop:
 * at once). Then it serves the oldest arrived request no worker has claimed
 * (a flag per request, taken by compare-and-swap), until it has served its
 * own or found it claimed. Tickets go out in arrival order and a worker takes
 * one only when it is free, so this is one FIFO queue served by K servers: a
 * request starts when it has arrived and a worker is free and awake. A
 * worker whose wake-up comes late (the host's timers can fire milliseconds
 * late) holds up no request: the next worker to wake takes it, as a
 * server's pool takes a queued request. Each worker serves requests in
 * increasing order (the oldest first), and record i belongs to the worker
 * that claimed request i alone until the threads are joined.
 *
 * A thread's first fl_query costs 0.5-1.1 ms more than its next ones on the
 * H200 (the CUDA runtime's, the allocator's and the library's per-thread
 * state): each worker answers one request of the pool before the level,
 * as a server's long-lived threads have answered many, and the level's
 * counters are read after these warm-ups.
 *
 * The scheduler's account (serve_sched.c): a worker reads its probe just
 * before a request's start time and just after its end time, so the probes'
 * cost stays out of the time served (in the open loop, the first read
 * delays the start by its cost, under a microsecond). The workers and the
 * sampler live only for their level: each reads its totals as it ends,
 * since the process's threads are read before they start and after they
 * are joined. They are named (WORKER_NAME-N, SAMPLER_NAME, CANARY_NAME) for
 * top -H and for the level's account by thread kind. */
#include <fcntl.h>
#include <math.h>
#include <pthread.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common/clock.h"
#include "common/hash.h"
#include "tools/serve.h"
#include "tools/trace/zipf.h"

/* A waiting worker sleeps until this close to its request's arrival, then
 * yields in a loop: the sleep's wake-up lag (tens of us) stays out of the
 * latency of requests that arrive at an idle server. */
#define SPIN_NS 50000
/* Open loop: a request not started by seconds x DEADLINE_FACTOR + 1 s is not
 * served (the level is past saturation); the level reports it as unserved. */
#define DEADLINE_FACTOR 3
/* t0 is this far ahead of the workers' warm-up end, so that every worker,
 * the sampler and the canary are running when the level begins. */
#define START_AHEAD_NS 5000000
/* The level's threads' names (Linux keeps 15 characters): the workers' is
 * followed by "-N", the worker's id. */
#define WORKER_NAME "serve-w"
#define SAMPLER_NAME "serve-sampler"
#define CANARY_NAME "serve-canary"

typedef struct level_run {
  fl_serve_ctx *x;
  fl_serve_level *l;
  const int64_t *sched; /* open: arrival of ticket i, ns from t0; NULL: closed */
  uint64_t cap;         /* tickets available (records allocated) */
  uint64_t t0;          /* monotonic ns; 0 until the workers are warm (atomic) */
  uint32_t warmed;      /* workers done with their warm-up, well or not (atomic) */
  int64_t stop_ns;      /* closed: no request starts after; open: the deadline */
  uint64_t next;        /* the next ticket (atomic) */
  uint8_t *claimed;     /* per request: 1 once a worker took it to serve (atomic) */
  uint64_t low;         /* no request below it is unclaimed (atomic; a hint, never past one) */
  int failed;           /* a worker's fl_query failed (atomic) */
  fl_status status;     /* the first failure */
  int sampling;         /* the sampler runs while 1 (atomic) */
  fl_serve_sched sampler; /* the sampler's totals as it ended */
  fl_serve_canary canary; /* --canary */
  fl_serve_sched canary_life; /* the canary's totals as it ended */
} level_run;

typedef struct worker_arg {
  level_run *run;
  uint32_t id;
  char name[20];        /* its thread's: WORKER_NAME-id (K <= 1024: within Linux's 15
                           characters) */
  fl_serve_sched life;  /* the worker's totals as it ended */
} worker_arg;

static void wait_until(uint64_t t_ns) {
  for (uint64_t now = fl_now_ns(); now < t_ns; now = fl_now_ns()) {
    if (t_ns - now > SPIN_NS) {
      uint64_t at = t_ns - SPIN_NS;
      struct timespec ts = {(time_t)(at / 1000000000u), (long)(at % 1000000000u)};
      clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL);
    } else {
      sched_yield();
    }
  }
}

static void fail(level_run *run, fl_status s) {
  if (!__atomic_exchange_n(&run->failed, 1, __ATOMIC_ACQ_REL)) run->status = s;
}

/* Claims the oldest unclaimed request up to `last` (all of which have
 * arrived when `last` has); UINT64_MAX when there is none. */
static uint64_t claim_oldest(level_run *run, uint64_t last) {
  uint64_t i = __atomic_load_n(&run->low, __ATOMIC_RELAXED);
  for (; i <= last; i++) {
    uint8_t no = 0;
    if (__atomic_load_n(&run->claimed[i], __ATOMIC_RELAXED)) continue;
    if (__atomic_compare_exchange_n(&run->claimed[i], &no, 1, 0, __ATOMIC_ACQ_REL,
                                    __ATOMIC_RELAXED))
      break;
  }
  /* Every request below i was claimed when it was looked at. */
  if (i > __atomic_load_n(&run->low, __ATOMIC_RELAXED)) __atomic_store_n(&run->low, i, __ATOMIC_RELAXED);
  return i <= last ? i : UINT64_MAX;
}

/* Serves request i (claimed); *taken: the probe when the worker took its
 * ticket. 0, or -1 when the worker stops (a failure, or past the level's
 * end: record i stays unserved, end_ns < 0). */
static int serve(worker_arg *wa, fl_serve_probe *probe, const fl_serve_sched *taken, uint64_t i,
                 uint32_t *nth) {
  level_run *run = wa->run;
  fl_serve_ctx *x = run->x;
  fl_serve_sched before, after;
  fl_serve_probe_read(probe, &before);
  int64_t start = (int64_t)(fl_now_ns() - run->t0);
  if (start > run->stop_ns) return -1;
  uint64_t req = (x->cursor + i) % x->pool->n;
  fl_query_timing call;
  fl_status s = fl_serve_worker_answer(x->workers[wa->id], &x->pool->req[req], &call);
  int64_t end = (int64_t)(fl_now_ns() - run->t0);
  fl_serve_probe_read(probe, &after);
  if (s != FL_OK) {
    fail(run, s);
    return -1;
  }
  run->l->rec[i] = (fl_serve_record){req, wa->id, ++*nth, run->sched ? run->sched[i] : start,
                                     start, end, call, fl_serve_sched_diff(&before, &after),
                                     fl_serve_sched_diff(taken, &before)};
  return 0;
}

static void *worker_main(void *arg) {
  worker_arg *wa = arg;
  level_run *run = wa->run;
  uint32_t nth = 0;
  fl_serve_probe probe;
  fl_serve_probe_open(&probe);
  fl_serve_ctx *x = run->x;
  fl_query_timing warm;
  fl_status s = fl_serve_worker_answer(x->workers[wa->id],
                                       &x->pool->req[(x->cursor + wa->id) % x->pool->n], &warm);
  if (s != FL_OK) fail(run, s);
  __atomic_add_fetch(&run->warmed, 1, __ATOMIC_ACQ_REL);
  uint64_t t0;
  while (!(t0 = __atomic_load_n(&run->t0, __ATOMIC_ACQUIRE)) &&
         !__atomic_load_n(&run->failed, __ATOMIC_ACQUIRE))
    sched_yield();
  wait_until(t0);
  for (int stop = 0; !stop && !__atomic_load_n(&run->failed, __ATOMIC_ACQUIRE);) {
    uint64_t mine = __atomic_fetch_add(&run->next, 1, __ATOMIC_RELAXED);
    if (mine >= run->cap) break;
    fl_serve_sched taken;
    fl_serve_probe_read(&probe, &taken);
    if (run->sched) wait_until(run->t0 + (uint64_t)run->sched[mine]);
    uint64_t i;
    do {
      if ((i = claim_oldest(run, mine)) == UINT64_MAX) break; /* its own was taken */
      stop = serve(wa, &probe, &taken, i, &nth) != 0;
    } while (i != mine && !stop);
  }
  fl_serve_probe_read(&probe, &wa->life);
  fl_serve_probe_close(&probe);
  return NULL;
}

static void *canary_main(void *arg) {
  level_run *run = arg;
  fl_serve_canary_main(&run->canary);
  fl_serve_sched_self(&run->canary_life);
  return NULL;
}

static void *sampler_main(void *arg) {
  level_run *run = arg;
  fl_serve_level *l = run->l;
  uint64_t cap = 0;
  uint32_t ms = run->x->o->sample_ms;
  const struct timespec period = {(time_t)(ms / 1000), (long)(ms % 1000) * 1000000L};
  int stat_fd = open("/proc/stat", O_RDONLY | O_CLOEXEC);
  /* The last read comes after the workers are joined: every request lies
   * between two reads. */
  for (;;) {
    int last = !__atomic_load_n(&run->sampling, __ATOMIC_ACQUIRE);
    fl_cache_stats st;
    if (fl_cache_stats_get(run->x->cache, &st, NULL, 0) != FL_OK) break;
    if (l->n_samples == cap) {
      cap = cap ? 2 * cap : 1024;
      fl_serve_sample *p = realloc(l->samples_at, cap * sizeof *p);
      if (!p) break;
      l->samples_at = p;
    }
    fl_serve_sample *smp = &l->samples_at[l->n_samples++];
    smp->t_ns = fl_now_ns();
    fl_serve_attrib_of(&st, &smp->a);
    smp->a.v[FL_ATTR_STEAL] = fl_serve_steal_ms(stat_fd);
    if (last) break;
    nanosleep(&period, NULL);
  }
  if (stat_fd >= 0) close(stat_fd);
  fl_serve_sched_self(&run->sampler);
  return NULL;
}

/* Every served request's latency, time queued, time served, and dispatch
 * delay: from when it could start (it had arrived and the worker that took it
 * was free) to its start. A worker takes its tickets in increasing order, so
 * its previous record in ticket order is the one it served before. */
static fl_status times(fl_serve_level *l, uint32_t workers) {
  size_t bytes = (l->n ? l->n : 1) * sizeof(double);
  int64_t *free_at = calloc(workers, sizeof *free_at); /* the worker's last end, from t0 */
  l->lat_us = malloc(bytes), l->queue_us = malloc(bytes), l->service_us = malloc(bytes);
  l->dispatch_us = malloc(bytes);
  if (!free_at || !l->lat_us || !l->queue_us || !l->service_us || !l->dispatch_us) {
    free(free_at);
    return FL_ERR_OUT_OF_MEMORY;
  }
  for (uint64_t i = 0; i < l->n; i++) {
    const fl_serve_record *r = &l->rec[i];
    int64_t ready = r->sched_ns > free_at[r->worker] ? r->sched_ns : free_at[r->worker];
    l->lat_us[i] = (double)(r->end_ns - r->sched_ns) / 1e3;
    l->queue_us[i] = (double)(r->start_ns - r->sched_ns) / 1e3;
    l->service_us[i] = (double)(r->end_ns - r->start_ns) / 1e3;
    l->dispatch_us[i] = (double)(r->start_ns - ready) / 1e3;
    free_at[r->worker] = r->end_ns;
  }
  free(free_at);
  return FL_OK;
}

/* Keeps the served records, in ticket order, counts the rest as unserved,
 * and computes the records' times. */
static fl_status compact(level_run *run, uint64_t taken) {
  fl_serve_level *l = run->l;
  const fl_serve_pool *p = run->x->pool;
  for (uint64_t i = 0; i < taken; i++) {
    const fl_serve_record *r = &l->rec[i];
    if (r->end_ns < 0) { /* closed loop: taken after the time was up */
      l->unserved += run->sched != NULL;
      continue;
    }
    uint32_t s = p->req[r->req].samples;
    l->samples += s;
    l->lookups += (uint64_t)s * p->n_tables;
    if (r->end_ns / 1e9 > l->wall_s) l->wall_s = r->end_ns / 1e9;
    l->rec[l->n++] = *r;
  }
  if (run->sched) l->unserved += run->cap - taken; /* tickets never taken */
  l->passes = (double)taken / (double)p->n;
  run->x->cursor = (run->x->cursor + taken) % p->n;
  return times(l, run->x->o->threads);
}

/* The scheduler over the level: the threads that outlive it from the
 * process's two reads, the level's own (the workers, the sampler if any)
 * from the totals they read as they ended; by kind too when the process's
 * threads could be read. */
static void sched_totals(fl_serve_level *l, const fl_serve_tasks *before, const worker_arg *wa,
                         uint32_t workers, const fl_serve_sched *sampler,
                         const fl_serve_sched *canary) {
  fl_serve_tasks after;
  fl_serve_tasks_read(&after);
  l->threads =
      before->n && after.n ? after.n + workers + (sampler != NULL) + (canary != NULL) : 0;
  if (l->threads) fl_serve_tasks_delta(before, &after, &l->process, &l->kinds);
  for (uint32_t i = 0; i < workers; i++) {
    fl_serve_sched_add(&l->workers, &wa[i].life);
    if (l->threads) fl_serve_kinds_add(&l->kinds, wa[i].name, &wa[i].life);
  }
  fl_serve_sched_add(&l->process, &l->workers);
  if (sampler) fl_serve_sched_add(&l->process, sampler);
  if (sampler && l->threads) fl_serve_kinds_add(&l->kinds, SAMPLER_NAME, sampler);
  if (canary) fl_serve_sched_add(&l->process, canary);
  if (canary && l->threads) fl_serve_kinds_add(&l->kinds, CANARY_NAME, canary);
  fl_serve_tasks_free(&after);
}

/* Starts the workers, which answer a request each to warm up, reads the
 * level's counters, starts the sampler and the canary, and lets every
 * thread begin at t0; joins them. */
static fl_status run_level(level_run *run) {
  fl_serve_ctx *x = run->x;
  fl_serve_level *l = run->l;
  uint32_t k = x->o->threads;
  pthread_t *th = calloc(k + 2, sizeof *th); /* the workers, the sampler, the canary */
  worker_arg *wa = calloc(k, sizeof *wa);
  l->rec = malloc((run->cap ? run->cap : 1) * sizeof *l->rec);
  run->claimed = calloc(run->cap ? run->cap : 1, 1);
  if (!th || !wa || !l->rec || !run->claimed) {
    free(th), free(wa), free(run->claimed);
    return FL_ERR_OUT_OF_MEMORY;
  }
  for (uint64_t i = 0; i < run->cap; i++) l->rec[i].end_ns = -1;
  fl_serve_tasks tasks;
  fl_serve_tasks_read(&tasks);
  uint32_t started = 0;
  for (; started < k; started++) {
    wa[started] = (worker_arg){.run = run, .id = started};
    snprintf(wa[started].name, sizeof wa[started].name, WORKER_NAME "-%u", started);
    if (pthread_create(&th[started], NULL, worker_main, &wa[started]) != 0) break;
    pthread_setname_np(th[started], wa[started].name);
  }
  if (started < k) fail(run, FL_ERR_OUT_OF_MEMORY); /* no thread: the others stop */
  while (__atomic_load_n(&run->warmed, __ATOMIC_ACQUIRE) < started) sched_yield();
  fl_status s = fl_cache_stats_get(x->cache, &l->before, NULL, 0);
  if (s != FL_OK) fail(run, s);
  run->sampling = 1;
  const uint64_t t0 = l->t0_ns = fl_now_ns() + START_AHEAD_NS;
  int sampler = x->o->sample_ms && pthread_create(&th[k], NULL, sampler_main, run) == 0;
  if (sampler) pthread_setname_np(th[k], SAMPLER_NAME);
  run->canary = (fl_serve_canary){.on = 1, .t0 = t0};
  int canary = x->o->canary && pthread_create(&th[k + 1], NULL, canary_main, run) == 0;
  if (canary) pthread_setname_np(th[k + 1], CANARY_NAME);
  if (sampler != (x->o->sample_ms != 0) || canary != x->o->canary) fail(run, FL_ERR_OUT_OF_MEMORY);
  __atomic_store_n(&run->t0, t0, __ATOMIC_RELEASE); /* the workers go */
  for (uint32_t i = 0; i < started; i++) pthread_join(th[i], NULL);
  __atomic_store_n(&run->sampling, 0, __ATOMIC_RELEASE);
  if (sampler) pthread_join(th[k], NULL);
  __atomic_store_n(&run->canary.on, 0, __ATOMIC_RELEASE);
  if (canary) pthread_join(th[k + 1], NULL);
  l->canary = canary;
  l->gaps = run->canary.gaps, l->n_gaps = run->canary.n, l->gaps_lost = run->canary.lost;
  sched_totals(l, &tasks, wa, started, sampler ? &run->sampler : NULL,
               canary ? &run->canary_life : NULL);
  fl_serve_tasks_free(&tasks);
  if (s == FL_OK) s = fl_cache_stats_get(x->cache, &l->after, NULL, 0);
  if (s == FL_OK && run->failed) s = run->status;
  uint64_t taken = run->next < run->cap ? run->next : run->cap;
  if (s == FL_OK) s = compact(run, taken);
  free(run->claimed);
  free(th);
  free(wa);
  return s;
}

static void level_init(fl_serve_level *l, const char *label, int open, double seconds) {
  memset(l, 0, sizeof *l);
  snprintf(l->label, sizeof l->label, "%s", label);
  l->open = open;
  l->seconds = seconds;
}

fl_status fl_serve_run_closed(fl_serve_ctx *x, const char *label, double seconds,
                              uint64_t max_requests, fl_serve_level *l) {
  level_init(l, label, 0, seconds);
  level_run run = {.x = x, .l = l};
  /* Without a count, records for 3x the rate seen so far: a faster level
   * ends early, at its last record, and its rate is still what it did. */
  run.cap = max_requests ? max_requests : (uint64_t)(x->est_rps * seconds * 3) + 4096;
  run.stop_ns = seconds > 0 ? (int64_t)(seconds * 1e9) : INT64_MAX;
  return run_level(&run);
}

fl_status fl_serve_run_open(fl_serve_ctx *x, const char *label, double load, double rps,
                            double seconds, fl_serve_level *l) {
  level_init(l, label, 1, seconds);
  l->load = load;
  /* Poisson arrivals: exponential gaps of mean 1 / rps, one stream per level. */
  uint64_t rng = fl_hash2(x->seed, x->levels_run++), cap = 0, n = 0;
  int64_t *sched = NULL;
  for (double t = 0;;) {
    double u = ((double)(fl_rng_next(&rng) >> 11) + 1) * 0x1p-53; /* (0, 1] */
    t += -log(u) / rps;
    if (t >= seconds) break;
    if (n == cap) {
      cap = cap ? 2 * cap : 4096;
      int64_t *p = realloc(sched, cap * sizeof *p);
      if (!p) return free(sched), FL_ERR_OUT_OF_MEMORY;
      sched = p;
    }
    sched[n++] = (int64_t)(t * 1e9);
  }
  l->offered_rps = (double)n / seconds;
  level_run run = {.x = x, .l = l, .sched = sched, .cap = n};
  run.stop_ns = (int64_t)((seconds * DEADLINE_FACTOR + 1) * 1e9);
  fl_status s = run_level(&run);
  free(sched);
  return s;
}

void fl_serve_level_free(fl_serve_level *l) {
  free(l->rec);
  free(l->lat_us);
  free(l->queue_us);
  free(l->service_us);
  free(l->dispatch_us);
  free(l->samples_at);
  free(l->gaps);
  fl_serve_kinds_free(&l->kinds);
  memset(l, 0, sizeof *l);
}
