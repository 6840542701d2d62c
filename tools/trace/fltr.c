/* fltr.c: the binary .fltr trace (layout in docs/TRACES.md): reader and
 * writer. All integers little-endian. Every record carries a CRC-32C, so a
 * corrupted or truncated file is caught at the record it breaks, named by
 * byte offset and batch index. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "common/error.h"
#include "common/crc32c.h"
#include "tools/trace/trace_impl.h"

enum {
  FLTR_VERSION = 1,
  FLTR_FIXED = 16,     /* magic(8) version(4) n_tables(4) */
  FLTR_TABLE = 32,     /* name(16) cardinality(8) id_kind(4) reserved(4) */
  FLTR_BATCH_HEAD = 16 /* tag(4) reserved(4) samples(8), then n_tables counts(8) */
};
static const char fltr_magic[8] = "FLTRACE"; /* with its NUL: 8 bytes */
static const uint32_t tag_batch = 0x48435442u; /* "BTCH" */
static const uint32_t tag_end = 0x21444e45u;   /* "END!" */

static void put32(unsigned char *p, uint32_t v) {
  for (int i = 0; i < 4; i++) p[i] = (unsigned char)(v >> (8 * i));
}
static void put64(unsigned char *p, uint64_t v) {
  for (int i = 0; i < 8; i++) p[i] = (unsigned char)(v >> (8 * i));
}
static uint32_t get32(const unsigned char *p) {
  uint32_t v = 0;
  for (int i = 3; i >= 0; i--) v = (v << 8) | p[i];
  return v;
}
static uint64_t get64(const unsigned char *p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; i--) v = (v << 8) | p[i];
  return v;
}

/* Ids travel as little-endian uint64 arrays; on a little-endian host the
 * in-memory array is already the file's bytes. */
static void ids_le(uint64_t *ids, size_t n) {
#if __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
  for (size_t i = 0; i < n; i++) ids[i] = __builtin_bswap64(ids[i]);
#else
  (void)ids, (void)n;
#endif
}

/* ------------------------------------------------------------ reader */

typedef struct fltr {
  fl_trace base;
  FILE *f;
  uint64_t size;       /* file bytes */
  uint64_t first;      /* offset of the first record */
  uint64_t off;        /* offset of the next record */
  uint64_t batch;      /* index of the next batch */
  unsigned char *head; /* batch head buffer: FLTR_BATCH_HEAD + 8 * n_tables */
  int ended;
} fltr;

static fl_status fltr_truncated(fltr *r, uint64_t at, const char *what) {
  return fl_fail(r, FL_ERR_FORMAT, "%s: offset %llu: truncated %s %llu", r->base.path,
                 (unsigned long long)at, what, (unsigned long long)r->batch);
}

static fl_status read_end(fltr *r) {
  unsigned char e[20];
  if (fread(e + 4, 1, 16, r->f) != 16) return fltr_truncated(r, r->off, "end record after batch");
  put32(e, tag_end);
  if (get32(e + 16) != fl_crc32c(0, e, 16))
    return fl_fail(r, FL_ERR_FORMAT, "%s: offset %llu: end record checksum mismatch",
                   r->base.path, (unsigned long long)r->off);
  if (get64(e + 8) != r->batch)
    return fl_fail(r, FL_ERR_FORMAT, "%s: offset %llu: end record counts %llu batches, found %llu",
                   r->base.path, (unsigned long long)r->off, (unsigned long long)get64(e + 8),
                   (unsigned long long)r->batch);
  if (r->off + 20 != r->size)
    return fl_fail(r, FL_ERR_FORMAT, "%s: offset %llu: %llu bytes after the end record",
                   r->base.path, (unsigned long long)(r->off + 20),
                   (unsigned long long)(r->size - r->off - 20));
  r->ended = 1;
  return FL_OK;
}

