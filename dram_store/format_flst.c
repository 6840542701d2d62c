/* format_flst.c: fl_store_save and fl_store_load, our own "FLST" model file
 * (layout in docs/FORMATS.md): a 32-byte header with its own CRC, table
 * metadata with a CRC, then per table an ids section (hashed tables only) and
 * a rows section, each with a CRC-32C kept in the metadata. Save holds every
 * table's write lock (writers wait, readers do not) so the file is one
 * consistent snapshot. Load validates sizes before reading, builds a complete
 * new store and returns it only when every checksum matched. */
#include <stdlib.h>

#include "common/crc32c.h"
#include "dram_store/file_io.h"
#include "dram_store/store_impl.h"

#define FL_FLST_VERSION 1u
#define FL_FLST_HEADER 32u
/* Per table: name_len(4) name corpus(8) dim(4) dtype(1) id_kind(1) pad(2)
 * rows(8) ids_crc(4) rows_crc(4). */
#define FL_FLST_META_FIXED 36u
/* Bytes of rows per read while loading; each read takes whole rows (a row
 * is at most 16 KiB). */
#define FL_FLST_BATCH_BYTES ((size_t)4 << 20)

typedef struct fl_flst_header {
  char magic[4];       /* "FLST" */
  uint32_t version;    /* FL_FLST_VERSION */
  uint32_t n_tables;   /* tables in the file */
  uint32_t meta_bytes; /* bytes of the metadata that follows the header */
  uint64_t file_bytes; /* length of the whole file */
  uint32_t meta_crc;   /* CRC-32C of the metadata */
  uint32_t header_crc; /* CRC-32C of the 28 bytes before it */
} fl_flst_header;
_Static_assert(sizeof(fl_flst_header) == FL_FLST_HEADER, "FLST header is 32 bytes");

/* One table's metadata, as parsed. */
typedef struct fl_flst_table {
  fl_table_desc desc; /* name points into the metadata buffer copy */
  uint64_t rows;      /* rows in the file */
  uint32_t ids_crc;   /* CRC-32C of the ids section */
  uint32_t rows_crc;  /* CRC-32C of the rows section */
  uint64_t meta_off;  /* file offset of the table's metadata record */
  uint64_t ids_off;   /* file offset of its ids section (hashed) */
  uint64_t rows_off;  /* file offset of its rows section */
} fl_flst_table;

static size_t fl_flst_put(unsigned char *p, const void *v, size_t n) {
  memcpy(p, v, n);
  return n;
}

/* ---------------------------------------------------------------- save */

typedef struct fl_flst_writer {
  fl_wfile w;       /* the file */
  uint32_t crc;     /* CRC of the section being written */
  int write_ids;    /* 1: the ids section, 0: the rows section */
  size_t row_bytes; /* bytes per vector of the table being written */
  fl_status st;     /* first failure */
} fl_flst_writer;

static int fl_flst_write_row(void *ctx, uint64_t id, const void *vec) {
  fl_flst_writer *x = ctx;
  const void *p = x->write_ids ? (const void *)&id : vec;
  size_t n = x->write_ids ? sizeof id : x->row_bytes;
  x->crc = fl_crc32c(x->crc, p, n);
  x->st = fl_wfile_write(&x->w, p, n);
  return x->st != FL_OK;
}

/* Writes one table's sections; returns their CRCs in crcs[0] (ids), [1]. */
static fl_status fl_flst_write_table(fl_flst_writer *x, fl_table *t, uint32_t crcs[2]) {
  x->row_bytes = t->row_bytes;
  for (int part = 0; part < 2; part++) {
    x->write_ids = part == 0;
    x->crc = 0;
    if (!(x->write_ids && t->dense) && fl_table_walk(t, fl_flst_write_row, x)) return x->st;
    crcs[part] = x->crc;
  }
  return FL_OK;
}

