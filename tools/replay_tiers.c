/* replay_tiers.c: the per-tier report of replay and tune: of all lookups,
 * the share the cache served (GPU or host cache, with its unified-index
 * pointers), then of what reached the store, the local DRAM tier's share
 * and the cluster's, with the time each took. */
#include "tools/replay.h"

static double pct(double a, double b) { return b > 0 ? 100 * a / b : 0; }

void fl_tiers_print(FILE *f, const fl_cache_stats *cache, const fl_store_tier_stats *t) {
  fprintf(f, "tiers:");
  if (cache)
    fprintf(f, " cache %.2f%% of %llu lookups;", pct((double)(cache->hits + cache->dram_hits),
                                                      (double)cache->lookups),
            (unsigned long long)cache->lookups);
  uint64_t cluster = t->cluster_rows;
  fprintf(f, " store rows %llu: local DRAM %.2f%% (%.1f ns a row), cluster %.2f%%",
          (unsigned long long)t->lookups, pct((double)t->local_hits, (double)t->lookups),
          t->lookups ? t->ns_local / (double)t->lookups : 0, pct((double)cluster, (double)t->lookups));
  if (t->cluster_fetches)
    fprintf(f, " (%llu fetches, %.3f ms each, %.2f us a row, %llu commands, %llu absent)",
            (unsigned long long)t->cluster_fetches, t->ns_cluster / 1e6 / (double)t->cluster_fetches,
            cluster ? t->ns_cluster / 1e3 / (double)cluster : 0,
            (unsigned long long)t->cluster_commands, (unsigned long long)t->cluster_missing);
  fprintf(f, "\n");
  if (t->local_budget_bytes != t->local_bytes || t->cluster_fetches)
    fprintf(f, "local tier: %.1f of %.1f MB (model %.1f MB), %llu evictions, %llu invalidations "
            "from other processes, %llu resyncs\n",
            (double)t->local_bytes / 1e6, (double)t->local_budget_bytes / 1e6,
            (double)t->model_bytes / 1e6, (unsigned long long)t->evictions,
            (unsigned long long)t->invalidations, (unsigned long long)t->resyncs);
}