static fl_status fltr_next(fl_trace *t, fl_trace_batch *b, int *got) {
  fltr *r = (fltr *)t;
  if (r->ended) return FL_OK;
  const uint32_t nt = t->n_tables;
  const size_t head_len = FLTR_BATCH_HEAD + 8 * (size_t)nt;
  unsigned char *h = r->head;
  size_t n = fread(h, 1, 4, r->f);
  if (n == 0 && feof(r->f))
    return fl_fail(r, FL_ERR_FORMAT, "%s: offset %llu: truncated: no end record after batch %llu",
                   t->path, (unsigned long long)r->off, (unsigned long long)r->batch);
  if (n != 4) return fltr_truncated(r, r->off, "batch");
  uint32_t tag = get32(h);
  if (tag == tag_end) return read_end(r);
  if (tag != tag_batch)
    return fl_fail(r, FL_ERR_FORMAT, "%s: offset %llu: batch %llu: bad record tag 0x%08x",
                   t->path, (unsigned long long)r->off, (unsigned long long)r->batch, tag);
  if (fread(h + 4, 1, head_len - 4, r->f) != head_len - 4)
    return fltr_truncated(r, r->off, "batch");
  /* Sizes are checked against the file before anything is allocated. */
  uint64_t total = 0, left = r->size - r->off - head_len;
  for (uint32_t i = 0; i < nt; i++) {
    uint64_t c = get64(h + FLTR_BATCH_HEAD + 8 * i);
    if (c > left / 8 || total + c > left / 8) return fltr_truncated(r, r->off, "batch");
    total += c;
  }
  if (total * 8 + 4 > left) return fltr_truncated(r, r->off, "batch");
  uint32_t crc = fl_crc32c(0, h, head_len);
  b->samples = get64(h + 8);
  uint64_t at = r->off + head_len;
  for (uint32_t i = 0; i < nt; i++) {
    size_t c = (size_t)get64(h + FLTR_BATCH_HEAD + 8 * i);
    if (fl_trace_batch_reserve(b, i, c) != FL_OK)
      return fl_fail(r, FL_ERR_OUT_OF_MEMORY, "%s: out of memory for batch %llu", t->path,
                     (unsigned long long)r->batch);
    if (fread(b->ids[i], 8, c, r->f) != c) return fltr_truncated(r, r->off, "batch");
    crc = fl_crc32c(crc, b->ids[i], 8 * c);
    ids_le(b->ids[i], c);
    b->n[i] = c;
  }
  unsigned char tail[4];
  if (fread(tail, 1, 4, r->f) != 4) return fltr_truncated(r, r->off, "batch");
  if (get32(tail) != crc)
    return fl_fail(r, FL_ERR_FORMAT, "%s: offset %llu: batch %llu: checksum mismatch", t->path,
                   (unsigned long long)r->off, (unsigned long long)r->batch);
  for (uint32_t i = 0; i < nt; i++) {
    const fl_trace_table *tb = &t->tables[i];
    for (size_t k = 0; tb->id_kind == FL_IDS_DENSE && k < b->n[i]; k++)
      if (b->ids[i][k] >= tb->cardinality)
        return fl_fail(r, FL_ERR_FORMAT,
                       "%s: offset %llu: batch %llu: table %u (%s): id %llu out of range "
                       "(cardinality %llu)",
                       t->path, (unsigned long long)(at + 8 * k), (unsigned long long)r->batch,
                       i, tb->name, (unsigned long long)b->ids[i][k],
                       (unsigned long long)tb->cardinality);
    at += 8 * b->n[i];
  }
  r->off = at + 4;
  r->batch++;
  *got = 1;
  return FL_OK;
}

static fl_status fltr_rewind(fl_trace *t) {
  fltr *r = (fltr *)t;
  if (fseek(r->f, (long)r->first, SEEK_SET) != 0)
    return fl_fail(r, FL_ERR_IO, "%s: cannot seek", t->path);
  r->off = r->first;
  r->batch = 0;
  r->ended = 0;
  return FL_OK;
}

