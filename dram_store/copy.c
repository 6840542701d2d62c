/* copy.c: fl_store_copy, one table's rows from a store holding its whole
 * model into another store, batch by batch through the destination's tier
 * (tier.h's load and loaded): e.g. a loaded model into a cluster store. */
#include <stdlib.h>

#include "dram_store/store_impl.h"

/* Rows per write of fl_store_copy. */
#define FL_COPY_BATCH 65536

typedef struct fl_copy {
  fl_store *dst;
  fl_table *t;           /* dst's table */
  uint64_t *ids;         /* the batch being gathered */
  unsigned char *vec;
  size_t n;
  uint64_t done, total;
  fl_progress_fn progress;
  void *ctx;
  fl_status st;
} fl_copy;

static int copy_flush(fl_copy *x) {
  if (!x->n) return 0;
  x->st = x->dst->ops->load(x->dst, x->t->id, x->ids, x->n, x->vec);
  x->done += x->n;
  x->n = 0;
  if (x->progress && x->st == FL_OK) x->progress(x->ctx, x->done, x->total);
  return x->st != FL_OK;
}

static int copy_row(void *ctx, uint64_t id, const void *vec) {
  fl_copy *x = ctx;
  x->ids[x->n] = id;
  memcpy(x->vec + x->n * x->t->row_bytes, vec, x->t->row_bytes);
  return ++x->n == FL_COPY_BATCH ? copy_flush(x) : 0;
}

fl_status fl_store_copy(fl_store *dst, fl_store *src, uint32_t table, fl_progress_fn progress,
                        void *ctx) {
  if (!dst || !src || dst == src)
    return fl_fail(dst, FL_ERR_INVALID_ARGUMENT, "fl_store_copy: %s",
                   dst && src ? "dst and src are the same store" : "a store is NULL");
  fl_table *t = fl_store_table_arg(dst, table, "fl_store_copy");
  fl_table *from = t ? fl_store_table_arg(src, table, "fl_store_copy") : NULL;
  if (!from) {
    if (t) fl_error_forward(src, dst);
    return FL_ERR_INVALID_ARGUMENT;
  }
  if (t->row_bytes != from->row_bytes || t->desc.dtype != from->desc.dtype ||
      t->desc.id_kind != from->desc.id_kind)
    return fl_fail(dst, FL_ERR_INVALID_ARGUMENT,
                   "fl_store_copy: table %u: '%s' (dim %u) and '%s' (dim %u) differ in shape", table,
                   t->name, t->desc.dim, from->name, from->desc.dim);
  fl_status whole = src->ops->whole(dst, "fl_store_copy from a cluster store");
  if (whole != FL_OK) return whole;
  fl_copy x = {.dst = dst, .t = t, .ids = malloc(FL_COPY_BATCH * sizeof(uint64_t)),
               .vec = malloc(FL_COPY_BATCH * t->row_bytes), .progress = progress, .ctx = ctx,
               .st = FL_OK};
  if (!x.ids || !x.vec) {
    free(x.ids), free(x.vec);
    return fl_fail(dst, FL_ERR_OUT_OF_MEMORY, "fl_store_copy: no memory for a batch");
  }
  pthread_mutex_lock(&from->write_lock);
  x.total = atomic_load(&from->rows);
  if (!fl_table_walk(from, copy_row, &x)) copy_flush(&x);
  pthread_mutex_unlock(&from->write_lock);
  free(x.ids), free(x.vec);
  if (x.done) {
    fl_status loaded = dst->ops->loaded(dst, table);
    if (x.st == FL_OK) x.st = loaded;
  }
  return x.st;
}
