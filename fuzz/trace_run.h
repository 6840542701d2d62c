/* trace_run.h: the body shared by the three trace fuzz targets: open a file
 * with an explicit format, read every batch, rewind and read it again.
 * Crashes, leaks, undefined behaviour, huge allocations, a status the reader
 * does not document for a bad file, a format error that does not name the
 * file and its place, and a rewind that replays a different trace (other
 * ids, or another end) all stop the run. */
#ifndef FL_FUZZ_TRACE_RUN_H
#define FL_FUZZ_TRACE_RUN_H

#include "fuzz/fuzz_util.h"
#include "tools/trace/trace.h"

/* Everything one pass read, in order: per batch its sample count, then per
 * table the id count and the ids; then how the pass ended. */
typedef struct fuzz_trace_log {
  uint64_t *v; /* the numbers read */
  size_t n, cap;
  fl_status st;  /* the status that ended the pass */
  char msg[512]; /* its message, when not FL_OK */
} fuzz_trace_log;

static inline void fuzz_log_push(fuzz_trace_log *l, uint64_t x) {
  if (l->n == l->cap) {
    l->cap = l->cap ? 2 * l->cap : 256;
    l->v = realloc(l->v, l->cap * sizeof *l->v);
    FUZZ_CHECK(l->v != NULL, "no memory for %zu logged numbers", l->cap);
  }
  l->v[l->n++] = x;
}

/* Where a reader's format error must point: the byte offset in a .fltr, the
 * line of a text or Criteo trace (docs/TRACES.md). */
static inline const char *fuzz_trace_unit(fl_trace_format format) {
  return format == FL_TRACE_FLTR ? "offset" : "line";
}

/* A format error of `path`: "<path>: <offset or line> N: ...". The one
 * message without a place is fl_trace_open's for a trace without a single
 * lookup (tools/trace/trace.c), which names only the file. */
static inline void fuzz_trace_format_error(const char *msg, const char *path,
                                           fl_trace_format format) {
  static const char empty[] = ": the trace holds no lookups";
  size_t len = strlen(path);
  if (msg && strncmp(msg, path, len) == 0 && strncmp(msg + len, empty, sizeof empty - 1) == 0)
    return;
  fuzz_names_place(msg, fuzz_trace_unit(format), &path, 1);
}

/* Reads batches until the end or an error, logging what it read. A text
 * trace is validated whole by the open, so reading it cannot fail; the others
 * may meet a format error (docs/TRACES.md). */
static inline void fuzz_trace_pass(fl_trace *t, fl_trace_batch *b, const char *path,
                                   fl_trace_format format, fuzz_trace_log *l) {
  for (;;) {
    int got = 0;
    l->st = fl_trace_next(t, b, &got);
    unsigned allowed = FUZZ_ST(FL_OK) | (format == FL_TRACE_TEXT ? 0 : FUZZ_ST(FL_ERR_FORMAT));
    fuzz_status("fl_trace_next", l->st, allowed, fl_trace_last_error(t));
    if (l->st != FL_OK) {
      snprintf(l->msg, sizeof l->msg, "%s", fl_trace_last_error(t));
      fuzz_trace_format_error(l->msg, path, format);
      return;
    }
    if (!got) return;
    fuzz_log_push(l, b->samples);
    for (uint32_t i = 0; i < b->n_tables; i++) {
      fuzz_log_push(l, b->n[i]);
      for (size_t k = 0; k < b->n[i]; k++) fuzz_log_push(l, b->ids[i][k]);
    }
  }
}

static inline void fuzz_trace_file(const char *path, fl_trace_format format, uint32_t batch) {
  fl_trace *t = NULL;
  fl_status st = fl_trace_open(path, format, batch, &t);
  /* The file exists and is small: a bad one is a format error, never an I/O
   * or out-of-memory failure (sizes are checked against the file first). */
  fuzz_status("fl_trace_open", st, FUZZ_ST(FL_OK) | FUZZ_ST(FL_ERR_FORMAT),
              fl_trace_last_error(NULL));
  if (st != FL_OK) {
    FUZZ_CHECK(t == NULL, "a failed open left a handle");
    fuzz_trace_format_error(fl_trace_last_error(NULL), path, format);
    return;
  }
  fl_trace_batch b = {0};
  fuzz_trace_log first = {0}, again = {0};
  fuzz_trace_pass(t, &b, path, format, &first);
  fuzz_status("fl_trace_rewind", fl_trace_rewind(t), FUZZ_ST(FL_OK), fl_trace_last_error(t));
  /* The readers are deterministic: a second pass meets the same batches, the
   * same ids in the same order, and the same end (or the same error). */
  fuzz_trace_pass(t, &b, path, format, &again);
  size_t same = 0;
  while (same < first.n && same < again.n && first.v[same] == again.v[same]) same++;
  FUZZ_CHECK(same == first.n && same == again.n,
             "rewind changed the trace at logged number %zu of %zu then %zu", same, first.n,
             again.n);
  FUZZ_CHECK(first.st == again.st && strcmp(first.msg, again.msg) == 0,
             "rewind changed the end: %s '%s' then %s '%s'", fl_status_name(first.st), first.msg,
             fl_status_name(again.st), again.msg);
  free(first.v);
  free(again.v);
  fl_trace_batch_free(&b);
  fl_trace_close(t);
}

/* Writes the input to a temporary file and reads it as `format`. */
static inline void fuzz_trace_bytes(const uint8_t *d, size_t n, fl_trace_format format,
                                    uint32_t batch) {
  char path[4096];
  fuzz_input_file(path, "trace", d, n);
  fuzz_trace_file(path, format, batch);
  unlink(path);
}

#endif
