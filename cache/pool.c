/* pool.c: slab classes over a paged region (see pool.h). */
#include "cache/pool.h"

#include <stdlib.h>
#include <string.h>

uint64_t fl_pool_page_bytes(uint32_t max_slot_bytes) {
  /* 64 KiB pages, or larger so that a page holds at least 8 slots: small pages
   * let memory move between classes in fine steps. */
  uint64_t page = 64u << 10;
  while (page < 8ull * max_slot_bytes) page *= 2;
  return page;
}

int fl_pool_init(fl_pool *p, uint64_t base, uint64_t bytes, const uint32_t *slot_bytes,
                 uint32_t n_classes) {
  memset(p, 0, sizeof *p);
  uint32_t max_slot = 16;
  for (uint32_t i = 0; i < n_classes; i++)
    if (slot_bytes[i] > max_slot) max_slot = slot_bytes[i];
  p->page_bytes = fl_pool_page_bytes(max_slot);
  /* A region smaller than one page is one page of whole slots. */
  if (bytes < p->page_bytes) p->page_bytes = bytes / max_slot * max_slot;
  if (p->page_bytes > 1 && (p->page_bytes & (p->page_bytes - 1)) == 0)
    p->page_shift = (uint32_t)__builtin_ctzll(p->page_bytes);
  p->pages = p->page_bytes ? bytes / p->page_bytes : 0;
  p->bytes = p->pages * p->page_bytes;
  p->base = base;
  p->n_classes = n_classes;
  p->classes = calloc(n_classes ? n_classes : 1, sizeof *p->classes);
  p->page_class = calloc(p->pages ? p->pages : 1, sizeof *p->page_class);
  p->page_live = calloc(p->pages ? p->pages : 1, sizeof *p->page_live);
  p->free_pages = calloc(p->pages ? p->pages : 1, sizeof *p->free_pages);
  if (!p->classes || !p->page_class || !p->page_live || !p->free_pages) {
    fl_pool_destroy(p);
    return -1;
  }
  for (uint32_t i = 0; i < n_classes; i++) {
    fl_slab_class *c = &p->classes[i];
    c->slot_bytes = slot_bytes[i];
    /* Room for every slot the class could ever hold, reserved now: pages
     * are committed as the stack first reaches them. Growing it later would
     * mean a realloc of megabytes inside an admission round (44-51 ms on
     * the H100's VM). Where the address space is short, it grows as
     * needed instead (grow_class). */
    uint64_t most = p->page_bytes ? p->pages * (p->page_bytes / c->slot_bytes) : 0;
    if (most && (c->free = malloc(most * sizeof *c->free))) c->cap_free = most;
  }
  fl_pool_reset(p);
  return 0;
}

void fl_pool_destroy(fl_pool *p) {
  for (uint32_t i = 0; p->classes && i < p->n_classes; i++) free(p->classes[i].free);
  free(p->classes);
  free(p->page_class);
  free(p->page_live);
  free(p->free_pages);
  memset(p, 0, sizeof *p);
}

/* The page of a slab address: a shift for the usual power-of-two pages (a
 * 64-bit division per slot costs more than the rest of an allocation), a
 * division for a region smaller than one page. */
static inline uint64_t page_of(const fl_pool *p, uint64_t addr) {
  uint64_t off = addr - p->base;
  return p->page_shift ? off >> p->page_shift : off / p->page_bytes;
}

/* Hands a fresh page to class cls and stacks its slots. */
static int grow_class(fl_pool *p, uint32_t cls) {
  fl_slab_class *c = &p->classes[cls];
  if (p->n_free_pages == 0) return 0;
  uint64_t per_page = p->page_bytes / c->slot_bytes;
  /* The free stack must hold every slot of the class's pages: slots handed
   * out now all come back through fl_pool_free. */
  uint64_t need = (c->pages + 1) * per_page;
  if (need > c->cap_free) {
    uint64_t cap = c->cap_free ? c->cap_free * 2 : per_page * 4;
    while (cap < need) cap *= 2;
    uint64_t *f = realloc(c->free, cap * sizeof *f);
    if (!f) return 0;
    c->free = f;
    c->cap_free = cap;
  }
  uint64_t page = p->free_pages[--p->n_free_pages];
  p->pages_used++;
  p->page_class[page] = cls;
  p->page_live[page] = 0;
  uint64_t start = p->base + page * p->page_bytes;
  /* Stack in reverse so slots are handed out in address order. */
  for (uint64_t i = per_page; i-- > 0;) c->free[c->n_free++] = start + i * c->slot_bytes;
  c->pages++;
  return 1;
}

