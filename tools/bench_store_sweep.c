/* bench_store_sweep.c: bench_store's sweep of rows per call, 1 to 32,768:
 * per size, rows/s of the store's gather on one thread and on its pool,
 * against the memcpy floor on one thread and on a pool (min, median and
 * max over the runs; the four take turns within a run, each run starting
 * with the next, so that drift and what ran just before hit them alike).
 *
 * "One thread" is the same store with its pool's costs fixed so that no
 * helper ever pays (fl_workers_fix_costs): every call runs on the caller
 * alone, through the same code, on the same rows. The floor's pool cuts
 * chunks of the store gather's grain. A call's rows are spread over the
 * tables as a batch's are (equal shares; a call of fewer rows than tables
 * takes one row from each of the next tables in turn), and
 * every size draws FL_SWEEP_DRAWN rows or more for its calls to cycle
 * through, so a small call finds its rows in DRAM rather than in a cache the
 * last call warmed. */
#include <stdlib.h>
#include <string.h>

#include "common/clock.h"
#include "common/hash.h"
#include "dram_store/store_internal.h"
#include "dram_store/synthetic_ids.h"
#include "tools/bench_store.h"

static const size_t fl_sweep_rows[FL_SWEEP_SIZES] = {1, 8, 64, 512, 4096, 32768};
/* Rows drawn per size (more when 8 calls hold more). */
#define FL_SWEEP_DRAWN (1u << 18)
/* The runs a point keeps at most (--sweep-runs). */
#define FL_SWEEP_MAX_RUNS 64

/* The calls of one size, cycled through. */
typedef struct fl_sweep_calls {
  size_t rows;         /* per call */
  size_t calls;        /* distinct calls */
  uint32_t nq;         /* queries per call: the tables with rows */
  fl_table_query *q;   /* calls * nq, outputs into out */
  uint64_t *ids;       /* calls * rows, by query */
  uint64_t *grows;     /* calls * rows: the same rows in the floor's array */
  float *out;          /* rows * dim: the store's output */
} fl_sweep_calls;

static void fl_sweep_calls_free(fl_sweep_calls *c) {
  free(c->q);
  free(c->ids);
  free(c->grows);
  free(c->out);
}

static void fl_sweep_calls_make(fl_sweep_calls *c, size_t rows, const fl_table_desc *d,
                                const fl_bench_offsets offset) {
  c->rows = rows;
  c->calls = rows * 8 > FL_SWEEP_DRAWN ? 8 : FL_SWEEP_DRAWN / rows;
  c->nq = rows < FL_BENCH_TABLES ? (uint32_t)rows : FL_BENCH_TABLES;
  c->q = malloc(c->calls * c->nq * sizeof *c->q);
  c->ids = malloc(c->calls * rows * sizeof *c->ids);
  c->grows = malloc(c->calls * rows * sizeof *c->grows);
  c->out = malloc(rows * d[0].dim * sizeof *c->out);
  if (!c->q || !c->ids || !c->grows || !c->out) fl_bench_die("sweep", FL_ERR_OUT_OF_MEMORY, "calls");
  for (size_t k = 0; k < c->calls; k++) {
    size_t at = 0;
    for (uint32_t j = 0; j < c->nq; j++) {
      uint32_t t = (uint32_t)((k * c->nq + j) % FL_BENCH_TABLES);
      size_t n = rows / c->nq + (j < rows % c->nq);
      uint64_t *ids = c->ids + k * rows + at;
      for (size_t i = 0; i < n; i++) {
        uint64_t r = fl_hash2((uint64_t)rows << 40 ^ (uint64_t)k << 8 ^ t, i) % d[t].corpus_size;
        ids[i] = d[t].id_kind == FL_IDS_DENSE ? r : fl_synthetic_id(t, r);
        c->grows[k * rows + at + i] = offset[t] + r;
      }
      c->q[k * c->nq + j] = (fl_table_query){t, ids, n, c->out + at * d[t].dim};
      at += n;
    }
  }
}

