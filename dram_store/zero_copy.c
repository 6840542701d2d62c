/* zero_copy.c: the store's memory that a GPU reads in place (see
 * store_internal.h): the seqlock stripes, the dense tables' rows and the
 * hashed tables' slots, mapped for device access once however many caches
 * ask. Slot chunks come and go with writes: each is mapped under its table's
 * write_lock, here for the chunks there are and by fl_table_reserve for
 * those it adds while the store is mapped (env->map_chunk); and a sample of
 * a hashed table's rows for the cache to time reads of them. */
#include "common/hash.h"
#include "dram_store/store_impl.h"

/* Region i of the fixed ones zero-copy readers touch; 0 past the last. */
static int region(const fl_store *s, uint32_t i, void **p, size_t *bytes) {
  if (i == 0) {
    *p = s->env->seq.seq;
    *bytes = sizeof s->env->seq;
    return 1;
  }
  for (uint32_t t = 0, k = 1; t < s->n_tables; t++) {
    const fl_table *tb = &s->tables[t];
    if (!tb->dense || k++ != i) continue;
    /* fl_mem_alloc(FL_MEM_PAGES) gave the block whole pages. */
    *p = tb->dense;
    *bytes = fl_mem_round_pages((size_t)tb->desc.corpus_size * tb->row_bytes);
    return 1;
  }
  return 0;
}

/* Whether GPUs may read table t's slots in place: hashed, and not a tier's
 * cache (whose reads must set the CLOCK bit and fill what is absent). */
static int slots_readable(const fl_table *t) { return !t->dense && !t->cached; }

/* Unmaps the chunks of table t mapped so far. */
static void unmap_slots(fl_store *s, fl_table *t) {
  pthread_mutex_lock(&t->write_lock);
  unsigned char **dir = atomic_load(&t->slots.dir);
  for (uint64_t k = 0; k < t->slots.mapped; k++) s->unmap(dir[k], FL_ROWS_CHUNK_BYTES);
  t->slots.mapped = 0;
  pthread_mutex_unlock(&t->write_lock);
}

/* Maps the chunks of table t there are; new ones follow in fl_table_reserve. */
static int map_slots(fl_table *t, fl_region_fn map) {
  pthread_mutex_lock(&t->write_lock);
  int rc = fl_table_map_slots(t, map);
  pthread_mutex_unlock(&t->write_lock);
  return rc;
}

/* Unmaps what the first i fixed regions and the tables' slots hold. */
static void unmap_all(fl_store *s, uint32_t i) {
  atomic_store(&s->env->map_chunk, NULL);
  for (uint32_t t = 0; t < s->n_tables; t++)
    if (slots_readable(&s->tables[t])) unmap_slots(s, &s->tables[t]);
  void *p;
  size_t bytes;
  for (uint32_t k = 0; k < i; k++) region(s, k, &p, &bytes), s->unmap(p, bytes);
}

int fl_store_map_rows(fl_store *s, fl_region_fn map, fl_region_fn unmap) {
  pthread_mutex_lock(&s->map_lock);
  int rc = 0;
  if (s->maps == 0) {
    void *p;
    size_t bytes;
    uint32_t i = 0;
    s->unmap = unmap;
    for (; region(s, i, &p, &bytes); i++)
      if (map(p, bytes) != 0) break;
    rc = region(s, i, &p, &bytes) ? -1 : 0;
    /* New chunks are mapped from here on; those there are, next. */
    if (rc == 0) atomic_store(&s->env->map_chunk, map);
    for (uint32_t t = 0; t < s->n_tables && rc == 0; t++)
      if (slots_readable(&s->tables[t])) rc = map_slots(&s->tables[t], map);
    if (rc) unmap_all(s, i);
  }
  if (rc == 0) s->maps++;
  pthread_mutex_unlock(&s->map_lock);
  return rc;
}

void fl_store_unmap_rows(fl_store *s) {
  pthread_mutex_lock(&s->map_lock);
  if (s->maps > 0 && --s->maps == 0) {
    uint32_t n = 0;
    void *p;
    size_t bytes;
    while (region(s, n, &p, &bytes)) n++;
    unmap_all(s, n);
  }
  pthread_mutex_unlock(&s->map_lock);
}

const uint32_t *fl_store_seq_stripes(const fl_store *s) {
  return (const uint32_t *)s->env->seq.seq;
}

const void *fl_store_dense_rows(const fl_store *s, uint32_t table) {
  return table < s->n_tables ? s->tables[table].dense : NULL;
}

fl_slot_layout fl_store_slot_layout(const fl_store *s, uint32_t table) {
  fl_slot_layout l = {0, 0};
  if (table < s->n_tables && slots_readable(&s->tables[table]))
    l = (fl_slot_layout){s->tables[table].slots.per_chunk, (uint32_t)s->tables[table].slots.vec_stride};
  return l;
}

uint64_t fl_store_sample_rows(fl_store *s, uint32_t table, uint64_t n, uint64_t seed,
                              uint64_t *ids, uint64_t *refs) {
  if (table >= s->n_tables || !slots_readable(&s->tables[table])) return 0;
  fl_table *t = &s->tables[table];
  uint64_t got = 0;
  pthread_mutex_lock(&t->write_lock);
  const fl_hindex *ix = atomic_load(&t->index);
  /* Slots start + k * stride (odd) for k <= mask: each slot once, in an
   * order without locality. The index is at most half used: 16 tries a row
   * find it all but in tables of few rows. */
  const uint64_t start = fl_hash2(seed, 0), stride = fl_hash2(seed, 1) | 1;
  for (uint64_t k = 0; k < 16 * n && k <= ix->mask && got < n; k++) {
    const fl_hslot *h = &ix->slot[(start + k * stride) & ix->mask];
    uint32_t r = atomic_load_explicit(&h->row, memory_order_relaxed);
    if (r == FL_HROW_EMPTY || r == FL_HROW_TOMB) continue;
    ids[got] = atomic_load_explicit(&h->key, memory_order_relaxed);
    refs[got++] = (uint64_t)(uintptr_t)fl_rows_vec(&t->slots, r);
  }
  pthread_mutex_unlock(&t->write_lock);
  return got;
}
