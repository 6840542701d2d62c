/* sim_lfu.c: batched LFU with dynamic aging (LFU-DA: Arlitt et al., "Evaluating
 * content management techniques for Web proxy caches", 2000). A resident key's
 * priority is L + the uses it has had since it came in, L the cache's age: the
 * priority of the last key evicted. Every miss is admitted and the key of
 * least priority evicted, so L rises as the cache turns over and keys that
 * were popular long ago cannot stay on old counts.
 *
 * Batched: a hit adds its count to its uses; then the misses, most frequent
 * first, come in with their counts as their uses. */
#include "tools/sim_policy.h"

typedef struct lfu {
  fl_sim_heap heap; /* resident keys by priority */
  uint64_t *uses;   /* per key: uses since it came in (resident keys) */
  uint64_t age;     /* L */
  uint64_t capacity;
} lfu;

static void *lfu_create(const fl_sim_setup *setup) {
  lfu *s = calloc(1, sizeof *s);
  if (!s) return NULL;
  s->uses = malloc((setup->n_keys ? setup->n_keys : 1) * sizeof *s->uses);
  if (!s->uses || fl_sim_heap_init(&s->heap, setup->capacity, setup->n_keys) != 0) {
    free(s->uses);
    free(s);
    return NULL;
  }
  s->capacity = setup->capacity;
  return s;
}

static void lfu_destroy(void *state) {
  lfu *s = state;
  fl_sim_heap_free(&s->heap);
  free(s->uses);
  free(s);
}

static void lfu_batch(void *state, const fl_sim_batch *b, fl_sim_log *log) {
  lfu *s = state;
  for (size_t i = 0; i < b->n_hits; i++) {
    uint32_t key = b->hits[i].key;
    s->uses[key] += b->hits[i].count;
    fl_sim_heap_update(&s->heap, key, s->age + s->uses[key]);
  }
  for (size_t i = 0; i < b->n_misses; i++) {
    uint32_t key = b->misses[i].key;
    if (s->heap.size == s->capacity) {
      s->age = s->heap.slot[0].prio;
      fl_sim_evict(log, fl_sim_heap_pop(&s->heap));
    }
    s->uses[key] = b->misses[i].count;
    fl_sim_heap_push(&s->heap, key, s->age + s->uses[key]);
    fl_sim_admit(log, key);
  }
}

const fl_sim_policy fl_sim_lfu = {"lfu", "batched LFU with dynamic aging (LFU-DA): every miss admitted",
                                  lfu_create, lfu_batch, lfu_destroy};
