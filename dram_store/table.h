/* table.h: one table of the store: its rows (a dense array, or hashed-id
 * slots behind a lock-free index), the torn-free row reads used by gathers
 * (by id, or by a reference to the row for the cache's unified index) and
 * the writer-side put/erase used by upserts, removes, fills and loads.
 *
 * Writers of a table hold its write_lock; readers take no lock. Every row
 * write happens under the row's striped seqlock (seqlock.h). */
#ifndef FL_DRAM_STORE_TABLE_H
#define FL_DRAM_STORE_TABLE_H

#include <pthread.h>
#include <stdatomic.h>
#include <string.h>

#include "common/mutant.h"
#include "dram_store/grace.h"
#include "dram_store/hash_index.h"
#include "dram_store/mem.h"
#include "dram_store/row_copy.h"
#include "dram_store/rows.h"
#include "dram_store/seqlock.h"
#include "include/fleche.h"

/* Store-wide state every table uses. */
typedef struct fl_store_env {
  /* First, on whole pages (64 KiB from a page-aligned env): zero-copy
   * readers register exactly these pages (fl_store_map_rows). */
  fl_seqlocks seq;   /* row seqlock stripes of all tables */
  fl_mem mem;        /* the store's jemalloc arena */
  fl_grace grace;    /* grace periods for swapped indexes and directories */
  /* While a GPU reads hashed slots in place (zero_copy.c): registers a new
   * chunk for device access before its slots are handed out; else NULL. */
  int (*_Atomic map_chunk)(void *p, size_t bytes);
} fl_store_env;
_Static_assert(sizeof(fl_seqlocks) % FL_MEM_PAGE_BYTES == 0, "the stripes fill whole pages");

typedef struct fl_table {
  fl_table_desc desc;         /* as created; desc.name points at name */
  char *name;                 /* owned copy of the name ("t<i>" when none was given) */
  uint32_t id;                /* the table's number in the store */
  size_t row_bytes;           /* bytes of one vector: dim * element size */
  pthread_mutex_t write_lock; /* serializes writers: upsert, remove, fill, save, export */
  _Atomic uint64_t rows;      /* rows held: corpus_size for dense, live ids for hashed */
  _Atomic uint64_t lookups;   /* ids gathers looked up (relaxed, batched per chunk) */
  _Atomic uint64_t misses;    /* of which not found */
  unsigned char *dense;       /* dense: corpus_size rows of row_bytes, zeroed at create */
  fl_hindex *_Atomic index;   /* hashed: id -> slot; swapped seq_cst on rebuild */
  fl_rows slots;              /* hashed: where the rows live */
  fl_store_env *env;          /* the store's shared state */
  int cached;                 /* 1: the cache of a tier behind (cached.h): hashed
                                 slots whatever the id kind, rows come and go, reads set
                                 the CLOCK bit */
  _Atomic uint64_t changes;   /* cached tables: bumped (under write_lock) by every change
                                 that drops rows, so a racing fill drops its rows */
} fl_table;

/* Bytes of one element of `dtype`. */
static inline size_t fl_dtype_bytes(fl_dtype dtype) { return dtype == FL_FP16 ? 2 : 4; }

/* 0, or -1 on out of memory (t is then finalized). `d` is validated;
 * `cached` as in fl_table. */
int fl_table_init(fl_table *t, fl_store_env *env, uint32_t id, const fl_table_desc *d, int cached);
void fl_table_fini(fl_table *t);

/* Index of the first id >= corpus_size of a dense table, or n (hashed: n). */
size_t fl_table_first_out_of_range(const fl_table *t, const uint64_t *ids, size_t n);

/* Writer (write_lock held): room for n new ids without allocating, in
 * chunks a GPU can read while the store is mapped (zero_copy.c); 0,
 * FL_TABLE_NO_MEMORY, or FL_TABLE_UNREGISTERED when a new chunk could not
 * be registered for the GPU (nothing visible changed either way). */
#define FL_TABLE_NO_MEMORY (-1)
#define FL_TABLE_UNREGISTERED (-2)
int fl_table_reserve(fl_table *t, uint64_t n);
/* Writer (write_lock held): registers, through map, the slot chunks not
 * registered yet (zero_copy.c); 0, or -1 when a map failed (the chunks
 * before it stay registered). */
int fl_table_map_slots(fl_table *t, int (*map)(void *p, size_t bytes));
/* What a failed fl_table_reserve lacked, for its caller's message:
 * "<why> for N more rows". */
static inline const char *fl_table_reserve_why(int rc) {
  return rc == FL_TABLE_UNREGISTERED ? "no memory a GPU reading the store could register"
                                     : "no memory";
}
/* Writer: stores `vec` as id's row (id in range, room reserved); 1 when the
 * id is new. */
int fl_table_put(fl_table *t, uint64_t id, const void *vec);
/* Writer, hashed tables: removes id; 1 when it was present. */
int fl_table_erase(fl_table *t, uint64_t id);
/* Writer: calls fn for every row (dense: ids 0..corpus-1 in order; hashed: in
 * index order) until fn returns nonzero, which is returned. */
