/* load_redis.c: loads a model into a Redis Cluster for a cluster store
 * (docs/TIERS.md): the .flst file of --model, or the model replay would
 * build for a trace (--model-npy/--model-hugectr per trace table, else
 * synthetic vectors), copied table by table with fl_store_copy under a
 * progress bar. replay/tune --store then read it. */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/clock.h"
#include "tools/replay.h"

typedef struct load_progress {
  uint64_t base, total; /* rows of the tables already copied, of all tables */
  double start, last;
  int tty;
} load_progress;

static void on_progress(void *ctx, uint64_t done, uint64_t table_total) {
  (void)table_total;
  load_progress *p = ctx;
  double now = fl_now_s();
  if (!p->tty || now - p->last < 0.1) return;
  p->last = now;
  uint64_t at = p->base + done;
  int fill = p->total ? (int)(30 * at / p->total) : 30;
  fprintf(stderr, "\rloading [%.*s%.*s] %llu/%llu rows, %.2f M rows/s ", fill,
          "##############################", 30 - fill, "..............................",
          (unsigned long long)at, (unsigned long long)p->total, (double)at / 1e6 / (now - p->start));
}

static void usage(FILE *f) {
  fputs("usage: load_redis --store redis://HOST:PORT [TRACE] [options]\n"
        "Loads a model into the Redis Cluster at HOST:PORT (namespace --store-ns, default fl):\n"
        "--model FILE.flst,\n"
        "or the model replay builds for TRACE (or its embedded workload) from the options.\n",
        f);
  fl_replay_print_options(f);
}

int main(int argc, char **argv) {
  fl_replay_opts o;
  fl_replay_opts_default(&o);
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) return usage(stdout), 0;
    int r = fl_replay_parse_option(&o, argc, argv, &i);
    if (r < 0) return 2;
    if (r == 0 && argv[i][0] != '-' && !o.trace) o.trace = argv[i];
    else if (r == 0) return fprintf(stderr, "error: unknown option %s\n", argv[i]), usage(stderr), 2;
  }
  if (!o.store) return fprintf(stderr, "error: --store is required\n"), usage(stderr), 2;
  const char *target = o.store;
  o.store = NULL;
  fl_workload w = {0};
  fl_status s = o.model ? fl_store_load(o.model, o.threads, &w.store) : fl_workload_open(&o, &w);
  if (s != FL_OK) {
    if (o.model) fprintf(stderr, "error: %s: %s: %s\n", o.model, fl_status_name(s), fl_store_last_error(NULL));
    fl_workload_close(&w);
    return 1;
  }
  uint32_t n = fl_store_num_tables(w.store);
  fl_table_desc *d = calloc(n ? n : 1, sizeof *d);
  load_progress p = {.start = fl_now_s(), .tty = isatty(STDERR_FILENO)};
  for (uint32_t t = 0; d && t < n; t++) {
    fl_store_table_stats ts;
    fl_store_table(w.store, t, &d[t]);
    if (fl_store_stats(w.store, t, &ts) == FL_OK) p.total += ts.rows;
  }
  fl_cluster_config cfg;
  fl_cluster_config_default(&cfg);
  cfg.seed = target;
  if (o.store_ns) cfg.ns = o.store_ns;
  fl_store *dst = NULL;
  s = d ? fl_store_create_cluster(d, n, o.threads, &cfg, &dst) : FL_ERR_OUT_OF_MEMORY;
  if (s != FL_OK)
    fprintf(stderr, "error: %s: %s: %s\n", target, fl_status_name(s), fl_store_last_error(NULL));
  for (uint32_t t = 0; s == FL_OK && t < n; t++) {
    fl_store_table_stats ts;
    fl_store_stats(w.store, t, &ts);
    s = fl_store_copy(dst, w.store, t, on_progress, &p);
    if (s != FL_OK)
      fprintf(stderr, "\nerror: table %u '%s': %s: %s\n", t, d[t].name, fl_status_name(s),
              fl_store_last_error(dst));
    p.base += ts.rows;
  }
  if (s == FL_OK) {
    double secs = fl_now_s() - p.start;
    fprintf(stderr, "%sloaded %u tables, %llu rows into %s in %.2f s (%.2f M rows/s)\n",
            p.tty ? "\r" : "", n, (unsigned long long)p.total, target, secs,
            secs > 0 ? (double)p.total / 1e6 / secs : 0);
  }
  fl_store_destroy(dst);
  free(d);
  fl_workload_close(&w);
  return s == FL_OK ? 0 : 1;
}