static void fltr_close(fl_trace *t) {
  fltr *r = (fltr *)t;
  if (r->f) fclose(r->f);
  free(r->head);
}

static const fl_trace_ops fltr_ops = {fltr_next, fltr_rewind, fltr_close};

/* Reads and checks the header; *n_tables and the table block on success. */
static fl_status read_header(FILE *f, const char *path, uint64_t size, uint32_t *n_tables,
                             unsigned char **block) {
  unsigned char fx[FLTR_FIXED];
  if (fread(fx, 1, sizeof fx, f) != sizeof fx)
    return fl_fail(NULL, FL_ERR_FORMAT, "%s: offset 0: truncated header (%llu bytes)", path,
                   (unsigned long long)size);
  if (memcmp(fx, fltr_magic, 8) != 0)
    return fl_fail(NULL, FL_ERR_FORMAT, "%s: offset 0: wrong magic (not an .fltr trace)", path);
  if (get32(fx + 8) != FLTR_VERSION)
    return fl_fail(NULL, FL_ERR_FORMAT, "%s: offset 8: version %u, this reader knows %d", path,
                   get32(fx + 8), FLTR_VERSION);
  uint32_t nt = get32(fx + 12);
  if (nt == 0 || nt > FL_TRACE_MAX_TABLES)
    return fl_fail(NULL, FL_ERR_FORMAT, "%s: offset 12: table count %u out of range 1..%d", path,
                   nt, FL_TRACE_MAX_TABLES);
  size_t len = FLTR_FIXED + (size_t)FLTR_TABLE * nt + 4;
  unsigned char *p = malloc(len);
  if (!p) return fl_fail(NULL, FL_ERR_OUT_OF_MEMORY, "%s: out of memory", path);
  memcpy(p, fx, FLTR_FIXED);
  if (fread(p + FLTR_FIXED, 1, len - FLTR_FIXED, f) != len - FLTR_FIXED) {
    free(p);
    return fl_fail(NULL, FL_ERR_FORMAT, "%s: offset %llu: truncated header", path,
                   (unsigned long long)size);
  }
  if (get32(p + len - 4) != fl_crc32c(0, p, len - 4)) {
    free(p);
    return fl_fail(NULL, FL_ERR_FORMAT, "%s: offset %zu: header checksum mismatch", path, len - 4);
  }
  *n_tables = nt;
  *block = p;
  return FL_OK;
}

fl_status fl_trace_open_fltr(const char *path, fl_trace **out) {
  if (!path || !out) return fl_fail(NULL, FL_ERR_INVALID_ARGUMENT, "fltr: path and out are required");
  FILE *f = fopen(path, "rb");
  struct stat st;
  if (!f || fstat(fileno(f), &st) != 0) {
    if (f) fclose(f);
    return fl_fail(NULL, FL_ERR_IO, "%s: cannot open", path);
  }
  uint32_t nt = 0;
  unsigned char *hb = NULL;
  fl_status s = read_header(f, path, (uint64_t)st.st_size, &nt, &hb);
  if (s != FL_OK) {
    fclose(f);
    return s;
  }
  fltr *r = (fltr *)fl_trace_alloc(sizeof *r, &fltr_ops, path, nt);
  if (r) r->head = malloc(FLTR_BATCH_HEAD + 8 * (size_t)nt);
  if (!r || !r->head) {
    fl_trace_close(r ? &r->base : NULL);
    free(hb);
    fclose(f);
    return fl_fail(NULL, FL_ERR_OUT_OF_MEMORY, "%s: out of memory", path);
  }
  r->f = f;
  r->size = (uint64_t)st.st_size;
  r->first = FLTR_FIXED + (uint64_t)FLTR_TABLE * nt + 4;
  for (uint32_t i = 0; i < nt; i++) {
    const unsigned char *e = hb + FLTR_FIXED + (size_t)FLTR_TABLE * i;
    fl_trace_table *tb = &r->base.tables[i];
    memcpy(tb->name, e, sizeof tb->name);
    tb->name[sizeof tb->name - 1] = '\0';
    tb->cardinality = get64(e + 16);
    uint32_t kind = get32(e + 24);
    if (kind > FL_IDS_HASHED || (kind == FL_IDS_DENSE && tb->cardinality == 0)) {
      free(hb);
      fl_trace_close(&r->base);
      return fl_fail(NULL, FL_ERR_FORMAT, "%s: offset %zu: table %u: bad id kind %u / cardinality",
                     path, (size_t)(FLTR_FIXED + FLTR_TABLE * i + 24), i, kind);
    }
    tb->id_kind = (fl_id_kind)kind;
  }
  free(hb);
  /* The batch count, when the file ends with an intact end record; otherwise
   * unknown, and reading says where the file breaks. */
  unsigned char e[20];
  if (r->size >= r->first + 20 && fseek(f, (long)(r->size - 20), SEEK_SET) == 0 &&
      fread(e, 1, 20, f) == 20 && get32(e) == tag_end && get32(e + 16) == fl_crc32c(0, e, 16))
    r->base.n_batches = get64(e + 8);
  fltr_rewind(&r->base);
  *out = &r->base;
  return FL_OK;
}

