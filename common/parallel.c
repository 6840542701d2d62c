/* parallel.c: the worker pool behind fl_workers_for (see parallel.h): its
 * threads, how a job is handed to the helpers its plan asks for, and how the
 * job ends. How many helpers pay is pool_model.h's question; the costs it is
 * answered with are pool_learn.h's.
 *
 * Hand-off: the owner of a job (the caller holding `busy`) writes the job,
 * stores the ticket (the job's generation and its number of helper slots)
 * and bumps `generation`. An idle worker that sees a new generation claims a
 * slot with a CAS on the ticket and only then reads the job; one that finds
 * no slot left goes back to waiting. So a job gets at most the helpers it was
 * planned for, whoever comes first: spinning workers before woken ones. Work
 * is handed out in chunks through an atomic cursor, so uneven chunks and
 * late helpers balance. When the owner finds no chunk left it closes the
 * ticket and waits only for the helpers that claimed a slot: a worker woken
 * late never holds up a job. The owner of a watched job (fl_workers_start)
 * takes chunks itself (fl_workers_help) whenever the job stops moving, so
 * the same holds for it.
 *
 * Waking: a worker that finished a job spins on `generation` for
 * FL_WORKER_SPIN_NS, so back-to-back jobs start without a system call; then
 * it sleeps on a futex of `generation`. The owner wakes, with one futex
 * wake, only as many sleepers as the plan needs beyond the spinning
 * workers; the others sleep through the job. No mutex is taken on either
 * side: with a condition variable, every woken worker would take the pool's
 * mutex in turn, which costs more than a small gather itself.
 *
 * Waking ahead (fl_workers_prewake): a caller that knows a large job is
 * coming raises `spin_until` and bumps `generation` with no job behind it;
 * every worker comes out of its wait, finds no slot to claim, and spins
 * until spin_until. A bump, not a bare futex wake: a worker between its
 * check of generation and its futex_wait then returns at once (the word
 * moved) instead of sleeping through the wake. Ticket generations stay
 * distinct: each publish takes generation + 1 and bumps it after. */
#include "common/parallel.h"

#include "common/clock.h"
#include "common/mutant.h"
#include "common/pool_learn.h"

#include <limits.h>
#include <linux/futex.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

/* How long an idle worker spins before it sleeps: long enough for the next
 * job of the same call (a query's probe, copy and scatter), short enough not
 * to take cores from other pools of the process (at 200 us the replay's
 * gathers slow down: its trace generator's pool spins into them). */
#define FL_WORKER_SPIN_NS 20000ull
/* Chunks per participant: fine enough that the last chunks of a job end
 * close together, coarse enough that the cursor is not contended. */
#define FL_CHUNKS_PER_THREAD 8
/* The most threads a pool has: the ticket counts slots in 15 bits. */
#define FL_WORKERS_MAX 4096u
/* Hand-offs measured at creation: each one to a sleeping worker, then one
 * to the same worker still spinning (the medians count). */
#define FL_CALIBRATIONS 5
/* How long the calibration waits for workers to fall asleep or to claim a
 * job before it measures nothing more. */
#define FL_CALIBRATION_WAIT_NS 20000000ull

/* The ticket: generation << 32 | closed << 31 | claimed << 16 | slots. */
#define FL_TICKET_CLOSED (1ull << 31)
#define FL_TICKET_CLAIM (1ull << 16)

static uint32_t ticket_claimed(uint64_t t) { return (uint32_t)(t >> 16) & 0x7fffu; }
static uint32_t ticket_slots(uint64_t t) { return (uint32_t)t & 0xffffu; }

