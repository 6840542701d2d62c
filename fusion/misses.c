/* misses.c: the host side of miss handling, shared by both engines: grouping
 * the misses by query, fetching them from the store, and planning which of
 * them enter the cache (dedup, the admission coin, generation checks against
 * concurrent store updates, eviction, slot allocation). */
#include <stdlib.h>
#include <string.h>

#include "cache/admission.h"
#include "common/error.h"
#include "dram_store/store_internal.h"
#include "fusion/query.h"

static uint64_t align16(uint64_t x) { return (x + 15u) & ~15ull; }

fl_status fl_misses_group(const fl_part_batch *b, const uint32_t *pos, const uint64_t *ids,
                          uint64_t n, fl_misses *m) {
  memset(m, 0, sizeof *m);
  m->n = n;
  m->per_arg = calloc(b->n_args ? b->n_args : 1, sizeof *m->per_arg);
  uint64_t *next = calloc(b->n_args ? b->n_args : 1, sizeof *next);
  uint64_t *offsets = calloc(b->n_args + 1, sizeof *offsets);
  uint32_t *arg_of = malloc((n ? n : 1) * sizeof *arg_of);
  m->pos = malloc((n ? n : 1) * sizeof *m->pos);
  m->ids = malloc((n ? n : 1) * sizeof *m->ids);
  m->arg = malloc((n ? n : 1) * sizeof *m->arg);
  m->src_off = malloc((n ? n : 1) * sizeof *m->src_off);
  fl_status st = FL_OK;
  if (!m->per_arg || !next || !offsets || !arg_of || !m->pos || !m->ids || !m->arg || !m->src_off) {
    st = fl_fail(b->c, FL_ERR_OUT_OF_MEMORY, "out of host memory for %llu misses",
                 (unsigned long long)n);
    goto out;
  }
  for (uint32_t a = 0; a < b->n_args; a++) offsets[a] = b->args[a].key_offset;
  /* Counting sort by arg. */
  for (uint64_t i = 0; i < n; i++) {
    arg_of[i] = fl_batch_find(offsets, b->n_args, pos[i]);
    m->per_arg[arg_of[i]]++;
  }
  uint64_t start = 0, bytes = 0;
  for (uint32_t a = 0; a < b->n_args; a++) {
    next[a] = start;
    start += m->per_arg[a];
  }
  uint64_t *arg_base = offsets; /* reuse: staging byte offset of each arg's rows */
  for (uint32_t a = 0; a < b->n_args; a++) {
    arg_base[a] = bytes;
    bytes = align16(bytes + m->per_arg[a] * b->args[a].vec_bytes);
  }
  m->staging_bytes = bytes;
  for (uint64_t i = 0; i < n; i++) {
    uint32_t a = arg_of[i];
    uint64_t r = next[a]++;
    m->pos[r] = pos[i];
    m->ids[r] = ids[i];
    m->arg[r] = a;
  }
  uint64_t r = 0;
  for (uint32_t a = 0; a < b->n_args; a++)
    for (uint64_t k = 0; k < m->per_arg[a]; k++, r++)
      m->src_off[r] = arg_base[a] + k * b->args[a].vec_bytes;
out:
  free(next);
  free(offsets);
  free(arg_of);
  if (st != FL_OK) fl_misses_free(m);
  return st;
}

void fl_misses_free(fl_misses *m) {
  free(m->pos);
  free(m->ids);
  free(m->arg);
  free(m->src_off);
  free(m->per_arg);
  memset(m, 0, sizeof *m);
}

fl_status fl_misses_fetch(const fl_part_batch *b, const fl_misses *m, uint8_t *staging,
                          uint64_t *gen) {
  fl_cache *c = b->c;
  for (uint32_t t = 0; t < c->n_tables; t++) gen[t] = __atomic_load_n(&c->generation[t], __ATOMIC_ACQUIRE);
  if (m->n == 0) return FL_OK;
  fl_table_query *q = malloc(b->n_args * sizeof *q);
  if (!q) return fl_fail(c, FL_ERR_OUT_OF_MEMORY, "out of host memory");
  uint32_t nq = 0;
  uint64_t r = 0;
  for (uint32_t a = 0; a < b->n_args; a++) {
    if (m->per_arg[a]) {
      q[nq].table = b->args[a].table;
      q[nq].ids = m->ids + r;
      q[nq].n = m->per_arg[a];
      q[nq].out = staging + m->src_off[r];
      nq++;
    }
    r += m->per_arg[a];
  }
  fl_status st = fl_store_gather(c->store, q, nq, c->cfg.missing, NULL);
  if (st != FL_OK) fl_fail(c, st, "%s", fl_store_last_error(c->store));
  free(q);
  return st;
}

