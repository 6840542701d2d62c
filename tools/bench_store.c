/* bench_store.c: gather throughput of the DRAM store on a Criteo-shaped model
 * (the 26 categorical tables of Criteo Kaggle) against its floor: a plain
 * memcpy gather of the same rows from one dense array holding all tables,
 * measured in the same run with the same number of threads. The store is
 * measured twice: fl_store_gather (the caller works with the pool, memcpy
 * into the outputs), and as the CUDA backend's miss path gathers into its
 * staging (fl_store_gather_watched: streaming stores, the caller watching
 * the rows land while the pool gathers). Then, per model,
 * the sweep of rows per call (bench_store_sweep.c): one thread against the
 * pool against the floor, from 1 row a call to 32,768.
 *
 *   bench_store [--dims 32,128] [--ids dense|hashed|both] [--threads N]
 *               [--batch B] [--seconds S] [--scale F] [--json FILE]
 *               [--sweep-runs R] [--sweep-seconds S] [--gap-us G] [--min-rows N]
 *
 * --batch is ids per table per gather call (one inference batch), --scale
 * multiplies every corpus size (use < 1 on small machines), --sweep-runs is
 * the runs per point of the sweep (0: no sweep), --gap-us idles the caller
 * that long, untimed, before each call of the main figure (the pool's
 * workers fall asleep between a server's batches), --min-rows leaves the
 * tables of fewer rows out of the main figure (a cache's misses come from
 * the big tables: the small ones' rows would sit in the CPU's caches).
 * Prints a table of rows/s, then the sweeps, and writes the same numbers as
 * JSON. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/clock.h"
#include "common/hash.h"
#include "common/parallel.h"
#include "dram_store/store_internal.h"
#include "dram_store/synthetic_ids.h"
#include "include/fleche.h"
#include "tools/bench_store.h"

/* Id batches generated up front and cycled, so timing excludes the RNG. */
#define FL_BENCH_BATCHES 8
/* Configurations (dims x id kinds) one run measures at most. */
#define FL_BENCH_MAX 14

typedef struct fl_bench_result {
  uint32_t dim;     /* elements per vector */
  const char *ids;  /* "dense" or "hashed" */
  double store;     /* rows/s through fl_store_gather */
  double staged;    /* rows/s as the CUDA backend gathers into its staging */
  double floor;     /* rows/s of the plain memcpy gather */
  fl_sweep sweep;   /* filled when o->sweep_runs > 0 */
} fl_bench_result;

/* What a measurement gathers with. */
typedef enum fl_bench_way {
  FL_WAY_STORE,  /* fl_store_gather */
  FL_WAY_FLOOR,  /* the memcpy floor */
  FL_WAY_STAGED  /* fl_store_gather_watched for a device, as fusion/misses.c calls it */
} fl_bench_way;

/* The staged way's watcher: the rows landed so far (the miss path uploads
 * them from here). */
static void fl_bench_watch(void *ctx, uint64_t rows) { *(uint64_t *)ctx = rows; }

/* Runs gathers for ~seconds; returns rows per second. */
static double fl_bench_loop(fl_bench_opts *o, fl_bench_way way, size_t per_call, fl_store *s,
                            fl_table_query q[][FL_BENCH_TABLES], fl_workers *w, fl_floor *f,
                            uint64_t *const grows[]) {
  uint64_t calls = 0, landed = 0;
  fl_gather_watch watch = {fl_bench_watch, &landed};
  double t0 = fl_now_s(), t, idle = 0;
  do {
    int k = (int)(calls % FL_BENCH_BATCHES);
    fl_status st = FL_OK;
    if (o->gap_us > 0) { /* idle, as a batch's GPU work leaves the store, and not timed */
      double g0 = fl_now_s();
      while (fl_now_s() - g0 < o->gap_us * 1e-6) {
      }
      idle += fl_now_s() - g0;
    }
    if (way == FL_WAY_FLOOR) {
      f->rows = grows[k];
      fl_workers_for(w, per_call, 256, fl_floor_gather, f);
    } else if (way == FL_WAY_STORE) {
      st = fl_store_gather(s, q[k], FL_BENCH_TABLES, FL_MISSING_ERROR, NULL);
    } else {
      st = fl_store_gather_watched(s, q[k], FL_BENCH_TABLES, FL_MISSING_ERROR, &watch, NULL, 1);
    }
    if (st != FL_OK) fl_bench_die("gather", st, fl_store_last_error(s));
    calls++;
    t = fl_now_s();
  } while (t - t0 - idle < o->seconds);
  return (double)(calls * per_call) / (t - t0 - idle);
}

/* Rows of table t at the model's scale (at least one). */
static uint64_t fl_bench_table_rows(const fl_bench_opts *o, int t) {
  uint64_t n = (uint64_t)((double)fl_criteo_rows[t] * o->scale);
  return n ? n : 1;
}

