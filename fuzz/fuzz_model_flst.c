/* fuzz_model_flst.c: fl_store_load (dram_store/format_flst.c) on arbitrary
 * bytes. FLST guards its header, metadata and every section with a CRC-32C,
 * so the input is loaded twice: as it is (the checks themselves), then with
 * the length field and every CRC recomputed, so mutated counts, sizes, kinds
 * and ids reach the code behind the checksums. A loaded store is gathered
 * from, to use what the loader built. */
#include "common/crc32c.h"
#include "fuzz/fuzz_util.h"
#include "include/fleche.h"

/* Recomputes, in place, the section CRCs of every table whose metadata and
 * sections lie inside the file, then the metadata CRC, the length field and
 * the header CRC (layout in docs/FORMATS.md). */
static void repair(uint8_t *f, size_t n) {
  if (n < 32) return;
  uint64_t tables = get32(f + 8), meta = get32(f + 12);
  if (meta <= n - 32) {
    uint8_t *m = f + 32;
    uint64_t at = 0, pos = 32 + meta;
    for (uint64_t i = 0; i < tables && meta - at >= 36; i++) {
      uint64_t len = get32(m + at);
      if (len > meta - at - 36) break;
      uint8_t *r = m + at + 4 + len; /* corpus(8) dim(4) dtype kind pad(4) rows(8) crcs(8) */
      uint64_t row = (uint64_t)get32(r + 8) * (r[12] ? 2 : 4), rows = get64(r + 16);
      uint64_t per = row + (r[13] ? 8 : 0); /* hashed rows carry an id */
      if (row == 0 || rows > (n - pos) / per) break; /* does not fit: stop */
      uint64_t ids = r[13] ? rows * 8 : 0;
      put32(r + 24, fl_crc32c(0, f + pos, ids));
      put32(r + 28, fl_crc32c(0, f + pos + ids, rows * row));
      pos += ids + rows * row;
      at += 36 + len;
    }
    put32(f + 24, fl_crc32c(0, m, meta));
  }
  put64(f + 16, n);
  put32(f + 28, fl_crc32c(0, f, 28));
}

static void load(const uint8_t *d, size_t n) {
  char path[4096];
  fuzz_input_file(path, "flst", d, n);
  fl_store *s = NULL;
  fl_status st = fl_store_load(path, 1, &s);
  unlink(path);
  FUZZ_CHECK((st == FL_OK) == (s != NULL), "status %d with store %p", (int)st, (void *)s);
  /* The file exists and is small: no FL_ERR_IO, and every size it claims is
   * checked against it before an allocation (docs/FORMATS.md), so no
   * FL_ERR_OUT_OF_MEMORY either. A format error names the file and offset. */
  fuzz_status("fl_store_load", st, FUZZ_ST(FL_OK) | FUZZ_ST(FL_ERR_FORMAT),
              fl_store_last_error(NULL));
  if (st == FL_ERR_FORMAT) {
    const char *paths[1] = {path};
    fuzz_names_place(fl_store_last_error(NULL), "offset", paths, 1);
  }
  if (!s) return;
  uint64_t ids[2] = {0, 1};
  for (uint32_t t = 0; t < fl_store_num_tables(s); t++) {
    fl_table_desc desc;
    FUZZ_CHECK(fl_store_table(s, t, &desc) == FL_OK, "table %u", t);
    float out[2 * 4096];
    fl_table_query q = {t, ids, 2, out};
    /* Ids 0 and 1: out of range only in a dense table of fewer rows. */
    fl_status g = fl_store_gather(s, &q, 1, FL_MISSING_ZERO, NULL);
    int oor = desc.id_kind == FL_IDS_DENSE && desc.corpus_size < 2;
    fuzz_status("fl_store_gather", g, FUZZ_ST(oor ? FL_ERR_OUT_OF_RANGE : FL_OK),
                fl_store_last_error(s));
  }
  fl_store_destroy(s);
}

int LLVMFuzzerTestOneInput(const uint8_t *d, size_t n) {
  load(d, n);
  uint8_t *fixed = malloc(n ? n : 1);
  if (!fixed) return 0;
  memcpy(fixed, d, n);
  repair(fixed, n);
  if (memcmp(fixed, d, n) != 0) load(fixed, n);
  free(fixed);
  return 0;
}