struct fl_workers {
  uint32_t n;                  /* worker threads (the caller is one more) */
  pthread_t *threads;
  pthread_mutex_t busy;        /* held by the caller that owns the current job */
  /* Invariant: a job's fields are written before its ticket is stored
   * (release) and read only by a worker whose claim of that ticket
   * succeeded (acquire); the owner rewrites them only after it closed the
   * ticket and saw `done` reach the number of slots claimed. */
  _Atomic uint64_t ticket;     /* the current job's (see FL_TICKET_*) */
  _Atomic uint32_t generation; /* bumped per job (and at stop); the futex word */
  _Atomic uint32_t sleepers;   /* workers in or entering a futex wait */
  _Atomic uint32_t done;       /* helpers that finished the current job */
  _Atomic int stop;
  _Atomic uint32_t last_helpers; /* helpers of the last planned job */
  _Atomic uint64_t last_start; /* the last helper's start, publish to claim (ns) */
  _Atomic uint64_t spin_until; /* idle workers spin at least until then (fl_now_ns) */
  uint64_t last_wake_call;     /* the owner's last wake call (ns; 0: none) */
  fl_pool_learned learned;     /* the costs the jobs are planned with */
  /* The current job. */
  fl_range_fn fn;
  void *ctx;
  size_t n_items, chunk;
  uint64_t published_ns;       /* when its ticket was stored */
  fl_pool_pace *pace;          /* its body's learned cost */
  atomic_size_t cursor;
};

static void cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#endif
}

static void futex_wait(_Atomic uint32_t *word, uint32_t expected) {
  syscall(SYS_futex, (uint32_t *)word, FUTEX_WAIT_PRIVATE, expected, NULL, NULL, 0);
}

static void futex_wake(_Atomic uint32_t *word, int count) {
  syscall(SYS_futex, (uint32_t *)word, FUTEX_WAKE_PRIVATE, count, NULL, NULL, 0);
}

/* Runs chunks of the current job until none is left; returns its items. */
static size_t run_chunks(fl_workers *w) {
  size_t items = 0;
  for (;;) {
    size_t b = atomic_fetch_add(&w->cursor, w->chunk);
    if (b >= w->n_items) return items;
    if (FL_MUTANT_ON(8) && b + w->chunk > w->n_items) return items;
    size_t e = b + w->chunk < w->n_items ? b + w->chunk : w->n_items;
    w->fn(w->ctx, b, e);
    items += e - b;
  }
}

/* Waits for a generation other than `seen` and returns it: spins for
 * FL_WORKER_SPIN_NS (or until spin_until, when later), then sleeps; a wake
 * starts a new spin. Waking ahead of a job is for large jobs only: under
 * several callers of small ones, a wake per caller keeps the pool spinning
 * on every core (serve_bench, 4 callers on 16 vCPUs: the pool's 15 threads
 * wait 6.9 s for a CPU in a 2 s level, and the callers' open-loop p99
 * nearly doubles), and for a caller alone it saves a dense small batch's
 * gather no more than the runs' spread; a hashed one's about 20 us
 * (PERFORMANCE_LOG, 2026-11-27).
 * *woke: when it last came out of a sleep (0: it has not slept). */
static uint32_t next_job(fl_workers *w, uint32_t seen, uint64_t *woke) {
  *woke = 0;
  for (;;) {
    uint64_t until = fl_now_ns() + FL_WORKER_SPIN_NS,
             ahead = atomic_load_explicit(&w->spin_until, memory_order_relaxed);
    if (ahead > until && !FL_MUTANT_ON(32)) until = ahead;
    for (unsigned i = 0;; i++) {
      uint32_t g = atomic_load_explicit(&w->generation, memory_order_acquire);
      if (g != seen) return g;
      if ((i & 255u) == 255u) {
        if (fl_now_ns() > until) break;
        sched_yield(); /* an oversubscribed machine runs the caller meanwhile */
      }
      cpu_relax();
    }
    /* Sleep. sleepers is raised before generation is read again (both
     * sequentially consistent), so an owner that bumps generation either is
     * seen here or counts this worker as asleep (and wakes it only if its
     * job needs it); futex_wait itself returns at once if the word moved
     * on. */
    atomic_fetch_add(&w->sleepers, 1);
    if (atomic_load(&w->generation) == seen) {
      futex_wait(&w->generation, seen);
      *woke = fl_now_ns();
    }
    atomic_fetch_sub(&w->sleepers, 1);
  }
}

/* Takes a slot of the current job; 0 when it has none left or is closed. */
static int claim(fl_workers *w) {
  uint64_t t = atomic_load_explicit(&w->ticket, memory_order_acquire);
  while (!(t & FL_TICKET_CLOSED) && ticket_claimed(t) < ticket_slots(t))
    if (atomic_compare_exchange_weak_explicit(&w->ticket, &t, t + FL_TICKET_CLAIM,
                                              memory_order_acquire, memory_order_acquire))
      return 1;
  return 0;
}

