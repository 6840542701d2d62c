/* sim_trace.c: a trace loaded for the policy simulator (policy_sim.h). Every
 * (table, id) gets a dense key in the order the trace first looks it up; a
 * batch becomes its distinct keys with their lookups, most frequent first
 * (ties: the most recently looked up first), and, once the whole trace is in,
 * the batch of each key's next use, found walking the batches backwards. */
#include <string.h>

#include "common/hash.h"
#include "tools/policy_sim.h"

/* (table, id) -> key, open addressing with linear probing at load <= 1/2;
 * per key its table and id, and where the batch being added keeps it. */
struct fl_sim_keymap {
  uint32_t *slot;     /* key + 1, 0: empty */
  uint64_t mask;      /* slots - 1 */
  uint32_t *table;    /* per key */
  uint64_t *id;
  uint32_t *seen_in;  /* per key: 1 + the last batch that looked it up */
  uint64_t *at;       /* per key: its entry in that batch */
  uint64_t cap_keys;
};

fl_status fl_sim_trace_begin(fl_sim_trace *t) {
  memset(t, 0, sizeof *t);
  t->map = calloc(1, sizeof *t->map);
  t->first = malloc(sizeof *t->first);
  if (!t->map || !t->first) return FL_ERR_OUT_OF_MEMORY;
  t->first[0] = 0;
  t->cap_batches = 1;
  return FL_OK;
}

static void keymap_free(fl_sim_keymap *m) {
  if (!m) return;
  free(m->slot);
  free(m->table);
  free(m->id);
  free(m->seen_in);
  free(m->at);
  free(m);
}

void fl_sim_trace_free(fl_sim_trace *t) {
  keymap_free(t->map);
  free(t->first);
  free(t->entry);
  memset(t, 0, sizeof *t);
}

static int grow(void **p, uint64_t n, size_t size) {
  void *q = realloc(*p, (size_t)n * size);
  if (!q) return -1;
  *p = q;
  return 0;
}

static int grow_keys(fl_sim_keymap *m) {
  uint64_t cap = m->cap_keys ? 2 * m->cap_keys : 1024;
  if (grow((void **)&m->table, cap, sizeof *m->table) || grow((void **)&m->id, cap, sizeof *m->id) ||
      grow((void **)&m->seen_in, cap, sizeof *m->seen_in) || grow((void **)&m->at, cap, sizeof *m->at))
    return -1;
  m->cap_keys = cap;
  return 0;
}

static uint64_t home(const fl_sim_keymap *m, uint32_t table, uint64_t id) {
  return fl_hash2(table, id) & m->mask;
}

static int rehash(fl_sim_keymap *m, uint64_t n_keys) {
  uint64_t slots = m->mask ? 2 * (m->mask + 1) : 2048;
  uint32_t *s = calloc(slots, sizeof *s);
  if (!s) return -1;
  free(m->slot);
  m->slot = s;
  m->mask = slots - 1;
  for (uint64_t k = 0; k < n_keys; k++) {
    uint64_t i = home(m, m->table[k], m->id[k]);
    while (s[i]) i = (i + 1) & m->mask;
    s[i] = (uint32_t)(k + 1);
  }
  return 0;
}

/* The key of (table, id), a new one when first seen; FL_SIM_NEVER when out
 * of memory or of key numbers. */
static uint32_t key_of(fl_sim_trace *t, uint32_t table, uint64_t id) {
  fl_sim_keymap *m = t->map;
  if (2 * (t->n_keys + 1) > m->mask + 1 && rehash(m, t->n_keys)) return FL_SIM_NEVER;
  uint64_t i = home(m, table, id);
  for (; m->slot[i]; i = (i + 1) & m->mask) {
    uint32_t k = m->slot[i] - 1;
    if (m->id[k] == id && m->table[k] == table) return k;
  }
  if (t->n_keys >= FL_SIM_NEVER - 1 || (t->n_keys == m->cap_keys && grow_keys(m))) return FL_SIM_NEVER;
  uint32_t k = (uint32_t)t->n_keys++;
  m->slot[i] = k + 1;
  m->table[k] = table;
  m->id[k] = id;
  m->seen_in[k] = 0;
  return k;
}

/* Most frequent first; ties: the most recently looked up first (the place of
 * its last lookup in the batch is kept in `next` while building). */
