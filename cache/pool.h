/* pool.h: the slab memory pool. One region of GPU (or, for the host backend,
 * host) memory, cut into pages that are handed to slab classes on demand; a
 * class holds slots of one vector size in bytes, shared by all tables of that
 * size. Memory follows the hot classes: any class takes pages from the common
 * budget. The pool only hands out addresses; it never touches the memory, so
 * the same code manages device and host regions. Not thread-safe: the cache
 * calls it under its mutex. */
#ifndef FL_CACHE_POOL_H
#define FL_CACHE_POOL_H

#include <stddef.h>
#include <stdint.h>

#define FL_PAGE_FREE 0xffffffffu

typedef struct fl_slab_class {
  uint32_t slot_bytes;   /* vector bytes rounded up to 16 (16-byte copies) */
  uint64_t *free;        /* stack of free slot addresses */
  uint64_t n_free;       /* entries on the stack */
  uint64_t cap_free;     /* stack capacity */
  uint64_t pages;        /* pages owned */
  uint64_t used;         /* slots handed out (live or awaiting reclamation) */
} fl_slab_class;

typedef struct fl_pool {
  uint64_t base;         /* region start address */
  uint64_t bytes;        /* region size, pages * page_bytes */
  uint64_t page_bytes;   /* page size, a multiple of 16 */
  uint32_t page_shift;   /* log2(page_bytes) when a power of two, else 0 (pool.c page_of) */
  uint64_t pages;        /* pages in the region */
  uint64_t pages_used;   /* pages handed to classes */
  uint32_t *page_class;  /* class of each handed-out page, FL_PAGE_FREE if none */
  uint32_t *page_live;   /* slots of each page handed out */
  uint64_t *free_pages;  /* stack of pages no class holds */
  uint64_t n_free_pages;
  uint64_t empty_pages;  /* pages whose live count fell to 0 since the last compaction */
  uint32_t n_classes;
  fl_slab_class *classes;
  uint64_t used_bytes;   /* sum over classes of used * slot_bytes */
} fl_pool;

/* Page size for vectors of at most max_slot_bytes. */
uint64_t fl_pool_page_bytes(uint32_t max_slot_bytes);
/* slot_bytes[i] is class i's slot size. Returns 0, or -1 on allocation failure. */
int fl_pool_init(fl_pool *p, uint64_t base, uint64_t bytes, const uint32_t *slot_bytes,
                 uint32_t n_classes);
void fl_pool_destroy(fl_pool *p);
/* A free slot of class cls, or 0 when the class is full and no page is left. */
uint64_t fl_pool_alloc(fl_pool *p, uint32_t cls);
/* Up to n free slots of class cls into out (fewer when the pool is full);
 * returns how many. The same as n calls of fl_pool_alloc. */
uint64_t fl_pool_alloc_n(fl_pool *p, uint32_t cls, uint64_t n, uint64_t *out);
/* Returns a slot handed out by fl_pool_alloc. */
void fl_pool_free(fl_pool *p, uint64_t addr);
/* Returns pages whose slots are all free to the common budget, so memory
 * moves to whichever class needs it next. One pass over the free stacks. */
void fl_pool_compact(fl_pool *p);
/* Forgets every slot: all pages return to the common budget. */
void fl_pool_reset(fl_pool *p);

#endif
