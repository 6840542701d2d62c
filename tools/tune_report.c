/* tune_report.c: the tuner's outputs: the summary on stdout (chosen sizes,
 * re-searches), the JSON file and the SVG plot of the size/throughput curves. */
#include <stdlib.h>

#include "tools/tune.h"

void fl_tune_print(FILE *f, const fl_tune_result *r) {
  fprintf(f, "\nbatches %llu, lookups %llu, windows %zu, re-searches %zu\n",
          (unsigned long long)r->batches, (unsigned long long)r->lookups, r->n_steps,
          r->n_searches ? r->n_searches - 1 : 0);
  for (size_t i = 0; i < r->n_searches; i++) {
    const fl_tune_search *se = &r->searches[i];
    if (se->windows == 0) {
      fprintf(f, "search %zu from batch %llu: the trace ended during its warm-up\n", i + 1,
              (unsigned long long)se->start_batch);
      continue;
    }
    fprintf(f, "search %zu from batch %llu: %s %llu unified entries, %.3f M lookups/s\n", i + 1,
            (unsigned long long)se->start_batch, se->done ? "chosen size" : "unfinished, best so far",
            (unsigned long long)se->chosen, se->throughput / 1e6);
  }
  if (r->verified)
    fprintf(f, "verify: %llu rows checked, %llu mismatches\n", (unsigned long long)r->verified,
            (unsigned long long)r->mismatches);
}

fl_status fl_tune_json(const char *path, const fl_workload *w, const fl_tune_opts *t,
                       const fl_tune_result *r) {
  FILE *f = fopen(path, "w");
  if (!f) {
    fprintf(stderr, "error: %s: cannot create\n", path);
    return FL_ERR_IO;
  }
  fprintf(f, "{\n  \"backend\": \"%s\",\n  \"model_bytes\": %llu,\n  \"budget_bytes\": %llu,\n"
          "  \"index_slots\": %llu,\n  \"step\": %llu,\n  \"window\": %u,\n  \"drop\": %g,\n"
          "  \"rounds\": %u,\n  \"batches\": %llu,\n  \"lookups\": %llu,\n"
          "  \"verified\": %llu,\n  \"mismatches\": %llu,\n  \"re_searches\": %zu,\n",
          r->backend == FL_BACKEND_CUDA ? "cuda" : "host", (unsigned long long)w->model_bytes,
          (unsigned long long)r->budget_bytes, (unsigned long long)r->index_slots,
          (unsigned long long)r->step, t->window, t->drop, t->rounds,
          (unsigned long long)r->batches, (unsigned long long)r->lookups,
          (unsigned long long)r->verified, (unsigned long long)r->mismatches,
          r->n_searches ? r->n_searches - 1 : 0);
  /* Per search, its curve: [unified entries, lookups/s] of its search windows. */
  fputs("  \"searches\": [", f);
  for (size_t i = 0; i < r->n_searches; i++) {
    const fl_tune_search *se = &r->searches[i];
    fprintf(f, "%s\n    {\"search\": %zu, \"start_batch\": %llu, \"chosen\": %llu, \"throughput\": %.6g, "
            "\"windows\": %u, \"done\": %s, \"curve\": [", i ? "," : "", i + 1,
            (unsigned long long)se->start_batch,
            (unsigned long long)se->chosen, se->throughput, se->windows,
            se->done ? "true" : "false");
    int first = 1;
    for (size_t k = 0; k < r->n_steps; k++) {
      const fl_tune_step *p = &r->steps[k];
      if (p->search != i || p->phase != FL_TUNE_SEARCH) continue;
      fprintf(f, "%s[%llu, %.6g]", first ? "" : ", ", (unsigned long long)p->set, p->throughput);
      first = 0;
    }
    fputs("]}", f);
  }
  fputs(r->n_searches ? "\n  ],\n  \"steps\": [" : "],\n  \"steps\": [", f);
  for (size_t k = 0; k < r->n_steps; k++) {
    const fl_tune_step *p = &r->steps[k];
    fprintf(f, "%s\n    {\"batch\": %llu, \"phase\": \"%s\", \"search\": %u, \"unified_set\": %llu, "
            "\"unified_live\": %llu, \"dram_hit_rate\": %.6f, \"hit_rate\": %.6f, "
            "\"lookups_per_s\": %.6g}", k ? "," : "", (unsigned long long)p->batch,
            p->phase == FL_TUNE_HOLD ? "hold" : "search", p->search + 1,
            (unsigned long long)p->set, (unsigned long long)p->live, p->dram_hit_rate,
            p->hit_rate, p->throughput);
  }
  fputs(r->n_steps ? "\n  ]\n}\n" : "]\n}\n", f);
  if (fclose(f) != 0) {
    fprintf(stderr, "error: %s: write failed\n", path);
    return FL_ERR_IO;
  }
  return FL_OK;
}

fl_status fl_tune_plot(const char *path, const fl_tune_result *r) {
  /* Panel 1: one curve per search, over its search windows (slices of one
   * array, since steps are in search order); panels 2 and 3: every window. */
  size_t n = r->n_steps;
  double *buf = malloc((5 * n + 1) * sizeof *buf);
  fl_plot_series *curves = calloc(r->n_searches + 1, sizeof *curves);
  char (*labels)[32] = calloc(r->n_searches + 1, sizeof *labels);
  if (!buf || !curves || !labels) {
    free(buf), free(curves), free(labels);
    return FL_ERR_OUT_OF_MEMORY;
  }
  double *size = buf, *tput = buf + n, *batch = buf + 2 * n, *set = buf + 3 * n,
         *all = buf + 4 * n;
  size_t m = 0;
  for (size_t i = 0; i < r->n_searches; i++) {
    snprintf(labels[i], sizeof labels[i], "search %zu", i + 1);
    curves[i] = (fl_plot_series){labels[i], size + m, tput + m, 0};
    for (size_t k = 0; k < n; k++) {
      const fl_tune_step *p = &r->steps[k];
      if (p->search != i || p->phase != FL_TUNE_SEARCH) continue;
      size[m] = (double)p->set;
      tput[m++] = p->throughput / 1e6;
      curves[i].n++;
    }
  }
  for (size_t k = 0; k < n; k++) {
    batch[k] = (double)r->steps[k].batch;
    set[k] = (double)r->steps[k].set;
    all[k] = r->steps[k].throughput / 1e6;
  }
  fl_plot_series over_run = {"all windows", batch, all, n};
  fl_plot_series sizes = {"unified set", batch, set, n};
  fl_plot_panel panels[3] = {
      {"Throughput vs unified-index size (search windows)", "unified entries", "M lookups/s",
       curves, r->n_searches},
      {"Throughput over the run", "batch", "M lookups/s", &over_run, 1},
      {"Unified-index size over the run", "batch", "entries", &sizes, 1}};
  fl_status s = fl_plot_svg(path, "tune: unified-index sizing", panels, 3);
  free(buf), free(curves), free(labels);
  return s;
}