/* ------------------------------------------------------------ writer */

struct fl_fltr_writer {
  FILE *f;
  char *path;
  uint32_t n_tables;
  uint64_t batches;
  unsigned char *head; /* FLTR_BATCH_HEAD + 8 * n_tables */
  uint64_t *scratch;   /* big-endian hosts: ids swapped before writing */
  size_t scratch_cap;
};

const char *fl_fltr_last_error(const fl_fltr_writer *w) { return fl_error_get(w); }

static void writer_free(fl_fltr_writer *w) {
  if (w->f) fclose(w->f);
  free(w->path);
  free(w->head);
  free(w->scratch);
  free(w);
}

fl_status fl_fltr_create(const char *path, const fl_trace_table *tables, uint32_t n_tables,
                         fl_fltr_writer **out) {
  if (!path || !tables || !out || n_tables == 0 || n_tables > FL_TRACE_MAX_TABLES)
    return fl_fail(NULL, FL_ERR_INVALID_ARGUMENT, "fltr: path, tables (1..%d) and out required",
                   FL_TRACE_MAX_TABLES);
  fl_fltr_writer *w = calloc(1, sizeof *w);
  size_t len = FLTR_FIXED + (size_t)FLTR_TABLE * n_tables + 4;
  unsigned char *h = calloc(1, len);
  if (w) w->path = strdup(path), w->head = malloc(FLTR_BATCH_HEAD + 8 * (size_t)n_tables);
  if (!w || !h || !w->path || !w->head) {
    free(h);
    if (w) writer_free(w);
    return fl_fail(NULL, FL_ERR_OUT_OF_MEMORY, "%s: out of memory", path);
  }
  w->n_tables = n_tables;
  memcpy(h, fltr_magic, 8);
  put32(h + 8, FLTR_VERSION);
  put32(h + 12, n_tables);
  for (uint32_t i = 0; i < n_tables; i++) {
    unsigned char *e = h + FLTR_FIXED + (size_t)FLTR_TABLE * i;
    strncpy((char *)e, tables[i].name, 15);
    put64(e + 16, tables[i].cardinality);
    put32(e + 24, (uint32_t)tables[i].id_kind);
  }
  put32(h + len - 4, fl_crc32c(0, h, len - 4));
  w->f = fopen(path, "wb");
  int ok = w->f && fwrite(h, 1, len, w->f) == len;
  free(h);
  if (!ok) {
    writer_free(w);
    return fl_fail(NULL, FL_ERR_IO, "%s: cannot create", path);
  }
  *out = w;
  return FL_OK;
}