static fl_bench_result fl_bench_one(fl_bench_opts *o, uint32_t dim, fl_id_kind kind) {
  fl_table_desc d[FL_BENCH_TABLES];
  char names[FL_BENCH_TABLES][8];
  fl_floor f;
  fl_bench_offsets offset = {0};
  for (int t = 0; t < FL_BENCH_TABLES; t++) {
    snprintf(names[t], sizeof names[t], "C%d", t + 1);
    d[t] = (fl_table_desc){names[t], fl_bench_table_rows(o, t), dim, FL_FP32, kind};
    offset[t + 1] = offset[t] + d[t].corpus_size;
  }
  fl_store *s = NULL;
  fl_status st = fl_store_create(d, FL_BENCH_TABLES, o->threads, &s);
  if (st != FL_OK) fl_bench_die("create", st, fl_store_last_error(NULL));
  for (uint32_t t = 0; t < FL_BENCH_TABLES; t++)
    if ((st = fl_store_fill_synthetic(s, t, 1)) != FL_OK) fl_bench_die("fill", st, fl_store_last_error(s));
  fl_workers *w = fl_workers_create("floor", fl_store_threads(s));
  size_t per_call = 0;
  for (int t = 0; t < FL_BENCH_TABLES; t++) per_call += d[t].corpus_size >= o->min_rows ? o->batch : 0;
  int floor_failed = !w || fl_floor_init(&f, w, offset[FL_BENCH_TABLES], dim * sizeof(float), per_call);
  float *out = malloc(per_call * dim * sizeof(float));
  uint64_t *ids = malloc(FL_BENCH_BATCHES * per_call * sizeof *ids);
  uint64_t *grows_all = malloc(FL_BENCH_BATCHES * per_call * sizeof *grows_all);
  if (floor_failed || !out || !ids || !grows_all) {
    fprintf(stderr, "bench_store: out of memory\n");
    exit(1);
  }
  static fl_table_query q[FL_BENCH_BATCHES][FL_BENCH_TABLES];
  uint64_t *grows[FL_BENCH_BATCHES];
  for (int k = 0; k < FL_BENCH_BATCHES; k++) {
    grows[k] = grows_all + k * per_call;
    size_t at = 0; /* the call's rows so far */
    for (uint32_t t = 0; t < FL_BENCH_TABLES; t++) {
      size_t n = d[t].corpus_size >= o->min_rows ? o->batch : 0;
      uint64_t *qi = ids + k * per_call + at;
      for (size_t i = 0; i < n; i++) {
        uint64_t r = fl_hash2((uint64_t)k << 40 | t, i) % d[t].corpus_size;
        qi[i] = kind == FL_IDS_DENSE ? r : fl_synthetic_id(t, r);
        grows[k][at + i] = offset[t] + r;
      }
      q[k][t] = (fl_table_query){t, qi, n, out + at * dim};
      at += n;
    }
  }
  /* Warm every way, then alternate so drift hits them alike. */
  fl_bench_result r = {dim, kind == FL_IDS_DENSE ? "dense" : "hashed", 0, 0, 0, {0}};
  double save = o->seconds;
  o->seconds = save / 10;
  for (int way = FL_WAY_STORE; way <= FL_WAY_STAGED; way++)
    fl_bench_loop(o, (fl_bench_way)way, per_call, s, q, w, &f, grows);
  o->seconds = save / 2;
  for (int rep = 0; rep < 2; rep++) {
    r.floor += fl_bench_loop(o, FL_WAY_FLOOR, per_call, s, q, w, &f, grows) / 2;
    r.store += fl_bench_loop(o, FL_WAY_STORE, per_call, s, q, w, &f, grows) / 2;
    r.staged += fl_bench_loop(o, FL_WAY_STAGED, per_call, s, q, w, &f, grows) / 2;
  }
  o->seconds = save;
  if (o->sweep_runs > 0) fl_sweep_run(o, s, d, w, &f, offset, &r.sweep);
  free(grows_all);
  free(ids);
  free(out);
  fl_floor_free(&f);
  fl_workers_destroy(w);
  fl_store_destroy(s);
  return r;
}

static void fl_usage(void) {
  fprintf(stderr, "usage: bench_store [--dims 32,128] [--ids dense|hashed|both] [--threads N]\n"
                  "                   [--batch B] [--seconds S] [--scale F] [--json FILE]\n"
                  "                   [--sweep-runs R (5; 0: no sweep)] [--sweep-seconds S (0.05)]\n"
                  "                   [--gap-us G (0)] [--min-rows N (0)]\n");
  exit(2);
}