static fl_status fl_flst_save_locked(fl_store *s, const char *path) {
  size_t meta_bytes = 0;
  for (uint32_t i = 0; i < s->n_tables; i++) meta_bytes += FL_FLST_META_FIXED + strlen(s->tables[i].name);
  unsigned char *meta = malloc(meta_bytes ? meta_bytes : 1);
  if (!meta) return fl_fail(s, FL_ERR_OUT_OF_MEMORY, "%s: no memory for the metadata", path);
  fl_flst_header h = {{'F', 'L', 'S', 'T'}, FL_FLST_VERSION, s->n_tables, (uint32_t)meta_bytes,
                      FL_FLST_HEADER + meta_bytes, 0, 0};
  /* The metadata, with each table's CRCs left zero until its data is written. */
  size_t at = 0;
  size_t *crc_at = calloc(s->n_tables ? s->n_tables : 1, sizeof *crc_at);
  for (uint32_t i = 0; i < s->n_tables && crc_at; i++) {
    fl_table *t = &s->tables[i];
    uint32_t len = (uint32_t)strlen(t->name), dim = t->desc.dim, zero = 0;
    uint64_t rows = atomic_load(&t->rows);
    unsigned char kinds[4] = {(unsigned char)t->desc.dtype, (unsigned char)t->desc.id_kind, 0, 0};
    at += fl_flst_put(meta + at, &len, 4);
    at += fl_flst_put(meta + at, t->name, len);
    at += fl_flst_put(meta + at, &t->desc.corpus_size, 8);
    at += fl_flst_put(meta + at, &dim, 4);
    at += fl_flst_put(meta + at, kinds, 4);
    at += fl_flst_put(meta + at, &rows, 8);
    crc_at[i] = at;
    at += fl_flst_put(meta + at, &zero, 4);
    at += fl_flst_put(meta + at, &zero, 4);
    h.file_bytes += (t->dense ? 0 : rows * 8) + rows * t->row_bytes;
  }
  fl_flst_writer x = {.st = FL_OK};
  fl_status st = crc_at ? fl_wfile_open(&x.w, s, path)
                        : fl_fail(s, FL_ERR_OUT_OF_MEMORY, "%s: no memory", path);
  if (st == FL_OK) st = fl_wfile_write(&x.w, &h, sizeof h);
  if (st == FL_OK) st = fl_wfile_write(&x.w, meta, meta_bytes);
  for (uint32_t i = 0; i < s->n_tables && st == FL_OK; i++) {
    uint32_t crcs[2];
    st = fl_flst_write_table(&x, &s->tables[i], crcs);
    memcpy(meta + crc_at[i], crcs, sizeof crcs);
  }
  if (st == FL_OK) {
    h.meta_crc = fl_crc32c(0, meta, meta_bytes);
    h.header_crc = fl_crc32c(0, &h, offsetof(fl_flst_header, header_crc));
    st = fl_wfile_rewrite(&x.w, 0, &h, sizeof h);
  }
  if (st == FL_OK) st = fl_wfile_rewrite(&x.w, FL_FLST_HEADER, meta, meta_bytes);
  if (st == FL_OK) st = fl_wfile_commit(&x.w);
  else if (crc_at) fl_wfile_abort(&x.w);
  free(crc_at);
  free(meta);
  return st;
}

fl_status fl_store_save(fl_store *s, const char *path) {
  if (!s || !path) return fl_fail(s, FL_ERR_INVALID_ARGUMENT, "fl_store_save: NULL argument");
  fl_status whole = s->ops->whole(s, "fl_store_save");
  if (whole != FL_OK) return whole;
  /* Locks in table order; no other path holds two table locks. */
  for (uint32_t i = 0; i < s->n_tables; i++) pthread_mutex_lock(&s->tables[i].write_lock);
  fl_status st = fl_flst_save_locked(s, path);
  for (uint32_t i = s->n_tables; i-- > 0;) pthread_mutex_unlock(&s->tables[i].write_lock);
  return st;
}

/* ---------------------------------------------------------------- load */

/* Parses and checks the metadata; fills tabs (n entries, names copied into
 * names[i]) and the section offsets; returns the file length the metadata
 * implies in *end. */
