/* serve_backlog.c: when and how a level's queue backed up, from its records:
 * the backlog's onset (the first arrival that queued too long) and the
 * longest stretch during which the workers were saturated.
 *
 * Saturated, at time t: every one of the K workers is busy and at least one
 * request is queued (arrived, not started: sched <= t < start). A worker is
 * busy over [start, end) of each request it serves, and also over the gap
 * from that end to its next start when its next request had arrived by that
 * end: the gap is the worker picking up queued work (its dispatch delay),
 * not idleness, and without it every pick-up would cut a backlog into
 * pieces. Times are the records' (ns from the level's t0), so the stretch
 * is approximate by the probes' cost around each request. The machine's
 * steal time, from the sampler's reads around the stretch and around the
 * level, says whether the hypervisor ran something else meanwhile. */
#include <stdlib.h>

#include "tools/serve.h"

/* A change of the queue's length and of the busy workers at time t. */
typedef struct event {
  int64_t t;
  int queued, busy; /* +1, -1 or 0 */
} event;

static int by_time(const void *a, const void *b) {
  int64_t x = ((const event *)a)->t, y = ((const event *)b)->t;
  return (x > y) - (x < y);
}

/* The first request by arrival whose queue time exceeds FL_SERVE_BACKLOG_US,
 * and the others in service at its arrival. */
static void onset_of(const fl_serve_level *l, fl_serve_backlog *out) {
  for (uint64_t i = 0; i < l->n; i++) {
    if (l->queue_us[i] <= FL_SERVE_BACKLOG_US) continue;
    if (out->onset && out->onset->sched_ns <= l->rec[i].sched_ns) continue;
    out->onset = &l->rec[i];
    out->onset_queue_us = l->queue_us[i];
  }
  if (!out->onset) return;
  int64_t at = out->onset->sched_ns;
  for (uint64_t j = 0; j < l->n; j++)
    out->onset_in_service += l->rec[j].start_ns <= at && at < l->rec[j].end_ns;
}

/* The longest saturated stretch (the file's comment): a sweep over the
 * queue's and the workers' changes in time order. */
static fl_status saturated_of(const fl_serve_level *l, uint32_t workers, fl_serve_backlog *out) {
  event *ev = malloc((5 * l->n + 1) * sizeof *ev); /* 3 a record, 2 more a pick-up */
  /* Per worker, its last record so far + 1; 0: none yet. */
  uint64_t *last = malloc((workers ? workers : 1) * sizeof *last);
  if (!ev || !last) return free(ev), free(last), FL_ERR_OUT_OF_MEMORY;
  for (uint32_t w = 0; w < workers; w++) last[w] = 0;
  uint64_t m = 0;
  /* A worker takes its tickets in increasing order (serve_level.c), so its
   * previous record in ticket order is the one it served before. */
  for (uint64_t i = 0; i < l->n; i++) {
    const fl_serve_record *r = &l->rec[i];
    ev[m++] = (event){r->sched_ns, +1, 0};
    ev[m++] = (event){r->start_ns, -1, +1};
    ev[m++] = (event){r->end_ns, 0, -1};
    if (r->worker >= workers) continue;
    uint64_t prev = last[r->worker];
    last[r->worker] = i + 1;
    if (!prev || r->sched_ns > l->rec[prev - 1].end_ns) continue;
    /* Busy through the pick-up: move the previous end to this start. */
    ev[m++] = (event){l->rec[prev - 1].end_ns, 0, +1};
    ev[m++] = (event){r->start_ns, 0, -1};
  }
  qsort(ev, m, sizeof *ev, by_time);
  int64_t queued = 0, busy = 0, from = 0;
  int in_stretch = 0;
  for (uint64_t e = 0; e < m;) {
    int64_t t = ev[e].t;
    for (; e < m && ev[e].t == t; e++) queued += ev[e].queued, busy += ev[e].busy;
    int saturated = busy >= (int64_t)workers && queued > 0;
    if (saturated && !in_stretch) from = t, in_stretch = 1;
    if (!saturated && in_stretch) {
      in_stretch = 0;
      if (t - from > out->saturated_to_ns - out->saturated_from_ns)
        out->saturated_from_ns = from, out->saturated_to_ns = t;
    }
  }
  free(ev);
  free(last);
  return FL_OK;
}

/* The machine's steal time around the stretch and over the level: whether
 * the hypervisor took the CPUs while the queue grew. */
static void steal_of(const fl_serve_level *l, fl_serve_backlog *out) {
  fl_serve_attrib d;
  double ms;
  fl_serve_attrib_between(l, l->t0_ns, l->t0_ns + (uint64_t)(l->wall_s * 1e9), &d, &ms);
  out->steal_ms = d.v[FL_ATTR_STEAL];
  if (out->saturated_to_ns == out->saturated_from_ns) return;
  fl_serve_attrib_between(l, l->t0_ns + (uint64_t)out->saturated_from_ns,
                          l->t0_ns + (uint64_t)out->saturated_to_ns, &d, &ms);
  out->saturated_steal_ms = d.v[FL_ATTR_STEAL];
}

fl_status fl_serve_backlog_of(const fl_serve_level *l, uint32_t workers, fl_serve_backlog *out) {
  *out = (fl_serve_backlog){0};
  onset_of(l, out);
  fl_status s = saturated_of(l, workers, out);
  if (s == FL_OK) steal_of(l, out);
  return s;
}