static fl_bench_opts fl_parse(int argc, char **argv) {
  fl_bench_opts o = {"32,128", 1, 1, 0, 2048, 2.0, 1.0, NULL, 5, 0.05, 0, 0};
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
    if (!v) fl_usage();
    if (!strcmp(a, "--dims")) snprintf(o.dims, sizeof o.dims, "%s", v);
    else if (!strcmp(a, "--ids")) { o.dense = strcmp(v, "hashed") != 0; o.hashed = strcmp(v, "dense") != 0; }
    else if (!strcmp(a, "--threads")) o.threads = (uint32_t)atoi(v);
    else if (!strcmp(a, "--batch")) o.batch = (size_t)atol(v);
    else if (!strcmp(a, "--seconds")) o.seconds = atof(v);
    else if (!strcmp(a, "--scale")) o.scale = atof(v);
    else if (!strcmp(a, "--json")) o.json = v;
    else if (!strcmp(a, "--sweep-runs")) o.sweep_runs = atoi(v);
    else if (!strcmp(a, "--sweep-seconds")) o.sweep_seconds = atof(v);
    else if (!strcmp(a, "--gap-us")) o.gap_us = atof(v);
    else if (!strcmp(a, "--min-rows")) o.min_rows = strtoull(v, NULL, 10);
    else fl_usage();
    i++;
  }
  if (o.batch == 0 || o.seconds <= 0 || o.scale <= 0 || o.sweep_runs < 0 || o.gap_us < 0 ||
      (o.sweep_runs && o.sweep_seconds <= 0))
    fl_usage();
  uint64_t biggest = 0; /* --min-rows must leave a table */
  for (int t = 0; t < FL_BENCH_TABLES; t++)
    if (fl_bench_table_rows(&o, t) > biggest) biggest = fl_bench_table_rows(&o, t);
  if (o.min_rows > biggest) fl_usage();
  return o;
}

static int fl_write_json(const fl_bench_opts *o, uint32_t threads, const fl_bench_result *res,
                         int n) {
  FILE *j = fopen(o->json, "w");
  if (!j) { perror(o->json); return 1; }
  fprintf(j, "{\"bench\": \"store_gather\", \"tables\": 26, \"scale\": %g, \"threads\": %u, "
             "\"batch_per_table\": %zu, \"min_rows\": %llu, \"gap_us\": %g, \"results\": [",
          o->scale, threads, o->batch, (unsigned long long)o->min_rows, o->gap_us);
  for (int i = 0; i < n; i++)
    fprintf(j, "%s\n  {\"dim\": %u, \"ids\": \"%s\", \"store_rows_per_s\": %.6g, "
               "\"staged_rows_per_s\": %.6g, \"memcpy_rows_per_s\": %.6g, \"ratio\": %.4f, "
               "\"staged_ratio\": %.4f}",
            i ? "," : "", res[i].dim, res[i].ids, res[i].store, res[i].staged, res[i].floor,
            res[i].store / res[i].floor, res[i].staged / res[i].floor);
  fprintf(j, "\n], \"sweep_runs\": %d, \"sweep_seconds\": %g, \"sweeps\": [", o->sweep_runs,
          o->sweep_seconds);
  for (int i = 0; o->sweep_runs > 0 && i < n; i++) {
    fputs(i ? ",\n  " : "\n  ", j);
    fl_sweep_json(j, &res[i].sweep);
  }
  fprintf(j, "\n]}\n");
  fclose(j);
  return 0;
}

int main(int argc, char **argv) {
  fl_bench_opts o = fl_parse(argc, argv);
  uint32_t threads = o.threads ? o.threads : fl_store_default_threads();
  static fl_bench_result res[FL_BENCH_MAX];
  int n = 0;
  char dims[64];
  snprintf(dims, sizeof dims, "%s", o.dims);
  printf("Criteo-shaped store, 26 tables fp32, scale %.3g, %u threads, %zu ids/table/gather",
         o.scale, threads, o.batch);
  if (o.min_rows) printf(" (tables of %llu rows or more)", (unsigned long long)o.min_rows);
  if (o.gap_us > 0) printf(", %g us idle before each call", o.gap_us);
  printf("\n");
  printf("%5s %7s %16s %16s %16s %7s %7s\n", "dim", "ids", "store rows/s", "staged rows/s",
         "memcpy rows/s", "ratio", "staged");
  for (char *tok = strtok(dims, ","); tok && n < FL_BENCH_MAX; tok = strtok(NULL, ",")) {
    uint32_t dim = (uint32_t)atoi(tok);
    for (int k = 0; k < 2 && n < FL_BENCH_MAX; k++) {
      if (!(k == 0 ? o.dense : o.hashed)) continue;
      res[n] = fl_bench_one(&o, dim, k == 0 ? FL_IDS_DENSE : FL_IDS_HASHED);
      printf("%5u %7s %16.4g %16.4g %16.4g %7.2f %7.2f\n", res[n].dim, res[n].ids, res[n].store,
             res[n].staged, res[n].floor, res[n].store / res[n].floor, res[n].staged / res[n].floor);
      fflush(stdout);
      n++;
    }
  }
  for (int i = 0; o.sweep_runs > 0 && i < n; i++) fl_sweep_print(&o, &res[i].sweep);
  return o.json ? fl_write_json(&o, threads, res, n) : 0;
}
