/* table.c: creation, writer-side updates and walks of one table (the
 * lock-free read is inline in table.h). */
#include "dram_store/table.h"

#include <stdio.h>
#include <stdlib.h>

int fl_table_init(fl_table *t, fl_store_env *env, uint32_t id, const fl_table_desc *d, int cached) {
  memset(t, 0, sizeof *t);
  t->env = env;
  t->id = id;
  t->cached = cached;
  t->desc = *d;
  t->row_bytes = (size_t)d->dim * fl_dtype_bytes(d->dtype);
  pthread_mutex_init(&t->write_lock, NULL);
  atomic_init(&t->index, NULL);
  fl_rows_init(&t->slots, t->row_bytes);
  char fallback[16];
  snprintf(fallback, sizeof fallback, "t%u", id);
  const char *name = d->name ? d->name : fallback;
  t->name = malloc(strlen(name) + 1);
  if (!t->name) goto oom;
  strcpy(t->name, name);
  t->desc.name = t->name;
  if (d->id_kind == FL_IDS_DENSE && !cached) {
    t->dense = fl_mem_alloc(&env->mem, d->corpus_size * t->row_bytes, FL_MEM_ZERO | FL_MEM_PAGES);
    if (!t->dense && d->corpus_size) goto oom;
    atomic_init(&t->rows, d->corpus_size);
  } else {
    /* Start small: corpus_size is a guess (a cached table holds only part
     * of it), and growth is cheap. */
    uint64_t guess = d->corpus_size < 1024 ? d->corpus_size : 1024;
    atomic_init(&t->index, fl_hindex_new(&env->mem, guess));
    if (!atomic_load(&t->index)) goto oom;
  }
  return 0;
oom:
  fl_table_fini(t);
  return -1;
}

void fl_table_fini(fl_table *t) {
  fl_mem *m = &t->env->mem;
  fl_mem_free(m, t->dense);
  fl_hindex_free(m, atomic_load(&t->index));
  fl_rows_fini(&t->slots, m);
  pthread_mutex_destroy(&t->write_lock);
  free(t->name);
  t->dense = NULL;
  t->name = NULL;
  atomic_store(&t->index, NULL);
}

size_t fl_table_first_out_of_range(const fl_table *t, const uint64_t *ids, size_t n) {
  if (t->desc.id_kind != FL_IDS_DENSE) return n;
  for (size_t i = 0; i < n; i++)
    if (ids[i] >= t->desc.corpus_size) return i;
  return n;
}

int fl_table_reserve(fl_table *t, uint64_t n) {
  if (t->dense) return 0;
  fl_store_env *env = t->env;
  fl_hindex *ix = atomic_load(&t->index);
  if (!fl_hindex_fits(ix, n)) {
    /* Double on growth (amortized O(1) per insert); rebuilding at the same
     * size just sweeps tombstones. */
    uint64_t extra = n > ix->live ? n : ix->live;
    fl_hindex *nx = fl_hindex_rebuild(&env->mem, ix, extra);
    if (!nx) return FL_TABLE_NO_MEMORY;
    atomic_store(&t->index, nx);
    fl_grace_wait(&env->grace);
    fl_hindex_free(&env->mem, ix);
  }
  if (fl_rows_reserve(&t->slots, &env->mem, &env->grace, n) != 0) return FL_TABLE_NO_MEMORY;
  /* A GPU reads the slots in place: a chunk is registered before any of its
   * slots is handed out. */
  int (*map)(void *, size_t) = t->cached ? NULL : atomic_load(&env->map_chunk);
  return map && fl_table_map_slots(t, map) != 0 ? FL_TABLE_UNREGISTERED : 0;
}

int fl_table_map_slots(fl_table *t, int (*map)(void *p, size_t bytes)) {
  unsigned char **dir = atomic_load(&t->slots.dir);
  while (t->slots.mapped < t->slots.chunks) {
    if (map(dir[t->slots.mapped], FL_ROWS_CHUNK_BYTES) != 0) return -1;
    t->slots.mapped++;
  }
  return 0;
}

/* A row's bytes, written under its stripe's seqlock (seqlock.h): the one
 * writer access that races with seqlock readers by design, named on its own
 * so that tools/tsan.supp can name it and nothing else of the write path. */
static void fl_table_write_row(void *row, const void *vec, size_t bytes) { memcpy(row, vec, bytes); }

int fl_table_put(fl_table *t, uint64_t id, const void *vec) {
  if (t->dense) {
    _Atomic uint32_t *s = fl_seq_of(&t->env->seq, t->id, id);
    fl_seq_write_begin(s);
    fl_table_write_row(t->dense + id * t->row_bytes, vec, t->row_bytes);
    fl_seq_write_end(s);
    return 0;
  }
  fl_hindex *ix = atomic_load(&t->index);
  uint32_t r = fl_hindex_find(ix, id);
  int fresh = r == FL_HROW_EMPTY;
  if (fresh) r = fl_rows_take(&t->slots);
  unsigned char *row = fl_rows_vec(&t->slots, r);
  fl_row_head *h = fl_rows_head_of(&t->slots, row);
  _Atomic uint32_t *s = fl_table_slot_seq(t, h);
  fl_seq_write_begin(s);
  atomic_store_explicit(&h->owner, id, memory_order_relaxed);
  atomic_store_explicit(&h->live, FL_ROW_LIVE, memory_order_relaxed);
  fl_table_write_row(row, vec, t->row_bytes);
  fl_seq_write_end(s);
  if (fresh) {
    /* Published only once the row is complete. */
    fl_hindex_insert(ix, id, r);
    atomic_fetch_add_explicit(&t->rows, 1, memory_order_relaxed);
  }
  return fresh;
}

int fl_table_erase(fl_table *t, uint64_t id) {
  uint32_t r = fl_hindex_erase(atomic_load(&t->index), id);
  if (r == FL_HROW_EMPTY) return 0;
  /* Readers that still reach r through a stale probe or reference see a
   * slot that is not live. */
  fl_row_head *h = fl_rows_head(&t->slots, r);
  _Atomic uint32_t *s = fl_table_slot_seq(t, h);
  fl_seq_write_begin(s);
  atomic_store_explicit(&h->live, 0, memory_order_relaxed);
  fl_seq_write_end(s);
  fl_rows_give(&t->slots, r);
  atomic_fetch_sub_explicit(&t->rows, 1, memory_order_relaxed);
  return 1;
}

int fl_table_walk(fl_table *t, fl_row_fn fn, void *ctx) {
  int rc = 0;
  if (t->dense) {
    for (uint64_t id = 0; id < t->desc.corpus_size && !rc; id++)
      rc = fn(ctx, id, t->dense + id * t->row_bytes);
    return rc;
  }
  const fl_hindex *ix = atomic_load(&t->index);
  for (uint64_t i = 0; i <= ix->mask && !rc; i++) {
    uint32_t r = atomic_load_explicit(&ix->slot[i].row, memory_order_relaxed);
    if (r == FL_HROW_EMPTY || r == FL_HROW_TOMB) continue;
    rc = fn(ctx, atomic_load_explicit(&ix->slot[i].key, memory_order_relaxed),
            fl_rows_vec(&t->slots, r));
  }
  return rc;
}
