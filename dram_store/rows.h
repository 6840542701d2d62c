/* rows.h: row storage of a hashed table. Rows live in slots of 2 MiB chunks
 * that never move while the store lives (the cache's unified index may point
 * at them); a directory of chunk pointers grows by copy, publication and a
 * grace period. Released slots are reused through a free stack.
 *
 * A slot is a vector and a 16-byte header (its owner id and live flag). A
 * chunk holds its vectors first, back to back, then their headers: a vector
 * whose size is a multiple of 64 bytes starts on a cache line and spans only
 * its own lines, and a read by id (table.h) touches the index slot, the
 * vector and the row's seqlock stripe, never the header. A chunk is aligned
 * to its size, so a vector's address finds its header (fl_rows_head_of): a
 * reference to a row is the address of its vector.
 *
 * The owner is written under the row's seqlock together with the vector, so
 * a reader holding a reference that copied a consistent slot whose owner is
 * not the id it asked for knows the slot was reused and looks the id up. */
#ifndef FL_DRAM_STORE_ROWS_H
#define FL_DRAM_STORE_ROWS_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "common/fastdiv.h"
#include "dram_store/grace.h"
#include "dram_store/mem.h"
#include "dram_store/seq_stripe.h"

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

#define FL_ROW_LIVE FL_SLOT_HEAD_LIVE
#define FL_ROW_USED 2u

/* Bytes of a chunk, and its alignment: the layout fl_slot_head reads. */
#define FL_ROWS_CHUNK_BYTES FL_MEM_HUGE_BYTES
_Static_assert(FL_ROWS_CHUNK_BYTES == FL_SLOT_CHUNK_BYTES, "chunks as fl_slot_head finds them");
_Static_assert(sizeof(fl_row_head) == 16, "headers as fl_slot_head finds them");

typedef struct fl_rows {
  size_t row_bytes;          /* bytes of one vector */
  size_t vec_stride;         /* bytes from one vector to the next: row_bytes rounded to 8 */
  uint64_t per_chunk;        /* slots in a chunk: its vectors, then as many headers */
  fl_div32 by_chunk;         /* divides by per_chunk */
  unsigned char **_Atomic dir; /* chunk pointers; swapped seq_cst when grown (see grace.h) */
  uint64_t dir_cap;          /* entries in dir */
  uint64_t chunks;           /* entries of dir holding an allocated chunk */
  uint64_t mapped;           /* of which registered for device reads (zero_copy.c; writer-owned) */
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

/* Slot r's vector. Readers call this after finding r in the index, so the
 * directory they load covers r. */
static inline unsigned char *fl_rows_vec(fl_rows *p, uint32_t r) {
  unsigned char **dir = atomic_load(&p->dir);
  uint32_t c = fl_div32_q(p->by_chunk, r);
  return dir[c] + (r - c * p->per_chunk) * p->vec_stride;
}

/* The header of the slot whose vector is at vec: the chunk's start by its
 * alignment, the slot's number in the chunk by the vector's offset
 * (fl_slot_head, as the kernels that read slots in place find it). Reads
 * no memory. */
static inline fl_row_head *fl_rows_head_of(const fl_rows *p, const void *vec) {
  const fl_slot_layout l = {p->per_chunk, (uint32_t)p->vec_stride};
  return (fl_row_head *)(uintptr_t)fl_slot_head((uintptr_t)vec, l);
}

/* Slot r's header. */
static inline fl_row_head *fl_rows_head(fl_rows *p, uint32_t r) {
  return fl_rows_head_of(p, fl_rows_vec(p, r));
}

#endif
