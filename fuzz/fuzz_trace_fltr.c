/* fuzz_trace_fltr.c: the binary .fltr trace reader (tools/trace/fltr.c) on
 * arbitrary bytes. Every .fltr record carries a CRC-32C, and a mutated byte
 * almost always breaks one, so the input is read twice: as it is (the CRC
 * checks themselves), then with every CRC the reader would check recomputed,
 * so mutations of counts, ids and table kinds reach the code behind them. */
#include "common/crc32c.h"
#include "fuzz/trace_run.h"

/* Recomputes, in place, the header CRC and the CRC of every complete record
 * that follows (layout in docs/TRACES.md), walking the file as the reader
 * does; stops at the first record that does not fit. */
static void repair_crcs(uint8_t *f, size_t n) {
  if (n < 16) return;
  uint64_t nt = get32(f + 12);
  if (nt == 0 || nt > FL_TRACE_MAX_TABLES || n < 20 + 32 * nt) return;
  put32(f + 16 + 32 * nt, fl_crc32c(0, f, 16 + 32 * nt));
  size_t off = 20 + 32 * nt, head = 16 + 8 * nt;
  while (n - off >= 20) {
    uint32_t tag = get32(f + off);
    if (tag == 0x21444e45u) { /* "END!" */
      put32(f + off + 16, fl_crc32c(0, f + off, 16));
      return;
    }
    if (tag != 0x48435442u || n - off < head + 4) return; /* not "BTCH", or cut */
    uint64_t ids = 0, room = (n - off - head - 4) / 8;
    for (uint64_t t = 0; t < nt; t++) {
      uint64_t c = get64(f + off + 16 + 8 * t);
      if (c > room - ids) return;
      ids += c;
    }
    size_t len = head + 8 * ids;
    put32(f + off + len, fl_crc32c(0, f + off, len));
    off += len + 4;
  }
}

int LLVMFuzzerTestOneInput(const uint8_t *d, size_t n) {
  fuzz_trace_bytes(d, n, FL_TRACE_FLTR, 1);
  uint8_t *fixed = malloc(n ? n : 1);
  if (!fixed) return 0;
  memcpy(fixed, d, n);
  repair_crcs(fixed, n);
  if (memcmp(fixed, d, n) != 0) fuzz_trace_bytes(fixed, n, FL_TRACE_FLTR, 1);
  free(fixed);
  return 0;
}
