/* serve_bench.c: the serving benchmark's command line and its sequence:
 * workload, cache, request pool and workers; the warm-up; the closed-loop
 * level that finds the saturation rate, then the open-loop levels at the
 * --loads fractions of it; the reports. serve.h says what is measured.
 * Exit codes: 0 success, 1 runtime failure, 2 usage error. */
#include <stdlib.h>
#include <string.h>

#include "common/clock.h"
#include "tools/serve.h"

/* The warm-up is steady when the last WARM_STEADY rounds' hit rates lie
 * within WARM_SPREAD of each other. */
#define WARM_STEADY 3
#define WARM_SPREAD 0.005

/* Closed-loop rounds of an eighth of the pool (at least 16 requests per
 * worker) until the hit rate stops moving or --warm-seconds pass: the cache
 * fills, the CUDA modules load, the library's buffers grow to their size. */
static fl_status warm_up(fl_serve_ctx *x, fl_serve_warm *w) {
  uint64_t round = x->pool->n / 8, least = 16 * (uint64_t)x->o->threads;
  double hit[WARM_STEADY] = {0}, t0 = fl_now_s();
  memset(w, 0, sizeof *w);
  while (!w->steady && fl_now_s() - t0 < x->o->warm_seconds) {
    fl_serve_level l;
    fl_status s = fl_serve_run_closed(x, "warm", 0, round > least ? round : least, &l);
    w->hit_rate = fl_serve_hit_rate(&l);
    w->rps = fl_serve_achieved_rps(&l);
    if (w->rounds == 0) {
      w->first_p50_us = fl_serve_latency_us(&l, 0.5);
      w->first_max_us = fl_serve_latency_us(&l, 1);
    }
    fl_serve_level_free(&l);
    if (s != FL_OK) return s;
    hit[w->rounds++ % WARM_STEADY] = w->hit_rate;
    double lo = hit[0], hi = hit[0];
    for (int i = 1; i < WARM_STEADY; i++) {
      lo = hit[i] < lo ? hit[i] : lo;
      hi = hit[i] > hi ? hit[i] : hi;
    }
    w->steady = w->rounds >= WARM_STEADY && hi - lo < WARM_SPREAD;
  }
  w->seconds = fl_now_s() - t0;
  x->est_rps = w->rps;
  fl_cache_stats st;
  if (fl_cache_stats_get(x->cache, &st, NULL, 0) != FL_OK) st.zero_copy_limit = 0;
  fprintf(stderr, "warm-up: %u rounds, hit rate %.2f%%, %.0f req/s; zero_copy_limit %llu\n",
          w->rounds, 100 * w->hit_rate, w->rps, (unsigned long long)st.zero_copy_limit);
  return FL_OK;
}

static void progress(const fl_serve_level *l) {
  fprintf(stderr, "%s: %.0f req/s, p99 %.0f us\n", l->label, fl_serve_achieved_rps(l),
          fl_serve_latency_us(l, 0.99));
}

/* The closed loop at K workers, then the open loop at each load. */
static fl_status sweep(fl_serve_ctx *x, fl_serve_result *res) {
  const fl_serve_opts *o = x->o;
  res->levels = calloc(1 + o->n_loads, sizeof *res->levels);
  if (!res->levels) return FL_ERR_OUT_OF_MEMORY;
  char label[32];
  snprintf(label, sizeof label, "closed K=%u", o->threads);
  fl_status s = fl_serve_run_closed(x, label, o->seconds, 0, &res->levels[res->n_levels++]);
  if (s != FL_OK) return s;
  progress(&res->levels[0]);
  double saturation = fl_serve_achieved_rps(&res->levels[0]);
  x->est_rps = saturation;
  for (uint32_t i = 0; s == FL_OK && i < o->n_loads; i++) {
    fl_serve_level *l = &res->levels[res->n_levels++];
    snprintf(label, sizeof label, "open %g%%", 100 * o->loads[i]);
    s = fl_serve_run_open(x, label, o->loads[i], o->loads[i] * saturation, o->seconds, l);
    if (s == FL_OK) progress(l);
  }
  return s;
}

