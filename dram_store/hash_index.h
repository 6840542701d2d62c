/* hash_index.h: the id -> row index of a hashed table. Open addressing with
 * linear probing over 16-byte slots, at most half full (live plus deleted
 * slots), so probes stay short and an empty slot always ends a search.
 *
 * Concurrency: one writer at a time (the table's write lock), any number of
 * lock-free readers. A slot's `row` is its state: FL_HROW_EMPTY, FL_HROW_TOMB
 * (deleted) or a row number. The writer stores the key, then publishes the
 * row with release; readers load the row with acquire, then the key. A slot
 * reused after a delete can give a reader an old row for a new key: readers
 * must therefore check the row's owner id (see rows.h), which makes such races
 * harmless. The index never grows in place: the table builds a bigger one with
 * fl_hindex_rebuild, publishes it and frees the old one after a grace period. */
#ifndef FL_DRAM_STORE_HASH_INDEX_H
#define FL_DRAM_STORE_HASH_INDEX_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "common/hash.h"
#include "dram_store/mem.h"

#define FL_HROW_EMPTY UINT32_MAX
#define FL_HROW_TOMB (UINT32_MAX - 1u)
/* Row numbers are below this (the two values above are states). */
#define FL_HROW_LIMIT (UINT32_MAX - 1u)

typedef struct fl_hslot {
  _Atomic uint64_t key; /* the id; meaningful only while row is a row number */
  _Atomic uint32_t row; /* row number, FL_HROW_EMPTY or FL_HROW_TOMB */
  uint32_t pad;         /* keeps slots 16 bytes: four per cache line */
} fl_hslot;

typedef struct fl_hindex {
  uint64_t mask;   /* slots - 1 (slots is a power of two) */
  uint64_t live;   /* slots holding a row (writer-owned count) */
  uint64_t used;   /* live plus tombstones: what probing sees as occupied */
  fl_hslot slot[]; /* mask + 1 slots */
} fl_hindex;

/* An index able to hold `capacity` ids at load <= 1/2; NULL on OOM. */
fl_hindex *fl_hindex_new(fl_mem *m, uint64_t capacity);
void fl_hindex_free(fl_mem *m, fl_hindex *ix);
/* 1 when `extra` more inserts keep the index at most half used. */
int fl_hindex_fits(const fl_hindex *ix, uint64_t extra);
/* A fresh copy of ix's live entries sized for live + extra ids; NULL on OOM. */
fl_hindex *fl_hindex_rebuild(fl_mem *m, const fl_hindex *ix, uint64_t extra);

static inline fl_hslot *fl_hindex_home(const fl_hindex *ix, uint64_t id) {
  return (fl_hslot *)&ix->slot[fl_mix64(id) & ix->mask];
}

/* Reader (and writer): the slot holding id, its row number in *row; NULL
 * when id is absent. */
static inline const fl_hslot *fl_hindex_find_slot(const fl_hindex *ix, uint64_t id,
                                                  uint32_t *row) {
  for (uint64_t i = fl_mix64(id) & ix->mask;; i = (i + 1) & ix->mask) {
    const fl_hslot *s = &ix->slot[i];
    uint32_t r = atomic_load_explicit(&s->row, memory_order_acquire);
    if (r == FL_HROW_EMPTY) return NULL;
    if (r != FL_HROW_TOMB && atomic_load_explicit(&s->key, memory_order_relaxed) == id) {
      *row = r;
      return s;
    }
  }
}

/* Reader (and writer): id's row number, or FL_HROW_EMPTY when absent. */
static inline uint32_t fl_hindex_find(const fl_hindex *ix, uint64_t id) {
  uint32_t r;
  return fl_hindex_find_slot(ix, id, &r) ? r : FL_HROW_EMPTY;
}

/* Writer: adds id (absent) -> row; the index must fit one more (fits(ix, 1)). */
void fl_hindex_insert(fl_hindex *ix, uint64_t id, uint32_t row);
/* Writer: removes id; its row number, or FL_HROW_EMPTY when absent. */
uint32_t fl_hindex_erase(fl_hindex *ix, uint64_t id);

#endif
