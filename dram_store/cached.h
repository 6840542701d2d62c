/* cached.h: a store's tables as a bounded cache of a tier behind them, for
 * the cluster tier (cluster_store/) and nothing else. A cached store
 * (fl_store_new with cached set) keeps every table in hashed-slot storage,
 * dense ones too, so rows come and go; a read sets the row's CLOCK bit
 * (table.h) and the CLOCK hand here clears it and evicts rows found without.
 *
 * Each table counts its changes: fl_cached_drop bumps the count under the
 * table's write lock, and fl_cached_put caches nothing when the count moved
 * since the caller read it (fl_cached_changes) before fetching its rows, so a
 * fetch that raced a change never caches a row older than the change. Each
 * call takes the tables' write locks inside. A caller keeping a byte budget
 * serializes its evictions and puts (the cluster tier's fill_lock): the hand
 * is its state, and the room an eviction makes is for the put that follows. */
#ifndef FL_DRAM_STORE_CACHED_H
#define FL_DRAM_STORE_CACHED_H

#include "dram_store/tier.h"

/* The table's change count (see above). */
uint64_t fl_cached_changes(fl_store *s, uint32_t table);

/* One row to cache. */
typedef struct fl_cached_row {
  uint64_t id;     /* the id */
  const void *vec; /* its vector, the table's row bytes */
} fl_cached_row;
/* Caches n rows of `table`, unless its change count is no longer `changes`
 * or there is no memory for them: then none. */
void fl_cached_put(fl_store *s, uint32_t table, uint64_t changes, const fl_cached_row *rows,
                   size_t n);
/* Drops n rows of `table` (ids NULL: all of them) and bumps its change count. */
void fl_cached_drop(fl_store *s, uint32_t table, const uint64_t *ids, size_t n);

/* Where the CLOCK hand points: a table, and a slot of it. Starts zeroed. */
typedef struct fl_clock_hand {
  uint32_t table;
  uint64_t slot;
} fl_clock_hand;
/* Evicts rows with the hand until `bytes` vector bytes are freed or the hand
 * has passed every table twice (clearing every CLOCK bit, then evicting the
 * rest); returns the rows evicted. */
uint64_t fl_cached_evict(fl_store *s, fl_clock_hand *hand, uint64_t bytes);

#endif
