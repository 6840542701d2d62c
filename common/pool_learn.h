/* pool_learn.h: what the worker pool knows of its costs, the inputs of its
 * cost model (pool_model.h). For parallel.c only.
 *
 * - Per body (the range function of a job, up to FL_POOL_BODIES of them):
 *   the time per item on one thread, learned from the chunks the calling
 *   thread runs itself. Jobs too small for any helper to pay are timed one
 *   call in FL_POOL_SAMPLE, so their clock reads cost nothing that shows.
 * - The hand-offs: the start of a spinning and of a sleeping worker, and
 *   the caller's futex wake call: measured at the pool's creation (medians
 *   of a few), then learned from every helper's claim of a job and every
 *   wake call. Since only the helpers a plan calls in are measured, every
 *   FL_POOL_PROBE-th job planned for the caller alone calls in one spinning
 *   worker anyway (no wake call: cheap), so that a hand-off cost a burst of
 *   preemption inflated cannot keep the helpers out for good.
 * Each is a moving average of weight 1/4 whose samples are clamped to
 * between a quarter and twice it: one preempted run moves it up by a
 * quarter at most, a real change shows within a few jobs. All fields are
 * atomics; concurrent updates may lose a sample, never tear one.
 *
 * Fixed costs (fl_workers_fix_costs: tests, benchmarks) replace every
 * learned one until released; nothing is learned meanwhile. */
#ifndef FL_COMMON_POOL_LEARN_H
#define FL_COMMON_POOL_LEARN_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "common/pool_model.h"

/* Bodies whose item cost a pool keeps apart; more share slots. */
#define FL_POOL_BODIES 16
/* A job too small for a helper is timed once in this many calls. */
#define FL_POOL_SAMPLE 16
/* One job in this many of those planned for the caller alone probes. */
#define FL_POOL_PROBE 64

typedef struct fl_pool_pace {
  _Atomic uintptr_t body;  /* the range function (as an integer); 0: free slot */
  _Atomic double item_ns;  /* time per item on one thread; 0: not measured yet */
  _Atomic uint32_t calls;  /* untimed-call counter of the sampling */
} fl_pool_pace;

typedef struct fl_pool_learned {
  fl_pool_pace pace[FL_POOL_BODIES];
  _Atomic double spin_ns, sleep_ns, wake_call_ns; /* 0: not measured yet */
  _Atomic uint32_t alone;                          /* jobs planned alone (the probe's count) */
  _Atomic int fixed;                               /* 1: plan with fix_* instead */
  _Atomic double fix_item_ns, fix_spin_ns, fix_sleep_ns, fix_wake_call_ns;
} fl_pool_learned;

/* The pace slot of `body`: its own, a free one it takes, or (all taken) a
 * shared one. Never NULL. */
fl_pool_pace *fl_pool_pace_of(fl_pool_learned *l, uintptr_t body);
/* The pace slot of `body` if it has one, else NULL. */
const fl_pool_pace *fl_pool_pace_find(const fl_pool_learned *l, uintptr_t body);
/* The costs to plan a job of that body with (p NULL: item_ns 0). */
void fl_pool_costs_of(const fl_pool_learned *l, const fl_pool_pace *p, fl_pool_costs *out);
/* Whether a job of that body has a cost to plan with. */
int fl_pool_known(const fl_pool_learned *l, const fl_pool_pace *p);
/* Whether the caller should time a job of `items` it runs alone. */
int fl_pool_time_alone(fl_pool_learned *l, fl_pool_pace *p, size_t items);
/* Samples: the caller ran `items` of the body in ns; a helper started ns
 * after the publish (slept: it was asleep then); a wake call took ns. */
void fl_pool_learn_items(fl_pool_learned *l, fl_pool_pace *p, size_t items, uint64_t ns);
void fl_pool_learn_start(fl_pool_learned *l, int slept, uint64_t ns);
void fl_pool_learn_wake_call(fl_pool_learned *l, uint64_t ns);
/* Whether a job planned for the caller alone should probe (1 in
 * FL_POOL_PROBE; never with fixed costs). */
int fl_pool_probe_due(fl_pool_learned *l);
/* The calibration's medians (ns; 0: not measured, the default then). */
void fl_pool_calibrated(fl_pool_learned *l, double spin, double sleep, double wake_call);
/* Fixes every cost (c NULL: learns again, from where it was). */
void fl_pool_fix(fl_pool_learned *l, const fl_pool_costs *c);

#endif
