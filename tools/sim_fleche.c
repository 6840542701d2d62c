/* sim_fleche.c: the policy simulator's "fleche" row: the library itself, a
 * flat cache on the host backend replaying the workload with fl_query per
 * batch (replay's runner), its hits taken from fl_cache_stats and its
 * per-batch hit rates from the runner's. Its budget is the least whose slab
 * pool holds the simulated vectors: the cache's own split of a budget into
 * index and pool decides, found by creating caches, and its watermarks then
 * keep it under that as they would anywhere. */
#include <stdlib.h>
#include <string.h>

#include "common/clock.h"
#include "tools/policy_sim.h"

/* A vector's bytes in the pool (rounded to 16 as the slab classes are),
 * averaged over the tables by rows when their sizes differ. */
static double slot_bytes(fl_store *store) {
  double rows = 0, bytes = 0;
  for (uint32_t t = 0; t < fl_store_num_tables(store); t++) {
    fl_table_desc d;
    if (fl_store_table(store, t, &d) != FL_OK) continue;
    uint64_t vec = (uint64_t)d.dim * (d.dtype == FL_FP16 ? 2 : 4);
    rows += (double)d.corpus_size;
    bytes += (double)d.corpus_size * (double)((vec + 15) / 16 * 16);
  }
  return rows > 0 ? bytes / rows : 16;
}

fl_status fl_sim_vectors_of_budget(fl_store *store, const fl_replay_opts *o, uint64_t budget,
                                   uint64_t *vectors) {
  fl_config cfg;
  fl_config_default(&cfg);
  fl_replay_cache_config(o, &cfg);
  cfg.backend = FL_BACKEND_HOST;
  cfg.budget_bytes = budget;
  cfg.unified_entries = 0;
  cfg.host_threads = 1;
  fl_cache *c;
  fl_status s = fl_cache_create(store, &cfg, &c);
  *vectors = 0;
  if (s != FL_OK) return s;
  fl_cache_stats st;
  s = fl_cache_stats_get(c, &st, NULL, 0);
  if (s == FL_OK) *vectors = (uint64_t)((double)st.pool_bytes / slot_bytes(store));
  fl_cache_destroy(c);
  return s;
}

/* Vectors of a budget for the search: a budget too small for any cache holds 0. */
static fl_status holds(fl_store *store, const fl_replay_opts *o, uint64_t budget,
                       uint64_t *vectors) {
  fl_status s = fl_sim_vectors_of_budget(store, o, budget, vectors);
  return s == FL_ERR_INVALID_ARGUMENT ? FL_OK : s;
}

fl_status fl_sim_budget_of_vectors(fl_store *store, const fl_replay_opts *o, uint64_t vectors,
                                   uint64_t *budget) {
  /* The pool is part of the budget: below vectors x slot it cannot hold them. */
  uint64_t lo = (uint64_t)((double)vectors * slot_bytes(store)), hi = 2 * lo + (1u << 20), got;
  fl_status s;
  while ((s = holds(store, o, hi, &got)) == FL_OK && got < vectors) lo = hi, hi *= 2;
  while (s == FL_OK && hi - lo > 256) {
    uint64_t mid = lo + (hi - lo) / 2;
    s = holds(store, o, mid, &got);
    if (got >= vectors) hi = mid;
    else lo = mid;
  }
  *budget = hi;
  return s;
}

fl_status fl_sim_fleche(const fl_workload *w, const fl_replay_opts *o, uint64_t vectors,
                        fl_sim_result *r) {
  memset(r, 0, sizeof *r);
  r->name = "fleche";
  double t0 = fl_now_s();
  fl_replay_opts lib = *o;
  lib.backend = FL_BACKEND_HOST;
  lib.layout = FL_LAYOUT_FLAT;
  fl_status s = fl_sim_budget_of_vectors(w->store, o, vectors, &lib.budget_bytes);
  if (s == FL_OK) s = fl_sim_vectors_of_budget(w->store, o, lib.budget_bytes, &r->capacity);
  r->budget_bytes = lib.budget_bytes;
  if (s != FL_OK) {
    fprintf(stderr, "error: sizing fleche's cache for %llu vectors: %s: %s\n",
            (unsigned long long)vectors, fl_status_name(s), fl_cache_last_error(NULL));
    return s;
  }
  fl_run run;
  s = fl_run_replay(w, &lib, FL_LAYOUT_FLAT, &run);
  r->lookups = run.lookups;
  r->hits = run.stats.hits;
  r->admissions = run.stats.admissions;
  r->evictions = run.stats.evictions;
  r->batch_pct = malloc((run.batches ? run.batches : 1) * sizeof *r->batch_pct);
  if (!r->batch_pct && s == FL_OK) s = FL_ERR_OUT_OF_MEMORY;
  for (; r->batch_pct && r->batches < run.batches; r->batches++)
    r->batch_pct[r->batches] = 100 * run.hit_rate[r->batches];
  fl_run_free(&run);
  r->seconds = fl_now_s() - t0;
  return s;
}
