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

static uint32_t free_slots(const fl_reclaim *r) {
  uint32_t n = 0;
  for (uint32_t i = 0; i < r->n_inflight; i++) n += !r->inflight[i].active;
  return n;
}

/* The events of a horizon pass, asked outside the mutex: at most
 * FL_PROBE_EVENTS a pass (queries beyond them count as running: a later
 * pass frees them). */
#define FL_PROBE_EVENTS 64
typedef struct probe {
  uint32_t n;
  struct {
    uint32_t slot;
    uint64_t gen;
    void *event;
    int done;
  } e[FL_PROBE_EVENTS];
} probe;

/* Under the mutex: the running queries' events to ask about. */
static void probe_take(const fl_reclaim *r, probe *p) {
  p->n = 0;
  for (uint32_t i = 0; i < r->n_inflight && p->n < FL_PROBE_EVENTS; i++)
    if (r->inflight[i].active && r->inflight[i].event)
      p->e[p->n].slot = i, p->e[p->n].gen = r->inflight[i].gen,
      p->e[p->n++].event = r->inflight[i].event;
}

/* Without the mutex: asks each event whether it fired. */
static void probe_ask(probe *p, const fl_reclaim_hooks *h) {
  for (uint32_t k = 0; k < p->n; k++) p->e[k].done = h->event_done(h->ctx, p->e[k].event);
}

/* Under the mutex again: ends the queries whose events fired, unless their
 * slots were ended and taken again meanwhile (another gen), and returns
 * the horizon. */
static uint64_t probe_apply(fl_reclaim *r, const probe *p, const fl_reclaim_hooks *h) {
  for (uint32_t k = 0; k < p->n; k++) {
    fl_inflight *f = &r->inflight[p->e[k].slot];
    int reused = f->gen != p->e[k].gen && !FL_MUTANT_ON(26);
    if (!p->e[k].done || !f->active || reused || f->event != p->e[k].event) continue;
    h->release_event(h->ctx, f->event);
    f->event = NULL;
    f->active = 0;
  }
  uint64_t oldest = r->epoch;
  for (uint32_t i = 0; i < r->n_inflight; i++)
    if (r->inflight[i].active && r->inflight[i].start < oldest) oldest = r->inflight[i].start;
  return FL_MUTANT_ON(4) ? r->epoch : oldest;
}

/* Takes the mutex and returns with it held, the finished queries ended and
 * *horizon set. */
static void lock_past_finished(fl_reclaim *r, const fl_reclaim_hooks *h, uint64_t *horizon) {
  probe p;
  pthread_mutex_lock(&r->mu);
  probe_take(r, &p);
  if (p.n) {
    pthread_mutex_unlock(&r->mu);
    probe_ask(&p, h);
    pthread_mutex_lock(&r->mu);
  }
  *horizon = probe_apply(r, &p, h);
}

/* A slot for a new query: a finished query's, or a new one. A query on a
 * stream keeps its slot until a horizon pass sees its event fired, and
 * only collect and horizon make that pass: a workload that never removes
 * or admits (every batch hits) would add a slot and an event with every
 * query, and every begin would scan them all (on the H100 an all-hit
 * fl_query went from 28 to 348 us in 315,000 calls). So when every slot
 * is taken, the pass runs here first (h NULL: the queries end without
 * events, and their slots free at fl_reclaim_end). A pass asks every
 * running query's event, each a driver call: when it frees fewer than
 * half the slots, this query takes a new slot all the same, so that the
 * slots level at about twice the queries a pass finds running and each
 * event is asked about once or twice, not once for every query that
 * begins while it runs. Called with the mutex held; returns with it
 * held. */
static int64_t begin_locked(fl_reclaim *r, const fl_reclaim_hooks *h) {
  uint32_t i = free_slot(r);
  if (i == r->n_inflight && h && !FL_MUTANT_ON(17)) {
    uint64_t horizon;
    pthread_mutex_unlock(&r->mu);
    lock_past_finished(r, h, &horizon);
    i = free_slot(r);
    if (2 * free_slots(r) < r->n_inflight) i = r->n_inflight;
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
  r->inflight[i].gen = ++r->begins;
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

/* Frees the retired prefix older than every running query (entries are in
 * epoch order); the mutex is held. */
static uint64_t free_older(fl_reclaim *r, const fl_reclaim_hooks *h, uint64_t oldest) {
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
  uint64_t e;
  lock_past_finished(r, h, &e);
  pthread_mutex_unlock(&r->mu);
  return e;
}

uint64_t fl_reclaim_collect(fl_reclaim *r, const fl_reclaim_hooks *h) {
  uint64_t oldest;
  lock_past_finished(r, h, &oldest);
  uint64_t k = free_older(r, h, oldest);
  pthread_mutex_unlock(&r->mu);
  return k;
}
