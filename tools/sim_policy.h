/* sim_policy.h: what the policy simulator's cache policies see and share.
 * Skip to "interface".
 *
 * The simulator (policy_sim.h) replays a trace with a batched cache's
 * semantics. Keys are dense numbers 0..n_keys-1, one per (table, id) the
 * trace looks up. At a batch, the keys resident when it starts are hits, every
 * lookup of them; every other key of the batch is a miss, every lookup of it:
 * a batched cache cannot hit a key again within the batch that brings it in.
 * After the batch the policy is offered the batch's distinct keys in two
 * lists, hits and misses, each most frequent in the batch first (ties: the
 * key looked up last comes first), with its lookups in the batch and the
 * batch of its next use. It decides, and records in order what it admits and
 * what it evicts: it may admit keys this batch looked up that are not resident
 * (a miss, or a hit it evicted earlier in the same decision: the batch has
 * its row at hand) and evict resident keys. The driver (sim_run.c) applies
 * the records and checks them: a record that breaks a rule, or more resident
 * keys than the capacity after any record, is a bug of the policy and stops
 * the run.
 *
 * A policy refreshes a hit's recency once per batch, whatever its count. Where
 * a per-access policy would see a key's lookups one after another, its batched
 * version takes them as consecutive accesses: the lookups a batch makes of
 * one key count as that many uses (LFU, TinyLFU's sketch, ARC's second
 * reference). The batch's keys are all more recent than the keys it did not
 * look up, and among themselves the more frequent in the batch counts as the
 * more recent: ARC and W-TinyLFU visit them least frequent first
 * (fl_sim_visit), as accesses, so that a key the batch looked up once cannot
 * push out its hot keys; LRU keeps the most recent directly (sim_lru.c). With
 * one lookup per batch each policy is its per-access self.
 *
 * One file per policy, each exporting an fl_sim_policy: sim_lru.c, sim_arc.c,
 * sim_tinylfu.c, sim_lfu.c, sim_opt.c; the key lists, indexed heap and
 * frequency sketch they share are sim_list.c, sim_heap.c and sim_sketch.c. */
#ifndef FL_TOOLS_SIM_POLICY_H
#define FL_TOOLS_SIM_POLICY_H

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------- interface */

/* The batch index of a key that is never looked up again. */
#define FL_SIM_NEVER UINT32_MAX

/* One distinct key of a batch. */
typedef struct fl_sim_entry {
  uint32_t key;
  uint32_t count;      /* its lookups in this batch, >= 1 */
  uint32_t next;       /* the next batch that looks it up, FL_SIM_NEVER if none */
  uint32_t next_count; /* its lookups in that batch, 0 if none */
} fl_sim_entry;

/* A batch as offered to a policy once its lookups are done. */
typedef struct fl_sim_batch {
  uint64_t index;              /* 0-based */
  const fl_sim_entry *hits;    /* resident at the batch's start, most frequent first
                                  (ties: the most recently looked up first) */
  size_t n_hits;
  const fl_sim_entry *misses;  /* not resident, most frequent first */
  size_t n_misses;
} fl_sim_batch;

/* The decisions of one batch, in order. */
typedef struct fl_sim_event {
  uint32_t key;
  uint32_t evict; /* 0: admitted, 1: evicted */
} fl_sim_event;

typedef struct fl_sim_log {
  fl_sim_event *ev;
  size_t n, cap;
  int out_of_memory; /* a record could not be kept: the driver fails the run */
} fl_sim_log;

static inline void fl_sim_log_put(fl_sim_log *l, uint32_t key, uint32_t evict) {
  if (l->n == l->cap) {
    size_t cap = l->cap ? 2 * l->cap : 1024;
    fl_sim_event *ev = (fl_sim_event *)realloc(l->ev, cap * sizeof *ev);
    if (!ev) {
      l->out_of_memory = 1;
      return;
    }
    l->ev = ev;
    l->cap = cap;
  }
  l->ev[l->n].key = key;
  l->ev[l->n++].evict = evict;
}
static inline void fl_sim_admit(fl_sim_log *l, uint32_t key) { fl_sim_log_put(l, key, 0); }
static inline void fl_sim_evict(fl_sim_log *l, uint32_t key) { fl_sim_log_put(l, key, 1); }

/* Calls visit(state, entry, log) for every key of the batch, hits and misses
 * together, least frequent in the batch first; at equal counts a miss before
 * a hit. A key may have left the cache earlier in the visit: the policy goes
 * by its own state, not by which list the key came in. */
typedef void (*fl_sim_visit_fn)(void *state, const fl_sim_entry *e, fl_sim_log *log);
static inline void fl_sim_visit(const fl_sim_batch *b, fl_sim_visit_fn visit, void *state,
                                fl_sim_log *log) {
  size_t h = b->n_hits, m = b->n_misses;
  while (h || m) {
    if (m == 0 || (h && b->hits[h - 1].count < b->misses[m - 1].count)) visit(state, &b->hits[--h], log);
    else visit(state, &b->misses[--m], log);
  }
}

/* What a policy is created for. */
typedef struct fl_sim_setup {
  uint64_t capacity; /* resident keys at most, >= 1 */
  uint64_t n_keys;   /* keys are 0..n_keys-1 */
  uint64_t widest;   /* the most distinct keys of one batch */
} fl_sim_setup;

