/* cache.c: fl_cache lifecycle: config checks, backend choice, sizing of the
 * index and the slab pool inside the byte budget (one part for the flat layout,
 * one per table for the per-table baseline), statistics, and invalidation from
 * the store's change log. */
#include "cache/cache.h"

#include <stdlib.h>
#include <string.h>

#include "cache/admit_round.h"
#include "common/align.h"
#include "common/courier.h"
#include "common/mutant.h"
#include "common/error.h"
#include "dram_store/store_internal.h"
#include "encoding/encoder.h"
#include "cache/cuda_state.h"

void fl_config_default(fl_config *cfg) {
  memset(cfg, 0, sizeof *cfg);
  cfg->backend = FL_BACKEND_AUTO;
  cfg->layout = FL_LAYOUT_FLAT;
  cfg->key_bits = FL_KEY_BITS_AUTO;
  cfg->encoding = FL_ENCODING_SIZE_AWARE;
  cfg->budget_bytes = 1ull << 30;
  cfg->max_load = 0.6;
  cfg->admit_probability = 0.5;
  cfg->admit_policy = FL_ADMIT_TINYLFU;
  cfg->high_watermark = 0.98;
  cfg->low_watermark = 0.95;
  cfg->seed = 0x5eed;
  cfg->missing = FL_MISSING_ZERO;
  cfg->zero_copy_rows = FL_ZERO_COPY_AUTO;
}

static fl_status check_config(const fl_config *cfg) {
  if (cfg->key_bits != FL_KEY_BITS_AUTO && cfg->key_bits != 32 && cfg->key_bits != 64)
    return fl_fail(NULL, FL_ERR_INVALID_ARGUMENT,
                   "config.key_bits is %u: must be 32, 64 or FL_KEY_BITS_AUTO (0)", cfg->key_bits);
  if (!(cfg->max_load > 0.0 && cfg->max_load <= 0.95))
    return fl_fail(NULL, FL_ERR_INVALID_ARGUMENT, "config.max_load is %g: must be in (0, 0.95]",
                   cfg->max_load);
  if (!(cfg->admit_probability >= 0.0 && cfg->admit_probability <= 1.0))
    return fl_fail(NULL, FL_ERR_INVALID_ARGUMENT,
                   "config.admit_probability is %g: must be in [0, 1]", cfg->admit_probability);
  if (cfg->admit_policy != FL_ADMIT_COIN && cfg->admit_policy != FL_ADMIT_TINYLFU)
    return fl_fail(NULL, FL_ERR_INVALID_ARGUMENT,
                   "config.admit_policy %d is unknown: FL_ADMIT_COIN (0) or FL_ADMIT_TINYLFU (1)",
                   (int)cfg->admit_policy);
  if (!(cfg->low_watermark > 0.0 && cfg->low_watermark < cfg->high_watermark &&
        cfg->high_watermark <= 1.0))
    return fl_fail(NULL, FL_ERR_INVALID_ARGUMENT,
                   "config watermarks out of order: need 0 < low (%g) < high (%g) <= 1",
                   cfg->low_watermark, cfg->high_watermark);
  if (cfg->layout != FL_LAYOUT_FLAT && cfg->layout != FL_LAYOUT_PER_TABLE)
    return fl_fail(NULL, FL_ERR_INVALID_ARGUMENT, "config.layout %d is unknown", (int)cfg->layout);
  if (cfg->missing != FL_MISSING_ZERO && cfg->missing != FL_MISSING_ERROR)
    return fl_fail(NULL, FL_ERR_INVALID_ARGUMENT, "config.missing %d is unknown", (int)cfg->missing);
  return FL_OK;
}

