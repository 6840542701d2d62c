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

/* Keys answered from the store: misses, and hits of unified-index pointers
 * (which skip the store's lookup). Grouped by arg, and within an arg the
 * pointers first (misses.c). */
typedef struct fl_misses {
  uint64_t n;
  uint32_t *pos;        /* batch positions */
  uint64_t *ids;        /* their ids */
  uint64_t *refs;       /* unified-index pointer (low bit set), 0 for a miss */
  uint32_t *arg;        /* their arg */
  uint64_t *src_off;    /* byte offset of each fetched row in the staging rows */
  uint64_t *per_arg;    /* rows per arg (n_args) */
  uint64_t *dram_per_arg; /* of which unified-index pointers, first in the arg */
  uint64_t staging_bytes;
} fl_misses;

/* An admission plan: rows to copy from staging into slots and publish, and
 * unified-index pointers to publish (slot = row address | 1, row_bytes 0). */
typedef struct fl_admit_plan {
  uint64_t n;
  uint64_t *keys, *slots, *src_off;
  uint32_t *row_bytes;
} fl_admit_plan;

/* Sorts raw misses (pos, ids, refs: n entries, any order) by arg, pointers
 * first, into m, and lays out the staging rows (each arg's rows packed,
 * 16-byte aligned per arg). */
fl_status fl_misses_group(const fl_part_batch *b, const uint32_t *pos, const uint64_t *ids,
                          const uint64_t *refs, uint64_t n, fl_misses *m);
void fl_misses_free(fl_misses *m);
/* Fetches every miss's row from the store into staging (host memory). gen
 * receives each table's generation read before the fetch. */
fl_status fl_misses_fetch(const fl_part_batch *b, const fl_misses *m, uint8_t *staging,
                          uint64_t *gen);
/* Chooses which rows enter the cache (unique keys, the coin, unchanged
 * tables; a unified-index pointer that wins the coin is promoted to a cached
 * vector), makes room and allocates slots; misses that do not enter leave a
 * unified-index pointer while the part is under its share of
 * cfg.unified_entries. Under c->lock. */
fl_status fl_admit_plan_make(const fl_part_batch *b, const fl_misses *m, const uint64_t *gen,
                             fl_admit_plan *plan);
/* Frees the slots of rows whose insert did not publish; counts admissions,
 * promotions and pointers. */
void fl_admit_plan_finish(const fl_part_batch *b, fl_admit_plan *plan, const uint8_t *result);
/* Gives back every slot of a plan that will not run, and frees the plan. */
void fl_admit_plan_abandon(const fl_part_batch *b, fl_admit_plan *plan);
/* After a failed admission launch, when which rows were published is unknown:
 * erases the plan's keys, retires published slabs, frees the rest. */
void fl_admit_plan_undo(const fl_part_batch *b, fl_admit_plan *plan);
void fl_admit_plan_free(fl_admit_plan *plan);

/* Engines: run a part batch end to end (probe, copies, misses, admission). */
fl_status fl_query_part_host(fl_part_batch *b);
fl_status fl_query_part_cuda(fl_part_batch *b);

/* Adds a part batch's lookups and misses to the per-table counters. */
void fl_query_count(const fl_part_batch *b, const fl_misses *m);
/* Message for an out-of-range id at batch position pos. */
fl_status fl_query_range_error(const fl_part_batch *b, uint64_t pos, uint64_t id);

#endif
