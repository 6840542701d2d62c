/* serve_frozen.c: the stretches in which a level's whole process seemed to
 * stand still: every worker in the middle of a request, and none starting
 * or ending one, for longer than the threshold: FL_SERVE_FROZEN_US, or
 * twice the level's median service where that is longer (the host
 * backend's requests take milliseconds). At 30,000 requests a second over
 * 4 workers a request ends every 33 us on average, so such a stretch is a
 * stall the workers share (a lock every call takes: the CUDA driver's, the
 * kernel's; a device every stream waits for), not one call's; the phases
 * the workers were in at the longest one's middle say where each stood.
 * Times are the records' (ns from the level's t0). */
#include <stdlib.h>

#include "tools/serve.h"

typedef struct edge {
  int64_t t;
  int busy; /* +1 a start, -1 an end */
} edge;

static int by_time(const void *a, const void *b) {
  const edge *x = a, *y = b;
  if (x->t != y->t) return (x->t > y->t) - (x->t < y->t);
  return x->busy - y->busy; /* an end before a start at the same time */
}

/* The phase of worker w at time t: the innermost phase of its request
 * in service at t ("call": inside the call, in no phase the library
 * accounts), or "-": none in service. */
static const char *phase_at(const fl_serve_level *l, uint32_t w, int64_t t) {
  for (uint64_t i = 0; i < l->n; i++) {
    const fl_serve_record *r = &l->rec[i];
    if (r->worker != w || t < r->start_ns || t >= r->end_ns) continue;
    fl_serve_phase ph[FL_SERVE_PHASES];
    uint32_t n = fl_serve_phases_of(r, ph);
    const char *name = "call";
    for (uint32_t k = 0; k < n; k++)
      if (ph[k].from_ns <= t && t < ph[k].to_ns) name = ph[k].name; /* nested ones come later */
    return name;
  }
  return "-";
}

fl_status fl_serve_frozen_of(const fl_serve_level *l, uint32_t workers, fl_serve_frozen *out,
                             const char **phase) {
  *out = (fl_serve_frozen){0};
  double p50 = l->n ? fl_percentile(l->service_us, l->n, 0.5) : 0;
  out->threshold_us = 2 * p50 > FL_SERVE_FROZEN_US ? 2 * p50 : FL_SERVE_FROZEN_US;
  edge *e = malloc((2 * l->n + 1) * sizeof *e);
  if (!e) return FL_ERR_OUT_OF_MEMORY;
  for (uint64_t i = 0; i < l->n; i++) {
    e[2 * i] = (edge){l->rec[i].start_ns, +1};
    e[2 * i + 1] = (edge){l->rec[i].end_ns, -1};
  }
  qsort(e, 2 * l->n, sizeof *e, by_time);
  int64_t busy = 0;
  for (uint64_t i = 0; i + 1 < 2 * l->n; i++) {
    busy += e[i].busy;
    int64_t len = e[i + 1].t - e[i].t;
    if (busy < (int64_t)workers || len <= (int64_t)(out->threshold_us * 1e3)) continue;
    out->count++;
    for (int k = 0; k < 2; k++) out->gapped[k] += fl_serve_gapped(l, e[i].t, e[i + 1].t, k);
    out->total_ms += len / 1e6;
    if (len > out->to_ns - out->from_ns) out->from_ns = e[i].t, out->to_ns = e[i + 1].t;
  }
  free(e);
  int64_t mid = out->from_ns + (out->to_ns - out->from_ns) / 2;
  for (uint32_t w = 0; phase && w < workers; w++)
    phase[w] = out->count ? phase_at(l, w, mid) : "-";
  return FL_OK;
}
