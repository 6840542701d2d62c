/* serve_report.c: the serving benchmark's tables on stdout: the setup, one
 * row per level, the scheduler's account per level and per level by thread
 * kind, the backlog per level, the queueing per level against the ideal
 * queue, and per level the slowest requests (by total, then by service) with
 * what was going on around them. */
#include <stdlib.h>
#include <string.h>

#include "common/error.h"
#include "tools/serve.h"

/* A time (ns: a run-queue delay, a time on a CPU) in units of `unit` ns
 * with `decimals`, or "-" when unknown (< 0). */
static const char *delay_text(char *buf, size_t cap, int64_t ns, double unit, int decimals) {
  if (ns < 0) snprintf(buf, cap, "-");
  else snprintf(buf, cap, "%.*f", decimals, (double)ns / unit);
  return buf;
}

/* Per level: the requests the scheduler preempted, the workers' and the
 * whole process's switches and run-queue delay. */
static void print_sched(FILE *f, const fl_serve_result *res) {
  fprintf(f, "\nscheduler per level (preempt: requests with an involuntary context switch while "
          "served; slow: served in over %.0f us; slow.pre: of those, preempted; slow.hv: of "
          "those, never switched out yet neither on a CPU nor waiting for one for over half "
          "the service: the hypervisor held the worker's vCPU; runq: ms runnable but waiting "
          "for a CPU, summed; workers: the K workers over the level; process: every thread; "
          "invol, vol: involuntary, voluntary context switches; -: unknown)\n",
          FL_SERVE_SLOW_US);
  fprintf(f, "%-12s %8s %8s %6s %8s %7s %9s %9s | %11s %8s | %11s %8s %8s %7s\n", "level",
          "requests", "preempt", "slow", "slow.pre", "slow.hv", "runq ms", "slow runq",
          "workers runq", "invol", "process runq", "invol", "vol", "threads");
  for (uint32_t i = 0; i < res->n_levels; i++) {
    const fl_serve_level *l = &res->levels[i];
    fl_serve_preempt pr;
    fl_serve_preempt_of(l, &pr);
    char a[32], b[32], c[32], d[32], inv[32] = "-", vol[32] = "-";
    if (l->threads) {
      snprintf(inv, sizeof inv, "%llu", (unsigned long long)l->process.nivcsw);
      snprintf(vol, sizeof vol, "%llu", (unsigned long long)l->process.nvcsw);
    }
    fprintf(f, "%-12s %8llu %8llu %6llu %8llu %7llu %9s %9s | %11s %8llu | %11s %8s %8s %7u\n",
            l->label, (unsigned long long)l->n, (unsigned long long)pr.preempted,
            (unsigned long long)pr.slow, (unsigned long long)pr.slow_preempted,
            (unsigned long long)pr.slow_unseen, delay_text(a, sizeof a, pr.run_delay_ns, 1e6, 2),
            delay_text(b, sizeof b, pr.slow_run_delay_ns, 1e6, 2),
            delay_text(c, sizeof c, l->workers.run_delay_ns, 1e6, 2),
            (unsigned long long)l->workers.nivcsw,
            delay_text(d, sizeof d, l->threads ? l->process.run_delay_ns : -1, 1e6, 2), inv, vol,
            l->threads);
  }
}

/* Per level, the process's threads by kind (serve.h's fl_serve_kind), in
 * the order of their first thread: the same rows from level to level. */
static void print_kinds(FILE *f, const fl_serve_result *res) {
  fprintf(f, "\nscheduler per level by thread kind (kind: a thread's name less a trailing -N "
          "or digits; threads, runq, invol, vol: as process's, over the kind's threads; "
          "-: unknown)\n");
  fprintf(f, "%-12s %-15s %7s %11s %8s %8s\n", "level", "kind", "threads", "runq ms", "invol",
          "vol");
  for (uint32_t i = 0; i < res->n_levels; i++) {
    const fl_serve_level *l = &res->levels[i];
    if (l->kinds.n == 0) fprintf(f, "%-12s %-15s\n", l->label, "-");
    for (uint32_t j = 0; j < l->kinds.n; j++) {
      const fl_serve_kind *k = &l->kinds.k[j];
      char d[32];
      fprintf(f, "%-12s %-15s %7u %11s %8llu %8llu\n", j ? "" : l->label, k->name, k->threads,
              delay_text(d, sizeof d, k->s.run_delay_ns, 1e6, 2),
              (unsigned long long)k->s.nivcsw, (unsigned long long)k->s.nvcsw);
    }
  }
}

