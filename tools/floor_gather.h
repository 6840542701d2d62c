/* floor_gather.h: the memcpy-gather floor, shared by bench_store and replay:
 * random rows copied with memcpy out of one dense array, on a thread pool
 * (fl_workers_for), which is what the store's gather would cost with no
 * lookup, no lock and no layout of its own. Both tools measure the store's
 * gather against it with the store's thread count, in the same run. */
#ifndef FL_TOOLS_FLOOR_GATHER_H
#define FL_TOOLS_FLOOR_GATHER_H

#include <stddef.h>
#include <stdint.h>

#include "common/parallel.h"

/* The pool's chunk for the floor: FL_GATHER_GRAIN of dram_store/gather.c, so
 * that the floor's jobs are cut as the store's gathers are. */
#define FL_FLOOR_GRAIN 64

typedef struct fl_floor {
  unsigned char *data;  /* n_rows * row_bytes bytes: the dense array */
  uint64_t n_rows;      /* rows of the array */
  size_t row_bytes;     /* bytes per row */
  const uint64_t *rows; /* the array's row for each position of the current gather */
  unsigned char *out;   /* the current gather's output: row_bytes per position */
} fl_floor;

/* Allocates the array, filled on pool w (touched, so no page fault is timed
 * later, and never zeros), and an output of out_rows rows. Returns 0, or -1
 * when memory runs out (nothing is left allocated). */
int fl_floor_init(fl_floor *f, fl_workers *w, uint64_t n_rows, size_t row_bytes, size_t out_rows);
void fl_floor_free(fl_floor *f);
/* The gather's range body (an fl_range_fn over f): copies positions [b, e)
 * of the current gather. */
void fl_floor_gather(void *ctx, size_t b, size_t e);

#endif
