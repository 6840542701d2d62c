/* format_npy.c: NumPy .npy pairs (docs/FORMATS.md): ids as int64 (or uint64)
 * of shape (n,), vectors as float32/float16 of shape (n, dim) matching the
 * table's dtype, little-endian, C order, format versions 1.0 and 2.0. Both
 * files are parsed and checked completely before any row is upserted. */
#include <ctype.h>
#include <stdlib.h>

#include "common/align.h"
#include "dram_store/file_io.h"
#include "dram_store/pairs.h"

/* What an .npy header says. */
typedef struct fl_npy {
  char descr[8];      /* dtype string, e.g. "<f4" */
  int fortran;        /* fortran_order */
  uint32_t ndim;      /* entries of shape */
  uint64_t shape[2];  /* dimensions (at most 2 are accepted) */
  uint64_t text_off;  /* byte offset of the header text (10 or 12) */
  uint64_t data_off;  /* byte offset of the array data */
} fl_npy;

/* Cursor over the header's Python dict literal. */
typedef struct fl_npy_text {
  const char *p;   /* next character */
  const char *end; /* end of the text */
} fl_npy_text;

static void fl_npy_space(fl_npy_text *t) {
  while (t->p < t->end && isspace((unsigned char)*t->p)) t->p++;
}

static int fl_npy_eat(fl_npy_text *t, char c) {
  fl_npy_space(t);
  if (t->p < t->end && *t->p == c) {
    t->p++;
    return 1;
  }
  return 0;
}

/* A quoted string into out (cap bytes with the NUL); 0 on syntax error. */
static int fl_npy_string(fl_npy_text *t, char *out, size_t cap) {
  fl_npy_space(t);
  if (t->p >= t->end || (*t->p != '\'' && *t->p != '"')) return 0;
  char q = *t->p++;
  size_t n = 0;
  while (t->p < t->end && *t->p != q) {
    if (n + 1 >= cap) return 0;
    out[n++] = *t->p++;
  }
  out[n] = 0;
  return t->p++ < t->end;
}

static int fl_npy_word(fl_npy_text *t, const char *w) {
  fl_npy_space(t);
  size_t n = strlen(w);
  if ((size_t)(t->end - t->p) < n || memcmp(t->p, w, n) != 0) return 0;
  t->p += n;
  return 1;
}

/* A shape tuple "(a, b)" / "(a,)" / "()"; 0 on syntax error or > 2 dims. */
static int fl_npy_shape(fl_npy_text *t, fl_npy *h) {
  if (!fl_npy_eat(t, '(')) return 0;
  h->ndim = 0;
  while (!fl_npy_eat(t, ')')) {
    fl_npy_space(t);
    if (h->ndim == 2 || t->p >= t->end || !isdigit((unsigned char)*t->p)) return 0;
    uint64_t v = 0;
    while (t->p < t->end && isdigit((unsigned char)*t->p)) {
      if (v > (UINT64_MAX - 9) / 10) return 0;
      v = v * 10 + (uint64_t)(*t->p++ - '0');
    }
    h->shape[h->ndim++] = v;
    if (!fl_npy_eat(t, ',') && !(fl_npy_space(t), t->p < t->end && *t->p == ')')) return 0;
  }
  return 1;
}

/* Parses the dict; 1 when it is well-formed with the three keys. */
static int fl_npy_dict(fl_npy_text *t, fl_npy *h) {
  int seen = 0; /* bit per key: descr, fortran_order, shape */
  if (!fl_npy_eat(t, '{')) return 0;
  while (!fl_npy_eat(t, '}')) {
    char key[16];
    if (!fl_npy_string(t, key, sizeof key) || !fl_npy_eat(t, ':')) return 0;
    if (!strcmp(key, "descr") && fl_npy_string(t, h->descr, sizeof h->descr)) {
      seen |= 1;
    } else if (!strcmp(key, "fortran_order") && fl_npy_word(t, "True")) {
      h->fortran = 1;
      seen |= 2;
    } else if (!strcmp(key, "fortran_order") && fl_npy_word(t, "False")) {
      h->fortran = 0;
      seen |= 2;
    } else if (!strcmp(key, "shape") && fl_npy_shape(t, h)) {
      seen |= 4;
    } else {
      return 0;
    }
    if (!fl_npy_eat(t, ',') && !(fl_npy_space(t), t->p < t->end && *t->p == '}')) return 0;
  }
  return seen == 7;
}

