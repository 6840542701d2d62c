/* encode.c: batch encode and decode of the public API on the host, through the
 * same FL_HD functions the query kernel runs (flat_key.h); use_gpu hands the
 * batch to encode_gpu.c. */
#include <inttypes.h>

#include "common/error.h"
#include "encoding/encoder.h"

fl_status fl_encoding_encode(const fl_encoding *e, uint32_t table, const uint64_t *ids,
                             size_t n, uint64_t *keys, int use_gpu) {
  if (!e) return fl_fail(NULL, FL_ERR_INVALID_ARGUMENT, "fl_encoding_encode: encoding is NULL");
  uint32_t n_tables = fl_encoding_num_tables(e);
  if (table >= n_tables)
    return fl_fail(e, FL_ERR_INVALID_ARGUMENT, "fl_encoding_encode: table %u of %u", table,
                   n_tables);
  if (n > 0 && (!ids || !keys))
    return fl_fail(e, FL_ERR_INVALID_ARGUMENT, "fl_encoding_encode: table %u: %s is NULL", table,
                   ids ? "keys" : "ids");
  if (use_gpu) return fl_encoding_encode_gpu(e, table, ids, n, keys);

  const fl_code *c = &fl_encoding_codes(e)[table];
  uint32_t key_bits = fl_encoding_key_bits(e);
  /* Check every id before writing any key: a failed call changes nothing. */
  if (c->id_kind == FL_IDS_DENSE)
    for (size_t i = 0; i < n; i++)
      if (ids[i] >= c->corpus)
        return fl_fail(e, FL_ERR_OUT_OF_RANGE,
                       "fl_encoding_encode: table %u '%s': id %" PRIu64 " (index %zu) is not "
                       "below its corpus size %" PRIu64,
                       table, fl_encoding_table_name(e, table), ids[i], i, c->corpus);
  for (size_t i = 0; i < n; i++) (void)fl_code_encode(c, key_bits, ids[i], &keys[i]);
  return FL_OK;
}

/* The table whose block holds `key`, or n_tables when none does. */
static uint32_t find_table(const fl_encoding *e, uint64_t key) {
  const fl_code *codes = fl_encoding_codes(e);
  const uint32_t *order = fl_encoding_order(e);
  uint32_t lo = 0, hi = fl_encoding_num_tables(e); /* last block starting <= key */
  while (hi - lo > 1) {
    uint32_t mid = lo + (hi - lo) / 2;
    if (codes[order[mid]].prefix_shifted <= key) lo = mid; else hi = mid;
  }
  uint32_t t = order[lo];
  return fl_code_holds(&codes[t], key) ? t : fl_encoding_num_tables(e);
}

fl_status fl_encoding_decode(const fl_encoding *e, const uint64_t *keys, size_t n,
                             uint32_t *tables, uint64_t *ids) {
  if (!e) return fl_fail(NULL, FL_ERR_INVALID_ARGUMENT, "fl_encoding_decode: encoding is NULL");
  if (n > 0 && (!keys || !tables || !ids))
    return fl_fail(e, FL_ERR_INVALID_ARGUMENT, "fl_encoding_decode: %s is NULL",
                   !keys ? "keys" : !tables ? "tables" : "ids");
  if (!fl_encoding_lossless(e))
    return fl_fail(e, FL_ERR_UNSUPPORTED,
                   "fl_encoding_decode: the encoding is lossy (some table folds its ids)");
  const fl_code *codes = fl_encoding_codes(e);
  /* Check every key before writing: a key no encode can yield is an error. */
  for (size_t i = 0; i < n; i++) {
    uint32_t t = find_table(e, keys[i]);
    if (t == fl_encoding_num_tables(e) || fl_code_decode(&codes[t], keys[i]) >= codes[t].corpus)
      return fl_fail(e, FL_ERR_INVALID_ARGUMENT,
                     "fl_encoding_decode: key %#" PRIx64 " (index %zu) encodes no table's id",
                     keys[i], i);
  }
  for (size_t i = 0; i < n; i++) {
    tables[i] = find_table(e, keys[i]);
    ids[i] = fl_code_decode(&codes[tables[i]], keys[i]);
  }
  return FL_OK;
}