enum { FL_STORE_ONE, FL_STORE_POOL, FL_FLOOR_ONE, FL_FLOOR_POOL, FL_SWEEP_WAYS };

/* Calls of one way for o->sweep_seconds; returns rows per second. */
static double fl_sweep_loop(const fl_bench_opts *o, int way, fl_store *s, fl_workers *w,
                            fl_floor *f, const fl_sweep_calls *c) {
  uint64_t calls = 0;
  double t0 = fl_now_s(), t;
  do {
    size_t k = calls % c->calls;
    if (way == FL_STORE_ONE || way == FL_STORE_POOL) {
      fl_status st = fl_store_gather(s, c->q + k * c->nq, c->nq, FL_MISSING_ERROR, NULL);
      if (st != FL_OK) fl_bench_die("gather", st, fl_store_last_error(s));
    } else {
      f->rows = c->grows + k * c->rows;
      if (way == FL_FLOOR_ONE) fl_floor_gather(f, 0, c->rows);
      else fl_workers_for(w, c->rows, FL_FLOOR_GRAIN, fl_floor_gather, f);
    }
    calls++;
    t = fl_now_s();
  } while (t - t0 < o->sweep_seconds);
  return (double)(calls * c->rows) / (t - t0);
}

static int fl_cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

static fl_spread fl_spread_of(double *v, int n) {
  qsort(v, (size_t)n, sizeof *v, fl_cmp_double);
  double median = n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
  return (fl_spread){v[0], median, v[n - 1]};
}

/* One way's run: the store's pool held to its caller for FL_STORE_ONE. */
static double fl_sweep_run_way(const fl_bench_opts *o, int way, fl_store *s, fl_workers *w,
                               fl_floor *f, const fl_sweep_calls *c) {
  static const fl_pool_costs alone = {0, 1e18, 1e18, 0};
  fl_workers *sw = fl_store_workers(s);
  if (way == FL_STORE_ONE) fl_workers_fix_costs(sw, &alone);
  double r = fl_sweep_loop(o, way, s, w, f, c);
  if (way == FL_STORE_ONE) fl_workers_fix_costs(sw, NULL);
  return r;
}

static void fl_sweep_point_run(const fl_bench_opts *o, fl_store *s, const fl_table_desc *d,
                               fl_workers *w, fl_floor *f, const fl_bench_offsets offset,
                               size_t rows, fl_sweep_point *p) {
  fl_sweep_calls c;
  fl_sweep_calls_make(&c, rows, d, offset);
  f->out = (unsigned char *)c.out; /* the floor writes where the store does: the same cache footprint */
  double rate[FL_SWEEP_WAYS][FL_SWEEP_MAX_RUNS];
  int runs = o->sweep_runs < FL_SWEEP_MAX_RUNS ? o->sweep_runs : FL_SWEEP_MAX_RUNS;
  fl_bench_opts warm = *o;
  warm.sweep_seconds = o->sweep_seconds / 4;
  for (int way = 0; way < FL_SWEEP_WAYS; way++) fl_sweep_run_way(&warm, way, s, w, f, &c);
  for (int r = 0; r < runs; r++)
    for (int i = 0; i < FL_SWEEP_WAYS; i++) {
      int way = (r + i) % FL_SWEEP_WAYS;
      rate[way][r] = fl_sweep_run_way(o, way, s, w, f, &c);
    }
  *p = (fl_sweep_point){.rows = rows,
                        .store_one = fl_spread_of(rate[FL_STORE_ONE], runs),
                        .store_pool = fl_spread_of(rate[FL_STORE_POOL], runs),
                        .floor_one = fl_spread_of(rate[FL_FLOOR_ONE], runs),
                        .floor_pool = fl_spread_of(rate[FL_FLOOR_POOL], runs),
                        .store_helpers = fl_workers_last_helpers(fl_store_workers(s)),
                        .floor_helpers = fl_workers_last_helpers(w)};
  fl_sweep_calls_free(&c);
}

