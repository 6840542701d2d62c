/* parallel.h: a persistent pool of worker threads running a parallel for.
 * Used by the store's gathers and fills, by the host backend's query loops
 * and by the trace generator.
 *
 * Every job is planned by a cost model (pool_model.h): the pool learns, per
 * range function, the time per item on the calling thread, and measures
 * what it costs to hand work to a spinning and to a sleeping worker; a job
 * gets only the helpers that shorten it by at least their own hand-off, so
 * a small job runs on the calling thread alone and a large one on as many
 * threads as pay (the pool plans no job slower than its caller alone). */
#ifndef FL_COMMON_PARALLEL_H
#define FL_COMMON_PARALLEL_H

#include <stddef.h>
#include <stdint.h>

#include "common/pool_model.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct fl_workers fl_workers;

/* Range body: handles items [begin, end). Its items should cost about the
 * same from job to job (the pool learns their time per range function). */
typedef void (*fl_range_fn)(void *ctx, size_t begin, size_t end);

/* threads = 0 picks the number of online cores (at most 4096). The worker
 * threads (threads - 1: the caller is one more) are named "<name>-0",
 * "<name>-1", ... (pthread_setname_np; cut to Linux's 15 characters), so
 * that top -H, ps -L and /proc/self/task/TID/comm tell the pools apart;
 * name is non-NULL. Measures the hand-offs before it returns (under a
 * millisecond). NULL on allocation failure. */
fl_workers *fl_workers_create(const char *name, uint32_t threads);
void fl_workers_destroy(fl_workers *w);
uint32_t fl_workers_count(const fl_workers *w);
/* Runs fn over [0, n) in chunks of at least `grain` items on the calling
 * thread and the helpers the model picks; returns when all are done. The
 * first job of a range function times one chunk on the caller before it
 * plans the rest. Safe to call from several threads: a caller that finds
 * the pool busy runs its range itself. */
void fl_workers_for(fl_workers *w, size_t n, size_t grain, fl_range_fn fn, void *ctx);
/* The same job, in two halves, for a caller that watches it between its
 * own chunks: start hands [0, n) to helpers and returns at once;
 * fl_workers_help runs one chunk on the caller; fl_workers_wait runs what is
 * left on the caller and returns when all is done. The plan counts the
 * caller as working. Returns 0 and starts nothing when the pool has no
 * worker, runs another caller's job, or the model finds no set of helpers
 * faster than the caller alone; the caller then runs the job itself, best
 * through fl_workers_for (which learns from it). Between a start that
 * returned 1 and its wait, the pool serves no other caller. */
int fl_workers_start(fl_workers *w, size_t n, size_t grain, fl_range_fn fn, void *ctx);
/* Between a start that returned 1 and its wait, the caller runs the next
 * chunk of its job itself; 0 when every chunk is taken (by helpers or by
 * earlier calls). A watcher calls it when the job stops moving: helpers
 * come when the kernel wakes them, which a loaded or virtualised host can
 * put off for milliseconds, and a job only watched would wait for them. */
int fl_workers_help(fl_workers *w);
void fl_workers_wait(fl_workers *w);

/* Wakes the idle workers ahead of a job the caller knows is coming: each
 * spins (instead of sleeping) until until_ns (fl_now_ns's clock), so the
 * job starts on spinning workers. For large jobs only: a wake per caller
 * keeps the pool spinning on every core under several callers (parallel.c,
 * next_job). A later deadline than the one held replaces it. */
void fl_workers_prewake(fl_workers *w, uint64_t until_ns);
/* How many workers are asleep (or about to be) now. */
uint32_t fl_workers_asleep(const fl_workers *w);

/* Plans every job with these costs instead of the learned ones, and learns
 * nothing meanwhile; NULL returns to the learned costs, as they were. For
 * tests and benchmarks (huge hand-off costs keep every job on its caller).
 * Jobs planned after it returns use it. */
void fl_workers_fix_costs(fl_workers *w, const fl_pool_costs *c);
/* The costs the pool would plan a job of fn with now (fn NULL or never run:
 * item_ns 0). */
void fl_workers_costs(const fl_workers *w, fl_range_fn fn, fl_pool_costs *out);
/* How many helpers the pool's last job called in (0: its caller ran it
 * alone). */
uint32_t fl_workers_last_helpers(const fl_workers *w);

#ifdef __cplusplus
}
#endif
#endif
