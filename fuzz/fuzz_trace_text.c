/* fuzz_trace_text.c: the text trace reader ("table id" per line,
 * tools/trace/text.c) on arbitrary bytes, in batches of 16 lookups so that
 * files of a few lines already span several batches. */
#include "fuzz/trace_run.h"

int LLVMFuzzerTestOneInput(const uint8_t *d, size_t n) {
  fuzz_trace_bytes(d, n, FL_TRACE_TEXT, 16);
  return 0;
}
