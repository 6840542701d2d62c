/* zero_copy.h: which of a batch's unique rows the GPU reads straight from
 * the store (zero-copy, over PCIe) instead of the host's gather.
 *
 * A row qualifies when its address is known without the store's lookup: a
 * miss of a dense table whose rows are registered for device access (row
 * id at rows + id * row bytes). A part batch takes the device path when at
 * most `limit` of its unique rows qualify (cfg.zero_copy_rows): reading in
 * place costs a PCIe round trip per row, cheap for a few rows, while the
 * host gather's fixed costs (waking threads, an upload) pay off for many.
 * The engine decides from the published counters and launches the
 * zero-copy kernel (query_kernels.cu) only then; the host still gathers
 * what does not qualify (hashed ids, unified-index pointers) into the same
 * staging, around the GPU's rows. */
#ifndef FL_FUSION_ZERO_COPY_H
#define FL_FUSION_ZERO_COPY_H

#include "dram_store/seq_stripe.h"
#include "batch/miss_set.h"

/* Per table: its dense rows as the device sees them, NULL when they cannot
 * be read in place. */
typedef struct fl_zc_table {
  const uint8_t *rows;
} fl_zc_table;

/* Unique rows of arg a that qualify: its misses when its table is readable
 * in place. */
FL_HD uint32_t fl_zc_arg_rows(const uint32_t *per_arg, uint32_t a, int readable) {
  return readable ? per_arg[FL_MISS_COUNTERS * a] : 0u;
}

/* Whether a batch with `rows` qualifying unique rows takes the device path. */
FL_HD int fl_zc_take(uint64_t rows, uint64_t limit) { return rows > 0 && rows <= limit; }

/* Unique rows left for the host to gather, of `all`, when `qualify` of them
 * qualify for the device path. */
FL_HD uint64_t fl_zc_host_rows(uint64_t qualify, uint64_t all, uint64_t limit) {
  return fl_zc_take(qualify, limit) ? all - qualify : all;
}

#endif
