/* encoder.c: the fl_encoding handle: input checks, turning a layout (blocks
 * from layout.c) into fl_code entries and the exact per-table report, and the
 * accessors the rest of the library uses. */
#include "encoding/encoder.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/error.h"
#include "encoding/layout.h"

enum { FL_NAME_LEN = 64 };

struct fl_encoding {
  uint32_t n_tables;
  uint32_t key_bits;
  int lossless;                  /* 1 when every table is */
  fl_code *codes;                /* by table */
  fl_table_code_report *reports; /* by table */
  uint32_t *order;               /* tables by ascending prefix_shifted */
  char (*names)[FL_NAME_LEN];    /* by table, for messages */
};

void fl_encoding_destroy(fl_encoding *e) {
  if (!e) return;
  free(e->codes);
  free(e->reports);
  free(e->order);
  free(e->names);
  free(e);
}

/* The name messages use: the given one, or "t<i>". */
static void table_name(const fl_table_desc *t, uint32_t i, char out[FL_NAME_LEN]) {
  if (t->name)
    snprintf(out, FL_NAME_LEN, "%s", t->name);
  else
    snprintf(out, FL_NAME_LEN, "t%u", i);
}

static fl_status check_tables(const fl_table_desc *tables, uint32_t n, uint32_t key_bits,
                              fl_encoding_scheme scheme) {
  if (!tables) return fl_fail(NULL, FL_ERR_INVALID_ARGUMENT, "encoding: tables is NULL");
  if (n == 0) return fl_fail(NULL, FL_ERR_INVALID_ARGUMENT, "encoding: zero tables");
  if (key_bits < 1 || key_bits > 64)
    return fl_fail(NULL, FL_ERR_INVALID_ARGUMENT, "encoding: key_bits %u is not 1..64", key_bits);
  if (scheme != FL_ENCODING_SIZE_AWARE && scheme != FL_ENCODING_FIXED)
    return fl_fail(NULL, FL_ERR_INVALID_ARGUMENT, "encoding: unknown scheme %d", (int)scheme);
  /* Each table needs one key and the empty key takes one more. */
  if (key_bits < 64 && (uint64_t)n > (1ull << key_bits) - 1)
    return fl_fail(NULL, FL_ERR_INVALID_ARGUMENT,
                   "encoding: %u tables do not fit in %u-bit keys (at most %llu)", n, key_bits,
                   (unsigned long long)((1ull << key_bits) - 1));
  for (uint32_t i = 0; i < n; i++) {
    char name[FL_NAME_LEN];
    table_name(&tables[i], i, name);
    if (tables[i].corpus_size == 0)
      return fl_fail(NULL, FL_ERR_INVALID_ARGUMENT, "encoding: table %u '%s' has corpus_size 0",
                     i, name);
    if (tables[i].id_kind != FL_IDS_DENSE && tables[i].id_kind != FL_IDS_HASHED)
      return fl_fail(NULL, FL_ERR_INVALID_ARGUMENT, "encoding: table %u '%s' has id_kind %d",
                     i, name, (int)tables[i].id_kind);
  }
  return FL_OK;
}

/* Code and report of table t from its block (fbits feature bits at `start`). */
static void make_code(const fl_table_desc *t, uint32_t key_bits, uint32_t fbits, uint64_t start,
                      fl_code *c, fl_table_code_report *r) {
  c->prefix_shifted = start;
  c->feature_mask = fbits >= 64 ? ~0ull : (1ull << fbits) - 1;
  c->feature_bits = fbits;
  c->prefix_len = key_bits - fbits;
  c->id_kind = (uint32_t)t->id_kind;
  c->corpus = t->id_kind == FL_IDS_DENSE ? t->corpus_size : 0;
  /* Usable feature values: 2^fbits, one fewer when the block owns the empty
   * key (flat_key.h). As doubles for the rate; the fit test stays exact. */
  int owns = fl_code_owns_empty(c, key_bits);
  double values = ldexp(1.0, (int)fbits) - (owns ? 1.0 : 0.0);
  int fits = owns ? t->corpus_size <= c->feature_mask : t->corpus_size - 1 <= c->feature_mask;
  c->fold = !(t->id_kind == FL_IDS_DENSE && fits);

  r->prefix = fbits >= 64 ? 0 : start >> fbits;
  r->prefix_len = c->prefix_len;
  r->feature_bits = fbits;
  r->lossless = !c->fold;
  r->collision_rate = c->fold ? fl_collision_rate(t->corpus_size, values) : 0.0;
}

