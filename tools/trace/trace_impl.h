/* trace_impl.h: what every trace source shares (internal to tools/trace/): the
 * handle's common part, the per-source operations, and small helpers. */
#ifndef FL_TOOLS_TRACE_TRACE_IMPL_H
#define FL_TOOLS_TRACE_TRACE_IMPL_H

#include "tools/trace/trace.h"

typedef struct fl_trace_ops {
  /* Fills b (already cleared and sized for the trace's tables); *got = 0 at
   * the end. */
  fl_status (*next)(fl_trace *t, fl_trace_batch *b, int *got);
  fl_status (*rewind)(fl_trace *t);
  void (*close)(fl_trace *t); /* frees the source's own state, not the handle */
} fl_trace_ops;

/* Every source embeds this first and allocates through fl_trace_alloc. */
struct fl_trace {
  const fl_trace_ops *ops;
  char *path;             /* owned copy; "<zipf>" for the generator */
  uint32_t n_tables;
  fl_trace_table *tables; /* n_tables entries, owned */
  uint64_t n_batches;     /* 0 while unknown */
};

/* Allocates a source of `size` bytes (>= sizeof(fl_trace)), zeroed, with
 * path and n_tables tables named "t<i>", hashed, cardinality 0. NULL (with a
 * message under handle NULL) when out of memory. */
fl_trace *fl_trace_alloc(size_t size, const fl_trace_ops *ops, const char *path,
                         uint32_t n_tables);

/* Parses a whole unsigned number in [s, s + len): base 10, or 16 with
 * hex != 0 or a 0x prefix. 0 on success, -1 when not a number or over 64 bits. */
int fl_trace_parse_u64(const char *s, size_t len, int hex, uint64_t *out);

#endif
