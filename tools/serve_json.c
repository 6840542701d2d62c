/* serve_json.c: the serving benchmark's results as JSON (--json) and its plot
 * (--svg): latency percentiles and achieved rate against the offered rate. */
#include <stdlib.h>
#include <string.h>

#include "tools/serve.h"

/* {"p50": .., "p99": .., "p999": .., "max": ..} of n values. */
static void percentiles(FILE *f, const char *name, const double *v, uint64_t n) {
  fprintf(f, "\"%s\": {\"p50\": %.2f, \"p99\": %.2f, \"p999\": %.2f, \"max\": %.2f}", name,
          fl_percentile(v, n, 0.5), fl_percentile(v, n, 0.99), fl_percentile(v, n, 0.999),
          fl_percentile(v, n, 1));
}

/* "name": a time (ns: a run-queue delay, a time on a CPU) in units of `unit` ns, null
 * when unknown. */
static void delay(FILE *f, const char *name, int64_t ns, double unit) {
  if (ns < 0) fprintf(f, "\"%s\": null", name);
  else fprintf(f, "\"%s\": %.3f", name, (double)ns / unit);
}

/* "run_delay_<unit>": .., "on_cpu_<unit>": .., "nivcsw": .., "nvcsw": ..
 * (unit: "us" or "ms"; both times null when unknown) */
static void sched_fields(FILE *f, const fl_serve_sched *s, const char *unit) {
  const double ns = strcmp(unit, "ms") == 0 ? 1e6 : 1e3;
  char name[32];
  snprintf(name, sizeof name, "run_delay_%s", unit);
  delay(f, name, s->run_delay_ns, ns);
  snprintf(name, sizeof name, "on_cpu_%s", unit);
  fprintf(f, ", ");
  delay(f, name, s->run_delay_ns < 0 ? -1 : s->run_ns, ns);
  fprintf(f, ", \"nivcsw\": %llu, \"nvcsw\": %llu", (unsigned long long)s->nivcsw,
          (unsigned long long)s->nvcsw);
}

/* {sched_fields} */
static void sched(FILE *f, const fl_serve_sched *s, const char *unit) {
  fputc('{', f);
  sched_fields(f, s, unit);
  fputc('}', f);
}

/* The process's threads by kind: [{"kind": .., "threads": .., "run_delay_ms": ..,
 * "on_cpu_ms": .., "nivcsw": .., "nvcsw": ..}, ...] (kind names need no escaping:
 * serve.h). */
static void kinds(FILE *f, const fl_serve_kinds *ks) {
  fprintf(f, "[");
  for (uint32_t j = 0; j < ks->n; j++) {
    const fl_serve_kind *k = &ks->k[j];
    fprintf(f, "%s\n         {\"kind\": \"%s\", \"threads\": %u, ", j ? "," : "", k->name,
            k->threads);
    sched_fields(f, &k->s, "ms");
    fputc('}', f);
  }
  fprintf(f, "]");
}

/* The scheduler's account of the level: its requests, the workers, the
 * process, the process by thread kind. */
static void level_sched(FILE *f, const fl_serve_level *l) {
  fl_serve_preempt pr;
  fl_serve_preempt_of(l, &pr);
  fprintf(f, "\"scheduler\": {\"preempted\": %llu, \"slow\": %llu, \"slow_preempted\": %llu, "
          "\"slow_unseen\": %llu, ",
          (unsigned long long)pr.preempted, (unsigned long long)pr.slow,
          (unsigned long long)pr.slow_preempted, (unsigned long long)pr.slow_unseen);
  delay(f, "run_delay_ms", pr.run_delay_ns, 1e6);
  fprintf(f, ", ");
  delay(f, "slow_run_delay_ms", pr.slow_run_delay_ns, 1e6);
  fprintf(f, ",\n       \"workers\": ");
  sched(f, &l->workers, "ms");
  fprintf(f, ", \"process\": ");
  if (l->threads) sched(f, &l->process, "ms");
  else fprintf(f, "null");
  fprintf(f, ", \"threads\": %u,\n       \"kinds\": ", l->threads);
  kinds(f, &l->kinds);
  fprintf(f, "}");
}

