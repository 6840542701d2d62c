/* serve_trace.c: the serving benchmark's run as a trace (--trace), in the
 * Trace Event Format that Perfetto (ui.perfetto.dev) and chrome://tracing
 * open: every worker's requests on a timeline, where the stall report gives
 * only the slowest ones.
 *
 * Each level is a process (named by its label, in run order) with one track
 * per worker. A request is a slice from its start to its answer, its phases
 * nested in it as the library accounts them (fl_serve_phases_of: setup,
 * index, fetch, admission, laid back to back from the start of the call,
 * which begins as the request starts, after --device-ids' copy is
 * enqueued), then "gpu + sync", the part after the call returned. Its time queued is an
 * async slice on the level's "queue" track (queued requests overlap). The
 * cache's counters (the sampler's reads, --sample-ms) are counter tracks,
 * per millisecond over each sampling period. The slowest --stalls requests
 * carry instant marks: "slowest service #k" (the stalls of the library or
 * the machine), "slowest total #k" (arrival to answer: queueing too). With
 * --canary, its gaps are slices on the level's "canary" track.
 *
 * By default a level is traced only within --trace-window ms of those
 * requests (a full level at 30,000 requests a second is hundreds of MB);
 * --trace-window 0 traces whole levels. Times are microseconds from the
 * first level's start. */
#include <stdlib.h>

#include "tools/serve.h"

typedef struct span {
  int64_t from, to; /* ns, from the level's t0 */
} span;

static int by_from(const void *a, const void *b) {
  int64_t x = ((const span *)a)->from, y = ((const span *)b)->from;
  return (x > y) - (x < y);
}

/* The windows of a level to trace, merged and sorted: the whole level when
 * window_ms is 0, else window_ms around each of the m requests st, from
 * their arrival to their answer. *n: how many; NULL (and *n 0) without
 * memory. */
static span *windows(const fl_serve_stall *st, uint32_t m, double window_ms, uint32_t *n) {
  span *w = malloc((m ? m : 1) * sizeof *w);
  *n = 0;
  if (!w) return NULL;
  if (window_ms <= 0) {
    w[0] = (span){INT64_MIN, INT64_MAX};
    *n = 1;
    return w;
  }
  int64_t pad = (int64_t)(window_ms * 1e6);
  for (uint32_t j = 0; j < m; j++) w[j] = (span){st[j].r->sched_ns - pad, st[j].r->end_ns + pad};
  qsort(w, m, sizeof *w, by_from);
  for (uint32_t j = 0; j < m; j++) {
    if (*n && w[j].from <= w[*n - 1].to) {
      if (w[j].to > w[*n - 1].to) w[*n - 1].to = w[j].to;
    } else {
      w[(*n)++] = w[j];
    }
  }
  return w;
}

/* Whether [from, to] meets a window. */
static int traced(const span *w, uint32_t n, int64_t from, int64_t to) {
  for (uint32_t j = 0; j < n; j++)
    if (from <= w[j].to && to >= w[j].from) return 1;
  return 0;
}

/* One event: writes the separator before it. */
static void event(FILE *f, int *first) {
  fputs(*first ? "\n  " : ",\n  ", f);
  *first = 0;
}

/* A complete slice of `dur_ns` from `at_ns` (ns from the trace's zero). */
static void slice(FILE *f, int *first, int pid, uint32_t tid, const char *name, int64_t at_ns,
                  int64_t dur_ns) {
  event(f, first);
  fprintf(f, "{\"ph\": \"X\", \"pid\": %d, \"tid\": %u, \"name\": \"%s\", \"ts\": %.3f, "
          "\"dur\": %.3f}", pid, tid, name, at_ns / 1e3, (dur_ns > 0 ? dur_ns : 0) / 1e3);
}

static void metadata(FILE *f, int *first, int pid, int64_t tid, const char *what,
                     const char *name) {
  event(f, first);
  fprintf(f, "{\"ph\": \"M\", \"pid\": %d", pid);
  if (tid >= 0) fprintf(f, ", \"tid\": %lld", (long long)tid);
  fprintf(f, ", \"name\": \"%s\", \"args\": {\"name\": \"%s\"}}", what, name);
}

/* Request i of level l (process pid) on its worker's track, at `zero` ns
 * before its level's t0. */
