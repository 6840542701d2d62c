/* trace_run.h: the body shared by the three trace fuzz targets: open a file
 * with an explicit format, read every batch, rewind and read it again. Any
 * status is fine; crashes, leaks, undefined behaviour, huge allocations and a
 * rewind that replays a different trace are not. */
#ifndef FL_FUZZ_TRACE_RUN_H
#define FL_FUZZ_TRACE_RUN_H

#include "fuzz/fuzz_util.h"
#include "tools/trace/trace.h"

/* Reads batches until the end or an error; counts batches and lookups. */
static inline fl_status fuzz_trace_pass(fl_trace *t, fl_trace_batch *b, uint64_t *batches,
                                        uint64_t *lookups) {
  *batches = *lookups = 0;
  for (;;) {
    int got = 0;
    fl_status st = fl_trace_next(t, b, &got);
    if (st != FL_OK || !got) return st;
    ++*batches;
    *lookups += fl_trace_batch_lookups(b);
  }
}

static inline void fuzz_trace_file(const char *path, fl_trace_format format, uint32_t batch) {
  fl_trace *t = NULL;
  if (fl_trace_open(path, format, batch, &t) != FL_OK) {
    FUZZ_CHECK(t == NULL, "a failed open left a handle");
    return;
  }
  fl_trace_batch b = {0};
  uint64_t n1, l1, n2, l2;
  fl_status s1 = fuzz_trace_pass(t, &b, &n1, &l1);
  if (fl_trace_rewind(t) == FL_OK) {
    /* The readers are deterministic: a second pass meets the same batches
     * and the same end (or the same error). */
    fl_status s2 = fuzz_trace_pass(t, &b, &n2, &l2);
    FUZZ_CHECK(s1 == s2 && n1 == n2 && l1 == l2,
               "rewind changed the trace: %d/%llu/%llu then %d/%llu/%llu", (int)s1,
               (unsigned long long)n1, (unsigned long long)l1, (int)s2, (unsigned long long)n2,
               (unsigned long long)l2);
  }
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
