/* rows.h: row storage of a hashed table. Rows live in slots of fixed-size
 * chunks that never move while the store lives (the cache's unified index may
 * point at them); a directory of chunk pointers grows by copy, publication and
 * a grace period. Released slots are reused through a free stack.
 *
 * A slot is an 8-byte header holding its owner id, then the vector. The owner
 * is written under the row's seqlock together with the vector, so a reader
 * that copied a consistent slot whose owner is not the id it looked up knows
 * the index gave it a stale row (deleted or reused) and looks again. */
#ifndef FL_DRAM_STORE_ROWS_H
#define FL_DRAM_STORE_ROWS_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "dram_store/grace.h"
#include "dram_store/mem.h"

/* Written under the slot's seqlock together with the vector. A reader
 * holding a reference keeps a copy only when live and owner is its id: a
 * live slot holds exactly its owner's current row, whatever ids the slot
 * held before (no owner value can stand for "removed", since hashed ids take
 * every 64-bit value: hence the second word). */
typedef struct fl_row_head {
  _Atomic uint64_t owner; /* the id this slot holds, or held last */
  _Atomic uint64_t live;  /* FL_ROW_LIVE while owner's row is here, clear once owner was
                             removed; FL_ROW_USED: read since the CLOCK hand passed
                             (local tier of a cluster store only) */
} fl_row_head;

#define FL_ROW_LIVE 1u
#define FL_ROW_USED 2u

typedef struct fl_rows {
  size_t row_bytes;          /* bytes of one vector */
  size_t stride;             /* bytes of one slot: header + vector, a multiple of 8 */
  uint32_t chunk_bits;       /* log2 of slots per chunk (chunks are about 2 MiB) */
  unsigned char **_Atomic dir; /* chunk pointers; swapped seq_cst when grown (see grace.h) */
  uint64_t dir_cap;          /* entries in dir */
  uint64_t chunks;           /* entries of dir holding an allocated chunk */
  uint64_t next;             /* slots ever handed out: slots >= next are unused */
  uint32_t *free;            /* stack of released slot numbers (writer-owned) */
  uint64_t n_free;           /* entries on the free stack */
  uint64_t free_cap;         /* capacity of the free stack */
} fl_rows;

void fl_rows_init(fl_rows *p, size_t row_bytes);
void fl_rows_fini(fl_rows *p, fl_mem *m);
/* Writer: makes sure `n` fl_rows_take calls succeed without allocating.
 * 0, or -1 when out of memory or past 2^32 - 2 slots (nothing changed then). */
int fl_rows_reserve(fl_rows *p, fl_mem *m, fl_grace *g, uint64_t n);
/* Writer: a free slot (reserved beforehand). */
uint32_t fl_rows_take(fl_rows *p);
/* Writer: returns slot r for reuse. */
void fl_rows_give(fl_rows *p, uint32_t r);

/* Slot r's header; its vector follows at +sizeof(fl_row_head). Readers call
 * this after finding r in the index, so the directory they load covers r. */
static inline fl_row_head *fl_rows_slot(fl_rows *p, uint32_t r) {
  unsigned char **dir = atomic_load(&p->dir);
  uint64_t mask = ((uint64_t)1 << p->chunk_bits) - 1;
  return (fl_row_head *)(dir[r >> p->chunk_bits] + (r & mask) * p->stride);
}

#endif
