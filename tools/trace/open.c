/* open.c: fl_trace_open: which source reads a file (FL_TRACE_AUTO: the
 * .fltr magic, else the fields of the first line), and the rule that a trace
 * holds at least one batch. The sources (criteo.c, fltr.c, text.c) use the
 * common part in trace.c and never call back here. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/error.h"
#include "tools/trace/trace_impl.h"

static int starts_with_fltr_magic(const char *path, int *err) {
  FILE *f = fopen(path, "rb");
  if (!f) { *err = 1; return 0; }
  char m[8] = {0};
  size_t got = fread(m, 1, sizeof m, f);
  fclose(f);
  return got == sizeof m && memcmp(m, "FLTRACE", 7) == 0;
}

/* Fields on the first non-comment, non-blank line (split on tab, comma or
 * space runs for the text format's "table id"). */
static int first_line_fields(const char *path) {
  FILE *f = fopen(path, "r");
  if (!f) return -1;
  char *line = NULL;
  size_t cap = 0;
  int fields = 0;
  while (getline(&line, &cap, f) > 0) {
    if (line[0] == '#' || line[0] == '\n' || line[0] == '\r') continue;
    if (strchr(line, '\t') || strchr(line, ',')) { fields = 3; break; } /* Criteo */
    char *save = NULL;
    for (char *tok = strtok_r(line, " \r\n", &save); tok; tok = strtok_r(NULL, " \r\n", &save))
      fields++;
    break;
  }
  free(line);
  fclose(f);
  return fields;
}

/* A trace file must hold at least one batch: an empty file (or one of only
 * comments and blank lines) is an error, not a replay of nothing. Reads the
 * first batch, then rewinds; on failure the message moves to the NULL
 * handle (the open's) and the trace is closed. */
static fl_status no_lookups(const char *path) {
  return fl_fail(NULL, FL_ERR_FORMAT,
                 "%s: the trace holds no lookups (an empty file, or only comments and blank lines)",
                 path);
}

static fl_status require_a_batch(const char *path, fl_trace **t) {
  fl_trace_batch b = {0};
  int got = 0;
  fl_status st = fl_trace_next(*t, &b, &got);
  if (st == FL_OK && !got) st = no_lookups(path);
  else if (st != FL_OK)
    fl_error_forward(*t, NULL);
  if (st == FL_OK && (st = fl_trace_rewind(*t)) != FL_OK) fl_error_forward(*t, NULL);
  fl_trace_batch_free(&b);
  if (st != FL_OK) {
    fl_trace_close(*t);
    *t = NULL;
  }
  return st;
}

fl_status fl_trace_open(const char *path, fl_trace_format format, uint32_t batch_size,
                        fl_trace **out) {
  if (format == FL_TRACE_AUTO) {
    int err = 0;
    if (starts_with_fltr_magic(path, &err)) format = FL_TRACE_FLTR;
    else if (err) return fl_fail(NULL, FL_ERR_IO, "%s: cannot open", path);
    else {
      int fields = first_line_fields(path);
      if (fields == 0) return no_lookups(path);
      format = fields == 2 ? FL_TRACE_TEXT : FL_TRACE_CRITEO;
    }
  }
  fl_status st;
  switch (format) {
    case FL_TRACE_FLTR: st = fl_trace_open_fltr(path, out); break;
    case FL_TRACE_TEXT: st = fl_trace_open_text(path, batch_size, 0, out); break;
    default: st = fl_trace_open_criteo(path, batch_size, out); break;
  }
  return st == FL_OK ? require_a_batch(path, out) : st;
}
