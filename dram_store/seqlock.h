/* seqlock.h: striped sequence locks that keep readers from seeing torn rows.
 *
 * Every row of every table maps to one of FL_SEQ_STRIPES counters (a hash of
 * table and row). A writer takes the counter from even to odd (CAS: writers of
 * one stripe exclude each other), writes the row, then makes it even again.
 * A reader copies the row between two loads of the counter and retries when
 * the counter was odd or changed. The query kernels read dense rows in
 * place (zero-copy) under the same protocol (fusion/query_kernels.cu).
 * Stripes (not one counter per row) keep dense
 * tables plain arrays and keep the counters hot in cache: 64 KiB in all.
 *
 * Memory ordering follows Boehm, "Can seqlocks get along with programming
 * language memory models?" (MSPC 2012): the writer's release fence after
 * going odd and the reader's acquire fence before re-checking pair up, so a
 * reader that saw any byte of a write also sees the counter change. The row
 * bytes themselves are copied with memcpy (a benign race, as in the Linux
 * kernel): a copy that raced a writer is always discarded. */
#ifndef FL_DRAM_STORE_SEQLOCK_H
#define FL_DRAM_STORE_SEQLOCK_H

#include <stdatomic.h>
#include <stdint.h>

#include "dram_store/seq_stripe.h"

typedef struct fl_seqlocks {
  _Atomic uint32_t seq[FL_SEQ_STRIPES]; /* even: no writer; odd: a write is in flight */
} fl_seqlocks;

static inline void fl_cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#endif
}

/* The stripe guarding row `row` of table `table` (seq_stripe.h). */
static inline _Atomic uint32_t *fl_seq_of(fl_seqlocks *l, uint32_t table, uint64_t row) {
  return &l->seq[fl_seq_stripe(table, row)];
}

/* Reader: the even counter value to pass to fl_seq_read_retry. */
static inline uint32_t fl_seq_read_begin(_Atomic uint32_t *s) {
  uint32_t v;
  while ((v = atomic_load_explicit(s, memory_order_acquire)) & 1u) fl_cpu_relax();
  return v;
}

/* Reader: nonzero when a writer touched the stripe since fl_seq_read_begin
 * returned v (the copy must be redone). */
static inline int fl_seq_read_retry(_Atomic uint32_t *s, uint32_t v) {
  atomic_thread_fence(memory_order_acquire);
  return atomic_load_explicit(s, memory_order_relaxed) != v;
}

/* Writer: waits for the stripe to be even and makes it odd. The acquire CAS
 * orders us after the previous writer of the stripe. */
static inline void fl_seq_write_begin(_Atomic uint32_t *s) {
  uint32_t v = atomic_load_explicit(s, memory_order_relaxed);
  for (;;) {
    if (!(v & 1u) && atomic_compare_exchange_weak_explicit(s, &v, v + 1u, memory_order_acquire,
                                                           memory_order_relaxed))
      break;
    fl_cpu_relax();
    v = atomic_load_explicit(s, memory_order_relaxed);
  }
  atomic_thread_fence(memory_order_release);
}

static inline void fl_seq_write_end(_Atomic uint32_t *s) {
  atomic_fetch_add_explicit(s, 1u, memory_order_release);
}

#endif
