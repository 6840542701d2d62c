/* store_impl.h: the fl_store handle and the helpers the store's files share
 * (core, gather, file formats). Not for other modules: they use fleche.h and
 * store_internal.h. */
#ifndef FL_DRAM_STORE_STORE_IMPL_H
#define FL_DRAM_STORE_STORE_IMPL_H

#include <pthread.h>

#include "common/error.h"
#include "common/parallel.h"
#include "dram_store/store_internal.h"
#include "dram_store/table.h"

typedef struct fl_remote fl_remote;

/* Where gathers were served (fl_store_tier_stats); relaxed counters. */
typedef struct fl_tier_counters {
  _Atomic uint64_t lookups, local_hits, cluster_rows, cluster_missing, cluster_fetches;
  _Atomic uint64_t evictions, ns_local, ns_cluster;
  uint64_t commands0, invalidations0, resyncs0; /* the client's counts at the last reset */
} fl_tier_counters;

typedef struct fl_store_sub {
  fl_store_change_fn fn; /* NULL: slot free */
  void *ctx;             /* passed back to fn */
} fl_store_sub;

struct fl_store {
  uint32_t n_tables;         /* tables, fixed at create */
  fl_table *tables;          /* n_tables tables */
  fl_store_env *env;         /* arena, seqlocks, grace periods */
  fl_workers *workers;       /* gather and fill threads */
  pthread_mutex_t subs_lock; /* guards subs; held while callbacks run (serializes them) */
  fl_store_sub *subs;        /* subscriptions, indexed by subscription id */
  int n_subs;                /* entries of subs in use or freed */
  fl_remote *remote;         /* the cluster tier (remote.h), NULL for a plain store */
  fl_tier_counters tier;     /* fl_store_tier_stats */
  pthread_mutex_t map_lock;  /* guards the zero-copy mapping (zero_copy.c) */
  int maps;                  /* fl_store_map_rows calls not yet undone */
  fl_region_fn unmap;        /* the first mapper's unmap */
};

/* A store of n validated tables; `cached`: every table in hashed-slot
 * storage, as the local tier of a cluster store. FL_OK or the failure
 * (recorded on NULL). */
fl_status fl_store_new(const fl_table_desc *tables, uint32_t n_tables, uint32_t threads,
                       int cached, fl_store **out);

/* The table numbered `table`, or NULL after recording an
 * FL_ERR_INVALID_ARGUMENT message on s that names `call`. */
fl_table *fl_store_table_arg(fl_store *s, uint32_t table, const char *call);
/* Writes n validated rows (dense ids in range) under the table's write lock,
 * then notifies subscribers. FL_ERR_OUT_OF_MEMORY (nothing written) when room
 * for new ids cannot be made. */
fl_status fl_store_upsert_rows(fl_store *s, fl_table *t, const uint64_t *ids, size_t n,
                               const void *vectors);

/* FL_ERR_UNSUPPORTED for `call` (save, export) on a cluster store, whose
 * local tier holds only part of the model. */
fl_status fl_store_local_only(fl_store *s, const char *call);
/* Tells subscribers that rows of table t changed (see store_internal.h). */
void fl_store_notify(fl_store *s, uint32_t table, const uint64_t *ids, size_t n);

/* One table's slice of a gather (gather.c), from an fl_table_query or an
 * fl_ref_query. */
typedef struct fl_gather_part {
  fl_table *t;           /* the table */
  const uint64_t *ids;   /* n ids */
  const uint64_t *refs;  /* NULL: look the ids up; else their references (fl_table_read_ref) */
  uint64_t *refs_out;    /* looked up: NULL, or where the rows' references go (fl_table_ref's) */
  size_t n;              /* rows */
  unsigned char *out;    /* n rows of t->row_bytes */
} fl_gather_part;

/* Checks what every gather checks first (s, the policy, queries non-NULL
 * when n > 0) and allocates *parts for n queries (free it); FL_OK or the
 * failure, recorded on s naming `call`. */
fl_status fl_gather_start(fl_store *s, const char *call, const void *queries, uint32_t n,
                          fl_missing policy, fl_gather_part **parts);
/* Validates query number i of a gather (`call` names the API function in
 * messages): the table, the NULL pointers, the dense id range; fills *p
 * (refs NULL) or returns the failure, recorded on s. */
fl_status fl_gather_part_init(fl_store *s, const char *call, uint32_t i, uint32_t table,
                              const uint64_t *ids, size_t n, void *out, fl_gather_part *p);
/* The part holding global row `row` of a gather: the last i with
 * start[i] <= row (start[0] = 0, n parts). */
uint32_t fl_gather_part_of(const size_t *start, uint32_t n, uint64_t row);
/* Gathers n validated parts on the store's workers inside one grace section;
 * missing and watch (optional), and for_device, as in fl_store_gather and
 * fl_store_gather_watched. */
fl_status fl_store_gather_parts(fl_store *s, const char *call, const fl_gather_part *parts,
                                uint32_t n, fl_missing policy, uint64_t *missing,
                                const fl_gather_watch *watch, int for_device);

#endif
