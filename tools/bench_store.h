/* bench_store.h: what bench_store.c (the store against its memcpy floor at
 * one batch size, floor_gather.h), bench_store_sweep.c (the same over a
 * sweep of rows per call) and bench_store_die.c (the error exit) share: the
 * options, the floor's table offsets and the sweep's results. */
#ifndef FL_TOOLS_BENCH_STORE_H
#define FL_TOOLS_BENCH_STORE_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "common/parallel.h"
#include "include/fleche.h"
#include "tools/criteo_tables.h"
#include "tools/floor_gather.h"

#define FL_BENCH_TABLES FL_CRITEO_TABLES
/* Rows per call of the sweep. */
#define FL_SWEEP_SIZES 6

typedef struct fl_bench_opts {
  char dims[64];        /* comma-separated vector sizes */
  int dense, hashed;    /* which id kinds to run */
  uint32_t threads;     /* gather threads, 0 = the store's default */
  size_t batch;         /* ids per table per gather */
  double seconds;       /* time per measurement */
  double scale;         /* corpus size multiplier */
  const char *json;     /* output file, NULL for none */
  int sweep_runs;       /* runs per point of the sweep; 0: no sweep */
  double sweep_seconds; /* time per run of the sweep */
  double gap_us;        /* idle time before each call of the main figure (the pool's
                           workers sleep after 20 us idle, as between a server's batches) */
  uint64_t min_rows;    /* the main figure's tables: those of at least this many rows */
} fl_bench_opts;

/* The floor's array holds the rows of all tables back to back: table t's
 * first row is offset[t]; offset[FL_BENCH_TABLES] is the total. */
typedef uint64_t fl_bench_offsets[FL_BENCH_TABLES + 1];

/* Prints what failed and exits. */
void fl_bench_die(const char *what, fl_status st, const char *msg);

/* Rows per second over a sweep point's runs. */
typedef struct fl_spread {
  double min, median, max;
} fl_spread;

/* One point of the sweep: the store's gather and the floor's, each on one
 * thread and on the pool, and the helpers each pool's last call took. */
typedef struct fl_sweep_point {
  size_t rows;                         /* rows per call */
  fl_spread store_one, store_pool;     /* fl_store_gather */
  fl_spread floor_one, floor_pool;     /* the memcpy floor */
  uint32_t store_helpers, floor_helpers;
} fl_sweep_point;

typedef struct fl_sweep {
  uint32_t dim;
  const char *ids;                     /* "dense" or "hashed" */
  fl_pool_costs costs;                 /* the store pool's hand-offs (item_ns unused) */
  fl_sweep_point point[FL_SWEEP_SIZES];
} fl_sweep;

/* Runs the sweep over the store s of tables d (filled) and its floor f
 * (filled, tables at offset; f->rows and f->out are the sweep's own
 * meanwhile), the floor on pool w. */
void fl_sweep_run(const fl_bench_opts *o, fl_store *s, const fl_table_desc *d, fl_workers *w,
                  fl_floor *f, const fl_bench_offsets offset, fl_sweep *out);
void fl_sweep_print(const fl_bench_opts *o, const fl_sweep *sw);
/* The sweep as one JSON object. */
void fl_sweep_json(FILE *j, const fl_sweep *sw);

#endif
