/* sim_report.c: the policy simulator's table on stdout and the same numbers
 * as JSON: per policy its hit rate and its gap, in percentage points, to OPT
 * and to the best batched policy (the best row that is neither OPT nor the
 * library); when the hot set moves, each row's recovery (sim_recovery.c) and
 * whether the library recovers within batched LRU's batches. The JSON also
 * has every row's per-batch hit rates. */
#include <string.h>

#include "tools/policy_sim.h"

static double pct(uint64_t a, uint64_t b) { return b ? 100.0 * (double)a / (double)b : 0; }
static double rate(const fl_sim_result *r) { return pct(r->hits, r->lookups); }

static const fl_sim_result *row(const fl_sim_report *r, const char *name) {
  for (int i = 0; i < r->n_rows; i++)
    if (!strcmp(r->rows[i].name, name)) return &r->rows[i];
  return NULL;
}

const fl_sim_result *fl_sim_report_opt(const fl_sim_report *r) { return row(r, "opt"); }

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

/* Row x's recovery into *out: 0 when the hot set does not move within its
 * batches (or x is NULL). */
static int recovery(const fl_sim_report *r, const fl_sim_result *x, fl_sim_recovery *out) {
  if (!x || !r->recovery_from || r->recovery_from >= x->batches) return 0;
  *out = fl_sim_recovery_of(x->batch_pct, x->batches, r->recovery_from, FL_SIM_RECOVERY_PTS);
  return 1;
}

/* Whether the fleche row recovers within as many batches as batched LRU's
 * (issue 31), with both figures; -1 when either row or the switch is missing. */
static int fleche_within_lru(const fl_sim_report *r, fl_sim_recovery *fleche, fl_sim_recovery *lru) {
  if (!recovery(r, row(r, "fleche"), fleche) || !recovery(r, row(r, "lru"), lru)) return -1;
  return fleche->batches <= lru->batches;
}

void fl_sim_report_print(FILE *f, const fl_sim_report *r) {
  const fl_sim_trace *t = r->t;
  const fl_sim_result *opt = fl_sim_report_opt(r), *best = fl_sim_report_best(r);
  fprintf(f, "trace: %s, %llu batches (--batch %u), %llu lookups, %llu keys\n", r->trace,
          (unsigned long long)t->n_batches, r->batch, (unsigned long long)t->lookups,
          (unsigned long long)t->n_keys);
  fprintf(f, "in-batch repeats: %.2f%% of lookups (misses where the key was not resident at the "
          "batch's start); a cache that never evicts: %.2f%%\n", repeats(t), unbounded(t));
  fprintf(f, "vectors: %llu (%s)\n", (unsigned long long)r->vectors, r->sized_by);
  int moves = r->recovery_from && r->recovery_from < t->n_batches;
  if (moves) {
    uint64_t after = t->n_batches - r->recovery_from;
    fprintf(f, "recovery: batches from batch %llu, where the hot set moves, until a row's hit rate "
            "first comes within %.1f points of its mean over batches %llu..%llu\n",
            (unsigned long long)r->recovery_from, FL_SIM_RECOVERY_PTS,
            (unsigned long long)(t->n_batches - (after + 3) / 4), (unsigned long long)(t->n_batches - 1));
  }
  fprintf(f, "\n%-9s %9s %8s %8s%s %12s %12s %8s\n", "policy", "hit rate", "vs opt", "vs best",
          moves ? " recovery" : "", "admissions", "evictions", "seconds");
  for (int i = 0; i < r->n_rows; i++) {
    const fl_sim_result *x = &r->rows[i];
    char vo[16] = "-", vb[16] = "-", rec[16] = "";
    fl_sim_recovery rx;
    if (opt) snprintf(vo, sizeof vo, "%+.2f", rate(x) - rate(opt));
    if (best) snprintf(vb, sizeof vb, "%+.2f", rate(x) - rate(best));
    if (moves) snprintf(rec, sizeof rec, " %8s", "-");
    if (moves && recovery(r, x, &rx)) snprintf(rec, sizeof rec, " %8llu", (unsigned long long)rx.batches);
    fprintf(f, "%-9s %8.2f%% %8s %8s%s %12llu %12llu %8.2f\n", x->name, rate(x), vo, vb, rec,
            (unsigned long long)x->admissions, (unsigned long long)x->evictions, x->seconds);
  }
  if (best) fprintf(f, "best batched policy: %s\n", best->name);
  fl_sim_recovery fr, lr;
  int within = fleche_within_lru(r, &fr, &lr);
  if (within >= 0)
    fprintf(f, "fleche recovers in %llu batches, batched LRU in %llu: %s\n",
            (unsigned long long)fr.batches, (unsigned long long)lr.batches,
            within ? "within LRU's" : "slower than LRU");
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

/* Row x's recovery fields and its per-batch hit rates. */
static void json_batches(FILE *f, const fl_sim_report *r, const fl_sim_result *x) {
  fl_sim_recovery rx;
  if (recovery(r, x, &rx))
    fprintf(f, ",\n     \"recovery_batches\": %llu, \"steady_after_switch_pct\": %.4f",
            (unsigned long long)rx.batches, rx.steady_pct);
  else fputs(",\n     \"recovery_batches\": null, \"steady_after_switch_pct\": null", f);
  fputs(",\n     \"batch_hit_rate_pct\": [", f);
  for (uint64_t b = 0; b < x->batches; b++) fprintf(f, "%s%.4f", b ? ", " : "", x->batch_pct[b]);
  fputc(']', f);
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
  fl_sim_recovery fr, lr;
  int within = fleche_within_lru(r, &fr, &lr);
  if (r->recovery_from) fprintf(f, ",\n  \"recovery_from\": %llu", (unsigned long long)r->recovery_from);
  else fputs(",\n  \"recovery_from\": null", f);
  fprintf(f, ",\n  \"recovery_tolerance_pts\": %.2f,\n  \"fleche_recovers_within_lru\": %s",
          FL_SIM_RECOVERY_PTS, within < 0 ? "null" : within ? "true" : "false");
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
    fprintf(f, ", \"admissions\": %llu, \"evictions\": %llu, \"seconds\": %.3f",
            (unsigned long long)x->admissions, (unsigned long long)x->evictions, x->seconds);
    json_batches(f, r, x);
    fputc('}', f);
  }
  fputs("\n  ]\n}\n", f);
  if (fclose(f) != 0) {
    fprintf(stderr, "error: %s: write failed\n", path);
    return FL_ERR_IO;
  }
  return FL_OK;
}
