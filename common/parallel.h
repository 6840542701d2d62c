/* parallel.h: a persistent pool of worker threads running a parallel for.
 * Used by the store's gathers and by the host backend's query loops. */
#ifndef FL_COMMON_PARALLEL_H
#define FL_COMMON_PARALLEL_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct fl_workers fl_workers;

/* Range body: handles items [begin, end). */
typedef void (*fl_range_fn)(void *ctx, size_t begin, size_t end);

/* threads = 0 picks the number of online cores. NULL on allocation failure. */
fl_workers *fl_workers_create(uint32_t threads);
void fl_workers_destroy(fl_workers *w);
uint32_t fl_workers_count(const fl_workers *w);
/* Splits [0, n) into chunks of at least `grain` items and runs them on the
 * pool and the calling thread; returns when all are done. Safe to call from
 * several threads: a caller that finds the pool busy runs its range itself. */
void fl_workers_for(fl_workers *w, size_t n, size_t grain, fl_range_fn fn, void *ctx);
/* The same split, in two halves: start hands [0, n) to the pool's workers
 * and returns at once, so the caller can do other work meanwhile;
 * fl_workers_wait runs what is left on the caller and returns when all is
 * done. Returns 0 and starts nothing when the pool has no worker or runs
 * another caller's job: the caller then runs fn itself. Between a start that
 * returned 1 and its wait, the pool serves no other caller. */
int fl_workers_start(fl_workers *w, size_t n, size_t grain, fl_range_fn fn, void *ctx);
void fl_workers_wait(fl_workers *w);
/* Wakes sleeping workers and keeps every idle worker spinning for spin_ns, so
 * a job that a caller knows is coming starts without waking anyone. Cheap
 * when they are awake; NULL does nothing. */
void fl_workers_wake(fl_workers *w, uint64_t spin_ns);

#ifdef __cplusplus
}
#endif
#endif