static void request(FILE *f, int *first, int pid, const fl_serve_level *l, uint64_t i,
                    const fl_serve_pool *p, int64_t zero, uint32_t queue_tid) {
  const fl_serve_record *r = &l->rec[i];
  const fl_query_timing *c = &r->call;
  uint32_t tid = r->worker + 1;
  int64_t start = zero + r->start_ns, end = zero + r->end_ns;
  const int64_t unseen = fl_serve_unseen_ns(r);
  event(f, first);
  fprintf(f, "{\"ph\": \"X\", \"pid\": %d, \"tid\": %u, \"name\": \"%u samples\", \"ts\": %.3f, "
          "\"dur\": %.3f, \"args\": {\"ticket\": %llu, \"nth\": %u, \"queue_us\": %.2f, "
          "\"dispatch_us\": %.2f, \"missed\": %llu, \"fetched_rows\": %llu, "
          "\"setup_wait_us\": %.2f, \"setup_grow_us\": %.2f, \"nivcsw\": %llu, "
          "\"run_delay_us\": %.2f, \"on_cpu_us\": %.2f, \"unseen_us\": %.2f, "
          "\"wait_nivcsw\": %llu, \"wait_run_delay_us\": %.2f}}",
          pid, tid, p->req[r->req].samples, start / 1e3, (end - start) / 1e3,
          (unsigned long long)i, r->nth, l->queue_us[i], l->dispatch_us[i],
          (unsigned long long)c->missed, (unsigned long long)c->fetched_rows,
          c->setup_wait_ns / 1e3, c->setup_grow_ns / 1e3, (unsigned long long)r->sched.nivcsw,
          r->sched.run_delay_ns < 0 ? -1.0 : r->sched.run_delay_ns / 1e3,
          r->sched.run_delay_ns < 0 ? -1.0 : r->sched.run_ns / 1e3,
          unseen < 0 ? -1.0 : unseen / 1e3,
          (unsigned long long)r->wait.nivcsw,
          r->wait.run_delay_ns < 0 ? -1.0 : r->wait.run_delay_ns / 1e3);
  fl_serve_phase ph[FL_SERVE_PHASES];
  uint32_t n = fl_serve_phases_of(r, ph);
  for (uint32_t k = 0; k < n; k++)
    slice(f, first, pid, tid, ph[k].name, zero + ph[k].from_ns, ph[k].to_ns - ph[k].from_ns);
  if (r->start_ns > r->sched_ns) {
    event(f, first);
    fprintf(f, "{\"ph\": \"b\", \"cat\": \"queue\", \"id\": %llu, \"pid\": %d, \"tid\": %u, "
            "\"name\": \"queued\", \"ts\": %.3f}",
            (unsigned long long)i, pid, queue_tid, (zero + r->sched_ns) / 1e3);
    event(f, first);
    fprintf(f, "{\"ph\": \"e\", \"cat\": \"queue\", \"id\": %llu, \"pid\": %d, \"tid\": %u, "
            "\"name\": \"queued\", \"ts\": %.3f}",
            (unsigned long long)i, pid, queue_tid, start / 1e3);
  }
}

/* The sampler's reads inside the windows: each counter's change over the
 * period that starts at a read, per ms. */
static void counters(FILE *f, int *first, int pid, const fl_serve_level *l, const span *w,
                     uint32_t nw, int64_t zero) {
  for (uint64_t s = 0; s + 1 < l->n_samples; s++) {
    const fl_serve_sample *a = &l->samples_at[s], *b = &l->samples_at[s + 1];
    int64_t from = (int64_t)(a->t_ns - l->t0_ns), to = (int64_t)(b->t_ns - l->t0_ns);
    if (!traced(w, nw, from, to) || b->t_ns <= a->t_ns) continue;
    double ms = (double)(b->t_ns - a->t_ns) / 1e6;
    for (int k = 0; k < FL_ATTR_COUNT; k++) {
      event(f, first);
      fprintf(f, "{\"ph\": \"C\", \"pid\": %d, \"name\": \"%s per ms\", \"ts\": %.3f, "
              "\"args\": {\"value\": %.4f}}",
              pid, fl_attr_cols[k].name, (zero + from) / 1e3, (b->a.v[k] - a->a.v[k]) / ms);
    }
  }
}

/* The canary's gaps inside the windows, on track tid: "syscall gap" (in a
 * system call), "gap" (between clock reads), or "gap (machine)" when its
 * run-queue delay covers less than half of that. */