/* A cache policy. */
typedef struct fl_sim_policy {
  const char *name;  /* as --policies names it */
  const char *about; /* one line for the help text */
  /* The policy's state; NULL when out of memory. */
  void *(*create)(const fl_sim_setup *setup);
  /* Decides after batch b: records admissions and evictions in log. */
  void (*batch)(void *state, const fl_sim_batch *b, fl_sim_log *log);
  void (*destroy)(void *state);
} fl_sim_policy;

extern const fl_sim_policy fl_sim_lru;     /* sim_lru.c */
extern const fl_sim_policy fl_sim_arc;     /* sim_arc.c */
extern const fl_sim_policy fl_sim_tinylfu; /* sim_tinylfu.c */
extern const fl_sim_policy fl_sim_lfu;     /* sim_lfu.c */
extern const fl_sim_policy fl_sim_opt;     /* sim_opt.c */

/* ------------------------------------------------- shared structures */

/* Recency lists of keys (sim_list.c), threaded through arrays indexed by key
 * that several lists share: a key is on one list at most. The head is the
 * most recent end. */
typedef struct fl_sim_links {
  uint32_t *prev, *next; /* neighbours towards the head / the tail */
  uint8_t *on;           /* the id of the key's list, 0: none */
} fl_sim_links;

typedef struct fl_sim_list {
  uint32_t head, tail; /* FL_SIM_NEVER when empty */
  uint64_t size;
  uint8_t id;          /* >= 1, distinct among the lists over one fl_sim_links */
} fl_sim_list;

/* 0, or -1 when out of memory. */
int fl_sim_links_init(fl_sim_links *l, uint64_t n_keys);
void fl_sim_links_free(fl_sim_links *l);
void fl_sim_list_init(fl_sim_list *s, uint8_t id);
static inline int fl_sim_list_has(const fl_sim_links *l, const fl_sim_list *s, uint32_t key) {
  return l->on[key] == s->id;
}
/* Puts a key that is on no list at the head. */
void fl_sim_list_push(fl_sim_links *l, fl_sim_list *s, uint32_t key);
/* Takes a key off s, which holds it. */
void fl_sim_list_remove(fl_sim_links *l, fl_sim_list *s, uint32_t key);
/* Takes the tail (least recent) key off a non-empty list and returns it. */
uint32_t fl_sim_list_pop_tail(fl_sim_links *l, fl_sim_list *s);
/* Moves a key of `from` to the head of `to` (the same list: to its head). */
void fl_sim_list_move(fl_sim_links *l, fl_sim_list *from, fl_sim_list *to, uint32_t key);

/* A min-heap of keys by 64-bit priority (sim_heap.c), with every key's place
 * so that a key's priority can change or the key leave. Equal priorities come
 * out in no particular order. */
typedef struct fl_sim_heap_slot {
  uint64_t prio;
  uint32_t key;
} fl_sim_heap_slot;

typedef struct fl_sim_heap {
  fl_sim_heap_slot *slot; /* cap slots, slot[0] the least */
  uint32_t *pos;          /* per key: its slot, FL_SIM_NEVER when absent */
  uint64_t size, cap;
} fl_sim_heap;

int fl_sim_heap_init(fl_sim_heap *h, uint64_t cap, uint64_t n_keys);
void fl_sim_heap_free(fl_sim_heap *h);
static inline int fl_sim_heap_has(const fl_sim_heap *h, uint32_t key) {
  return h->pos[key] != FL_SIM_NEVER;
}
/* Adds an absent key (the heap must have room). */
void fl_sim_heap_push(fl_sim_heap *h, uint32_t key, uint64_t prio);
/* Sets a present key's priority. */
void fl_sim_heap_update(fl_sim_heap *h, uint32_t key, uint64_t prio);
/* Removes and returns the key of least priority (the heap must not be empty). */
uint32_t fl_sim_heap_pop(fl_sim_heap *h);

/* TinyLFU's frequency sketch (sim_sketch.c): a count-min sketch of 4-bit
 * counters, four per key, sized to `keys` keys; once 10 x keys additions have
 * raised counters, every counter is halved, so old popularity fades. */
typedef struct fl_sim_sketch {
  uint64_t *word;     /* 16 counters each */
  uint64_t mask;      /* words - 1, words a power of two */
  uint64_t additions; /* increments that raised a counter since the last halving */
  uint64_t sample;    /* additions that trigger a halving */
} fl_sim_sketch;

int fl_sim_sketch_init(fl_sim_sketch *s, uint64_t keys);
void fl_sim_sketch_free(fl_sim_sketch *s);
/* Records `times` uses of key. */
void fl_sim_sketch_add(fl_sim_sketch *s, uint32_t key, uint32_t times);
/* Halves every counter while the additions since the last halving reach the
 * sample: after each batch's additions. */
void fl_sim_sketch_age(fl_sim_sketch *s);
/* The key's estimated uses (0..15). */
uint32_t fl_sim_sketch_freq(const fl_sim_sketch *s, uint32_t key);

#ifdef __cplusplus
}
#endif
#endif