static void *worker_main(void *arg) {
  fl_workers *w = arg;
  uint32_t seen = 0;
  for (;;) {
    uint64_t woke;
    seen = next_job(w, seen, &woke);
    if (atomic_load(&w->stop)) break;
    if (!claim(w)) continue;
    /* Asleep when the job came (woken after its publish), or spinning. */
    uint64_t now = fl_now_ns(), start = now > w->published_ns ? now - w->published_ns : 0;
    atomic_store_explicit(&w->last_start, start, memory_order_relaxed);
    fl_pool_learn_start(&w->learned, woke > w->published_ns, start);
    run_chunks(w);
    atomic_fetch_add_explicit(&w->done, 1, memory_order_release);
  }
  return NULL;
}

/* Writes the job fn over [from, n) for `helpers` helpers and publishes it.
 * The caller holds busy. */
static void publish(fl_workers *w, fl_range_fn fn, void *ctx, fl_pool_pace *pace, size_t from,
                    size_t n, size_t grain, uint32_t helpers) {
  size_t parts = (size_t)(helpers + 1) * FL_CHUNKS_PER_THREAD;
  size_t chunk = (n - from + parts - 1) / parts;
  w->fn = fn;
  w->ctx = ctx;
  w->pace = pace;
  w->n_items = n;
  w->chunk = chunk < grain ? grain : chunk;
  atomic_store_explicit(&w->cursor, from, memory_order_relaxed);
  atomic_store_explicit(&w->done, 0, memory_order_relaxed);
  atomic_store_explicit(&w->last_helpers, helpers, memory_order_relaxed);
  w->published_ns = fl_now_ns();
  uint32_t g = atomic_load_explicit(&w->generation, memory_order_relaxed) + 1;
  atomic_store_explicit(&w->ticket, (uint64_t)g << 32 | helpers, memory_order_release);
  atomic_fetch_add(&w->generation, 1);
  /* Workers not counted asleep now see the new generation (next_job). */
  uint32_t asleep = atomic_load(&w->sleepers), awake = w->n - (asleep < w->n ? asleep : w->n);
  w->last_wake_call = 0;
  if (helpers > awake && asleep > 0) {
    uint64_t t0 = fl_now_ns();
    futex_wake(&w->generation, (int)(helpers - awake));
    w->last_wake_call = fl_now_ns() - t0;
    fl_pool_learn_wake_call(&w->learned, w->last_wake_call);
  }
}

/* Closes the current job, waits for the helpers that claimed a slot, and
 * frees the pool for the next owner. */
static void finish(fl_workers *w) {
  uint64_t t = atomic_fetch_or_explicit(&w->ticket, FL_TICKET_CLOSED, memory_order_acq_rel);
  uint32_t claimed = ticket_claimed(t);
  for (unsigned i = 0; atomic_load_explicit(&w->done, memory_order_acquire) < claimed; i++)
    if ((i & 1023u) == 1023u) sched_yield(); else cpu_relax();
  pthread_mutex_unlock(&w->busy);
}

/* The owner's share: runs chunks until none is left, timing its own. */
static void run_own_chunks(fl_workers *w) {
  uint64_t t0 = fl_now_ns();
  size_t items = run_chunks(w);
  fl_pool_learn_items(&w->learned, w->pace, items, fl_now_ns() - t0);
}

/* The helpers worth calling in for `s` (its spinning and sleeping counts
 * filled in here). */
static uint32_t plan(fl_workers *w, const fl_pool_pace *p, fl_pool_shape *s) {
  if (FL_MUTANT_ON(10)) return w->n;
  fl_pool_costs c;
  fl_pool_costs_of(&w->learned, p, &c);
  uint32_t asleep = atomic_load_explicit(&w->sleepers, memory_order_relaxed);
  if (asleep > w->n) asleep = w->n;
  s->spinning = w->n - asleep;
  s->sleeping = asleep;
  return fl_pool_plan(&c, s);
}

/* Items [from, n) on the caller alone, timed when it is worth learning. */
static void run_alone(fl_workers *w, fl_pool_pace *p, fl_range_fn fn, void *ctx, size_t from,
                      size_t n) {
  atomic_store_explicit(&w->last_helpers, 0, memory_order_relaxed);
  if (!fl_pool_time_alone(&w->learned, p, n - from)) {
    fn(ctx, from, n);
    return;
  }
  uint64_t t0 = fl_now_ns();
  fn(ctx, from, n);
  fl_pool_learn_items(&w->learned, p, n - from, fl_now_ns() - t0);
}

