/* remote.h: the store's cluster tier (docs/TIERS.md). A store created over a
 * Redis Cluster keeps its model there; its tables hold a bounded cache of
 * the cluster's rows (every table in hashed-slot storage, dense ones too),
 * filled by gathers and evicted by a CLOCK hand. This header is what the
 * store's files share about it: remote_read.c (gather misses fetched and
 * filled in), remote_write.c (writes through the cluster, applying other
 * processes' changes), local_evict.c (the CLOCK hand, flushes) and
 * store_cluster.c (create/open, budget, tier statistics).
 *
 * Lock order: fill_lock, then a table's write_lock. Fills and eviction hold
 * fill_lock; writers (upsert, remove, remote invalidations) take only the
 * table's write_lock and bump the table's `changes`, so a fill whose fetch
 * raced a change drops its rows instead of caching a stale one. */
#ifndef FL_DRAM_STORE_REMOTE_H
#define FL_DRAM_STORE_REMOTE_H

#include "cluster/client.h"
#include "cluster/inval.h"
#include "cluster/rows.h"
#include "dram_store/store_impl.h"

struct fl_remote {
  fl_cluster *cluster;       /* the client */
  fl_keyspace ks;            /* the model's key layout */
  fl_inval *inval;           /* the change subscriber */
  uint64_t self;             /* this store's sender id in change messages */
  _Atomic uint64_t budget;   /* local tier budget, vector bytes */
  pthread_mutex_t fill_lock; /* serializes fills and the CLOCK hand */
  uint32_t hand_table;       /* CLOCK hand: table ... */
  uint64_t hand_slot;        /* ... and slot it points at (fill_lock) */
};

/* Gather rows the local tier lacked (gather.c collects them): fetched from
 * the cluster into their outputs and, within budget and when no change
 * raced the fetch, cached locally. Absent hashed ids follow `policy` (zero
 * and counted in miss[], or FL_ERR_NOT_FOUND); absent dense ids read as
 * zero. `absent` holds global row numbers of the parts (start[] as in
 * gather.c); `changes` the tables' change counters read before the local
 * pass. */
fl_status fl_remote_fill(fl_store *s, const char *call, const fl_gather_part *parts, uint32_t n,
                         const size_t *start, const uint64_t *absent, size_t n_absent,
                         const uint64_t *changes, fl_missing policy, _Atomic uint64_t *miss);

/* Writes n rows of t to the cluster (vectors NULL: deletes them), then
 * fl_remote_changed. */
fl_status fl_remote_write(fl_store *s, fl_table *t, const uint64_t *ids, size_t n,
                          const void *vectors);
/* Writes n rows of t to the cluster, nothing else (bulk loads call
 * fl_remote_changed once at the end). */
fl_status fl_remote_put(fl_store *s, fl_table *t, const uint64_t *ids, size_t n,
                        const void *vectors);
/* Rows of t changed in the cluster (ids NULL: any row): drops them from the
 * local tier, tells the store's subscribers (the caches) and publishes the
 * change to the other processes. */
fl_status fl_remote_changed(fl_store *s, fl_table *t, const uint64_t *ids, size_t n);
/* Stops the subscriber and closes the client (fl_store_destroy); no-op for a
 * plain store. */
void fl_remote_close(fl_store *s);
/* The subscriber's callback: another process changed rows (inval.h). */
void fl_remote_apply(void *ctx, uint32_t table, const uint64_t *ids, size_t n);

/* local_evict.c. Under fill_lock: evicts rows with the CLOCK hand until
 * `need` more bytes fit the budget (or nothing is left to evict). */
void fl_local_make_room(fl_store *s, uint64_t need);
/* Drops rows from t's local tier (ids NULL: all of them) and bumps its
 * change counter. Takes t's write_lock. */
void fl_local_drop(fl_table *t, const uint64_t *ids, size_t n);
/* Vector bytes the local tier holds. */
uint64_t fl_local_bytes(const fl_store *s);

#endif
