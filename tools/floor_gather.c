/* floor_gather.c: the memcpy floor's array and its range bodies (filling the
 * array, gathering rows from it), which bench_store's measurement, its sweep
 * and replay's floor run (floor_gather.h). */
#include "tools/floor_gather.h"

#include <stdlib.h>
#include <string.h>

void fl_floor_gather(void *ctx, size_t b, size_t e) {
  fl_floor *f = ctx;
  size_t rb = f->row_bytes;
  for (size_t i = b; i < e; i++) memcpy(f->out + i * rb, f->data + f->rows[i] * rb, rb);
}

/* Fills bytes [b, e) of the array. */
static void fl_floor_touch(void *ctx, size_t b, size_t e) {
  fl_floor *f = ctx;
  for (size_t i = b; i < e; i++) f->data[i] = (unsigned char)(i | 1);
}

int fl_floor_init(fl_floor *f, fl_workers *w, uint64_t n_rows, size_t row_bytes, size_t out_rows) {
  memset(f, 0, sizeof *f);
  f->n_rows = n_rows;
  f->row_bytes = row_bytes;
  f->data = malloc(n_rows * row_bytes);
  f->out = malloc((out_rows ? out_rows : 1) * row_bytes);
  if (!f->data || !f->out) {
    fl_floor_free(f);
    return -1;
  }
  fl_workers_for(w, n_rows * row_bytes, 1 << 18, fl_floor_touch, f);
  return 0;
}

void fl_floor_free(fl_floor *f) {
  free(f->data);
  free(f->out);
  memset(f, 0, sizeof *f);
}
