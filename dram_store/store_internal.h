/* store_internal.h: what the cache (cache/) and the query path (fusion/)
 * need from the store beyond the public API: change notifications, table
 * descriptors, the store's thread pool (also read by tools/bench_store),
 * references to rows for the unified index, watched gathers and zero-copy
 * mappings. */
#ifndef FL_DRAM_STORE_STORE_INTERNAL_H
#define FL_DRAM_STORE_STORE_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "common/parallel.h"
#include "dram_store/seq_stripe.h"
#include "include/fleche.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Rows of `table` changed. `ids` lists the ids the call was given (an id may
 * not have existed, e.g. a remove of an absent id); ids == NULL (n == 0) means
 * any row of the table may have changed (fl_store_fill_synthetic). */
typedef void (*fl_store_change_fn)(void *ctx, uint32_t table, const uint64_t *ids, size_t n);

/* Called after the changed rows are visible, on the writer's thread, once per
 * upsert/remove/import/fill call that changed rows of `table`; callbacks are
 * serialized, and none runs after fl_store_unsubscribe returns (so a callback
 * must not itself subscribe or unsubscribe). Returns a subscription id >= 0,
 * or -1 on OOM. fl_store_load builds a new store: it has no subscribers. */
int fl_store_subscribe(fl_store *s, fl_store_change_fn fn, void *ctx);
void fl_store_unsubscribe(fl_store *s, int id);
/* The table's descriptor, NULL when out of range; valid while the store lives. */
const fl_table_desc *fl_store_desc(const fl_store *s, uint32_t table);
/* The store's thread pool, shared with the cache's miss path. */
fl_workers *fl_store_workers(fl_store *s);

/* Stable references to rows, for the cache's unified index: the address of the
 * row's vector, even (dense rows 2-byte aligned, hashed rows 8-byte aligned),
 * so the low bit is free for the cache's tag. refs[i] = 0 when the id is
 * absent (hashed); dense ids must be < corpus (FL_ERR_OUT_OF_RANGE otherwise,
 * refs untouched). Thread-safe with writers and gathers.
 *
 * Validity: a dense reference holds its id while the store lives. A hashed
 * reference holds its id until that id is removed; the slot's memory stays
 * readable while the store lives, but the slot may be handed to another id
 * (even before the remove's change callback runs: callbacks run after the
 * table's write lock is released, so a concurrent upsert can take the slot).
 * fl_store_gather_refs detects that through the slot's owner id and live
 * flag, so a stale reference costs a lookup by id, never a wrong row, however
 * often the slot was reused (refs.c). */
fl_status fl_store_refs(fl_store *s, uint32_t table, const uint64_t *ids, size_t n, uint64_t *refs);

/* One table's rows to fetch by reference. */
typedef struct fl_ref_query {
  uint32_t table;
  const uint64_t *ids;   /* the ids the references were taken for */
  const uint64_t *refs;  /* from fl_store_refs (low bit may be set: ignored); 0: look the id up */
  size_t n;
  void *out;             /* n rows of the table's row bytes, host memory */
} fl_ref_query;

/* Multi-threaded gather by reference (the store's thread pool), each row read
 * under its seqlock and checked to still belong to ids[i] (hashed tables: the
 * slot live and owned by ids[i]); a row that no longer does is looked up by id as
 * fl_store_gather would (zero-fill or FL_ERR_NOT_FOUND per policy). Counts
 * lookups in the table stats like fl_store_gather. missing (optional) as in
 * fl_store_gather. Inputs are validated as fl_store_gather does. for_device:
 * the outputs go to a GPU, not back to this CPU (dram_store/row_copy.h). */
fl_status fl_store_gather_refs(fl_store *s, const fl_ref_query *queries, uint32_t n_queries,
                               fl_missing policy, uint64_t *missing, int for_device);

/* A consumer of a gather's rows as they land: fn gets the number of leading
 * rows (all queries' rows in order) that are in their outputs, increasing,
 * the last time all of them; it runs on the gathering thread. */
typedef struct fl_gather_watch {
  void (*fn)(void *ctx, uint64_t rows);
  void *ctx;
} fl_gather_watch;

/* fl_store_gather (missing counts not returned) telling `watch` (optional)
 * as rows land: the calling thread watches while the store's workers gather.
 * A cluster store tells it once, at the end. No call after a failure.
 * refs_out (optional): per query, NULL or where its rows' references go
 * (fl_store_refs's, 0 for a row not found locally), from the lookups the
 * gather makes anyway. for_device as in fl_store_gather_refs. */
fl_status fl_store_gather_watched(fl_store *s, const fl_table_query *queries, uint32_t n_queries,
                                  fl_missing policy, const fl_gather_watch *watch,
                                  uint64_t *const *refs_out, int for_device);

/* Zero-copy reads: a GPU reads dense tables' rows, and hashed tables' rows
 * at their references (the cache's unified-index pointers), in place, under
 * the row seqlocks (seq_stripe.h), once that memory is registered for device
 * access. map and unmap return 0 on success. */
typedef int (*fl_region_fn)(void *p, size_t bytes);
/* Registers, through map, what zero-copy readers touch: the seqlock stripes,
 * every dense table's rows (blocks with their pages to themselves) and every
 * hashed table's slot chunks, those added later as they come (a write that
 * cannot map its new chunk fails as out of memory), except in a cluster
 * store's local tier.
 * Counted: the first call maps, later ones only count, and the last matching
 * fl_store_unmap_rows unmaps (through the first caller's unmap).
 * 0, or -1 when a map failed (what was mapped is unmapped, nothing counted).
 * Thread-safe. */
int fl_store_map_rows(fl_store *s, fl_region_fn map, fl_region_fn unmap);
void fl_store_unmap_rows(fl_store *s);
/* The seqlock stripes: FL_SEQ_STRIPES 32-bit counters. */
const uint32_t *fl_store_seq_stripes(const fl_store *s);
/* A dense table's rows (id i at + i * row bytes); NULL for hashed tables and
 * for every table of a cluster store's local tier. */
const void *fl_store_dense_rows(const fl_store *s, uint32_t table);
/* The slot layout of a table whose rows are read in place at their
 * references while the store is mapped (a hashed table outside a cluster
 * store's local tier); vec_stride 0 for the others. */
fl_slot_layout fl_store_slot_layout(const fl_store *s, uint32_t table);

/* Up to n rows of a table whose slots are read in place (as
 * fl_store_slot_layout tells), picked at random positions of its index
 * (seed): their ids and references. Returns how many (fewer when the table
 * holds few rows; 0 for other tables). Takes the table's write lock. For
 * timing reads of such rows (the cache's zero-copy calibration). */
uint64_t fl_store_sample_rows(fl_store *s, uint32_t table, uint64_t n, uint64_t seed,
                              uint64_t *ids, uint64_t *refs);

#ifdef __cplusplus
}
#endif
#endif
