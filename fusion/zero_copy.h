/* zero_copy.h: which of a batch's unique rows the GPU reads straight from
 * the store (zero-copy, over PCIe) instead of the host's gather.
 *
 * A row qualifies when its address is known without the store's lookup: a
 * miss of a dense table whose rows are registered for device access (row
 * id at rows + id * row bytes), and, in a one-shot run (fl_query), a
 * unified-index pointer row of a table whose rows are registered: dense
 * (read as its misses are) or hashed, read at its reference, where the
 * slot's header says whether it still holds the id (seq_stripe.h's
 * fl_slot_head). A part batch takes the device path when at most `limit`
 * of its unique rows qualify (cfg.zero_copy_rows): reading in place costs a
 * PCIe round trip per row, cheap for a few rows, while the host gather's
 * fixed costs (waking threads, an upload) pay off for many.
 * By default (FL_ZERO_COPY_AUTO) the cache picks `limit` itself: it times
 * both paths on its own store at create (zc_calibrate.c) and takes the
 * count where reading in place stops paying (fl_zc_limit_of).
 * The hit-copy kernel (query_kernels.cu), queued behind the index kernel,
 * decides on the device from the counters and reads the rows then, with no
 * round trip through the host: into every missed position when every unique
 * row qualifies (nothing is launched after it, unless a hashed slot no
 * longer held its id: the host then fetches that row by id and scatters),
 * else the dense misses into the staging; the host decides the same from
 * the published counters and gathers the rest (hashed misses, pointer rows)
 * into the same staging, around the GPU's rows, for the scatter. */
#ifndef FL_FUSION_ZERO_COPY_H
#define FL_FUSION_ZERO_COPY_H

#include "dram_store/seq_stripe.h"
#include "batch/miss_set.h"

/* Per table, its rows as the device reads them in place: dense rows, or
 * for a hashed table the slot layout at its references (rows NULL,
 * slots.vec_stride non-zero); neither when they cannot be read in place. */
typedef struct fl_zc_table {
  const uint8_t *rows;
  fl_slot_layout slots;
} fl_zc_table;

/* A batch's unique rows: those that qualify (misses of dense tables,
 * pointer rows read in place), and all. */
typedef struct fl_zc_count {
  uint64_t misses, pointers, all;
} fl_zc_count;

/* Adds arg a's unique rows to k: its table's rows t; pointers: the run
 * reads pointer rows in place (one-shot runs). */
FL_HD void fl_zc_count_arg(fl_zc_count *k, const uint32_t *per_arg, uint32_t a,
                           const fl_zc_table *t, int pointers) {
  const uint32_t miss = per_arg[FL_MISS_COUNTERS * a], ptr = per_arg[FL_MISS_COUNTERS * a + 1];
  if (t->rows) k->misses += miss;
  if (pointers && (t->rows || t->slots.vec_stride)) k->pointers += ptr;
  k->all += miss + ptr;
}

/* Whether a batch with `rows` qualifying unique rows takes the device path. */
FL_HD int fl_zc_take(uint64_t rows, uint64_t limit) { return rows > 0 && rows <= limit; }

/* How a batch's rows go: none read in place; its dense misses read in
 * place into the staging, the rest gathered by the host; or every unique
 * row read in place, into every missed position. */
enum { FL_ZC_NONE = 0, FL_ZC_MISSES = 1, FL_ZC_ALL = 2 };
FL_HD int fl_zc_mode(fl_zc_count k, uint64_t limit) {
  const uint64_t q = k.misses + k.pointers;
  if (!fl_zc_take(q, limit)) return FL_ZC_NONE;
  return q == k.all ? FL_ZC_ALL : k.misses ? FL_ZC_MISSES : FL_ZC_NONE;
}

/* Unique rows the GPU reads in place. */
FL_HD uint64_t fl_zc_in_place_rows(fl_zc_count k, uint64_t limit) {
  const int m = fl_zc_mode(k, limit);
  return m == FL_ZC_ALL ? k.all : m == FL_ZC_MISSES ? k.misses : 0;
}

/* Unique rows left for the host to gather. */
FL_HD uint64_t fl_zc_host_rows(fl_zc_count k, uint64_t limit) {
  return k.all - fl_zc_in_place_rows(k, limit);
}

/* How much cheaper reading in place must time to count as paying. None:
 * the calibration times the reads in place on the device alone, while the
 * host's fetch in a query also pays the scatter's launch and the round trip
 * through the host that reading in place skips, a few us that make up the
 * margin; and under load the latency cap (fl_zc_latency_limit) holds the
 * limit to where reading in place costs PCIe little. With a margin of
 * 1.25 on the H200, the 64-row point (8 us in place against 11 gathered)
 * sat within noise of it, and caches of one store calibrated 0 or 400-700
 * rows. */
#define FL_ZC_MARGIN 1.0

/* The limit from both paths timed at the same row counts rows[0..n)
 * (ascending): zc_ns and host_ns, each fetch's ns. In place pays where
 * d = host - margin * zc >= 0. The limit is the count where d turns
 * negative after its first stretch of non-negative points, d taken as a
 * line between two points; the last point when d is still non-negative
 * there (nothing was measured beyond it: a batch's many rows stay with the
 * host, whose gather scales with threads while the PCIe reads do not). 0
 * when in place pays at no point. A batch takes the device path for its
 * few rows, never for its many (fl_zc_take), so counts below the first
 * paying point follow it too: there both paths cost about a launch and a
 * synchronization. */
FL_HD uint64_t fl_zc_limit_of(const double *rows, const double *zc_ns, const double *host_ns,
                              int n, double margin) {
  int i = 0;
  while (i < n && host_ns[i] < margin * zc_ns[i]) i++;
  if (i == n) return 0;
  while (i + 1 < n && host_ns[i + 1] >= margin * zc_ns[i + 1]) i++;
  if (i + 1 == n) return (uint64_t)rows[i];
  double d0 = host_ns[i] - margin * zc_ns[i], d1 = host_ns[i + 1] - margin * zc_ns[i + 1];
  return (uint64_t)(rows[i] + (rows[i + 1] - rows[i]) * d0 / (d0 - d1));
}

/* How much a fetch in place may grow over its smallest measured one and
 * still count as bound by a row's latency (fl_zc_latency_limit). */
#define FL_ZC_LATENCY 1.5

/* The most rows a fetch in place reads while bound by a row's latency over
 * PCIe: the count where its time (zc_ns, at the ascending counts rows[0..n))
 * reaches `factor` times the first point's, on a line between two points;
 * the last point when it never does; 0 with no point. Past it a fetch is
 * bound by PCIe's request rate, which every query of the device shares,
 * while the host's gather of the same rows runs on CPU threads and one
 * bulk upload: the calibration times a fetch alone, so the limit it
 * measures by cost (fl_zc_limit_of) holds only up to here under load
 * (serve_bench on the H200, 4 callers: a 4,096-row limit cost them a
 * fifth of their throughput and raised their p50 by 30%). */
FL_HD uint64_t fl_zc_latency_limit(const double *rows, const double *zc_ns, int n, double factor) {
  if (n == 0) return 0;
  const double cap = factor * zc_ns[0];
  for (int i = 1; i < n; i++)
    if (zc_ns[i] >= cap)
      return (uint64_t)(rows[i - 1] +
                        (rows[i] - rows[i - 1]) * (cap - zc_ns[i - 1]) / (zc_ns[i] - zc_ns[i - 1]));
  return (uint64_t)rows[n - 1];
}

#endif
