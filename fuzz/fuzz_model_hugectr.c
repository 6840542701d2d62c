/* fuzz_model_hugectr.c: fl_store_import_hugectr (dram_store/format_hugectr.c)
 * on arbitrary bytes, split into a folder's `key` and `emb_vector` files
 * (first 2 bytes: the key file's length), imported into each table of a small
 * store. The fp16 table must refuse (HugeCTR models are fp32); a failed import
 * must return a documented status, name the file and offset, and leave the
 * store as it was. */
#include "fuzz/model_store.h"

/* Writes folder/name; aborts when the temp folder is not writable. */
static void put_file(char *path, const char *folder, const char *name, const uint8_t *d,
                     size_t n) {
  snprintf(path, 4096, "%s/%s", folder, name);
  FILE *f = fopen(path, "wb");
  FUZZ_CHECK(f && fwrite(d, 1, n, f) == n && fclose(f) == 0, "cannot write %s", path);
}

int LLVMFuzzerTestOneInput(const uint8_t *d, size_t n) {
  const uint8_t *a, *b;
  size_t na, nb;
  if (!fuzz_split(d, n, &a, &na, &b, &nb)) return 0;
  char dir[4096], key[4096], vec[4096];
  fuzz_temp_name(dir, "hugectr");
  FUZZ_CHECK(mkdtemp(dir) != NULL, "cannot create a folder under %s", fuzz_tmpdir());
  put_file(key, dir, "key", a, na);
  put_file(vec, dir, "emb_vector", b, nb);
  const char *paths[2] = {key, vec};
  fl_store *s = fuzz_model_store();
  for (uint32_t t = 0; t < 3; t++) {
    fuzz_store_state before;
    fuzz_store_snapshot(s, &before);
    fl_status st = fl_store_import_hugectr(s, t, dir);
    if (t == 1) {
      fuzz_status("fl_store_import_hugectr into the fp16 table", st, FUZZ_ST(FL_ERR_UNSUPPORTED),
                  fl_store_last_error(s));
      fuzz_expect_unchanged(s, &before, t, st);
    } else {
      fuzz_check_import(s, &before, t, "fl_store_import_hugectr", st, paths);
    }
  }
  fl_store_destroy(s);
  unlink(key);
  unlink(vec);
  rmdir(dir);
  return 0;
}
