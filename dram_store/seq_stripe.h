/* seq_stripe.h: which seqlock stripe guards a row (seqlock.h), FL_HD logic
 * shared by the store's host readers and writers and by the query kernels
 * that read rows in place (zero-copy), so both sides take the same stripe. */
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

#endif
