/* parallel.c: the worker pool behind fl_workers_for (see parallel.h). Work is
 * handed out in chunks through an atomic cursor, so uneven chunks balance.
 *
 * Waking: a job is published by bumping `generation`. A worker that finished
 * a job spins on it for FL_WORKER_SPIN_NS, so back-to-back jobs start
 * without a system call; then it sleeps on a futex of `generation`, and the
 * caller wakes sleepers with one futex wake. No mutex is taken on either
 * side: with a condition variable, every woken worker would take the pool's
 * mutex in turn, which costs more than a small gather itself. */
#include "common/parallel.h"

#include "common/clock.h"
#include "common/mutant.h"

#include <limits.h>
#include <linux/futex.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <unistd.h>

/* How long an idle worker spins before it sleeps: long enough for the next
 * job of the same call (a query's probe, copy and scatter), short enough not
 * to take cores from other pools of the process (at 200 us the replay's
 * gathers slow down: its trace generator's pool spins into them). */
#define FL_WORKER_SPIN_NS 20000ull

struct fl_workers {
  uint32_t n;                 /* worker threads (the caller is one more) */
  pthread_t *threads;
  pthread_mutex_t busy;       /* held by the caller that owns the current job */
  /* Invariant: a job's fields are written before `generation` is bumped
   * (release) and read after it is seen (acquire); the caller writes the
   * next job only once `running` is 0. */
  _Atomic uint32_t generation; /* bumped per job (and at stop); the futex word */
  _Atomic uint32_t sleepers;   /* workers in or entering a futex wait */
  _Atomic uint32_t running;    /* workers still inside the current job */
  _Atomic int stop;
  _Atomic uint64_t spin_until; /* fl_workers_wake: spin at least until then (ns) */
  /* The current job. */
  fl_range_fn fn;
  void *ctx;
  size_t n_items, chunk;
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

static void futex_wake_all(_Atomic uint32_t *word) {
  syscall(SYS_futex, (uint32_t *)word, FUTEX_WAKE_PRIVATE, INT_MAX, NULL, NULL, 0);
}

static void run_chunks(fl_workers *w) {
  for (;;) {
    size_t b = atomic_fetch_add(&w->cursor, w->chunk);
    if (b >= w->n_items) return;
    if (FL_MUTANT_ON(8) && b + w->chunk > w->n_items) return;
    size_t e = b + w->chunk < w->n_items ? b + w->chunk : w->n_items;
    w->fn(w->ctx, b, e);
  }
}

/* Waits for a generation other than `seen` and returns it: spins until
 * FL_WORKER_SPIN_NS from now or the pool's spin_until, whichever is later,
 * then sleeps; a wake (a job, or fl_workers_wake) starts a new spin. */
static uint32_t next_job(fl_workers *w, uint32_t seen) {
  for (;;) {
    uint64_t until = fl_now_ns() + FL_WORKER_SPIN_NS;
    uint64_t asked = atomic_load_explicit(&w->spin_until, memory_order_relaxed);
    if (asked > until) until = asked;
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
     * sequentially consistent), so a caller that bumps generation either is
     * seen here or sees a sleeper and wakes it; futex_wait itself returns at
     * once if the word moved on. */
    atomic_fetch_add(&w->sleepers, 1);
    if (atomic_load(&w->generation) == seen) futex_wait(&w->generation, seen);
    atomic_fetch_sub(&w->sleepers, 1);
  }
}

static void *worker_main(void *arg) {
  fl_workers *w = arg;
  uint32_t seen = 0;
  for (;;) {
    seen = next_job(w, seen);
    if (atomic_load(&w->stop)) break;
    run_chunks(w);
    atomic_fetch_sub_explicit(&w->running, 1, memory_order_release);
  }
  return NULL;
}

fl_workers *fl_workers_create(uint32_t threads) {
  if (threads == 0) {
    long c = sysconf(_SC_NPROCESSORS_ONLN);
    threads = c > 0 ? (uint32_t)c : 1;
  }
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
  }
  return w;
}

/* Publishes the job already written (or stop) to the workers. */
static void publish(fl_workers *w) {
  atomic_fetch_add(&w->generation, 1);
  if (atomic_load(&w->sleepers) > 0) futex_wake_all(&w->generation);
}

void fl_workers_destroy(fl_workers *w) {
  if (!w) return;
  atomic_store(&w->stop, 1);
  publish(w);
  for (uint32_t i = 0; i < w->n; i++) pthread_join(w->threads[i], NULL);
  pthread_mutex_destroy(&w->busy);
  free(w->threads);
  free(w);
}

uint32_t fl_workers_count(const fl_workers *w) { return w->n + 1; }

void fl_workers_wake(fl_workers *w, uint64_t spin_ns) {
  if (!w || w->n == 0) return;
  atomic_store_explicit(&w->spin_until, fl_now_ns() + spin_ns, memory_order_relaxed);
  if (atomic_load(&w->sleepers) > 0) futex_wake_all(&w->generation);
}

int fl_workers_start(fl_workers *w, size_t n, size_t grain, fl_range_fn fn, void *ctx) {
  if (w == NULL || w->n == 0 || pthread_mutex_trylock(&w->busy) != 0) return 0;
  if (grain == 0) grain = 1;
  size_t parts = (size_t)(w->n + 1) * 4;
  size_t chunk = (n + parts - 1) / parts;
  if (chunk < grain) chunk = grain;
  w->fn = fn;
  w->ctx = ctx;
  w->n_items = n;
  w->chunk = chunk;
  atomic_store_explicit(&w->cursor, 0, memory_order_relaxed);
  atomic_store_explicit(&w->running, w->n, memory_order_relaxed);
  publish(w);
  return 1;
}

void fl_workers_wait(fl_workers *w) {
  run_chunks(w);
  /* Every worker passes through the job (it reads its fields), so the next
   * job waits for all of them; a sleeping one was woken by publish. */
  for (unsigned i = 0; atomic_load_explicit(&w->running, memory_order_acquire) > 0; i++)
    if ((i & 1023u) == 1023u) sched_yield(); else cpu_relax();
  pthread_mutex_unlock(&w->busy);
}

void fl_workers_for(fl_workers *w, size_t n, size_t grain, fl_range_fn fn, void *ctx) {
  if (n == 0) return;
  if (n <= grain || !fl_workers_start(w, n, grain, fn, ctx)) {
    fn(ctx, 0, n);
    return;
  }
  fl_workers_wait(w);
}