/* "name": the k slowest requests by rank, slowest first. */
static void stalls(FILE *f, const char *name, const fl_serve_level *l, const fl_serve_pool *p,
                   fl_serve_rank rank, uint32_t k) {
  fl_serve_stall *st = malloc((k ? k : 1) * sizeof *st);
  uint32_t m = st ? fl_serve_stalls(l, p, rank, k, st) : 0;
  fprintf(f, "\"%s\": [", name);
  for (uint32_t j = 0; j < m; j++) {
    const fl_serve_record *r = st[j].r;
    fprintf(f, "%s\n        {\"size\": %u, \"worker\": %u, \"nth\": %u, \"sched_ms\": %.4f, "
            "\"start_ms\": %.4f, \"end_ms\": %.4f, \"queue_us\": %.2f, \"service_us\": %.2f, "
            "\"total_us\": %.2f, \"dispatch_us\": %.2f, \"busy\": %llu, \"ahead\": %llu, "
            "\"window_ms\": %.3f, \"counters\": {",
            j ? "," : "", st[j].samples, r->worker, r->nth, r->sched_ns / 1e6, r->start_ns / 1e6,
            r->end_ns / 1e6, st[j].queue_us, st[j].service_us, st[j].total_us, st[j].dispatch_us,
            (unsigned long long)st[j].busy, (unsigned long long)st[j].ahead, st[j].window_ms);
    for (int c = 0; c < FL_ATTR_COUNT; c++)
      fprintf(f, "%s\"%s\": %.*f", c ? ", " : "", fl_attr_cols[c].name, fl_attr_cols[c].decimals,
              st[j].d.v[c]);
    const fl_query_timing *t = &r->call;
    fprintf(f, "}, \"call\": {\"total_us\": %.2f, \"setup_us\": %.2f, \"setup_wait_us\": %.2f, "
            "\"setup_grow_us\": %.2f, \"setup_find_us\": %.2f, \"index_us\": %.2f, "
            "\"index_wait_us\": %.2f, "
            "\"fetch_us\": %.2f, \"admission_us\": %.2f, \"missed\": %llu, \"fetched_rows\": "
            "%llu, \"after_us\": %.2f}",
            t->total_ns / 1e3, t->setup_ns / 1e3, t->setup_wait_ns / 1e3, t->setup_grow_ns / 1e3,
            t->setup_find_ns / 1e3, t->index_ns / 1e3, t->index_wait_ns / 1e3, t->fetch_ns / 1e3,
            t->admission_ns / 1e3, (unsigned long long)t->missed,
            (unsigned long long)t->fetched_rows, st[j].service_us - t->total_ns / 1e3);
    fprintf(f, ", \"scheduler\": ");
    sched(f, &r->sched, "us");
    fprintf(f, ", \"wait_scheduler\": ");
    sched(f, &r->wait, "us");
    fprintf(f, ", ");
    delay(f, "unseen_us", fl_serve_unseen_ns(r), 1e3);
    fprintf(f, "}");
  }
  fprintf(f, "]");
  free(st);
}

/* "backlog": {"threshold_us": .., "onset": null or {"sched_ms": .., "start_ms": ..,
 * "queue_us": .., "in_service": ..}, "saturated_ms": .., "saturated_from_ms": ..,
 * "saturated_to_ms": .., "saturated_steal_ms": .., "steal_ms": ..}, or null without
 * the memory to work it out. */
static void backlog(FILE *f, const fl_serve_level *l, uint32_t workers) {
  fl_serve_backlog b;
  if (fl_serve_backlog_of(l, workers, &b) != FL_OK) {
    fprintf(f, "\"backlog\": null");
    return;
  }
  fprintf(f, "\"backlog\": {\"threshold_us\": %.1f, \"onset\": ", FL_SERVE_BACKLOG_US);
  if (b.onset)
    fprintf(f, "{\"sched_ms\": %.4f, \"start_ms\": %.4f, \"queue_us\": %.2f, "
            "\"in_service\": %llu}",
            b.onset->sched_ns / 1e6, b.onset->start_ns / 1e6, b.onset_queue_us,
            (unsigned long long)b.onset_in_service);
  else fprintf(f, "null");
  fprintf(f, ", \"saturated_ms\": %.4f, \"saturated_from_ms\": %.4f, \"saturated_to_ms\": %.4f, "
          "\"saturated_steal_ms\": %.1f, \"steal_ms\": %.1f}",
          (b.saturated_to_ns - b.saturated_from_ns) / 1e6, b.saturated_from_ns / 1e6,
          b.saturated_to_ns / 1e6, b.saturated_steal_ms, b.steal_ms);
}

/* "frozen": {"threshold_us": .., "count": .., "total_ms": .., "longest_us": ..,
 * "longest_from_ms": .. or null, "phases": [each worker's at its middle]}, or
 * null without the memory to work it out. */
