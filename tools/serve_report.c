/* serve_report.c: the serving benchmark's tables on stdout: the setup, one
 * row per level, and per level the slowest requests with what was going on
 * around them. */
#include <stdlib.h>
#include <string.h>

#include "tools/serve.h"

void fl_serve_print(FILE *f, const fl_serve_opts *o, const fl_serve_pool *p,
                    const fl_serve_result *res) {
  const fl_serve_warm *warm = &res->warm;
  char sizes[256];
  fl_serve_sizes_desc(&o->sizes, sizes, sizeof sizes);
  const char *ids = o->device_ids ? "copied to the device"
                    : p->pinned   ? "in pinned host memory"
                                  : "in host memory";
  fprintf(f, "serve: %s backend, cache %.1f MB, %u workers, requests of %s samples (mean %.0f) "
          "x %u tables, ids %s; pool %llu requests\n",
          res->backend == FL_BACKEND_CUDA ? "CUDA" : "host", (double)res->budget_bytes / 1e6,
          o->threads, sizes, (double)p->samples / (double)p->n, p->n_tables, ids,
          (unsigned long long)p->n);
  fprintf(f, "warm-up: %u rounds, %.2f s, hit rate %.2f%%, %.0f req/s (%s); first round: "
          "p50 %.1f us, max %.1f us\n", warm->rounds, warm->seconds, 100 * warm->hit_rate, warm->rps,
          warm->steady ? "steady" : "still moving at --warm-seconds", warm->first_p50_us,
          warm->first_max_us);
  fprintf(f, "%-12s %11s %11s %11s %9s %9s %9s %9s %9s %9s %9s %8s %7s\n", "level", "offered/s",
          "achieved/s", "M lookup/s", "p50 us", "p99 us", "p999 us", "max us", "queue99", "serv99",
          "dispmax", "hit rate", "passes");
  for (uint32_t i = 0; i < res->n_levels; i++) {
    const fl_serve_level *l = &res->levels[i];
    char offered[32] = "-";
    if (l->open) snprintf(offered, sizeof offered, "%.1f", l->offered_rps);
    fprintf(f, "%-12s %11s %11.1f %11.2f %9.1f %9.1f %9.1f %9.1f %9.1f %9.1f %9.1f %7.2f%% %7.2f",
            l->label, offered, fl_serve_achieved_rps(l),
            l->wall_s > 0 ? (double)l->lookups / l->wall_s / 1e6 : 0, fl_serve_latency_us(l, 0.5),
            fl_serve_latency_us(l, 0.99), fl_serve_latency_us(l, 0.999), fl_serve_latency_us(l, 1),
            fl_percentile(l->queue_us, l->n, 0.99), fl_percentile(l->service_us, l->n, 0.99),
            fl_percentile(l->dispatch_us, l->n, 1), 100 * fl_serve_hit_rate(l), l->passes);
    if (l->unserved) fprintf(f, "  (%llu unserved: past saturation)", (unsigned long long)l->unserved);
    fputc('\n', f);
  }
}

void fl_serve_print_stalls(FILE *f, const fl_serve_opts *o, const fl_serve_pool *p,
                           const fl_serve_level *l) {
  uint32_t n_stalls = o->stalls;
  fl_serve_stall *st = malloc((n_stalls ? n_stalls : 1) * sizeof *st);
  uint32_t m = st ? fl_serve_stalls(l, p, n_stalls, st) : 0;
  if (!m) {
    free(st);
    return;
  }
  fprintf(f, "\nslowest of %s (%llu requests; sched/start/end: ms from the level's start; "
          "queue, service, total, disp: us; disp: from when it could start (arrived, its worker "
          "free) to its start; busy: others in service at its start; ahead: queued at its "
          "arrival; nth: the worker's; after '|': the change of the cache's counters, "
          "all workers, between the reads (every %u ms; 0: none) around it; after '||': the "
          "library's account of its fl_query call (fl_query_timing, us; rows: fetched from the "
          "store), and 'after': its service once the call returned)\n",
          l->label, (unsigned long long)l->n, o->sample_ms);
  fprintf(f, "%5s %6s %4s %9s %9s %9s %9s %9s %9s %8s %4s %5s | %9s", "size", "worker", "nth",
          "sched", "start", "end", "queue", "service", "total", "disp", "busy", "ahead", "window_ms");
  for (int k = 0; k < FL_ATTR_COUNT; k++) fprintf(f, " %s", fl_attr_cols[k].name);
  fprintf(f, " || %8s %8s %8s %8s %8s %8s %8s %6s %6s %8s\n", "call", "setup", "s.wait", "s.grow",
          "index", "fetch", "adm", "missed", "rows", "after");
  for (uint32_t j = 0; j < m; j++) {
    const fl_serve_record *r = st[j].r;
    fprintf(f, "%5u %6u %4u %9.3f %9.3f %9.3f %9.1f %9.1f %9.1f %8.1f %4llu %5llu | %9.1f",
            st[j].samples, r->worker, r->nth, r->sched_ns / 1e6, r->start_ns / 1e6, r->end_ns / 1e6,
            st[j].queue_us, st[j].service_us, st[j].total_us, st[j].dispatch_us,
            (unsigned long long)st[j].busy, (unsigned long long)st[j].ahead, st[j].window_ms);
    for (int k = 0; k < FL_ATTR_COUNT; k++)
      fprintf(f, " %*.*f", (int)strlen(fl_attr_cols[k].name), fl_attr_cols[k].decimals, st[j].d.v[k]);
    const fl_query_timing *t = &r->call;
    fprintf(f, " || %8.1f %8.1f %8.1f %8.1f %8.1f %8.1f %8.1f %6llu %6llu %8.1f\n",
            t->total_ns / 1e3, t->setup_ns / 1e3, t->setup_wait_ns / 1e3, t->setup_grow_ns / 1e3,
            t->index_ns / 1e3, t->fetch_ns / 1e3, t->admission_ns / 1e3,
            (unsigned long long)t->missed, (unsigned long long)t->fetched_rows,
            st[j].service_us - t->total_ns / 1e3);
  }
  free(st);
}
