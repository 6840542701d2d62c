/* synthetic_ids.h: the ids fl_store_fill_synthetic creates in hashed tables,
 * so tools (the replay benchmark) and kernels can draw ids that exist.
 *
 * Row k (0 <= k < corpus_size) of hashed table t holds the id
 *     fl_synthetic_id(t, k) = fl_mix64(k ^ fl_mix64(FL_SYNTHETIC_ID_SALT + t))
 * fl_mix64 is a bijection on 64-bit words and XOR with a per-table constant is
 * one too, so distinct k give distinct ids; the ids do not depend on the fill
 * seed (which only picks the values). Dense tables use their ids 0..corpus-1. */
#ifndef FL_DRAM_STORE_SYNTHETIC_IDS_H
#define FL_DRAM_STORE_SYNTHETIC_IDS_H

#include "common/hash.h"

#define FL_SYNTHETIC_ID_SALT 0x51d5eed0c0ffee00ull

FL_HD uint64_t fl_synthetic_id(uint32_t table, uint64_t k) {
  return fl_mix64(k ^ fl_mix64(FL_SYNTHETIC_ID_SALT + table));
}

#endif
