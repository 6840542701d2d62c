/* sim_tinylfu.c: batched W-TinyLFU, after Caffeine's design (Einziger,
 * Friedman and Manes, "TinyLFU: A Highly Efficient Cache Admission Policy",
 * ACM TOS 2017). New keys enter a window LRU of 1% of the capacity; the
 * window's overflow, the candidate, joins the main space, a segmented LRU
 * (probation, and protected of 80% of it), while there is room. When there is
 * none the candidate faces main's victim, the least recent probation key
 * (protected's when probation is empty): TinyLFU admits the candidate only
 * when the sketch (sim_sketch.c) says it is used more often than the victim,
 * and evicts the other. A probation hit moves to protected, whose overflow
 * goes back to probation's head. The window's size is fixed (Caffeine adapts
 * it by hill climbing), and there is no random admission against hash
 * flooding.
 *
 * Batched: the sketch counts a whole batch at once, so it is sized for the
 * capacity (as Caffeine's) or the widest batch's distinct keys, whichever is
 * more: narrower, one batch would saturate its counters. It first records
 * every lookup of the batch (a key's count as that many uses) and ages, then
 * the keys are visited as fl_sim_visit orders them, a key not resident
 * entering the window. */
#include "tools/sim_policy.h"

enum { WINDOW = 1, PROBATION, PROTECTED, LISTS };

typedef struct tinylfu {
  fl_sim_links links;
  fl_sim_list l[LISTS];    /* l[WINDOW] .. l[PROTECTED]; l[0] unused */
  fl_sim_sketch sketch;
  uint64_t capacity;
  uint64_t window_cap;     /* 1% of the capacity, at least 1 */
  uint64_t protected_cap;  /* 80% of the rest */
} tinylfu;

static void *tinylfu_create(const fl_sim_setup *setup) {
  tinylfu *s = calloc(1, sizeof *s);
  if (!s) return NULL;
  uint64_t c = setup->capacity;
  if (fl_sim_links_init(&s->links, setup->n_keys) != 0 ||
      fl_sim_sketch_init(&s->sketch, c > setup->widest ? c : setup->widest) != 0) {
    fl_sim_links_free(&s->links);
    free(s);
    return NULL;
  }
  for (int i = WINDOW; i < LISTS; i++) fl_sim_list_init(&s->l[i], (uint8_t)i);
  s->capacity = c;
  s->window_cap = c / 100 ? c / 100 : 1;
  s->protected_cap = (c - s->window_cap) * 8 / 10;
  return s;
}

static void tinylfu_destroy(void *state) {
  tinylfu *s = state;
  fl_sim_sketch_free(&s->sketch);
  fl_sim_links_free(&s->links);
  free(s);
}

static uint64_t resident(const tinylfu *s) {
  return s->l[WINDOW].size + s->l[PROBATION].size + s->l[PROTECTED].size;
}

/* Before a key comes into a full window, the window's least recent key
 * leaves it: into main while there is room for both, else it and main's
 * victim compete, and the loser is evicted. */
static void leave_window(tinylfu *s, fl_sim_log *log) {
  uint32_t cand = fl_sim_list_pop_tail(&s->links, &s->l[WINDOW]);
  if (resident(s) + 2 <= s->capacity) {
    fl_sim_list_push(&s->links, &s->l[PROBATION], cand);
    return;
  }
  fl_sim_list *main = s->l[PROBATION].size ? &s->l[PROBATION] : &s->l[PROTECTED];
  if (main->size == 0 ||
      fl_sim_sketch_freq(&s->sketch, cand) <= fl_sim_sketch_freq(&s->sketch, main->tail)) {
    fl_sim_evict(log, cand);
    return;
  }
  fl_sim_evict(log, fl_sim_list_pop_tail(&s->links, main));
  fl_sim_list_push(&s->links, &s->l[PROBATION], cand);
}

static void tinylfu_visit(void *state, const fl_sim_entry *e, fl_sim_log *log) {
  tinylfu *s = state;
  uint32_t key = e->key;
  int on = s->links.on[key];
  if (!on) {
    if (s->l[WINDOW].size == s->window_cap) leave_window(s, log);
    fl_sim_list_push(&s->links, &s->l[WINDOW], key);
    fl_sim_admit(log, key);
    return;
  }
  if (on != PROBATION) {
    fl_sim_list_move(&s->links, &s->l[on], &s->l[on], key);
    return;
  }
  fl_sim_list_move(&s->links, &s->l[PROBATION], &s->l[PROTECTED], key);
  if (s->l[PROTECTED].size > s->protected_cap)
    fl_sim_list_move(&s->links, &s->l[PROTECTED], &s->l[PROBATION], s->l[PROTECTED].tail);
}

static void tinylfu_batch(void *state, const fl_sim_batch *b, fl_sim_log *log) {
  tinylfu *s = state;
  for (size_t i = 0; i < b->n_hits; i++) fl_sim_sketch_add(&s->sketch, b->hits[i].key, b->hits[i].count);
  for (size_t i = 0; i < b->n_misses; i++)
    fl_sim_sketch_add(&s->sketch, b->misses[i].key, b->misses[i].count);
  fl_sim_sketch_age(&s->sketch);
  fl_sim_visit(b, tinylfu_visit, state, log);
}

const fl_sim_policy fl_sim_tinylfu = {
    "tinylfu", "batched W-TinyLFU: window LRU, SLRU main, frequency-sketch admission",
    tinylfu_create, tinylfu_batch, tinylfu_destroy};