void fl_workers_for(fl_workers *w, size_t n, size_t grain, fl_range_fn fn, void *ctx) {
  if (n == 0) return;
  if (grain == 0) grain = 1;
  if (w == NULL || w->n == 0 || n <= grain) { /* one chunk: nothing to plan */
    if (w && atomic_load_explicit(&w->last_helpers, memory_order_relaxed))
      atomic_store_explicit(&w->last_helpers, 0, memory_order_relaxed);
    fn(ctx, 0, n);
    return;
  }
  fl_pool_pace *p = fl_pool_pace_of(&w->learned, (uintptr_t)fn);
  size_t from = 0;
  if (!fl_pool_known(&w->learned, p)) { /* the body's first job: one chunk, timed, on the caller */
    uint64_t t0 = fl_now_ns();
    fn(ctx, 0, grain);
    fl_pool_learn_items(&w->learned, p, grain, fl_now_ns() - t0);
    from = grain;
  }
  fl_pool_shape s = {.n = n - from, .grain = grain};
  uint32_t helpers = plan(w, p, &s);
  if (helpers == 0 && s.spinning > 0 && fl_pool_probe_due(&w->learned)) helpers = 1;
  if (helpers == 0 || pthread_mutex_trylock(&w->busy) != 0) {
    run_alone(w, p, fn, ctx, from, n);
    return;
  }
  publish(w, fn, ctx, p, from, n, grain, helpers);
  run_own_chunks(w);
  finish(w);
}

int fl_workers_start(fl_workers *w, size_t n, size_t grain, fl_range_fn fn, void *ctx) {
  if (w == NULL || w->n == 0 || n == 0) return 0;
  if (grain == 0) grain = 1;
  fl_pool_pace *p = fl_pool_pace_of(&w->learned, (uintptr_t)fn);
  if (!fl_pool_known(&w->learned, p)) return 0;
  fl_pool_shape s = {.n = n, .grain = grain};
  uint32_t helpers = plan(w, p, &s);
  if (helpers == 0 || pthread_mutex_trylock(&w->busy) != 0) {
    atomic_store_explicit(&w->last_helpers, 0, memory_order_relaxed);
    return 0;
  }
  publish(w, fn, ctx, p, 0, n, grain, helpers);
  return 1;
}

int fl_workers_help(fl_workers *w) {
  if (FL_MUTANT_ON(25)) return 0;
  size_t b = atomic_fetch_add(&w->cursor, w->chunk);
  if (b >= w->n_items) return 0;
  size_t e = b + w->chunk < w->n_items ? b + w->chunk : w->n_items;
  uint64_t t0 = fl_now_ns();
  w->fn(w->ctx, b, e);
  fl_pool_learn_items(&w->learned, w->pace, e - b, fl_now_ns() - t0);
  return 1;
}

void fl_workers_wait(fl_workers *w) {
  run_own_chunks(w);
  finish(w);
}

static void calibration_body(void *ctx, size_t b, size_t e) {
  (void)ctx, (void)b, (void)e;
}

/* Waits (FL_CALIBRATION_WAIT_NS at most) for cond(w) to hold. */
static int await(fl_workers *w, int (*cond)(fl_workers *)) {
  uint64_t end = fl_now_ns() + FL_CALIBRATION_WAIT_NS;
  while (!cond(w)) {
    if (fl_now_ns() > end) return 0;
    sched_yield();
  }
  return 1;
}

static int all_asleep(fl_workers *w) { return atomic_load(&w->sleepers) == w->n; }
static int claimed_one(fl_workers *w) { return ticket_claimed(atomic_load(&w->ticket)) > 0; }

/* One job of one item for one helper; returns the helper's start (ns; 0:
 * none came in time). */
static uint64_t calibration_job(fl_workers *w) {
  pthread_mutex_lock(&w->busy);
  atomic_store_explicit(&w->last_start, 0, memory_order_relaxed);
  publish(w, calibration_body, NULL, NULL, 0, 1, 1, 1);
  int came = await(w, claimed_one);
  finish(w);
  return came ? atomic_load_explicit(&w->last_start, memory_order_relaxed) : 0;
}