static fl_status resolve_backend(const fl_config *cfg, fl_backend *out) {
  fl_backend b = cfg->backend;
  if (b == FL_BACKEND_AUTO) {
    const char *env = getenv("FL_BACKEND");
    if (env && strcmp(env, "host") == 0) b = FL_BACKEND_HOST;
    else if (env && strcmp(env, "cuda") == 0) b = FL_BACKEND_CUDA;
    else b = fl_cuda_device_count() > 0 ? FL_BACKEND_CUDA : FL_BACKEND_HOST;
  }
  if (b == FL_BACKEND_CUDA && fl_cuda_device_count() <= 0)
    return fl_fail(NULL, FL_ERR_NO_DEVICE, "CUDA backend requested but no CUDA device is usable");
  if (b != FL_BACKEND_HOST && b != FL_BACKEND_CUDA)
    return fl_fail(NULL, FL_ERR_INVALID_ARGUMENT, "config.backend %d is unknown", (int)b);
  *out = b;
  return FL_OK;
}

/* Splits `budget` between one part's index and pool: enough slots that a full
 * pool of vectors of the part's mean size (tables weighted by corpus) stays at
 * max_load. A hot set of smaller vectors fills the index first; inserts then
 * fail within the probe limit rather than slowing lookups. */
static fl_status size_part(fl_cache *c, uint32_t part, uint64_t budget, double mean_slot,
                           uint32_t max_slot) {
  fl_part *p = &c->parts[part];
  uint64_t ib = fl_cache_slot_bytes(c);
  double per_slot = c->fixed.cfg.max_load * mean_slot + (double)ib;
  uint64_t slots = (uint64_t)((double)budget / per_slot) + 1;
  uint64_t index_bytes = fl_align_up(slots * ib, 256);
  if (index_bytes + max_slot > budget)
    return fl_fail(NULL, FL_ERR_INVALID_ARGUMENT,
                   "config.budget_bytes too small: part %u gets %llu bytes, less than its index "
                   "(%llu bytes) plus one %u-byte slab slot",
                   part, (unsigned long long)budget, (unsigned long long)index_bytes, max_slot);
  p->slots = slots;
  p->index_bytes = index_bytes;
  p->pool_bytes = budget - index_bytes;
  return FL_OK;
}

/* Per-table baseline: every table first gets a minimum part (a small index
 * and two slab slots); the rest of the budget goes out in proportion to each
 * table's corpus bytes, capped at what caching all of it would take, with
 * what the caps free going to the others. */
static void split_per_table(fl_cache *c, uint64_t *share) {
  uint64_t ib = fl_cache_slot_bytes(c);
  double *need = calloc(c->fixed.n_tables, sizeof *need);
  int *capped = calloc(c->fixed.n_tables, sizeof *capped);
  double left = (double)c->fixed.cfg.budget_bytes;
  for (uint32_t t = 0; t < c->fixed.n_tables; t++) {
    const fl_table_desc *d = fl_store_desc(c->fixed.store, t);
    uint32_t s = (uint32_t)fl_align_up(c->fixed.tables[t].vec_bytes, 16);
    need[t] = (double)d->corpus_size * (s + ib / c->fixed.cfg.max_load) + 512.0 + 2.0 * s;
    share[t] = 512u + 2u * s;
    left -= (double)share[t];
  }
  for (int round = 0; round < 4 && left > 0; round++) {
    double weight = 0;
    for (uint32_t t = 0; t < c->fixed.n_tables; t++)
      if (!capped[t]) weight += need[t];
    if (weight <= 0) break;
    double give = left;
    for (uint32_t t = 0; t < c->fixed.n_tables; t++) {
      if (capped[t]) continue;
      double s = give * need[t] / weight;
      if ((double)share[t] + s >= need[t]) {
        left -= need[t] - (double)share[t];
        share[t] = (uint64_t)need[t];
        capped[t] = 1;
      } else {
        share[t] += (uint64_t)s;
        left -= s;
      }
    }
  }
  free(need);
  free(capped);
}