/* Per level, the backlog's onset and the longest saturated stretch. */
static void print_backlog(FILE *f, const fl_serve_opts *o, const fl_serve_result *res) {
  fprintf(f, "\nbacklog per level (onset: the first request by arrival queued over %.0f us, "
          "or none; sched, start: its times, ms from the level's start; queue: us; in.svc: "
          "requests in service at its arrival; saturated: the longest stretch, ms, with all %u "
          "workers busy (picking up queued work counts) and a request queued, from and to: ms "
          "from the level's start; steal: ms the hypervisor gave this machine's CPUs to "
          "others, summed over them (/proc/stat), around that stretch and over the level)\n",
          FL_SERVE_BACKLOG_US, o->threads);
  fprintf(f, "%-12s %9s %9s %9s %6s | %9s %9s %9s %9s | %9s\n", "level", "onset", "start",
          "queue", "in.svc", "saturated", "from", "to", "steal", "steal");
  for (uint32_t i = 0; i < res->n_levels; i++) {
    const fl_serve_level *l = &res->levels[i];
    fl_serve_backlog b;
    if (fl_serve_backlog_of(l, o->threads, &b) != FL_OK) {
      fprintf(f, "%-12s out of memory\n", l->label);
      continue;
    }
    if (b.onset)
      fprintf(f, "%-12s %9.3f %9.3f %9.1f %6llu", l->label, b.onset->sched_ns / 1e6,
              b.onset->start_ns / 1e6, b.onset_queue_us, (unsigned long long)b.onset_in_service);
    else fprintf(f, "%-12s %9s %9s %9s %6s", l->label, "none", "-", "-", "-");
    fprintf(f, " | %9.3f %9.3f %9.3f %9.1f | %9.1f\n",
            (b.saturated_to_ns - b.saturated_from_ns) / 1e6, b.saturated_from_ns / 1e6,
            b.saturated_to_ns / 1e6, b.saturated_steal_ms, b.steal_ms);
  }
}

static void print_frozen(FILE *f, const fl_serve_opts *o, const fl_serve_result *res) {
  fprintf(f, "\nfrozen per level (every one of the %u workers in service and none starting or "
          "ending a request for over `over` us: %.0f, or twice the level's median service: a "
          "stall they share; count, ms in all; the longest: us, from: ms from the level's start, "
          "and each worker's phase at its middle, 'call': in none the library accounts)\n",
          o->threads, FL_SERVE_FROZEN_US);
  fprintf(f, "%-12s %7s %7s %9s %9s %9s  %s\n", "level", "over", "count", "total", "longest",
          "from", "phases");
  const char **phase = calloc(o->threads, sizeof *phase);
  for (uint32_t i = 0; i < res->n_levels; i++) {
    const fl_serve_level *l = &res->levels[i];
    fl_serve_frozen z;
    if (!phase || fl_serve_frozen_of(l, o->threads, &z, phase) != FL_OK) {
      fprintf(f, "%-12s out of memory\n", l->label);
      continue;
    }
    fprintf(f, "%-12s %7.0f %7llu %9.3f %9.1f", l->label, z.threshold_us,
            (unsigned long long)z.count, z.total_ms, (z.to_ns - z.from_ns) / 1e3);
    if (!z.count) {
      fprintf(f, " %9s  -\n", "-");
      continue;
    }
    fprintf(f, " %9.3f ", z.from_ns / 1e6);
    for (uint32_t w = 0; w < o->threads; w++)
      fprintf(f, " %s%s", phase[w], w + 1 < o->threads ? "," : "");
    fputc('\n', f);
  }
  free(phase);
}

/* Per level, the canary's gaps (--canary) of both kinds and what they
 * overlap. */