static int by_start(const void *a, const void *b, void *codes) {
  const fl_code *c = codes;
  uint64_t x = c[*(const uint32_t *)a].prefix_shifted, y = c[*(const uint32_t *)b].prefix_shifted;
  return x < y ? -1 : x > y;
}

fl_status fl_encoding_build(const fl_table_desc *tables, uint32_t n, uint32_t key_bits,
                            fl_encoding_scheme scheme, fl_encoding **out) {
  if (!out) return fl_fail(NULL, FL_ERR_INVALID_ARGUMENT, "encoding: out is NULL");
  *out = NULL;
  fl_status st = check_tables(tables, n, key_bits, scheme);
  if (st != FL_OK) return st;

  fl_encoding *e = calloc(1, sizeof *e);
  uint32_t *fbits = malloc(n * sizeof *fbits);
  uint64_t *start = malloc(n * sizeof *start);
  if (e) {
    e->codes = malloc(n * sizeof *e->codes);
    e->reports = malloc(n * sizeof *e->reports);
    e->order = malloc(n * sizeof *e->order);
    e->names = malloc(n * sizeof *e->names);
  }
  int laid = -1;
  if (e && fbits && start && e->codes && e->reports && e->order && e->names)
    laid = scheme == FL_ENCODING_FIXED ? fl_layout_fixed(n, key_bits, fbits, start)
                                       : fl_layout_size_aware(tables, n, key_bits, fbits, start);
  if (laid != 0) {
    free(fbits);
    free(start);
    fl_encoding_destroy(e);
    return fl_fail(NULL, FL_ERR_OUT_OF_MEMORY, "encoding: out of memory for %u tables", n);
  }

  e->n_tables = n;
  e->key_bits = key_bits;
  e->lossless = 1;
  for (uint32_t i = 0; i < n; i++) {
    make_code(&tables[i], key_bits, fbits[i], start[i], &e->codes[i], &e->reports[i]);
    e->lossless &= e->reports[i].lossless;
    e->order[i] = i;
    table_name(&tables[i], i, e->names[i]);
  }
  qsort_r(e->order, n, sizeof *e->order, by_start, e->codes);
  free(fbits);
  free(start);
  *out = e;
  return FL_OK;
}

fl_status fl_encoding_create(const fl_table_desc *tables, uint32_t n, uint32_t key_bits,
                             fl_encoding_scheme scheme, fl_encoding **out) {
  if (key_bits != 32 && key_bits != 64) {
    if (out) *out = NULL;
    return fl_fail(NULL, FL_ERR_INVALID_ARGUMENT, "encoding: key_bits %u is not 32 or 64",
                   key_bits);
  }
  return fl_encoding_build(tables, n, key_bits, scheme, out);
}

const char *fl_encoding_last_error(const fl_encoding *e) { return fl_error_get(e); }

int fl_encoding_lossless(const fl_encoding *e) { return e ? e->lossless : 0; }

fl_status fl_encoding_report(const fl_encoding *e, uint32_t table, fl_table_code_report *out) {
  if (!e || !out)
    return fl_fail(e, FL_ERR_INVALID_ARGUMENT, "fl_encoding_report: %s is NULL",
                   e ? "out" : "encoding");
  if (table >= e->n_tables)
    return fl_fail(e, FL_ERR_INVALID_ARGUMENT, "fl_encoding_report: table %u of %u", table,
                   e->n_tables);
  *out = e->reports[table];
  return FL_OK;
}

const fl_code *fl_encoding_codes(const fl_encoding *e) { return e->codes; }
uint32_t fl_encoding_num_tables(const fl_encoding *e) { return e->n_tables; }
uint32_t fl_encoding_key_bits(const fl_encoding *e) { return e->key_bits; }
const uint32_t *fl_encoding_order(const fl_encoding *e) { return e->order; }
const char *fl_encoding_table_name(const fl_encoding *e, uint32_t table) {
  return e->names[table];
}