static fl_status alloc_parts(fl_cache *c) {
  fl_status st = FL_OK;
  uint32_t n_parts = c->fixed.cfg.layout == FL_LAYOUT_FLAT ? 1 : c->fixed.n_tables;
  c->parts = calloc(n_parts, sizeof *c->parts);
  if (!c->parts) return fl_fail(NULL, FL_ERR_OUT_OF_MEMORY, "out of host memory for cache parts");
  c->fixed.n_parts = n_parts;
  uint64_t *share = calloc(n_parts, sizeof *share);
  if (!share) return fl_fail(NULL, FL_ERR_OUT_OF_MEMORY, "out of host memory");
  if (n_parts == 1)
    share[0] = c->fixed.cfg.budget_bytes;
  else
    split_per_table(c, share);
  /* Slab classes: one per distinct rounded vector size within a part. */
  uint32_t *sizes = calloc(c->fixed.n_tables, sizeof *sizes);
  if (!sizes) {
    free(share);
    return fl_fail(NULL, FL_ERR_OUT_OF_MEMORY, "out of host memory");
  }
  for (uint32_t part = 0; part < n_parts; part++) {
    uint32_t n_cls = 0, max_slot = 0;
    double rows = 0, bytes = 0;
    for (uint32_t t = 0; t < c->fixed.n_tables; t++) {
      if (c->fixed.tables[t].part != part) continue;
      uint32_t s = (uint32_t)fl_align_up(c->fixed.tables[t].vec_bytes, 16);
      uint32_t k = 0;
      while (k < n_cls && sizes[k] != s) k++;
      if (k == n_cls) sizes[n_cls++] = s;
      c->fixed.tables[t].cls = k;
      double corpus = (double)fl_store_desc(c->fixed.store, t)->corpus_size + 1.0;
      rows += corpus;
      bytes += corpus * s;
      if (s > max_slot) max_slot = s;
    }
    fl_part *p = &c->parts[part];
    st = size_part(c, part, share[part], bytes / rows, max_slot);
    if (st == FL_OK) st = fl_cache_mem_alloc(c, p->index_bytes, &p->index_mem);
    if (st == FL_OK) st = fl_cache_mem_alloc(c, p->pool_bytes, &p->pool_mem);
    if (st == FL_OK && fl_pool_init(&p->pool, (uint64_t)(uintptr_t)p->pool_mem, p->pool_bytes,
                                     sizes, n_cls) != 0)
      st = fl_fail(NULL, FL_ERR_OUT_OF_MEMORY, "out of host memory for the slab pool");
    if (st != FL_OK) break;
    p->index.slots = p->slots;
    p->index.key_bits = c->fixed.cfg.key_bits;
    p->index.loc_bits = c->fixed.loc_bits;
    p->index.loc_base = (uint64_t)(uintptr_t)p->pool_mem;
    fl_index_place(&p->index, p->index_mem);
    st = fl_maint_index_reset(c, p);
    if (st == FL_OK) st = fl_freq_create(c, p, bytes / rows);
    if (st == FL_OK && c->fixed.backend == FL_BACKEND_CUDA) st = fl_round_create(c, part);
    if (st != FL_OK) break;
  }
  free(sizes);
  free(share);
  return st;
}

static fl_status clear_part(fl_cache *c, uint32_t p);

/* Store change log: drop the changed keys so the cache never serves a stale
 * vector, and bump the table's generation so that a query which fetched the
 * old value before this change does not admit it afterwards. */