static int by_count(const void *a, const void *b) {
  const fl_sim_entry *x = a, *y = b;
  if (x->count != y->count) return x->count > y->count ? -1 : 1;
  return (x->next < y->next) - (x->next > y->next);
}

fl_status fl_sim_trace_add(fl_sim_trace *t, const fl_trace_batch *b) {
  uint64_t n = fl_trace_batch_lookups(b), from = t->first[t->n_batches];
  if (t->n_batches >= FL_SIM_NEVER - 1) return FL_ERR_INVALID_ARGUMENT;
  if (t->n_batches + 2 > t->cap_batches) {
    if (grow((void **)&t->first, 2 * t->cap_batches, sizeof *t->first)) return FL_ERR_OUT_OF_MEMORY;
    t->cap_batches *= 2;
  }
  if (from + n > t->cap_entries) {
    uint64_t cap = t->cap_entries ? t->cap_entries : 4096;
    while (cap < from + n) cap *= 2;
    if (grow((void **)&t->entry, cap, sizeof *t->entry)) return FL_ERR_OUT_OF_MEMORY;
    t->cap_entries = cap;
  }
  fl_sim_keymap *m = t->map;
  uint32_t stamp = (uint32_t)t->n_batches + 1;
  uint64_t keys_before = t->n_keys, end = from;
  uint32_t place = 0; /* lookups so far in this batch */
  for (uint32_t tb = 0; tb < b->n_tables; tb++)
    for (size_t i = 0; i < b->n[tb]; i++, place++) {
      uint32_t k = key_of(t, tb, b->ids[tb][i]);
      if (k == FL_SIM_NEVER)
        return t->n_keys >= FL_SIM_NEVER - 1 ? FL_ERR_INVALID_ARGUMENT : FL_ERR_OUT_OF_MEMORY;
      if (m->seen_in[k] == stamp) {
        t->entry[m->at[k]].count++;
        t->entry[m->at[k]].next = place;
        continue;
      }
      m->seen_in[k] = stamp;
      m->at[k] = end;
      t->entry[end++] = (fl_sim_entry){k, 1, place, 0};
    }
  for (uint64_t e = from; e < end; e++)
    if (t->entry[e].key >= keys_before) t->first_use += t->entry[e].count;
  qsort(t->entry + from, end - from, sizeof *t->entry, by_count);
  t->lookups += n;
  t->n_entries = end;
  t->first[++t->n_batches] = end;
  return FL_OK;
}

fl_status fl_sim_trace_end(fl_sim_trace *t) {
  uint32_t *next = malloc((t->n_keys ? t->n_keys : 1) * sizeof *next);
  uint32_t *count = calloc(t->n_keys ? t->n_keys : 1, sizeof *count);
  if (!next || !count) {
    free(next);
    free(count);
    return FL_ERR_OUT_OF_MEMORY;
  }
  memset(next, 0xff, (t->n_keys ? t->n_keys : 1) * sizeof *next); /* FL_SIM_NEVER */
  for (uint64_t b = t->n_batches; b-- > 0;)
    for (uint64_t e = t->first[b]; e < t->first[b + 1]; e++) {
      fl_sim_entry *x = &t->entry[e];
      x->next = next[x->key];
      x->next_count = count[x->key];
      next[x->key] = (uint32_t)b;
      count[x->key] = x->count;
    }
  free(next);
  free(count);
  keymap_free(t->map);
  t->map = NULL;
  return FL_OK;
}

fl_status fl_sim_trace_read(fl_trace *src, uint64_t max_batches, fl_sim_trace *t) {
  fl_trace_batch b = {0};
  fl_status s = fl_sim_trace_begin(t);
  if (s == FL_OK) s = fl_trace_rewind(src);
  int got = 1;
  while (s == FL_OK && (max_batches == 0 || t->n_batches < max_batches)) {
    s = fl_trace_next(src, &b, &got);
    if (s != FL_OK) {
      fprintf(stderr, "error: %s: %s\n", fl_status_name(s), fl_trace_last_error(src));
      break;
    }
    if (!got) break;
    s = fl_sim_trace_add(t, &b);
    if (s != FL_OK)
      fprintf(stderr, "error: loading the trace: %s\n",
              s == FL_ERR_OUT_OF_MEMORY ? "out of memory" : "over 2^32 - 2 batches or keys");
  }
  fl_trace_batch_free(&b);
  if (s == FL_OK) s = fl_sim_trace_end(t);
  if (s == FL_OK) s = fl_trace_rewind(src);
  return s;
}
