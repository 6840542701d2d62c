/* serve_results.c: what a level's records and counter samples say: rates,
 * hit rate, latency percentiles, how often the scheduler took a worker's CPU
 * mid-request, the slowest requests (by total or by service) and, for one
 * request, what else was going on (other requests, the cache's counters,
 * the canary's gaps); the latency the ideal queue gives the level's
 * requests. */
#include <stdlib.h>

#include "common/error.h"
#include "tools/fifo_queue.h"
#include "tools/serve.h"

const fl_serve_attr_col fl_attr_cols[FL_ATTR_COUNT] = {
    {"queries", 0},     {"store_rows", 0},    {"evictions", 0}, {"rounds_starved", 0},
    {"rounds_shed", 0}, {"admit_wait_ms", 2}, {"gather_ms", 2},   {"steal_ms", 1},
    {"allocs", 0}};

void fl_serve_attrib_of(const fl_cache_stats *s, fl_serve_attrib *a) {
  a->v[FL_ATTR_QUERIES] = (double)s->queries;
  a->v[FL_ATTR_MISSES] = (double)s->unique_misses;
  a->v[FL_ATTR_EVICTIONS] = (double)s->evictions;
  a->v[FL_ATTR_STARVED] = (double)s->rounds_starved;
  a->v[FL_ATTR_SHED] = (double)s->rounds_shed;
  a->v[FL_ATTR_ADMIT_WAIT] = s->ns_admission_wait / 1e6;
  a->v[FL_ATTR_GATHER] = s->ns_store_gather / 1e6;
  a->v[FL_ATTR_STEAL] = 0; /* the sampler reads it beside the counters */
  a->v[FL_ATTR_ALLOCS] = (double)s->allocations;
}

uint32_t fl_serve_phases_of(const fl_serve_record *r, fl_serve_phase *out) {
  const fl_query_timing *c = &r->call;
  const char *names[] = {"setup", "index", "fetch", "admission"};
  uint64_t ns[] = {c->setup_ns, c->index_ns, c->fetch_ns, c->admission_ns};
  uint32_t n = 0;
  int64_t at = r->start_ns;
  for (int k = 0; k < 4; k++) {
    if (ns[k] == 0) continue;
    out[n++] = (fl_serve_phase){names[k], at, at + (int64_t)ns[k]};
    at += (int64_t)ns[k];
    /* The setup's start finds the caller's buffers, nested in it. */
    if (k == 0 && c->setup_find_ns)
      out[n++] = (fl_serve_phase){"find buffers", r->start_ns, r->start_ns + (int64_t)c->setup_find_ns};
    /* The index's end is the wait for its counters, nested in it. */
    if (k == 1 && c->index_wait_ns)
      out[n++] = (fl_serve_phase){"counters wait", at - (int64_t)c->index_wait_ns, at};
  }
  if (r->start_ns + (int64_t)c->total_ns < r->end_ns)
    out[n++] = (fl_serve_phase){"gpu + sync", r->start_ns + (int64_t)c->total_ns, r->end_ns};
  return n;
}

int fl_serve_gapped(const fl_serve_level *l, int64_t from_ns, int64_t to_ns, int syscall) {
  for (uint64_t i = 0; i < l->n_gaps; i++) {
    const fl_serve_gap *g = &l->gaps[i];
    if (g->syscall == syscall && g->from_ns < to_ns && from_ns < g->from_ns + g->len_ns) return 1;
  }
  return 0;
}

double fl_serve_achieved_rps(const fl_serve_level *l) {
  return l->wall_s > 0 ? (double)l->n / l->wall_s : 0;
}

double fl_serve_hit_rate(const fl_serve_level *l) {
  const fl_cache_stats *a = &l->before, *b = &l->after;
  uint64_t n = b->lookups - a->lookups;
  return n ? (double)(b->hits + b->dram_hits - a->hits - a->dram_hits) / (double)n : 0;
}

double fl_serve_latency_us(const fl_serve_level *l, double q) {
  return fl_percentile(l->lat_us, l->n, q);
}

int64_t fl_serve_unseen_ns(const fl_serve_record *r) {
  const fl_serve_sched *s = &r->sched;
  if (s->run_delay_ns < 0) return -1;
  int64_t left = r->end_ns - r->start_ns - s->run_ns - s->run_delay_ns;
  return left > 0 ? left : 0;
}

void fl_serve_preempt_of(const fl_serve_level *l, fl_serve_preempt *out) {
  *out = (fl_serve_preempt){0};
  for (uint64_t i = 0; i < l->n; i++) {
    const fl_serve_sched *s = &l->rec[i].sched;
    int slow = l->service_us[i] > FL_SERVE_SLOW_US, preempted = s->nivcsw > 0;
    out->preempted += preempted;
    out->slow += slow;
    out->slow_preempted += slow && preempted;
    int64_t unseen = fl_serve_unseen_ns(&l->rec[i]);
    out->slow_unseen += slow && !s->nivcsw && !s->nvcsw && unseen > 0 &&
                        2 * unseen > l->rec[i].end_ns - l->rec[i].start_ns;
    if (s->run_delay_ns < 0) out->run_delay_ns = out->slow_run_delay_ns = -1;
    if (out->run_delay_ns < 0) continue; /* unknown stays unknown */
    out->run_delay_ns += s->run_delay_ns;
    out->slow_run_delay_ns += slow ? s->run_delay_ns : 0;
  }
}

