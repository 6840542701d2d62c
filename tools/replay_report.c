/* replay_report.c: the replay summary: a table on stdout, the same numbers as
 * JSON, and the hit-rate/latency plot; ratios when two layouts ran. */
#include <stdlib.h>

#include "tools/replay.h"

static double pct(uint64_t a, uint64_t b) { return b ? 100.0 * (double)a / (double)b : 0; }
static double mlps(const fl_run *r) { return r->query_s > 0 ? (double)r->lookups / r->query_s / 1e6 : 0; }

static const char *const phase_name[4] = {"encode+index", "hit copy", "miss fetch", "admission"};
static void phases(const fl_cache_stats *s, double ns[4]) {
  ns[0] = s->ns_index, ns[1] = s->ns_hit_copy, ns[2] = s->ns_miss_fetch, ns[3] = s->ns_admission;
}

/* Per-batch series of the miss path, from the counters after each batch. A
 * batch's value is the difference of two batches' counters. */
enum { S_INDEX, S_FETCH, S_GATHER, S_ADMIT, S_CPU, S_ROWS, S_COUNT };
static const char *const series_name[S_COUNT] = {"encode_index_ms", "miss_fetch_ms",
                                                 "store_gather_ms", "admission_ms",
                                                 "miss_host_cpu_ms", "unique_rows"};
static double counter(const fl_cache_stats *s, int k) {
  switch (k) {
    case S_INDEX: return s->ns_index / 1e6;
    case S_FETCH: return s->ns_miss_fetch / 1e6;
    case S_GATHER: return s->ns_store_gather / 1e6;
    case S_ADMIT: return s->ns_admission / 1e6;
    case S_CPU: return s->ns_miss_host_cpu / 1e6;
    default: return (double)s->unique_misses;
  }
}
static double batch_value(const fl_run *r, uint64_t b, int k) {
  return counter(&r->after[b], k) - (b ? counter(&r->after[b - 1], k) : 0);
}

/* The median over the steady batches of series k (S_COUNT: latency). */
static double steady_median(const fl_run *r, int k) {
  uint64_t from = fl_run_steady_from(r), n = r->batches - from;
  if (k == S_COUNT) return fl_percentile(r->lat_ms + from, n, 0.5);
  double *v = malloc((n ? n : 1) * sizeof *v);
  if (!v) return 0;
  for (uint64_t b = from; b < r->batches; b++) v[b - from] = batch_value(r, b, k);
  double x = fl_percentile(v, n, 0.5);
  free(v);
  return x;
}

/* Series k's total over the steady batches, per unique row fetched. */
static double steady_per_row(const fl_run *r, int k) {
  double rows = 0, x = 0;
  for (uint64_t b = fl_run_steady_from(r); b < r->batches; b++)
    rows += batch_value(r, b, S_ROWS), x += batch_value(r, b, k);
  return rows > 0 ? x / rows : 0;
}

/* The steady-state batch against its floor (replay_floor.c), when measured. */
static void print_floor(FILE *f, const fl_batch_floor *fl) {
  if (fl->missing) fprintf(f, "\nfloor of the steady-state batch: not measured: %s", fl->missing);
  if (fl->ms <= 0) return;
  fprintf(f, "\nfloor of the steady-state batch: %.4f ms = all-hit %.4f ms + %llu distinct misses "
          "at the memcpy-gather rate %.3g rows/s (%u threads, %llu random rows a gather) %.4f ms",
          fl->ms, fl->all_hit_ms, (unsigned long long)fl->rows, fl->rows_per_s, fl->threads,
          (unsigned long long)fl->rate_rows, fl->gather_ms);
  if (fl->hidden_ms > 0) fprintf(f, " - %.4f ms the model hides (look-ahead)", fl->hidden_ms);
  fprintf(f, "; batch %llu, the median of the steady batches' floors"
          "\nsteady-state batch / floor: %.2fx (%.4f ms / %.4f ms)",
          (unsigned long long)fl->batch, fl->ratio, fl->steady_ms, fl->ms);
}

