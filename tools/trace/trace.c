/* trace.c: the fl_trace handle's common part (dispatch to its source's
 * operations, tables, errors) and the batch container shared by every
 * source. Opening a file, which picks the source, is open.c's. */
#include "tools/trace/trace_impl.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/error.h"

fl_status fl_trace_batch_init(fl_trace_batch *b, uint32_t n_tables) {
  memset(b, 0, sizeof *b);
  b->n = calloc(n_tables ? n_tables : 1, sizeof *b->n);
  b->cap = calloc(n_tables ? n_tables : 1, sizeof *b->cap);
  b->ids = calloc(n_tables ? n_tables : 1, sizeof *b->ids);
  if (!b->n || !b->cap || !b->ids) {
    fl_trace_batch_free(b);
    return FL_ERR_OUT_OF_MEMORY;
  }
  b->n_tables = n_tables;
  return FL_OK;
}

void fl_trace_batch_free(fl_trace_batch *b) {
  if (b->ids)
    for (uint32_t t = 0; t < b->n_tables; t++) free(b->ids[t]);
  free(b->ids);
  free(b->cap);
  free(b->n);
  memset(b, 0, sizeof *b);
}

void fl_trace_batch_clear(fl_trace_batch *b) {
  for (uint32_t t = 0; t < b->n_tables; t++) b->n[t] = 0;
  b->samples = 0;
}

fl_status fl_trace_batch_reserve(fl_trace_batch *b, uint32_t t, size_t n) {
  if (n <= b->cap[t]) return FL_OK;
  uint64_t *p = realloc(b->ids[t], n * sizeof *p);
  if (!p) return FL_ERR_OUT_OF_MEMORY;
  b->ids[t] = p;
  b->cap[t] = n;
  return FL_OK;
}

fl_status fl_trace_batch_push(fl_trace_batch *b, uint32_t t, uint64_t id) {
  if (b->n[t] == b->cap[t]) {
    fl_status s = fl_trace_batch_reserve(b, t, b->cap[t] ? 2 * b->cap[t] : 1024);
    if (s != FL_OK) return s;
  }
  b->ids[t][b->n[t]++] = id;
  return FL_OK;
}

size_t fl_trace_batch_lookups(const fl_trace_batch *b) {
  size_t n = 0;
  for (uint32_t t = 0; t < b->n_tables; t++) n += b->n[t];
  return n;
}

fl_trace *fl_trace_alloc(size_t size, const fl_trace_ops *ops, const char *path,
                         uint32_t n_tables) {
  fl_trace *t = calloc(1, size);
  if (t) {
    t->ops = ops;
    t->n_tables = n_tables;
    t->path = strdup(path);
    t->tables = calloc(n_tables ? n_tables : 1, sizeof *t->tables);
  }
  if (!t || !t->path || !t->tables) {
    if (t) free(t->path), free(t->tables);
    free(t);
    fl_fail(NULL, FL_ERR_OUT_OF_MEMORY, "%s: out of memory opening the trace", path);
    return NULL;
  }
  for (uint32_t i = 0; i < n_tables; i++) {
    snprintf(t->tables[i].name, sizeof t->tables[i].name, "t%u", i);
    t->tables[i].id_kind = FL_IDS_HASHED;
  }
  return t;
}

int fl_trace_parse_u64(const char *s, size_t len, int hex, uint64_t *out) {
  if (len >= 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X')) {
    s += 2;
    len -= 2;
    hex = 1;
  }
  if (len == 0) return -1;
  uint64_t v = 0, base = hex ? 16 : 10;
  for (size_t i = 0; i < len; i++) {
    char c = s[i];
    uint64_t d;
    if (c >= '0' && c <= '9') d = (uint64_t)(c - '0');
    else if (hex && c >= 'a' && c <= 'f') d = (uint64_t)(c - 'a' + 10);
    else if (hex && c >= 'A' && c <= 'F') d = (uint64_t)(c - 'A' + 10);
    else return -1;
    if (v > (UINT64_MAX - d) / base) return -1; /* over 64 bits */
    v = v * base + d;
  }
  *out = v;
  return 0;
}

void fl_trace_close(fl_trace *t) {
  if (!t) return;
  t->ops->close(t);
  free(t->tables);
  free(t->path);
  free(t);
}

const char *fl_trace_last_error(const fl_trace *t) { return fl_error_get(t); }
const char *fl_trace_path(const fl_trace *t) { return t->path; }
uint32_t fl_trace_num_tables(const fl_trace *t) { return t->n_tables; }
const fl_trace_table *fl_trace_tables(const fl_trace *t) { return t->tables; }
uint64_t fl_trace_num_batches(const fl_trace *t) { return t->n_batches; }

fl_status fl_trace_next(fl_trace *t, fl_trace_batch *b, int *got) {
  if (b->n_tables != t->n_tables) {
    fl_trace_batch_free(b);
    if (fl_trace_batch_init(b, t->n_tables) != FL_OK)
      return fl_fail(t, FL_ERR_OUT_OF_MEMORY, "%s: out of memory for a batch", t->path);
  }
  fl_trace_batch_clear(b);
  *got = 0;
  return t->ops->next(t, b, got);
}

fl_status fl_trace_rewind(fl_trace *t) { return t->ops->rewind(t); }