static fl_status fl_flst_parse_meta(fl_rfile *r, const unsigned char *meta, uint32_t meta_bytes,
                                    uint32_t n, fl_flst_table *tabs, char **names, uint64_t *end) {
  size_t at = 0;
  for (uint32_t i = 0; i < n; i++) {
    fl_flst_table *m = &tabs[i];
    uint64_t off = FL_FLST_HEADER + at;
    uint32_t len;
    if (meta_bytes - at < FL_FLST_META_FIXED)
      return fl_fail(NULL, FL_ERR_FORMAT, "%s: offset %llu: metadata of table %u is cut short",
                     r->path, (unsigned long long)off, i);
    memcpy(&len, meta + at, 4);
    if (meta_bytes - at - FL_FLST_META_FIXED < len)
      return fl_fail(NULL, FL_ERR_FORMAT, "%s: offset %llu: name of table %u is cut short",
                     r->path, (unsigned long long)off, i);
    names[i] = strndup((const char *)meta + at + 4, len);
    if (!names[i]) return fl_fail(NULL, FL_ERR_OUT_OF_MEMORY, "%s: no memory", r->path);
    m->desc.name = names[i];
    const unsigned char *f = meta + at + 4 + len;
    uint32_t dim;
    memcpy(&m->desc.corpus_size, f, 8);
    memcpy(&dim, f + 8, 4);
    m->desc.dim = dim;
    m->desc.dtype = (fl_dtype)f[12];
    m->desc.id_kind = (fl_id_kind)f[13];
    memcpy(&m->rows, f + 16, 8);
    memcpy(&m->ids_crc, f + 24, 4);
    memcpy(&m->rows_crc, f + 28, 4);
    m->meta_off = off;
    at += FL_FLST_META_FIXED + len;
    if (dim < 1 || dim > 4096 || f[12] > FL_FP16 || f[13] > FL_IDS_HASHED)
      return fl_fail(NULL, FL_ERR_FORMAT,
                     "%s: offset %llu: table %u has an invalid dim %u, dtype %u or id kind %u",
                     r->path, (unsigned long long)off, i, dim, f[12], f[13]);
    if (m->desc.id_kind == FL_IDS_DENSE ? m->rows != m->desc.corpus_size : m->rows >= FL_HROW_LIMIT)
      return fl_fail(NULL, FL_ERR_FORMAT, "%s: offset %llu: table %u holds an impossible %llu rows",
                     r->path, (unsigned long long)off, i, (unsigned long long)m->rows);
  }
  if (at != meta_bytes)
    return fl_fail(NULL, FL_ERR_FORMAT, "%s: offset %llu: %llu bytes after the last table's metadata",
                   r->path, (unsigned long long)(FL_FLST_HEADER + at),
                   (unsigned long long)(meta_bytes - at));
  uint64_t pos = FL_FLST_HEADER + meta_bytes;
  for (uint32_t i = 0; i < n; i++) {
    fl_flst_table *m = &tabs[i];
    uint64_t row_bytes = (uint64_t)m->desc.dim * fl_dtype_bytes(m->desc.dtype);
    uint64_t per_row = row_bytes + (m->desc.id_kind == FL_IDS_HASHED ? 8 : 0);
    /* A length past 2^64 would wrap, and a wrapped total could match the
     * header's and skip the length checks (then the store is sized from the
     * count alone). */
    if (m->rows > (UINT64_MAX - pos) / per_row)
      return fl_fail(NULL, FL_ERR_FORMAT, "%s: offset %llu: table %u holds an impossible %llu rows",
                     r->path, (unsigned long long)m->meta_off, i, (unsigned long long)m->rows);
    m->ids_off = pos;
    if (m->desc.id_kind == FL_IDS_HASHED) pos += m->rows * 8;
    m->rows_off = pos;
    pos += m->rows * row_bytes;
  }
  *end = pos;
  return FL_OK;
}

