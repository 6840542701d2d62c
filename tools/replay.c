/* replay.c: the trace-replay benchmark's command line: replays a trace (or the
 * embedded Criteo-shaped Zipf workload) through the cache and reports; the
 * convert and gen subcommands write .fltr traces.
 * Exit codes: 0 success, 1 runtime failure, 2 usage error. */
#include <stdlib.h>
#include <string.h>

#include "tools/replay.h"

static void usage(FILE *f) {
  fputs("usage: replay [options] [TRACE]\n"
        "       replay convert IN OUT.fltr [--format F] [--batch N]\n"
        "       replay gen OUT.fltr [--tables L] [--scale F] [--exponent S] [--seed N]\n"
        "                  [--batch N] [--batches N] [--switch-at B] [--switch-exponent S]\n"
        "                  [--hashed]\n"
        "Replays lookups through the embedding cache and reports hit rates, latency\n"
        "and throughput. TRACE: Criteo TSV/CSV, a text trace ('table id' per line) or\n"
        "an .fltr trace (docs/TRACES.md). convert writes any trace as .fltr; gen writes\n"
        "a synthetic Zipf trace (full size unless --scale; 128 batches unless --batches).\n\n",
        f);
  fl_replay_print_options(f);
  fputs("  -h, --help          this text\n", f);
}

/* Parses argv[first..]: options and up to max_pos positional arguments. */
static int parse(int argc, char **argv, int first, fl_replay_opts *o, const char **pos,
                 int max_pos, int *n_pos) {
  *n_pos = 0;
  for (int i = first; i < argc; i++) {
    if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
      usage(stdout);
      exit(0);
    }
    int r = fl_replay_parse_option(o, argc, argv, &i);
    if (r < 0) return -1;
    if (r > 0) continue;
    if (argv[i][0] == '-' || *n_pos == max_pos) {
      fprintf(stderr, "error: unexpected argument '%s' (see --help)\n", argv[i]);
      return -1;
    }
    pos[(*n_pos)++] = argv[i];
  }
  return 0;
}

static int write_fltr(fl_replay_opts *o, int gpu, const char *out) {
  fl_trace *t = NULL;
  if (fl_replay_open_trace(o, gpu, &t) != FL_OK) return 1;
  uint64_t n = 0;
  fl_status s = fl_trace_convert(t, out, &n);
  if (s != FL_OK) fprintf(stderr, "error: %s: %s\n", fl_status_name(s), fl_trace_last_error(NULL));
  else fprintf(stderr, "%s: %llu batches, %u tables\n", out, (unsigned long long)n, fl_trace_num_tables(t));
  fl_trace_close(t);
  return s == FL_OK ? 0 : 1;
}

static int run(fl_replay_opts *o) {
  fl_workload w;
  if (fl_workload_open(o, &w) != FL_OK) {
    fl_workload_close(&w);
    return 1;
  }
  fl_run runs[2];
  int n = 0;
  fl_status s = FL_OK;
  if (o->compare) {
    s = fl_run_replay(&w, o, FL_LAYOUT_FLAT, &runs[n++]);
    if (s == FL_OK) s = fl_run_replay(&w, o, FL_LAYOUT_PER_TABLE, &runs[n++]);
  } else {
    s = fl_run_replay(&w, o, o->layout, &runs[n++]);
  }
  uint64_t mismatches = 0;
  if (s == FL_OK) {
    fl_report_print(stdout, &w, runs, n);
    for (int i = 0; i < n; i++) fl_tiers_print(stdout, &runs[i].stats, &runs[i].tiers);
    if (o->json) s = fl_report_json(o->json, &w, runs, n);
    if (s == FL_OK && o->plot) s = fl_report_plot(o->plot, runs, n);
    for (int i = 0; i < n; i++) mismatches += runs[i].mismatches;
    if (mismatches) fprintf(stderr, "error: %llu answers differ from the store\n", (unsigned long long)mismatches);
  }
  for (int i = 0; i < n; i++) fl_run_free(&runs[i]);
  fl_workload_close(&w);
  return s == FL_OK && mismatches == 0 ? 0 : 1;
}

int main(int argc, char **argv) {
  fl_replay_opts o;
  fl_replay_opts_default(&o);
  o.floor = 1;
  const char *pos[2];
  int n_pos;
  if (argc > 1 && (!strcmp(argv[1], "convert") || !strcmp(argv[1], "gen"))) {
    int conv = !strcmp(argv[1], "convert");
    if (parse(argc, argv, 2, &o, pos, conv ? 2 : 1, &n_pos) < 0 || n_pos != (conv ? 2 : 1)) {
      if (n_pos >= 0) fprintf(stderr, "error: %s needs %s (see --help)\n", argv[1], conv ? "IN and OUT" : "OUT");
      return 2;
    }
    if (conv) o.trace = pos[0];
    return write_fltr(&o, 1, pos[conv]);
  }
  if (parse(argc, argv, 1, &o, pos, 1, &n_pos) < 0) return 2;
  if (n_pos) o.trace = pos[0];
  if (o.compare && o.layout != FL_LAYOUT_FLAT) {
    fprintf(stderr, "error: --compare runs both layouts; drop --layout\n");
    return 2;
  }
  return run(&o);
}
