/* fuzz_model_npy.c: fl_store_import_npy (dram_store/format_npy.c) on
 * arbitrary bytes, split into an ids file and a vectors file (first 2 bytes:
 * the ids file's length), imported into each table of a small store: fp32
 * and fp16, dense and hashed. A failed import must return a documented
 * status, name the file and offset, and leave the store as it was. */
#include "fuzz/model_store.h"

int LLVMFuzzerTestOneInput(const uint8_t *d, size_t n) {
  const uint8_t *a, *b;
  size_t na, nb;
  if (!fuzz_split(d, n, &a, &na, &b, &nb)) return 0;
  char ids[4096], vec[4096];
  fuzz_input_file(ids, "npy-ids", a, na);
  fuzz_input_file(vec, "npy-vec", b, nb);
  const char *paths[2] = {ids, vec};
  fl_store *s = fuzz_model_store();
  for (uint32_t t = 0; t < 3; t++) {
    fuzz_store_state before;
    fuzz_store_snapshot(s, &before);
    fl_status st = fl_store_import_npy(s, t, ids, vec);
    fuzz_check_import(s, &before, t, "fl_store_import_npy", st, paths);
  }
  fl_store_destroy(s);
  unlink(ids);
  unlink(vec);
  return 0;
}
