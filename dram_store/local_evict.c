/* local_evict.c: the local tier of a cluster store as a bounded cache:
 * CLOCK eviction within the byte budget, and dropping rows that changed.
 * The CLOCK bit is FL_ROW_USED in a slot's live word, set by readers
 * (table.h) and cleared by the hand, which sweeps slots table after table;
 * a live slot found without the bit is evicted. */
#include "dram_store/remote.h"

uint64_t fl_local_bytes(const fl_store *s) {
  uint64_t bytes = 0;
  for (uint32_t i = 0; i < s->n_tables; i++)
    bytes += atomic_load_explicit(&s->tables[i].rows, memory_order_relaxed) * s->tables[i].row_bytes;
  return bytes;
}

/* Erases every live slot of t (write_lock held). */
static void erase_all(fl_table *t) {
  for (uint64_t r = 0; r < t->slots.next; r++) {
    fl_row_head *h = fl_rows_slot(&t->slots, (uint32_t)r);
    if (atomic_load_explicit(&h->live, memory_order_relaxed) & FL_ROW_LIVE)
      fl_table_erase(t, atomic_load_explicit(&h->owner, memory_order_relaxed));
  }
}

void fl_local_drop(fl_table *t, const uint64_t *ids, size_t n) {
  pthread_mutex_lock(&t->write_lock);
  atomic_fetch_add(&t->changes, 1);
  if (ids)
    for (size_t i = 0; i < n; i++) fl_table_erase(t, ids[i]);
  else
    erase_all(t);
  pthread_mutex_unlock(&t->write_lock);
}

void fl_local_make_room(fl_store *s, uint64_t need) {
  fl_remote *rm = s->remote;
  uint64_t budget = atomic_load(&rm->budget), used = fl_local_bytes(s);
  if (used + need <= budget || s->n_tables == 0) return;
  uint64_t to_free = used + need - budget, freed = 0, evicted = 0;
  /* Two passes over every table clear every CLOCK bit once and evict what
   * is left: enough unless the tier is smaller than `need`. */
  for (int wraps = 0; freed < to_free && wraps < 3;) {
    fl_table *t = &s->tables[rm->hand_table];
    pthread_mutex_lock(&t->write_lock);
    for (; rm->hand_slot < t->slots.next && freed < to_free; rm->hand_slot++) {
      fl_row_head *h = fl_rows_slot(&t->slots, (uint32_t)rm->hand_slot);
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
    int at_end = rm->hand_slot >= t->slots.next;
    pthread_mutex_unlock(&t->write_lock);
    if (at_end) {
      rm->hand_slot = 0;
      rm->hand_table = (rm->hand_table + 1) % s->n_tables;
      wraps += rm->hand_table == 0;
    }
  }
  atomic_fetch_add_explicit(&s->tier.evictions, evicted, memory_order_relaxed);
}