static void print_canary(FILE *f, const fl_serve_opts *o, const fl_serve_result *res) {
  if (!o->canary) return;
  fprintf(f, "\ncanary per level (a thread reading the clock in a loop, with a system call "
          "that does nothing every %.0f us: clock, gaps over %.0f us between its reads; "
          "syscall, those calls that took over %.0f us; n, ms in all, the longest (us); "
          "unacc: gaps its run-queue delay covers less than half of: time no scheduler of "
          "the guest accounts (between reads: the machine stood still; in a call: the kernel "
          "held it); frozen, slow: of the frozen "
          "stretches and the requests served longer than their threshold, those that "
          "overlap a gap of the kind)\n",
          FL_SERVE_CALL_EVERY_US, FL_SERVE_GAP_US, FL_SERVE_GAP_US);
  fprintf(f, "%-12s | %6s %9s %9s %6s %13s %13s | %6s %9s %9s %6s %13s %13s\n", "level",
          "clock", "ms", "longest", "unacc", "frozen", "slow", "sys", "ms", "longest", "unacc",
          "frozen", "slow");
  for (uint32_t i = 0; i < res->n_levels; i++) {
    const fl_serve_level *l = &res->levels[i];
    fl_serve_canary_sum k;
    if (!l->canary || fl_serve_canary_of(l, o->threads, &k) != FL_OK) {
      fprintf(f, "%-12s %s\n", l->label, l->canary ? "out of memory" : "not run");
      continue;
    }
    fprintf(f, "%-12s", l->label);
    const fl_serve_gap_sum *kinds[] = {&k.clock, &k.syscall};
    for (int j = 0; j < 2; j++) {
      const fl_serve_gap_sum *g = kinds[j];
      char unacc[32];
      if (g->unknown) snprintf(unacc, sizeof unacc, "?%llu", (unsigned long long)g->unknown);
      else snprintf(unacc, sizeof unacc, "%llu", (unsigned long long)g->unaccounted);
      fprintf(f, " | %6llu %9.3f %9.1f %6s %6llu/%-6llu %6llu/%-6llu", (unsigned long long)g->gaps,
              g->total_ms, g->longest_us, unacc, (unsigned long long)g->frozen_gapped,
              (unsigned long long)k.frozen, (unsigned long long)g->slow_gapped,
              (unsigned long long)k.slow);
    }
    fputc('\n', f);
  }
}

/* Per level, its latency against the ideal queue's for the same requests,
 * and both as multiples of the unloaded p50. */
static void print_queue(FILE *f, const fl_serve_opts *o, const fl_serve_result *res) {
  const fl_serve_level *light = fl_serve_lightest(res);
  double unloaded = light ? fl_serve_latency_us(light, 0.5) : 0;
  fprintf(f, "\nqueueing per level (ideal: the level's own arrivals and service times through a "
          "FIFO queue of %u workers that start a request the moment it has arrived and a worker "
          "is free; latency beyond it is dispatch: workers waking, taking the request, getting a "
          "CPU; x unl: a multiple of the unloaded p50, the p50 of %s, %.1f us)\n",
          o->threads, light ? light->label : "no open level", unloaded);
  fprintf(f, "%-12s %10s %10s %10s | %10s %10s | %10s %10s %10s %10s\n", "level", "ideal p50",
          "ideal p99", "ideal p999", "p99/ideal", "p999/ideal", "p99 x unl", "ideal p99",
          "p999 x unl", "ideal p999");
  for (uint32_t i = 0; i < res->n_levels; i++) {
    const fl_serve_level *l = &res->levels[i];
    double *ideal = fl_serve_ideal_latency(l, o->threads);
    if (!ideal) {
      fprintf(f, "%-12s %s\n", l->label, fl_error_get(NULL));
      continue;
    }
    double i50 = fl_percentile(ideal, l->n, 0.5), i99 = fl_percentile(ideal, l->n, 0.99);
    double i999 = fl_percentile(ideal, l->n, 0.999);
    double p99 = fl_serve_latency_us(l, 0.99), p999 = fl_serve_latency_us(l, 0.999);
    double u = unloaded > 0 ? unloaded : 1;
    fprintf(f, "%-12s %10.1f %10.1f %10.1f | %10.2f %10.2f | %10.2f %10.2f %10.2f %10.2f\n", l->label,
            i50, i99, i999, i99 > 0 ? p99 / i99 : 0, i999 > 0 ? p999 / i999 : 0, p99 / u, i99 / u,
            p999 / u, i999 / u);
    free(ideal);
  }
}