static void on_store_change(void *ctx, uint32_t table, const uint64_t *ids, size_t n) {
  fl_cache *c = ctx;
  if (FL_MUTANT_ON(2) && ids) return;
  const fl_table_info *ti = &c->fixed.tables[table];
  uint64_t *keys = ids ? malloc((n ? n : 1) * 2 * sizeof *keys) : NULL;
  pthread_mutex_lock(&c->lock);
  __atomic_add_fetch(&c->generation[table], 1, __ATOMIC_RELEASE);
  /* Counts first: the erase below may remove entries a round just admitted.
   * (A failed round is reported to its query; the erase goes on.) */
  fl_round_settle_all(c, 1, 0);
  if (!ids) {
    /* The whole table changed (a synthetic fill, a load): drop its part. */
    if (clear_part(c, ti->part) != FL_OK) fl_maint_index_reset(c, &c->parts[ti->part]);
    pthread_mutex_unlock(&c->lock);
    return;
  }
  if (!keys) {
    /* No memory to name the keys: drop everything rather than serve stale. */
    for (uint32_t p = 0; p < c->fixed.n_parts; p++) fl_maint_index_reset(c, &c->parts[p]);
    pthread_mutex_unlock(&c->lock);
    return;
  }
  uint64_t *locs = keys + n, m = 0;
  for (size_t i = 0; i < n; i++)
    if (fl_code_encode(&ti->code, c->fixed.cfg.key_bits, ids[i], &keys[m]) == 0) m++;
  fl_part *p = &c->parts[ti->part];
  if (fl_maint_erase(c, p, keys, m, locs) == FL_OK) {
    uint64_t k = 0;
    for (uint64_t i = 0; i < m; i++) {
      if (locs[i] == FL_LOC_NONE) continue;
      if (locs[i] & FL_LOC_DRAM_BIT)
        p->dram_entries--; /* the row may be gone: nothing to reclaim */
      else
        locs[k++] = locs[i];
    }
    if (k) {
      p->entries -= k;
      fl_cache_add(c, FL_STAT_INVALIDATIONS, k);
      if (fl_reclaim_retire(&c->reclaim, locs, k, ti->part) != 0) {
        /* Cannot track them: leak the slabs rather than risk reuse. */
      }
    }
  } else {
    fl_maint_index_reset(c, p);
  }
  pthread_mutex_unlock(&c->lock);
  free(keys);
}

/* The flat keys' encoding. FL_KEY_BITS_AUTO takes 32-bit keys when they
 * encode every table losslessly (the same answers as 64-bit keys, with a
 * smaller index: more vectors in the same budget), else 64. */
static fl_status make_encoding(const fl_table_desc *descs, uint32_t n, const fl_config *cfg,
                               fl_encoding **out) {
  if (cfg->key_bits != FL_KEY_BITS_AUTO)
    return fl_encoding_create(descs, n, cfg->key_bits, cfg->encoding, out);
  fl_status st = fl_encoding_create(descs, n, 32, cfg->encoding, out);
  if (st == FL_OK && (fl_encoding_lossless(*out) || FL_MUTANT_ON(15))) return FL_OK;
  fl_encoding_destroy(*out);
  *out = NULL;
  return fl_encoding_create(descs, n, 64, cfg->encoding, out);
}

/* 32-bit locations (cache/index.h) when the cache has no unified-index
 * pointers and every pool is within their reach. */
static uint32_t index_loc_bits(const fl_config *cfg) {
  return (cfg->unified_entries == 0 || FL_MUTANT_ON(16)) && cfg->budget_bytes <= FL_LOC32_MAX_POOL
             ? 32
             : 64;
}

