/* query_side.c: the cache's side of the query path's interface
 * (query_side.h): reads of the fixed facts, the index and the generations,
 * a query's registration, the counters. */
#include <stdatomic.h>

#include "cache/cache.h"
#include "cache/cuda_state.h"
#include "common/mutant.h"

const fl_cache_fixed *fl_cache_fixed_of(const fl_cache *c) { return &c->fixed; }

const fl_index_view *fl_cache_index(const fl_cache *c, uint32_t part) {
  return &c->parts[part].index;
}

uint32_t fl_cache_next_batch(fl_cache *c) {
  return (uint32_t)__atomic_add_fetch(&c->batch, 1, __ATOMIC_RELAXED);
}

int64_t fl_cache_query_begin(fl_cache *c) {
  /* Only the event hooks: a begin frees no slab. */
  fl_reclaim_hooks h = {NULL, fl_event_done, fl_event_release, c};
  return fl_reclaim_begin(&c->reclaim, &h);
}

void fl_cache_query_end(fl_cache *c, int64_t ticket, void *event) {
  fl_reclaim_end(&c->reclaim, ticket, event);
}

void fl_cache_add(fl_cache *c, fl_stat s, uint64_t v) {
  atomic_fetch_add_explicit(&c->stat[s], v, memory_order_relaxed);
}

void fl_cache_count_table(fl_cache *c, uint32_t t, uint64_t lookups, uint64_t hits,
                          uint64_t dram_hits, uint64_t misses) {
  fl_table_counters *k = &c->counters[t];
  atomic_fetch_add_explicit(&k->lookups, lookups, memory_order_relaxed);
  atomic_fetch_add_explicit(&k->hits, hits, memory_order_relaxed);
  atomic_fetch_add_explicit(&k->dram_hits, dram_hits, memory_order_relaxed);
  atomic_fetch_add_explicit(&k->misses, misses, memory_order_relaxed);
}

/* A batch's lookups before its misses, and fl_freq_shift_open takes them in
 * the other order (both sequentially consistent): misses it takes always
 * come with their lookups. */
void fl_cache_count_shift(fl_cache *c, uint32_t part, uint64_t lookups, uint64_t missed) {
  fl_part *p = &c->parts[part];
  if (missed == 0) {
    atomic_fetch_add(&p->quiet_lookups, lookups);
    return;
  }
  atomic_fetch_add(&p->missed_lookups, lookups);
  atomic_fetch_add(&p->missed_of, missed);
}

void fl_cache_generations(const fl_cache *c, uint64_t *gen) {
  for (uint32_t t = 0; t < c->fixed.n_tables; t++)
    gen[t] = __atomic_load_n(&c->generation[t], __ATOMIC_ACQUIRE);
}

int fl_cache_stale(const fl_cache *c, const uint64_t *gen, uint32_t t) {
  if (FL_MUTANT_ON(5)) return 0;
  return c->generation[t] != gen[t];
}
