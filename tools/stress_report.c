/* stress_report.c: the stress run's report: the summary line and the table
 * on stdout, and the same numbers as JSON (--json). */
#include <stdio.h>

#include "tools/stress.h"

uint64_t checked(const tally *t) {
  uint64_t n = 0;
  for (int v = 0; v < N_VERDICTS; v++) n += t->n[v];
  return n;
}

uint64_t violations(const tally *t) {
  uint64_t n = 0;
  for (int v = FIRST_VIOLATION; v < N_VERDICTS; v++) n += t->n[v];
  return n;
}

void print_report(const stress *s, const totals *x) {
  printf("stress: backend %s, %s layout, %.1f s, %llu queries, %llu rows checked, %llu violations\n",
         s->cuda ? "cuda" : "host", s->o.layout == FL_LAYOUT_FLAT ? "flat" : "per-table", x->seconds, (unsigned long long)x->queries,
         (unsigned long long)x->rows, (unsigned long long)x->violations);
  printf("%-6s %-12s %14s %10s %9s %6s %6s %7s %9s\n", "table", "kind", "rows checked",
         "zero rows", "unwritten", "torn", "stale", "future", "bad zero");
  for (uint32_t t = 0; t < s->n_tables; t++) {
    const tally *y = &x->per_table[t];
    printf("%-6s %-12s %14llu %10llu %9llu %6llu %6llu %7llu %9llu\n", s->tables[t].name,
           s->tables[t].shape->kind, (unsigned long long)checked(y),
           (unsigned long long)y->n[ZERO_OK], (unsigned long long)y->n[UNWRITTEN],
           (unsigned long long)y->n[TORN], (unsigned long long)y->n[STALE],
           (unsigned long long)y->n[FUTURE], (unsigned long long)y->n[ZERO_BAD]);
  }
  printf("queries by %s %llu, by %s %llu, by %s %llu\n", ask_key[ASK_QUERY],
         (unsigned long long)x->asked[ASK_QUERY], ask_key[ASK_PREPARED_RUN],
         (unsigned long long)x->asked[ASK_PREPARED_RUN], ask_key[ASK_PREPARED_LAUNCH],
         (unsigned long long)x->asked[ASK_PREPARED_LAUNCH]);
  printf("failed calls %llu; final pass, %u ways of asking: %llu rows, %llu violations\n",
         (unsigned long long)x->failed_calls, x->final_ways, (unsigned long long)x->final_rows,
         (unsigned long long)x->final_violations);
  printf("readers %u, writers %u: %llu rows upserted, %llu removed, %llu re-added; %llu clears, "
         "%llu unified-index changes, %llu syncs\n",
         s->o.readers, s->o.writers, (unsigned long long)x->writes.upserts,
         (unsigned long long)x->writes.removes, (unsigned long long)x->writes.readds,
         (unsigned long long)x->writes.clears, (unsigned long long)x->writes.unified_changes,
         (unsigned long long)x->writes.syncs);
  const fl_cache_stats *c = &x->cache;
  printf("cache: %llu lookups, %llu hits, %llu unified-index hits, %llu misses, %llu admissions, "
         "%llu evictions, %llu invalidations\n",
         (unsigned long long)c->lookups, (unsigned long long)c->hits,
         (unsigned long long)c->dram_hits, (unsigned long long)c->misses,
         (unsigned long long)c->admissions, (unsigned long long)c->evictions,
         (unsigned long long)c->invalidations);
}

int write_json(const stress *s, const totals *x, const char *path) {
  FILE *f = fopen(path, "w");
  if (!f) {
    fprintf(stderr, "error: %s: cannot create\n", path);
    return 0;
  }
  const fl_cache_stats *c = &x->cache;
  fprintf(f, "{\n  \"backend\": \"%s\",\n  \"layout\": \"%s\",\n  \"seconds\": %.3f,\n  \"readers\": %u,\n"
          "  \"writers\": %u,\n  \"queries\": %llu,\n  \"rows_checked\": %llu,\n"
          "  \"violations\": %llu,\n  \"failed_calls\": %llu,\n  \"final_rows\": %llu,\n"
          "  \"final_violations\": %llu,\n  \"final_ways\": %u,\n",
          s->cuda ? "cuda" : "host", s->o.layout == FL_LAYOUT_FLAT ? "flat" : "per-table",
          x->seconds, s->o.readers, s->o.writers,
          (unsigned long long)x->queries, (unsigned long long)x->rows,
          (unsigned long long)x->violations, (unsigned long long)x->failed_calls,
          (unsigned long long)x->final_rows, (unsigned long long)x->final_violations,
          x->final_ways);
  fprintf(f, "  \"asked\": {");
  for (int a = 0; a < N_ASKS; a++)
    fprintf(f, "%s\"%s\": %llu", a ? ", " : "", ask_key[a], (unsigned long long)x->asked[a]);
  fprintf(f, "},\n  \"tables\": [");
  for (uint32_t t = 0; t < s->n_tables; t++) {
    fprintf(f, "%s\n    {\"table\": \"%s\", \"kind\": \"%s\", \"rows_checked\": %llu", t ? "," : "",
            s->tables[t].name, s->tables[t].shape->kind,
            (unsigned long long)checked(&x->per_table[t]));
    for (int v = ZERO_OK; v < N_VERDICTS; v++)
      fprintf(f, ", \"%s\": %llu", verdict_key[v], (unsigned long long)x->per_table[t].n[v]);
    fprintf(f, "}");
  }
  fprintf(f, "\n  ],\n  \"writes\": {\"upserted\": %llu, \"removed\": %llu, \"readded\": %llu, "
          "\"clears\": %llu, \"unified_changes\": %llu, \"syncs\": %llu},\n"
          "  \"cache\": {\"lookups\": %llu, \"hits\": %llu, \"dram_hits\": %llu, \"misses\": %llu, "
          "\"admissions\": %llu, \"evictions\": %llu, \"invalidations\": %llu}\n}\n",
          (unsigned long long)x->writes.upserts, (unsigned long long)x->writes.removes,
          (unsigned long long)x->writes.readds, (unsigned long long)x->writes.clears,
          (unsigned long long)x->writes.unified_changes, (unsigned long long)x->writes.syncs,
          (unsigned long long)c->lookups, (unsigned long long)c->hits,
          (unsigned long long)c->dram_hits, (unsigned long long)c->misses,
          (unsigned long long)c->admissions, (unsigned long long)c->evictions,
          (unsigned long long)c->invalidations);
  if (fclose(f) != 0) {
    fprintf(stderr, "error: %s: write failed\n", path);
    return 0;
  }
  return 1;
}
