/* grace.c: read-side sections and grace periods (see grace.h). */
#include "dram_store/grace.h"

#include <sched.h>

#include "common/hash.h"

void fl_grace_init(fl_grace *g) {
  atomic_init(&g->epoch, 0);
  for (int p = 0; p < 2; p++)
    for (uint32_t i = 0; i < FL_GRACE_STRIPES; i++) atomic_init(&g->count[p][i].readers, 0);
  pthread_mutex_init(&g->wait_lock, NULL);
}

void fl_grace_fini(fl_grace *g) { pthread_mutex_destroy(&g->wait_lock); }

/* The calling thread's stripe: a hash of a thread-local's address. */
static uint32_t fl_grace_stripe(void) {
  static _Thread_local char anchor;
  return (uint32_t)(fl_mix64((uint64_t)(uintptr_t)&anchor) % FL_GRACE_STRIPES);
}

uint32_t fl_grace_enter(fl_grace *g) {
  uint32_t parity = (uint32_t)(atomic_load(&g->epoch) & 1u);
  uint32_t stripe = fl_grace_stripe();
  atomic_fetch_add(&g->count[parity][stripe].readers, 1);
  return parity * FL_GRACE_STRIPES + stripe;
}

void fl_grace_exit(fl_grace *g, uint32_t token) {
  atomic_fetch_sub(&g->count[token / FL_GRACE_STRIPES][token % FL_GRACE_STRIPES].readers, 1);
}

void fl_grace_wait(fl_grace *g) {
  pthread_mutex_lock(&g->wait_lock);
  for (int flip = 0; flip < 2; flip++) {
    uint32_t old = (uint32_t)(atomic_fetch_add(&g->epoch, 1) & 1u);
    for (uint32_t i = 0; i < FL_GRACE_STRIPES; i++)
      while (atomic_load(&g->count[old][i].readers) != 0) sched_yield();
  }
  pthread_mutex_unlock(&g->wait_lock);
}