static void frozen(FILE *f, const fl_serve_level *l, uint32_t workers) {
  fl_serve_frozen z;
  const char **phase = calloc(workers ? workers : 1, sizeof *phase);
  if (!phase || fl_serve_frozen_of(l, workers, &z, phase) != FL_OK) {
    fprintf(f, "\"frozen\": null");
    free(phase);
    return;
  }
  fprintf(f, "\"frozen\": {\"threshold_us\": %.1f, \"count\": %llu, \"total_ms\": %.4f, "
          "\"longest_us\": %.2f, \"longest_from_ms\": ", z.threshold_us,
          (unsigned long long)z.count, z.total_ms, (z.to_ns - z.from_ns) / 1e3);
  if (z.count) fprintf(f, "%.4f", z.from_ns / 1e6);
  else fprintf(f, "null");
  fprintf(f, ", \"phases\": [");
  for (uint32_t w = 0; w < workers; w++) fprintf(f, "%s\"%s\"", w ? ", " : "", phase[w]);
  fprintf(f, "]}");
  free(phase);
}

/* One kind of the canary's gaps: {"gaps": .., "total_ms": .., "longest_us": ..,
 * "unaccounted": .., "unaccounted_ms": .., "unknown": .., "frozen_gapped": ..,
 * "slow_gapped": ..}. */
static void gap_sum(FILE *f, const char *name, const fl_serve_gap_sum *g) {
  fprintf(f, "\"%s\": {\"gaps\": %llu, \"total_ms\": %.4f, \"longest_us\": %.2f, "
          "\"unaccounted\": %llu, \"unaccounted_ms\": %.4f, \"unknown\": %llu, "
          "\"frozen_gapped\": %llu, \"slow_gapped\": %llu}",
          name, (unsigned long long)g->gaps, g->total_ms, g->longest_us,
          (unsigned long long)g->unaccounted, g->unaccounted_ms, (unsigned long long)g->unknown,
          (unsigned long long)g->frozen_gapped, (unsigned long long)g->slow_gapped);
}

/* "canary": {"clock": gaps between its reads, "syscall": gaps in its system
 * calls (gap_sum), "frozen": .., "slow": .., "lost": ..}, or null when it did
 * not run (or without the memory to work it out). */
static void canary(FILE *f, const fl_serve_level *l, uint32_t workers) {
  fl_serve_canary_sum k;
  if (!l->canary || fl_serve_canary_of(l, workers, &k) != FL_OK) {
    fprintf(f, "\"canary\": null");
    return;
  }
  fprintf(f, "\"canary\": {");
  gap_sum(f, "clock", &k.clock);
  fprintf(f, ", ");
  gap_sum(f, "syscall", &k.syscall);
  fprintf(f, ", \"frozen\": %llu, \"slow\": %llu, \"lost\": %llu}",
          (unsigned long long)k.frozen, (unsigned long long)k.slow,
          (unsigned long long)l->gaps_lost);
}

static void level(FILE *f, const fl_serve_level *l, const fl_serve_pool *p,
                  const fl_serve_opts *o) {
  fprintf(f, "\n    {\"label\": \"%s\", \"mode\": \"%s\", \"load\": %.4f, \"offered_rps\": %.2f, "
          "\"achieved_rps\": %.2f, \"lookups_per_second\": %.1f,\n     \"requests\": %llu, "
          "\"unserved\": %llu, \"samples\": %llu, \"lookups\": %llu, \"seconds\": %.3f, "
          "\"wall_seconds\": %.6f, \"passes\": %.4f, \"hit_rate\": %.6f, \"shift_opens\": %llu, \"allocations\": %llu,\n     "
          "\"t0_ns\": %llu, ",
          l->label, l->open ? "open" : "closed", l->load, l->offered_rps, fl_serve_achieved_rps(l),
          l->wall_s > 0 ? (double)l->lookups / l->wall_s : 0, (unsigned long long)l->n,
          (unsigned long long)l->unserved, (unsigned long long)l->samples,
          (unsigned long long)l->lookups, l->seconds, l->wall_s, l->passes, fl_serve_hit_rate(l),
          (unsigned long long)(l->after.shift_opens - l->before.shift_opens),
          (unsigned long long)(l->after.allocations - l->before.allocations),
          (unsigned long long)l->t0_ns);
  percentiles(f, "latency_us", l->lat_us, l->n);
  fprintf(f, ",\n     ");
  percentiles(f, "queue_us", l->queue_us, l->n);
  fprintf(f, ",\n     ");
  percentiles(f, "service_us", l->service_us, l->n);
  fprintf(f, ",\n     ");
  percentiles(f, "dispatch_us", l->dispatch_us, l->n);
  fprintf(f, ",\n     ");
  double *ideal = fl_serve_ideal_latency(l, o->threads);
  if (ideal) percentiles(f, "ideal_us", ideal, l->n);
  else fprintf(f, "\"ideal_us\": null");
  free(ideal);
  fprintf(f, ",\n     ");
  level_sched(f, l);
  fprintf(f, ",\n     ");
  backlog(f, l, o->threads);
  fprintf(f, ",\n     ");
  frozen(f, l, o->threads);
  fprintf(f, ",\n     ");
  canary(f, l, o->threads);
  fprintf(f, ",\n     ");
  stalls(f, "stalls", l, p, FL_SERVE_BY_TOTAL, o->stalls);
  fprintf(f, ",\n     ");
  stalls(f, "slowest_service", l, p, FL_SERVE_BY_SERVICE, o->stalls);
  fprintf(f, "}");
}