static fl_status report(const fl_serve_opts *o, const fl_serve_pool *p,
                        const fl_serve_result *res) {
  fl_serve_print(stdout, o, p, res);
  for (uint32_t i = 0; i < res->n_levels; i++) fl_serve_print_stalls(stdout, o, p, &res->levels[i]);
  fl_status s = o->w.json ? fl_serve_json(o->w.json, o, p, res) : FL_OK;
  if (s == FL_OK && o->svg) s = fl_serve_svg(o->svg, res);
  if (s == FL_OK && o->trace) s = fl_serve_trace(o->trace, o, p, res);
  return s;
}

/* Everything the run owns, freed by one path. */
typedef struct bench {
  fl_workload w;
  fl_cache *cache;
  fl_serve_pool pool;
  fl_serve_worker **workers;
  fl_serve_result res;
} bench;

static void bench_free(bench *b, uint32_t threads) {
  for (uint32_t i = 0; i < b->res.n_levels; i++) fl_serve_level_free(&b->res.levels[i]);
  free(b->res.levels);
  for (uint32_t i = 0; b->workers && i < threads; i++) fl_serve_worker_destroy(b->workers[i]);
  free(b->workers);
  fl_serve_pool_free(&b->pool);
  fl_cache_destroy(b->cache);
  fl_workload_close(&b->w);
}

static fl_status setup(const fl_serve_opts *o, bench *b) {
  fl_status s = fl_workload_open(&o->w, &b->w);
  if (s == FL_OK) s = fl_workload_cache(&b->w, &o->w, o->w.layout, &b->cache);
  if (s != FL_OK) return s;
  b->res.backend = fl_cache_backend(b->cache);
  b->res.budget_bytes = fl_workload_budget(&b->w, &o->w);
  b->res.probe_ns = fl_serve_probe_cost_ns(&b->res.run_delay_known);
  s = fl_serve_pool_build(&b->w, o, b->res.backend == FL_BACKEND_CUDA, &b->pool);
  if (s != FL_OK) return s;
  /* As a server does at start-up: buffers for K callers (at most the
   * reserve's limit) of the largest request, so that no request allocates
   * (pinned allocation holds every thread's CUDA calls). */
  if (!o->no_reserve) {
    uint32_t callers = o->threads < FL_RESERVE_MAX_CALLERS ? o->threads : FL_RESERVE_MAX_CALLERS;
    s = fl_cache_reserve(b->cache, (uint64_t)b->pool.max_samples * b->pool.n_tables,
                         b->pool.n_tables, callers);
    if (s != FL_OK) {
      fprintf(stderr, "error: reserving query buffers for %u workers (--no-reserve skips it): "
              "%s: %s\n", callers, fl_status_name(s), fl_cache_last_error(b->cache));
      return s;
    }
  }
  b->workers = calloc(o->threads, sizeof *b->workers);
  if (!b->workers) return FL_ERR_OUT_OF_MEMORY;
  for (uint32_t i = 0; s == FL_OK && i < o->threads; i++)
    s = fl_serve_worker_create(b->cache, &b->w, &b->pool, o->device_ids, &b->workers[i]);
  return s;
}

int main(int argc, char **argv) {
  fl_serve_opts o;
  int r = fl_serve_parse(&o, argc, argv);
  if (r) return r > 0 ? 0 : 2;
  bench b;
  memset(&b, 0, sizeof b);
  fl_status s = setup(&o, &b);
  fl_serve_ctx x = {.o = &o, .cache = b.cache, .pool = &b.pool, .workers = b.workers,
                    .seed = o.w.seed};
  if (s == FL_OK) s = warm_up(&x, &b.res.warm);
  if (s == FL_OK) s = sweep(&x, &b.res);
  if (s == FL_OK) s = report(&o, &b.pool, &b.res);
  bench_free(&b, o.threads);
  return s == FL_OK ? 0 : 1;
}