/* The median of the n measured values of v (0 when none). */
static double median(uint64_t *v, int n) {
  for (int i = 1; i < n; i++)
    for (int j = i; j > 0 && v[j - 1] > v[j]; j--) {
      uint64_t t = v[j];
      v[j] = v[j - 1];
      v[j - 1] = t;
    }
  return n ? (double)v[n / 2] : 0;
}

/* Measures the hand-offs: a sleeping worker's start and the wake call, then
 * the same worker's start while it still spins. */
static void calibrate(fl_workers *w) {
  uint64_t spin[FL_CALIBRATIONS], sleep[FL_CALIBRATIONS], wake[FL_CALIBRATIONS];
  int n_spin = 0, n_sleep = 0, n_wake = 0;
  for (int r = 0; r < FL_CALIBRATIONS && await(w, all_asleep); r++) {
    uint64_t t = calibration_job(w);
    if (t) sleep[n_sleep++] = t;
    if (w->last_wake_call) wake[n_wake++] = w->last_wake_call;
    if ((t = calibration_job(w))) spin[n_spin++] = t;
  }
  fl_pool_calibrated(&w->learned, median(spin, n_spin), median(sleep, n_sleep),
                     median(wake, n_wake));
}

fl_workers *fl_workers_create(const char *name, uint32_t threads) {
  if (threads == 0) {
    long c = sysconf(_SC_NPROCESSORS_ONLN);
    threads = c > 0 ? (uint32_t)c : 1;
  }
  if (threads > FL_WORKERS_MAX) threads = FL_WORKERS_MAX;
  fl_workers *w = calloc(1, sizeof *w);
  if (!w) return NULL;
  w->n = threads - 1;
  w->threads = calloc(w->n ? w->n : 1, sizeof *w->threads);
  if (!w->threads) { free(w); return NULL; }
  pthread_mutex_init(&w->busy, NULL);
  for (uint32_t i = 0; i < w->n; i++) {
    if (pthread_create(&w->threads[i], NULL, worker_main, w) != 0) {
      w->n = i;
      fl_workers_destroy(w);
      return NULL;
    }
    char thread_name[16]; /* Linux's limit, with the NUL */
    snprintf(thread_name, sizeof thread_name, "%s-%u", name, i);
    pthread_setname_np(w->threads[i], thread_name); /* a name is a label: failing is harmless */
  }
  if (w->n) calibrate(w);
  return w;
}

void fl_workers_destroy(fl_workers *w) {
  if (!w) return;
  atomic_store(&w->stop, 1);
  atomic_fetch_add(&w->generation, 1);
  futex_wake(&w->generation, INT_MAX);
  for (uint32_t i = 0; i < w->n; i++) pthread_join(w->threads[i], NULL);
  pthread_mutex_destroy(&w->busy);
  free(w->threads);
  free(w);
}

uint32_t fl_workers_count(const fl_workers *w) { return w->n + 1; }

void fl_workers_fix_costs(fl_workers *w, const fl_pool_costs *c) { fl_pool_fix(&w->learned, c); }

void fl_workers_costs(const fl_workers *w, fl_range_fn fn, fl_pool_costs *out) {
  const fl_pool_pace *p = fn ? fl_pool_pace_find(&w->learned, (uintptr_t)fn) : NULL;
  fl_pool_costs_of(&w->learned, p, out);
}

void fl_workers_prewake(fl_workers *w, uint64_t until_ns) {
  uint64_t was = atomic_load(&w->spin_until);
  while (was < until_ns && !atomic_compare_exchange_weak(&w->spin_until, &was, until_ns)) {
  }
  /* After spin_until (both sequentially consistent): a worker that sees the
   * new generation sees the new deadline. */
  atomic_fetch_add(&w->generation, 1);
  if (atomic_load(&w->sleepers) > 0) futex_wake(&w->generation, INT_MAX);
}

uint32_t fl_workers_asleep(const fl_workers *w) {
  uint32_t asleep = atomic_load(&w->sleepers);
  return asleep < w->n ? asleep : w->n;
}

uint32_t fl_workers_last_helpers(const fl_workers *w) {
  return atomic_load_explicit(&w->last_helpers, memory_order_relaxed);
}