/* The indices of the k records with the largest key, largest first;
 * returns min(k, n). */
static uint32_t slowest(const fl_serve_level *l, const double *key, uint32_t k, uint64_t *out) {
  uint32_t m = 0;
  for (uint64_t i = 0; i < l->n; i++) {
    /* out[0 .. m) stays sorted, slowest first: insert i where it belongs. */
    uint32_t at = m < k ? m++ : k;
    while (at > 0 && key[out[at - 1]] < key[i]) {
      if (at < k) out[at] = out[at - 1];
      at--;
    }
    if (at < k) out[at] = i;
  }
  return m;
}

static void context_of(const fl_serve_level *l, uint64_t i, uint64_t *busy, uint64_t *ahead) {
  const fl_serve_record *r = &l->rec[i];
  *busy = *ahead = 0;
  for (uint64_t j = 0; j < l->n; j++) {
    const fl_serve_record *o = &l->rec[j];
    if (j == i) continue;
    *busy += o->start_ns <= r->start_ns && r->start_ns < o->end_ns;
    *ahead += o->sched_ns <= r->sched_ns && o->start_ns > r->sched_ns;
  }
}

void fl_serve_attrib_between(const fl_serve_level *l, uint64_t start_ns, uint64_t end_ns,
                             fl_serve_attrib *d, double *window_ms) {
  *d = (fl_serve_attrib){{0}};
  *window_ms = 0;
  if (!l->n_samples) return;
  uint64_t a = 0, b = l->n_samples - 1;
  /* The last read at or before the start, the first at or after the end
   * (reads are in time order; the first precedes t0, the last every end). */
  for (uint64_t s = 0; s < l->n_samples && l->samples_at[s].t_ns <= start_ns; s++) a = s;
  for (uint64_t s = l->n_samples; s-- > a;)
    if (l->samples_at[s].t_ns >= end_ns) b = s;
  for (int k = 0; k < FL_ATTR_COUNT; k++)
    d->v[k] = l->samples_at[b].a.v[k] - l->samples_at[a].a.v[k];
  *window_ms = (double)(l->samples_at[b].t_ns - l->samples_at[a].t_ns) / 1e6;
}

uint32_t fl_serve_stalls(const fl_serve_level *l, const fl_serve_pool *p, fl_serve_rank rank,
                         uint32_t k, fl_serve_stall *out) {
  uint64_t *idx = malloc((k ? k : 1) * sizeof *idx);
  if (!idx) return 0;
  uint32_t m = slowest(l, rank == FL_SERVE_BY_SERVICE ? l->service_us : l->lat_us, k, idx);
  for (uint32_t j = 0; j < m; j++) {
    fl_serve_stall *st = &out[j];
    uint64_t i = idx[j];
    st->r = &l->rec[i];
    st->samples = p->req[st->r->req].samples;
    st->queue_us = l->queue_us[i], st->service_us = l->service_us[i], st->total_us = l->lat_us[i];
    st->dispatch_us = l->dispatch_us[i];
    context_of(l, i, &st->busy, &st->ahead);
    fl_serve_attrib_between(l, l->t0_ns + (uint64_t)st->r->start_ns,
                            l->t0_ns + (uint64_t)st->r->end_ns, &st->d, &st->window_ms);
  }
  free(idx);
  return m;
}

double *fl_serve_ideal_latency(const fl_serve_level *l, uint32_t workers) {
  double *lat = malloc((l->n ? l->n : 1) * sizeof *lat);
  int64_t *arrive = malloc((l->n ? l->n : 1) * sizeof *arrive);
  fl_status s = FL_ERR_OUT_OF_MEMORY;
  if (lat && arrive && !l->open) {
    /* A closed loop's request arrives as a worker takes it (and its starts
     * need not follow its tickets' order). */
    for (uint64_t i = 0; i < l->n; i++) lat[i] = l->service_us[i];
    s = FL_OK;
  } else if (lat && arrive) {
    for (uint64_t i = 0; i < l->n; i++) arrive[i] = l->rec[i].sched_ns;
    s = fl_fifo_latency(arrive, l->service_us, l->n, workers, lat);
  } else {
    fl_fail(NULL, s, "%s: ideal queue of %llu requests", l->label, (unsigned long long)l->n);
  }
  free(arrive);
  if (s == FL_OK) return lat;
  free(lat);
  return NULL;
}

const fl_serve_level *fl_serve_lightest(const fl_serve_result *res) {
  const fl_serve_level *best = NULL;
  for (uint32_t i = 0; i < res->n_levels; i++) {
    const fl_serve_level *l = &res->levels[i];
    if (l->open && (!best || l->load < best->load)) best = l;
  }
  return best;
}
