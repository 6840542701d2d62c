/* sim_report.c: the policy simulator's table on stdout and the same numbers
 * as JSON: per policy its hit rate and its gap, in percentage points, to OPT
 * and to the best batched policy (the best row that is neither OPT nor the
 * library). */
#include <string.h>

#include "tools/policy_sim.h"

static double pct(uint64_t a, uint64_t b) { return b ? 100.0 * (double)a / (double)b : 0; }
static double rate(const fl_sim_result *r) { return pct(r->hits, r->lookups); }

const fl_sim_result *fl_sim_report_opt(const fl_sim_report *r) {
  for (int i = 0; i < r->n_rows; i++)
    if (!strcmp(r->rows[i].name, "opt")) return &r->rows[i];
  return NULL;
}

const fl_sim_result *fl_sim_report_best(const fl_sim_report *r) {
  const fl_sim_result *best = NULL;
  for (int i = 0; i < r->n_rows; i++) {
    const fl_sim_result *x = &r->rows[i];
    if (strcmp(x->name, "opt") && strcmp(x->name, "fleche") && (!best || rate(x) > rate(best)))
      best = x;
  }
  return best;
}

/* The trace's share of in-batch repeats and the hit rate of a cache that
 * never evicts, in %. */
static double repeats(const fl_sim_trace *t) { return pct(t->lookups - t->n_entries, t->lookups); }
static double unbounded(const fl_sim_trace *t) { return pct(t->lookups - t->first_use, t->lookups); }

void fl_sim_report_print(FILE *f, const fl_sim_report *r) {
  const fl_sim_trace *t = r->t;
  const fl_sim_result *opt = fl_sim_report_opt(r), *best = fl_sim_report_best(r);
  fprintf(f, "trace: %s, %llu batches (--batch %u), %llu lookups, %llu keys\n", r->trace,
          (unsigned long long)t->n_batches, r->batch, (unsigned long long)t->lookups,
          (unsigned long long)t->n_keys);
  fprintf(f, "in-batch repeats: %.2f%% of lookups (misses where the key was not resident at the "
          "batch's start); a cache that never evicts: %.2f%%\n", repeats(t), unbounded(t));
  fprintf(f, "vectors: %llu (%s)\n\n", (unsigned long long)r->vectors, r->sized_by);
  fprintf(f, "%-9s %9s %8s %8s %12s %12s %8s\n", "policy", "hit rate", "vs opt", "vs best",
          "admissions", "evictions", "seconds");
  for (int i = 0; i < r->n_rows; i++) {
    const fl_sim_result *x = &r->rows[i];
    char vo[16] = "-", vb[16] = "-";
    if (opt) snprintf(vo, sizeof vo, "%+.2f", rate(x) - rate(opt));
    if (best) snprintf(vb, sizeof vb, "%+.2f", rate(x) - rate(best));
    fprintf(f, "%-9s %8.2f%% %8s %8s %12llu %12llu %8.2f\n", x->name, rate(x), vo, vb,
            (unsigned long long)x->admissions, (unsigned long long)x->evictions, x->seconds);
  }
  if (best) fprintf(f, "best batched policy: %s\n", best->name);
  for (int i = 0; i < r->n_rows; i++)
    if (r->rows[i].budget_bytes)
      fprintf(f, "%s: a cache of %llu bytes whose pool holds %llu vectors\n", r->rows[i].name,
              (unsigned long long)r->rows[i].budget_bytes, (unsigned long long)r->rows[i].capacity);
}

/* s as a JSON string. */
static void json_string(FILE *f, const char *s) {
  fputc('"', f);
  for (; *s; s++) {
    if (*s == '"' || *s == '\\') fprintf(f, "\\%c", *s);
    else if ((unsigned char)*s < 0x20) fprintf(f, "\\u%04x", *s);
    else fputc(*s, f);
  }
  fputc('"', f);
}

static void json_gap(FILE *f, const char *name, const fl_sim_result *x, const fl_sim_result *ref) {
  if (ref) fprintf(f, ", \"%s\": %.4f", name, rate(x) - rate(ref));
  else fprintf(f, ", \"%s\": null", name);
}

fl_status fl_sim_report_json(const char *path, const fl_sim_report *r) {
  FILE *f = fopen(path, "w");
  if (!f) {
    fprintf(stderr, "error: %s: cannot create\n", path);
    return FL_ERR_IO;
  }
  const fl_sim_trace *t = r->t;
  const fl_sim_result *opt = fl_sim_report_opt(r), *best = fl_sim_report_best(r);
  fputs("{\n  \"trace\": ", f);
  json_string(f, r->trace);
  fprintf(f, ",\n  \"batch\": %u,\n  \"batches\": %llu,\n  \"lookups\": %llu,\n  \"keys\": %llu,\n"
          "  \"vectors\": %llu,\n  \"sized_by\": ", r->batch, (unsigned long long)t->n_batches,
          (unsigned long long)t->lookups, (unsigned long long)t->n_keys,
          (unsigned long long)r->vectors);
  json_string(f, r->sized_by);
  fprintf(f, ",\n  \"in_batch_repeats_pct\": %.4f,\n  \"never_evicting_hit_rate_pct\": %.4f,\n"
          "  \"best_batched\": ", repeats(t), unbounded(t));
  if (best) json_string(f, best->name);
  else fputs("null", f);
  fputs(",\n  \"policies\": [", f);
  for (int i = 0; i < r->n_rows; i++) {
    const fl_sim_result *x = &r->rows[i];
    fprintf(f, "%s\n    {\"name\": ", i ? "," : "");
    json_string(f, x->name);
    fprintf(f, ", \"capacity\": %llu, \"budget_bytes\": %llu, \"lookups\": %llu, \"hits\": %llu, "
            "\"hit_rate_pct\": %.4f",
            (unsigned long long)x->capacity, (unsigned long long)x->budget_bytes,
            (unsigned long long)x->lookups,
            (unsigned long long)x->hits, rate(x));
    json_gap(f, "vs_opt_pts", x, opt);
    json_gap(f, "vs_best_pts", x, best);
    fprintf(f, ", \"admissions\": %llu, \"evictions\": %llu, \"seconds\": %.3f}",
            (unsigned long long)x->admissions, (unsigned long long)x->evictions, x->seconds);
  }
  fputs("\n  ]\n}\n", f);
  if (fclose(f) != 0) {
    fprintf(stderr, "error: %s: write failed\n", path);
    return FL_ERR_IO;
  }
  return FL_OK;
}