fl_status fl_fltr_write(fl_fltr_writer *w, const fl_trace_batch *b) {
  if (b->n_tables != w->n_tables)
    return fl_fail(w, FL_ERR_INVALID_ARGUMENT, "%s: batch has %u tables, the trace %u", w->path,
                   b->n_tables, w->n_tables);
  unsigned char *h = w->head;
  const size_t head_len = FLTR_BATCH_HEAD + 8 * (size_t)w->n_tables;
  put32(h, tag_batch);
  put32(h + 4, 0);
  put64(h + 8, b->samples);
  for (uint32_t i = 0; i < w->n_tables; i++) put64(h + FLTR_BATCH_HEAD + 8 * i, b->n[i]);
  int ok = fwrite(h, 1, head_len, w->f) == head_len;
  uint32_t crc = fl_crc32c(0, h, head_len);
  for (uint32_t i = 0; ok && i < w->n_tables; i++) {
    const uint64_t *ids = b->ids[i];
#if __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
    if (b->n[i] > w->scratch_cap) {
      uint64_t *p = realloc(w->scratch, b->n[i] * 8);
      if (!p) return fl_fail(w, FL_ERR_OUT_OF_MEMORY, "%s: out of memory", w->path);
      w->scratch = p, w->scratch_cap = b->n[i];
    }
    memcpy(w->scratch, ids, b->n[i] * 8);
    ids_le(w->scratch, b->n[i]);
    ids = w->scratch;
#endif
    crc = fl_crc32c(crc, ids, 8 * b->n[i]);
    ok = fwrite(ids, 8, b->n[i], w->f) == b->n[i];
  }
  unsigned char tail[4];
  put32(tail, crc);
  if (!ok || fwrite(tail, 1, 4, w->f) != 4)
    return fl_fail(w, FL_ERR_IO, "%s: write of batch %llu failed", w->path,
                   (unsigned long long)w->batches);
  w->batches++;
  return FL_OK;
}

fl_status fl_fltr_close(fl_fltr_writer *w) {
  if (!w) return FL_OK;
  unsigned char e[20];
  put32(e, tag_end);
  put32(e + 4, 0);
  put64(e + 8, w->batches);
  put32(e + 16, fl_crc32c(0, e, 16));
  int ok = fwrite(e, 1, 20, w->f) == 20;
  ok = fclose(w->f) == 0 && ok;
  w->f = NULL;
  fl_status s = ok ? FL_OK : fl_fail(NULL, FL_ERR_IO, "%s: write of the end record failed", w->path);
  writer_free(w);
  return s;
}

fl_status fl_trace_convert(fl_trace *in, const char *path, uint64_t *batches) {
  fl_fltr_writer *w = NULL;
  fl_status s = fl_trace_rewind(in);
  if (s == FL_OK) s = fl_fltr_create(path, fl_trace_tables(in), fl_trace_num_tables(in), &w);
  if (s != FL_OK) {
    fl_error_forward(in, NULL);
    return s;
  }
  fl_trace_batch b = {0};
  int got = 1;
  uint64_t n = 0;
  while (s == FL_OK) {
    s = fl_trace_next(in, &b, &got);
    if (s != FL_OK) fl_error_forward(in, NULL);
    if (s != FL_OK || !got) break;
    s = fl_fltr_write(w, &b);
    if (s != FL_OK) fl_error_forward(w, NULL);
    n++;
  }
  fl_trace_batch_free(&b);
  if (s == FL_OK) {
    s = fl_fltr_close(w);
  } else {
    fl_status keep = s;
    char msg[512];
    snprintf(msg, sizeof msg, "%s", fl_error_get(NULL));
    fl_fltr_close(w);
    remove(path);
    s = fl_fail(NULL, keep, "%s", msg);
  }
  if (s == FL_OK && batches) *batches = n;
  return s;
}
