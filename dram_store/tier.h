/* tier.h: the tiers behind a store. fl_store is a front (store.c, gather.c,
 * copy.c, the formats: argument checks, tables, subscriptions, statistics)
 * over an operations table that does what differs between a store holding
 * its whole model (the local tier, local_tier.c) and a store over a Redis
 * Cluster (the cluster tier, cluster_store/), whose tables are only a bounded
 * cache of the cluster's rows (cached.h).
 *
 * For those two implementations only: the table, what a gather hands a tier,
 * the local pass a tier's gather runs first, and the pieces of the store a
 * tier uses. Other modules use fleche.h and store_internal.h. Every operation
 * gets arguments the front has checked (table numbers in range, ids in
 * range, pointers non-NULL where rows are given). */
#ifndef FL_DRAM_STORE_TIER_H
#define FL_DRAM_STORE_TIER_H

#include <stdatomic.h>

#include "dram_store/store_internal.h"

typedef struct fl_gather fl_gather;

typedef struct fl_store_ops {
  /* fl_store_upsert_rows and fl_store_remove: n > 0 rows of `table` written
   * (vectors NULL: removed, hashed tables), then the change told. */
  fl_status (*write)(fl_store *s, uint32_t table, const uint64_t *ids, size_t n,
                     const void *vectors);
  /* fl_store_fill_synthetic, which holds the table's write lock meanwhile:
   * `reserve` room for every row the fill makes (0, or fl_table_reserve's
   * failure, table.h: nothing is written), then `put` batch after batch, telling no
   * one. After the lock is released, `changed` tells that any row of the
   * table may have changed, even after a failed put. */
  int (*reserve)(fl_store *s, uint32_t table, uint64_t rows);
  fl_status (*put)(fl_store *s, uint32_t table, const uint64_t *ids, size_t n,
                   const void *vectors);
  fl_status (*changed)(fl_store *s, uint32_t table);
  /* fl_store_copy into this store: `load` batch after batch, then `loaded`
   * once when any row was copied. */
  fl_status (*load)(fl_store *s, uint32_t table, const uint64_t *ids, size_t n,
                    const void *vectors);
  fl_status (*loaded)(fl_store *s, uint32_t table);
  /* Every gather (fl_store_gather_parts): g's rows into their outputs, the
   * missing ones counted in g->miss; g->watch told as rows land (the front
   * tells it the total once this returns FL_OK). */
  fl_status (*gather)(fl_store *s, const fl_gather *g);
  /* FL_OK when the store's tables hold its whole model, so that they can be
   * saved, exported or copied from; else FL_ERR_UNSUPPORTED recorded on
   * `err` (the store the caller reports on) naming `call`. */
  fl_status (*whole)(fl_store *err, const char *call);
  /* The tier's fields of fl_store_tier_stats: local_budget_bytes,
   * model_bytes, and its counts since create (cluster_commands,
   * invalidations, resyncs; the front subtracts those at the last reset).
   * The front has filled the rest, local_bytes included. */
  void (*tier_stats)(const fl_store *s, fl_store_tier_stats *out);
  /* fl_store_set_local_budget (s non-NULL). */
  fl_status (*set_budget)(fl_store *s, uint64_t bytes);
  /* fl_store_destroy, first: stops what the tier runs and frees its state. */
  void (*close)(fl_store *s);
} fl_store_ops;

/* A store of n tables (validated here) whose operations are ops; cached:
 * every table in hashed-slot storage, as the cache of a tier behind
 * (cached.h). The tier's state starts NULL: ops->close must accept that.
 * FL_OK or the failure (recorded on NULL). */
fl_status fl_store_new(const fl_table_desc *tables, uint32_t n_tables, uint32_t threads,
                       int cached, const fl_store_ops *ops, fl_store **out);
/* The tier's state, set once before the store is handed out (fl_store_new
 * leaves it NULL). */
void fl_store_set_tier(fl_store *s, void *tier);
void *fl_store_tier(const fl_store *s);

/* Tells subscribers that rows of `table` changed (store_internal.h). */
void fl_store_notify(fl_store *s, uint32_t table, const uint64_t *ids, size_t n);
/* Bytes of one row of `table` (in range). */
size_t fl_store_row_bytes(const fl_store *s, uint32_t table);
/* Vector bytes the store's tables hold. */
uint64_t fl_store_local_bytes(const fl_store *s);

/* Where gathers were served (fl_store_tier_stats); relaxed counters. The
 * front counts lookups and the local pass, a tier behind what it fetched
 * and evicted. */
typedef struct fl_tier_counters {
  _Atomic uint64_t lookups, local_hits, cluster_rows, cluster_missing, cluster_fetches;
  _Atomic uint64_t evictions, ns_local, ns_cluster;
} fl_tier_counters;
fl_tier_counters *fl_store_counters(fl_store *s);

/* ------------------------------------------------------------- gathers */

/* One gather as the front hands it to a tier. The parts are the front's
 * (store_impl.h); a tier reaches their rows through fl_gather_row_at. */
struct fl_gather {
  const char *call;                   /* the API function, for messages */
  const struct fl_gather_part *parts; /* n checked queries */
  uint32_t n;                         /* queries */
  const size_t *start;                /* start[i]: first global row of part i; start[n]: all */
  fl_missing policy;                  /* zero-fill or fail */
  _Atomic uint64_t *miss;             /* per part: ids not found */
  const fl_gather_watch *watch;       /* NULL, or told as rows land */
  int for_device;                     /* outputs bound for a GPU (row_copy.h) */
};

/* Global row `row` of a gather: its part, table, id and output. */
typedef struct fl_gather_row {
  uint32_t part;  /* the query it belongs to */
  uint32_t table; /* that query's table */
  uint64_t id;    /* the id asked */
  void *out;      /* where its row goes */
  size_t bytes;   /* the table's row bytes */
} fl_gather_row;
fl_gather_row fl_gather_row_at(const fl_gather *g, uint64_t row);
/* Counts a row of part `part` as missing: in g->miss and the table's stats. */
void fl_gather_count_missing(const fl_gather *g, uint32_t part);

/* The rows a gather's local pass did not find, left to the tier behind. */
typedef struct fl_gather_absent {
  uint64_t *rows;   /* global row numbers, room for every row of the gather */
  _Atomic size_t n; /* entries of rows, 0 at the start */
  int skip_local;   /* 1: the local tables are bypassed, every row is absent */
} fl_gather_absent;

/* The local pass of a gather, on the store's workers inside one grace
 * section, telling g->watch as rows land. A row the tables lack goes to
 * `absent` when given; otherwise it follows g->policy: zero-filled and
 * counted, or the call fails with FL_ERR_NOT_FOUND naming it (recorded on
 * s; outputs may be partly written). */
fl_status fl_gather_local(fl_store *s, const fl_gather *g, fl_gather_absent *absent);

#endif
