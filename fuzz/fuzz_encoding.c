/* fuzz_encoding.c: the flat-key encoding (encoding/) on table layouts drawn
 * from the input: 1..40 tables of any corpus size (0 included, an error),
 * dense or hashed, 32- or 64-bit keys, size-aware or fixed. Properties, for
 * every layout the encoder accepts:
 * - encode never yields the empty key (all ones: it marks empty index slots)
 *   and every key lies in its table's block (the report's prefix);
 * - a dense id >= corpus is FL_ERR_OUT_OF_RANGE;
 * - lossless encodings decode every key back to its (table, id);
 * - decoding any key either fails with the documented status or names an id
 *   that encodes to that key;
 * - no call fails with a status docs/API.md does not give for its input. */
#include <inttypes.h>

#include "fuzz/fuzz_util.h"
#include "include/fleche.h"

enum { MAX_TABLES = 40, IDS_PER_TABLE = 6 };

/* A corpus size of a random magnitude: [2^(e-1), 2^e) for e in 1..64, or 1,
 * or (rarely) 0, which the encoder must refuse. */
static uint64_t draw_corpus(fuzz_bytes *b) {
  uint32_t e = fuzz_below(b, 66);
  if (e == 65) return 0;
  if (e == 0) return 1;
  uint64_t top = 1ull << (e - 1), v = fuzz_take(b, 8);
  return top | (v & (top - 1));
}

static uint64_t empty_key(uint32_t key_bits) {
  return key_bits == 64 ? ~0ull : (1ull << key_bits) - 1;
}

/* Checks one table's keys against the report and, when lossless, decodes. */
static void check_keys(const fl_encoding *e, uint32_t t, const fl_table_code_report *r,
                       uint32_t key_bits, const uint64_t *ids, const uint64_t *keys, size_t n) {
  for (size_t i = 0; i < n; i++) {
    FUZZ_CHECK(keys[i] != empty_key(key_bits), "table %u id %" PRIu64 " encodes to the empty key",
               t, ids[i]);
    FUZZ_CHECK(keys[i] <= empty_key(key_bits), "key %#" PRIx64 " wider than %u bits", keys[i],
               key_bits);
    uint64_t prefix = r->feature_bits >= 64 ? 0 : keys[i] >> r->feature_bits;
    FUZZ_CHECK(prefix == r->prefix, "table %u key %#" PRIx64 " outside its block (prefix %#" PRIx64
               ")", t, keys[i], r->prefix);
  }
  if (!fl_encoding_lossless(e)) return;
  uint32_t tables[IDS_PER_TABLE + 2];
  uint64_t back[IDS_PER_TABLE + 2];
  fuzz_status("fl_encoding_decode", fl_encoding_decode(e, keys, n, tables, back), FUZZ_ST(FL_OK),
              fl_encoding_last_error(e));
  for (size_t i = 0; i < n; i++)
    FUZZ_CHECK(tables[i] == t && back[i] == ids[i],
               "(%u, %" PRIu64 ") -> %#" PRIx64 " -> (%u, %" PRIu64 ")", t, ids[i], keys[i],
               tables[i], back[i]);
}

int LLVMFuzzerTestOneInput(const uint8_t *d, size_t n) {
  fuzz_bytes b = {d, n};
  fl_table_desc tables[MAX_TABLES];
  uint32_t n_tables = 1 + fuzz_below(&b, MAX_TABLES);
  uint32_t flags = (uint32_t)fuzz_take(&b, 1);
  uint32_t key_bits = flags & 1 ? 32 : 64;
  fl_encoding_scheme scheme = flags & 2 ? FL_ENCODING_FIXED : FL_ENCODING_SIZE_AWARE;
  for (uint32_t i = 0; i < n_tables; i++) {
    uint32_t k = (uint32_t)fuzz_take(&b, 1);
    tables[i] = (fl_table_desc){NULL, draw_corpus(&b), 1 + (k >> 3) % 64,
                                k & 1 ? FL_FP16 : FL_FP32,
                                /* mostly dense: one hashed table makes the whole
                                 * encoding lossy, and the round trip is the point */
                                (k & 6) == 6 ? FL_IDS_HASHED : FL_IDS_DENSE};
  }
  fl_encoding *e = NULL;
  /* Valid arguments but any layout: a corpus of 0, or more tables than keys,
   * is FL_ERR_INVALID_ARGUMENT; nothing else may fail (docs/API.md). */
  fl_status st = fl_encoding_create(tables, n_tables, key_bits, scheme, &e);
  fuzz_status("fl_encoding_create", st, FUZZ_ST(FL_OK) | FUZZ_ST(FL_ERR_INVALID_ARGUMENT),
              fl_encoding_last_error(NULL));
  if (st != FL_OK) {
    FUZZ_CHECK(e == NULL, "a failed create returned an encoding");
    return 0;
  }
  for (uint32_t t = 0; t < n_tables; t++) {
    fl_table_code_report r;
    fuzz_status("fl_encoding_report", fl_encoding_report(e, t, &r), FUZZ_ST(FL_OK),
                fl_encoding_last_error(e));
    FUZZ_CHECK(r.prefix_len + r.feature_bits == key_bits, "table %u: %u + %u bits", t,
               r.prefix_len, r.feature_bits);
    uint64_t corpus = tables[t].corpus_size, ids[IDS_PER_TABLE + 2], keys[IDS_PER_TABLE + 2];
    int dense = tables[t].id_kind == FL_IDS_DENSE;
    size_t k = 0;
    if (dense) ids[k++] = 0, ids[k++] = corpus - 1; /* both ends of the range */
    for (uint32_t i = 0; i < IDS_PER_TABLE; i++) {
      uint64_t v = fuzz_take(&b, 8);
      ids[k++] = dense ? v % corpus : v;
    }
    fuzz_status("fl_encoding_encode", fl_encoding_encode(e, t, ids, k, keys, 0), FUZZ_ST(FL_OK),
                fl_encoding_last_error(e));
    check_keys(e, t, &r, key_bits, ids, keys, k);
    if (dense) {
      uint64_t step = fuzz_take(&b, 1), key;
      uint64_t bad = corpus + step >= corpus ? corpus + step : corpus; /* no wrap to 0 */
      fuzz_status("fl_encoding_encode of an id >= corpus",
                  fl_encoding_encode(e, t, &bad, 1, &key, 0), FUZZ_ST(FL_ERR_OUT_OF_RANGE),
                  fl_encoding_last_error(e));
    }
  }
  /* Any key: a lossy encoding refuses to decode; a lossless one decodes it to
   * a (table, id) that encodes back to it, or calls it a key no id encodes
   * to (FL_ERR_INVALID_ARGUMENT). */
  uint64_t key = fuzz_take(&b, 8) & empty_key(key_bits), id;
  uint32_t table;
  st = fl_encoding_decode(e, &key, 1, &table, &id);
  fuzz_status("fl_encoding_decode", st,
              fl_encoding_lossless(e) ? FUZZ_ST(FL_OK) | FUZZ_ST(FL_ERR_INVALID_ARGUMENT)
                                      : FUZZ_ST(FL_ERR_UNSUPPORTED),
              fl_encoding_last_error(e));
  if (st == FL_OK) {
    uint64_t again;
    FUZZ_CHECK(table < n_tables && fl_encoding_encode(e, table, &id, 1, &again, 0) == FL_OK &&
                   again == key,
               "key %#" PRIx64 " decodes to (%u, %" PRIu64 ")", key, table, id);
  }
  fl_encoding_destroy(e);
  return 0;
}
