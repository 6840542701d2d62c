/* remote_write.c: a cluster store's writes (rows go to the cluster, cached
 * copies are dropped, the change is published) and the changes other
 * processes publish, applied the same way (remote.h, inval.h). */
#include <stdio.h>
#include <stdlib.h>

#include "common/error.h"
#include "cluster_store/remote.h"

/* Rows per cluster write: bounds the keys and argument vectors of a batch. */
#define FL_WRITE_BATCH 65536
/* Changes of more ids are published as a change of the whole table. */
#define FL_PUBLISH_IDS_MAX 65536

fl_status fl_remote_put(fl_store *s, uint32_t table, const uint64_t *ids, size_t n,
                        const void *vectors) {
  fl_remote *rm = fl_store_tier(s);
  size_t rb = fl_store_row_bytes(s, table);
  fl_row_ref *rows = malloc((n < FL_WRITE_BATCH ? n : FL_WRITE_BATCH) * sizeof *rows);
  if (!rows) return fl_fail(s, FL_ERR_OUT_OF_MEMORY, "no memory for %zu rows", n);
  fl_status st = FL_OK;
  const unsigned char *v = vectors;
  for (size_t b = 0; b < n && st == FL_OK; b += FL_WRITE_BATCH) {
    size_t m = n - b < FL_WRITE_BATCH ? n - b : FL_WRITE_BATCH;
    for (size_t i = 0; i < m; i++)
      rows[i] = (fl_row_ref){table, ids[b + i], v ? (void *)(v + (b + i) * rb) : NULL, rb};
    st = fl_rows_store(rm->cluster, s, &rm->ks, rows, m);
  }
  free(rows);
  if (st != FL_OK) {
    char why[512];
    snprintf(why, sizeof why, "%s", fl_store_last_error(s));
    fl_fail(s, st, "table %u '%s': writing %zu rows to the cluster: %s", table,
            fl_store_desc(s, table)->name, n, why);
  }
  return st;
}

/* Rows of the table changed in the cluster (ids NULL: any row): drops them
 * from the tables, tells the store's subscribers (the caches) and publishes
 * the change to the other processes. */
static fl_status changed(fl_store *s, uint32_t table, const uint64_t *ids, size_t n) {
  fl_remote *rm = fl_store_tier(s);
  fl_cached_drop(s, table, ids, n);
  fl_store_notify(s, table, ids, n);
  int whole = !ids || n > FL_PUBLISH_IDS_MAX;
  return fl_inval_publish(rm->cluster, s, rm->self, table, whole ? NULL : ids, n);
}

fl_status fl_remote_changed_all(fl_store *s, uint32_t table) { return changed(s, table, NULL, 0); }

fl_status fl_remote_write(fl_store *s, uint32_t table, const uint64_t *ids, size_t n,
                          const void *vectors) {
  fl_status st = fl_remote_put(s, table, ids, n, vectors);
  /* A failed write may have reached some nodes: invalidate either way. */
  fl_status told = changed(s, table, ids, n);
  return st != FL_OK ? st : told;
}

void fl_remote_apply(void *ctx, uint32_t table, const uint64_t *ids, size_t n) {
  fl_store *s = ctx;
  for (uint32_t t = 0; t < fl_store_num_tables(s); t++) {
    if (table != FL_INVAL_ALL && t != table) continue;
    fl_cached_drop(s, t, table == FL_INVAL_ALL ? NULL : ids, n);
    fl_store_notify(s, t, table == FL_INVAL_ALL ? NULL : ids, table == FL_INVAL_ALL ? 0 : n);
  }
}
