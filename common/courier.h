/* courier.h: one thread that runs jobs handed to it, one at a time, so that
 * a caller can return before work that does not belong on its critical path
 * (the CUDA query's admission round launch) is done.
 *
 * Jobs carry a key. Posting never waits: the courier runs one job and keeps
 * the rest in order, at most one per key. A job still waiting when a newer
 * one of its key comes is shed: the newer takes its place in the queue, and
 * the older's drop runs instead of its run. Work the courier has no time for
 * (admission rounds posted faster than it launches them) is dropped, the
 * newest kept, rather than holding up the callers. */
#ifndef FL_COMMON_COURIER_H
#define FL_COMMON_COURIER_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct fl_courier fl_courier;

typedef struct fl_courier_job {
  void (*run)(void *ctx);  /* on the courier's thread */
  void (*drop)(void *ctx); /* instead of run, when shed: on the thread that sheds it,
                              under the courier's lock (it must not call the courier) */
  void *ctx;               /* must live until run or drop has returned */
  uint64_t key;            /* a newer job of the same key sheds this one while it waits */
  /* Where the courier stores the job's ticket (non-zero, never reused) under
   * its lock, before the job can run; run and drop clear it once the job no
   * longer holds what the ticket stands for. NULL: not stored. */
  uint64_t *ticket;
} fl_courier_job;

/* NULL when the thread or memory cannot be had. name: the thread's name
 * (pthread_setname_np: at most 15 characters, what its jobs are for).
 * spin_ns: how long the thread spins for the next job before it sleeps (0:
 * it sleeps at once); a job handed to a sleeping thread waits for its
 * wake-up, tens of microseconds on a busy VM. */
fl_courier *fl_courier_create(const char *name, uint64_t spin_ns);
/* Runs every job waiting, then stops the thread. NULL does nothing. */
void fl_courier_destroy(fl_courier *k);
/* Hands the job over and returns at once; a waiting job of its key is shed
 * here. Without memory for the queue the job itself is shed. */
void fl_courier_post(fl_courier *k, fl_courier_job job);
/* Sheds job `ticket` if it is still waiting (its drop runs here) and returns
 * 1; returns 0 when it runs or has ended. */
int fl_courier_shed(fl_courier *k, uint64_t ticket);
/* Returns once job `ticket` has run or been shed. */
void fl_courier_wait(fl_courier *k, uint64_t ticket);
/* Returns once no job is waiting or running. Cheap when idle. */
void fl_courier_idle(fl_courier *k);

#ifdef __cplusplus
}
#endif
#endif