/* The floor as the JSON object of key "floor" (null when not asked for). */
static void json_floor(FILE *f, const fl_batch_floor *fl) {
  if (fl->ms <= 0) {
    if (fl->missing) fprintf(f, "{\"missing\": \"%s\"}", fl->missing);
    else fputs("null", f);
    return;
  }
  fprintf(f, "{\"ms\": %.4f, \"all_hit_ms\": %.4f, \"gather_ms\": %.4f, \"hidden_ms\": %.4f, \"batch\": %llu, "
          "\"distinct_misses\": %llu,\n       \"memcpy_rows_per_s\": %.4g, \"rate_rows\": %llu, "
          "\"array_rows\": %llu, \"threads\": %u, \"steady_latency_ms\": %.4f, "
          "\"ratio\": %.4f,\n       \"all_hit_ms_per_steady_batch\": [",
          fl->ms, fl->all_hit_ms, fl->gather_ms, fl->hidden_ms, (unsigned long long)fl->batch,
          (unsigned long long)fl->rows, fl->rows_per_s, (unsigned long long)fl->rate_rows,
          (unsigned long long)fl->array_rows, fl->threads, fl->steady_ms, fl->ratio);
  for (uint64_t i = 0; i < fl->steady; i++)
    fprintf(f, "%s%.4f", i ? ", " : "", fl->all_hit_ms_of[i]);
  fprintf(f, "]}");
}

static void print_run(FILE *f, const fl_workload *w, const fl_run *r) {
  const fl_cache_stats *s = &r->stats;
  fprintf(f, "\n== %s layout, %s backend ==\n", r->label,
          r->backend == FL_BACKEND_CUDA ? "CUDA" : "host");
  fprintf(f, "batches %llu, lookups %llu, time in queries %.3f s, %.2f M lookups/s\n",
          (unsigned long long)r->batches, (unsigned long long)r->lookups, r->query_s, mlps(r));
  fprintf(f, "latency per batch (ms): p50 %.3f  p99 %.3f  max %.3f\n", fl_run_percentile(r, 0.5),
          fl_run_percentile(r, 0.99), fl_run_percentile(r, 1));
  fprintf(f, "hit rate %.2f%% (cached %.2f%%, unified index %.2f%%, misses %.2f%%)\n",
          pct(s->hits + s->dram_hits, s->lookups), pct(s->hits, s->lookups),
          pct(s->dram_hits, s->lookups), pct(s->misses, s->lookups));
  if (s->prefetches)
    fprintf(f, "look-ahead: %llu batches named ahead (fl_prefetch), %llu lookups, %.2f%% of them "
            "not cached then: fetched and admitted ahead of their query; fl_prefetch took "
            "%.3f ms a batch on the calling thread (means: setup %.3f, index phase %.3f, "
            "fetch %.3f, the rest its admission's launch)\n",
            (unsigned long long)s->prefetches, (unsigned long long)s->prefetch_lookups,
            pct(s->prefetch_misses, s->prefetch_lookups), r->lookahead_ms[0], r->lookahead_ms[1],
            r->lookahead_ms[2], r->lookahead_ms[3]);
  double ns[4], total = 0;
  phases(s, ns);
  for (int i = 0; i < 4; i++) total += ns[i];
  fprintf(f, "phases (ms, share):");
  for (int i = 0; i < 4; i++) fprintf(f, "  %s %.2f (%.0f%%)", phase_name[i], ns[i] / 1e6, total > 0 ? 100 * ns[i] / total : 0);
  /* The miss path's own host work: CPU time outside the store's gathers. */
  fprintf(f, "\nmiss path: %llu unique rows fetched (%llu read in place by the GPU), store "
          "gather %.2f ms (%.1f ns a row), host CPU beyond the gather %.2f ms (%.1f ns a row), "
          "waiting for admission rounds %.2f ms, admission rounds shed %llu, starved %llu; evicted slabs recycled on the GPU %llu; "
          "admission opened by a moved hot set %llu",
          (unsigned long long)s->unique_misses, (unsigned long long)s->zero_copy_rows,
          s->ns_store_gather / 1e6,
          s->unique_misses ? s->ns_store_gather / (double)s->unique_misses : 0,
          s->ns_miss_host_cpu / 1e6,
          s->unique_misses ? s->ns_miss_host_cpu / (double)s->unique_misses : 0,
          s->ns_admission_wait / 1e6, (unsigned long long)s->rounds_shed,
          (unsigned long long)s->rounds_starved, (unsigned long long)s->slabs_recycled,
          (unsigned long long)s->shift_opens);
  fprintf(f, "\nsteady state (batches %llu on), medians per batch: latency %.3f ms, encode+index "
          "%.3f ms, miss fetch %.3f ms (store gather %.3f ms, %.0f unique rows), admission %.3f ms; "
          "host CPU beyond the gather %.1f ns a row",
          (unsigned long long)fl_run_steady_from(r), steady_median(r, S_COUNT), steady_median(r, S_INDEX),
          steady_median(r, S_FETCH), steady_median(r, S_GATHER), steady_median(r, S_ROWS),
          steady_median(r, S_ADMIT), steady_per_row(r, S_CPU) * 1e6);
  print_floor(f, &r->floor);
  fprintf(f, "\ncache: budget %.1f MB, pool %.1f/%.1f MB, index %llu/%llu entries (%llu unified, "
          "%.1f MB), %llu admissions, %llu evictions\n",
          (double)r->budget_bytes / 1e6, (double)s->pool_bytes_used / 1e6, (double)s->pool_bytes / 1e6,
          (unsigned long long)s->index_entries, (unsigned long long)s->index_slots,
          (unsigned long long)s->unified_entries, (double)s->index_bytes / 1e6,
          (unsigned long long)s->admissions,
          (unsigned long long)s->evictions);
  const fl_index_health *h = &r->health;
  fprintf(f, "index health: %llu live, %llu tombstones, %llu never used; a miss reads %.2f slots\n",
          (unsigned long long)h->live, (unsigned long long)h->tombstones,
          (unsigned long long)h->never_used, h->miss_probe);
  if (r->verified) fprintf(f, "verify: %llu rows checked, %llu mismatches\n",
                           (unsigned long long)r->verified, (unsigned long long)r->mismatches);
  const fl_trace_table *tb = fl_trace_tables(w->trace);
  fprintf(f, "%-8s %14s %9s\n", "table", "lookups", "hit rate");
  for (uint32_t t = 0; t < w->n_tables; t++)
    fprintf(f, "%-8s %14llu %8.2f%%\n", tb[t].name, (unsigned long long)r->tables[t].lookups,
            pct(r->tables[t].hits + r->tables[t].dram_hits, r->tables[t].lookups));
}

