/* misses.c: the host side of miss handling, shared by both engines: grouping
 * the misses and unified-index hits by query, fetching them from the store
 * (pointers through their references), and planning what enters the index
 * (dedup, the admission coin, generation checks against concurrent store
 * updates, eviction, slot allocation, promotion, new pointers). */
#include <stdlib.h>
#include <string.h>

#include "cache/admission.h"
#include "common/error.h"
#include "dram_store/store_internal.h"
#include "fusion/query.h"

static uint64_t align16(uint64_t x) { return (x + 15u) & ~15ull; }

fl_status fl_misses_group(const fl_part_batch *b, const uint32_t *pos, const uint64_t *ids,
                          const uint64_t *refs, uint64_t n, fl_misses *m) {
  memset(m, 0, sizeof *m);
  m->n = n;
  size_t na = b->n_args ? b->n_args : 1, nn = n ? n : 1;
  m->per_arg = calloc(na, sizeof *m->per_arg);
  m->dram_per_arg = calloc(na, sizeof *m->dram_per_arg);
  uint64_t *next = calloc(2 * na, sizeof *next); /* per (arg, pointer-or-miss) */
  uint64_t *offsets = calloc(na + 1, sizeof *offsets);
  uint32_t *arg_of = malloc(nn * sizeof *arg_of);
  m->pos = malloc(nn * sizeof *m->pos);
  m->ids = malloc(nn * sizeof *m->ids);
  m->refs = malloc(nn * sizeof *m->refs);
  m->arg = malloc(nn * sizeof *m->arg);
  m->src_off = malloc(nn * sizeof *m->src_off);
  fl_status st = FL_OK;
  if (!m->per_arg || !m->dram_per_arg || !next || !offsets || !arg_of || !m->pos || !m->ids ||
      !m->refs || !m->arg || !m->src_off) {
    st = fl_fail(b->c, FL_ERR_OUT_OF_MEMORY, "out of host memory for %llu misses",
                 (unsigned long long)n);
    goto out;
  }
  for (uint32_t a = 0; a < b->n_args; a++) offsets[a] = b->args[a].key_offset;
  /* Counting sort by (arg, miss): pointers, then misses, per arg. */
  for (uint64_t i = 0; i < n; i++) {
    arg_of[i] = fl_batch_find(offsets, b->n_args, pos[i]);
    m->per_arg[arg_of[i]]++;
    if (refs[i]) m->dram_per_arg[arg_of[i]]++;
  }
  uint64_t start = 0, bytes = 0;
  for (uint32_t a = 0; a < b->n_args; a++) {
    next[2 * a] = start;
    next[2 * a + 1] = start + m->dram_per_arg[a];
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
    uint64_t r = next[2 * a + (refs[i] == 0)]++;
    m->pos[r] = pos[i];
    m->ids[r] = ids[i];
    m->refs[r] = refs[i];
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
  free(m->refs);
  free(m->arg);
  free(m->src_off);
  free(m->per_arg);
  free(m->dram_per_arg);
  memset(m, 0, sizeof *m);
}

fl_status fl_misses_fetch(const fl_part_batch *b, const fl_misses *m, uint8_t *staging,
                          uint64_t *gen) {
  fl_cache *c = b->c;
  for (uint32_t t = 0; t < c->n_tables; t++)
    gen[t] = __atomic_load_n(&c->generation[t], __ATOMIC_ACQUIRE);
  if (m->n == 0) return FL_OK;
  /* Per arg: its pointers through the references, its misses by id. */
  fl_table_query *q = malloc(b->n_args * sizeof *q);
  fl_ref_query *rq = malloc(b->n_args * sizeof *rq);
  if (!q || !rq) {
    free(q);
    free(rq);
    return fl_fail(c, FL_ERR_OUT_OF_MEMORY, "out of host memory");
  }
  uint32_t nq = 0, nr = 0;
  uint64_t r = 0;
  for (uint32_t a = 0; a < b->n_args; a++) {
    uint64_t d = m->dram_per_arg[a], rest = m->per_arg[a] - d;
    if (d) rq[nr++] = (fl_ref_query){b->args[a].table, m->ids + r, m->refs + r, d, staging + m->src_off[r]};
    if (rest)
      q[nq++] = (fl_table_query){b->args[a].table, m->ids + r + d, rest, staging + m->src_off[r + d]};
    r += m->per_arg[a];
  }
  fl_status st = nq ? fl_store_gather(c->store, q, nq, c->cfg.missing, NULL) : FL_OK;
  if (st == FL_OK && nr) st = fl_store_gather_refs(c->store, rq, nr, c->cfg.missing, NULL);
  if (st != FL_OK) fl_fail(c, st, "%s", fl_store_last_error(c->store));
  free(q);
  free(rq);
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

/* Appends one planned entry. */
static void plan_add(fl_admit_plan *plan, uint64_t key, uint64_t slot, uint64_t src_off,
                     uint32_t row_bytes) {
  uint64_t k = plan->n++;
  plan->keys[k] = key;
  plan->slots[k] = slot;
  plan->src_off[k] = src_off;
  plan->row_bytes[k] = row_bytes;
}

/* Publishes unified-index pointers for the rows listed in cand (misses that
 * did not enter the cache, in arg order), up to `room`. */
static fl_status plan_pointers(const fl_part_batch *b, const fl_misses *m, const uint64_t *cand,
                               const uint64_t *cand_key, uint64_t n_cand, uint64_t room,
                               fl_admit_plan *plan) {
  fl_cache *c = b->c;
  if (n_cand > room) n_cand = room;
  uint64_t *ids = malloc((n_cand ? n_cand : 1) * sizeof *ids);
  uint64_t *refs = malloc((n_cand ? n_cand : 1) * sizeof *refs);
  fl_status st = ids && refs ? FL_OK : fl_fail(c, FL_ERR_OUT_OF_MEMORY, "out of host memory");
  for (uint64_t i = 0; i < n_cand && st == FL_OK;) {
    /* One fl_store_refs call per table run. */
    uint32_t arg = m->arg[cand[i]];
    uint64_t j = i;
    while (j < n_cand && m->arg[cand[j]] == arg) ids[j - i] = m->ids[cand[j]], j++;
    st = fl_store_refs(c->store, b->args[arg].table, ids, j - i, refs);
    if (st != FL_OK) fl_fail(c, st, "%s", fl_store_last_error(c->store));
    for (uint64_t k = i; k < j && st == FL_OK; k++)
      if (refs[k - i]) plan_add(plan, cand_key[k], refs[k - i] | FL_LOC_DRAM_BIT, 0, 0);
    i = j;
  }
  free(ids);
  free(refs);
  return st;
}

fl_status fl_admit_plan_make(const fl_part_batch *b, const fl_misses *m, const uint64_t *gen,
                             fl_admit_plan *plan) {
  fl_cache *c = b->c;
  fl_part *p = &c->parts[b->part];
  memset(plan, 0, sizeof *plan);
  uint64_t limit = fl_cache_unified_limit(c, b->part);
  if (m->n == 0 || (c->admit_threshold == 0 && limit == 0)) return FL_OK;
  uint64_t cap = 16;
  while (cap < 2 * m->n) cap *= 2;
  uint64_t *set = calloc(cap, sizeof *set);
  uint64_t *cand = malloc(m->n * sizeof *cand), *cand_key = malloc(m->n * sizeof *cand_key);
  plan->keys = malloc(m->n * sizeof *plan->keys);
  plan->slots = malloc(m->n * sizeof *plan->slots);
  plan->src_off = malloc(m->n * sizeof *plan->src_off);
  plan->row_bytes = malloc(m->n * sizeof *plan->row_bytes);
  fl_status st = FL_OK;
  if (!set || !cand || !cand_key || !plan->keys || !plan->slots || !plan->src_off ||
      !plan->row_bytes) {
    st = fl_fail(c, FL_ERR_OUT_OF_MEMORY, "out of host memory planning admissions");
    goto out;
  }
  st = fl_cache_make_room(c, b->part, 0);
  int starved = 0;
  uint64_t n_cand = 0;
  for (uint64_t r = 0; r < m->n && st == FL_OK; r++) {
    const fl_batch_arg *a = &b->args[m->arg[r]];
    const fl_table_info *ti = &c->tables[a->table];
    uint64_t key;
    if (fl_code_encode(&ti->code, c->cfg.key_bits, m->ids[r], &key) != 0) continue;
    /* The store changed this table since the fetch: the row may be stale. */
    if (c->generation[a->table] != gen[a->table]) continue;
    /* The coin first: with no unified index, a key it rejects needs no dedup. */
    int admit = fl_admit(c->cfg.seed, b->now, key, c->admit_threshold);
    if (!admit && (limit == 0 || m->refs[r])) continue;
    if (!seen_insert(set, cap, key)) continue;
    if (!admit) {
      cand[n_cand] = r, cand_key[n_cand++] = key;
      continue;
    }
    uint64_t slot = fl_pool_alloc(&p->pool, ti->cls);
    if (slot == 0) { /* class full: evict below, reclaimed for later batches */
      starved = 1;
      if (!m->refs[r]) cand[n_cand] = r, cand_key[n_cand++] = key;
      continue;
    }
    plan_add(plan, key, slot, m->src_off[r], a->vec_bytes);
  }
  uint64_t room = limit > p->dram_entries ? limit - p->dram_entries : 0;
  if (st == FL_OK && room && n_cand) st = plan_pointers(b, m, cand, cand_key, n_cand, room, plan);
  if (st == FL_OK && starved) st = fl_cache_make_room(c, b->part, 1);
out:
  free(set);
  free(cand);
  free(cand_key);
  if (st != FL_OK) fl_admit_plan_abandon(b, plan);
  return st;
}

void fl_admit_plan_finish(const fl_part_batch *b, fl_admit_plan *plan, const uint8_t *result) {
  fl_cache *c = b->c;
  fl_part *p = &c->parts[b->part];
  uint64_t cached = 0;
  for (uint64_t k = 0; k < plan->n; k++) {
    int pointer = (plan->slots[k] & FL_LOC_DRAM_BIT) != 0;
    if (result[k] == FL_INSERT_DONE && pointer) {
      p->dram_entries++;
    } else if (result[k] == FL_INSERT_DONE || result[k] == FL_INSERT_PROMOTED) {
      cached++;
      if (result[k] == FL_INSERT_PROMOTED) p->dram_entries--;
    } else if (!pointer) {
      fl_pool_free(&p->pool, plan->slots[k]); /* never published: free at once */
    }
  }
  p->entries += cached;
  atomic_fetch_add(&c->admissions, cached);
}

void fl_admit_plan_abandon(const fl_part_batch *b, fl_admit_plan *plan) {
  for (uint64_t k = 0; k < plan->n; k++)
    if (!(plan->slots[k] & FL_LOC_DRAM_BIT)) fl_pool_free(&b->c->parts[b->part].pool, plan->slots[k]);
  fl_admit_plan_free(plan);
}

void fl_admit_plan_undo(const fl_part_batch *b, fl_admit_plan *plan) {
  fl_cache *c = b->c;
  fl_part *p = &c->parts[b->part];
  uint64_t *gone = malloc((plan->n ? plan->n : 1) * sizeof *gone);
  if (!gone || fl_maint_erase(c, p, plan->keys, plan->n, gone) != FL_OK) {
    /* The index is in an unknown state: drop it all (leaking the slabs is
     * safer than freeing slabs a reader may hold). */
    fl_maint_index_reset(c, p);
    free(gone);
    fl_admit_plan_free(plan);
    return;
  }
  for (uint64_t k = 0; k < plan->n; k++) {
    uint64_t was = gone[k], mine = plan->slots[k];
    if (was & FL_LOC_DRAM_BIT) {
      if (was != mine) p->dram_entries--; /* an older pointer, erased with the key */
    } else if (was == mine) {
      fl_reclaim_retire(&c->reclaim, &was, 1, b->part); /* published: readers may hold it */
    }
    if (!(mine & FL_LOC_DRAM_BIT) && was != mine) fl_pool_free(&p->pool, mine);
  }
  free(gone);
  fl_admit_plan_free(plan);
}

void fl_admit_plan_free(fl_admit_plan *plan) {
  free(plan->keys);
  free(plan->slots);
  free(plan->src_off);
  free(plan->row_bytes);
  memset(plan, 0, sizeof *plan);
}

void fl_query_count(const fl_part_batch *b, const fl_misses *m) {
  fl_cache *c = b->c;
  for (uint32_t a = 0; a < b->n_args; a++) {
    fl_table_counters *k = &c->counters[b->args[a].table];
    uint64_t dram = m ? m->dram_per_arg[a] : 0, misses = (m ? m->per_arg[a] : 0) - dram;
    atomic_fetch_add_explicit(&k->lookups, b->args[a].n, memory_order_relaxed);
    atomic_fetch_add_explicit(&k->misses, misses, memory_order_relaxed);
    atomic_fetch_add_explicit(&k->dram_hits, dram, memory_order_relaxed);
    atomic_fetch_add_explicit(&k->hits, b->args[a].n - misses - dram, memory_order_relaxed);
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
