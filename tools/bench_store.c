/* bench_store.c: gather throughput of the DRAM store on a Criteo-shaped model
 * (the 26 categorical tables of Criteo Kaggle) against its floor: a plain
 * memcpy gather of the same rows from one dense array holding all tables,
 * measured in the same run with the same number of threads.
 *
 *   bench_store [--dims 32,128] [--ids dense|hashed|both] [--threads N]
 *               [--batch B] [--seconds S] [--scale F] [--json FILE]
 *
 * --batch is ids per table per gather call (one inference batch), --scale
 * multiplies every corpus size (use < 1 on small machines). Prints a table of
 * rows/s and writes the same numbers as JSON. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/clock.h"
#include "common/hash.h"
#include "common/parallel.h"
#include "dram_store/synthetic_ids.h"
#include "include/fleche.h"
#include "tools/criteo_tables.h"

#define FL_BENCH_TABLES FL_CRITEO_TABLES
/* Id batches generated up front and cycled, so timing excludes the RNG. */
#define FL_BENCH_BATCHES 8

typedef struct fl_bench_opts {
  char dims[64];     /* comma-separated vector sizes */
  int dense, hashed; /* which id kinds to run */
  uint32_t threads;  /* gather threads, 0 = all cores */
  size_t batch;      /* ids per table per gather */
  double seconds;    /* time per measurement */
  double scale;      /* corpus size multiplier */
  const char *json;  /* output file, NULL for none */
} fl_bench_opts;

typedef struct fl_bench_result {
  uint32_t dim;     /* elements per vector */
  const char *ids;  /* "dense" or "hashed" */
  double store;     /* rows/s through fl_store_gather */
  double floor;     /* rows/s of the plain memcpy gather */
} fl_bench_result;

/* The floor: rows of all tables back to back in one array. */
typedef struct fl_floor {
  float *data;                   /* total_rows * dim floats */
  uint32_t dim;                  /* floats per row */
  uint64_t offset[FL_BENCH_TABLES + 1]; /* first row of each table; [26] = total */
  const uint64_t *rows;          /* global row per position of the current batch */
  float *out;                    /* batch output */
} fl_floor;

static void fl_floor_gather(void *ctx, size_t b, size_t e) {
  fl_floor *f = ctx;
  size_t rb = f->dim * sizeof(float);
  for (size_t i = b; i < e; i++) memcpy(f->out + i * f->dim, f->data + f->rows[i] * f->dim, rb);
}

static void fl_floor_touch(void *ctx, size_t b, size_t e) {
  fl_floor *f = ctx;
  for (size_t i = b; i < e; i++) f->data[i] = (float)(i & 1023);
}

static void fl_die(const char *what, fl_status st, const char *msg) {
  fprintf(stderr, "bench_store: %s: %s: %s\n", what, fl_status_name(st), msg);
  exit(1);
}

/* Runs gathers for ~seconds; returns rows per second. `which` 0 = store. */
static double fl_bench_loop(fl_bench_opts *o, int which, fl_store *s, fl_table_query q[][FL_BENCH_TABLES],
                            fl_workers *w, fl_floor *f, uint64_t *const grows[]) {
  size_t per_call = o->batch * FL_BENCH_TABLES;
  uint64_t calls = 0;
  double t0 = fl_now_s(), t;
  do {
    int k = (int)(calls % FL_BENCH_BATCHES);
    if (which == 0) {
      fl_status st = fl_store_gather(s, q[k], FL_BENCH_TABLES, FL_MISSING_ERROR, NULL);
      if (st != FL_OK) fl_die("gather", st, fl_store_last_error(s));
    } else {
      f->rows = grows[k];
      fl_workers_for(w, per_call, 256, fl_floor_gather, f);
    }
    calls++;
    t = fl_now_s();
  } while (t - t0 < o->seconds);
  return (double)(calls * per_call) / (t - t0);
}

