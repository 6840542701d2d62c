/* carve.h: laying out one allocation as aligned pieces, by their byte offsets. */
#ifndef FL_COMMON_CARVE_H
#define FL_COMMON_CARVE_H

#include "common/align.h"

/* A layout being built: pieces are added in order, each at the first offset
 * its alignment allows after the one before. Start it at {0}, or at {N} to
 * lay pieces out after N bytes already placed. */
typedef struct fl_carve {
  uint64_t end; /* bytes laid out so far: the end of the last piece */
} fl_carve;

/* Adds a piece of `bytes` at the end rounded up to `align` (a power of two);
 * returns the piece's offset. */
static inline uint64_t fl_carve_add(fl_carve *cv, uint64_t bytes, uint64_t align) {
  uint64_t at = fl_align_up(cv->end, align);
  cv->end = at + bytes;
  return at;
}

/* The allocation's size: the end rounded up to `align`. */
static inline uint64_t fl_carve_size(const fl_carve *cv, uint64_t align) {
  return fl_align_up(cv->end, align);
}

#endif
