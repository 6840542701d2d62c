/* query_side.h: the cache as the query path sees it; for fusion/, which
 * reads and changes the cache only through this header, admit.h
 * (admission) and cuda_state.h (scratch, events): the facts fixed when the
 * cache is created, read-only; a part's index; a query's registration with
 * reclamation and its batch number; the tables' generations; the counters
 * it adds to. None of it takes the cache's lock. */
#ifndef FL_CACHE_QUERY_SIDE_H
#define FL_CACHE_QUERY_SIDE_H

#include <stdint.h>

#include "cache/index.h"
#include "common/parallel.h"
#include "include/fleche.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Per-table facts the query path needs. */
typedef struct fl_table_info {
  fl_code code;          /* flat-key code of the table */
  uint32_t part;         /* part serving the table */
  uint32_t cls;          /* slab class in that part's pool */
  uint32_t vec_bytes;    /* dim * element size */
  uint32_t dim;
  fl_id_kind id_kind;
} fl_table_info;

struct fl_cuda_state;
struct fl_courier;

/* What fl_cache_create fixes for the cache's life. */
typedef struct fl_cache_fixed {
  fl_config cfg;              /* key_bits resolved: 32 or 64 */
  uint32_t loc_bits;          /* the index's location width (cache/index.h) */
  fl_backend backend;         /* resolved: HOST or CUDA */
  fl_store *store;
  uint32_t n_tables;
  fl_table_info *tables;
  uint32_t n_parts;
  fl_workers *workers;        /* host backend threads; NULL on CUDA (the store gathers) */
  struct fl_cuda_state *cuda; /* CUDA backend state (cuda_state.h), NULL on host */
  /* CUDA: answers prepared queries launched without waiting
   * (fl_prepared_launch; fusion/plan.c). It spins a while for the next run
   * before it sleeps. */
  struct fl_courier *answerer;
} fl_cache_fixed;

const fl_cache_fixed *fl_cache_fixed_of(const fl_cache *c);

/* fl_cache_create's cache (include/fleche.h), without the query path's
 * kernels: fusion/'s fl_cache_create loads those after it. */
fl_status fl_cache_new(fl_store *store, const fl_config *cfg, fl_cache **out);

/* Part p's index (read by probes without the lock: index.h). */
const fl_index_view *fl_cache_index(const fl_cache *c, uint32_t part);

/* A query's batch number: the LRU clock and the coin's input. */
uint32_t fl_cache_next_batch(fl_cache *c);
/* Registers a query's reads with reclamation: the slabs it may read stay
 * until fl_cache_query_end's event (NULL: now) has fired. < 0: out of
 * memory. */
int64_t fl_cache_query_begin(fl_cache *c);
void fl_cache_query_end(fl_cache *c, int64_t ticket, void *event);

/* Reads each table's generation into gen: before any row of the batch is
 * read from the store (by the host's fetch, or in place by the GPU), so that
 * admission can skip the tables changed since (fl_cache_stale). */
void fl_cache_generations(const fl_cache *c, uint64_t *gen);
/* 1 when table t changed in the store since gen was read: rows fetched
 * before may be stale and must not be admitted. */
int fl_cache_stale(const fl_cache *c, const uint64_t *gen, uint32_t t);
/* Part p's share of cfg.unified_entries (0: no unified-index pointers). */
uint64_t fl_cache_unified_limit(const fl_cache *c, uint32_t part);

/* The cache's counters (fl_cache_stats); relaxed. */
typedef enum fl_stat {
  FL_STAT_QUERIES,
  FL_STAT_ADMISSIONS,
  FL_STAT_EVICTIONS,
  FL_STAT_INVALIDATIONS,
  FL_STAT_NS_INDEX,
  FL_STAT_NS_HIT_COPY,
  FL_STAT_NS_MISS_FETCH,
  FL_STAT_NS_ADMISSION,
  FL_STAT_UNIQUE_MISSES,
  FL_STAT_NS_STORE_GATHER,
  FL_STAT_NS_ADMISSION_WAIT,
  FL_STAT_NS_MISS_CPU,
  FL_STAT_ZERO_COPY_ROWS,
  FL_STAT_ZERO_COPY_STALE,
  FL_STAT_ROUNDS_SHED,
  FL_STAT_ROUNDS_STARVED,
  FL_STAT_SLABS_RECYCLED,
  FL_STAT_SHIFT_OPENS,
  FL_STAT_GPU_NS_INDEX,   /* cfg.profile only */
  FL_STAT_GPU_NS_HIT_COPY,
  FL_STAT_PREFETCHES,
  FL_STAT_PREFETCH_LOOKUPS,
  FL_STAT_PREFETCH_MISSES,
  FL_STAT_COUNT
} fl_stat;
void fl_cache_add(fl_cache *c, fl_stat s, uint64_t v);
/* A part batch's lookups, and of them those its pool did not serve, for
 * TinyLFU's shift detector (admit_shift.h), which takes them at the next
 * admission: every batch counts, all-hit ones (no admission) and those
 * whose round is shed (CUDA) included, so that the share it sees does not
 * move with the rate of sheds. */
void fl_cache_count_shift(fl_cache *c, uint32_t part, uint64_t lookups, uint64_t missed);
/* Adds to table t's lookups, hits, unified-index hits and misses. */
void fl_cache_count_table(fl_cache *c, uint32_t t, uint64_t lookups, uint64_t hits,
                          uint64_t dram_hits, uint64_t misses);

#ifdef __cplusplus
}
#endif
#endif
