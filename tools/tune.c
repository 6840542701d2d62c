/* tune.c: the unified-index tuner's command line: replay's workload, model and
 * cache options plus the search's own (tune_search.c), then the summary, JSON
 * and plot (tune_report.c).
 * Exit codes: 0 success, 1 runtime failure, 2 usage error. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "tools/tune.h"

static void usage(FILE *f) {
  fputs("usage: tune [options] [TRACE]\n"
        "Sizes the unified index (cache entries pointing into the DRAM store) while\n"
        "replaying TRACE (or the embedded Zipf workload): after a warm-up window it\n"
        "grows the index by --step entries per window while throughput rises, holds\n"
        "the best size, and searches again from 0 when throughput falls by --drop.\n"
        "Prints one line per window: batches so far, phase, unified entries set and\n"
        "live, DRAM hit rate, hit rate, M lookups/s (fl_query wall time).\n\n"
        "Tuning:\n"
        "  --step N            unified entries added per step [2% of the index slots]\n"
        "  --window B          batches per measurement [8]\n"
        "  --drop F            hold throughput drop fraction that re-searches [0.15]\n"
        "  --patience N        slow windows in a row that re-search (one slow window is\n"
        "                      often an eviction burst, not a workload change) [2]\n"
        "  --rounds N          passes over the trace [1]\n",
        f);
  fl_replay_print_options(f);
  fputs("  (tune: --json and --plot write the windows and the size/throughput curves;\n"
        "  --unified and --compare do not apply)\n"
        "  -h, --help          this text\n", f);
}

/* A positive integer (max bounds it) or a fraction in (0, 1) for --drop. */
static int number(const char *opt, const char *v, uint64_t max, uint64_t *out) {
  char *end;
  errno = 0;
  unsigned long long x = strtoull(v, &end, 0);
  if (*v == '-' || errno || *end || x == 0 || x > max) {
    fprintf(stderr, "error: %s '%s': expected an integer in 1..%llu\n", opt, v,
            (unsigned long long)max);
    return -1;
  }
  *out = x;
  return 1;
}

/* Parses a tuning option at argv[*i]: 1 consumed, 0 not one, -1 bad value. */
static int tune_option(void *ctx, int argc, char **argv, int *i) {
  fl_tune_opts *t = ctx;
  const char *a = argv[*i];
  if (strcmp(a, "--step") && strcmp(a, "--window") && strcmp(a, "--drop") && strcmp(a, "--rounds") &&
      strcmp(a, "--patience"))
    return 0;
  if (*i + 1 >= argc) {
    fprintf(stderr, "error: %s needs a value\n", a);
    return -1;
  }
  const char *v = argv[++*i];
  uint64_t x;
  if (!strcmp(a, "--step")) return number(a, v, UINT64_MAX, &t->step);
  if (!strcmp(a, "--window")) {
    int r = number(a, v, UINT32_MAX, &x);
    t->window = (uint32_t)x;
    return r;
  }
  if (!strcmp(a, "--rounds")) {
    int r = number(a, v, UINT32_MAX, &x);
    t->rounds = (uint32_t)x;
    return r;
  }
  if (!strcmp(a, "--patience")) {
    int r = number(a, v, UINT32_MAX, &x);
    t->patience = (uint32_t)x;
    return r;
  }
  char *end;
  t->drop = strtod(v, &end);
  if (*end || !(t->drop > 0 && t->drop < 1)) {
    fprintf(stderr, "error: --drop '%s': expected a fraction in (0, 1)\n", v);
    return -1;
  }
  return 1;
}

static int parse(int argc, char **argv, fl_replay_opts *o, fl_tune_opts *t) {
  if (fl_replay_parse_args(o, argc, argv, tune_option, t, usage) < 0) return -1;
  /* The tuner owns the unified size and tunes one cache. */
  if (o->unified || o->compare) {
    fprintf(stderr, "error: %s does not apply to tune (see --help)\n",
            o->unified ? "--unified" : "--compare");
    return -1;
  }
  return 0;
}

int main(int argc, char **argv) {
  fl_replay_opts o;
  fl_tune_opts t;
  fl_replay_opts_default(&o);
  fl_tune_opts_default(&t);
  if (parse(argc, argv, &o, &t) < 0) return 2;
  fl_workload w;
  if (fl_workload_open(&o, &w) != FL_OK) {
    fl_workload_close(&w);
    return 1;
  }
  fl_tune_result r;
  fl_store_tier_stats_reset(w.store);
  fl_status s = fl_tune_run(&w, &o, &t, stdout, &r);
  if (s == FL_OK) {
    fl_tune_print(stdout, &r);
    fl_store_tier_stats tiers;
    if (fl_store_tier_stats_get(w.store, &tiers) == FL_OK) fl_tiers_print(stdout, NULL, &tiers);
    if (o.json) s = fl_tune_json(o.json, &w, &t, &r);
    if (s == FL_OK && o.plot) s = fl_tune_plot(o.plot, &r);
    if (r.mismatches)
      fprintf(stderr, "error: %llu answers differ from the store\n", (unsigned long long)r.mismatches);
  }
  int rc = s == FL_OK && r.mismatches == 0 ? 0 : 1;
  fl_tune_result_free(&r);
  fl_workload_close(&w);
  return rc;
}