/* Reads table i's sections from the file into the new store's table t. */
static fl_status fl_flst_load_table(fl_rfile *r, const fl_flst_table *m, fl_table *t, char *name,
                                    unsigned char *buf) {
  uint64_t *ids = NULL;
  if (!t->dense) {
    ids = malloc(m->rows ? m->rows * 8 : 1);
    if (!ids) return fl_fail(NULL, FL_ERR_OUT_OF_MEMORY, "%s: no memory for %llu ids of table '%s'",
                             r->path, (unsigned long long)m->rows, name);
    r->off = m->ids_off;
    fl_status st = fl_rfile_read(r, ids, m->rows * 8, "an ids section");
    if (st == FL_OK && fl_crc32c(0, ids, m->rows * 8) != m->ids_crc)
      st = fl_fail(NULL, FL_ERR_FORMAT, "%s: offset %llu: checksum mismatch in table '%s' ids",
                   r->path, (unsigned long long)m->ids_off, name);
    int rc = st == FL_OK ? fl_table_reserve(t, m->rows) : 0;
    if (rc != 0)
      st = fl_fail(NULL, FL_ERR_OUT_OF_MEMORY, "%s: %s for %llu rows of table '%s'", r->path,
                   fl_table_reserve_why(rc), (unsigned long long)m->rows, name);
    if (st != FL_OK) {
      free(ids);
      return st;
    }
  }
  uint32_t crc = 0;
  r->off = m->rows_off;
  fl_status st = FL_OK;
  uint64_t batch = FL_FLST_BATCH_BYTES / t->row_bytes;
  for (uint64_t k = 0; k < m->rows && st == FL_OK; k += batch) {
    size_t n = m->rows - k < batch ? (size_t)(m->rows - k) : (size_t)batch;
    st = fl_rfile_read(r, buf, n * t->row_bytes, "a rows section");
    if (st != FL_OK) break;
    crc = fl_crc32c(crc, buf, n * t->row_bytes);
    for (size_t i = 0; i < n && st == FL_OK; i++) {
      uint64_t id = ids ? ids[k + i] : k + i;
      if (!fl_table_put(t, id, buf + i * t->row_bytes) && ids)
        st = fl_fail(NULL, FL_ERR_FORMAT, "%s: offset %llu: table '%s' holds id %llu twice",
                     r->path, (unsigned long long)(m->ids_off + 8 * (k + i)), name,
                     (unsigned long long)id);
    }
  }
  if (st == FL_OK && crc != m->rows_crc)
    st = fl_fail(NULL, FL_ERR_FORMAT, "%s: offset %llu: checksum mismatch in table '%s' rows",
                 r->path, (unsigned long long)m->rows_off, name);
  free(ids);
  return st;
}

/* Checks the file length against the metadata, naming the first incomplete
 * id or row when the file is short. */
static fl_status fl_flst_check_length(fl_rfile *r, const fl_flst_table *tabs, uint32_t n,
                                      uint64_t end) {
  char item[96];
  for (uint32_t i = 0; i < n && r->size < end; i++) {
    const fl_flst_table *m = &tabs[i];
    snprintf(item, sizeof item, "table '%s' id", m->desc.name);
    fl_status st = m->desc.id_kind == FL_IDS_HASHED
                       ? fl_rfile_check_items(r, m->ids_off, m->rows, 8, item, end)
                       : FL_OK;
    snprintf(item, sizeof item, "table '%s' row", m->desc.name);
    if (st == FL_OK)
      st = fl_rfile_check_items(r, m->rows_off, m->rows,
                                (uint64_t)m->desc.dim * fl_dtype_bytes(m->desc.dtype), item, end);
    if (st != FL_OK) return st;
  }
  if (r->size != end)
    return fl_fail(NULL, FL_ERR_FORMAT, "%s: offset %llu: file has %llu bytes after the last table",
                   r->path, (unsigned long long)end, (unsigned long long)(r->size - end));
  return FL_OK;
}

