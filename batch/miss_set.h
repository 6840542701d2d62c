/* miss_set.h: a batch's misses deduplicated into unique rows, FL_HD logic
 * shared by the fused index kernel and the host engine (one source of truth).
 *
 * Set: every query (arg) of the batch owns a region of a per-batch set of ids,
 * slots [base, base + 2n] with base = fl_miss_set_base(key_offset, arg): 2n
 * slots probed linearly (load at most 1/2) plus one slot for the id that
 * equals the empty marker. A region holds the ids of one table, so the id
 * alone is a row's identity: two ids never merge, even under a lossy flat-key
 * encoding.
 *
 * Unique rows: the first position to insert an id owns its unique row and
 * gives it a uid in its arg's range [key_offset, key_offset + n): store
 * misses from the bottom, hits of unified-index pointers from the top, so
 * each kind is contiguous for the store's gathers (by id, by reference).
 * Per arg, four counters (FL_MISS_COUNTERS): unique misses, unique pointer
 * rows, and the positions of each kind. In the staging, an arg's rows are its
 * misses then its pointer rows, in uid order (fl_miss_row).
 *
 * Every position of a missed id adds one to the slot's count: the in-batch
 * frequency that admission prefers (cache/admit_coin.h). */
#ifndef FL_BATCH_MISS_SET_H
#define FL_BATCH_MISS_SET_H

#include "common/align.h"
#include "common/atomic.h"
#include "common/mutant.h"
#include "encoding/flat_key.h"
#include "batch/batch.h"

#define FL_MISS_SET_EMPTY (~0ull)
#define FL_MISS_COUNTERS 4u /* per arg: unique misses, unique pointers, positions of each */

typedef struct fl_miss_set {
  uint64_t *ids;   /* the id of each slot, FL_MISS_SET_EMPTY when free */
  uint32_t *uid;   /* the slot's unique row, written by the position that inserted it */
  uint32_t *count; /* positions of the batch holding the slot's id */
} fl_miss_set;

/* Slots of a set for a batch of n_keys keys in n_args args. */
FL_HD uint64_t fl_miss_set_slots(uint64_t n_keys, uint32_t n_args) { return 2 * n_keys + n_args; }

/* First slot of arg `arg`'s region. */
FL_HD uint64_t fl_miss_set_base(uint64_t key_offset, uint32_t arg) { return 2 * key_offset + arg; }

/* Inserts `id` into the region at `base` of an arg of n keys; returns its
 * slot, with *fresh = 1 for the first inserter. Terminates: a region holds at
 * most n ids in 2n slots. */
FL_HD uint64_t fl_miss_set_insert(const fl_miss_set *s, uint64_t base, uint32_t n, uint64_t id,
                                  int *fresh) {
  uint64_t cap = 2ull * n;
  if (id == FL_MISS_SET_EMPTY) {
    /* The one id the marker hides gets the region's last slot, marked 0. */
    *fresh = fl_cas64_relaxed(&s->ids[base + cap], FL_MISS_SET_EMPTY, 0) == FL_MISS_SET_EMPTY;
    return base + cap;
  }
  uint64_t i = fl_mulhi64(fl_mix64(id), cap);
  for (;;) {
    uint64_t *p = &s->ids[base + i];
    uint64_t was = fl_ld64(p);
    if (was == FL_MISS_SET_EMPTY) was = fl_cas64_relaxed(p, FL_MISS_SET_EMPTY, id);
    if (was == FL_MISS_SET_EMPTY || was == id) {
      *fresh = was == FL_MISS_SET_EMPTY;
      return base + i;
    }
    i = i + 1 == cap ? 0 : i + 1;
  }
}

/* Empties one slot for the set's next use. */
FL_HD void fl_miss_set_clear(const fl_miss_set *s, uint64_t slot) {
  s->ids[slot] = FL_MISS_SET_EMPTY;
  s->count[slot] = 0;
}

/* The id held by slot `slot` of the region at `base` (arg of n keys). */
FL_HD uint64_t fl_miss_set_id(const fl_miss_set *s, uint64_t base, uint32_t n, uint64_t slot) {
  return slot == base + 2ull * n ? FL_MISS_SET_EMPTY : s->ids[slot];
}

/* The uid of an arg's o-th unique row of a kind (pointer: from the top). */
FL_HD uint64_t fl_miss_uid(uint64_t key_offset, uint32_t n, int pointer, uint64_t o) {
  return pointer ? key_offset + n - 1 - o : key_offset + o;
}

/* Staging row, within its arg, of the unique row r = uid - key_offset of an
 * arg of n keys with n_miss unique misses and n_ptr unique pointer rows. */
FL_HD uint64_t fl_miss_row(uint64_t r, uint32_t n, uint32_t n_miss, uint32_t n_ptr) {
  return r < n_miss ? r : n_miss + (r - (n - n_ptr));
}

/* Staging bytes of an arg's u unique rows of vec_bytes: args start 16-byte
 * aligned (fl_misses_layout, and the hit copy's copy of it). */
FL_HD uint64_t fl_miss_stage_bytes(uint32_t u, uint32_t vec_bytes) {
  return fl_align_up((uint64_t)u * vec_bytes, 16);
}

/* Resolves a uid: its arg, its staging row, whether it is a pointer row.
 * Returns 0 when the uid is unused (between an arg's two kinds). */
FL_HD int fl_miss_resolve(const uint64_t *key_offsets, const fl_batch_arg *args, uint32_t n_args,
                          const uint32_t *counters, uint64_t uid, uint32_t *arg, uint64_t *row,
                          int *pointer) {
  uint32_t a = fl_batch_find(key_offsets, n_args, uid);
  uint64_t r = uid - key_offsets[a];
  uint32_t n = args[a].n, n_miss = counters[FL_MISS_COUNTERS * a],
           n_ptr = counters[FL_MISS_COUNTERS * a + 1];
  if (r >= n || (r >= n_miss && r < n - n_ptr)) return 0;
  *arg = a;
  *row = fl_miss_row(r, n, n_miss, n_ptr);
  if (FL_MUTANT_ON(7) && r + 1 < n_miss) *row += 1;
  *pointer = r >= n_miss;
  return 1;
}

/* Where the fused index kernel leaves a batch's misses (the set above). */
typedef struct fl_miss_out {
  fl_miss_set set;       /* fl_miss_set_slots(n_keys, n_args) slots */
  uint32_t *per_arg;     /* FL_MISS_COUNTERS per arg */
  uint32_t *pos, *slot;  /* per missed position: its batch position and set slot */
  uint32_t *uniq_slot;   /* per uid: its set slot */
  uint64_t *uniq_ids;    /* per uid: its id (pinned host memory: read by the gather) */
  uint64_t *uniq_refs;   /* per pointer uid: its store row (pinned host memory) */
  uint32_t *claim;       /* per uid: its read in place (fusion/query_kernels.cu), 0 when not
                            begun; the index kernel zeroes it as it hands out the uid */
  unsigned long long *counters; /* [0] missed positions, [1] smallest out-of-range position */
} fl_miss_out;

#endif
