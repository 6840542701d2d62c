/* sim_lru.c: batched LRU. A batch's keys are all more recent than the keys
 * it did not look up, and among themselves the more frequent in the batch
 * counts as the more recent (ties: a hit before a miss). After a batch the
 * cache holds its most recent keys up to the capacity: every miss that fits
 * is admitted, hits that do not are evicted, then the least recent of the
 * older keys make room. With one lookup per batch this is plain LRU. */
#include "tools/sim_policy.h"

typedef struct lru {
  fl_sim_links links;
  fl_sim_list list;
  uint64_t capacity;
} lru;

static void *lru_create(const fl_sim_setup *setup) {
  lru *s = calloc(1, sizeof *s);
  if (!s || fl_sim_links_init(&s->links, setup->n_keys) != 0) {
    free(s);
    return NULL;
  }
  fl_sim_list_init(&s->list, 1);
  s->capacity = setup->capacity;
  return s;
}

static void lru_destroy(void *state) {
  lru *s = state;
  fl_sim_links_free(&s->links);
  free(s);
}

/* Whether hits[h] goes before misses[m] from the most recent end. */
static int hit_first(const fl_sim_batch *b, size_t h, size_t m) {
  return h < b->n_hits && (m == b->n_misses || b->hits[h].count >= b->misses[m].count);
}

static void lru_batch(void *state, const fl_sim_batch *b, fl_sim_log *log) {
  lru *s = state;
  fl_sim_links *l = &s->links;
  /* The batch's keys that stay: a most recent prefix of each list. */
  size_t h = 0, m = 0;
  while (h + m < s->capacity && (h < b->n_hits || m < b->n_misses)) {
    if (hit_first(b, h, m)) h++;
    else m++;
  }
  for (size_t i = h; i < b->n_hits; i++) {
    fl_sim_list_remove(l, &s->list, b->hits[i].key);
    fl_sim_evict(log, b->hits[i].key);
  }
  /* The hits that stay go ahead of the older keys, which make room. */
  for (size_t i = 0; i < h; i++) fl_sim_list_move(l, &s->list, &s->list, b->hits[i].key);
  while (s->list.size + m > s->capacity) fl_sim_evict(log, fl_sim_list_pop_tail(l, &s->list));
  /* The batch's keys in order, least recent first, each to the head. */
  while (h || m) {
    if (m == 0 || (h && b->hits[h - 1].count < b->misses[m - 1].count)) {
      fl_sim_list_move(l, &s->list, &s->list, b->hits[--h].key);
    } else {
      fl_sim_list_push(l, &s->list, b->misses[--m].key);
      fl_sim_admit(log, b->misses[m].key);
    }
  }
}

const fl_sim_policy fl_sim_lru = {"lru", "batched LRU: every miss that fits admitted, least recent evicted",
                                  lru_create, lru_batch, lru_destroy};
