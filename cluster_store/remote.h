/* remote.h: the cluster tier (docs/TIERS.md), one implementation of the
 * store's operations table (dram_store/tier.h). A store created over a
 * Redis Cluster keeps its model there; its tables hold a bounded cache of
 * the cluster's rows (dram_store/cached.h), filled by gathers and evicted by
 * a CLOCK hand within a byte budget. This header is what the tier's files
 * share: remote_read.c (gathers: the local pass, then the rows it lacked
 * fetched and cached), remote_write.c (writes through the cluster, and the
 * changes other processes publish) and store_cluster.c (create/open, the
 * operations table, budget, statistics).
 *
 * Lock order: fill_lock, then a table's write lock (inside cached.h's
 * calls). Fills and eviction hold fill_lock; writers (upsert, remove, remote
 * invalidations) drop local rows through fl_cached_drop only, which bumps
 * the table's change count, so a fill whose fetch raced a change caches
 * nothing of that table. */
#ifndef FL_CLUSTER_STORE_REMOTE_H
#define FL_CLUSTER_STORE_REMOTE_H

#include <pthread.h>

#include "cluster/client.h"
#include "cluster/inval.h"
#include "cluster/rows.h"
#include "dram_store/cached.h"
#include "dram_store/tier.h"

/* The tier's state (fl_store_tier). */
typedef struct fl_remote {
  fl_cluster *cluster;       /* the client */
  fl_keyspace ks;            /* the model's key layout */
  fl_inval *inval;           /* the change subscriber */
  uint64_t self;             /* this store's sender id in change messages */
  _Atomic uint64_t budget;   /* local tier budget, vector bytes */
  pthread_mutex_t fill_lock; /* serializes fills and the CLOCK hand */
  fl_clock_hand hand;        /* the CLOCK hand (fill_lock) */
} fl_remote;

/* tier.h's gather: the local pass collects the rows the tables lack (every
 * row while they are bypassed: no budget, or the change channel down); they
 * are fetched from the cluster into their outputs and, within budget and
 * when no change raced the fetch, cached. Absent hashed ids follow the
 * policy (zero and counted missing, or FL_ERR_NOT_FOUND); absent dense ids
 * read as zero. */
fl_status fl_remote_gather(fl_store *s, const fl_gather *g);

/* tier.h's write: n rows to the cluster (vectors NULL: deletes them), then
 * fl_remote_changed, even after a failed write (it may have reached some
 * nodes). */
fl_status fl_remote_write(fl_store *s, uint32_t table, const uint64_t *ids, size_t n,
                          const void *vectors);
/* tier.h's put and load: n rows to the cluster, nothing else (bulk writes
 * tell once, at the end). */
fl_status fl_remote_put(fl_store *s, uint32_t table, const uint64_t *ids, size_t n,
                        const void *vectors);
/* tier.h's changed and loaded: any row of the table may have changed. */
fl_status fl_remote_changed_all(fl_store *s, uint32_t table);
/* The subscriber's callback: another process changed rows (inval.h). */
void fl_remote_apply(void *ctx, uint32_t table, const uint64_t *ids, size_t n);

#endif