fl_status fl_serve_json(const char *path, const fl_serve_opts *o, const fl_serve_pool *p,
                        const fl_serve_result *res) {
  FILE *f = fopen(path, "w");
  if (!f) {
    fprintf(stderr, "error: %s: cannot create\n", path);
    return FL_ERR_IO;
  }
  char sizes[256];
  fl_serve_sizes_desc(&o->sizes, sizes, sizeof sizes);
  const fl_serve_warm *w = &res->warm;
  fprintf(f, "{\n  \"backend\": \"%s\", \"threads\": %u, \"reserved\": %s, \"sizes\": \"%s\", \"mean_samples\": %.2f,\n"
          "  \"tables\": %u, \"pool_requests\": %llu, \"pool_samples\": %llu, \"device_ids\": %s,\n"
          "  \"budget_bytes\": %llu, \"seconds\": %.3f, \"sample_ms\": %u,\n"
          "  \"scheduler_probe_us\": %.3f, \"run_delay_known\": %s,\n"
          "  \"warmup\": {\"rounds\": %u, \"seconds\": %.3f, \"hit_rate\": %.6f, \"rps\": %.2f, "
          "\"steady\": %s, \"first_p50_us\": %.2f, \"first_max_us\": %.2f},\n  \"levels\": [",
          res->backend == FL_BACKEND_CUDA ? "cuda" : "host", o->threads,
          o->no_reserve ? "false" : "true", sizes,
          (double)p->samples / (double)p->n, p->n_tables, (unsigned long long)p->n,
          (unsigned long long)p->samples, o->device_ids ? "true" : "false",
          (unsigned long long)res->budget_bytes, o->seconds, o->sample_ms, res->probe_ns / 1e3,
          res->run_delay_known ? "true" : "false", w->rounds,
          w->seconds, w->hit_rate, w->rps, w->steady ? "true" : "false", w->first_p50_us,
          w->first_max_us);
  for (uint32_t i = 0; i < res->n_levels; i++) {
    if (i) fputc(',', f);
    level(f, &res->levels[i], p, o);
  }
  fprintf(f, "\n  ]\n}\n");
  if (fclose(f) != 0) {
    fprintf(stderr, "error: %s: write failed\n", path);
    return FL_ERR_IO;
  }
  return FL_OK;
}

fl_status fl_serve_svg(const char *path, const fl_serve_result *res) {
  enum { P50, P99, P999, ACHIEVED, SERIES };
  static const double q[3] = {0.5, 0.99, 0.999};
  static const char *const name[SERIES] = {"p50", "p99", "p99.9", "achieved"};
  uint32_t n = res->n_levels;
  double *x = malloc((n ? n : 1) * sizeof *x), *y = malloc((n ? n : 1) * SERIES * sizeof *y);
  if (!x || !y) return free(x), free(y), FL_ERR_OUT_OF_MEMORY;
  size_t m = 0; /* open levels */
  for (uint32_t i = 0; i < n; i++) {
    const fl_serve_level *l = &res->levels[i];
    if (!l->open) continue;
    x[m] = l->offered_rps;
    for (int s = P50; s <= P999; s++) y[s * n + m] = fl_serve_latency_us(l, q[s]);
    y[ACHIEVED * n + m] = fl_serve_achieved_rps(l);
    m++;
  }
  fl_plot_series se[SERIES];
  for (int s = 0; s < SERIES; s++) se[s] = (fl_plot_series){name[s], x, y + s * n, m};
  fl_plot_panel pn[2] = {
      {"Latency from arrival (open loop)", "offered requests/s", "us", se, 3},
      {"Achieved rate", "offered requests/s", "requests/s", se + ACHIEVED, 1}};
  fl_status st = fl_plot_svg(path, "serve_bench", pn, 2);
  free(x);
  free(y);
  return st;
}