fl_status fl_cache_new(fl_store *store, const fl_config *cfg, fl_cache **out) {
  if (!store || !cfg || !out)
    return fl_fail(NULL, FL_ERR_INVALID_ARGUMENT, "fl_cache_create: store, cfg and out must be non-NULL");
  *out = NULL;
  fl_status st = check_config(cfg);
  if (st != FL_OK) return st;
  fl_backend backend = FL_BACKEND_HOST;
  if ((st = resolve_backend(cfg, &backend)) != FL_OK) return st;
  uint32_t n = fl_store_num_tables(store);
  fl_table_desc *descs = calloc(n ? n : 1, sizeof *descs);
  fl_cache *c = calloc(1, sizeof *c);
  if (!descs || !c) {
    free(descs);
    free(c);
    return fl_fail(NULL, FL_ERR_OUT_OF_MEMORY, "out of host memory");
  }
  /* Steps that report on c (maintenance, rounds) fail under the caller's
   * NULL handle: see the end. */
  fl_error_clear(c);
  c->fixed.cfg = *cfg;
  c->fixed.backend = backend;
  c->fixed.store = store;
  c->fixed.n_tables = n;
  c->subscription = -1;
  pthread_mutex_init(&c->lock, NULL);
  fl_reclaim_init(&c->reclaim);
  c->rule = (fl_admit_rule){.policy = cfg->admit_policy,
                            .seed = cfg->seed,
                            .threshold = fl_admit_threshold(cfg->admit_probability)};
  for (uint32_t t = 0; t < n; t++) descs[t] = *fl_store_desc(store, t);
  st = make_encoding(descs, n, cfg, &c->encoding);
  if (st != FL_OK) {
    free(descs);
    fl_cache_destroy(c);
    return st;
  }
  c->fixed.tables = calloc(n, sizeof *c->fixed.tables);
  c->generation = calloc(n, sizeof *c->generation);
  c->counters = calloc(n, sizeof *c->counters);
  /* CUDA: the caller fetches with the store's own pool; the courier
   * admits. */
  if (backend == FL_BACKEND_CUDA) {
    c->courier = fl_courier_create("fl-admit", 0);
    c->fixed.answerer = fl_courier_create("fl-answer", FL_ANSWER_SPIN_NS);
  } else {
    c->fixed.workers = fl_workers_create("fl-cache", cfg->host_threads);
  }
  int threads = backend == FL_BACKEND_CUDA ? c->courier && c->fixed.answerer : c->fixed.workers != NULL;
  if (!c->fixed.tables || !c->generation || !c->counters || !threads) {
    free(descs);
    fl_cache_destroy(c);
    return fl_fail(NULL, FL_ERR_OUT_OF_MEMORY, "out of host memory");
  }
  c->fixed.cfg.key_bits = fl_encoding_key_bits(c->encoding);
  c->fixed.loc_bits = index_loc_bits(cfg);
  const fl_code *codes = fl_encoding_codes(c->encoding);
  for (uint32_t t = 0; t < n; t++) {
    fl_table_info *ti = &c->fixed.tables[t];
    ti->code = codes[t];
    ti->part = cfg->layout == FL_LAYOUT_FLAT ? 0 : t;
    ti->dim = descs[t].dim;
    ti->vec_bytes = descs[t].dim * (descs[t].dtype == FL_FP16 ? 2u : 4u);
    ti->id_kind = descs[t].id_kind;
  }
  free(descs);
  if (backend == FL_BACKEND_CUDA) st = fl_cuda_state_create(c);
  if (st == FL_OK) st = alloc_parts(c);
  if (st == FL_OK) {
    c->subscription = fl_store_subscribe(store, on_store_change, c);
    if (c->subscription < 0) st = fl_fail(NULL, FL_ERR_OUT_OF_MEMORY, "out of host memory");
  }
  if (st != FL_OK) {
    if (*fl_error_get(c)) fl_error_forward(c, NULL);
    fl_cache_destroy(c);
    return st;
  }
  *out = c;
  return FL_OK;
}

void fl_cache_destroy(fl_cache *c) {
  if (!c) return;
  if (c->subscription >= 0) fl_store_unsubscribe(c->fixed.store, c->subscription);
  fl_courier_destroy(c->fixed.answerer); /* its answers post rounds */
  fl_courier_destroy(c->courier); /* the last round launched */
  if (c->fixed.cuda) fl_cuda_state_sync(c);
  for (uint32_t p = 0; c->parts && p < c->fixed.n_parts; p++) {
    fl_round_destroy(c, p);
    fl_freq_destroy(c, &c->parts[p]);
    fl_pool_destroy(&c->parts[p].pool);
    fl_cache_mem_free(c, c->parts[p].index_mem);
    fl_cache_mem_free(c, c->parts[p].pool_mem);
  }
  if (c->fixed.cuda) fl_cuda_state_destroy(c);
  fl_reclaim_destroy(&c->reclaim);
  fl_workers_destroy(c->fixed.workers);
  fl_encoding_destroy(c->encoding);
  pthread_mutex_destroy(&c->lock);
  free(c->parts);
  free(c->fixed.tables);
  free(c->generation);
  free(c->counters);
  free(c);
}

