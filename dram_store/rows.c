/* rows.c: chunked row slots of hashed tables (see rows.h). */
#include "dram_store/rows.h"

#include <string.h>

#include "common/align.h"
#include "dram_store/hash_index.h"

void fl_rows_init(fl_rows *p, size_t row_bytes) {
  memset(p, 0, sizeof *p);
  p->row_bytes = row_bytes;
  p->vec_stride = fl_align_up(row_bytes, 8);
  /* At least 127: a divisor of at least 2 as fl_div32_of asks (vectors are
   * at most 16 KiB: dim 4096, store.c). */
  p->per_chunk = FL_ROWS_CHUNK_BYTES / (p->vec_stride + sizeof(fl_row_head));
  p->by_chunk = fl_div32_of((uint32_t)p->per_chunk);
  atomic_init(&p->dir, NULL);
}

void fl_rows_fini(fl_rows *p, fl_mem *m) {
  unsigned char **dir = atomic_load(&p->dir);
  for (uint64_t c = 0; c < p->chunks; c++) fl_mem_free(m, dir[c]);
  fl_mem_free(m, dir);
  fl_mem_free(m, p->free);
}

/* Grows the directory to hold `need` chunk pointers; readers keep using the
 * old copy until the grace period ends. */
static int fl_rows_grow_dir(fl_rows *p, fl_mem *m, fl_grace *g, uint64_t need) {
  uint64_t cap = p->dir_cap ? p->dir_cap : 16;
  while (cap < need) cap *= 2;
  unsigned char **nd = fl_mem_alloc(m, cap * sizeof *nd, FL_MEM_ZERO);
  if (!nd) return -1;
  unsigned char **od = atomic_load(&p->dir);
  if (p->chunks) memcpy(nd, od, p->chunks * sizeof *nd);
  atomic_store(&p->dir, nd);
  p->dir_cap = cap;
  if (od) {
    fl_grace_wait(g);
    fl_mem_free(m, od);
  }
  return 0;
}

static int fl_rows_grow_free(fl_rows *p, fl_mem *m, uint64_t need) {
  uint64_t cap = p->free_cap ? p->free_cap : 1024;
  while (cap < need) cap *= 2;
  uint32_t *nf = fl_mem_alloc(m, cap * sizeof *nf, 0);
  if (!nf) return -1;
  if (p->n_free) memcpy(nf, p->free, p->n_free * sizeof *nf);
  fl_mem_free(m, p->free);
  p->free = nf;
  p->free_cap = cap;
  return 0;
}

int fl_rows_reserve(fl_rows *p, fl_mem *m, fl_grace *g, uint64_t n) {
  if (n <= p->n_free) return 0;
  uint64_t slots = p->next + (n - p->n_free);
  if (slots > FL_HROW_LIMIT) return -1;
  uint64_t chunks = (slots + p->per_chunk - 1) / p->per_chunk;
  /* Every slot handed out may come back: the free stack must hold them all. */
  if (slots > p->free_cap && fl_rows_grow_free(p, m, slots) != 0) return -1;
  if (chunks > p->dir_cap && fl_rows_grow_dir(p, m, g, chunks) != 0) return -1;
  unsigned char **dir = atomic_load(&p->dir);
  while (p->chunks < chunks) {
    dir[p->chunks] = fl_mem_alloc(m, FL_ROWS_CHUNK_BYTES, FL_MEM_HUGE_ALIGNED);
    if (!dir[p->chunks]) return -1;
    p->chunks++;
  }
  return 0;
}

uint32_t fl_rows_take(fl_rows *p) {
  if (p->n_free) return p->free[--p->n_free];
  return (uint32_t)p->next++;
}

void fl_rows_give(fl_rows *p, uint32_t r) { p->free[p->n_free++] = r; }
