/* bench_store_die.c: bench_store's error exit, shared by its measurement
 * (bench_store.c) and its sweep (bench_store_sweep.c). */
#include <stdio.h>
#include <stdlib.h>

#include "tools/bench_store.h"

void fl_bench_die(const char *what, fl_status st, const char *msg) {
  fprintf(stderr, "bench_store: %s: %s: %s\n", what, fl_status_name(st), msg);
  exit(1);
}