static fl_bench_result fl_bench_one(fl_bench_opts *o, uint32_t dim, fl_id_kind kind) {
  fl_table_desc d[FL_BENCH_TABLES];
  char names[FL_BENCH_TABLES][8];
  fl_floor f = {.dim = dim};
  for (int t = 0; t < FL_BENCH_TABLES; t++) {
    uint64_t n = (uint64_t)((double)fl_criteo_rows[t] * o->scale);
    snprintf(names[t], sizeof names[t], "C%d", t + 1);
    d[t] = (fl_table_desc){names[t], n ? n : 1, dim, FL_FP32, kind};
    f.offset[t + 1] = f.offset[t] + d[t].corpus_size;
  }
  fl_store *s = NULL;
  fl_status st = fl_store_create(d, FL_BENCH_TABLES, o->threads, &s);
  if (st != FL_OK) fl_die("create", st, fl_store_last_error(NULL));
  for (uint32_t t = 0; t < FL_BENCH_TABLES; t++)
    if ((st = fl_store_fill_synthetic(s, t, 1)) != FL_OK) fl_die("fill", st, fl_store_last_error(s));
  fl_workers *w = fl_workers_create(o->threads);
  uint64_t total = f.offset[FL_BENCH_TABLES];
  f.data = malloc(total * dim * sizeof(float));
  size_t per_call = o->batch * FL_BENCH_TABLES;
  f.out = malloc(per_call * dim * sizeof(float));
  float *out = malloc(per_call * dim * sizeof(float));
  uint64_t *ids = malloc(FL_BENCH_BATCHES * per_call * sizeof *ids);
  uint64_t *grows_all = malloc(FL_BENCH_BATCHES * per_call * sizeof *grows_all);
  if (!w || !f.data || !f.out || !out || !ids || !grows_all) {
    fprintf(stderr, "bench_store: out of memory\n");
    exit(1);
  }
  fl_workers_for(w, total * dim, 1 << 16, fl_floor_touch, &f);
  static fl_table_query q[FL_BENCH_BATCHES][FL_BENCH_TABLES];
  uint64_t *grows[FL_BENCH_BATCHES];
  for (int k = 0; k < FL_BENCH_BATCHES; k++) {
    grows[k] = grows_all + k * per_call;
    for (uint32_t t = 0; t < FL_BENCH_TABLES; t++) {
      uint64_t *qi = ids + k * per_call + t * o->batch;
      for (size_t i = 0; i < o->batch; i++) {
        uint64_t r = fl_hash2((uint64_t)k << 40 | t, i) % d[t].corpus_size;
        qi[i] = kind == FL_IDS_DENSE ? r : fl_synthetic_id(t, r);
        grows[k][t * o->batch + i] = f.offset[t] + r;
      }
      q[k][t] = (fl_table_query){t, qi, o->batch, out + t * o->batch * dim};
    }
  }
  /* Warm both paths, then alternate so drift hits both alike. */
  fl_bench_result r = {dim, kind == FL_IDS_DENSE ? "dense" : "hashed", 0, 0};
  double save = o->seconds;
  o->seconds = save / 10;
  fl_bench_loop(o, 0, s, q, w, &f, grows);
  fl_bench_loop(o, 1, s, q, w, &f, grows);
  o->seconds = save / 2;
  for (int rep = 0; rep < 2; rep++) {
    r.floor += fl_bench_loop(o, 1, s, q, w, &f, grows) / 2;
    r.store += fl_bench_loop(o, 0, s, q, w, &f, grows) / 2;
  }
  o->seconds = save;
  free(grows_all);
  free(ids);
  free(out);
  free(f.out);
  free(f.data);
  fl_workers_destroy(w);
  fl_store_destroy(s);
  return r;
}

static void fl_usage(void) {
  fprintf(stderr, "usage: bench_store [--dims 32,128] [--ids dense|hashed|both] [--threads N]\n"
                  "                   [--batch B] [--seconds S] [--scale F] [--json FILE]\n");
  exit(2);
}

int main(int argc, char **argv) {
  fl_bench_opts o = {"32,128", 1, 1, 0, 2048, 2.0, 1.0, NULL};
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
    else fl_usage();
    i++;
  }
  if (o.batch == 0 || o.seconds <= 0 || o.scale <= 0) fl_usage();
  fl_workers *probe = fl_workers_create(o.threads);
  uint32_t threads = fl_workers_count(probe);
  fl_workers_destroy(probe);
  fl_bench_result res[16];
  int n = 0;
  char dims[64];
  snprintf(dims, sizeof dims, "%s", o.dims);
  printf("Criteo-shaped store, 26 tables fp32, scale %.3g, %u threads, %zu ids/table/gather\n",
         o.scale, threads, o.batch);
  printf("%5s %7s %16s %16s %7s\n", "dim", "ids", "store rows/s", "memcpy rows/s", "ratio");
  for (char *tok = strtok(dims, ","); tok && n < 14; tok = strtok(NULL, ",")) {
    uint32_t dim = (uint32_t)atoi(tok);
    for (int k = 0; k < 2; k++) {
      if (!(k == 0 ? o.dense : o.hashed)) continue;
      res[n] = fl_bench_one(&o, dim, k == 0 ? FL_IDS_DENSE : FL_IDS_HASHED);
      printf("%5u %7s %16.4g %16.4g %7.2f\n", res[n].dim, res[n].ids, res[n].store, res[n].floor,
             res[n].store / res[n].floor);
      fflush(stdout);
      n++;
    }
  }
  if (o.json) {
    FILE *j = fopen(o.json, "w");
    if (!j) { perror(o.json); return 1; }
    fprintf(j, "{\"bench\": \"store_gather\", \"tables\": 26, \"scale\": %g, \"threads\": %u, "
               "\"batch_per_table\": %zu, \"results\": [",
            o.scale, threads, o.batch);
    for (int i = 0; i < n; i++)
      fprintf(j, "%s\n  {\"dim\": %u, \"ids\": \"%s\", \"store_rows_per_s\": %.6g, "
                 "\"memcpy_rows_per_s\": %.6g, \"ratio\": %.4f}",
              i ? "," : "", res[i].dim, res[i].ids, res[i].store, res[i].floor,
              res[i].store / res[i].floor);
    fprintf(j, "\n]}\n");
    fclose(j);
  }
  return 0;
}
