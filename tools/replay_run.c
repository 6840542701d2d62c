/* replay_run.c: one replay of a workload's trace through a fresh cache,
 * recording per-batch latency and hit rate (and, when asked, measuring the
 * floor after it: replay_floor.c), and the progress bar. */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/clock.h"
#include "tools/replay.h"

void fl_progress_start(fl_progress *p, int quiet) {
  memset(p, 0, sizeof *p);
  p->start = fl_now_s();
  p->quiet = quiet || !isatty(STDERR_FILENO);
}

void fl_progress_update(fl_progress *p, const char *label, uint64_t done, uint64_t total,
                        uint64_t lookups) {
  double now = fl_now_s();
  /* Only runs longer than 2 s get a bar, redrawn at most 10 times a second. */
  if (p->quiet || now - p->start < 2 || now - p->last_draw < 0.1) return;
  p->last_draw = now;
  p->drawn = 1;
  char bar[31];
  int fill = total ? (int)(30 * done / total) : 0;
  for (int i = 0; i < 30; i++) bar[i] = i < fill ? '#' : '.';
  bar[30] = '\0';
  fprintf(stderr, "\r%-9s [%s] %llu/%llu batches, %.1f M lookups/s wall ", label, bar,
          (unsigned long long)done, (unsigned long long)total,
          (double)lookups / 1e6 / (now - p->start));
}

void fl_progress_end(fl_progress *p) {
  if (p->drawn) fputs("\n", stderr);
}

void fl_run_free(fl_run *run) {
  free(run->floor.all_hit_ms_of);
  free(run->lat_ms);
  free(run->hit_rate);
  free(run->after);
  free(run->tables);
  memset(run, 0, sizeof *run);
}

/* The trace's next batch into b (*got 0 at its end); errors printed. */
static fl_status next_batch(const fl_workload *w, fl_trace_batch *b, int *got) {
  fl_status s = fl_trace_next(w->trace, b, got);
  if (s != FL_OK) fprintf(stderr, "error: %s: %s\n", fl_status_name(s), fl_trace_last_error(w->trace));
  return s;
}

static fl_status replay_loop(const fl_workload *w, const fl_replay_opts *o, fl_cache *c,
                             fl_runner *rn, fl_run *run) {
  fl_trace_batch b = {0}, ahead = {0};
  fl_status s = fl_trace_rewind(w->trace);
  fl_progress pg;
  fl_progress_start(&pg, o->quiet);
  uint64_t cap = 0, served = 0;
  int got = 1, have_ahead = 0;
  while (s == FL_OK && (w->batches == 0 || run->batches < w->batches)) {
    if (have_ahead) {
      fl_trace_batch t = b;
      b = ahead, ahead = t, have_ahead = 0;
    } else if ((s = next_batch(w, &b, &got)) != FL_OK || !got) {
      break;
    }
    /* --lookahead: the batch after this one, when the run goes on to it,
     * is named to the cache while this one's model runs. */
    if (o->lookahead && (w->batches == 0 || run->batches + 1 < w->batches) &&
        (s = next_batch(w, &ahead, &have_ahead)) != FL_OK)
      break;
    if (run->batches == cap) {
      cap = cap ? 2 * cap : 256;
      double *l = realloc(run->lat_ms, cap * sizeof *l);
      if (l) run->lat_ms = l;
      double *h = realloc(run->hit_rate, cap * sizeof *h);
      if (h) run->hit_rate = h;
      fl_cache_stats *a = realloc(run->after, cap * sizeof *a);
      if (a) run->after = a;
      if (!l || !h || !a) s = FL_ERR_OUT_OF_MEMORY;
      if (s != FL_OK) break;
    }
    double ms;
    s = fl_runner_query(rn, &b, have_ahead ? &ahead : NULL, &ms);
    if (s != FL_OK) break;
    fl_cache_stats st;
    s = fl_cache_stats_get(c, &st, NULL, 0);
    if (s != FL_OK) break;
    uint64_t n = fl_trace_batch_lookups(&b);
    run->lat_ms[run->batches] = ms;
    run->hit_rate[run->batches] = n ? (double)(st.hits + st.dram_hits - served) / (double)n : 0;
    served = st.hits + st.dram_hits;
    run->after[run->batches] = st;
    run->batches++;
    run->lookups += n;
    run->query_s += ms / 1e3;
    fl_progress_update(&pg, run->label, run->batches, w->batches, run->lookups);
  }
  fl_progress_end(&pg);
  fl_trace_batch_free(&b);
  fl_trace_batch_free(&ahead);
  return s;
}

fl_status fl_run_replay(const fl_workload *w, const fl_replay_opts *o, fl_layout layout,
                        fl_run *run) {
  memset(run, 0, sizeof *run);
  run->label = layout == FL_LAYOUT_FLAT ? "flat" : "per-table";
  run->budget_bytes = fl_workload_budget(w, o);
  run->tables = calloc(w->n_tables, sizeof *run->tables);
  if (!run->tables) return FL_ERR_OUT_OF_MEMORY;
  fl_cache *c = NULL;
  fl_runner *rn = NULL;
  fl_status s = fl_workload_cache(w, o, layout, &c);
  if (s != FL_OK) return s;
  run->backend = fl_cache_backend(c);
  fprintf(stderr, "cache: %s layout, %s backend, budget %.1f MB\n", run->label,
          run->backend == FL_BACKEND_CUDA ? "CUDA" : "host", (double)run->budget_bytes / 1e6);
  s = fl_runner_create(c, w, o, &rn);
  fl_store_tier_stats_reset(w->store);
  if (s == FL_OK) s = replay_loop(w, o, c, rn, run);
  if (s == FL_OK) s = fl_cache_stats_get(c, &run->stats, run->tables, w->n_tables);
  if (s == FL_OK) s = fl_cache_index_health(c, &run->health);
  if (s == FL_OK) s = fl_store_tier_stats_get(w->store, &run->tiers);
  if (s == FL_OK && o->floor) s = fl_floor_measure(w, o, c, rn, run);
  if (rn) {
    run->verified = fl_runner_verified(rn);
    fl_runner_lookahead_ms(rn, run->lookahead_ms);
    run->mismatches = fl_runner_mismatches(rn);
  }
  fl_runner_destroy(rn);
  fl_cache_destroy(c);
  return s;
}
