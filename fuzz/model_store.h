/* model_store.h: the small store the NumPy and HugeCTR import fuzz targets
 * import into, and the checks on a failed import they share: its status, its
 * message, and "a failed import changes nothing". */
#ifndef FL_FUZZ_MODEL_STORE_H
#define FL_FUZZ_MODEL_STORE_H

#include "fuzz/fuzz_util.h"
#include "include/fleche.h"

/* A dense fp32 table of 16 rows (dim 4), a hashed fp16 one (dim 2) and a
 * hashed fp32 one (dim 3): both dtypes, both id kinds, dense range checks. */
enum { FUZZ_DENSE_ROWS = 16 };

static inline fl_store *fuzz_model_store(void) {
  static const fl_table_desc tables[3] = {
      {"dense", FUZZ_DENSE_ROWS, 4, FL_FP32, FL_IDS_DENSE},
      {"half", 64, 2, FL_FP16, FL_IDS_HASHED},
      {"hashed", 64, 3, FL_FP32, FL_IDS_HASHED},
  };
  fl_store *s = NULL;
  FUZZ_CHECK(fl_store_create(tables, 3, 1, &s) == FL_OK, "%s", fl_store_last_error(NULL));
  return s;
}

/* What an import may change: the rows of the hashed tables, the dense
 * table's values. */
typedef struct fuzz_store_state {
  uint64_t rows[3];
  float dense[FUZZ_DENSE_ROWS * 4];
} fuzz_store_state;

static inline void fuzz_store_snapshot(fl_store *s, fuzz_store_state *out) {
  memset(out, 0, sizeof *out);
  for (uint32_t t = 0; t < 3; t++) {
    fl_store_table_stats st;
    FUZZ_CHECK(fl_store_stats(s, t, &st) == FL_OK, "stats of table %u", t);
    out->rows[t] = st.rows;
  }
  uint64_t ids[FUZZ_DENSE_ROWS];
  for (uint64_t i = 0; i < FUZZ_DENSE_ROWS; i++) ids[i] = i;
  fl_table_query q = {0, ids, FUZZ_DENSE_ROWS, out->dense};
  FUZZ_CHECK(fl_store_gather(s, &q, 1, FL_MISSING_ZERO, NULL) == FL_OK, "%s",
             fl_store_last_error(s));
}

/* Loading is all or nothing (docs/FORMATS.md): after a failed import the
 * store is as it was. */
static inline void fuzz_expect_unchanged(fl_store *s, const fuzz_store_state *before,
                                         uint32_t table, fl_status st) {
  fuzz_store_state after;
  fuzz_store_snapshot(s, &after);
  FUZZ_CHECK(memcmp(before, &after, sizeof after) == 0,
             "failed import into table %u (%s: %s) changed the store", table, fl_status_name(st),
             fl_store_last_error(s));
}

/* An import of arbitrary bytes into `table` returned st. The files exist and
 * are small, and every size they claim is checked against them before an
 * allocation (docs/FORMATS.md), so the documented statuses left are FL_OK,
 * FL_ERR_FORMAT and, for the dense table, FL_ERR_OUT_OF_RANGE; either error
 * names one of the two files (paths) and an offset, and leaves the store as
 * it was. */
static inline void fuzz_check_import(fl_store *s, const fuzz_store_state *before, uint32_t table,
                                     const char *call, fl_status st, const char *const paths[2]) {
  unsigned allowed = FUZZ_ST(FL_OK) | FUZZ_ST(FL_ERR_FORMAT);
  if (table == 0) allowed |= FUZZ_ST(FL_ERR_OUT_OF_RANGE);
  fuzz_status(call, st, allowed, fl_store_last_error(s));
  if (st == FL_OK) return;
  fuzz_names_place(fl_store_last_error(s), "offset", paths, 2);
  fuzz_expect_unchanged(s, before, table, st);
}

#endif