void fl_sweep_run(const fl_bench_opts *o, fl_store *s, const fl_table_desc *d, fl_workers *w,
                  fl_floor *f, const fl_bench_offsets offset, fl_sweep *out) {
  const uint64_t *rows = f->rows;
  unsigned char *fout = f->out;
  out->dim = d[0].dim;
  out->ids = d[0].id_kind == FL_IDS_DENSE ? "dense" : "hashed";
  fl_workers_costs(fl_store_workers(s), NULL, &out->costs);
  for (int i = 0; i < FL_SWEEP_SIZES; i++)
    fl_sweep_point_run(o, s, d, w, f, offset, fl_sweep_rows[i], &out->point[i]);
  f->rows = rows;
  f->out = fout;
}

static void fl_spread_print(const fl_spread *x) {
  char cell[40];
  snprintf(cell, sizeof cell, "%.3g (%.3g-%.3g)", x->median / 1e6, x->min / 1e6, x->max / 1e6);
  printf(" %22s", cell);
}

void fl_sweep_print(const fl_bench_opts *o, const fl_sweep *sw) {
  printf("\nRows per call, dim %u, %s ids: Mrows/s median (min-max) of %d runs of %.3g s;\n"
         "store pool hand-offs: spinning %.3g us, sleeping %.3g us, wake call %.3g us\n",
         sw->dim, sw->ids, o->sweep_runs, o->sweep_seconds, sw->costs.spin_ns / 1e3,
         sw->costs.sleep_ns / 1e3, sw->costs.wake_call_ns / 1e3);
  printf("%6s %22s %22s %4s %22s %22s %4s %6s\n", "rows", "store 1 thread", "store pool", "hlp",
         "memcpy 1 thread", "memcpy pool", "hlp", "pool/1");
  for (int i = 0; i < FL_SWEEP_SIZES; i++) {
    const fl_sweep_point *p = &sw->point[i];
    printf("%6zu", p->rows);
    fl_spread_print(&p->store_one);
    fl_spread_print(&p->store_pool);
    printf(" %4u", p->store_helpers);
    fl_spread_print(&p->floor_one);
    fl_spread_print(&p->floor_pool);
    printf(" %4u %6.2f\n", p->floor_helpers, p->store_pool.median / p->store_one.median);
  }
  fflush(stdout);
}

static void fl_spread_json(FILE *j, const char *name, const fl_spread *x) {
  fprintf(j, "\"%s\": {\"min\": %.6g, \"median\": %.6g, \"max\": %.6g}", name, x->min, x->median,
          x->max);
}

void fl_sweep_json(FILE *j, const fl_sweep *sw) {
  fprintf(j, "{\"dim\": %u, \"ids\": \"%s\", \"pool_spin_ns\": %.6g, \"pool_sleep_ns\": %.6g, "
             "\"pool_wake_call_ns\": %.6g, \"unit\": \"rows_per_s\", \"points\": [",
          sw->dim, sw->ids, sw->costs.spin_ns, sw->costs.sleep_ns, sw->costs.wake_call_ns);
  for (int i = 0; i < FL_SWEEP_SIZES; i++) {
    const fl_sweep_point *p = &sw->point[i];
    fprintf(j, "%s\n    {\"rows_per_call\": %zu, ", i ? "," : "", p->rows);
    fl_spread_json(j, "store_1_thread", &p->store_one);
    fputs(", ", j);
    fl_spread_json(j, "store_pool", &p->store_pool);
    fprintf(j, ", \"store_pool_helpers\": %u, ", p->store_helpers);
    fl_spread_json(j, "memcpy_1_thread", &p->floor_one);
    fputs(", ", j);
    fl_spread_json(j, "memcpy_pool", &p->floor_pool);
    fprintf(j, ", \"memcpy_pool_helpers\": %u}", p->floor_helpers);
  }
  fputs("]}", j);
}
