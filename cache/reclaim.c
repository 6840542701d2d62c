/* reclaim.c: epochs, in-flight queries and the retired list (see reclaim.h). */
#include "cache/reclaim.h"

#include <stdlib.h>

#include "common/mutant.h"

void fl_reclaim_init(fl_reclaim *r) { pthread_mutex_init(&r->mu, NULL); }

void fl_reclaim_destroy(fl_reclaim *r) {
  pthread_mutex_destroy(&r->mu);
  free(r->inflight);
  free(r->retired);
  r->inflight = NULL;
  r->retired = NULL;
  r->n_inflight = r->cap_inflight = 0;
  r->n_retired = r->cap_retired = 0;
}

static uint32_t free_slot(const fl_reclaim *r) {
  uint32_t i = 0;
  while (i < r->n_inflight && r->inflight[i].active) i++;
  return i;
}

static uint64_t horizon_locked(fl_reclaim *r, const fl_reclaim_hooks *h);

/* A slot for a new query: a finished query's, or a new one. A query on a
 * stream keeps its slot until a horizon pass sees its event fired, and
 * only collect and horizon make that pass: a workload that never removes
 * or admits (every batch hits) would add a slot and an event with every
 * query, and every begin would scan them all (on the H100 an all-hit
 * fl_query went from 28 to 348 us in 315,000 calls). So when every slot
 * is taken, the pass runs here first (h NULL: the queries end without
 * events, and their slots free at fl_reclaim_end). */
static int64_t begin_locked(fl_reclaim *r, const fl_reclaim_hooks *h) {
  uint32_t i = free_slot(r);
  if (i == r->n_inflight && h && !FL_MUTANT_ON(17)) {
    (void)horizon_locked(r, h);
    i = free_slot(r);
  }
  if (i == r->n_inflight) {
    if (r->n_inflight == r->cap_inflight) {
      uint32_t cap = r->cap_inflight ? r->cap_inflight * 2 : 16;
      fl_inflight *f = realloc(r->inflight, cap * sizeof *f);
      if (!f) return -1;
      r->inflight = f;
      r->cap_inflight = cap;
    }
    r->n_inflight++;
  }
  r->inflight[i].start = r->epoch;
  r->inflight[i].event = NULL;
  r->inflight[i].active = 1;
  return i;
}

static void end_locked(fl_reclaim *r, int64_t ticket, void *event) {
  fl_inflight *f = &r->inflight[ticket];
  if (event)
    f->event = event;
  else
    f->active = 0;
}

static int retire_locked(fl_reclaim *r, const uint64_t *locs, uint64_t n, uint32_t part) {
  if (r->n_retired + n > r->cap_retired) {
    uint64_t cap = r->cap_retired ? r->cap_retired * 2 : 1024;
    while (cap < r->n_retired + n) cap *= 2;
    fl_retired *t = realloc(r->retired, cap * sizeof *t);
    if (!t) return -1;
    r->retired = t;
    r->cap_retired = cap;
  }
  for (uint64_t i = 0; i < n; i++) {
    r->retired[r->n_retired].loc = locs[i];
    r->retired[r->n_retired].epoch = r->epoch;
    r->retired[r->n_retired].part = part;
    r->n_retired++;
  }
  r->epoch++;
  return 0;
}

static uint64_t horizon_locked(fl_reclaim *r, const fl_reclaim_hooks *h) {
  uint64_t oldest = r->epoch;
  for (uint32_t i = 0; i < r->n_inflight; i++) {
    fl_inflight *f = &r->inflight[i];
    if (!f->active) continue;
    if (f->event && h->event_done(h->ctx, f->event)) {
      h->release_event(h->ctx, f->event);
      f->event = NULL;
      f->active = 0;
      continue;
    }
    if (f->start < oldest) oldest = f->start;
  }
  return FL_MUTANT_ON(4) ? r->epoch : oldest;
}

static uint64_t collect_locked(fl_reclaim *r, const fl_reclaim_hooks *h) {
  uint64_t oldest = horizon_locked(r, h);
  /* Retired entries are in epoch order: free the prefix older than every
   * running query, keep the rest. */
  uint64_t k = 0;
  while (k < r->n_retired && r->retired[k].epoch < oldest) {
    h->free_slab(h->ctx, r->retired[k].part, r->retired[k].loc);
    k++;
  }
  if (k) {
    for (uint64_t i = k; i < r->n_retired; i++) r->retired[i - k] = r->retired[i];
    r->n_retired -= k;
  }
  return k;
}

int64_t fl_reclaim_begin(fl_reclaim *r, const fl_reclaim_hooks *h) {
  pthread_mutex_lock(&r->mu);
  int64_t t = begin_locked(r, h);
  pthread_mutex_unlock(&r->mu);
  return t;
}

void fl_reclaim_end(fl_reclaim *r, int64_t ticket, void *event) {
  pthread_mutex_lock(&r->mu);
  end_locked(r, ticket, event);
  pthread_mutex_unlock(&r->mu);
}

int fl_reclaim_retire(fl_reclaim *r, const uint64_t *locs, uint64_t n, uint32_t part) {
  pthread_mutex_lock(&r->mu);
  int rc = retire_locked(r, locs, n, part);
  pthread_mutex_unlock(&r->mu);
  return rc;
}

uint64_t fl_reclaim_mark(fl_reclaim *r) {
  pthread_mutex_lock(&r->mu);
  uint64_t e = r->epoch++;
  pthread_mutex_unlock(&r->mu);
  return e;
}

uint64_t fl_reclaim_horizon(fl_reclaim *r, const fl_reclaim_hooks *h) {
  pthread_mutex_lock(&r->mu);
  uint64_t e = horizon_locked(r, h);
  pthread_mutex_unlock(&r->mu);
  return e;
}

uint64_t fl_reclaim_collect(fl_reclaim *r, const fl_reclaim_hooks *h) {
  pthread_mutex_lock(&r->mu);
  uint64_t k = collect_locked(r, h);
  pthread_mutex_unlock(&r->mu);
  return k;
}
