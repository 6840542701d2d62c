/* synthetic.h: the deterministic synthetic model, one value per (seed, table,
 * id, element), computable anywhere (store fill, GPU checks, tests). */
#ifndef FL_COMMON_SYNTHETIC_H
#define FL_COMMON_SYNTHETIC_H

#include "common/hash.h"

/* A value in [-1, 1) with 24 significant bits, exact in fp32. */
FL_HD float fl_synthetic(uint64_t seed, uint32_t table, uint64_t id, uint32_t j) {
  uint64_t h = fl_hash2(fl_hash2(seed, ((uint64_t)table << 32) | j), id);
  return (float)((int32_t)(h >> 40) - (1 << 23)) / (float)(1 << 23);
}

#endif
