/* pairs.c: import and export of an (ids file, vectors file) pair, shared by
 * format_npy.c and format_hugectr.c (see pairs.h). */
#include "dram_store/pairs.h"

#include "dram_store/file_io.h"

fl_status fl_pairs_import(fl_store *s, fl_table *t, const uint64_t *ids, size_t n,
                          const void *vectors, const char *ids_path, uint64_t ids_off) {
  size_t bad = fl_table_first_out_of_range(t, ids, n);
  if (bad < n)
    return fl_fail(s, FL_ERR_OUT_OF_RANGE,
                   "%s: offset %llu: id %llu is out of range for table %u '%s' (corpus %llu)",
                   ids_path, (unsigned long long)(ids_off + 8 * bad), (unsigned long long)ids[bad],
                   t->id, t->name, (unsigned long long)t->desc.corpus_size);
  return fl_store_upsert_rows(s, t, ids, n, vectors);
}

typedef struct fl_pairs_writer {
  fl_wfile ids;     /* the ids file */
  fl_wfile vec;     /* the vectors file */
  size_t row_bytes; /* bytes per vector */
  fl_status st;     /* first failure */
} fl_pairs_writer;

static int fl_pairs_write_row(void *ctx, uint64_t id, const void *v) {
  fl_pairs_writer *x = ctx;
  x->st = fl_wfile_write(&x->ids, &id, sizeof id);
  if (x->st == FL_OK) x->st = fl_wfile_write(&x->vec, v, x->row_bytes);
  return x->st != FL_OK;
}

fl_status fl_pairs_export(fl_store *s, fl_table *t, const char *ids_path,
                          const char *vectors_path, fl_pairs_header_fn head) {
  fl_status whole = s->ops->whole(s, "export");
  if (whole != FL_OK) return whole;
  fl_pairs_writer x = {.row_bytes = t->row_bytes, .st = FL_OK};
  char hdr[FL_PAIRS_HEADER_MAX];
  pthread_mutex_lock(&t->write_lock);
  uint64_t rows = atomic_load(&t->rows);
  fl_status st = fl_wfile_open(&x.ids, s, ids_path);
  if (st == FL_OK) {
    st = fl_wfile_open(&x.vec, s, vectors_path);
    if (st != FL_OK) fl_wfile_abort(&x.ids);
  }
  if (st == FL_OK) {
    if (head) st = fl_wfile_write(&x.ids, hdr, head(t, rows, 0, hdr));
    if (head && st == FL_OK) st = fl_wfile_write(&x.vec, hdr, head(t, rows, 1, hdr));
    if (st == FL_OK && fl_table_walk(t, fl_pairs_write_row, &x)) st = x.st;
    if (st == FL_OK) st = fl_wfile_commit(&x.ids);
    else fl_wfile_abort(&x.ids);
    if (st == FL_OK) st = fl_wfile_commit(&x.vec);
    else fl_wfile_abort(&x.vec);
  }
  pthread_mutex_unlock(&t->write_lock);
  return st;
}
