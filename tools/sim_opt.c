/* sim_opt.c: Belady's OPT (MIN) at batch granularity, with the trace's future
 * known: after each batch the cache keeps, of its resident keys and the
 * batch's misses, the ones whose next use comes soonest, a key never used
 * again never kept. That is the optimum when every lookup of a key in a batch
 * is its only one there (one lookup per batch, or counting each key once a
 * batch): keeping a sooner key instead of a later one can only add hits
 * (Belady's exchange argument, which holds with bypass and batch by batch).
 * Among keys next used in the same batch, the one that batch looks up more
 * often is kept: with repeats a hit counts its lookups, which Belady's rule
 * alone does not weigh. */
#include "tools/sim_policy.h"

typedef struct opt {
  fl_sim_heap heap; /* resident keys, the one to evict first on top */
  uint64_t capacity;
} opt;

/* Heap priority: least for the key to evict first, the one next used last,
 * and of those the one that next use looks up least often. */
static uint64_t rank(const fl_sim_entry *e) {
  return ~(((uint64_t)e->next << 32) | (uint32_t)~e->next_count);
}

static void *opt_create(const fl_sim_setup *setup) {
  opt *s = calloc(1, sizeof *s);
  if (!s || fl_sim_heap_init(&s->heap, setup->capacity, setup->n_keys) != 0) {
    free(s);
    return NULL;
  }
  s->capacity = setup->capacity;
  return s;
}

static void opt_destroy(void *state) {
  opt *s = state;
  fl_sim_heap_free(&s->heap);
  free(s);
}

static void opt_batch(void *state, const fl_sim_batch *b, fl_sim_log *log) {
  opt *s = state;
  for (size_t i = 0; i < b->n_hits; i++) fl_sim_heap_update(&s->heap, b->hits[i].key, rank(&b->hits[i]));
  for (size_t i = 0; i < b->n_misses; i++) {
    const fl_sim_entry *e = &b->misses[i];
    if (e->next == FL_SIM_NEVER) continue;
    uint64_t r = rank(e);
    if (s->heap.size == s->capacity) {
      if (r <= s->heap.slot[0].prio) continue;
      fl_sim_evict(log, fl_sim_heap_pop(&s->heap));
    }
    fl_sim_heap_push(&s->heap, e->key, r);
    fl_sim_admit(log, e->key);
  }
}

const fl_sim_policy fl_sim_opt = {"opt", "Belady's OPT per batch: keeps the keys next used soonest",
                                  opt_create, opt_batch, opt_destroy};