void fl_serve_print(FILE *f, const fl_serve_opts *o, const fl_serve_pool *p,
                    const fl_serve_result *res) {
  const fl_serve_warm *warm = &res->warm;
  char sizes[256];
  fl_serve_sizes_desc(&o->sizes, sizes, sizeof sizes);
  const char *ids = o->device_ids ? "copied to the device"
                    : p->pinned   ? "in pinned host memory"
                                  : "in host memory";
  fprintf(f, "serve: %s backend, cache %.1f MB, %u workers, requests of %s samples (mean %.0f) "
          "x %u tables, ids %s; pool %llu requests; query buffers %s\n",
          res->backend == FL_BACKEND_CUDA ? "CUDA" : "host", (double)res->budget_bytes / 1e6,
          o->threads, sizes, (double)p->samples / (double)p->n, p->n_tables, ids,
          (unsigned long long)p->n,
          o->no_reserve ? "grown on demand (--no-reserve)" : "reserved for the workers");
  fprintf(f, "warm-up: %u rounds, %.2f s, hit rate %.2f%%, %.0f req/s (%s); first round: "
          "p50 %.1f us, max %.1f us\n", warm->rounds, warm->seconds, 100 * warm->hit_rate, warm->rps,
          warm->steady ? "steady" : "still moving at --warm-seconds", warm->first_p50_us,
          warm->first_max_us);
  fprintf(f, "scheduler probes: %.2f us a request (getrusage and schedstat, at the ticket, "
          "before and after)%s\n",
          res->probe_ns / 1e3,
          res->run_delay_known ? "" : "; run-queue delay unknown: no /proc/thread-self/schedstat");
  fprintf(f, "%-12s %11s %11s %11s %9s %9s %9s %9s %9s %9s %9s %8s %7s %6s\n", "level",
          "offered/s", "achieved/s", "M lookup/s", "p50 us", "p99 us", "p999 us", "max us",
          "queue99", "serv99", "dispmax", "hit rate", "passes", "allocs");
  for (uint32_t i = 0; i < res->n_levels; i++) {
    const fl_serve_level *l = &res->levels[i];
    char offered[32] = "-";
    if (l->open) snprintf(offered, sizeof offered, "%.1f", l->offered_rps);
    fprintf(f, "%-12s %11s %11.1f %11.2f %9.1f %9.1f %9.1f %9.1f %9.1f %9.1f %9.1f %7.2f%% %7.2f %6llu",
            l->label, offered, fl_serve_achieved_rps(l),
            l->wall_s > 0 ? (double)l->lookups / l->wall_s / 1e6 : 0, fl_serve_latency_us(l, 0.5),
            fl_serve_latency_us(l, 0.99), fl_serve_latency_us(l, 0.999), fl_serve_latency_us(l, 1),
            fl_percentile(l->queue_us, l->n, 0.99), fl_percentile(l->service_us, l->n, 0.99),
            fl_percentile(l->dispatch_us, l->n, 1), 100 * fl_serve_hit_rate(l), l->passes,
            (unsigned long long)(l->after.allocations - l->before.allocations));
    if (l->unserved) fprintf(f, "  (%llu unserved: past saturation)", (unsigned long long)l->unserved);
    fputc('\n', f);
  }
  print_sched(f, res);
  print_kinds(f, res);
  print_backlog(f, o, res);
  print_frozen(f, o, res);
  print_canary(f, o, res);
  print_queue(f, o, res);
}

/* One list of a level's slowest requests by `rank`, under its heading: the
 * first (by total) explains the columns, the second refers to it. */
