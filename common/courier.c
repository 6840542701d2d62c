/* courier.c: the courier thread (see courier.h). A mutex and a condition
 * variable: a job is handed over about once per query batch with misses,
 * where a few microseconds of wake-up are off every caller's path. */
#include "common/courier.h"

#include <pthread.h>
#include <stdlib.h>

struct fl_courier {
  pthread_t thread;
  pthread_mutex_t mu;
  pthread_cond_t cv; /* a job came, a job ended, or stop */
  /* Invariant: fn is non-NULL from the post until the job has returned. */
  void (*fn)(void *);
  void *ctx;
  int stop;
};

static void *courier_main(void *arg) {
  fl_courier *k = arg;
  pthread_mutex_lock(&k->mu);
  for (;;) {
    while (!k->fn && !k->stop) pthread_cond_wait(&k->cv, &k->mu);
    if (!k->fn) break; /* stop, with nothing left */
    void (*fn)(void *) = k->fn;
    void *ctx = k->ctx;
    pthread_mutex_unlock(&k->mu);
    fn(ctx);
    pthread_mutex_lock(&k->mu);
    k->fn = NULL;
    pthread_cond_broadcast(&k->cv);
  }
  pthread_mutex_unlock(&k->mu);
  return NULL;
}

fl_courier *fl_courier_create(void) {
  fl_courier *k = calloc(1, sizeof *k);
  if (!k) return NULL;
  pthread_mutex_init(&k->mu, NULL);
  pthread_cond_init(&k->cv, NULL);
  if (pthread_create(&k->thread, NULL, courier_main, k) != 0) {
    pthread_mutex_destroy(&k->mu);
    pthread_cond_destroy(&k->cv);
    free(k);
    return NULL;
  }
  return k;
}

void fl_courier_destroy(fl_courier *k) {
  if (!k) return;
  pthread_mutex_lock(&k->mu);
  k->stop = 1;
  pthread_cond_broadcast(&k->cv);
  pthread_mutex_unlock(&k->mu);
  pthread_join(k->thread, NULL);
  pthread_mutex_destroy(&k->mu);
  pthread_cond_destroy(&k->cv);
  free(k);
}

void fl_courier_post(fl_courier *k, void (*fn)(void *ctx), void *ctx) {
  pthread_mutex_lock(&k->mu);
  while (k->fn) pthread_cond_wait(&k->cv, &k->mu);
  k->fn = fn;
  k->ctx = ctx;
  pthread_cond_broadcast(&k->cv);
  pthread_mutex_unlock(&k->mu);
}

void fl_courier_idle(fl_courier *k) {
  pthread_mutex_lock(&k->mu);
  while (k->fn) pthread_cond_wait(&k->cv, &k->mu);
  pthread_mutex_unlock(&k->mu);
}