const char *fl_cache_last_error(const fl_cache *c) { return fl_error_get(c); }

fl_backend fl_cache_backend(const fl_cache *c) { return c ? c->fixed.backend : FL_BACKEND_AUTO; }

/* CUDA: waits until every query's admission round that the courier holds is
 * launched, after the answerer has handed over those of launched prepared
 * queries. Not under the lock. */
static void rounds_launched(fl_cache *c) {
  if (c->fixed.answerer) fl_courier_idle(c->fixed.answerer);
  if (c->courier) fl_courier_idle(c->courier);
}

/* Tombstones every entry of part `p` and retires the slabs; frees its limbo
 * (its round settled); TinyLFU's victim goes back to a new cache's. Under
 * c->lock. */
static fl_status clear_part(fl_cache *c, uint32_t p) {
  fl_part *part = &c->parts[p];
  uint64_t *locs = malloc((part->slots ? part->slots : 1) * sizeof *locs), n = 0;
  if (!locs) return fl_fail(c, FL_ERR_OUT_OF_MEMORY, "out of host memory clearing part %u", p);
  /* Evicting every age bucket with an unlimited quota takes all entries. */
  uint32_t now = (uint32_t)__atomic_load_n(&c->batch, __ATOMIC_RELAXED);
  fl_status st = fl_maint_evict(c, part, FL_ENTRY_DRAM, now, 0, ~0ull, locs, &n);
  if (st == FL_OK) part->dram_entries = 0;
  if (st == FL_OK) st = fl_maint_evict(c, part, FL_ENTRY_CACHED, now, 0, ~0ull, locs, &n);
  if (st == FL_OK) st = fl_cache_retire_removed(c, p, FL_ENTRY_CACHED, locs, n, 0);
  if (st == FL_OK) st = fl_freq_reset_victim(c, part);
  free(locs);
  /* The last rounds' evicted slabs too, rather than at the next round. */
  if (st == FL_OK) fl_round_release_limbo(c, p);
  return st;
}

fl_status fl_cache_clear(fl_cache *c) {
  if (!c) return fl_fail(NULL, FL_ERR_INVALID_ARGUMENT, "fl_cache_clear: cache is NULL");
  rounds_launched(c); /* a round of a query that returned before the clear is cleared too */
  pthread_mutex_lock(&c->lock);
  /* An earlier round's failure is reported, and the clear goes on. */
  fl_status st = fl_round_settle_all(c, 1, 1), cleared = FL_OK;
  for (uint32_t p = 0; p < c->fixed.n_parts && cleared == FL_OK; p++) cleared = clear_part(c, p);
  fl_cache_collect(c);
  pthread_mutex_unlock(&c->lock);
  return st != FL_OK ? st : cleared;
}

fl_status fl_cache_reserve_maintenance(fl_cache *c, uint64_t fill) {
  if (FL_MUTANT_ON(27)) return FL_OK;
  rounds_launched(c);
  pthread_mutex_lock(&c->lock);
  fl_status st = FL_OK;
  uint64_t slots = 0;
  int classes = 0;
  for (uint32_t p = 0; p < c->fixed.n_parts && st == FL_OK; p++) {
    st = fl_round_reserve(c, p, fill);
    if (c->parts[p].slots > slots) slots = c->parts[p].slots;
    classes |= c->parts[p].pool.n_classes > 1;
  }
  /* The host's evictions (a starved class among several, or trimming
   * unified entries, for which the index has room) take an age histogram,
   * then every evicted slot's location (maint.c). */
  if (st == FL_OK && (classes || c->fixed.loc_bits != 32)) {
    void *dev, *host;
    st = fl_cuda_state_maint_buffers(c, 16 + slots * 8, FL_AGE_BUCKETS * 8, &dev, &host);
  }
  pthread_mutex_unlock(&c->lock);
  return st;
}

