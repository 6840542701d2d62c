/* mem.c: jemalloc arena management for the store (see mem.h).
 *
 * Under AddressSanitizer (FL_MEM_SYSTEM_MALLOC, set by dram_store/BUILD for
 * --config=asan) blocks come from the system allocator instead: a statically
 * linked jemalloc replaces malloc for the whole program and crashes ASan's
 * start-up, and ASan can only check accesses to memory it allocated. */
#include "dram_store/mem.h"

#include <stdlib.h>
#include <string.h>

#include "common/fault.h"

#ifndef FL_MEM_SYSTEM_MALLOC
#include <jemalloc/jemalloc.h>
#include <stdio.h>
#include <sys/mman.h>

int fl_mem_init(fl_mem *m) {
  size_t sz = sizeof m->arena;
  return mallctl("arenas.create", &m->arena, &sz, NULL, 0) == 0 ? 0 : -1;
}

void fl_mem_fini(fl_mem *m) {
  char name[64];
  snprintf(name, sizeof name, "arena.%u.destroy", m->arena);
  (void)mallctl(name, NULL, NULL, NULL, 0);
}

void *fl_mem_alloc(fl_mem *m, size_t bytes, int mem_flags) {
  if (bytes == 0 || fl_fault_hit(FL_FAULT_STORE_ALLOC)) return NULL;
  int flags = MALLOCX_ARENA(m->arena) | MALLOCX_TCACHE_NONE;
  if (mem_flags & FL_MEM_ZERO) flags |= MALLOCX_ZERO;
  if (mem_flags & FL_MEM_PAGES) bytes = fl_mem_round_pages(bytes);
  /* One alignment: MALLOCX_ALIGN encodes its log2, so two of them or'ed
   * together would ask for another alignment altogether. */
  if (bytes >= FL_MEM_HUGE_BYTES || (mem_flags & FL_MEM_HUGE_ALIGNED))
    flags |= MALLOCX_ALIGN(FL_MEM_HUGE_BYTES);
  else if (mem_flags & FL_MEM_PAGES)
    flags |= MALLOCX_ALIGN(FL_MEM_PAGE_BYTES);
  void *p = mallocx(bytes, flags);
  /* Advice only: kernels without THP (or with it off) just ignore it. */
  if (p && bytes >= FL_MEM_HUGE_BYTES)
    (void)madvise(p, bytes & ~(FL_MEM_HUGE_BYTES - 1), MADV_HUGEPAGE);
  return p;
}

void fl_mem_free(fl_mem *m, void *p) {
  (void)m; /* jemalloc finds a block's arena from its address */
  if (p) dallocx(p, MALLOCX_TCACHE_NONE);
}

#else /* FL_MEM_SYSTEM_MALLOC */

int fl_mem_init(fl_mem *m) {
  m->arena = 0;
  return 0;
}

void fl_mem_fini(fl_mem *m) { (void)m; }

void *fl_mem_alloc(fl_mem *m, size_t bytes, int flags) {
  (void)m;
  if (bytes == 0 || fl_fault_hit(FL_FAULT_STORE_ALLOC)) return NULL;
  if (flags & (FL_MEM_PAGES | FL_MEM_HUGE_ALIGNED)) {
    size_t align = (flags & FL_MEM_HUGE_ALIGNED) ? FL_MEM_HUGE_BYTES : FL_MEM_PAGE_BYTES;
    bytes = fl_align_up(bytes, align); /* aligned_alloc asks a multiple of the alignment */
    void *p = aligned_alloc(align, bytes);
    if (p && (flags & FL_MEM_ZERO)) memset(p, 0, bytes);
    return p;
  }
  return (flags & FL_MEM_ZERO) ? calloc(1, bytes) : malloc(bytes);
}

void fl_mem_free(fl_mem *m, void *p) {
  (void)m;
  free(p);
}

#endif
