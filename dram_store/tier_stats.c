/* tier_stats.c: where a store's gathers were served (fl_store_tier_stats):
 * the counters every store keeps (tier.h's fl_tier_counters), the bytes its
 * tables hold, and the tier's own fields, asked of the tier. */
#include <string.h>

#include "dram_store/store_impl.h"

fl_tier_counters *fl_store_counters(fl_store *s) { return &s->tier; }

uint64_t fl_store_local_bytes(const fl_store *s) {
  uint64_t bytes = 0;
  for (uint32_t i = 0; i < s->n_tables; i++)
    bytes += atomic_load_explicit(&s->tables[i].rows, memory_order_relaxed) * s->tables[i].row_bytes;
  return bytes;
}

fl_status fl_store_tier_stats_get(const fl_store *s, fl_store_tier_stats *out) {
  if (!s || !out) return fl_fail(s, FL_ERR_INVALID_ARGUMENT, "fl_store_tier_stats_get: NULL argument");
  const fl_tier_counters *k = &s->tier;
  memset(out, 0, sizeof *out);
  out->lookups = atomic_load(&k->lookups);
  out->local_hits = atomic_load(&k->local_hits);
  out->cluster_rows = atomic_load(&k->cluster_rows);
  out->cluster_missing = atomic_load(&k->cluster_missing);
  out->cluster_fetches = atomic_load(&k->cluster_fetches);
  out->evictions = atomic_load(&k->evictions);
  out->ns_local = (double)atomic_load(&k->ns_local);
  out->ns_cluster = (double)atomic_load(&k->ns_cluster);
  out->local_bytes = fl_store_local_bytes(s);
  s->ops->tier_stats(s, out);
  out->cluster_commands -= s->commands0;
  out->invalidations -= s->invalidations0;
  out->resyncs -= s->resyncs0;
  return FL_OK;
}

void fl_store_tier_stats_reset(fl_store *s) {
  if (!s) return;
  fl_tier_counters *k = &s->tier;
  atomic_store(&k->lookups, 0), atomic_store(&k->local_hits, 0);
  atomic_store(&k->cluster_rows, 0), atomic_store(&k->cluster_missing, 0);
  atomic_store(&k->cluster_fetches, 0), atomic_store(&k->evictions, 0);
  atomic_store(&k->ns_local, 0), atomic_store(&k->ns_cluster, 0);
  fl_store_tier_stats now;
  memset(&now, 0, sizeof now);
  s->ops->tier_stats(s, &now);
  s->commands0 = now.cluster_commands;
  s->invalidations0 = now.invalidations;
  s->resyncs0 = now.resyncs;
}
