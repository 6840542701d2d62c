/* hash_index.c: allocation, insert, erase and rebuild of the id -> row index
 * (the lock-free find is inline in hash_index.h). */
#include "dram_store/hash_index.h"

fl_hindex *fl_hindex_new(fl_mem *m, uint64_t capacity) {
  uint64_t slots = 16;
  while (slots < 2 * capacity) slots <<= 1;
  fl_hindex *ix = fl_mem_alloc(m, sizeof *ix + slots * sizeof(fl_hslot), 0);
  if (!ix) return NULL;
  ix->mask = slots - 1;
  ix->live = ix->used = 0;
  for (uint64_t i = 0; i < slots; i++) {
    atomic_init(&ix->slot[i].key, 0);
    atomic_init(&ix->slot[i].row, FL_HROW_EMPTY);
    ix->slot[i].pad = 0;
  }
  return ix;
}

void fl_hindex_free(fl_mem *m, fl_hindex *ix) { fl_mem_free(m, ix); }

int fl_hindex_fits(const fl_hindex *ix, uint64_t extra) {
  return ix->used + extra <= (ix->mask + 1) / 2;
}

void fl_hindex_insert(fl_hindex *ix, uint64_t id, uint32_t row) {
  uint64_t i = fl_mix64(id) & ix->mask;
  uint32_t r;
  /* Reusing a tombstone is safe: readers check the owner of the row they get. */
  while ((r = atomic_load_explicit(&ix->slot[i].row, memory_order_relaxed)) != FL_HROW_EMPTY &&
         r != FL_HROW_TOMB)
    i = (i + 1) & ix->mask;
  atomic_store_explicit(&ix->slot[i].key, id, memory_order_relaxed);
  atomic_store_explicit(&ix->slot[i].row, row, memory_order_release);
  ix->live++;
  if (r == FL_HROW_EMPTY) ix->used++;
}

uint32_t fl_hindex_erase(fl_hindex *ix, uint64_t id) {
  for (uint64_t i = fl_mix64(id) & ix->mask;; i = (i + 1) & ix->mask) {
    fl_hslot *s = &ix->slot[i];
    uint32_t r = atomic_load_explicit(&s->row, memory_order_relaxed);
    if (r == FL_HROW_EMPTY) return FL_HROW_EMPTY;
    if (r != FL_HROW_TOMB && atomic_load_explicit(&s->key, memory_order_relaxed) == id) {
      atomic_store_explicit(&s->row, FL_HROW_TOMB, memory_order_release);
      ix->live--;
      return r;
    }
  }
}

fl_hindex *fl_hindex_rebuild(fl_mem *m, const fl_hindex *ix, uint64_t extra) {
  fl_hindex *n = fl_hindex_new(m, ix->live + extra);
  if (!n) return NULL;
  for (uint64_t i = 0; i <= ix->mask; i++) {
    uint32_t r = atomic_load_explicit(&ix->slot[i].row, memory_order_relaxed);
    if (r != FL_HROW_EMPTY && r != FL_HROW_TOMB)
      fl_hindex_insert(n, atomic_load_explicit(&ix->slot[i].key, memory_order_relaxed), r);
  }
  return n;
}