static fl_status fl_npy_header(fl_rfile *r, fl_npy *h) {
  unsigned char pre[12];
  memset(h, 0, sizeof *h);
  fl_status st = fl_rfile_read(r, pre, 8, "the NumPy magic");
  if (st != FL_OK) return st;
  if (memcmp(pre, "\x93NUMPY", 6) != 0)
    return fl_fail(r->h, FL_ERR_FORMAT, "%s: offset 0: not a NumPy .npy file (bad magic)", r->path);
  if (pre[6] != 1 && pre[6] != 2)
    return fl_fail(r->h, FL_ERR_FORMAT,
                   "%s: offset 6: header is not a NumPy v1/v2 header (version %u.%u)", r->path,
                   pre[6], pre[7]);
  size_t len_bytes = pre[6] == 1 ? 2 : 4;
  if ((st = fl_rfile_read(r, pre + 8, len_bytes, "the header length")) != FL_OK) return st;
  uint32_t len = pre[8] | (uint32_t)pre[9] << 8;
  if (len_bytes == 4) len |= (uint32_t)pre[10] << 16 | (uint32_t)pre[11] << 24;
  h->text_off = r->off;
  /* A length from the file is checked against the file before anything is
   * allocated for it. */
  if (len > r->size - r->off)
    return fl_fail(r->h, FL_ERR_FORMAT,
                   "%s: offset 8: header length %u runs past the end of the file (%llu bytes)",
                   r->path, len, (unsigned long long)r->size);
  char *text = malloc(len ? len : 1);
  if (!text) return fl_fail(r->h, FL_ERR_OUT_OF_MEMORY, "%s: no memory for the header", r->path);
  st = fl_rfile_read(r, text, len, "the NumPy header");
  fl_npy_text t = {text, text + len};
  if (st == FL_OK && !fl_npy_dict(&t, h))
    st = fl_fail(r->h, FL_ERR_FORMAT, "%s: offset %llu: header is not a NumPy v1/v2 header",
                 r->path, (unsigned long long)h->text_off);
  free(text);
  if (st == FL_OK && h->fortran)
    st = fl_fail(r->h, FL_ERR_FORMAT, "%s: offset %llu: fortran_order True is not supported "
                 "(save a C-ordered array)", r->path, (unsigned long long)h->text_off);
  h->data_off = r->off;
  return st;
}

/* Reads one .npy file whose dtype must be one of descrs (NULL-terminated)
 * and whose shape must be (n,) (cols 0) or (n, cols); *data gets the array,
 * *n its rows, *descr which dtype matched. */
static fl_status fl_npy_read(fl_store *s, const char *path, const char *const *descrs,
                             uint32_t cols, const char *what, void **data, uint64_t *n,
                             uint64_t *data_off) {
  fl_rfile r;
  fl_npy h;
  *data = NULL;
  fl_status st = fl_rfile_open(&r, s, path);
  if (st != FL_OK) return st;
  st = fl_npy_header(&r, &h);
  int known = 0;
  for (const char *const *d = descrs; *d; d++) known |= !strcmp(h.descr, *d);
  if (st == FL_OK && !known)
    st = fl_fail(s, FL_ERR_FORMAT, "%s: offset %llu: %s have dtype '%s', expected '%s'", path,
                 (unsigned long long)h.text_off, what, h.descr, descrs[0]);
  if (st == FL_OK && (h.ndim != (cols ? 2u : 1u) || (cols && h.shape[1] != cols))) {
    char want[48];
    snprintf(want, sizeof want, cols ? "(n, %u)" : "(n,)", cols);
    st = fl_fail(s, FL_ERR_FORMAT, "%s: offset %llu: %s have shape (%llu%s%llu), expected %s",
                 path, (unsigned long long)h.text_off, what, (unsigned long long)h.shape[0],
                 h.ndim > 1 ? ", " : "", (unsigned long long)(h.ndim > 1 ? h.shape[1] : 0), want);
  }
  uint64_t item = (uint64_t)(h.descr[2] - '0') * (cols ? cols : 1);
  uint64_t rows = h.ndim ? h.shape[0] : 0, total = h.data_off + rows * item;
  if (st == FL_OK) st = fl_rfile_check_items(&r, h.data_off, rows, item, cols ? "row" : "id", total);
  if (st == FL_OK && r.size != total)
    st = fl_fail(s, FL_ERR_FORMAT, "%s: offset %llu: %llu bytes after the array data", path,
                 (unsigned long long)total, (unsigned long long)(r.size - total));
  if (st == FL_OK && !(*data = malloc(rows * item + 1)))
    st = fl_fail(s, FL_ERR_OUT_OF_MEMORY, "%s: no memory for %llu rows", path,
                 (unsigned long long)rows);
  if (st == FL_OK) st = fl_rfile_read(&r, *data, rows * item, "the array data");
  if (st != FL_OK) {
    free(*data);
    *data = NULL;
  }
  *n = rows;
  *data_off = h.data_off;
  fl_rfile_close(&r);
  return st;
}

