/* misses.c: the host side of the miss path, shared by both engines: the
 * staging layout of a batch's unique rows, their fetch from the store (store
 * misses by id, unified-index pointer rows by reference), store references
 * for new pointers, what a round asks of the pool, which tables changed since
 * the fetch, the per-table counts and the out-of-range message. No work here
 * is per missed position; the fetch is per unique row. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common/clock.h"
#include "common/error.h"
#include "common/mutant.h"
#include "dram_store/store_internal.h"
#include "fusion/query.h"

static uint32_t uniques(const uint32_t *per_arg, uint32_t a) {
  return per_arg[FL_MISS_COUNTERS * a] + per_arg[FL_MISS_COUNTERS * a + 1];
}

uint64_t fl_misses_layout(const fl_part_batch *b, const uint32_t *per_arg, uint64_t *stage_base) {
  uint64_t bytes = 0;
  for (uint32_t a = 0; a < b->n_args; a++) {
    stage_base[a] = bytes;
    bytes += fl_miss_stage_bytes(uniques(per_arg, a), b->args[a].vec_bytes);
  }
  return bytes;
}

/* Hands the staging to a consumer as the gather fills it. Rows land in
 * query order (fl_store_gather_watched), so each report extends a filled
 * prefix; a stretch is handed over once it is FL_FETCH_UPLOAD_MIN bytes
 * long, the rest at the end. */
typedef struct stage_feed {
  const fl_table_query *q;
  const uint32_t *row_bytes; /* per query */
  uint32_t nq, at;           /* the query holding the next row */
  uint64_t at_row0;          /* its first row, counted over the queries */
  uint64_t rows, bytes;      /* in all (bytes: the staging's end) */
  uint64_t fed;              /* staging bytes handed over */
  uint8_t *staging;
  fl_staged_fn staged;
  void *ctx;
  fl_status st;
  uint64_t cpu_ns;           /* CPU time of the hand-overs (the uploads' enqueueing) */
} stage_feed;

static void feed_rows(void *ctx, uint64_t rows) {
  stage_feed *f = ctx;
  if (f->st != FL_OK) return;
  while (f->at < f->nq && rows >= f->at_row0 + f->q[f->at].n) f->at_row0 += f->q[f->at++].n;
  uint64_t end = f->bytes;
  if (rows < f->rows)
    end = (uint64_t)((uint8_t *)f->q[f->at].out - f->staging) +
          (rows - f->at_row0) * f->row_bytes[f->at];
  if (end - f->fed < FL_FETCH_UPLOAD_MIN && rows < f->rows) return;
  uint64_t cpu0 = fl_thread_cpu_ns();
  f->st = f->staged(f->ctx, f->fed, end);
  f->fed = end;
  f->cpu_ns += fl_thread_cpu_ns() - cpu0;
}

