/* format_hugectr.c: HugeCTR's sparse model folder (docs/FORMATS.md): `key`,
 * raw little-endian int64 ids, and `emb_vector`, raw float32 rows of the
 * table's dim in the same order. The files carry no header, so sizes are the
 * only check: key must be whole ids, emb_vector exactly one row per id. */
#include <errno.h>
#include <stdlib.h>
#include <sys/stat.h>

#include "dram_store/file_io.h"
#include "dram_store/pairs.h"

/* "folder/name" in a malloc'd string, NULL on OOM. */
static char *fl_hugectr_path(const char *folder, const char *name) {
  size_t n = strlen(folder) + strlen(name) + 2;
  char *p = malloc(n);
  if (p) snprintf(p, n, "%s/%s", folder, name);
  return p;
}

/* Reads a headerless file of whole items into *data. With `exact` the file
 * must hold *count items; without, it sets *count (and must end on an item). */
static fl_status fl_hugectr_read(fl_store *s, const char *path, uint64_t item, const char *what,
                                 int exact, uint64_t *count, void **data) {
  fl_rfile r;
  *data = NULL;
  fl_status st = fl_rfile_open(&r, s, path);
  if (st != FL_OK) return st;
  uint64_t n = exact ? *count : r.size / item, want = n * item, k = r.size / item;
  if (r.size < want || (!exact && r.size % item))
    st = fl_fail(s, FL_ERR_FORMAT, "%s: offset %llu: file ends inside %s %llu (expected %llu bytes)",
                 path, (unsigned long long)(k * item), what, (unsigned long long)k,
                 (unsigned long long)(r.size < want ? want : (k + 1) * item));
  else if (r.size > want)
    st = fl_fail(s, FL_ERR_FORMAT, "%s: offset %llu: %llu bytes after %s %llu, the last one "
                 "(one per id of the key file)", path, (unsigned long long)want,
                 (unsigned long long)(r.size - want), what, (unsigned long long)(n ? n - 1 : 0));
  if (st == FL_OK && !(*data = malloc(want ? want : 1)))
    st = fl_fail(s, FL_ERR_OUT_OF_MEMORY, "%s: no memory for %llu %ss", path,
                 (unsigned long long)n, what);
  if (st == FL_OK) st = fl_rfile_read(&r, *data, want, what);
  if (st != FL_OK) {
    free(*data);
    *data = NULL;
  }
  *count = n;
  fl_rfile_close(&r);
  return st;
}

fl_status fl_store_import_hugectr(fl_store *s, uint32_t table, const char *folder) {
  if (!s || !folder)
    return fl_fail(s, FL_ERR_INVALID_ARGUMENT, "fl_store_import_hugectr: NULL argument");
  fl_table *t = fl_store_table_arg(s, table, "fl_store_import_hugectr");
  if (!t) return FL_ERR_INVALID_ARGUMENT;
  if (t->desc.dtype != FL_FP32)
    return fl_fail(s, FL_ERR_UNSUPPORTED,
                   "fl_store_import_hugectr: table %u '%s' is fp16; HugeCTR models are fp32", table,
                   t->name);
  char *key_path = fl_hugectr_path(folder, "key"), *vec_path = fl_hugectr_path(folder, "emb_vector");
  void *ids = NULL, *vec = NULL;
  uint64_t n = 0;
  fl_status st = key_path && vec_path
                     ? fl_hugectr_read(s, key_path, 8, "id", 0, &n, &ids)
                     : fl_fail(s, FL_ERR_OUT_OF_MEMORY, "%s: no memory", folder);
  if (st == FL_OK) st = fl_hugectr_read(s, vec_path, t->row_bytes, "row", 1, &n, &vec);
  if (st == FL_OK) st = fl_pairs_import(s, t, ids, n, vec, key_path, 0);
  free(ids);
  free(vec);
  free(key_path);
  free(vec_path);
  return st;
}

fl_status fl_store_export_hugectr(fl_store *s, uint32_t table, const char *folder) {
  if (!s || !folder)
    return fl_fail(s, FL_ERR_INVALID_ARGUMENT, "fl_store_export_hugectr: NULL argument");
  fl_table *t = fl_store_table_arg(s, table, "fl_store_export_hugectr");
  if (!t) return FL_ERR_INVALID_ARGUMENT;
  if (t->desc.dtype != FL_FP32)
    return fl_fail(s, FL_ERR_UNSUPPORTED,
                   "fl_store_export_hugectr: table %u '%s' is fp16; HugeCTR models are fp32", table,
                   t->name);
  if (mkdir(folder, 0777) != 0 && errno != EEXIST)
    return fl_fail(s, FL_ERR_IO, "%s: cannot create the folder: %s", folder, strerror(errno));
  char *key_path = fl_hugectr_path(folder, "key"), *vec_path = fl_hugectr_path(folder, "emb_vector");
  fl_status st = key_path && vec_path ? fl_pairs_export(s, t, key_path, vec_path, NULL)
                                      : fl_fail(s, FL_ERR_OUT_OF_MEMORY, "%s: no memory", folder);
  free(key_path);
  free(vec_path);
  return st;
}