fl_status fl_cache_set_unified_entries(fl_cache *c, uint64_t n) {
  if (!c) return fl_fail(NULL, FL_ERR_INVALID_ARGUMENT, "fl_cache_set_unified_entries: cache is NULL");
  if (n > 0 && c->fixed.loc_bits == 32)
    return fl_fail(c, FL_ERR_UNSUPPORTED,
                   "fl_cache_set_unified_entries(%llu): the cache was created with "
                   "unified_entries 0, so its index has 32-bit locations, which cannot point "
                   "into the store; create it with unified_entries > 0",
                   (unsigned long long)n);
  rounds_launched(c);
  pthread_mutex_lock(&c->lock);
  __atomic_store_n(&c->fixed.cfg.unified_entries, n, __ATOMIC_RELAXED); /* read outside the lock */
  /* Lowering the limit drops the coldest pointers now; raising it lets misses
   * leave pointers (and makes the vectors' share of the pool smaller at the
   * next admission). */
  fl_status st = fl_round_settle_all(c, 1, 1), trimmed = FL_OK;
  for (uint32_t p = 0; p < c->fixed.n_parts && trimmed == FL_OK; p++)
    trimmed = fl_cache_trim_unified(c, p);
  pthread_mutex_unlock(&c->lock);
  return st != FL_OK ? st : trimmed;
}

static uint64_t stat_of(const fl_cache *c, fl_stat s) {
  return atomic_load_explicit(&((fl_cache *)c)->stat[s], memory_order_relaxed);
}

fl_status fl_cache_stats_get(const fl_cache *c, fl_cache_stats *out, fl_cache_table_stats *per_table,
                             uint32_t n_tables) {
  if (!c || !out) return fl_fail(c, FL_ERR_INVALID_ARGUMENT, "fl_cache_stats_get: cache and out must be non-NULL");
  if (per_table && n_tables > c->fixed.n_tables)
    return fl_fail(c, FL_ERR_INVALID_ARGUMENT, "fl_cache_stats_get: n_tables %u > the cache's %u",
                   n_tables, c->fixed.n_tables);
  fl_cache *m = (fl_cache *)c;
  memset(out, 0, sizeof *out);
  for (uint32_t t = 0; t < c->fixed.n_tables; t++) {
    fl_table_counters *k = &m->counters[t];
    fl_cache_table_stats s = {atomic_load(&k->lookups), atomic_load(&k->hits),
                              atomic_load(&k->dram_hits), atomic_load(&k->misses)};
    out->lookups += s.lookups;
    out->hits += s.hits;
    out->dram_hits += s.dram_hits;
    out->misses += s.misses;
    if (per_table && t < n_tables) per_table[t] = s;
  }
  out->queries = stat_of(m, FL_STAT_QUERIES);
  out->evictions = stat_of(m, FL_STAT_EVICTIONS);
  out->invalidations = stat_of(m, FL_STAT_INVALIDATIONS);
  out->ns_index = (double)stat_of(m, FL_STAT_NS_INDEX);
  out->ns_hit_copy = (double)stat_of(m, FL_STAT_NS_HIT_COPY);
  out->ns_miss_fetch = (double)stat_of(m, FL_STAT_NS_MISS_FETCH);
  out->ns_admission = (double)stat_of(m, FL_STAT_NS_ADMISSION);
  out->unique_misses = stat_of(m, FL_STAT_UNIQUE_MISSES);
  out->ns_store_gather = (double)stat_of(m, FL_STAT_NS_STORE_GATHER);
  out->ns_admission_wait = (double)stat_of(m, FL_STAT_NS_ADMISSION_WAIT);
  out->ns_miss_host_cpu = (double)stat_of(m, FL_STAT_NS_MISS_CPU);
  out->gpu_ns_index = (double)stat_of(m, FL_STAT_GPU_NS_INDEX);
  out->gpu_ns_hit_copy = (double)stat_of(m, FL_STAT_GPU_NS_HIT_COPY);
  out->zero_copy_rows = stat_of(m, FL_STAT_ZERO_COPY_ROWS);
  out->zero_copy_stale = stat_of(m, FL_STAT_ZERO_COPY_STALE);
  out->zero_copy_limit = c->fixed.cuda ? c->fixed.cuda->zc_limit : 0;
  out->rounds_shed = stat_of(m, FL_STAT_ROUNDS_SHED);
  out->rounds_starved = stat_of(m, FL_STAT_ROUNDS_STARVED);
  out->slabs_recycled = stat_of(m, FL_STAT_SLABS_RECYCLED);
  out->shift_opens = stat_of(m, FL_STAT_SHIFT_OPENS);
  out->prefetches = stat_of(m, FL_STAT_PREFETCHES);
  out->prefetch_lookups = stat_of(m, FL_STAT_PREFETCH_LOOKUPS);
  out->prefetch_misses = stat_of(m, FL_STAT_PREFETCH_MISSES);
  out->allocations = c->fixed.cuda ? __atomic_load_n(&c->fixed.cuda->allocations, __ATOMIC_RELAXED) : 0;
  pthread_mutex_lock(&m->lock);
  /* Admission rounds that are over count; none is waited for. */
  fl_round_settle_all(m, 0, 0);
  for (uint32_t p = 0; p < c->fixed.n_parts; p++) {
    out->pool_bytes_used += c->parts[p].pool.used_bytes - c->parts[p].reserved_bytes;
    out->pool_bytes += c->parts[p].pool.bytes;
    out->index_bytes += c->parts[p].index_bytes;
    out->index_entries += c->parts[p].entries + c->parts[p].dram_entries;
    out->unified_entries += c->parts[p].dram_entries;
    out->index_slots += c->parts[p].slots;
  }
  out->admissions = stat_of(m, FL_STAT_ADMISSIONS);
  pthread_mutex_unlock(&m->lock);
  return FL_OK;
}

