/* store_cluster.c: stores over a Redis Cluster (remote.h, docs/TIERS.md):
 * the cluster tier's operations table, create/open against the model's
 * metadata, the local budget, the tier's statistics and its close. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cluster/meta.h"
#include "common/error.h"
#include "common/hash.h"
#include "cluster_store/remote.h"

/* tier.h's close; a store whose tier was never set has nothing to close. */
static void remote_close(fl_store *s) {
  fl_remote *rm = fl_store_tier(s);
  if (!rm) return;
  fl_inval_stop(rm->inval);
  fl_cluster_close(rm->cluster);
  fl_keyspace_fini(&rm->ks);
  pthread_mutex_destroy(&rm->fill_lock);
  free(rm);
}

static fl_status remote_whole(fl_store *err, const char *call) {
  return fl_fail(err, FL_ERR_UNSUPPORTED,
                 "%s: the store is over a redis cluster: its local tier holds only part of the "
                 "model (save a plain store loaded with fl_store_load instead)", call);
}

/* The cluster holds every row: nothing to reserve in the tables. */
static int remote_reserve(fl_store *s, uint32_t table, uint64_t rows) {
  (void)s, (void)table, (void)rows;
  return 0;
}

static void remote_tier_stats(const fl_store *s, fl_store_tier_stats *out) {
  fl_remote *rm = fl_store_tier(s);
  out->local_budget_bytes = atomic_load(&rm->budget);
  for (uint32_t i = 0; i < fl_store_num_tables(s); i++)
    out->model_bytes += fl_store_desc(s, i)->corpus_size * fl_store_row_bytes(s, i);
  out->cluster_commands = fl_cluster_commands(rm->cluster);
  out->invalidations = fl_inval_applied(rm->inval);
  out->resyncs = fl_inval_resyncs(rm->inval);
}

static fl_status remote_set_budget(fl_store *s, uint64_t bytes) {
  fl_remote *rm = fl_store_tier(s);
  atomic_store(&rm->budget, bytes);
  return FL_OK;
}

static const fl_store_ops remote_ops = {
    .write = fl_remote_write,
    .reserve = remote_reserve,
    .put = fl_remote_put,
    .changed = fl_remote_changed_all,
    .load = fl_remote_put,
    .loaded = fl_remote_changed_all,
    .gather = fl_remote_gather,
    .whole = remote_whole,
    .tier_stats = remote_tier_stats,
    .set_budget = remote_set_budget,
    .close = remote_close,
};

/* The first difference between the asked tables and the model's, or FL_OK. */
static fl_status same_tables(const fl_cluster_config *cfg, const fl_table_desc *a, uint32_t n,
                             const fl_model_meta *m) {
  if (n != m->n_tables)
    return fl_fail(NULL, FL_ERR_INVALID_ARGUMENT,
                   "cluster model '%s' has %u tables, asked for %u", cfg->ns, m->n_tables, n);
  for (uint32_t i = 0; i < n; i++) {
    const fl_table_desc *b = &m->tables[i];
    if (strcmp(a[i].name ? a[i].name : "", b->name) || a[i].dim != b->dim || a[i].dtype != b->dtype ||
        a[i].id_kind != b->id_kind || a[i].corpus_size != b->corpus_size)
      return fl_fail(NULL, FL_ERR_INVALID_ARGUMENT,
                     "cluster model '%s' table %u is '%s' dim %u %s %s corpus %llu; asked for "
                     "'%s' dim %u %s %s corpus %llu", cfg->ns, i, b->name, b->dim,
                     b->dtype == FL_FP16 ? "fp16" : "fp32",
                     b->id_kind == FL_IDS_DENSE ? "dense" : "hashed",
                     (unsigned long long)b->corpus_size, a[i].name ? a[i].name : "", a[i].dim,
                     a[i].dtype == FL_FP16 ? "fp16" : "fp32",
                     a[i].id_kind == FL_IDS_DENSE ? "dense" : "hashed",
                     (unsigned long long)a[i].corpus_size);
  }
  return FL_OK;
}

/* Opens model cfg->ns (creating it from `tables` when given) and builds the
 * store over it. */
static fl_status open_model(const fl_table_desc *tables, uint32_t n, uint32_t threads,
                            const fl_cluster_config *cfg, fl_store **out) {
  if (!out) return fl_fail(NULL, FL_ERR_INVALID_ARGUMENT, "cluster store: out is NULL");
  *out = NULL;
  if (!cfg) return fl_fail(NULL, FL_ERR_INVALID_ARGUMENT, "cluster store: cfg is NULL");
  if (!tables && n) return fl_fail(NULL, FL_ERR_INVALID_ARGUMENT, "cluster store: tables is NULL");
  fl_cluster *c;
  fl_status st = fl_cluster_open(cfg, NULL, &c);
  if (st != FL_OK) return st;
  const fl_cluster_config *cc = fl_cluster_cfg(c);
  fl_model_meta m = {0};
  st = tables ? fl_meta_create(c, NULL, cc->ns, cc->buckets, tables, n, &m)
              : fl_meta_read(c, NULL, cc->ns, &m);
  if (st == FL_OK && tables) st = same_tables(cc, tables, n, &m);
  fl_store *s = NULL;
  if (st == FL_OK) st = fl_store_new(m.tables, m.n_tables, threads, 1, &remote_ops, &s);
  fl_remote *rm = st == FL_OK ? calloc(1, sizeof *rm) : NULL;
  if (st == FL_OK && (!rm || fl_keyspace_init(&rm->ks, cc->ns, m.buckets) != 0)) {
    free(rm);
    st = fl_fail(NULL, FL_ERR_OUT_OF_MEMORY, "no memory for the cluster tier");
  }
  fl_meta_free(&m);
  if (st != FL_OK) {
    fl_store_destroy(s);
    fl_cluster_close(c);
    return st;
  }
  rm->cluster = c;
  pthread_mutex_init(&rm->fill_lock, NULL);
  atomic_init(&rm->budget, cfg->local_budget_bytes);
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  rm->self = fl_hash2(((uint64_t)getpid() << 32) ^ (uint64_t)(uintptr_t)s,
                      (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec);
  fl_store_set_tier(s, rm);
  st = fl_inval_start(c, NULL, rm->self, fl_remote_apply, s, &rm->inval);
  if (st != FL_OK) {
    fl_store_destroy(s);
    return st;
  }
  *out = s;
  return FL_OK;
}

fl_status fl_store_create_cluster(const fl_table_desc *tables, uint32_t n_tables,
                                  uint32_t threads, const fl_cluster_config *cfg,
                                  fl_store **out) {
  if (!tables) return fl_fail(NULL, FL_ERR_INVALID_ARGUMENT, "fl_store_create_cluster: tables is NULL");
  return open_model(tables, n_tables, threads, cfg, out);
}

fl_status fl_store_open_cluster(const fl_cluster_config *cfg, uint32_t threads, fl_store **out) {
  return open_model(NULL, 0, threads, cfg, out);
}
