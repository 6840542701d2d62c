/* query.h: the query path's internal interface between the shared host-side
 * orchestration (query.c, misses.c) and the two engines that run the probes
 * and copies: CUDA kernels (query_cuda.c) and host loops (query_host.c). */
#ifndef FL_FUSION_QUERY_H
#define FL_FUSION_QUERY_H

#include "cache/cache.h"
#include "fusion/batch.h"

/* One part's share of an fl_query call. */
typedef struct fl_part_batch {
  fl_cache *c;
  uint32_t part;
  uint32_t n_args;
  fl_batch_arg *args;        /* host copy; ids/out as the caller gave them */
  const uint32_t *query_of;  /* caller's query index of each arg */
  uint64_t n_keys;
  uint64_t max_row;          /* largest vec_bytes among the args */
  uint32_t now;              /* batch counter (LRU clock, coin input) */
  void *stream;              /* caller's CUDA stream */
} fl_part_batch;

/* Misses of a part batch, grouped by arg (misses.c). */
typedef struct fl_misses {
  uint64_t n;
  uint32_t *pos;        /* batch positions, grouped by arg */
  uint64_t *ids;        /* their ids */
  uint32_t *arg;        /* their arg */
  uint64_t *src_off;    /* byte offset of each fetched row in the staging rows */
  uint64_t *per_arg;    /* misses per arg (n_args) */
  uint64_t staging_bytes;
} fl_misses;

/* An admission plan: rows to copy from staging into slots and publish. */
typedef struct fl_admit_plan {
  uint64_t n;
  uint64_t *keys, *slots, *src_off;
  uint32_t *row_bytes;
  uint32_t *table;
} fl_admit_plan;

/* Sorts raw misses (pos, ids: n entries, any order) by arg into m, and lays
 * out the staging rows (each arg's rows packed, 16-byte aligned per arg). */
fl_status fl_misses_group(const fl_part_batch *b, const uint32_t *pos, const uint64_t *ids,
                          uint64_t n, fl_misses *m);
void fl_misses_free(fl_misses *m);
/* Fetches every miss's row from the store into staging (host memory). gen
 * receives each table's generation read before the fetch. */
fl_status fl_misses_fetch(const fl_part_batch *b, const fl_misses *m, uint8_t *staging,
                          uint64_t *gen);
/* Chooses which misses enter the cache (unique keys, the coin, unchanged
 * tables), makes room and allocates slots. Under c->lock. */
fl_status fl_admit_plan_make(const fl_part_batch *b, const fl_misses *m, const uint64_t *gen,
                             fl_admit_plan *plan);
/* Frees the slots of rows whose insert did not publish; counts admissions. */
void fl_admit_plan_finish(const fl_part_batch *b, fl_admit_plan *plan, const uint8_t *result);
void fl_admit_plan_free(fl_admit_plan *plan);

/* Engines: run a part batch end to end (probe, copies, misses, admission). */
fl_status fl_query_part_host(fl_part_batch *b);
fl_status fl_query_part_cuda(fl_part_batch *b);

/* Adds a part batch's lookups and misses to the per-table counters. */
void fl_query_count(const fl_part_batch *b, const fl_misses *m);
/* Message for an out-of-range id at batch position pos. */
fl_status fl_query_range_error(const fl_part_batch *b, uint64_t pos, uint64_t id);

#endif
