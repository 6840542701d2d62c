/* sim_arc.c: batched ARC (Megiddo and Modha, "ARC: A Self-Tuning, Low
 * Overhead Replacement Cache", FAST 2003). T1 holds keys used once since they
 * came in, T2 keys used at least twice; B1 and B2 remember keys recently
 * evicted from each (ghosts, no data). A ghost's return moves the target size
 * p of T1 towards the list that would have kept it. Resident keys are T1 and
 * T2, at most c; T1 + B1 and all four lists hold at most c and 2c keys.
 *
 * Batched: keys are visited as fl_sim_visit orders them. A resident key moves
 * to the head of T2 once; any other takes the paper's cases II-IV, admitted
 * into T1 or, back from a ghost list, into T2; a new key the batch looked up
 * twice or more goes on to T2, where its second lookup would have put it one
 * access at a time. */
#include "tools/sim_policy.h"

enum { T1 = 1, T2, B1, B2, LISTS };

typedef struct arc {
  fl_sim_links links;
  fl_sim_list l[LISTS]; /* l[T1] .. l[B2]; l[0] unused */
  double p;             /* target size of T1, 0..c */
  uint64_t c;
} arc;

static void *arc_create(const fl_sim_setup *setup) {
  arc *s = calloc(1, sizeof *s);
  if (!s || fl_sim_links_init(&s->links, setup->n_keys) != 0) {
    free(s);
    return NULL;
  }
  for (int i = T1; i < LISTS; i++) fl_sim_list_init(&s->l[i], (uint8_t)i);
  s->c = setup->capacity;
  return s;
}

static void arc_destroy(void *state) {
  arc *s = state;
  fl_sim_links_free(&s->links);
  free(s);
}

/* REPLACE: evicts T1's or T2's least recent key into its ghost list. */
static void replace(arc *s, int from_b2, fl_sim_log *log) {
  uint64_t t1 = s->l[T1].size;
  int from_t1 = t1 >= 1 && ((double)t1 > s->p || (from_b2 && (double)t1 == s->p));
  uint32_t key = fl_sim_list_pop_tail(&s->links, &s->l[from_t1 ? T1 : T2]);
  fl_sim_list_push(&s->links, &s->l[from_t1 ? B1 : B2], key);
  fl_sim_evict(log, key);
}

static double ratio(uint64_t a, uint64_t b) { return a >= b ? 1.0 : (double)b / (double)a; }

/* Case IV: a key in no list. Makes room, then puts it at T1's head. */
static void admit_new(arc *s, uint32_t key, fl_sim_log *log) {
  uint64_t t1 = s->l[T1].size, l1 = t1 + s->l[B1].size;
  uint64_t all = l1 + s->l[T2].size + s->l[B2].size;
  if (l1 == s->c) {
    if (t1 < s->c) {
      fl_sim_list_pop_tail(&s->links, &s->l[B1]);
      replace(s, 0, log);
    } else {
      fl_sim_evict(log, fl_sim_list_pop_tail(&s->links, &s->l[T1]));
    }
  } else if (all >= s->c) {
    if (all == 2 * s->c) fl_sim_list_pop_tail(&s->links, &s->l[B2]);
    replace(s, 0, log);
  }
  fl_sim_list_push(&s->links, &s->l[T1], key);
}

static void arc_visit(void *state, const fl_sim_entry *e, fl_sim_log *log) {
  arc *s = state;
  uint32_t key = e->key;
  int on = s->links.on[key];
  if (on == T1 || on == T2) {
    fl_sim_list_move(&s->links, &s->l[on], &s->l[T2], key);
    return;
  }
  if (on == B1 || on == B2) {
    /* Case II / III: a ghost hit grows the side that lost it. */
    if (on == B1) {
      s->p += ratio(s->l[B1].size, s->l[B2].size);
      if (s->p > (double)s->c) s->p = (double)s->c;
    } else {
      s->p -= ratio(s->l[B2].size, s->l[B1].size);
      if (s->p < 0) s->p = 0;
    }
    replace(s, on == B2, log);
    fl_sim_list_move(&s->links, &s->l[on], &s->l[T2], key);
  } else {
    admit_new(s, key, log);
    if (e->count >= 2) fl_sim_list_move(&s->links, &s->l[T1], &s->l[T2], key);
  }
  fl_sim_admit(log, key);
}

static void arc_batch(void *state, const fl_sim_batch *b, fl_sim_log *log) {
  fl_sim_visit(b, arc_visit, state, log);
}

const fl_sim_policy fl_sim_arc = {"arc", "batched ARC: recency and frequency lists, ghost-tuned split",
                                  arc_create, arc_batch, arc_destroy};