typedef int (*fl_row_fn)(void *ctx, uint64_t id, const void *vec);
int fl_table_walk(fl_table *t, fl_row_fn fn, void *ctx);

/* Where a hashed id was found (fl_table_find): the index probed, the id's
 * slot in it and the row number read there. slot is NULL when id was absent. */
typedef struct fl_table_found {
  const fl_hindex *ix;
  const fl_hslot *slot;
  uint32_t row;
} fl_table_found;

/* Reader, hashed tables: probes the index for id; 1 when found. */
static inline int fl_table_find(fl_table *t, uint64_t id, fl_table_found *f) {
  f->ix = atomic_load(&t->index);
  f->slot = fl_hindex_find_slot(f->ix, id, &f->row);
  return f->slot != NULL;
}

/* A reference to the row found (fl_table_ref's). */
static inline uint64_t fl_table_found_ref(fl_table *t, const fl_table_found *f) {
  return (uint64_t)(uintptr_t)fl_rows_vec(&t->slots, f->row);
}

/* Reader hints, issued ahead of the reads so that the cache misses of many
 * rows overlap: fl_table_prefetch_index some rows ahead (hashed tables: the
 * id's home slot), then fl_table_prefetch_row (or, holding what
 * fl_table_find gave, fl_table_prefetch_found) fewer rows ahead: the row's
 * first two and its last cache line. */
static inline void fl_table_prefetch_index(fl_table *t, uint64_t id) {
  /* Acquire, not relaxed: the home slot's address reads the index's mask,
   * which a rebuild wrote before publishing the index. */
  if (!t->dense)
    __builtin_prefetch(fl_hindex_home(atomic_load_explicit(&t->index, memory_order_acquire), id));
}

static inline void fl_prefetch_lines(const void *row, size_t bytes) {
  const char *p = (const char *)row;
  __builtin_prefetch(p);
  __builtin_prefetch(p + 64);
  __builtin_prefetch(p + bytes - 1);
}

static inline void fl_table_prefetch_found(fl_table *t, const fl_table_found *f) {
  if (f->slot) fl_prefetch_lines(fl_rows_vec(&t->slots, f->row), t->row_bytes);
}

static inline void fl_table_prefetch_row(fl_table *t, uint64_t id) {
  if (t->dense) {
    fl_prefetch_lines(t->dense + id * t->row_bytes, t->row_bytes);
    return;
  }
  fl_table_found f;
  if (fl_table_find(t, id, &f)) fl_table_prefetch_found(t, &f);
}

/* The seqlock stripe of the hashed slot whose header is h (fl_slot_stripe:
 * the query kernels that read slots in place take the same). */
static inline _Atomic uint32_t *fl_table_slot_seq(fl_table *t, const fl_row_head *h) {
  return &t->env->seq.seq[fl_slot_stripe(t->id, (uintptr_t)h)];
}

/* The CLOCK bit of a cached table's slot (cached.c): set once, outside the
 * seqlock, by an atomic or that a concurrent write's plain store may undo
 * (harmless). */
static inline void fl_table_mark_used(fl_table *t, fl_row_head *h) {
  if (t->cached && !(atomic_load_explicit(&h->live, memory_order_relaxed) & FL_ROW_USED))
    atomic_fetch_or(&h->live, FL_ROW_USED);
}

/* Reader: copies the vector at vec (a reference's, its tag bit cleared)
 * into out, torn-free; returns 1 when the copy is id's current row (the
 * slot live and owned by id, read together with the vector), else 0 (out
 * then holds another row: overwrite it). for_device: out goes to a GPU
 * (fl_row_copy). */
static inline int fl_table_read_slot(fl_table *t, const void *vec, uint64_t id, void *out,
                                     int for_device) {
  fl_row_head *h = fl_rows_head_of(&t->slots, vec);
  _Atomic uint32_t *s = fl_table_slot_seq(t, h);
  uint32_t v;
  uint64_t owner, live;
  do {
    v = fl_seq_read_begin(s);
    owner = atomic_load_explicit(&h->owner, memory_order_relaxed);
    live = atomic_load_explicit(&h->live, memory_order_relaxed);
    fl_row_copy(out, vec, t->row_bytes, for_device);
  } while (!FL_MUTANT_ON(3) && fl_seq_read_retry(s, v));
  if (!(live & FL_ROW_LIVE) || (owner != id && !FL_MUTANT_ON(6))) return 0;
  fl_table_mark_used(t, h);
  return 1;
}

