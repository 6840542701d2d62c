/* query.h: the query path's internal interface between the shared host-side
 * orchestration (query.c, misses.c) and the two engines that run the probes
 * and copies: CUDA kernels (query_cuda.c) and host loops (query_host.c). */
#ifndef FL_FUSION_QUERY_H
#define FL_FUSION_QUERY_H

#include "cache/cuda_state.h"
#include "cache/query_side.h"
#include "batch/batch.h"
#include "batch/miss_set.h"

/* Where one query's buffers can be used from the device (CUDA): their
 * device addresses, or NULL for unregistered host memory. */
typedef struct fl_query_view {
  const uint64_t *ids;
  uint8_t *out;
} fl_query_view;

/* A prepared query's kept scratch and launch graph (plan.c). */
typedef struct fl_plan fl_plan;

/* One part's share of an fl_query call. */
typedef struct fl_part_batch {
  fl_cache *c;
  const fl_cache_fixed *f;   /* the cache's fixed facts (query_side.h) */
  uint32_t part;
  uint32_t n_args;
  fl_batch_arg *args;        /* host copy; ids/out as the caller gave them */
  const uint32_t *query_of;  /* caller's query index of each arg */
  uint64_t n_keys;
  uint64_t max_row;          /* largest vec_bytes among the args */
  uint32_t now;              /* batch counter (LRU clock, coin input) */
  void *stream;              /* caller's CUDA stream */
  const fl_query_view *views; /* CUDA, prepared queries: per caller's query (query_of),
                                 found once; NULL: found by this call */
  fl_plan *plan;        /* CUDA, a prepared query of one part batch; else NULL */
  int prefetch;         /* fl_prefetch: no outputs (args' out NULL), every miss admitted
                           before the call returns, counted apart */
} fl_part_batch;

/* The miss path's host side (misses.c). per_arg: FL_MISS_COUNTERS counters
 * per arg (miss_set.h); ids, refs: per uid, as the engines fill them. */
/* Packs each arg's unique rows in the staging (16-byte aligned per arg):
 * stage_base[a] is arg a's byte offset; returns the staging's size. */
uint64_t fl_misses_layout(const fl_part_batch *b, const uint32_t *per_arg, uint64_t *stage_base);
/* Called as the staging fills: bytes [begin, end) of it hold their rows
 * (stretches in order, covering the staging). */
typedef fl_status (*fl_staged_fn)(void *ctx, uint64_t begin, uint64_t end);
/* Smallest stretch handed over before the end: an upload under ~256 KiB is
 * bound by its fixed cost (a few us), not by PCIe bandwidth. */
#define FL_FETCH_UPLOAD_MIN (256u << 10)
/* Fetches the unique rows from the store into the staging (host memory):
 * misses by id, pointer rows through their references; in_place (optional,
 * per table): non-NULL when the table's misses are not the host's to fetch
 * (the GPU reads them in place, fusion/zero_copy.h). staged (optional) is told of
 * the staging's stretches as they fill (while the gather runs when every row
 * comes by id); its failure fails the fetch with its status. want_refs: the
 * misses fetched by id also get their store references at their uids in
 * refs (0 when the store lacks the id), for the pointers a unified index
 * may take, from the lookups the gather makes anyway. for_device: the
 * staging goes to the GPU and is not read here again (dram_store/row_copy.h). */
fl_status fl_misses_fetch(const fl_part_batch *b, const uint32_t *per_arg, const uint64_t *ids,
                          uint64_t *refs, int want_refs, uint8_t *staging,
                          const uint64_t *stage_base, const void *const *in_place,
                          fl_staged_fn staged, void *ctx, int for_device);
/* Store references of the unique misses of the tables read in place (not
 * fetched by fl_misses_fetch), at their uids in refs. */
fl_status fl_misses_refs(const fl_part_batch *b, const uint32_t *per_arg, const uint64_t *ids,
                         uint64_t *refs, const void *const *in_place);

/* The calling thread's fl_query_timing, which the engines add to (timing.c). */
fl_query_timing *fl_query_timing_here(void);

/* fl_query's checks (query.c), or fl_prefetch's (outputs may be NULL);
 * FL_OK or the failure, recorded on c. */
fl_status fl_query_validate(fl_cache *c, const fl_table_query *q, uint32_t n, int prefetch);
/* fl_query (or fl_prefetch) after the checks: views and plan as in
 * fl_part_batch (the plan serves a call of one part batch only; NULL: none). */
fl_status fl_query_run(fl_cache *c, const fl_table_query *queries, uint32_t n_queries,
                       void *stream, const fl_query_view *views, fl_plan *plan, int prefetch);
/* Fills views[i] for queries[i] (CUDA caches). */
void fl_query_cuda_views(const fl_table_query *queries, uint32_t n_queries, fl_query_view *views);
/* A plan for a prepared query (NULL on out of memory); its destruction gives
 * its scratch back to the cache. */
fl_plan *fl_plan_create(void);
void fl_plan_destroy(fl_cache *c, fl_plan *pl);
/* Whether the plan's next runs are launches (fl_prepared_launch): they
 * replay the graph with the gate and leave their host half (the counters,
 * the gather, the gate, the round) to the cache's answerer, returning at
 * once. Runs without that graph (the first, one after a failure, outputs in
 * host memory) answer on the calling thread, as fl_prepared_run does. */
void fl_plan_set_async(fl_plan *pl, int async);
/* Waits for the host half of the plan's last run; returns the failure of a
 * run not reported yet, once. */
fl_status fl_plan_wait(fl_cache *c, fl_plan *pl);

/* Engines: run a part batch end to end (probe, copies, misses, admission). */
fl_status fl_query_part_host(fl_part_batch *b);
fl_status fl_query_part_cuda(fl_part_batch *b);
/* Grows the CUDA scratch sets of `callers` concurrent callers to a batch of
 * `keys` keys in `queries` args of the widest table, ids and outputs in host
 * memory (the most a batch of that shape needs; fl_cache_reserve). */
fl_status fl_query_cuda_reserve(fl_cache *c, uint64_t keys, uint32_t queries, uint32_t callers);

/* Adds a part batch's lookups, misses and pointer hits to the per-table
 * counters, and to its part's for the shift detector; a prefetch's to the
 * prefetch counters only. */
void fl_query_count(const fl_part_batch *b, const uint32_t *per_arg);
/* Message for an out-of-range id at batch position pos. */
fl_status fl_query_range_error(const fl_part_batch *b, uint64_t pos, uint64_t id);

#endif
