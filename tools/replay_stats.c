/* replay_stats.c: what the report and the floor read off a finished run:
 * percentiles, where its steady state starts, the rows a batch fetched. */
#include <stdlib.h>
#include <string.h>

#include "tools/replay.h"

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

double fl_percentile(const double *v, uint64_t n, double q) {
  if (n == 0) return 0;
  double *s = malloc(n * sizeof *s);
  if (!s) return 0;
  memcpy(s, v, n * sizeof *s);
  qsort(s, n, sizeof *s, cmp_double);
  double x = s[(size_t)(q * (double)(n - 1) + 0.5)];
  free(s);
  return x;
}

double fl_run_percentile(const fl_run *run, double q) {
  return fl_percentile(run->lat_ms, run->batches, q);
}

/* The first batches warm the cache up. */
#define FL_STEADY_FROM 16
uint64_t fl_run_steady_from(const fl_run *run) {
  return run->batches > FL_STEADY_FROM ? FL_STEADY_FROM : 0;
}

uint64_t fl_run_batch_rows(const fl_run *run, uint64_t b) {
  return run->after[b].unique_misses - (b ? run->after[b - 1].unique_misses : 0);
}
