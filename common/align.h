/* align.h: rounding a size or an offset up to a power-of-two alignment (FL_HD). */
#ifndef FL_COMMON_ALIGN_H
#define FL_COMMON_ALIGN_H

#include "common/hd.h"

/* x rounded up to a multiple of align, a power of two. */
FL_HD uint64_t fl_align_up(uint64_t x, uint64_t align) { return (x + align - 1) & ~(align - 1); }

#endif