void fl_report_print(FILE *f, const fl_workload *w, const fl_run *runs, int n_runs) {
  fprintf(f, "trace %s: %u tables; model %s: %llu rows, %.1f MB\n", fl_trace_path(w->trace),
          w->n_tables, w->model_desc, (unsigned long long)w->model_rows, (double)w->model_bytes / 1e6);
  for (int i = 0; i < n_runs; i++) print_run(f, w, &runs[i]);
  if (n_runs == 2) {
    const fl_run *a = &runs[0], *b = &runs[1];
    fprintf(f, "\n== %s / %s ==\nthroughput %.2fx, p50 latency %.2fx, p99 latency %.2fx, "
            "hit rate %.2f%% vs %.2f%%\n",
            a->label, b->label, mlps(b) > 0 ? mlps(a) / mlps(b) : 0,
            fl_run_percentile(b, 0.5) > 0 ? fl_run_percentile(a, 0.5) / fl_run_percentile(b, 0.5) : 0,
            fl_run_percentile(b, 0.99) > 0 ? fl_run_percentile(a, 0.99) / fl_run_percentile(b, 0.99) : 0,
            pct(a->stats.hits + a->stats.dram_hits, a->stats.lookups),
            pct(b->stats.hits + b->stats.dram_hits, b->stats.lookups));
  }
}