fl_status fl_cache_sync(fl_cache *c) {
  if (!c) return fl_fail(NULL, FL_ERR_INVALID_ARGUMENT, "fl_cache_sync: cache is NULL");
  rounds_launched(c);
  pthread_mutex_lock(&c->lock);
  fl_status st = fl_round_settle_all(c, 1, 1);
  pthread_mutex_unlock(&c->lock);
  return st;
}

fl_status fl_cache_index_health(fl_cache *c, fl_index_health *out) {
  if (!c || !out)
    return fl_fail(c, FL_ERR_INVALID_ARGUMENT, "fl_cache_index_health: cache and out must be non-NULL");
  memset(out, 0, sizeof *out);
  rounds_launched(c);
  pthread_mutex_lock(&c->lock);
  fl_status st = fl_round_settle_all(c, 1, 1);
  for (uint32_t p = 0; st == FL_OK && p < c->fixed.n_parts; p++)
    st = fl_maint_census(c, &c->parts[p], out);
  pthread_mutex_unlock(&c->lock);
  if (out->slots) out->miss_probe /= (double)out->slots;
  return st;
}

void fl_cache_stats_reset(fl_cache *c) {
  if (!c) return;
  for (uint32_t t = 0; t < c->fixed.n_tables; t++) {
    atomic_store(&c->counters[t].lookups, 0);
    atomic_store(&c->counters[t].hits, 0);
    atomic_store(&c->counters[t].dram_hits, 0);
    atomic_store(&c->counters[t].misses, 0);
  }
  for (int i = 0; i < FL_STAT_COUNT; i++) atomic_store(&c->stat[i], 0);
  if (c->fixed.cuda) __atomic_store_n(&c->fixed.cuda->allocations, 0, __ATOMIC_RELAXED);
}