fl_status fl_store_import_npy(fl_store *s, uint32_t table, const char *ids_path,
                              const char *vectors_path) {
  if (!s || !ids_path || !vectors_path)
    return fl_fail(s, FL_ERR_INVALID_ARGUMENT, "fl_store_import_npy: NULL argument");
  fl_table *t = fl_store_table_arg(s, table, "fl_store_import_npy");
  if (!t) return FL_ERR_INVALID_ARGUMENT;
  static const char *const id_types[] = {"<i8", "<u8", NULL};
  static const char *const f32[] = {"<f4", NULL}, *const f16[] = {"<f2", NULL};
  void *ids = NULL, *vec = NULL;
  uint64_t n_ids = 0, n_vec = 0, ids_off = 0, vec_off = 0;
  fl_status st = fl_npy_read(s, ids_path, id_types, 0, "ids", &ids, &n_ids, &ids_off);
  if (st == FL_OK)
    st = fl_npy_read(s, vectors_path, t->desc.dtype == FL_FP16 ? f16 : f32, t->desc.dim,
                     "vectors", &vec, &n_vec, &vec_off);
  if (st == FL_OK && n_ids != n_vec)
    st = fl_fail(s, FL_ERR_FORMAT, "%s: offset %llu: %llu vectors but %s holds %llu ids",
                 vectors_path, (unsigned long long)vec_off, (unsigned long long)n_vec, ids_path,
                 (unsigned long long)n_ids);
  if (st == FL_OK) st = fl_pairs_import(s, t, ids, n_ids, vec, ids_path, ids_off);
  free(ids);
  free(vec);
  return st;
}

/* A v1.0 header, padded with spaces and a newline to a multiple of 64 bytes
 * as NumPy itself writes it. */
static size_t fl_npy_make_header(const fl_table *t, uint64_t rows, int vectors, char *buf) {
  char dict[160];
  int n = vectors ? snprintf(dict, sizeof dict,
                             "{'descr': '%s', 'fortran_order': False, 'shape': (%llu, %u), }",
                             t->desc.dtype == FL_FP16 ? "<f2" : "<f4",
                             (unsigned long long)rows, t->desc.dim)
                  : snprintf(dict, sizeof dict,
                             "{'descr': '<i8', 'fortran_order': False, 'shape': (%llu,), }",
                             (unsigned long long)rows);
  size_t total = fl_align_up(10 + (size_t)n + 1, 64), len = total - 10;
  memcpy(buf, "\x93NUMPY\x01\x00", 8);
  buf[8] = (char)(len & 0xff);
  buf[9] = (char)(len >> 8);
  memcpy(buf + 10, dict, (size_t)n);
  memset(buf + 10 + n, ' ', len - (size_t)n - 1);
  buf[total - 1] = '\n';
  return total;
}

fl_status fl_store_export_npy(fl_store *s, uint32_t table, const char *ids_path,
                              const char *vectors_path) {
  if (!s || !ids_path || !vectors_path)
    return fl_fail(s, FL_ERR_INVALID_ARGUMENT, "fl_store_export_npy: NULL argument");
  fl_table *t = fl_store_table_arg(s, table, "fl_store_export_npy");
  if (!t) return FL_ERR_INVALID_ARGUMENT;
  return fl_pairs_export(s, t, ids_path, vectors_path, fl_npy_make_header);
}
