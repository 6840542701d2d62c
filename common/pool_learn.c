/* pool_learn.c: the worker pool's learned costs (see pool_learn.h). */
#include "common/pool_learn.h"

/* Hand-off costs for a pool whose calibration measured nothing (its workers
 * never started in time): pessimistic, so such a pool calls in helpers for
 * large jobs only, until its jobs measure better. ns. */
#define FL_POOL_DEFAULT_SPIN_NS 5000.0
#define FL_POOL_DEFAULT_SLEEP_NS 100000.0
#define FL_POOL_DEFAULT_WAKE_CALL_NS 20000.0

#define LOAD(x) atomic_load_explicit(&(x), memory_order_relaxed)
#define STORE(x, v) atomic_store_explicit(&(x), (v), memory_order_relaxed)

/* The moving average of weight 1/4, the sample clamped to [old / 4, 2 old]. */
static void learn(_Atomic double *avg, double sample) {
  double old = atomic_load_explicit(avg, memory_order_relaxed);
  if (old > 0) {
    if (sample > 2 * old) sample = 2 * old;
    if (sample < old / 4) sample = old / 4;
    sample = old + (sample - old) / 4;
  }
  atomic_store_explicit(avg, sample, memory_order_relaxed);
}

fl_pool_pace *fl_pool_pace_of(fl_pool_learned *l, uintptr_t body) {
  /* Fibonacci hashing of the address: its top bits pick the home slot. */
  size_t home = (size_t)(((uint64_t)body * 0x9E3779B97F4A7C15ull) >> 60) % FL_POOL_BODIES;
  for (size_t i = 0; i < FL_POOL_BODIES; i++) {
    fl_pool_pace *p = &l->pace[(home + i) % FL_POOL_BODIES];
    uintptr_t had = LOAD(p->body);
    if (had == body) return p;
    if (had == 0 && (atomic_compare_exchange_strong(&p->body, &had, body) || had == body))
      return p;
  }
  return &l->pace[home];
}

const fl_pool_pace *fl_pool_pace_find(const fl_pool_learned *l, uintptr_t body) {
  for (size_t i = 0; i < FL_POOL_BODIES; i++)
    if (LOAD(l->pace[i].body) == body) return &l->pace[i];
  return NULL;
}

void fl_pool_costs_of(const fl_pool_learned *l, const fl_pool_pace *p, fl_pool_costs *out) {
  if (atomic_load_explicit(&l->fixed, memory_order_acquire)) {
    *out = (fl_pool_costs){LOAD(l->fix_item_ns), LOAD(l->fix_spin_ns), LOAD(l->fix_sleep_ns),
                           LOAD(l->fix_wake_call_ns)};
    return;
  }
  *out = (fl_pool_costs){p ? LOAD(p->item_ns) : 0, LOAD(l->spin_ns), LOAD(l->sleep_ns),
                         LOAD(l->wake_call_ns)};
}

int fl_pool_known(const fl_pool_learned *l, const fl_pool_pace *p) {
  return atomic_load_explicit(&l->fixed, memory_order_acquire) || LOAD(p->item_ns) > 0;
}

int fl_pool_time_alone(fl_pool_learned *l, fl_pool_pace *p, size_t items) {
  if (atomic_load_explicit(&l->fixed, memory_order_acquire)) return 0;
  /* Near where a helper starts to pay (a quarter of a spinning hand-off),
   * every call counts; far below it, a sample now and then. */
  if ((double)items * LOAD(p->item_ns) * 4 >= LOAD(l->spin_ns)) return 1;
  return atomic_fetch_add_explicit(&p->calls, 1, memory_order_relaxed) % FL_POOL_SAMPLE == 0;
}

void fl_pool_learn_items(fl_pool_learned *l, fl_pool_pace *p, size_t items, uint64_t ns) {
  if (items == 0 || atomic_load_explicit(&l->fixed, memory_order_acquire)) return;
  learn(&p->item_ns, (double)ns / (double)items);
}

void fl_pool_learn_start(fl_pool_learned *l, int slept, uint64_t ns) {
  if (atomic_load_explicit(&l->fixed, memory_order_acquire)) return;
  learn(slept ? &l->sleep_ns : &l->spin_ns, (double)ns);
}

void fl_pool_learn_wake_call(fl_pool_learned *l, uint64_t ns) {
  if (atomic_load_explicit(&l->fixed, memory_order_acquire)) return;
  learn(&l->wake_call_ns, (double)ns);
}

int fl_pool_probe_due(fl_pool_learned *l) {
  if (atomic_load_explicit(&l->fixed, memory_order_acquire)) return 0;
  return atomic_fetch_add_explicit(&l->alone, 1, memory_order_relaxed) % FL_POOL_PROBE ==
         FL_POOL_PROBE - 1;
}

void fl_pool_calibrated(fl_pool_learned *l, double spin, double sleep, double wake_call) {
  STORE(l->spin_ns, spin > 0 ? spin : FL_POOL_DEFAULT_SPIN_NS);
  STORE(l->sleep_ns, sleep > 0 ? sleep : FL_POOL_DEFAULT_SLEEP_NS);
  STORE(l->wake_call_ns, wake_call > 0 ? wake_call : FL_POOL_DEFAULT_WAKE_CALL_NS);
}

void fl_pool_fix(fl_pool_learned *l, const fl_pool_costs *c) {
  if (!c) {
    atomic_store_explicit(&l->fixed, 0, memory_order_release);
    return;
  }
  STORE(l->fix_item_ns, c->item_ns);
  STORE(l->fix_spin_ns, c->spin_ns);
  STORE(l->fix_sleep_ns, c->sleep_ns);
  STORE(l->fix_wake_call_ns, c->wake_call_ns);
  atomic_store_explicit(&l->fixed, 1, memory_order_release);
}
