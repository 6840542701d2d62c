/* fuzz_trace_criteo.c: the Criteo TSV/CSV reader (tools/trace/criteo.c) on
 * arbitrary bytes, in batches of 4 rows so that a few rows span batches. */
#include "fuzz/trace_run.h"

int LLVMFuzzerTestOneInput(const uint8_t *d, size_t n) {
  fuzz_trace_bytes(d, n, FL_TRACE_CRITEO, 4);
  return 0;
}
