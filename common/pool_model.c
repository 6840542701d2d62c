/* pool_model.c: the worker pool's cost model (see pool_model.h for the
 * model itself). */
#include "common/pool_model.h"

#include <math.h>

double fl_pool_predict(const fl_pool_costs *c, const fl_pool_shape *s, uint32_t k) {
  double work = (double)s->n * c->item_ns;
  if (k == 0) return work;
  uint32_t spin = k < s->spinning ? k : s->spinning, sleep = k - spin;
  double starts = spin * c->spin_ns + sleep * c->sleep_ns;
  if (sleep) starts += c->wake_call_ns;
  return (work + starts) / (k + 1) + c->spin_ns;
}

uint32_t fl_pool_plan(const fl_pool_costs *c, const fl_pool_shape *s) {
  double work = (double)s->n * c->item_ns;
  if (!(work > c->spin_ns)) return 0; /* shorter than a hand-off (or no costs) */
  size_t grain = s->grain ? s->grain : 1;
  size_t chunks = (s->n + grain - 1) / grain;
  size_t most = (size_t)s->spinning + s->sleeping;
  size_t room = chunks - 1; /* participants past the caller */
  if (most > room) most = room;
  double best = work, prev = INFINITY;
  uint32_t pick = 0;
  for (uint32_t k = 1; k <= most; k++) {
    double cost = fl_pool_predict(c, s, k) + k * c->spin_ns;
    if (cost < best) best = cost, pick = k;
    /* Within one class the cost is convex in k (or rising throughout):
     * once it rises, every later helper of the class, and of the slower
     * class after it, costs more than it saves. The first sleeper alone
     * carries the caller's wake call, so a rise there is no proof. */
    if (cost > prev && k != s->spinning + 1u) break;
    prev = cost;
  }
  return pick;
}
