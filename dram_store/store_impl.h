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
};

/* The table numbered `table`, or NULL after recording an
 * FL_ERR_INVALID_ARGUMENT message on s that names `call`. */
fl_table *fl_store_table_arg(fl_store *s, uint32_t table, const char *call);
/* Writes n validated rows (dense ids in range) under the table's write lock,
 * then notifies subscribers. FL_ERR_OUT_OF_MEMORY (nothing written) when room
 * for new ids cannot be made. */
fl_status fl_store_upsert_rows(fl_store *s, fl_table *t, const uint64_t *ids, size_t n,
                               const void *vectors);
/* Tells subscribers that rows of table t changed (see store_internal.h). */
void fl_store_notify(fl_store *s, uint32_t table, const uint64_t *ids, size_t n);

#endif
