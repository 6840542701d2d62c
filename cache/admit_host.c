/* admit_host.c: the host backend's admission (admit.h): a batch's unique
 * rows enter the cache on the querying thread, before fl_query returns,
 * by the admission rule (admit_rule.h) and in the priority order the CUDA
 * rounds use. */
#include <stdlib.h>
#include <string.h>

#include "cache/admit.h"
#include "cache/cache.h"
#include "common/error.h"

/* One unique row as admission sees it. */
typedef struct candidate {
  uint64_t uid, key;
  uint32_t arg, choice;
  uint64_t row;
  uint32_t count;  /* its missed lookups in the batch */
  int pointer;     /* a unified-index pointer hit */
} candidate;

/* The batch's unique rows of tables not changed since its fetch: its unique
 * misses, then its pointer rows, arg by arg. Returns how many. */
static uint64_t collect(const fl_cache *c, const fl_admit_host_batch *x, candidate *cand) {
  uint64_t k = 0;
  for (uint32_t a = 0; a < x->n_args; a++) {
    const fl_batch_arg *g = &x->args[a];
    if (fl_cache_stale(c, x->gen, g->table)) continue;
    uint32_t um = x->per_arg[FL_MISS_COUNTERS * a], up = x->per_arg[FL_MISS_COUNTERS * a + 1];
    /* Its unique misses [0, um), then its pointer rows [n - up, n). */
    for (uint64_t r = um ? 0 : g->n - up; r < g->n; r = r + 1 == um ? g->n - up : r + 1) {
      uint64_t uid = g->key_offset + r, slot = x->uniq_slot[uid], key = 0;
      uint64_t id = fl_miss_set_id(&x->set, fl_miss_set_base(g->key_offset, a), g->n, slot);
      fl_code_encode(&c->fixed.tables[g->table].code, c->fixed.cfg.key_bits, id, &key);
      cand[k++] = (candidate){uid, key, a, 0, fl_miss_row(r, g->n, um, up), x->set.count[slot],
                              r >= um};
    }
  }
  return k;
}

/* TinyLFU: the batch's additions to the part's sketch, then its aging: one
 * moment, before any estimate (admit_sketch.h). */
static void count_batch(fl_part *p, const candidate *cand, uint64_t k) {
  for (uint64_t i = 0; i < k; i++) {
    fl_sketch_add(&p->sketch, cand[i].key, cand[i].count);
    p->freq->additions += fl_sketch_uses(cand[i].count);
  }
  fl_freq_age_host(p);
}

/* Admits the batch's unique rows: winners of the admission rule
 * (admit_rule.h) in priority order (most frequent in the batch first)
 * while the pool has slots and the index room (fl_cache_index_room), then
 * pointers for store misses that stayed out, while the unified index has
 * room. Under c->lock. */
static fl_status admit(fl_cache *c, const fl_admit_host_batch *x) {
  fl_part *p = &c->parts[x->part];
  fl_status st = fl_cache_make_room(c, x->part, 0);
  if (st != FL_OK) return st;
  uint64_t n = 0, limit = fl_cache_unified_limit(c, x->part);
  uint64_t room = limit > p->dram_entries ? limit - p->dram_entries : 0;
  for (uint32_t a = 0; a < x->n_args; a++)
    n += x->per_arg[FL_MISS_COUNTERS * a] + x->per_arg[FL_MISS_COUNTERS * a + 1];
  candidate *cand = malloc((n ? n : 1) * sizeof *cand), *order = malloc((n ? n : 1) * sizeof *order);
  if (!cand || !order) {
    free(cand);
    free(order);
    return fl_fail(c, FL_ERR_OUT_OF_MEMORY, "out of host memory for %llu admissions",
                   (unsigned long long)n);
  }
  uint64_t all = collect(c, x, cand), k = 0, per_bucket[FL_ADMIT_BUCKETS + 1] = {0};
  if (p->freq) count_batch(p, cand, all);
  uint32_t victim = p->freq ? p->freq->victim : 0;
  fl_admit_rule rule = c->rule;
  rule.open = fl_freq_shift_open(c, p);
  rule.force = (uint32_t)x->force;
  for (uint64_t i = 0; i < all; i++) {
    candidate e = cand[i];
    uint32_t estimate = p->freq ? fl_sketch_estimate(&p->sketch, e.key) : 0;
    int wins = fl_admit_wins(&rule, x->now, e.key, e.count, estimate, victim);
    fl_admit_choice ch = fl_admit_choose(wins, e.pointer, e.pointer ? 0 : x->uniq_refs[e.uid],
                                         room > 0);
    if (ch == FL_ADMIT_NONE) continue;
    /* Buckets: FL_ADMIT_BUCKETS - 1 (most frequent) first, pointers last. */
    e.choice = ch == FL_ADMIT_CACHE ? FL_ADMIT_BUCKETS - 1 - fl_admit_bucket(e.count)
                                    : FL_ADMIT_BUCKETS;
    cand[k++] = e;
    per_bucket[e.choice]++;
  }
  uint64_t start[FL_ADMIT_BUCKETS + 1], at = 0;
  for (uint32_t q = 0; q <= FL_ADMIT_BUCKETS; q++) start[q] = at, at += per_bucket[q];
  for (uint64_t i = 0; i < k; i++) order[start[cand[i].choice]++] = cand[i];
  int starved = 0;
  uint64_t admitted = 0, index_room = fl_cache_index_room(c, x->part);
  for (uint64_t i = 0; i < k; i++) {
    const candidate *e = &order[i];
    const fl_batch_arg *g = &x->args[e->arg];
    if (e->choice != FL_ADMIT_BUCKETS && admitted >= index_room) continue;
    if (e->choice == FL_ADMIT_BUCKETS) {
      if (room == 0) break;
      if (fl_index_insert(&p->index, e->key, x->uniq_refs[e->uid] | FL_LOC_DRAM_BIT, x->now) ==
          FL_INSERT_DONE)
        p->dram_entries++, room--;
      continue;
    }
    uint64_t slot = fl_pool_alloc(&p->pool, c->fixed.tables[g->table].cls);
    if (slot == 0) { /* class full: evicted below, reclaimed for later batches */
      starved = 1;
      continue;
    }
    memcpy((void *)slot, x->staging + x->stage_base[e->arg] + e->row * g->vec_bytes, g->vec_bytes);
    fl_insert_result r = fl_index_insert(&p->index, e->key, slot, x->now);
    if (r == FL_INSERT_DONE || r == FL_INSERT_PROMOTED) {
      admitted++;
      if (r == FL_INSERT_PROMOTED) p->dram_entries--;
    } else {
      fl_pool_free(&p->pool, slot);
    }
  }
  p->entries += admitted;
  fl_cache_add(c, FL_STAT_ADMISSIONS, admitted);
  free(cand);
  free(order);
  return starved ? fl_cache_make_room(c, x->part, 1) : FL_OK;
}

fl_status fl_admit_host(fl_cache *c, const fl_admit_host_batch *b) {
  pthread_mutex_lock(&c->lock);
  fl_status st = admit(c, b);
  pthread_mutex_unlock(&c->lock);
  return st;
}