static void gaps(FILE *f, int *first, int pid, uint32_t tid, const fl_serve_level *l,
                 const span *w, uint32_t nw, int64_t zero) {
  for (uint64_t i = 0; i < l->n_gaps; i++) {
    const fl_serve_gap *g = &l->gaps[i];
    if (!traced(w, nw, g->from_ns, g->from_ns + g->len_ns)) continue;
    int machine = !g->syscall && g->run_delay_ns >= 0 && 2 * g->run_delay_ns < g->len_ns;
    event(f, first);
    fprintf(f, "{\"ph\": \"X\", \"pid\": %d, \"tid\": %u, \"name\": \"%s\", \"ts\": %.3f, "
            "\"dur\": %.3f, \"args\": {\"run_delay_us\": %.2f}}",
            pid, tid, g->syscall ? "syscall gap" : machine ? "gap (machine)" : "gap",
            (zero + g->from_ns) / 1e3,
            g->len_ns / 1e3, g->run_delay_ns / 1e3);
  }
}

/* Level l as process pid; zero: ns from the trace's zero to l's t0. */
static fl_status level(FILE *f, int *first, int pid, const fl_serve_opts *o,
                       const fl_serve_pool *p, const fl_serve_level *l, int64_t zero) {
  uint32_t k = o->stalls, nw = 0;
  fl_serve_stall *st = malloc((k ? 2 * k : 1) * sizeof *st);
  if (!st) return FL_ERR_OUT_OF_MEMORY;
  /* The slowest services, then the slowest totals after them. */
  uint32_t by_service = fl_serve_stalls(l, p, FL_SERVE_BY_SERVICE, k, st);
  uint32_t m = by_service + fl_serve_stalls(l, p, FL_SERVE_BY_TOTAL, k, st + by_service);
  span *w = windows(st, m, o->trace_window_ms, &nw);
  if (!w) {
    free(st);
    return FL_ERR_OUT_OF_MEMORY;
  }
  uint32_t queue_tid = o->threads + 1;
  metadata(f, first, pid, -1, "process_name", l->label);
  event(f, first);
  fprintf(f, "{\"ph\": \"M\", \"pid\": %d, \"name\": \"process_sort_index\", "
          "\"args\": {\"sort_index\": %d}}", pid, pid);
  char name[32];
  for (uint32_t t = 0; t < o->threads; t++) {
    snprintf(name, sizeof name, "worker %u", t);
    metadata(f, first, pid, t + 1, "thread_name", name);
  }
  metadata(f, first, pid, queue_tid, "thread_name", "queue");
  if (l->canary) metadata(f, first, pid, queue_tid + 1, "thread_name", "canary");
  for (uint64_t i = 0; i < l->n; i++) {
    const fl_serve_record *r = &l->rec[i];
    if (r->end_ns >= 0 && traced(w, nw, r->sched_ns, r->end_ns))
      request(f, first, pid, l, i, p, zero, queue_tid);
  }
  for (uint32_t j = 0; j < m; j++) {
    int service = j < by_service;
    event(f, first);
    fprintf(f, "{\"ph\": \"i\", \"s\": \"t\", \"pid\": %d, \"tid\": %u, "
            "\"name\": \"slowest %s #%u\", \"ts\": %.3f, \"args\": {\"service_us\": %.2f, "
            "\"total_us\": %.2f}}",
            pid, st[j].r->worker + 1, service ? "service" : "total",
            service ? j + 1 : j - by_service + 1, (zero + st[j].r->start_ns) / 1e3,
            st[j].service_us, st[j].total_us);
  }
  counters(f, first, pid, l, w, nw, zero);
  gaps(f, first, pid, queue_tid + 1, l, w, nw, zero);
  free(w);
  free(st);
  return FL_OK;
}

fl_status fl_serve_trace(const char *path, const fl_serve_opts *o, const fl_serve_pool *p,
                         const fl_serve_result *res) {
  FILE *f = fopen(path, "w");
  if (!f) {
    fprintf(stderr, "error: cannot write %s\n", path);
    return FL_ERR_IO;
  }
  fprintf(f, "{\"displayTimeUnit\": \"ms\", \"traceEvents\": [");
  int first = 1;
  fl_status s = FL_OK;
  uint64_t t0 = res->n_levels ? res->levels[0].t0_ns : 0;
  for (uint32_t i = 0; s == FL_OK && i < res->n_levels; i++)
    s = level(f, &first, (int)i + 1, o, p, &res->levels[i], (int64_t)(res->levels[i].t0_ns - t0));
  fprintf(f, "\n]}\n");
  if (fclose(f) != 0 && s == FL_OK) {
    fprintf(stderr, "error: writing %s\n", path);
    s = FL_ERR_IO;
  }
  if (s == FL_ERR_OUT_OF_MEMORY) fprintf(stderr, "error: out of memory writing %s\n", path);
  return s;
}
