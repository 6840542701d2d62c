/* grace.h: read-side critical sections and grace periods, so that a writer can
 * swap a structure readers walk without locks (a grown hash index, a grown row
 * directory) and free the old one once no reader can still hold it.
 *
 * Readers increment a counter of the current epoch parity on entry (one
 * cache-line-padded counter per stripe of threads, so readers on different
 * threads rarely share a line) and decrement it on exit: one atomic pair per
 * gather call, none per row. A writer that has published the new pointer calls
 * fl_grace_wait: it flips the epoch and waits for the old parity's counters to
 * drain, twice, so a reader that read a stale epoch is also waited for.
 * Everything is seq_cst: a reader whose increment the writer did not see is
 * ordered after the writer's publication and so loads the new pointer. */
#ifndef FL_DRAM_STORE_GRACE_H
#define FL_DRAM_STORE_GRACE_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#define FL_GRACE_STRIPES 32u

typedef struct fl_grace_counter {
  _Atomic int64_t readers; /* readers inside a section of this parity and stripe */
  char pad[64 - sizeof(int64_t)];
} fl_grace_counter;

typedef struct fl_grace {
  _Atomic uint64_t epoch;                       /* its low bit picks the parity readers count in */
  fl_grace_counter count[2][FL_GRACE_STRIPES]; /* [parity][thread stripe] */
  pthread_mutex_t wait_lock;                    /* serializes fl_grace_wait callers */
} fl_grace;

void fl_grace_init(fl_grace *g);
void fl_grace_fini(fl_grace *g);
/* Enters a read-side section; pass the token to fl_grace_exit. */
uint32_t fl_grace_enter(fl_grace *g);
void fl_grace_exit(fl_grace *g, uint32_t token);
/* Returns once every section that could have seen a pointer replaced before
 * this call has exited. Must not be called inside a section. */
void fl_grace_wait(fl_grace *g);

#endif
