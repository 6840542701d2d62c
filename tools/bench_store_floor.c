/* bench_store_floor.c: the memcpy floor's range bodies (filling the dense
 * array, gathering rows from it), which bench_store's measurement and its
 * sweep both run, and the error exit they share. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tools/bench_store.h"

void fl_floor_gather(void *ctx, size_t b, size_t e) {
  fl_floor *f = ctx;
  size_t rb = f->dim * sizeof(float);
  for (size_t i = b; i < e; i++) memcpy(f->out + i * f->dim, f->data + f->rows[i] * f->dim, rb);
}

void fl_floor_touch(void *ctx, size_t b, size_t e) {
  fl_floor *f = ctx;
  for (size_t i = b; i < e; i++) f->data[i] = (float)(i & 1023);
}

void fl_bench_die(const char *what, fl_status st, const char *msg) {
  fprintf(stderr, "bench_store: %s: %s: %s\n", what, fl_status_name(st), msg);
  exit(1);
}
