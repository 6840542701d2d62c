/* parallel.c: the worker pool behind fl_workers_for (see parallel.h). Work is
 * handed out in chunks through an atomic cursor, so uneven chunks balance. */
#include "common/parallel.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <unistd.h>

struct fl_workers {
  uint32_t n;                 /* worker threads (the caller is one more) */
  pthread_t *threads;
  pthread_mutex_t busy;       /* held by the caller that owns the current job */
  pthread_mutex_t lock;       /* guards the fields below */
  pthread_cond_t wake, done;
  uint64_t generation;        /* bumped per job; workers wait for a new one */
  uint32_t running;           /* workers still inside the current job */
  int stop;
  /* The current job. */
  fl_range_fn fn;
  void *ctx;
  size_t n_items, chunk;
  atomic_size_t cursor;
};

static void run_chunks(fl_workers *w) {
  for (;;) {
    size_t b = atomic_fetch_add(&w->cursor, w->chunk);
    if (b >= w->n_items) return;
    size_t e = b + w->chunk < w->n_items ? b + w->chunk : w->n_items;
    w->fn(w->ctx, b, e);
  }
}

static void *worker_main(void *arg) {
  fl_workers *w = arg;
  uint64_t seen = 0;
  pthread_mutex_lock(&w->lock);
  for (;;) {
    while (!w->stop && w->generation == seen) pthread_cond_wait(&w->wake, &w->lock);
    if (w->stop) break;
    seen = w->generation;
    pthread_mutex_unlock(&w->lock);
    run_chunks(w);
    pthread_mutex_lock(&w->lock);
    if (--w->running == 0) pthread_cond_signal(&w->done);
  }
  pthread_mutex_unlock(&w->lock);
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
  pthread_mutex_init(&w->lock, NULL);
  pthread_cond_init(&w->wake, NULL);
  pthread_cond_init(&w->done, NULL);
  for (uint32_t i = 0; i < w->n; i++) {
    if (pthread_create(&w->threads[i], NULL, worker_main, w) != 0) {
      w->n = i;
      fl_workers_destroy(w);
      return NULL;
    }
  }
  return w;
}

void fl_workers_destroy(fl_workers *w) {
  if (!w) return;
  pthread_mutex_lock(&w->lock);
  w->stop = 1;
  pthread_cond_broadcast(&w->wake);
  pthread_mutex_unlock(&w->lock);
  for (uint32_t i = 0; i < w->n; i++) pthread_join(w->threads[i], NULL);
  pthread_cond_destroy(&w->wake);
  pthread_cond_destroy(&w->done);
  pthread_mutex_destroy(&w->lock);
  pthread_mutex_destroy(&w->busy);
  free(w->threads);
  free(w);
}

uint32_t fl_workers_count(const fl_workers *w) { return w->n + 1; }

void fl_workers_for(fl_workers *w, size_t n, size_t grain, fl_range_fn fn, void *ctx) {
  if (n == 0) return;
  if (grain == 0) grain = 1;
  if (w == NULL || w->n == 0 || n <= grain || pthread_mutex_trylock(&w->busy) != 0) {
    fn(ctx, 0, n);
    return;
  }
  size_t parts = (size_t)(w->n + 1) * 4;
  size_t chunk = (n + parts - 1) / parts;
  if (chunk < grain) chunk = grain;
  pthread_mutex_lock(&w->lock);
  w->fn = fn;
  w->ctx = ctx;
  w->n_items = n;
  w->chunk = chunk;
  atomic_store(&w->cursor, 0);
  w->running = w->n;
  w->generation++;
  pthread_cond_broadcast(&w->wake);
  pthread_mutex_unlock(&w->lock);
  run_chunks(w);
  pthread_mutex_lock(&w->lock);
  while (w->running > 0) pthread_cond_wait(&w->done, &w->lock);
  pthread_mutex_unlock(&w->lock);
  pthread_mutex_unlock(&w->busy);
}