static void print_list(FILE *f, const fl_serve_opts *o, const fl_serve_pool *p,
                       const fl_serve_level *l, fl_serve_rank rank) {
  uint32_t n_stalls = o->stalls;
  fl_serve_stall *st = malloc((n_stalls ? n_stalls : 1) * sizeof *st);
  uint32_t m = st ? fl_serve_stalls(l, p, rank, n_stalls, st) : 0;
  if (!m) {
    free(st);
    return;
  }
  if (rank == FL_SERVE_BY_SERVICE)
    fprintf(f, "\nslowest services of %s (by service time, not total: the requests a backlog "
            "queued behind; columns as in its slowest)\n", l->label);
  else fprintf(f, "\nslowest of %s (%llu requests; sched/start/end: ms from the level's start; "
          "queue, service, total, disp: us; disp: from when it could start (arrived, its worker "
          "free) to its start; busy: others in service at its start; ahead: queued at its "
          "arrival; nth: the worker's; after '|': the change of the cache's counters, "
          "all workers, between the reads (every %u ms; 0: none) around it; after '||': the "
          "library's account of its fl_query call (fl_query_timing, us; rows: fetched from the "
          "store), and 'after': its service once the call returned; after the last '|': its "
          "worker thread's run-queue delay while served (us; -: unknown), its time on a CPU "
          "(us), the rest of the service ('unseen', us: asleep, or with no switch its vCPU "
          "held by the hypervisor), involuntary and voluntary context switches)\n",
          l->label, (unsigned long long)l->n, o->sample_ms);
  fprintf(f, "%5s %6s %4s %9s %9s %9s %9s %9s %9s %8s %4s %5s | %9s", "size", "worker", "nth",
          "sched", "start", "end", "queue", "service", "total", "disp", "busy", "ahead", "window_ms");
  for (int k = 0; k < FL_ATTR_COUNT; k++) fprintf(f, " %s", fl_attr_cols[k].name);
  fprintf(f, " || %8s %8s %8s %8s %8s %8s %8s %8s %8s %6s %6s %8s | %8s %8s %8s %5s %5s\n",
          "call", "setup", "s.wait", "s.grow", "s.find", "index", "i.wait", "fetch", "adm", "missed",
          "rows", "after", "runq", "oncpu", "unseen", "invol", "vol");
  for (uint32_t j = 0; j < m; j++) {
    const fl_serve_record *r = st[j].r;
    fprintf(f, "%5u %6u %4u %9.3f %9.3f %9.3f %9.1f %9.1f %9.1f %8.1f %4llu %5llu | %9.1f",
            st[j].samples, r->worker, r->nth, r->sched_ns / 1e6, r->start_ns / 1e6, r->end_ns / 1e6,
            st[j].queue_us, st[j].service_us, st[j].total_us, st[j].dispatch_us,
            (unsigned long long)st[j].busy, (unsigned long long)st[j].ahead, st[j].window_ms);
    for (int k = 0; k < FL_ATTR_COUNT; k++)
      fprintf(f, " %*.*f", (int)strlen(fl_attr_cols[k].name), fl_attr_cols[k].decimals, st[j].d.v[k]);
    const fl_query_timing *t = &r->call;
    const fl_serve_sched *sc = &r->sched;
    char runq[32], oncpu[32], unseen[32];
    const int64_t off = fl_serve_unseen_ns(r);
    fprintf(f, " || %8.1f %8.1f %8.1f %8.1f %8.1f %8.1f %8.1f %8.1f %8.1f %6llu %6llu %8.1f | %8s "
            "%8s %8s %5llu %5llu\n",
            t->total_ns / 1e3, t->setup_ns / 1e3, t->setup_wait_ns / 1e3, t->setup_grow_ns / 1e3,
            t->setup_find_ns / 1e3, t->index_ns / 1e3, t->index_wait_ns / 1e3, t->fetch_ns / 1e3, t->admission_ns / 1e3,
            (unsigned long long)t->missed, (unsigned long long)t->fetched_rows,
            st[j].service_us - t->total_ns / 1e3,
            delay_text(runq, sizeof runq, sc->run_delay_ns, 1e3, 1),
            delay_text(oncpu, sizeof oncpu, off < 0 ? -1 : sc->run_ns, 1e3, 1),
            delay_text(unseen, sizeof unseen, off, 1e3, 1), (unsigned long long)sc->nivcsw,
            (unsigned long long)sc->nvcsw);
  }
  free(st);
}

void fl_serve_print_stalls(FILE *f, const fl_serve_opts *o, const fl_serve_pool *p,
                           const fl_serve_level *l) {
  print_list(f, o, p, l, FL_SERVE_BY_TOTAL);
  print_list(f, o, p, l, FL_SERVE_BY_SERVICE);
}
