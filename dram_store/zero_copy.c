/* zero_copy.c: the store's memory that a GPU reads in place (see
 * store_internal.h): the seqlock stripes and the dense tables' rows, mapped
 * for device access once however many caches ask. */
#include "dram_store/store_impl.h"

/* Region i of those zero-copy readers touch; 0 past the last. */
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

int fl_store_map_rows(fl_store *s, fl_region_fn map, fl_region_fn unmap) {
  pthread_mutex_lock(&s->map_lock);
  int rc = 0;
  if (s->maps == 0) {
    void *p;
    size_t bytes;
    uint32_t i = 0;
    for (; region(s, i, &p, &bytes); i++)
      if (map(p, bytes) != 0) break;
    if (region(s, i, &p, &bytes)) {
      while (i-- > 0) region(s, i, &p, &bytes), unmap(p, bytes);
      rc = -1;
    } else {
      s->unmap = unmap;
    }
  }
  if (rc == 0) s->maps++;
  pthread_mutex_unlock(&s->map_lock);
  return rc;
}

void fl_store_unmap_rows(fl_store *s) {
  pthread_mutex_lock(&s->map_lock);
  if (s->maps > 0 && --s->maps == 0) {
    void *p;
    size_t bytes;
    for (uint32_t i = 0; region(s, i, &p, &bytes); i++) s->unmap(p, bytes);
  }
  pthread_mutex_unlock(&s->map_lock);
}

const uint32_t *fl_store_seq_stripes(const fl_store *s) {
  return (const uint32_t *)s->env->seq.seq;
}

const void *fl_store_dense_rows(const fl_store *s, uint32_t table) {
  return table < s->n_tables ? s->tables[table].dense : NULL;
}
