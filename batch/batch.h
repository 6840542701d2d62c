/* batch.h: the self-identified batch layout shared by the fused kernels and
 * the host loops. All queries of one launch are concatenated: query q's keys
 * occupy positions [arg.key_offset, arg.key_offset + arg.n). A launch gives
 * query q the threads [scan[q], scan[q+1]) (counts rounded up to warp
 * multiples, so every warp serves one query); a thread finds its query by a
 * binary search of `scan`, held in shared memory by the kernels. */
#ifndef FL_BATCH_BATCH_H
#define FL_BATCH_BATCH_H

#include "common/hd.h"
#include "common/search.h"

typedef struct fl_batch_arg {
  const uint64_t *ids;  /* the query's ids, readable where the launch runs */
  uint8_t *out;         /* its output rows, writable where the launch runs */
  uint64_t key_offset;  /* position of its first key in the batch */
  uint32_t n;           /* keys */
  uint32_t table;       /* index into the code / table arrays */
  uint32_t vec_bytes;   /* bytes per output row */
  uint32_t width;       /* copy unit in bytes: 16, 4 or 2 (row and out alignment) */
  uint32_t lanes;       /* copy threads per row: vec_bytes / width */
  uint32_t pad;
} fl_batch_arg;

/* Largest q with scan[q] <= x, for scan[0] = 0 <= x (n entries). */
FL_HD uint32_t fl_batch_find(const uint64_t *scan, uint32_t n, uint64_t x) {
  return fl_search_range(scan, n, x);
}

/* Copy width for rows of vec_bytes written at out: the widest of 16/4/2 bytes
 * that divides both. */
FL_HD uint32_t fl_batch_width(uint32_t vec_bytes, uint64_t out_addr) {
  uint64_t a = vec_bytes | out_addr;
  return (a & 15u) == 0 ? 16u : (a & 3u) == 0 ? 4u : 2u;
}

#endif
