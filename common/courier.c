/* courier.c: the courier thread (see courier.h). A mutex, a condition
 * variable and a queue of waiting jobs (at most one per key, so it stays as
 * short as the number of keys): a job is handed over about once per query
 * batch with misses, where a few microseconds of wake-up are off every
 * caller's path; a courier whose jobs are on the path (spin_ns) watches a
 * count of posts for a while before it sleeps. Drops run under the mutex, so that a job is held (waited
 * for by fl_courier_wait) until its drop has returned too. */
#include "common/courier.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "common/clock.h"

typedef struct waiting {
  fl_courier_job job;
  uint64_t ticket;
} waiting;

struct fl_courier {
  pthread_t thread;
  pthread_mutex_t mu;
  pthread_cond_t cv; /* a job came, a job ended, or stop */
  waiting *queue;    /* oldest first */
  size_t n, cap;
  uint64_t running;  /* the ticket of the job running, 0 when none */
  uint64_t next_ticket;
  uint64_t spin_ns;
  _Atomic uint64_t posted; /* jobs handed over: what the spinning thread watches */
  int stop;
};

/* Spins (without the lock) until a job is handed over or spin_ns pass. */
static void spin_for_job(fl_courier *k) {
  uint64_t seen = atomic_load(&k->posted), end = fl_now_ns() + k->spin_ns;
  pthread_mutex_unlock(&k->mu);
  for (uint32_t i = 1; atomic_load(&k->posted) == seen; i++) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
    if (i % 64 == 0 && fl_now_ns() > end) break;
  }
  pthread_mutex_lock(&k->mu);
}

static void *courier_main(void *arg) {
  fl_courier *k = arg;
  pthread_mutex_lock(&k->mu);
  for (;;) {
    if (!k->n && !k->stop && k->spin_ns) spin_for_job(k);
    while (!k->n && !k->stop) pthread_cond_wait(&k->cv, &k->mu);
    if (!k->n) break; /* stop, with nothing left */
    waiting w = k->queue[0];
    memmove(k->queue, k->queue + 1, --k->n * sizeof *k->queue);
    k->running = w.ticket;
    pthread_mutex_unlock(&k->mu);
    w.job.run(w.job.ctx);
    pthread_mutex_lock(&k->mu);
    k->running = 0;
    pthread_cond_broadcast(&k->cv);
  }
  pthread_mutex_unlock(&k->mu);
  return NULL;
}

fl_courier *fl_courier_create(const char *name, uint64_t spin_ns) {
  fl_courier *k = calloc(1, sizeof *k);
  if (!k) return NULL;
  k->next_ticket = 1;
  k->spin_ns = spin_ns;
  pthread_mutex_init(&k->mu, NULL);
  pthread_cond_init(&k->cv, NULL);
  if (pthread_create(&k->thread, NULL, courier_main, k) != 0) {
    pthread_mutex_destroy(&k->mu);
    pthread_cond_destroy(&k->cv);
    free(k);
    return NULL;
  }
  pthread_setname_np(k->thread, name); /* a name is a label: failing is harmless */
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
  free(k->queue);
  free(k);
}

void fl_courier_post(fl_courier *k, fl_courier_job job) {
  pthread_mutex_lock(&k->mu);
  size_t i = 0;
  while (i < k->n && k->queue[i].job.key != job.key) i++;
  if (i == k->n && k->n == k->cap) {
    size_t cap = k->cap ? 2 * k->cap : 16;
    waiting *q = realloc(k->queue, cap * sizeof *q);
    if (!q) {
      job.drop(job.ctx);
      pthread_mutex_unlock(&k->mu);
      return;
    }
    k->queue = q, k->cap = cap;
  }
  /* The newer job takes a waiting one's place: rounds of every key keep
   * their turn. */
  if (i < k->n) k->queue[i].job.drop(k->queue[i].job.ctx);
  else k->n++;
  k->queue[i] = (waiting){job, k->next_ticket++};
  atomic_fetch_add(&k->posted, 1);
  if (job.ticket) __atomic_store_n(job.ticket, k->queue[i].ticket, __ATOMIC_RELEASE);
  pthread_cond_broadcast(&k->cv);
  pthread_mutex_unlock(&k->mu);
}

int fl_courier_shed(fl_courier *k, uint64_t ticket) {
  pthread_mutex_lock(&k->mu);
  size_t i = 0;
  while (i < k->n && k->queue[i].ticket != ticket) i++;
  if (i == k->n) {
    pthread_mutex_unlock(&k->mu);
    return 0;
  }
  k->queue[i].job.drop(k->queue[i].job.ctx);
  memmove(k->queue + i, k->queue + i + 1, (--k->n - i) * sizeof *k->queue);
  pthread_cond_broadcast(&k->cv);
  pthread_mutex_unlock(&k->mu);
  return 1;
}

static int holds(const fl_courier *k, uint64_t ticket) {
  if (k->running == ticket) return 1;
  for (size_t i = 0; i < k->n; i++)
    if (k->queue[i].ticket == ticket) return 1;
  return 0;
}

void fl_courier_wait(fl_courier *k, uint64_t ticket) {
  pthread_mutex_lock(&k->mu);
  while (ticket && holds(k, ticket)) pthread_cond_wait(&k->cv, &k->mu);
  pthread_mutex_unlock(&k->mu);
}

void fl_courier_idle(fl_courier *k) {
  pthread_mutex_lock(&k->mu);
  while (k->n || k->running) pthread_cond_wait(&k->cv, &k->mu);
  pthread_mutex_unlock(&k->mu);
}