uint64_t fl_pool_alloc(fl_pool *p, uint32_t cls) {
  fl_slab_class *c = &p->classes[cls];
  if (c->n_free == 0 && !grow_class(p, cls)) return 0;
  c->used++;
  p->used_bytes += c->slot_bytes;
  uint64_t addr = c->free[--c->n_free];
  p->page_live[page_of(p, addr)]++;
  return addr;
}

uint64_t fl_pool_alloc_n(fl_pool *p, uint32_t cls, uint64_t n, uint64_t *out) {
  fl_slab_class *c = &p->classes[cls];
  uint64_t got = 0;
  while (got < n) {
    if (c->n_free == 0 && !grow_class(p, cls)) break;
    uint64_t k = n - got < c->n_free ? n - got : c->n_free;
    /* The top k of the stack, in pop order. Neighbours on the stack are
     * mostly of one page: its live count is added once per run. */
    uint64_t run_page = 0, run = 0;
    for (uint64_t i = 0; i < k; i++) {
      uint64_t addr = c->free[c->n_free - 1 - i], page = page_of(p, addr);
      out[got + i] = addr;
      if (page != run_page && run) {
        p->page_live[run_page] += (uint32_t)run;
        run = 0;
      }
      run_page = page;
      run++;
    }
    if (run) p->page_live[run_page] += (uint32_t)run;
    c->n_free -= k;
    got += k;
  }
  c->used += got;
  p->used_bytes += got * c->slot_bytes;
  return got;
}

void fl_pool_free(fl_pool *p, uint64_t addr) {
  uint64_t page = page_of(p, addr);
  fl_slab_class *c = &p->classes[p->page_class[page]];
  /* The stack has room: every slot of the class's pages fits in it. */
  c->free[c->n_free++] = addr;
  c->used--;
  p->used_bytes -= c->slot_bytes;
  if (--p->page_live[page] == 0) p->empty_pages++;
}

void fl_pool_compact(fl_pool *p) {
  if (p->empty_pages == 0) return;
  for (uint32_t k = 0; k < p->n_classes; k++) {
    fl_slab_class *c = &p->classes[k];
    uint64_t keep = 0;
    for (uint64_t i = 0; i < c->n_free; i++)
      if (p->page_live[page_of(p, c->free[i])] != 0) c->free[keep++] = c->free[i];
    c->n_free = keep;
  }
  for (uint64_t page = 0; page < p->pages; page++) {
    if (p->page_class[page] == FL_PAGE_FREE || p->page_live[page] != 0) continue;
    p->classes[p->page_class[page]].pages--;
    p->page_class[page] = FL_PAGE_FREE;
    p->free_pages[p->n_free_pages++] = page;
    p->pages_used--;
  }
  p->empty_pages = 0;
}

void fl_pool_reset(fl_pool *p) {
  for (uint32_t i = 0; i < p->n_classes; i++) {
    p->classes[i].n_free = 0;
    p->classes[i].pages = 0;
    p->classes[i].used = 0;
  }
  /* Stack in reverse so pages are handed out in address order. */
  p->n_free_pages = 0;
  for (uint64_t page = p->pages; page-- > 0;) {
    p->page_class[page] = FL_PAGE_FREE;
    p->page_live[page] = 0;
    p->free_pages[p->n_free_pages++] = page;
  }
  p->pages_used = 0;
  p->used_bytes = 0;
  p->empty_pages = 0;
}
