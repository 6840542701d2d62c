/* mem.h: the store's host memory, one jemalloc arena per store. Large blocks
 * (table arrays, row chunks) are 2 MiB aligned and advised for transparent
 * huge pages where the system allows; the tcache is bypassed so that the whole
 * arena can be destroyed with the store. */
#ifndef FL_DRAM_STORE_MEM_H
#define FL_DRAM_STORE_MEM_H

#include <stddef.h>

#include "common/align.h"

typedef struct fl_mem {
  unsigned arena; /* jemalloc arena index from "arenas.create" */
} fl_mem;

/* 0 on success, -1 when jemalloc cannot create an arena. */
int fl_mem_init(fl_mem *m);
/* Destroys the arena; every block must have been freed. */
void fl_mem_fini(fl_mem *m);
/* fl_mem_alloc flags. FL_MEM_PAGES: the block has whole pages to itself
 * (page-aligned, its size rounded up to pages), so that it can be registered
 * for device access (cudaHostRegister) without touching another block. */
#define FL_MEM_ZERO 1
#define FL_MEM_PAGES 2
/* FL_MEM_HUGE_ALIGNED: the block starts on a FL_MEM_HUGE_BYTES boundary, so
 * that an address inside a block of at most that size finds the block's
 * start by masking (rows.h's chunks). */
#define FL_MEM_HUGE_ALIGNED 4
#define FL_MEM_PAGE_BYTES ((size_t)4096)
/* Blocks from this size up get huge-page alignment and advice: below it, a
 * huge page would mostly hold other blocks anyway. */
#define FL_MEM_HUGE_BYTES ((size_t)2 << 20)

/* The bytes an FL_MEM_PAGES block of `bytes` takes: whole pages. */
static inline size_t fl_mem_round_pages(size_t bytes) {
  return fl_align_up(bytes, FL_MEM_PAGE_BYTES);
}

/* `bytes` from the arena (flags: FL_MEM_*); NULL on failure or bytes == 0. */
void *fl_mem_alloc(fl_mem *m, size_t bytes, int flags);
void fl_mem_free(fl_mem *m, void *p);

#endif
