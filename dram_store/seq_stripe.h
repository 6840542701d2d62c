/* seq_stripe.h: which seqlock stripe guards a row (seqlock.h), and where a
 * hashed table's slot keeps its header: FL_HD logic shared by the store's
 * host readers and writers and by the query kernels that read rows in place
 * (zero-copy), so both sides take the same stripe and header. */
#ifndef FL_DRAM_STORE_SEQ_STRIPE_H
#define FL_DRAM_STORE_SEQ_STRIPE_H

#include "common/hd.h"

#define FL_SEQ_STRIPE_BITS 14
#define FL_SEQ_STRIPES (1u << FL_SEQ_STRIPE_BITS)

/* Stripe of row `row` of table `table` (Fibonacci hashing: neighbouring rows
 * land on different stripes). */
FL_HD uint32_t fl_seq_stripe(uint32_t table, uint64_t row) {
  uint64_t h = (row + ((uint64_t)table << 40)) * 0x9e3779b97f4a7c15ull;
  return (uint32_t)(h >> (64 - FL_SEQ_STRIPE_BITS));
}

/* A hashed table's slots (rows.h) as a reader holding only a reference,
 * the vector's address, finds them: in chunks of FL_SLOT_CHUNK_BYTES aligned
 * to their size, per_chunk vectors vec_stride apart, then per_chunk 16-byte
 * headers {owner id, live word}. */
#define FL_SLOT_CHUNK_BYTES (2ull << 20)
typedef struct fl_slot_layout {
  uint64_t per_chunk;
  uint32_t vec_stride; /* 0: no slots (a dense table, or none readable) */
} fl_slot_layout;

/* The header's live word holds FL_SLOT_HEAD_LIVE while its owner's row is there. */
#define FL_SLOT_HEAD_LIVE 1u

/* The address of the header of the slot whose vector is at vec. */
FL_HD uint64_t fl_slot_head(uint64_t vec, fl_slot_layout l) {
  const uint64_t base = vec & ~(FL_SLOT_CHUNK_BYTES - 1);
  return base + l.per_chunk * l.vec_stride + (vec - base) / l.vec_stride * 16u;
}

/* The stripe of table `table`'s slot whose header is at `head`: keyed by
 * the header's address, not the slot's number (a reader holding a
 * reference has none; slots never move, so the address names the slot). */
FL_HD uint32_t fl_slot_stripe(uint32_t table, uint64_t head) { return fl_seq_stripe(table, head / 16u); }

#endif
