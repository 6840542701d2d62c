/* text.c: reader of the plain text trace: one "table id" lookup per line
 * (table decimal, id decimal or 0x-hex, separated by spaces or tabs; '#'
 * comments and blank lines skipped). Batches are runs of batch_lookups lines.
 * The open validates the whole file, so a bad line fails before any replay. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/error.h"
#include "tools/trace/trace_impl.h"

typedef struct text {
  fl_trace base;
  FILE *f;
  char *line;
  size_t line_cap;
  uint64_t line_no;
  uint32_t batch_lookups;
} text;

/* Where a parse failure is reported: the handle, or NULL during the open. */
typedef struct text_ctx {
  const void *handle;
  const char *path;
  uint64_t line_no;
  uint32_t n_tables; /* 0: any table (the open's scan counts them) */
} text_ctx;

/* Parses one line. 1: a lookup in *table, *id; 0: nothing (blank/comment);
 * -1: an error was recorded. */
static int parse_line(const text_ctx *x, const char *line, uint32_t *table, uint64_t *id) {
  const char *tok[3];
  size_t len[3];
  int n = 0;
  const char *p = line;
  for (;;) {
    p += strspn(p, " \t\r\n");
    if (*p == '\0' || *p == '#') break;
    size_t l = strcspn(p, " \t\r\n#");
    if (n < 3) tok[n] = p, len[n] = l;
    n++;
    p += l;
  }
  if (n == 0) return 0;
  unsigned long long ln = (unsigned long long)x->line_no;
  if (n != 2) {
    fl_fail(x->handle, FL_ERR_FORMAT, "%s: line %llu: expected 'table id', found %d fields",
            x->path, ln, n);
    return -1;
  }
  uint64_t t;
  if (fl_trace_parse_u64(tok[0], len[0], 0, &t) != 0) {
    fl_fail(x->handle, FL_ERR_FORMAT, "%s: line %llu: table '%.*s' is not a number", x->path,
            ln, (int)(len[0] > 40 ? 40 : len[0]), tok[0]);
    return -1;
  }
  uint64_t limit = x->n_tables ? x->n_tables : FL_TRACE_MAX_TABLES;
  if (t >= limit) {
    fl_fail(x->handle, FL_ERR_FORMAT, "%s: line %llu: table %llu out of range (%llu tables)",
            x->path, ln, (unsigned long long)t, (unsigned long long)limit);
    return -1;
  }
  if (fl_trace_parse_u64(tok[1], len[1], 0, id) != 0) {
    fl_fail(x->handle, FL_ERR_FORMAT, "%s: line %llu: id '%.*s' is not a 64-bit number",
            x->path, ln, (int)(len[1] > 40 ? 40 : len[1]), tok[1]);
    return -1;
  }
  *table = (uint32_t)t;
  return 1;
}

static fl_status text_next(fl_trace *t, fl_trace_batch *b, int *got) {
  text *x = (text *)t;
  text_ctx ctx = {x, t->path, 0, t->n_tables};
  while (b->samples < x->batch_lookups && getline(&x->line, &x->line_cap, x->f) >= 0) {
    ctx.line_no = ++x->line_no;
    uint32_t table;
    uint64_t id;
    int r = parse_line(&ctx, x->line, &table, &id);
    if (r < 0) return FL_ERR_FORMAT;
    if (r == 0) continue;
    if (fl_trace_batch_push(b, table, id) != FL_OK)
      return fl_fail(x, FL_ERR_OUT_OF_MEMORY, "%s: out of memory", t->path);
    b->samples++;
  }
  if (ferror(x->f)) return fl_fail(x, FL_ERR_IO, "%s: read error", t->path);
  *got = b->samples > 0;
  return FL_OK;
}

static fl_status text_rewind(fl_trace *t) {
  text *x = (text *)t;
  if (fseek(x->f, 0, SEEK_SET) != 0)
    return fl_fail(x, FL_ERR_IO, "%s: cannot seek to the start", t->path);
  x->line_no = 0;
  return FL_OK;
}

static void text_close(fl_trace *t) {
  text *x = (text *)t;
  if (x->f) fclose(x->f);
  free(x->line);
}

static const fl_trace_ops text_ops = {text_next, text_rewind, text_close};

fl_status fl_trace_open_text(const char *path, uint32_t batch_lookups, uint32_t n_tables,
                             fl_trace **out) {
  if (!path || !out || batch_lookups == 0 || n_tables > FL_TRACE_MAX_TABLES)
    return fl_fail(NULL, FL_ERR_INVALID_ARGUMENT,
                   "text trace: path, out, batch size and at most %d tables are required",
                   FL_TRACE_MAX_TABLES);
  FILE *f = fopen(path, "r");
  if (!f) return fl_fail(NULL, FL_ERR_IO, "%s: cannot open", path);
  /* Validation scan: every line parses; counts lookups and tables. */
  text_ctx ctx = {NULL, path, 0, n_tables};
  char *line = NULL;
  size_t cap = 0;
  uint64_t lookups = 0;
  uint32_t max_table = 0;
  int bad = 0;
  while (!bad && getline(&line, &cap, f) >= 0) {
    ctx.line_no++;
    uint32_t table;
    uint64_t id;
    int r = parse_line(&ctx, line, &table, &id);
    if (r < 0) bad = 1;
    if (r > 0) {
      lookups++;
      if (table > max_table) max_table = table;
    }
  }
  free(line);
  if (bad || ferror(f)) {
    fclose(f);
    return bad ? FL_ERR_FORMAT : fl_fail(NULL, FL_ERR_IO, "%s: read error", path);
  }
  uint32_t tables = n_tables ? n_tables : (lookups ? max_table + 1 : 1);
  text *x = (text *)fl_trace_alloc(sizeof *x, &text_ops, path, tables);
  if (!x) {
    fclose(f);
    return FL_ERR_OUT_OF_MEMORY;
  }
  x->f = f;
  x->batch_lookups = batch_lookups;
  x->base.n_batches = (lookups + batch_lookups - 1) / batch_lookups;
  text_rewind(&x->base);
  *out = &x->base;
  return FL_OK;
}