static fl_status fl_flst_load_file(fl_rfile *r, uint32_t threads, fl_store **out) {
  fl_flst_header h;
  fl_status st = fl_rfile_read(r, &h, sizeof h, "the header");
  if (st != FL_OK) return st;
  if (memcmp(h.magic, "FLST", 4) != 0)
    return fl_fail(NULL, FL_ERR_FORMAT, "%s: offset 0: not an FLST model file (bad magic)", r->path);
  if (fl_crc32c(0, &h, offsetof(fl_flst_header, header_crc)) != h.header_crc)
    return fl_fail(NULL, FL_ERR_FORMAT, "%s: offset 28: header checksum mismatch", r->path);
  if (h.version != FL_FLST_VERSION)
    return fl_fail(NULL, FL_ERR_FORMAT, "%s: offset 4: unsupported version %u (this build reads %u)",
                   r->path, h.version, FL_FLST_VERSION);
  /* Every size the header claims is checked against the file before anything
   * is allocated for it: a corrupted count fails, it does not allocate. */
  if (r->size - FL_FLST_HEADER < h.meta_bytes) {
    if (h.file_bytes != r->size)
      return fl_fail(NULL, FL_ERR_FORMAT, "%s: offset %llu: file ends inside the table metadata "
                     "(expected %llu bytes)", r->path, (unsigned long long)r->size,
                     (unsigned long long)h.file_bytes);
    return fl_fail(NULL, FL_ERR_FORMAT, "%s: offset 12: %u bytes of table metadata do not fit "
                   "in the %llu-byte file", r->path, h.meta_bytes, (unsigned long long)r->size);
  }
  unsigned char *meta = malloc(h.meta_bytes ? h.meta_bytes : 1);
  fl_flst_table *tabs = NULL;
  char **names = NULL;
  unsigned char *buf = NULL;
  fl_store *s = NULL;
  uint64_t end = 0;
  if (!meta) {
    st = fl_fail(NULL, FL_ERR_OUT_OF_MEMORY, "%s: no memory for the table metadata", r->path);
    goto done;
  }
  if ((st = fl_rfile_read(r, meta, h.meta_bytes, "the table metadata")) != FL_OK) goto done;
  if (fl_crc32c(0, meta, h.meta_bytes) != h.meta_crc) {
    st = fl_fail(NULL, FL_ERR_FORMAT, "%s: offset %u: checksum mismatch in the table metadata",
                 r->path, FL_FLST_HEADER);
    goto done;
  }
  if (h.n_tables > h.meta_bytes / FL_FLST_META_FIXED) {
    st = fl_fail(NULL, FL_ERR_FORMAT, "%s: offset 8: %u tables do not fit in %u bytes of table "
                 "metadata (%u bytes a table at least)", r->path, h.n_tables, h.meta_bytes,
                 FL_FLST_META_FIXED);
    goto done;
  }
  tabs = calloc(h.n_tables ? h.n_tables : 1, sizeof *tabs);
  names = calloc(h.n_tables ? h.n_tables : 1, sizeof *names);
  if (!tabs || !names) {
    st = fl_fail(NULL, FL_ERR_OUT_OF_MEMORY, "%s: no memory for %u tables", r->path, h.n_tables);
    goto done;
  }
  st = fl_flst_parse_meta(r, meta, h.meta_bytes, h.n_tables, tabs, names, &end);
  if (st != FL_OK) goto done;
  if (end != h.file_bytes) {
    st = fl_fail(NULL, FL_ERR_FORMAT, "%s: offset 16: header says %llu bytes, the tables need %llu",
                 r->path, (unsigned long long)h.file_bytes, (unsigned long long)end);
    goto done;
  }
  if ((st = fl_flst_check_length(r, tabs, h.n_tables, end)) != FL_OK) goto done;
  fl_table_desc *descs = calloc(h.n_tables ? h.n_tables : 1, sizeof *descs);
  for (uint32_t i = 0; descs && i < h.n_tables; i++) descs[i] = tabs[i].desc;
  st = descs ? fl_store_create(descs, h.n_tables, threads, &s)
             : fl_fail(NULL, FL_ERR_OUT_OF_MEMORY, "%s: no memory", r->path);
  free(descs);
  buf = malloc(FL_FLST_BATCH_BYTES);
  if (st == FL_OK && !buf) st = fl_fail(NULL, FL_ERR_OUT_OF_MEMORY, "%s: no memory", r->path);
  for (uint32_t i = 0; i < h.n_tables && st == FL_OK; i++)
    st = fl_flst_load_table(r, &tabs[i], &s->tables[i], names[i], buf);
done:
  if (st == FL_OK) {
    *out = s;
  } else {
    fl_store_destroy(s);
  }
  for (uint32_t i = 0; names && i < h.n_tables; i++) free(names[i]);
  free(names);
  free(buf);
  free(tabs);
  free(meta);
  return st;
}

fl_status fl_store_load(const char *path, uint32_t threads, fl_store **out) {
  if (!path || !out) return fl_fail(NULL, FL_ERR_INVALID_ARGUMENT, "fl_store_load: NULL argument");
  *out = NULL;
  fl_rfile r;
  fl_status st = fl_rfile_open(&r, NULL, path);
  if (st != FL_OK) return st;
  st = fl_flst_load_file(&r, threads, out);
  fl_rfile_close(&r);
  return st;
}
