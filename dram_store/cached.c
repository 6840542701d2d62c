/* cached.c: a cached store's tables as a bounded cache (cached.h): rows
 * cached unless a change raced their fetch, rows dropped on a change, and
 * CLOCK eviction. The CLOCK bit is FL_ROW_USED in a slot's live word, set by
 * readers (table.h) and cleared by the hand, which sweeps slots table after
 * table; a live slot found without the bit is evicted. */
#include "dram_store/cached.h"

#include "dram_store/store_impl.h"

uint64_t fl_cached_changes(fl_store *s, uint32_t table) {
  return atomic_load(&s->tables[table].changes);
}

void fl_cached_put(fl_store *s, uint32_t table, uint64_t changes, const fl_cached_row *rows,
                   size_t n) {
  fl_table *t = &s->tables[table];
  pthread_mutex_lock(&t->write_lock);
  if (atomic_load(&t->changes) == changes && fl_table_reserve(t, n) == 0)
    for (size_t k = 0; k < n; k++) fl_table_put(t, rows[k].id, rows[k].vec);
  pthread_mutex_unlock(&t->write_lock);
}

/* Erases every live slot of t (write_lock held). */
static void erase_all(fl_table *t) {
  for (uint64_t r = 0; r < t->slots.next; r++) {
    fl_row_head *h = fl_rows_head(&t->slots, (uint32_t)r);
    if (atomic_load_explicit(&h->live, memory_order_relaxed) & FL_ROW_LIVE)
      fl_table_erase(t, atomic_load_explicit(&h->owner, memory_order_relaxed));
  }
}

void fl_cached_drop(fl_store *s, uint32_t table, const uint64_t *ids, size_t n) {
  fl_table *t = &s->tables[table];
  pthread_mutex_lock(&t->write_lock);
  atomic_fetch_add(&t->changes, 1);
  if (ids)
    for (size_t i = 0; i < n; i++) fl_table_erase(t, ids[i]);
  else
    erase_all(t);
  pthread_mutex_unlock(&t->write_lock);
}

uint64_t fl_cached_evict(fl_store *s, fl_clock_hand *hand, uint64_t bytes) {
  uint64_t freed = 0, evicted = 0;
  if (s->n_tables == 0) return 0;
  /* Two passes over every table clear every CLOCK bit once and evict what
   * is left: enough unless the tables hold less than `bytes`. */
  for (int wraps = 0; freed < bytes && wraps < 3;) {
    fl_table *t = &s->tables[hand->table];
    pthread_mutex_lock(&t->write_lock);
    for (; hand->slot < t->slots.next && freed < bytes; hand->slot++) {
      fl_row_head *h = fl_rows_head(&t->slots, (uint32_t)hand->slot);
      uint64_t live = atomic_load_explicit(&h->live, memory_order_relaxed);
      if (!(live & FL_ROW_LIVE)) continue;
      if (live & FL_ROW_USED) {
        atomic_fetch_and(&h->live, ~(uint64_t)FL_ROW_USED);
        continue;
      }
      fl_table_erase(t, atomic_load_explicit(&h->owner, memory_order_relaxed));
      freed += t->row_bytes;
      evicted++;
    }
    int at_end = hand->slot >= t->slots.next;
    pthread_mutex_unlock(&t->write_lock);
    if (at_end) {
      hand->slot = 0;
      hand->table = (hand->table + 1) % s->n_tables;
      wraps += hand->table == 0;
    }
  }
  return evicted;
}
