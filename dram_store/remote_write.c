/* remote_write.c: a cluster store's writes (rows go to the cluster, local
 * and cached copies are dropped, the change is published) and the changes
 * other processes publish, applied the same way (remote.h, inval.h). */
#include <stdio.h>
#include <stdlib.h>

#include "common/error.h"
#include "dram_store/remote.h"

/* Rows per cluster write: bounds the keys and argument vectors of a batch. */
#define FL_WRITE_BATCH 65536
/* Changes of more ids are published as a change of the whole table. */
#define FL_PUBLISH_IDS_MAX 65536

static fl_status store_rows(fl_store *s, fl_table *t, const uint64_t *ids, size_t n,
                            const void *vectors) {
  fl_row_ref *rows = malloc((n < FL_WRITE_BATCH ? n : FL_WRITE_BATCH) * sizeof *rows);
  if (!rows) return fl_fail(s, FL_ERR_OUT_OF_MEMORY, "no memory for %zu rows", n);
  fl_status st = FL_OK;
  const unsigned char *v = vectors;
  for (size_t b = 0; b < n && st == FL_OK; b += FL_WRITE_BATCH) {
    size_t m = n - b < FL_WRITE_BATCH ? n - b : FL_WRITE_BATCH;
    for (size_t i = 0; i < m; i++)
      rows[i] = (fl_row_ref){t->id, ids[b + i], v ? (void *)(v + (b + i) * t->row_bytes) : NULL,
                             t->row_bytes};
    st = fl_rows_store(s->remote->cluster, s, &s->remote->ks, rows, m);
  }
  free(rows);
  if (st != FL_OK) {
    char why[512];
    snprintf(why, sizeof why, "%s", fl_store_last_error(s));
    fl_fail(s, st, "table %u '%s': writing %zu rows to the cluster: %s", t->id, t->name, n, why);
  }
  return st;
}

fl_status fl_remote_put(fl_store *s, fl_table *t, const uint64_t *ids, size_t n,
                        const void *vectors) {
  return store_rows(s, t, ids, n, vectors);
}

fl_status fl_remote_changed(fl_store *s, fl_table *t, const uint64_t *ids, size_t n) {
  fl_local_drop(t, ids, n);
  fl_store_notify(s, t->id, ids, n);
  int whole = !ids || n > FL_PUBLISH_IDS_MAX;
  return fl_inval_publish(s->remote->cluster, s, s->remote->self, t->id, whole ? NULL : ids, n);
}

fl_status fl_remote_write(fl_store *s, fl_table *t, const uint64_t *ids, size_t n,
                          const void *vectors) {
  fl_status st = store_rows(s, t, ids, n, vectors);
  /* A failed write may have reached some nodes: invalidate either way. */
  fl_status changed = fl_remote_changed(s, t, ids, n);
  return st != FL_OK ? st : changed;
}

void fl_remote_apply(void *ctx, uint32_t table, const uint64_t *ids, size_t n) {
  fl_store *s = ctx;
  for (uint32_t t = 0; t < s->n_tables; t++) {
    if (table != FL_INVAL_ALL && t != table) continue;
    fl_local_drop(&s->tables[t], table == FL_INVAL_ALL ? NULL : ids, n);
    fl_store_notify(s, t, table == FL_INVAL_ALL ? NULL : ids, table == FL_INVAL_ALL ? 0 : n);
  }
}