/* Reader: copies the row fl_table_find found for id into out, torn-free,
 * without reading the slot's header; 1 when the copy is id's current row,
 * else 0 (find again). The copy is id's when, read after it, the table's
 * index is still the one probed, its slot still maps id to the same row, and
 * the row's seqlock has not moved since before the copy:
 * - a writer that reused the row for another id first removed id from the
 *   index the reader probed, or published a newer index before removing it
 *   (then the index check fails), and then wrote the row under its seqlock;
 *   a reader whose copy saw any of that write sees the seqlock move, or took
 *   its first seqlock value after the write, and so sees the removal too;
 * - a writer that gave the row back to id (removed, then added again in the
 *   same row) wrote it before publishing the slot: a reader that sees the
 *   slot again (acquire) sees the seqlock moved past that write. */
static inline int fl_table_read_found(fl_table *t, uint64_t id, const fl_table_found *f,
                                      void *out, int for_device) {
  const unsigned char *vec = fl_rows_vec(&t->slots, f->row);
  fl_row_head *h = fl_rows_head_of(&t->slots, vec);
  _Atomic uint32_t *s = fl_table_slot_seq(t, h);
  uint32_t v;
  do {
    v = fl_seq_read_begin(s);
    fl_row_copy(out, vec, t->row_bytes, for_device);
  } while (!FL_MUTANT_ON(3) && fl_seq_read_retry(s, v));
  if (!FL_MUTANT_ON(21) &&
      (atomic_load_explicit(&f->slot->row, memory_order_acquire) != f->row ||
       atomic_load_explicit(&f->slot->key, memory_order_relaxed) != id ||
       atomic_load(&t->index) != f->ix || atomic_load_explicit(s, memory_order_relaxed) != v))
    return 0;
  fl_table_mark_used(t, h);
  return 1;
}

/* Reader: copies id's vector into out; 1 when found, 0 when a hashed table
 * lacks it (out untouched). Dense ids must be in range. ref (optional) gets
 * the row's reference, as fl_table_ref gives it (0 when not found): the
 * lookup is done anyway. for_device: out goes to a GPU (fl_row_copy).
 * Callers are inside a grace section (fl_grace_enter). */
static inline int fl_table_read(fl_table *t, uint64_t id, void *out, uint64_t *ref,
                                int for_device) {
  if (t->dense) {
    if (ref) *ref = (uint64_t)(uintptr_t)(t->dense + id * t->row_bytes);
    const unsigned char *src = t->dense + id * t->row_bytes;
    _Atomic uint32_t *s = fl_seq_of(&t->env->seq, t->id, id);
    uint32_t v;
    do {
      v = fl_seq_read_begin(s);
      fl_row_copy(out, src, t->row_bytes, for_device);
    } while (!FL_MUTANT_ON(3) && fl_seq_read_retry(s, v));
    return 1;
  }
  fl_table_found f;
  /* A row changed under the copy, or the id moved: look again. */
  while (fl_table_find(t, id, &f))
    if (fl_table_read_found(t, id, &f, out, for_device)) {
      if (ref) *ref = fl_table_found_ref(t, &f);
      return 1;
    }
  if (ref) *ref = 0;
  return 0;
}

/* A reference to id's row (fl_store_refs): the address of its vector, even
 * (dense rows are 2-byte aligned, hashed vectors 8-byte aligned), so the
 * cache may tag its low bit. Dense tables: t->dense + id * row_bytes, which
 * never changes. Hashed tables: the vector of id's slot; valid memory while
 * the store lives (slots never move or get freed), but holding id only
 * until id is removed. Callers are inside a grace section. */
static inline uint64_t fl_table_ref(fl_table *t, uint64_t id) {
  if (t->dense) return (uint64_t)(uintptr_t)(t->dense + id * t->row_bytes);
  fl_table_found f;
  return fl_table_find(t, id, &f) ? fl_table_found_ref(t, &f) : 0;
}

/* The vector a reference names (its tag bit ignored). */
static inline const void *fl_table_ref_vec(uint64_t ref) {
  return (const void *)(uintptr_t)(ref & ~(uint64_t)1);
}

/* Reader hint for fl_table_read_ref, as fl_table_prefetch_row: the slot's
 * header and the vector's lines. Dense tables need no reference: the id
 * gives the address. */
static inline void fl_table_prefetch_ref(fl_table *t, uint64_t id, uint64_t ref) {
  if (t->dense || !ref) {
    fl_table_prefetch_row(t, id);
    return;
  }
  __builtin_prefetch(fl_rows_head_of(&t->slots, fl_table_ref_vec(ref)));
  fl_prefetch_lines(fl_table_ref_vec(ref), t->row_bytes);
}

/* Reader: fl_table_read through a reference taken for id (0: none). Hashed
 * tables read the referenced slot under its seqlock and keep the copy only
 * when the slot's owner is still id; otherwise (id removed, the slot reused
 * or the ref 0) id is looked up as fl_table_read does. Dense rows always
 * belong to their id, so the id is read directly. */
static inline int fl_table_read_ref(fl_table *t, uint64_t id, uint64_t ref, void *out,
                                    int for_device) {
  if (!t->dense && ref && fl_table_read_slot(t, fl_table_ref_vec(ref), id, out, for_device))
    return 1;
  return fl_table_read(t, id, out, NULL, for_device);
}

#endif