fl_status fl_misses_fetch(const fl_part_batch *b, const uint32_t *per_arg, const uint64_t *ids,
                          uint64_t *refs, int want_refs, uint8_t *staging,
                          const uint64_t *stage_base, const void *const *in_place,
                          fl_staged_fn staged, void *ctx, int for_device) {
  fl_cache *c = b->c;
  uint64_t cpu0 = fl_thread_cpu_ns();
  uint32_t na = b->n_args ? b->n_args : 1;
  fl_table_query *q = malloc(na * sizeof *q);
  fl_ref_query *rq = malloc(na * sizeof *rq);
  uint32_t *row_bytes = malloc(na * sizeof *row_bytes);
  uint64_t **refs_out = malloc(na * sizeof *refs_out);
  if (!q || !rq || !row_bytes || !refs_out) {
    free(q);
    free(rq);
    free(row_bytes);
    free(refs_out);
    return fl_fail(c, FL_ERR_OUT_OF_MEMORY, "out of host memory");
  }
  /* Per arg: its misses by id (the bottom of its uid range), then its
   * pointer rows by reference (the top), staged in that order. */
  uint32_t nq = 0, nr = 0;
  uint64_t rows = 0, bytes = 0;
  for (uint32_t a = 0; a < b->n_args; a++) {
    const fl_batch_arg *g = &b->args[a];
    uint32_t miss = per_arg[FL_MISS_COUNTERS * a], ptr = per_arg[FL_MISS_COUNTERS * a + 1];
    uint8_t *out = staging + stage_base[a];
    /* Misses read in place keep their staging rows, unfetched here. */
    uint32_t fetch = in_place && in_place[g->table] ? 0 : miss;
    if (fetch) {
      row_bytes[nq] = g->vec_bytes, refs_out[nq] = refs + g->key_offset;
      q[nq++] = (fl_table_query){g->table, ids + g->key_offset, fetch, out};
    }
    uint64_t top = g->key_offset + g->n - ptr;
    if (ptr)
      rq[nr++] = (fl_ref_query){g->table, ids + top, refs + top, ptr,
                                out + (uint64_t)miss * g->vec_bytes};
    rows += fetch + ptr;
    if (fetch + ptr) bytes = stage_base[a] + (uint64_t)(miss + ptr) * g->vec_bytes;
  }
  /* A consumer gets the rows as they land when they all come by id (the
   * staging then fills in query order); with pointer rows, at the end. The
   * stretches span the staging of rows read in place: the consumer leaves
   * those out. */
  stage_feed feed = {q, row_bytes, nq, 0, 0, rows, bytes, 0, staging, staged, ctx, FL_OK, 0};
  fl_gather_watch watch = {feed_rows, &feed};
  uint64_t t0 = fl_now_ns(), cpu1 = fl_thread_cpu_ns();
  fl_status st = FL_OK;
  if (nq)
    st = fl_store_gather_watched(b->f->store, q, nq, b->f->cfg.missing, staged && !nr ? &watch : NULL,
                                 want_refs ? refs_out : NULL, for_device);
  if (st == FL_OK && nr)
    st = fl_store_gather_refs(b->f->store, rq, nr, b->f->cfg.missing, NULL, for_device);
  uint64_t cpu2 = fl_thread_cpu_ns();
  fl_cache_add(c, FL_STAT_NS_STORE_GATHER, fl_now_ns() - t0);
  fl_cache_add(c, FL_STAT_UNIQUE_MISSES, rows);
  fl_query_timing_here()->fetched_rows += rows;
  if (st != FL_OK) fl_fail(c, st, "%s", fl_store_last_error(b->f->store));
  else if (staged && (feed.fed < bytes || rows == 0)) feed_rows(&feed, rows);
  if (st == FL_OK) st = feed.st;
  /* This thread's CPU time outside the gathers, and the hand-overs made
   * from inside a watched gather. */
  fl_cache_add(c, FL_STAT_NS_MISS_CPU, (cpu1 - cpu0) + (fl_thread_cpu_ns() - cpu2) + feed.cpu_ns);
  free(q);
  free(rq);
  free(row_bytes);
  free(refs_out);
  return st;
}

fl_status fl_misses_refs(const fl_part_batch *b, const uint32_t *per_arg, const uint64_t *ids,
                         uint64_t *refs, const void *const *in_place) {
  for (uint32_t a = 0; a < b->n_args; a++) {
    const fl_batch_arg *g = &b->args[a];
    uint32_t miss = per_arg[FL_MISS_COUNTERS * a];
    if (!miss || !in_place[g->table]) continue;
    fl_status st = fl_store_refs(b->f->store, g->table, ids + g->key_offset, miss,
                                 refs + g->key_offset);
    if (st != FL_OK) return fl_fail(b->c, st, "%s", fl_store_last_error(b->f->store));
  }
  return FL_OK;
}

void fl_query_count(const fl_part_batch *b, const uint32_t *per_arg) {
  uint64_t lookups = 0, missed = 0;
  for (uint32_t a = 0; a < b->n_args; a++) {
    uint64_t misses = per_arg[FL_MISS_COUNTERS * a + 2], dram = per_arg[FL_MISS_COUNTERS * a + 3];
    if (!b->prefetch)
      fl_cache_count_table(b->c, b->args[a].table, b->args[a].n, b->args[a].n - misses - dram, dram,
                           misses);
    lookups += b->args[a].n, missed += misses + dram;
  }
  /* A prefetch's lookups are not the workload's: they count apart, and the
   * shift detector does not see them (the query that follows does). */
  if (b->prefetch) {
    fl_cache_add(b->c, FL_STAT_PREFETCH_LOOKUPS, lookups);
    fl_cache_add(b->c, FL_STAT_PREFETCH_MISSES, missed);
  } else {
    fl_cache_count_shift(b->c, b->part, lookups, missed);
  }
}

fl_status fl_query_range_error(const fl_part_batch *b, uint64_t pos, uint64_t id) {
  uint32_t a = 0;
  while (a + 1 < b->n_args && b->args[a + 1].key_offset <= pos) a++;
  uint64_t at = pos - b->args[a].key_offset;
  const fl_table_desc *d = fl_store_desc(b->f->store, b->args[a].table);
  return fl_fail(b->c, FL_ERR_OUT_OF_RANGE,
                 "query %u, table %u ('%s'): id %llu at position %llu is out of range "
                 "(corpus size %llu)",
                 b->query_of[a], b->args[a].table, d->name, (unsigned long long)id,
                 (unsigned long long)at, (unsigned long long)d->corpus_size);
}
