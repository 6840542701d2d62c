/* criteo.c: reader of Criteo Kaggle TSV/CSV files as published: one row = one
 * sample; its last 26 fields are C1..C26 (table c-1), 8-digit hex hashes taken
 * as raw ids; leading fields (label, I1..I13) are optional and ignored; an
 * empty field is a missing value and skipped. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/error.h"
#include "tools/trace/trace_impl.h"

typedef struct criteo {
  fl_trace base;
  FILE *f;
  char *line;       /* getline buffer */
  size_t line_cap;
  uint64_t line_no; /* lines read so far (1-based number of the last line) */
  char delim;       /* '\t' or ',' from the first line */
  int fields;       /* fields per row, from the first data row; 0 before it */
  uint32_t batch_samples;
} criteo;

/* A header line names its columns ("label,I1,...,C1,...") instead of values. */
static int is_header(const char *line) { return strstr(line, "C1") && strstr(line, "C26"); }

static int count_fields(const char *s, char delim) {
  int n = 1;
  for (; *s; s++) n += *s == delim;
  return n;
}

/* Splits one data row and pushes its categorical ids. */
static fl_status parse_row(criteo *c, char *line, fl_trace_batch *b) {
  size_t len = strcspn(line, "\r\n");
  line[len] = '\0';
  int fields = count_fields(line, c->delim);
  if (c->fields == 0) {
    if (fields < FL_CRITEO_TABLES)
      return fl_fail(c, FL_ERR_FORMAT, "%s: line %llu: %d fields, a Criteo row has at least %d",
                     c->base.path, (unsigned long long)c->line_no, fields, FL_CRITEO_TABLES);
    c->fields = fields;
  } else if (fields != c->fields) {
    return fl_fail(c, FL_ERR_FORMAT, "%s: line %llu: %d fields, expected %d like the first row",
                   c->base.path, (unsigned long long)c->line_no, fields, c->fields);
  }
  char *p = line;
  for (int i = 0; i < fields; i++) {
    char *end = strchr(p, c->delim);
    size_t n = end ? (size_t)(end - p) : strlen(p);
    int col = i - (fields - FL_CRITEO_TABLES); /* 0-based categorical column */
    if (col >= 0 && n > 0) {
      uint64_t id;
      if (n > 16 || fl_trace_parse_u64(p, n, 1, &id) != 0)
        return fl_fail(c, FL_ERR_FORMAT, "%s: line %llu: column C%d: '%.*s' is not hex",
                       c->base.path, (unsigned long long)c->line_no, col + 1,
                       (int)(n > 40 ? 40 : n), p);
      if (fl_trace_batch_push(b, (uint32_t)col, id) != FL_OK)
        return fl_fail(c, FL_ERR_OUT_OF_MEMORY, "%s: out of memory", c->base.path);
    }
    p = end ? end + 1 : p + n;
  }
  b->samples++;
  return FL_OK;
}

static fl_status criteo_next(fl_trace *t, fl_trace_batch *b, int *got) {
  criteo *c = (criteo *)t;
  while (b->samples < c->batch_samples) {
    if (getline(&c->line, &c->line_cap, c->f) < 0) {
      if (ferror(c->f))
        return fl_fail(c, FL_ERR_IO, "%s: line %llu: read error", t->path,
                       (unsigned long long)c->line_no + 1);
      break;
    }
    c->line_no++;
    if (c->line[0] == '\n' || c->line[0] == '\0') continue;
    if (c->line_no == 1 && is_header(c->line)) continue;
    fl_status s = parse_row(c, c->line, b);
    if (s != FL_OK) return s;
  }
  *got = b->samples > 0;
  return FL_OK;
}

static fl_status criteo_rewind(fl_trace *t) {
  criteo *c = (criteo *)t;
  if (fseek(c->f, 0, SEEK_SET) != 0)
    return fl_fail(c, FL_ERR_IO, "%s: cannot seek to the start", t->path);
  c->line_no = 0;
  return FL_OK;
}

static void criteo_close(fl_trace *t) {
  criteo *c = (criteo *)t;
  if (c->f) fclose(c->f);
  free(c->line);
}

static const fl_trace_ops criteo_ops = {criteo_next, criteo_rewind, criteo_close};

fl_status fl_trace_open_criteo(const char *path, uint32_t batch_samples, fl_trace **out) {
  if (!path || !out || batch_samples == 0)
    return fl_fail(NULL, FL_ERR_INVALID_ARGUMENT, "criteo: path, out and batch size are required");
  criteo *c = (criteo *)fl_trace_alloc(sizeof *c, &criteo_ops, path, FL_CRITEO_TABLES);
  if (!c) return FL_ERR_OUT_OF_MEMORY;
  c->batch_samples = batch_samples;
  for (uint32_t i = 0; i < FL_CRITEO_TABLES; i++)
    snprintf(c->base.tables[i].name, sizeof c->base.tables[i].name, "C%u", i + 1);
  c->f = fopen(path, "r");
  if (!c->f) {
    fl_trace_close(&c->base);
    return fl_fail(NULL, FL_ERR_IO, "%s: cannot open", path);
  }
  /* The delimiter is the first line's: Kaggle's train.txt uses tabs, CSV
   * re-publications commas. */
  if (getline(&c->line, &c->line_cap, c->f) > 0 && !strchr(c->line, '\t') &&
      strchr(c->line, ','))
    c->delim = ',';
  else
    c->delim = '\t';
  criteo_rewind(&c->base);
  *out = &c->base;
  return FL_OK;
}
