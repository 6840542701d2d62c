/* layout.h: where each table's block lies in the key space (feature bits and
 * start key), for the size-aware code and the fixed-length baseline, and the
 * collision arithmetic both are judged by. Internal to encoding/. */
#ifndef FL_ENCODING_LAYOUT_H
#define FL_ENCODING_LAYOUT_H

#include "include/fleche.h"

/* Expected fraction of m distinct ids that share their value with another one
 * when hashed uniformly into `values` values: 1 - (1 - 1/values)^(m - 1). */
double fl_collision_rate(uint64_t m, double values);

/* Both fill fbits[i] (feature bits) and start[i] (first key of the block,
 * a multiple of 2^fbits[i]) for the n tables; the blocks are disjoint and lie
 * in [0, 2^key_bits). The caller has checked 1 <= n <= 2^key_bits - 1 and
 * every corpus_size >= 1. Return 0, or -1 when out of memory. */
int fl_layout_size_aware(const fl_table_desc *t, uint32_t n, uint32_t key_bits,
                         uint32_t *fbits, uint64_t *start);
int fl_layout_fixed(uint32_t n, uint32_t key_bits, uint32_t *fbits, uint64_t *start);

#endif
