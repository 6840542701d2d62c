/* store_impl.h: the fl_store handle and the helpers the store's files share
 * (front, local tier, gather, file formats). Not for other modules: they use
 * fleche.h and store_internal.h; a tier behind the store uses tier.h. */
#ifndef FL_DRAM_STORE_STORE_IMPL_H
#define FL_DRAM_STORE_STORE_IMPL_H

#include <pthread.h>

#include "common/error.h"
#include "common/parallel.h"
#include "dram_store/store_internal.h"
#include "dram_store/table.h"
#include "dram_store/tier.h"

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
  const fl_store_ops *ops;   /* what the tier does (tier.h) */
  void *tier_state;          /* the tier's own state (fl_store_set_tier) */
  fl_tier_counters tier;     /* fl_store_tier_stats */
  uint64_t commands0, invalidations0, resyncs0; /* the tier's counts at the last reset */
  pthread_mutex_t map_lock;  /* guards the zero-copy mapping (zero_copy.c) */
  int maps;                  /* fl_store_map_rows calls not yet undone */
  fl_region_fn unmap;        /* the first mapper's unmap */
};

/* The table numbered `table`, or NULL after recording an
 * FL_ERR_INVALID_ARGUMENT message on s that names `call`. */
fl_table *fl_store_table_arg(fl_store *s, uint32_t table, const char *call);
/* Writes n validated rows (dense ids in range) through the tier (tier.h's
 * write), which tells subscribers. FL_OK or the failure, recorded on s. */
fl_status fl_store_upsert_rows(fl_store *s, fl_table *t, const uint64_t *ids, size_t n,
                               const void *vectors);

/* One table's slice of a gather (gather.c), from an fl_table_query or an
 * fl_ref_query. */
struct fl_gather_part {
  fl_table *t;           /* the table */
  const uint64_t *ids;   /* n ids */
  const uint64_t *refs;  /* NULL: look the ids up; else their references (fl_table_read_ref) */
  uint64_t *refs_out;    /* looked up: NULL, or where the rows' references go (fl_table_ref's) */
  size_t n;              /* rows */
  unsigned char *out;    /* n rows of t->row_bytes */
};
typedef struct fl_gather_part fl_gather_part;

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
/* Gathers n validated parts through the tier's gather (tier.h); missing and
 * watch (optional), and for_device, as in fl_store_gather and
 * fl_store_gather_watched. */
fl_status fl_store_gather_parts(fl_store *s, const char *call, const fl_gather_part *parts,
                                uint32_t n, fl_missing policy, uint64_t *missing,
                                const fl_gather_watch *watch, int for_device);

#endif