fl_status fl_report_json(const char *path, const fl_workload *w, const fl_run *runs, int n_runs) {
  FILE *f = fopen(path, "w");
  if (!f) {
    fprintf(stderr, "error: %s: cannot create\n", path);
    return FL_ERR_IO;
  }
  const fl_trace_table *tb = fl_trace_tables(w->trace);
  fprintf(f, "{\n  \"trace\": \"%s\",\n  \"tables\": %u,\n  \"model_rows\": %llu,\n"
          "  \"model_bytes\": %llu,\n  \"runs\": [",
          fl_trace_path(w->trace), w->n_tables, (unsigned long long)w->model_rows,
          (unsigned long long)w->model_bytes);
  for (int i = 0; i < n_runs; i++) {
    const fl_run *r = &runs[i];
    const fl_cache_stats *s = &r->stats;
    double ns[4];
    phases(s, ns);
    fprintf(f, "%s\n    {\"layout\": \"%s\", \"backend\": \"%s\", \"budget_bytes\": %llu,\n"
            "     \"batches\": %llu, \"lookups\": %llu, \"query_seconds\": %.6f, "
            "\"lookups_per_second\": %.1f,\n"
            "     \"latency_ms\": {\"p50\": %.4f, \"p99\": %.4f, \"max\": %.4f},\n"
            "     \"hit_rate\": %.6f, \"hits\": %llu, \"dram_hits\": %llu, \"misses\": %llu,\n"
            "     \"admissions\": %llu, \"evictions\": %llu, \"index_entries\": %llu, "
            "\"index_slots\": %llu, \"unified_entries\": %llu,\n"
            "     \"phases_ns\": {\"encode_index\": %.0f, \"hit_copy\": %.0f, \"miss_fetch\": %.0f, "
            "\"admission\": %.0f, \"store_gather\": %.0f, \"admission_wait\": %.0f, "
            "\"miss_host_cpu\": %.0f},\n     \"unique_misses\": %llu, \"rounds_shed\": %llu, \"rounds_starved\": %llu, \"slabs_recycled\": %llu, \"shift_opens\": %llu,\n"
            "     \"prefetches\": %llu, \"prefetch_lookups\": %llu, \"prefetch_misses\": %llu, \"lookahead_ms\": %.4f,\n"
            "     \"verified\": %llu, \"mismatches\": %llu,\n",
            i ? "," : "", r->label, r->backend == FL_BACKEND_CUDA ? "cuda" : "host",
            (unsigned long long)r->budget_bytes, (unsigned long long)r->batches,
            (unsigned long long)r->lookups, r->query_s, r->query_s > 0 ? (double)r->lookups / r->query_s : 0,
            fl_run_percentile(r, 0.5), fl_run_percentile(r, 0.99), fl_run_percentile(r, 1),
            s->lookups ? (double)(s->hits + s->dram_hits) / (double)s->lookups : 0,
            (unsigned long long)s->hits, (unsigned long long)s->dram_hits,
            (unsigned long long)s->misses, (unsigned long long)s->admissions,
            (unsigned long long)s->evictions, (unsigned long long)s->index_entries,
            (unsigned long long)s->index_slots, (unsigned long long)s->unified_entries, ns[0],
            ns[1], ns[2], ns[3], s->ns_store_gather, s->ns_admission_wait, s->ns_miss_host_cpu,
            (unsigned long long)s->unique_misses, (unsigned long long)s->rounds_shed,
            (unsigned long long)s->rounds_starved, (unsigned long long)s->slabs_recycled,
            (unsigned long long)s->shift_opens, (unsigned long long)s->prefetches,
            (unsigned long long)s->prefetch_lookups, (unsigned long long)s->prefetch_misses,
            r->lookahead_ms[0], (unsigned long long)r->verified, (unsigned long long)r->mismatches);
    fprintf(f, "     \"index_health\": {\"live\": %llu, \"tombstones\": %llu, \"never_used\": %llu, "
            "\"miss_probe\": %.3f},\n",
            (unsigned long long)r->health.live, (unsigned long long)r->health.tombstones,
            (unsigned long long)r->health.never_used, r->health.miss_probe);
    fprintf(f, "     \"floor\": ");
    json_floor(f, &r->floor);
    const fl_store_tier_stats *tr = &r->tiers;
    fprintf(f, ",\n     \"tiers\": {\"store_lookups\": %llu, \"local_hits\": %llu, \"cluster_rows\": %llu, "
            "\"cluster_missing\": %llu, \"cluster_fetches\": %llu, \"cluster_commands\": %llu, "
            "\"ns_local\": %.0f, \"ns_cluster\": %.0f, \"local_bytes\": %llu, "
            "\"local_budget_bytes\": %llu, \"evictions\": %llu, \"invalidations\": %llu, "
            "\"resyncs\": %llu},\n     \"per_table\": [",
            (unsigned long long)tr->lookups, (unsigned long long)tr->local_hits,
            (unsigned long long)tr->cluster_rows, (unsigned long long)tr->cluster_missing,
            (unsigned long long)tr->cluster_fetches, (unsigned long long)tr->cluster_commands,
            tr->ns_local, tr->ns_cluster, (unsigned long long)tr->local_bytes,
            (unsigned long long)tr->local_budget_bytes, (unsigned long long)tr->evictions,
            (unsigned long long)tr->invalidations, (unsigned long long)tr->resyncs);
    for (uint32_t t = 0; t < w->n_tables; t++) {
      const fl_cache_table_stats *ts = &r->tables[t];
      fprintf(f, "%s\n       {\"table\": \"%s\", \"lookups\": %llu, \"hits\": %llu, "
              "\"dram_hits\": %llu, \"misses\": %llu}",
              t ? "," : "", tb[t].name, (unsigned long long)ts->lookups,
              (unsigned long long)ts->hits, (unsigned long long)ts->dram_hits,
              (unsigned long long)ts->misses);
    }
    fprintf(f, "],\n     \"per_batch\": {\"latency_ms\": [");
    for (uint64_t k = 0; k < r->batches; k++) fprintf(f, "%s%.4f", k ? ", " : "", r->lat_ms[k]);
    fprintf(f, "], \"hit_rate\": [");
    for (uint64_t k = 0; k < r->batches; k++) fprintf(f, "%s%.5f", k ? ", " : "", r->hit_rate[k]);
    for (int k = 0; k < S_COUNT; k++) {
      fprintf(f, "],\n       \"%s\": [", series_name[k]);
      for (uint64_t b = 0; b < r->batches; b++)
        fprintf(f, "%s%.*f", b ? ", " : "", k == S_ROWS ? 0 : 4, batch_value(r, b, k));
    }
    fprintf(f, "]}}");
  }
  fprintf(f, "\n  ]");
  if (n_runs == 2 && runs[1].query_s > 0 && runs[0].query_s > 0)
    fprintf(f, ",\n  \"ratio_throughput\": %.4f",
            ((double)runs[0].lookups / runs[0].query_s) / ((double)runs[1].lookups / runs[1].query_s));
  fprintf(f, "\n}\n");
  if (fclose(f) != 0) {
    fprintf(stderr, "error: %s: write failed\n", path);
    return FL_ERR_IO;
  }
  return FL_OK;
}

fl_status fl_report_plot(const char *path, const fl_run *runs, int n_runs) {
  fl_plot_series hit[2], lat[2];
  double *x[2] = {NULL, NULL};
  fl_status s = FL_OK;
  for (int i = 0; i < n_runs && i < 2; i++) {
    x[i] = malloc((runs[i].batches ? runs[i].batches : 1) * sizeof *x[i]);
    if (!x[i]) s = FL_ERR_OUT_OF_MEMORY;
    for (uint64_t k = 0; x[i] && k < runs[i].batches; k++) x[i][k] = (double)k;
    hit[i] = (fl_plot_series){runs[i].label, x[i], runs[i].hit_rate, runs[i].batches};
    lat[i] = (fl_plot_series){runs[i].label, x[i], runs[i].lat_ms, runs[i].batches};
  }
  fl_plot_panel p[2] = {{"Hit rate per batch", "batch", "hit rate", hit, (size_t)n_runs},
                        {"Latency per batch", "batch", "ms", lat, (size_t)n_runs}};
  if (s == FL_OK) s = fl_plot_svg(path, "replay", p, 2);
  free(x[0]);
  free(x[1]);
  return s;
}
