/* bench_cluster.c: rows/s that a cluster store fetches from a Redis Cluster
 * (no local tier: every row of every gather comes from the cluster), and
 * the keys per MGET that took, for tools/bench_cluster.sh to run
 * redis-benchmark with the same MGET size and value size. `threads` callers
 * gather at once, as an inference server's concurrent queries would (and as
 * redis-benchmark's clients do). Prints one JSON object on stdout.
 *   bench_cluster --store redis://HOST:PORT [--rows N] [--dim D] [--batch B]
 *                 [--threads T] [--seconds S] */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/clock.h"
#include "include/fleche.h"

static int fail(fl_store *s, fl_status st, const char *what) {
  fprintf(stderr, "error: %s: %s: %s\n", what, fl_status_name(st), fl_store_last_error(s));
  return 1;
}

/* One caller: random batches until the time is up. */
typedef struct caller {
  fl_store *s;
  uint64_t rows, batch, seed, fetched, bad;
  unsigned dim;
  double until;
  fl_status st;
} caller;

static void *gather_loop(void *arg) {
  caller *c = arg;
  uint64_t *ids = malloc(c->batch * sizeof *ids);
  float *out = malloc(c->batch * c->dim * sizeof *out);
  uint64_t x = c->seed;
  c->st = ids && out ? FL_OK : FL_ERR_OUT_OF_MEMORY;
  while (c->st == FL_OK && fl_now_s() < c->until) {
    for (uint64_t i = 0; i < c->batch; i++) {
      x ^= x << 13, x ^= x >> 7, x ^= x << 17;
      ids[i] = x % c->rows;
    }
    fl_table_query q = {0, ids, c->batch, out};
    c->st = fl_store_gather(c->s, &q, 1, FL_MISSING_ERROR, NULL);
    for (uint64_t i = 0; c->st == FL_OK && i < c->batch; i += 997)
      c->bad += out[i * c->dim] != fl_synthetic_value(7, 0, ids[i], 0);
    if (c->st == FL_OK) c->fetched += c->batch;
  }
  free(ids);
  free(out);
  return NULL;
}

int main(int argc, char **argv) {
  const char *store = NULL;
  unsigned long long rows = 1000000, batch = 16384;
  unsigned dim = 32, threads = 4;
  double seconds = 5;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!strcmp(argv[i], "--store")) store = argv[i + 1];
    else if (!strcmp(argv[i], "--rows")) rows = strtoull(argv[i + 1], NULL, 10);
    else if (!strcmp(argv[i], "--batch")) batch = strtoull(argv[i + 1], NULL, 10);
    else if (!strcmp(argv[i], "--dim")) dim = (unsigned)strtoul(argv[i + 1], NULL, 10);
    else if (!strcmp(argv[i], "--threads")) threads = (unsigned)strtoul(argv[i + 1], NULL, 10);
    else if (!strcmp(argv[i], "--seconds")) seconds = strtod(argv[i + 1], NULL);
    else return fprintf(stderr, "error: unknown option %s\n", argv[i]), 2;
  }
  if (!store || !rows || !batch || !dim || !threads || threads > 64) {
    fprintf(stderr, "usage: bench_cluster --store redis://HOST:PORT [--rows N] [--dim D] "
                    "[--batch B] [--threads T] [--seconds S]\n");
    return 2;
  }
  fl_table_desc t = {"bench", rows, dim, FL_FP32, FL_IDS_DENSE};
  fl_cluster_config cfg;
  fl_cluster_config_default(&cfg);
  cfg.seed = store;
  cfg.ns = "bench";
  fl_store *s = NULL;
  fl_status st = fl_store_create_cluster(&t, 1, 0, &cfg, &s);
  if (st != FL_OK) return fail(NULL, st, "creating the cluster store");
  double t0 = fl_now_s();
  st = fl_store_fill_synthetic(s, 0, 7);
  double load_s = fl_now_s() - t0;
  if (st != FL_OK) return fail(s, st, "loading");
  fl_store_tier_stats_reset(s);
  caller c[64];
  pthread_t th[64];
  t0 = fl_now_s();
  for (unsigned i = 0; i < threads; i++) {
    c[i] = (caller){s, rows, batch, 88172645463325252ull + i, 0, 0, dim, t0 + seconds, FL_OK};
    pthread_create(&th[i], NULL, gather_loop, &c[i]);
  }
  uint64_t fetched = 0, bad = 0;
  for (unsigned i = 0; i < threads; i++) {
    pthread_join(th[i], NULL);
    if (c[i].st != FL_OK) st = c[i].st;
    fetched += c[i].fetched, bad += c[i].bad;
  }
  double elapsed = fl_now_s() - t0;
  if (st != FL_OK) return fail(s, st, "gather");
  fl_store_tier_stats ts;
  fl_store_tier_stats_get(s, &ts);
  double keys_per_cmd = ts.cluster_commands ? (double)ts.cluster_rows / (double)ts.cluster_commands : 0;
  printf("{\"rows\": %llu, \"dim\": %u, \"value_bytes\": %u, \"batch\": %llu, \"threads\": %u, "
         "\"load_rows_per_s\": %.0f, \"fetch_rows_per_s\": %.0f, \"keys_per_mget\": %.2f, "
         "\"fetch_ms_per_batch\": %.3f, \"wrong_rows\": %llu}\n",
         rows, dim, dim * 4, batch, threads, (double)rows / load_s, (double)fetched / elapsed,
         keys_per_cmd, 1e3 * elapsed * threads / ((double)fetched / (double)batch),
         (unsigned long long)bad);
  fl_store_destroy(s);
  return bad ? 1 : 0;
}
