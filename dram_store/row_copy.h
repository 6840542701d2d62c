/* row_copy.h: how a gather writes a row it read into its output. Outputs
 * bound for a GPU (the pinned staging a query uploads, or reads in place)
 * are not read again by this CPU: streaming stores skip the read for
 * ownership of each output line and leave the cache to the rows being
 * read. On the H100 VM the replay's gathers take 12 to 22% less time so
 * (docs/PERFORMANCE_LOG.md, "Streaming stores in the gather"). Streaming
 * stores are weakly ordered: a gather fences them (fl_row_copy_fence)
 * before it reports rows done. */
#ifndef FL_DRAM_STORE_ROW_COPY_H
#define FL_DRAM_STORE_ROW_COPY_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>
#if defined(__SSE2__)
#include <emmintrin.h>
#endif

/* Copies n bytes of a row to out; for_device: with streaming stores where
 * out and n allow them (16-byte units), else as memcpy. */
static inline void fl_row_copy(void *out, const void *src, size_t n, int for_device) {
#if defined(__SSE2__)
  if (for_device && (((uintptr_t)out | n) & 15) == 0) {
    for (size_t i = 0; i < n; i += 16)
      _mm_stream_si128((__m128i *)((char *)out + i),
                       _mm_loadu_si128((const __m128i *)((const char *)src + i)));
    return;
  }
#endif
  memcpy(out, src, n);
}

/* Orders the streaming stores made so far before the stores after it. */
static inline void fl_row_copy_fence(int for_device) {
#if defined(__SSE2__)
  if (for_device) _mm_sfence();
#else
  (void)for_device;
#endif
}

#endif