/* Open-addressing set of keys seen in this batch (dedup before admission). */
static int seen_insert(uint64_t *set, uint64_t cap, uint64_t key) {
  uint64_t i = fl_mix64(key) & (cap - 1);
  /* key + 1 so that 0 marks an empty entry (keys never reach ~0). */
  for (;; i = (i + 1) & (cap - 1)) {
    if (set[i] == key + 1) return 0;
    if (set[i] == 0) {
      set[i] = key + 1;
      return 1;
    }
  }
}

fl_status fl_admit_plan_make(const fl_part_batch *b, const fl_misses *m, const uint64_t *gen,
                             fl_admit_plan *plan) {
  fl_cache *c = b->c;
  fl_part *p = &c->parts[b->part];
  memset(plan, 0, sizeof *plan);
  if (m->n == 0 || c->admit_threshold == 0) return FL_OK;
  uint64_t cap = 16;
  while (cap < 2 * m->n) cap *= 2;
  uint64_t *set = calloc(cap, sizeof *set);
  plan->keys = malloc(m->n * sizeof *plan->keys);
  plan->slots = malloc(m->n * sizeof *plan->slots);
  plan->src_off = malloc(m->n * sizeof *plan->src_off);
  plan->row_bytes = malloc(m->n * sizeof *plan->row_bytes);
  plan->table = malloc(m->n * sizeof *plan->table);
  if (!set || !plan->keys || !plan->slots || !plan->src_off || !plan->row_bytes || !plan->table) {
    free(set);
    fl_admit_plan_free(plan);
    return fl_fail(c, FL_ERR_OUT_OF_MEMORY, "out of host memory planning admissions");
  }
  fl_status st = fl_cache_make_room(c, b->part, 0);
  int starved = 0;
  for (uint64_t r = 0; r < m->n && st == FL_OK; r++) {
    const fl_batch_arg *a = &b->args[m->arg[r]];
    const fl_table_info *ti = &c->tables[a->table];
    uint64_t key;
    if (fl_code_encode(&ti->code, c->cfg.key_bits, m->ids[r], &key) != 0) continue;
    if (!fl_admit(c->cfg.seed, b->now, key, c->admit_threshold)) continue;
    /* The store changed this table since the fetch: the row may be stale. */
    if (c->generation[a->table] != gen[a->table]) continue;
    if (!seen_insert(set, cap, key)) continue;
    uint64_t slot = fl_pool_alloc(&p->pool, ti->cls);
    if (slot == 0) { /* class full: evict below, reclaimed for later batches */
      starved = 1;
      continue;
    }
    uint64_t k = plan->n++;
    plan->keys[k] = key;
    plan->slots[k] = slot;
    plan->src_off[k] = m->src_off[r];
    plan->row_bytes[k] = a->vec_bytes;
    plan->table[k] = a->table;
  }
  free(set);
  if (st == FL_OK && starved) st = fl_cache_make_room(c, b->part, 1);
  return st;
}

void fl_admit_plan_finish(const fl_part_batch *b, fl_admit_plan *plan, const uint8_t *result) {
  fl_cache *c = b->c;
  fl_part *p = &c->parts[b->part];
  uint64_t done = 0;
  for (uint64_t k = 0; k < plan->n; k++) {
    if (result[k] == FL_INSERT_DONE)
      done++;
    else
      fl_pool_free(&p->pool, plan->slots[k]); /* never published: free at once */
  }
  p->entries += done;
  atomic_fetch_add(&c->admissions, done);
}

void fl_admit_plan_free(fl_admit_plan *plan) {
  free(plan->keys);
  free(plan->slots);
  free(plan->src_off);
  free(plan->row_bytes);
  free(plan->table);
  memset(plan, 0, sizeof *plan);
}

void fl_query_count(const fl_part_batch *b, const fl_misses *m) {
  fl_cache *c = b->c;
  for (uint32_t a = 0; a < b->n_args; a++) {
    fl_table_counters *k = &c->counters[b->args[a].table];
    uint64_t misses = m ? m->per_arg[a] : 0;
    atomic_fetch_add_explicit(&k->lookups, b->args[a].n, memory_order_relaxed);
    atomic_fetch_add_explicit(&k->misses, misses, memory_order_relaxed);
    atomic_fetch_add_explicit(&k->hits, b->args[a].n - misses, memory_order_relaxed);
  }
}

fl_status fl_query_range_error(const fl_part_batch *b, uint64_t pos, uint64_t id) {
  uint64_t offsets_hit = 0;
  uint32_t a = 0;
  while (a + 1 < b->n_args && b->args[a + 1].key_offset <= pos) a++;
  offsets_hit = pos - b->args[a].key_offset;
  const fl_table_desc *d = fl_store_desc(b->c->store, b->args[a].table);
  return fl_fail(b->c, FL_ERR_OUT_OF_RANGE,
                 "query %u, table %u ('%s'): id %llu at position %llu is out of range "
                 "(corpus size %llu)",
                 b->query_of[a], b->args[a].table, d->name, (unsigned long long)id,
                 (unsigned long long)offsets_hit, (unsigned long long)d->corpus_size);
}
