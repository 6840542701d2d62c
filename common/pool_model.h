/* pool_model.h: how many of the worker pool's threads a job is worth (the
 * cost model parallel.c plans every job with). A pure function of measured
 * costs, so tests can put in any costs and check the decision.
 *
 * The model. A job of n items costs W = n * item_ns on one thread. A helper
 * (a worker called in) starts spin_ns after the job is published when it is
 * spinning, sleep_ns when it must be woken from a futex sleep (the wake call
 * included); the caller works too (a watching caller takes chunks whenever
 * the job stops moving: fl_workers_help), starting at once, or after its
 * wake call (wake_call_ns) when it wakes someone. With the participants'
 * start times t_i, the job ends at T = (W + sum t_i) / participants (each
 * works from its start to the end; pessimistic when a helper would start
 * after the end, which only makes such a helper look worse), plus one
 * hand-off (spin_ns) for the caller to learn that the helpers are done.
 * Spinning helpers are called in before sleeping ones. A helper is worth
 * calling in when it shortens the job by at least one spinning hand-off
 * (what it adds in coordination, and what it takes from the rest of the
 * process): the plan minimizes T(k) + k * spin_ns, so the pool never plans a
 * job slower than the caller alone (k = 0 costs W), and the marginal helpers
 * of a medium job, which save less than that, stay idle. A job shorter than
 * one spinning hand-off runs on the caller without further thought, and no
 * job uses more participants than it has chunks. */
#ifndef FL_COMMON_POOL_MODEL_H
#define FL_COMMON_POOL_MODEL_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* What the pool measured (or a test put in); all in ns. */
typedef struct fl_pool_costs {
  double item_ns;      /* one item of the job's body on one thread */
  double spin_ns;      /* publish to a spinning worker's first item */
  double sleep_ns;     /* publish to a sleeping worker's first item, its wake call included */
  double wake_call_ns; /* the caller's futex wake call (it works only after it) */
} fl_pool_costs;

/* The job and the pool's state when it is planned. */
typedef struct fl_pool_shape {
  size_t n;              /* items */
  size_t grain;          /* fewest items per chunk (at least 1) */
  uint32_t spinning;     /* idle workers spinning, ready at once */
  uint32_t sleeping;     /* idle workers asleep */
} fl_pool_shape;

/* Predicted time of the job with k helpers (k = 0: the caller alone). ns. */
double fl_pool_predict(const fl_pool_costs *c, const fl_pool_shape *s, uint32_t k);
/* The helpers worth calling in: 0 runs the job on the caller alone. */
uint32_t fl_pool_plan(const fl_pool_costs *c, const fl_pool_shape *s);

#ifdef __cplusplus
}
#endif
#endif
